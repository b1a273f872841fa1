//! What else happened on the machine while a case took its samples, so every figure carries
//! the conditions it was taken under (docs/src/measuring.md: "Say under what conditions each figure was taken").
//!
//! A `Watch` is started before a case's samples and finished after them. It reads, at both
//! ends, /proc/stat per CPU (all CPU time on the CPUs the case used), this process's own
//! threads' CPU time (so the rest is other processes'), steal, PSI where /proc/pressure
//! exists, the process's involuntary context switches and migrations, and the CPU frequency
//! where cpufreq exposes it. Labs that measure memory add the huge-page fraction of their
//! region (`Conditions::pages`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::procstat::{self, ProcSnapshot};
use super::quality::{self, Quality};
pub use crate::model::conditions::Conditions;
use crate::model::Outcome;

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

impl Outcome {
    /// Attach `c` to every row pushed since `from` (a `results.len()` taken before the case's
    /// samples): `let mark = out.results.len(); let w = Watch::start(&cpus); ...push...;
    /// out.attach_conditions(mark, w.finish())`.
    pub fn attach_conditions(&mut self, from: usize, c: Conditions) {
        for r in self.results.iter_mut().skip(from) {
            r.conditions = Some(match &r.conditions {
                Some(own) => own.merged_with(&c),
                None => c.clone(),
            });
            r.quality = None;
        }
        // Judged now, so the lab's own tables can mark them.
        let from = from.min(self.results.len());
        quality::judge_rows(&mut self.results[from..]);
        // The case is closed: its figures survive a Ctrl-C during a later case.
        super::cancel::finished_rows(&self.results[from..]);
    }
}

/// The time a command may spend re-measuring disturbed or noisy cases (`--retry-budget SECS`),
/// and the time it has spent so far. One per command, carried by the lab's `Ctx`: every case
/// of the command draws on it (`judged_case`), so a command never re-measures longer than
/// asked.
#[derive(Debug)]
pub struct RetryBudget {
    /// What is left to spend (ms).
    left_ms: AtomicU64,
    /// What the command has spent re-measuring so far (ms): attempts after a case's first.
    spent_ms: AtomicU64,
}

/// `--retry-budget`'s default for a lab's own command, seconds.
pub const LAB_RETRY_BUDGET_S: u64 = 30;
/// `--retry-budget`'s default for `costlab run` (every lab's plan in one go), seconds.
pub const RUN_RETRY_BUDGET_S: u64 = 60;

impl RetryBudget {
    /// A budget of `d` (zero: never re-measure).
    pub fn new(d: Duration) -> RetryBudget {
        RetryBudget {
            left_ms: AtomicU64::new(d.as_millis().try_into().unwrap_or(u64::MAX)),
            spent_ms: AtomicU64::new(0),
        }
    }

    /// How long the command has spent re-measuring so far, so that a plan's time can be
    /// quoted with and without it.
    pub fn spent(&self) -> Duration {
        Duration::from_millis(self.spent_ms.load(Ordering::SeqCst))
    }

    /// What is left to spend.
    pub fn left(&self) -> Duration {
        Duration::from_millis(self.left_ms.load(Ordering::SeqCst))
    }

    /// Take `d` from what is left, if that much is left (never from an empty budget).
    fn take(&self, d: Duration) -> bool {
        let want = d.as_millis().try_into().unwrap_or(u64::MAX);
        self.left_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                (left >= want && left > 0).then(|| left - want)
            })
            .is_ok()
    }

    fn spend(&self, d: Duration) {
        let ms = d.as_millis().try_into().unwrap_or(u64::MAX);
        self.spent_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

/// At most this many measurements of one case (the first and two more).
pub const MAX_ATTEMPTS: usize = 3;

/// Measure one case with its conditions and a verdict on every row, and measure it again
/// (up to `MAX_ATTEMPTS` in all, within the command's budget) while any row is disturbed or
/// noisy. The attempt kept is the best judged; a note says what was re-measured and why.
/// `cpus`: the CPUs the case runs on (empty: all allowed). `what`: the case, for the note.
/// `budget`: the command's (`Ctx::retry`), which every re-measurement draws on.
pub fn judged_case(
    what: &str,
    cpus: &[usize],
    budget: &RetryBudget,
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
        if tries > 1 {
            budget.spend(started.elapsed());
        }
        let better = best
            .as_ref()
            .is_none_or(|(q, n, _)| (worst, bad) <= (*q, *n));
        if better {
            best = Some((worst, bad, o));
        }
        let (q, _, _) = best.as_ref().expect("set above");
        if *q == Quality::Ok || tries >= MAX_ATTEMPTS || !budget.take(started.elapsed()) {
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
        let budget = RetryBudget::new(Duration::from_secs(LAB_RETRY_BUDGET_S));
        let calls = AtomicUsize::new(0);
        let o = judged_case("test case", &[], &budget, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n > 0 {
                // Each attempt after the first counts as time spent re-measuring.
                std::thread::sleep(Duration::from_millis(20));
            }
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
        assert!(budget.spent() >= Duration::from_millis(20));
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
        let budget = RetryBudget::new(Duration::ZERO);
        let calls = AtomicUsize::new(0);
        let o = judged_case("noisy case", &[], &budget, || {
            calls.fetch_add(1, Ordering::SeqCst);
            let mut o = Outcome::default();
            let samples = vec![1.0, 10.0, 100.0, 5.0, 50.0];
            o.push("t", crate::case! {"k" => 1}, "latency", "ns", samples);
            Ok(o)
        })
        .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(budget.spent(), Duration::ZERO);
        assert_ne!(o.results[0].quality, Some(Quality::Ok));
        // The arithmetic: a budget gives what it has, never more.
        let b = RetryBudget::new(Duration::from_millis(10));
        assert!(b.take(Duration::from_millis(4)));
        assert!(!b.take(Duration::from_millis(7)));
        assert_eq!(b.left(), Duration::from_millis(6));
    }
}
