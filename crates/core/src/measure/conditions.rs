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

/// The time left for re-measuring disturbed or noisy cases, shared by the whole command (ms).
static RETRY_BUDGET_MS: AtomicU64 = AtomicU64::new(DEFAULT_RETRY_BUDGET_S * 1000);
/// `--retry-budget` default, seconds.
pub const DEFAULT_RETRY_BUDGET_S: u64 = 30;
/// The time the command has spent re-measuring so far (ms): attempts after a case's first.
static RETRIED_MS: AtomicU64 = AtomicU64::new(0);

/// How long the command has spent re-measuring disturbed or noisy cases so far, so that a
/// plan's time can be quoted with and without it.
pub fn time_retrying() -> Duration {
    Duration::from_millis(RETRIED_MS.load(Ordering::SeqCst))
}

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
        if tries > 1 {
            RETRIED_MS.fetch_add(started.elapsed().as_millis() as u64, Ordering::SeqCst);
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
        let before = time_retrying();
        let o = judged_case("test case", &[], || {
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
        assert!(time_retrying() - before >= Duration::from_millis(20));
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
