//! A trial's verdict over its pairs (A as it is, B with the remedy), and its lines: the
//! prediction beside the measured saving, the other fields saved, the kernel's saving by
//! measured class, the Go runtime's own view, what THP's counted events price, and the advice
//! (only for a confirmed what-if).

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use super::measure::RunMeasure;
use super::overhead::Overhead;
use super::plan::{After, Trial};
use super::thp::{self, Prediction};
use super::verdict::{self, Predicted, Verdict};
use super::{Of, Tried};
use crate::pricing::Units;

/// The runs of one trial, A and B paired in their rounds.
struct Pairs<'a> {
    a: &'a [RunMeasure],
    b: &'a [RunMeasure],
    n: usize,
}

impl<'a> Pairs<'a> {
    fn iter(&self) -> impl Iterator<Item = (&'a RunMeasure, &'a RunMeasure)> + '_ {
        self.a.iter().zip(self.b).take(self.n)
    }

    /// A - B of a field, each pair.
    fn saved(&self, f: impl Fn(&RunMeasure) -> f64) -> Vec<f64> {
        self.iter().map(|(a, b)| f(a) - f(b)).collect()
    }

    /// A's work over B's, each pair: None unless the program printed its work (`--work`) in
    /// every run of both arms.
    fn work_ratios(&self) -> Option<Vec<f64>> {
        let work = |m: &RunMeasure| m.work.filter(|w| *w > 0.0);
        let r: Option<Vec<f64>> = self
            .iter()
            .map(|(a, b)| Some(work(a)? / work(b)?))
            .collect();
        r.filter(|r| !r.is_empty())
    }

    /// A - B of a field at equal work, each pair: B's figure scaled by A's work over B's.
    fn saved_at(&self, ratios: &[f64], f: impl Fn(&RunMeasure) -> f64) -> Vec<f64> {
        self.iter()
            .zip(ratios)
            .map(|((a, b), r)| f(a) - f(b) * r)
            .collect()
    }
}

/// "12 ms (3 ms to 20 ms)": a saving's median and range, or "nothing".
fn span(v: &[f64]) -> String {
    Summary::of(v).map_or("nothing".into(), |s| {
        format!(
            "{} ({} to {})",
            signed(s.median),
            signed(s.min),
            signed(s.max)
        )
    })
}

/// The verdict of one trial over its pairs, and its lines.
pub(super) fn judge_trial(
    t: &Trial,
    a: &[RunMeasure],
    b: &[RunMeasure],
    units: &Units,
    probe: &RunMeasure,
    overhead: Option<&Overhead>,
) -> Tried {
    let p = Pairs {
        a,
        b,
        n: a.len().min(b.len()),
    };
    // At equal work where the program printed it (a fixed-time program turns CPU saved into
    // more work), else as measured.
    let ratios = p.work_ratios();
    let measured = match &ratios {
        Some(r) => p.saved_at(r, |m| t.of.of(m)),
        None => p.saved(|m| t.of.of(m)),
    };
    let work_change: Vec<f64> = ratios
        .iter()
        .flatten()
        .map(|r| (1.0 / r - 1.0) * 100.0)
        .collect();
    let wall_saved = p.saved(|m| m.wall_ns);
    let rate_change: Vec<f64> = p
        .iter()
        .filter_map(|(a, b)| Some((b.rate? / a.rate.filter(|r| *r > 0.0)? - 1.0) * 100.0))
        .collect();
    let predicted = match &t.prediction {
        Prediction::Saves(p, _) => *p,
        Prediction::Withdrawn(_) => None,
    };
    let v = verdict::judge(predicted, &measured);
    let before = t.before.map(|p| (p, verdict::judge(Some(p), &measured)));
    let mut lines = vec![headline(t, p.n, &measured, v)];
    let mut beside = format!(
        "  beside it, saved: CPU {}, kernel {}, user {}, wall {}",
        span(&p.saved(|m| m.cpu_usage_ns)),
        span(&p.saved(|m| m.system_ns)),
        span(&p.saved(|m| m.user_ns)),
        span(&wall_saved)
    );
    if !rate_change.is_empty() {
        beside += &format!(", rate {}", pct_span(&rate_change));
    }
    lines.push(beside);
    lines.extend(at_work(t, &p, ratios.is_some(), &work_change));
    lines.extend(overhead.and_then(|o| by_class(t, &p, o)));
    if t.after == After::Gc {
        lines.extend(gc_fraction(
            t,
            &p,
            probe,
            predicted,
            &rate_change,
            &wall_saved,
        ));
        lines.extend(memory_calls(t, &p));
    }
    if t.after == After::Thp {
        lines.extend(thp_priced(&p, units, &measured));
    }
    lines.extend(advice(t, &p, v, &measured));
    Tried {
        what: t.what,
        remedy: t.remedy.clone(),
        of: t.of,
        verdict: v,
        predicted,
        measured,
        wall_saved,
        rate_change,
        work_change,
        before,
        lines,
    }
}

/// The trial's first line: the prediction, the measured saving and the verdict.
fn headline(t: &Trial, n: usize, measured: &[f64], v: Verdict) -> String {
    let what = format!("{} ({})", t.what, t.remedy);
    match &t.prediction {
        Prediction::Saves(Some(p), why) => format!(
            "{what}: predicted saving {} of {} time ({why}); measured saving {} over {n} pairs: {}",
            human_ns(p.1),
            t.of.word(),
            span(measured),
            v.word()
        ),
        Prediction::Saves(None, why) | Prediction::Withdrawn(why) => format!(
            "{what}: no size predicted ({why}); measured saving {} of {} time over {n} pairs: {}",
            span(measured),
            t.of.word(),
            v.word()
        ),
    }
}

/// Where `--work` was given: the work each arm did and the saving unscaled (`scaled`: every
/// run printed its work), or the runs that printed none. Where no run printed it, a GC
/// trial whose wall time gave back less than a quarter of what its CPU saved would (a program
/// that may run for a fixed time) says how to judge it at equal work.
fn at_work(t: &Trial, p: &Pairs, scaled: bool, change: &[f64]) -> Option<String> {
    let printed = |runs: &[RunMeasure]| {
        runs.iter()
            .take(p.n)
            .filter_map(|m| m.work)
            .collect::<Vec<f64>>()
    };
    let (a, b) = (printed(p.a), printed(p.b));
    if a.is_empty() && b.is_empty() {
        let med = |v: Vec<f64>| Summary::of(&v).map(|s| s.median);
        let runs = || p.a.iter().take(p.n);
        let busy = med(runs().map(|m| m.cpu_usage_ns).collect())?
            / med(runs().map(|m| m.wall_ns).collect())?.max(1.0);
        let cpu = med(p.saved(|m| m.cpu_usage_ns))?;
        let wall = med(p.saved(|m| m.wall_ns))?;
        // The wall time the CPU saved would give at the CPUs it kept busy: a fixed-work
        // program gets much of it back, a fixed-time one none.
        let would = cpu / busy.max(1e-9);
        return (t.after == After::Gc && cpu > 0.0 && wall < 0.25 * would).then(|| format!(
            "  its CPU saved would be {} of wall time at its {busy:.2} CPUs busy, and its wall saved {}: a program that runs for a fixed time turns the CPU a remedy saves into more work, so its CPU saved is less than the GC work saved; give --work with a pattern for the work it prints to judge it at equal work",
            human_ns(would),
            signed(wall)
        ));
    }
    // The program's own number, as it printed it (a count, or a figure with decimals).
    let med = |v: &[f64]| Summary::of(v).map_or(String::new(), |s| s.median.to_string());
    Some(match scaled {
        true => format!(
            "  at equal work: it printed {} of work a run as it is, {} with {} ({}); each saving above is A's {} less B's scaled to A's work; unscaled, {}",
            med(&a),
            med(&b),
            t.remedy,
            pct_span(change),
            t.of.word(),
            span(&p.saved(|m| t.of.of(m)))
        ),
        false => format!(
            "  --work found its number in {} of {} runs as it is and {} of {} with {}: the saving is not scaled to equal work",
            a.len(),
            p.n,
            b.len(),
            p.n,
            t.remedy
        ),
    })
}

/// The kernel's saving by measured class, the tracer's own cost taken out (traced runs).
fn by_class(t: &Trial, p: &Pairs, o: &Overhead) -> Option<String> {
    let class = |c: &'static str| {
        let v: Vec<f64> = p
            .iter()
            .filter_map(|(a, b)| {
                Some(a.traced.as_ref()?.class_ns(c, o) - b.traced.as_ref()?.class_ns(c, o))
            })
            .collect();
        (!v.is_empty()).then(|| format!("{c} {}", span(&v)))
    };
    let parts: Vec<String> = ["syscall", "fault", "irq", "softirq", "kernel-other"]
        .into_iter()
        .filter_map(class)
        .collect();
    let cost = |runs: &[RunMeasure]| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .filter_map(|m| m.traced.as_ref())
            .map(|t| t.tracer_ns)
            .collect();
        Summary::of(&v).map_or(0.0, |s| s.median)
    };
    (!parts.is_empty()).then(|| {
        format!(
            "  the kernel's saving by measured class: {} (the tracer's own cost, taken out: {} a run as it is, {} with {})",
            parts.join(", "),
            human_ns(cost(p.a)),
            human_ns(cost(p.b)),
            t.remedy
        )
    })
}

/// A Go trial: its runtime's own GC CPU fraction on each side, and the throughput.
fn gc_fraction(
    t: &Trial,
    p: &Pairs,
    probe: &RunMeasure,
    predicted: Predicted,
    rate_change: &[f64],
    wall_saved: &[f64],
) -> Option<String> {
    let fraction = |runs: &[RunMeasure]| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .filter_map(|m| m.go_gc_cpu_fraction)
            .collect();
        Summary::of(&v)
    };
    let (x, y) = (fraction(p.a)?, fraction(p.b)?);
    let wall_ratio = probe.wall_ns / probe.cpu_usage_ns.max(1.0);
    let predicted_wall = predicted.map(|p| p.1 * wall_ratio);
    Some(format!(
        "  its runtime's GC CPU fraction: {:.1}% as it is, {:.1}% with {} (ratio {:.2}); throughput {}{}",
        x.median,
        y.median,
        t.remedy,
        y.median / x.median.max(1e-9),
        if rate_change.is_empty() { format!("by wall time {}", span(wall_saved)) } else { pct_span(rate_change) },
        predicted_wall.map_or(String::new(), |w| format!(" (predicted wall saved: {}, at its {:.2} CPUs busy)", human_ns(w), 1.0 / wall_ratio))
    ))
}

/// A Go trial: the calls its runtime's scavenger and heap made, counted, on each side.
fn memory_calls(t: &Trial, p: &Pairs) -> Option<String> {
    let med = |runs: &[RunMeasure], name: &str| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .map(|m| m.calls(name) as f64)
            .collect();
        Summary::of(&v).map_or(0.0, |s| s.median)
    };
    p.a.iter().any(|m| !m.memory_calls.is_empty()).then(|| {
        format!(
            "  its runtime's scavenger and heap, counted: madvise {:.0} calls a run as it is, {:.0} with {}; mmap {:.0} and {:.0}",
            med(p.a, "madvise"),
            med(p.b, "madvise"),
            t.remedy,
            med(p.a, "mmap"),
            med(p.b, "mmap")
        )
    })
}

/// A THP trial: the saving its counted THP events price, and the kernel time they do not.
fn thp_priced(p: &Pairs, units: &Units, measured: &[f64]) -> Option<String> {
    let ex: Vec<(f64, String)> = p
        .iter()
        .filter_map(|(a, b)| thp::explained(a, b, units))
        .collect();
    let (_, why) = ex.last()?;
    let priced: Vec<f64> = ex.iter().map(|e| e.0).collect();
    let rest: Vec<f64> = measured.iter().zip(&priced).map(|(m, p)| p - m).collect();
    Some(format!(
        "  priced from what it counted: a saving of {} of kernel time; {why}; the other {} of kernel time it took is work these events do not price",
        span(&priced),
        span(&rest)
    ))
}

/// Advice for a confirmed what-if; for one that saves another size than predicted, that it is
/// not advice.
fn advice(t: &Trial, p: &Pairs, v: Verdict, measured: &[f64]) -> Option<String> {
    match v {
        Verdict::Confirmed => Some(format!(
            "  advice: {} saves {} of {} time here{}",
            t.remedy,
            span(measured),
            t.of.word(),
            if t.of == Of::Cpu {
                String::new()
            } else {
                format!(" (CPU in all: {})", span(&p.saved(|m| m.cpu_usage_ns)))
            }
        )),
        Verdict::SizeOff => Some(format!(
            "  not advice: it saves, but not what the model says (measured {})",
            span(measured)
        )),
        _ => None,
    }
}

/// A signed time: "-350 ms" for a rise.
fn signed(ns: f64) -> String {
    if ns < 0.0 {
        format!("-{}", human_ns(-ns))
    } else {
        human_ns(ns)
    }
}

pub(super) fn pct_span(v: &[f64]) -> String {
    Summary::of(v).map_or("nothing".into(), |s| {
        format!("{:+.1}% ({:+.1}% to {:+.1}%)", s.median, s.min, s.max)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::measure::Setup;

    fn trial() -> Trial {
        Trial {
            what: "go-gogc",
            remedy: "GOGC=200".into(),
            setup: Setup::default(),
            thp_always: false,
            of: Of::Cpu,
            prediction: Prediction::Saves(Some((2e9, 2e9, 2e9)), "a fixture".into()),
            before: None,
            after: After::Nothing,
        }
    }

    fn run(cpu: f64, work: Option<f64>) -> RunMeasure {
        RunMeasure {
            cpu_usage_ns: cpu,
            wall_ns: 3e9,
            work,
            ..Default::default()
        }
    }

    /// A program that runs for a fixed time: the same CPU both ways, but 25% more work with
    /// the remedy. At equal work the remedy's run took 8 s of the 10, a saving of 2 s; the
    /// unscaled saving (none) is said beside it.
    #[test]
    fn a_saving_is_measured_at_equal_work_where_every_run_printed_its_work() {
        let a = vec![run(10e9, Some(100.0)); 3];
        let b = vec![run(10e9, Some(125.0)); 3];
        let probe = run(10e9, None);
        let t = judge_trial(&trial(), &a, &b, &Units::new(), &probe, None);
        assert_eq!(t.measured, vec![2e9; 3]);
        assert_eq!(t.work_change, vec![25.0; 3]);
        let line = t
            .lines
            .iter()
            .find(|l| l.starts_with("  at equal work:"))
            .expect("the work line");
        assert!(
            line.contains("it printed 100 of work a run as it is, 125 with GOGC=200"),
            "{line}"
        );
        assert!(line.contains("unscaled, 0.0 ns"), "{line}");
    }

    /// One run without the number: nothing is scaled, and the line says how many printed it.
    #[test]
    fn a_run_that_printed_no_work_leaves_the_saving_unscaled() {
        let a = vec![run(10e9, Some(100.0)), run(10e9, None)];
        let b = vec![run(9e9, Some(125.0)), run(9e9, Some(125.0))];
        let probe = run(10e9, None);
        let t = judge_trial(&trial(), &a, &b, &Units::new(), &probe, None);
        assert_eq!(t.measured, vec![1e9; 2]);
        assert!(t.work_change.is_empty());
        assert!(
            t.lines
                .iter()
                .any(|l| l.contains("--work found its number in 1 of 2 runs as it is and 2 of 2")),
            "{:?}",
            t.lines
        );
    }

    /// Without --work, no line and no change.
    #[test]
    fn without_work_the_saving_is_as_measured() {
        let a = vec![run(10e9, None); 2];
        let b = vec![run(9e9, None); 2];
        let t = judge_trial(&trial(), &a, &b, &Units::new(), &run(10e9, None), None);
        assert_eq!(t.measured, vec![1e9; 2]);
        assert!(!t.lines.iter().any(|l| l.contains("work")), "{:?}", t.lines);
    }

    /// A GC trial whose wall did not move, without --work: the line says how to judge it
    /// (10 s of CPU over 3 s of wall is 3.33 CPUs busy; 500 ms of CPU saved is 150 ms of wall).
    #[test]
    fn a_gc_trial_with_a_wall_that_did_not_move_asks_for_its_work() {
        let t = Trial {
            after: After::Gc,
            ..trial()
        };
        let a = vec![run(10e9, None); 2];
        let b = vec![run(9.5e9, None); 2];
        let tried = judge_trial(&t, &a, &b, &Units::new(), &run(10e9, None), None);
        assert!(
            tried
                .lines
                .iter()
                .any(|l| l.starts_with("  its CPU saved would be 150.00 ms of wall time at its 3.33 CPUs busy, and its wall saved 0.0 ns") && l.contains("give --work")),
            "{:?}",
            tried.lines
        );
    }
}
