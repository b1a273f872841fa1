//! The gc attribution's cross-check: the safety-check share a profile attributes, set
//! beside what the -B build (A/B) saves and what moving the code (A/A) changes, with a
//! verdict on whether they agree, and the model that shows it.

use super::attrib::{Class, Counts, Tally};
use super::bench::{Build, ProfileRun};
use super::tax_options::Method;
use super::LAB;
use costlab_core::measure::stats::median;
use costlab_history::report::{Model, ModelPoint, Outcome};

/// One profiled process: its run and its samples.
pub(super) struct Profiled {
    pub(super) build: Build,
    pub(super) run: ProfileRun,
    pub(super) tally: Tally,
}

/// The attribution's cross-check for one workload: what the classifier charges to safety
/// beside what building without bounds checks saves, with the A/A control's noise.
///
/// Both sides are taken of user-mode CPU, where the checks run, and the A/B difference is
/// package main's time per operation: the server's kernel time per request (loopback TCP,
/// wakeups) and the scheduler's spinning move from process to process by more than the
/// checks cost, and no build changes them. The -B build removes package main's bounds checks
/// only (the runtime's are compiled once for both builds, and nil, divide and shift checks
/// stay), so what attribution predicts it saves is safety's share in the plain build less
/// its share in the -B build, both classified by their own disassembly.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossCheck {
    pub workload: String,
    /// Safety's pooled share of user-mode CPU (%) in the builds with checks, and in the
    /// -B build (what -B leaves).
    pub checked: f64,
    pub unchecked: f64,
    /// Per round, % of the plain build's user-mode CPU per operation that the -B build
    /// saves in package main (A/B) and that the layout-shifted twin saves there (A/A: the
    /// same code, moved).
    pub ab: Vec<f64>,
    pub aa: Vec<f64>,
}

/// What a verdict on a cross-check says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// The attributed saving lies within the A/B difference's interval.
    Agrees,
    /// Neither the attribution nor the A/B difference clears the A/A noise.
    BothBelowNoise,
    /// They disagree by more than the noise.
    Gap,
    /// No A/A control and a single round: no interval.
    Unjudged,
}

impl CrossCheck {
    /// From one workload's processes (in run order, `counts` their classes): rounds are
    /// taken as they ran, one process of each build per round.
    pub(super) fn of(workload: &str, procs: &[Profiled], counts: &[Counts]) -> CrossCheck {
        let safety = |want: &dyn Fn(Build) -> bool| {
            let (k, n) = procs
                .iter()
                .zip(counts)
                .filter(|(p, _)| want(p.build))
                .fold((0u64, 0u64), |(k, n), (_, c)| {
                    let user = c.iter().sum::<u64>() - c[Class::Kernel.index()];
                    (k + c[Class::Safety.index()], n + user)
                });
            if n > 0 {
                100.0 * k as f64 / n as f64
            } else {
                0.0
            }
        };
        // Per process: package main's samples per operation, and all user-mode samples per
        // operation. -B compiles package main only, so the difference in main's time per
        // operation is what removing its checks saved, miss included; the runtime, the
        // scheduler (whose spinning for work moves with the machine's load) and the kernel
        // are left out of both sides. A sample is a fixed slice of CPU time (perf's
        // cpu-clock period, pprof's timer), so samples per operation are CPU per operation.
        let per_op = |b: Build, round: usize| {
            let p = procs.iter().filter(|p| p.build == b).nth(round)?;
            let ops = p.run.ops as f64;
            (ops > 0.0).then(|| {
                let user = p.tally.total() - p.tally.kernel_samples();
                (p.tally.samples_in(MAIN) as f64 / ops, user as f64 / ops)
            })
        };
        let rounds = procs.iter().filter(|p| p.build == Build::Plain).count();
        let (mut ab, mut aa) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let Some((main, user)) = per_op(Build::Plain, r).filter(|&(_, u)| u > 0.0) else {
                continue;
            };
            if let Some((b, _)) = per_op(Build::NoBounds, r) {
                ab.push(100.0 * (main - b) / user);
            }
            if let Some((s, _)) = per_op(Build::Shifted, r) {
                aa.push(100.0 * (main - s) / user);
            }
        }
        CrossCheck {
            workload: workload.to_string(),
            checked: safety(&|b| b != Build::NoBounds),
            unchecked: safety(&|b| b == Build::NoBounds),
            ab,
            aa,
        }
    }

    /// What the attribution predicts -B saves: the safety share it removes.
    pub fn predicted(&self) -> f64 {
        self.checked - self.unchecked
    }

    /// The A/B difference: the median over rounds.
    pub fn measured(&self) -> Option<f64> {
        (!self.ab.is_empty()).then(|| median(&self.ab))
    }

    /// How far two processes differ with nothing removed: the larger of the A/A control's
    /// largest difference and half the A/B rounds' range. None with neither.
    pub fn noise(&self) -> Option<f64> {
        let aa = self
            .aa
            .iter()
            .map(|d| d.abs())
            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
        let spread = (self.ab.len() > 1).then(|| {
            let lo = self.ab.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = self.ab.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo) / 2.0
        });
        match (aa, spread) {
            (Some(a), Some(s)) => Some(a.max(s)),
            (a, s) => a.or(s),
        }
    }

    /// The A/B difference's interval: its median ± the noise.
    pub fn interval(&self) -> Option<(f64, f64)> {
        let (m, n) = (self.measured()?, self.noise()?);
        Some((m - n, m + n))
    }

    pub fn agreement(&self) -> Agreement {
        let (Some(m), Some((lo, hi)), Some(n)) = (self.measured(), self.interval(), self.noise())
        else {
            return Agreement::Unjudged;
        };
        let p = self.predicted();
        if (lo..=hi).contains(&p) {
            Agreement::Agrees
        } else if m.abs() <= n && p.abs() <= n {
            Agreement::BothBelowNoise
        } else {
            Agreement::Gap
        }
    }

    /// One line: the attributed share beside the A/B difference, and the verdict.
    pub fn verdict(&self) -> String {
        let p = self.predicted();
        let head = format!(
            "{}: attribution charges the checks -B removes {:.2}% of user-mode CPU (safety {:.2}% with checks, {:.2}% left in the -B build)",
            self.workload, p, self.checked, self.unchecked
        );
        let (Some(m), Some((lo, hi)), Some(n)) = (self.measured(), self.interval(), self.noise())
        else {
            return format!(
                "{head}; the -B build's difference is not judged: {} A/B round(s) and no A/A control",
                self.ab.len()
            );
        };
        let ab = format!(
            "the -B build saves {m:.2}% of the user-mode CPU per operation in package main (median of {} rounds), interval {lo:.2} to {hi:.2} (± {n:.2}: the A/A control's largest difference and the rounds' half-range)",
            self.ab.len()
        );
        match self.agreement() {
            Agreement::Agrees => format!("{head}; {ab}: agrees"),
            Agreement::BothBelowNoise => format!(
                "{head}; {ab}: agrees (both within ± {n:.2}, below what the A/A control resolves)"
            ),
            Agreement::Gap => {
                let (gap, side) = if p > hi {
                    (p - hi, "above")
                } else {
                    (lo - p, "below")
                };
                format!(
                    "{head}; {ab}: disagrees: the attribution is {gap:.2} points {side} the A/B interval"
                )
            }
            Agreement::Unjudged => format!("{head}; {ab}"),
        }
    }

    /// The verdict in a few words, for the sheet's headline.
    pub fn short(&self) -> String {
        let p = self.predicted();
        match (self.agreement(), self.interval()) {
            (Agreement::Agrees, _) => "agrees".to_string(),
            (Agreement::BothBelowNoise, _) => "agrees (both below the A/A noise)".to_string(),
            (Agreement::Gap, Some((_, hi))) if p > hi => {
                format!("disagrees: attribution {:.2} points above it", p - hi)
            }
            (Agreement::Gap, Some((lo, _))) => {
                format!("disagrees: attribution {:.2} points below it", lo - p)
            }
            _ => "not judged (one round, no A/A control)".to_string(),
        }
    }

    pub(super) fn note(&self) -> String {
        format!("attribution cross-check {}", self.verdict())
    }

    /// The A/B and A/A rows (method ab and aa, this workload, kind safety).
    pub(super) fn push_rows(&self, o: &mut Outcome) {
        for (m, v) in [(Method::Ab, &self.ab), (Method::Aa, &self.aa)] {
            o.push(
                LAB,
                costlab_core::case! {"method" => m.name(), "workload" => self.workload.as_str(), "kind" => "safety"},
                "overhead",
                "%",
                v.clone(),
            );
        }
    }
}

/// The cross-checks as a model: predicted = the safety share attribution says -B removes,
/// measured = what the -B build saved; params hold each workload's verdict in a few words.
pub fn cross_check_model(checks: &[CrossCheck]) -> Model {
    Model {
        lab: LAB.to_string(),
        name: CROSS_CHECK_MODEL.to_string(),
        params: checks
            .iter()
            .map(|c| (c.workload.clone(), serde_json::json!(c.short())))
            .collect(),
        points: checks
            .iter()
            .filter_map(|c| {
                Some(ModelPoint {
                    case: costlab_core::case! {"method" => "attribution", "workload" => c.workload.as_str(), "kind" => "safety"},
                    predicted: c.predicted(),
                    measured: c.measured()?,
                    unit: "%".to_string(),
                })
            })
            .collect(),
        verdict: checks.iter().map(CrossCheck::verdict).collect(),
    }
}

/// The package -gcflags=-B compiles without bounds checks (symbols' prefix).
const MAIN: &str = "main.";

/// The cross-check model's name.
pub const CROSS_CHECK_MODEL: &str =
    "safety checks: attribution beside the -B build (A/B, A/A control)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{attrib, bench};

    fn cc(checked: f64, unchecked: f64, ab: &[f64], aa: &[f64]) -> CrossCheck {
        CrossCheck {
            workload: "server".to_string(),
            checked,
            unchecked,
            ab: ab.to_vec(),
            aa: aa.to_vec(),
        }
    }

    #[test]
    fn cross_check_verdicts() {
        // Attribution 0.8 within the A/B median 1.0 ± max(|A/A| 0.6, half-range 0.5).
        let c = cc(1.0, 0.2, &[0.5, 1.0, 1.5], &[0.6, -0.3]);
        assert_eq!(c.noise(), Some(0.6));
        let (lo, hi) = c.interval().unwrap();
        assert!((lo - 0.4).abs() < 1e-9 && (hi - 1.6).abs() < 1e-9);
        assert_eq!(c.agreement(), Agreement::Agrees);
        assert!(c.verdict().ends_with(": agrees"), "{}", c.verdict());
        assert_eq!(c.short(), "agrees");
        // The attribution at 10% where -B saves 1 ± 0.6: a gap, named in points.
        let c = cc(10.2, 0.2, &[0.5, 1.0, 1.5], &[0.6, -0.3]);
        assert_eq!(c.agreement(), Agreement::Gap);
        assert!(
            c.verdict()
                .contains("disagrees: the attribution is 8.40 points above"),
            "{}",
            c.verdict()
        );
        // Neither clears the A/A noise: they cannot contradict each other.
        let c = cc(0.3, 0.0, &[-1.5], &[2.0, -1.8]);
        assert_eq!(c.agreement(), Agreement::Agrees);
        let c = cc(1.9, 0.0, &[-1.5], &[2.0]);
        assert_eq!(c.agreement(), Agreement::BothBelowNoise);
        // One round, no control: no interval, no verdict.
        let c = cc(1.0, 0.0, &[0.5], &[]);
        assert_eq!(c.agreement(), Agreement::Unjudged);
        assert!(c.verdict().contains("not judged"));
        let m = cross_check_model(&[cc(1.0, 0.2, &[0.5, 1.0, 1.5], &[0.6])]);
        assert_eq!(m.points.len(), 1);
        assert!((m.points[0].predicted - 0.8).abs() < 1e-9 && m.points[0].measured == 1.0);
    }

    #[test]
    fn cross_check_compares_package_mains_time_per_operation() {
        use attrib::{Mode, Sample};
        let proc = |build: Build, main: u64, ops: u64| {
            let mut tally = Tally::default();
            let at = |f: &str, mode: Mode| Sample {
                mode,
                under_gc: false,
                leaf: Some((f.to_string(), 0)),
            };
            tally.add(at("main.handle", Mode::User), main);
            tally.add(at("runtime.mallocgc", Mode::User), 6 * ops);
            tally.add(at("main.handle", Mode::Kernel), ops);
            let run: ProfileRun = bench::parse(&format!(
                r#"{{"workload":"server","hz_asked":1000,"samples":0,"wall_s":1,"ops":{ops}}}"#
            ))
            .unwrap();
            Profiled { build, run, tally }
        };
        // Round 1 ran plain, -B, shifted; round 2 in the rotated order.
        let procs = [
            proc(Build::Plain, 300, 100),
            proc(Build::NoBounds, 240, 100),
            proc(Build::Shifted, 297, 100),
            proc(Build::NoBounds, 480, 200),
            proc(Build::Shifted, 606, 200),
            proc(Build::Plain, 600, 200),
        ];
        let counts: Vec<Counts> = procs
            .iter()
            .map(|p| match p.build {
                Build::NoBounds => [0, 0, 0, 1, 0, 100, 839],
                _ => [0, 0, 0, 9, 0, 100, 891],
            })
            .collect();
        let c = CrossCheck::of("server", &procs, &counts);
        // Plain: 3 main samples and 9 user samples per op; -B: 2.4 main per op.
        let close = |v: &[f64], want: &[f64]| {
            v.len() == want.len() && v.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9)
        };
        assert!(close(&c.ab, &[60.0 / 9.0, 60.0 / 9.0]), "{:?}", c.ab);
        assert!(close(&c.aa, &[3.0 / 9.0, -3.0 / 9.0]), "{:?}", c.aa);
        // Safety of user-mode samples: 9 of 900 with checks, 1 of 840 with -B.
        assert!((c.checked - 1.0).abs() < 1e-9 && (c.unchecked - 100.0 / 840.0).abs() < 1e-9);
    }
}
