//! What else happened on the machine while a case took its samples, so every figure carries
//! the conditions it was taken under (DESIGN: "Say under what conditions each figure was taken").
//!
//! A `Watch` is started before a case's samples and finished after them. It reads, at both
//! ends, /proc/stat per CPU (all CPU time on the CPUs the case used), this process's own
//! threads' CPU time (so the rest is other processes'), steal, PSI where /proc/pressure
//! exists, the process's involuntary context switches and migrations, and the CPU frequency
//! where cpufreq exposes it. Labs that measure memory add the huge-page fraction of their
//! region (`Conditions::pages`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::procstat::{self, CpuTimes, ProcSnapshot};
use super::quality::{self, Quality};
use crate::report::model::Outcome;

/// The conditions one case's samples were taken under. Every field is optional: a machine
/// that does not expose a source (no PSI, no cpufreq) leaves it out rather than guessing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Conditions {
    /// The CPUs the case ran on (its threads' affinity).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// How long the samples took, wall clock, in ms.
    #[serde(default)]
    pub wall_ms: f64,
    /// Per CPU used: the % of that CPU's time that other processes took (busy time on the CPU
    /// minus this process's share, as a share of the wall time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_cpu_pct: BTreeMap<String, f64>,
    /// The largest of `other_cpu_pct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_max_pct: Option<f64>,
    /// Time the hypervisor stole from the CPUs used, % of their time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// PSI `some avg10` at the end of the samples (%), by resource (cpu, memory, io).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub psi_some_avg10: BTreeMap<String, f64>,
    /// Involuntary context switches of this process's threads during the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
    /// CPU migrations of this process's threads during the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    /// Mean current frequency of the CPUs used (MHz), where cpufreq exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz: Option<f64>,
    /// Whether boost (turbo) was on, where cpufreq exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<bool>,
    /// Memory cases: the page size asked for ("4k", "thp", "2m", "1g").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_asked: Option<String>,
    /// Memory cases: the fraction of the region backed by huge pages (0..1), from smaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_fraction: Option<f64>,
}

impl Conditions {
    /// Record the page size a memory case asked for and the fraction of its region that the
    /// kernel backed with huge pages.
    pub fn pages(mut self, asked: &str, huge_fraction: Option<f64>) -> Self {
        self.pages_asked = Some(asked.to_string());
        self.huge_fraction = huge_fraction;
        self
    }
}

/// A running record of the conditions around one case. Cheap: a few /proc reads at each end.
pub struct Watch {
    cpus: Vec<usize>,
    started: Instant,
    before: Option<ProcSnapshot>,
}

impl Watch {
    /// Start watching the CPUs a case will use (empty: every CPU this process may use).
    pub fn start(cpus: &[usize]) -> Watch {
        let cpus = if cpus.is_empty() {
            super::cpus::allowed_cpus()
        } else {
            cpus.to_vec()
        };
        Watch {
            before: ProcSnapshot::take(&cpus).ok(),
            cpus,
            started: Instant::now(),
        }
    }

    /// Stop watching and say what happened meanwhile.
    pub fn finish(self) -> Conditions {
        let wall = self.started.elapsed();
        let after = ProcSnapshot::take(&self.cpus).ok();
        let mut c = Conditions {
            cpus: self.cpus.clone(),
            wall_ms: wall.as_secs_f64() * 1e3,
            ..Default::default()
        };
        if let (Some(b), Some(a)) = (&self.before, &after) {
            procstat::fill(&mut c, b, a, wall.as_secs_f64());
        }
        if let Some(a) = &after {
            c.psi_some_avg10 = a.psi.clone();
        }
        c.freq_mhz = procstat::mean_freq_mhz(&self.cpus);
        c.boost = procstat::boost();
        c
    }
}

/// CPU time per CPU from /proc/stat, in clock ticks: what a Watch differences.
pub type PerCpu = BTreeMap<usize, CpuTimes>;

impl Conditions {
    /// Take the watched fields from `w`, keeping what the lab set itself (page size asked,
    /// huge fraction).
    pub fn merged_with(&self, w: &Conditions) -> Conditions {
        let mut c = w.clone();
        if self.pages_asked.is_some() {
            c.pages_asked = self.pages_asked.clone();
            c.huge_fraction = self.huge_fraction;
        }
        if !self.cpus.is_empty() && c.cpus.is_empty() {
            c.cpus = self.cpus.clone();
        }
        c
    }
}

/// The time left for re-measuring disturbed or noisy cases, shared by the whole command (ms).
static RETRY_BUDGET_MS: AtomicU64 = AtomicU64::new(DEFAULT_RETRY_BUDGET_S * 1000);
/// `--retry-budget` default, seconds.
pub const DEFAULT_RETRY_BUDGET_S: u64 = 30;
/// At most this many measurements of one case (the first and two more).
pub const MAX_ATTEMPTS: usize = 3;

/// Set the command's re-measuring budget (`--retry-budget SECS`; 0 turns re-measuring off).
pub fn set_retry_budget(d: Duration) {
    RETRY_BUDGET_MS.store(d.as_millis() as u64, Ordering::SeqCst);
}

fn take_budget(d: Duration) -> bool {
    take_budget_from(&RETRY_BUDGET_MS, d)
}

fn take_budget_from(budget: &AtomicU64, d: Duration) -> bool {
    let want = d.as_millis() as u64;
    budget
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            (left >= want && left > 0).then(|| left - want)
        })
        .is_ok()
}

/// Measure one case with its conditions and a verdict on every row, and measure it again
/// (up to `MAX_ATTEMPTS` in all, within the command's budget) while any row is disturbed or
/// noisy. The attempt kept is the best judged; a note says what was re-measured and why.
/// `cpus`: the CPUs the case runs on (empty: all allowed). `what`: the case, for the note.
pub fn judged_case(
    what: &str,
    cpus: &[usize],
    mut measure: impl FnMut() -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    let mut best: Option<(Quality, usize, Outcome)> = None;
    let mut tries = 0;
    let mut first_why = None;
    loop {
        tries += 1;
        let started = Instant::now();
        let w = Watch::start(cpus);
        let mut o = measure()?;
        let c = w.finish();
        for r in o.results.iter_mut() {
            r.conditions = Some(match &r.conditions {
                Some(own) => own.merged_with(&c),
                None => c.clone(),
            });
            r.quality = None;
        }
        quality::judge_rows(&mut o.results);
        let worst = o
            .results
            .iter()
            .filter_map(|r| r.quality)
            .max()
            .unwrap_or(Quality::Ok);
        let bad = o
            .results
            .iter()
            .filter(|r| r.quality != Some(Quality::Ok))
            .count();
        if first_why.is_none() && worst != Quality::Ok {
            first_why = o
                .results
                .iter()
                .find_map(|r| r.quality_reasons.first().cloned());
        }
        let better = best
            .as_ref()
            .is_none_or(|(q, n, _)| (worst, bad) <= (*q, *n));
        if better {
            best = Some((worst, bad, o));
        }
        let (q, _, _) = best.as_ref().expect("set above");
        if *q == Quality::Ok || tries >= MAX_ATTEMPTS || !take_budget(started.elapsed()) {
            break;
        }
        super::cancel::check()?;
    }
    let (q, _, mut o) = best.expect("one attempt at least");
    if tries > 1 {
        let why = first_why.unwrap_or_default();
        o.notes.push(if q == Quality::Ok {
            format!("{what}: measured {tries} times ({why}); the figures kept are ok")
        } else {
            format!(
                "{what}: measured {tries} times ({why}); still {} within the re-measuring budget",
                q.word()
            )
        });
    }
    // The case is done: its figures survive a Ctrl-C during a later case.
    super::cancel::finished(&o);
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_noisy_case_is_measured_again_and_the_better_attempt_kept() {
        set_retry_budget(Duration::from_secs(30));
        let calls = AtomicUsize::new(0);
        let o = judged_case("test case", &[], || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let samples = if n == 0 {
                vec![1.0, 10.0, 100.0, 5.0, 50.0]
            } else {
                vec![10.0, 10.1, 9.9, 10.0, 10.05]
            };
            let mut o = Outcome::default();
            o.push("t", crate::case! {"k" => 1}, "latency", "ns", samples);
            Ok(o)
        })
        .unwrap();
        // Quiet: the second attempt is ok and kept. Busy (disturbed both times): all three
        // attempts are made and the last, as good as any, kept.
        assert!(calls.load(Ordering::SeqCst) >= 2);
        let r = &o.results[0];
        assert_eq!(r.summary.median, 10.0);
        assert!(r.conditions.is_some() && r.quality.is_some());
        assert!(
            o.notes[0].starts_with("test case: measured "),
            "{:?}",
            o.notes
        );
    }

    #[test]
    fn a_case_with_no_budget_is_measured_once() {
        // Budget 0 is shared process-wide; this only checks the helper's arithmetic.
        assert!(!take_budget_from(
            &AtomicU64::new(0),
            Duration::from_millis(1)
        ));
        assert!(take_budget_from(
            &AtomicU64::new(10),
            Duration::from_millis(4)
        ));
    }
}
