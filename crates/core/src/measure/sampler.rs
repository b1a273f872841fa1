//! Taking samples: warm up, choose a sample length the clock can resolve, then take N.
//!
//! `sample_fn` times a closure on the calling thread; `team` runs pinned worker threads that
//! build their state on their own CPU (so first-touch puts memory next to them), start each
//! sample on a barrier and are timed from the first start to the last finish.
//!
//! `team_window` is for work whose rate depends on how many workers run at once (memory
//! bandwidth): every worker repeats a unit of work until a shared stop flag, logs when each
//! unit ended, and a sample counts only the work done while all workers were running (from
//! the last start to the first end), so no worker finishing alone at either edge is timed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{cancel, cpus};

/// How samples are taken.
#[derive(Debug, Clone)]
pub struct SampleSpec {
    /// Number of timed samples.
    pub samples: usize,
    /// Each sample runs at least this long (iterations are scaled to reach it).
    pub min_sample: Duration,
    /// Untimed running before the first sample (caches, TLB, frequency settle).
    pub warmup: Duration,
}

impl Default for SampleSpec {
    fn default() -> Self {
        SampleSpec {
            samples: 7,
            min_sample: Duration::from_millis(10),
            warmup: Duration::from_millis(50),
        }
    }
}

impl SampleSpec {
    /// Fewer, shorter samples for `--quick` plans and tests.
    pub fn quick() -> Self {
        SampleSpec {
            samples: 5,
            min_sample: Duration::from_millis(10),
            warmup: Duration::from_millis(20),
        }
    }

    /// Three 1 ms samples: enough for a test to check that a measurement runs and what it
    /// returns, never how fast.
    #[cfg(test)]
    pub fn tiny() -> Self {
        SampleSpec {
            samples: 3,
            min_sample: Duration::from_millis(1),
            warmup: Duration::from_millis(1),
        }
    }

    /// The spec with `--samples N` applied, if given.
    pub fn with_samples(mut self, samples: Option<usize>) -> Self {
        if let Some(n) = samples {
            self.samples = n.max(1);
        }
        self
    }
}

/// One timed sample: `iters` iterations (per thread, for a team) in `ns` nanoseconds.
#[derive(Debug, Clone)]
pub struct Sample {
    pub iters: u64,
    pub ns: f64,
    /// Each worker's own elapsed time (one entry for `sample_fn`).
    pub per_thread_ns: Vec<f64>,
}

impl Sample {
    pub fn ns_per_iter(&self) -> f64 {
        self.ns / self.iters.max(1) as f64
    }
}

/// The next iteration count after a run of `iters` took `took`: aim 20% past the target,
/// never grow more than 100x or less than 2x in one step.
fn next_iters(iters: u64, took: Duration, target: Duration) -> u64 {
    let t = took.as_secs_f64().max(1e-9);
    let factor = (target.as_secs_f64() * 1.2 / t).clamp(2.0, 100.0);
    ((iters as f64 * factor).ceil() as u64).max(iters + 1)
}

/// Time `run(iters)` on this thread. `run` must do `iters` units of work inside
/// `std::hint::black_box` so nothing is optimised away.
pub fn sample_fn(spec: &SampleSpec, mut run: impl FnMut(u64)) -> Result<Vec<Sample>> {
    let time = |run: &mut dyn FnMut(u64), n: u64| {
        let t0 = Instant::now();
        run(n);
        t0.elapsed()
    };
    let iters = calibrate(spec, &mut run);
    let mut out = Vec::with_capacity(spec.samples);
    for _ in 0..spec.samples {
        cancel::check()?;
        let ns = time(&mut run, iters).as_nanos() as f64;
        out.push(Sample {
            iters,
            ns,
            per_thread_ns: vec![ns],
        });
    }
    Ok(out)
}

/// How many samples `sample_paired` takes from one set-up (one mapping) before it builds a
/// fresh one. Two keeps a set-up's own noise visible (two samples can disagree) while a 7-sample
/// figure still spans four set-ups.
pub const SAMPLES_PER_SETUP: usize = 2;

/// Samples of several variants of one measurement (`kinds` of them: 4 KiB vs huge pages),
/// paired in time and spread over fresh set-ups.
///
/// Why: in a VM the cost of a memory access depends on where the host backs the guest's pages,
/// which is decided when a region is first touched; every sample of one mapping sees the same
/// backing, so their spread says nothing of what a rerun (a new mapping) will show. And a
/// difference between two variants measured minutes apart carries the host's drift between
/// them. So: `rounds` times, `setup(k)` builds a fresh state for every kind (a new mapping),
/// each kind's iteration count is calibrated and warmed on it, then up to
/// [`SAMPLES_PER_SETUP`] samples per kind are taken round-robin (the order rotating, so no kind
/// always goes first); `after_round(k, &state)` reads what the state needs to report (the page
/// backing) before it is dropped. Returns `spec.samples` samples per kind, sample j of every
/// kind taken next to sample j of the others: their differences cancel drift.
pub fn sample_paired<S>(
    spec: &SampleSpec,
    kinds: usize,
    mut setup: impl FnMut(usize) -> Result<S>,
    mut run: impl FnMut(&mut S, u64),
    mut after_round: impl FnMut(usize, &S),
) -> Result<Vec<Vec<Sample>>> {
    assert!(kinds > 0, "sample_paired needs at least one kind");
    let total = spec.samples.max(1);
    let mut out: Vec<Vec<Sample>> = (0..kinds).map(|_| Vec::with_capacity(total)).collect();
    let mut round = 0usize;
    while out[0].len() < total {
        cancel::check()?;
        let mut states = Vec::with_capacity(kinds);
        for k in 0..kinds {
            states.push(setup(k)?);
        }
        let mut iters = vec![1u64; kinds];
        for (k, state) in states.iter_mut().enumerate() {
            iters[k] = calibrate(spec, |n| run(state, n));
        }
        let take = SAMPLES_PER_SETUP.min(total - out[0].len());
        for j in 0..take {
            for step in 0..kinds {
                cancel::check()?;
                let k = (step + round + j) % kinds;
                let t0 = Instant::now();
                run(&mut states[k], iters[k]);
                let ns = t0.elapsed().as_nanos() as f64;
                out[k].push(Sample {
                    iters: iters[k],
                    ns,
                    per_thread_ns: vec![ns],
                });
            }
        }
        for (k, state) in states.iter().enumerate() {
            after_round(k, state);
        }
        round += 1;
    }
    Ok(out)
}

/// The iteration count whose run lasts at least `spec.min_sample`, then `spec.warmup` of
/// untimed runs at that count.
fn calibrate(spec: &SampleSpec, mut run: impl FnMut(u64)) -> u64 {
    let started = Instant::now();
    let mut iters = 1u64;
    loop {
        let t0 = Instant::now();
        run(iters);
        let took = t0.elapsed();
        if took >= spec.min_sample {
            break;
        }
        iters = next_iters(iters, took, spec.min_sample);
    }
    while started.elapsed() < spec.warmup {
        run(iters);
    }
    iters
}

/// Worker `i` of a team pinned to `cpu` with its state built there. A failure is kept (the
/// first one wins) for the leader to return once every worker has reached the barrier, and
/// the worker goes on with no state so that the barrier count still holds.
fn worker_state<S>(
    cpu: usize,
    i: usize,
    setup: &(impl Fn(usize) -> Result<S> + Sync),
    setup_error: &Mutex<Option<anyhow::Error>>,
) -> Option<S> {
    match cpus::pin_current(cpu).and_then(|_| setup(i)) {
        Ok(s) => Some(s),
        Err(e) => {
            setup_error.lock().unwrap().get_or_insert(e);
            None
        }
    }
}

/// Run one worker per entry of `cpus`, each pinned there. `setup(i)` builds worker i's state
/// on its own CPU; `work(&mut state, iters)` does `iters` units. Returns the timed samples,
/// each from the first worker's start to the last worker's end.
pub fn team<S, Setup, Work>(
    cpus: &[usize],
    spec: &SampleSpec,
    setup: Setup,
    work: Work,
) -> Result<Vec<Sample>>
where
    Setup: Fn(usize) -> Result<S> + Sync,
    Work: Fn(&mut S, u64) + Sync,
{
    let n = cpus.len();
    assert!(n > 0, "a team needs at least one CPU");
    let barrier = Barrier::new(n + 1);
    let iters = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let epoch = Instant::now();
    let times: Vec<(AtomicU64, AtomicU64)> = (0..n)
        .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
        .collect();
    let setup_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);

    std::thread::scope(|scope| -> Result<Vec<Sample>> {
        for (i, &cpu) in cpus.iter().enumerate() {
            let (barrier, iters, stop, times, setup_error) =
                (&barrier, &iters, &stop, &times, &setup_error);
            let (setup, work) = (&setup, &work);
            scope.spawn(move || {
                let mut state = worker_state(cpu, i, setup, setup_error);
                barrier.wait(); // setup done
                loop {
                    barrier.wait(); // sample start
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let k = iters.load(Ordering::SeqCst);
                    let t0 = epoch.elapsed().as_nanos() as u64;
                    if let Some(s) = state.as_mut() {
                        work(s, k);
                    }
                    let t1 = epoch.elapsed().as_nanos() as u64;
                    times[i].0.store(t0, Ordering::SeqCst);
                    times[i].1.store(t1, Ordering::SeqCst);
                    barrier.wait(); // sample end
                }
            });
        }

        barrier.wait();
        let run_one = |k: u64| -> Sample {
            iters.store(k, Ordering::SeqCst);
            barrier.wait();
            barrier.wait();
            let start = times
                .iter()
                .map(|t| t.0.load(Ordering::SeqCst))
                .min()
                .unwrap();
            let end = times
                .iter()
                .map(|t| t.1.load(Ordering::SeqCst))
                .max()
                .unwrap();
            Sample {
                iters: k,
                ns: (end - start) as f64,
                per_thread_ns: times
                    .iter()
                    .map(|t| (t.1.load(Ordering::SeqCst) - t.0.load(Ordering::SeqCst)) as f64)
                    .collect(),
            }
        };
        let finish = |result: Result<Vec<Sample>>| {
            stop.store(true, Ordering::SeqCst);
            barrier.wait();
            result
        };
        if let Some(e) = setup_error.lock().unwrap().take() {
            return finish(Err(e));
        }

        let started = Instant::now();
        let mut k = 1u64;
        loop {
            let s = run_one(k);
            let took = Duration::from_nanos(s.ns as u64);
            if took >= spec.min_sample {
                break;
            }
            k = next_iters(k, took, spec.min_sample);
        }
        while started.elapsed() < spec.warmup {
            run_one(k);
        }
        let mut out = Vec::with_capacity(spec.samples);
        for _ in 0..spec.samples {
            if let Err(e) = cancel::check() {
                return finish(Err(e));
            }
            out.push(run_one(k));
        }
        finish(Ok(out))
    })
}

/// One worker's run during a windowed sample: when it started and when each of its units of
/// work ended, in ns since the team's epoch. Every unit is the same amount of work.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub start: u64,
    pub ends: Vec<u64>,
}

impl Timeline {
    /// When the worker stopped (its start if it finished no unit).
    pub fn end(&self) -> u64 {
        self.ends.last().copied().unwrap_or(self.start)
    }

    /// Units done inside `[a, b]`. A unit that straddles an edge counts by the share of its
    /// time inside, as if its rate were constant within the unit.
    pub fn units_in(&self, a: u64, b: u64) -> f64 {
        let mut prev = self.start;
        let mut sum = 0.0;
        for &e in &self.ends {
            let (lo, hi) = (prev.max(a), e.min(b));
            if hi > lo && e > prev {
                sum += (hi - lo) as f64 / (e - prev) as f64;
            }
            prev = e;
        }
        sum
    }

    /// The longest unit, in ns.
    pub fn longest_unit(&self) -> u64 {
        let mut prev = self.start;
        let mut most = 0;
        for &e in &self.ends {
            most = most.max(e.saturating_sub(prev));
            prev = e;
        }
        most
    }
}

/// The span in which every worker was running: from the last start to the first end. None
/// when there was no moment at which all of them ran.
pub fn common_window(timelines: &[Timeline]) -> Option<(u64, u64)> {
    let a = timelines.iter().map(|t| t.start).max()?;
    let b = timelines.iter().map(Timeline::end).min()?;
    (b > a).then_some((a, b))
}

/// One sample of a windowed team: the work every worker did while all of them ran.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSample {
    /// Length of the common window, ns.
    pub window_ns: f64,
    /// From the first start to the last end, ns: what a first-start-to-last-end timer would
    /// have used; `span_ns - window_ns` is the ragged edge left out.
    pub span_ns: f64,
    /// Units each worker did inside the window.
    pub units: Vec<f64>,
}

impl WindowSample {
    /// Build the sample from the workers' timelines; None when they never all ran at once.
    pub fn from_timelines(timelines: &[Timeline]) -> Option<WindowSample> {
        let (a, b) = common_window(timelines)?;
        let first = timelines.iter().map(|t| t.start).min()?;
        let last = timelines.iter().map(Timeline::end).max()?;
        Some(WindowSample {
            window_ns: (b - a) as f64,
            span_ns: (last - first) as f64,
            units: timelines.iter().map(|t| t.units_in(a, b)).collect(),
        })
    }

    pub fn total_units(&self) -> f64 {
        self.units.iter().sum()
    }
}

/// Run one worker per entry of `cpus`, each pinned there, `setup(i)` building worker i's
/// state on its own CPU. In each sample all workers leave one barrier together and repeat
/// `unit(&mut state)` until a stop flag set a fixed time later; each sample counts the units
/// done inside the window where all of them ran. The time is at least `spec.min_sample` and at
/// least 4 of the longest units seen in the warm-up, so the window holds whole units.
pub fn team_window<S, Setup, Unit>(
    cpus: &[usize],
    spec: &SampleSpec,
    setup: Setup,
    unit: Unit,
) -> Result<Vec<WindowSample>>
where
    Setup: Fn(usize) -> Result<S> + Sync,
    Unit: Fn(&mut S) + Sync,
{
    let n = cpus.len();
    assert!(n > 0, "a team needs at least one CPU");
    let barrier = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    let quit = AtomicBool::new(false);
    let epoch = Instant::now();
    let logs: Vec<Mutex<Timeline>> = (0..n).map(|_| Mutex::new(Timeline::default())).collect();
    let setup_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);

    std::thread::scope(|scope| -> Result<Vec<WindowSample>> {
        for (i, &cpu) in cpus.iter().enumerate() {
            let (barrier, stop, quit, logs, setup_error) =
                (&barrier, &stop, &quit, &logs, &setup_error);
            let (setup, unit) = (&setup, &unit);
            scope.spawn(move || {
                let mut state = worker_state(cpu, i, setup, setup_error);
                let mut log = Timeline {
                    start: 0,
                    ends: Vec::with_capacity(1 << 12),
                };
                barrier.wait(); // setup done
                loop {
                    barrier.wait(); // sample start
                    if quit.load(Ordering::SeqCst) {
                        break;
                    }
                    log.ends.clear();
                    log.start = epoch.elapsed().as_nanos() as u64;
                    if let Some(s) = state.as_mut() {
                        loop {
                            unit(s);
                            log.ends.push(epoch.elapsed().as_nanos() as u64);
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                    }
                    logs[i].lock().unwrap().clone_from(&log);
                    barrier.wait(); // sample end
                }
            });
        }

        barrier.wait();
        let run_one = |time: Duration| -> Vec<Timeline> {
            stop.store(false, Ordering::SeqCst);
            barrier.wait();
            std::thread::sleep(time);
            stop.store(true, Ordering::SeqCst);
            barrier.wait();
            logs.iter().map(|l| l.lock().unwrap().clone()).collect()
        };
        let finish = |result: Result<Vec<WindowSample>>| {
            quit.store(true, Ordering::SeqCst);
            barrier.wait();
            result
        };
        if let Some(e) = setup_error.lock().unwrap().take() {
            return finish(Err(e));
        }

        let warm = run_one(spec.warmup.max(spec.min_sample));
        let longest = warm.iter().map(Timeline::longest_unit).max().unwrap_or(0);
        let mut time = spec
            .min_sample
            .max(Duration::from_nanos(longest.saturating_mul(4)));
        let mut out = Vec::with_capacity(spec.samples);
        let mut misses = 0;
        while out.len() < spec.samples {
            if let Err(e) = cancel::check() {
                return finish(Err(e));
            }
            match WindowSample::from_timelines(&run_one(time)) {
                Some(s) => out.push(s),
                // A worker was held off its CPU for the whole sample: lengthen and retry.
                None if misses < 8 => {
                    misses += 1;
                    time *= 2;
                }
                None => {
                    return finish(Err(anyhow::anyhow!(
                        "the workers never all ran at once in {} samples of up to {:?}; the CPUs are taken by something else",
                        misses,
                        time
                    )))
                }
            }
        }
        finish(Ok(out))
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn paired_samples_take_fresh_setups_and_alternate_kinds() {
        let spec = SampleSpec {
            samples: 5,
            ..SampleSpec::tiny()
        };
        let mut setups = Vec::new();
        let mut order: Vec<(usize, usize)> = Vec::new();
        let mut seen = Vec::new();
        let out = sample_paired(
            &spec,
            2,
            |k| {
                setups.push(k);
                Ok((k, setups.len()))
            },
            |state: &mut (usize, usize), n| {
                order.push(*state);
                std::thread::sleep(Duration::from_micros(50 * n.min(40)));
            },
            |k, state| seen.push((k, state.1)),
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|s| s.len() == 5));
        // 5 samples at two per set-up: three rounds, each a fresh state per kind.
        assert_eq!(setups, vec![0, 1, 0, 1, 0, 1]);
        assert_eq!(seen.len(), 6);
        // Every state produced samples for its own kind only, and each round's states differ.
        assert!(order.iter().all(|(k, id)| (id - 1) % 2 == *k));
        let ids: std::collections::BTreeSet<usize> = order.iter().map(|s| s.1).collect();
        assert_eq!(ids.len(), 6);
    }
    use super::*;
    use std::hint::black_box;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn sample_fn_reaches_the_minimum_length() {
        let s = sample_fn(&SampleSpec::tiny(), |n| {
            for i in 0..n {
                black_box(i);
            }
        })
        .unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| x.iters > 1 && x.per_thread_ns.len() == 1));
    }

    #[test]
    fn team_runs_every_worker_with_its_own_state() {
        let allowed = cpus::allowed_cpus();
        let team_cpus = cpus::cpus_for_threads(2, &allowed);
        let total = AtomicUsize::new(0);
        let samples = team(
            &team_cpus,
            &SampleSpec::tiny(),
            |i| Ok(vec![i as u64; 16]),
            |state: &mut Vec<u64>, n| {
                for _ in 0..n {
                    state[0] = black_box(state[0] + 1);
                }
                total.fetch_add(n as usize, Ordering::Relaxed);
            },
        )
        .unwrap();
        assert_eq!(samples.len(), 3);
        assert!(samples
            .iter()
            .all(|s| s.per_thread_ns.len() == 2 && s.ns > 0.0));
        assert!(total.load(Ordering::Relaxed) >= 6);
    }

    #[test]
    fn team_setup_errors_come_back_without_hanging() {
        let r = team(
            &[cpus::allowed_cpus()[0]],
            &SampleSpec::tiny(),
            |_| -> Result<()> { Err(anyhow::anyhow!("no memory")) },
            |_, _| {},
        );
        assert!(r.unwrap_err().to_string().contains("no memory"));
    }

    fn line(start: u64, ends: &[u64]) -> Timeline {
        Timeline {
            start,
            ends: ends.to_vec(),
        }
    }

    #[test]
    fn the_window_is_where_every_worker_ran() {
        // Worker 0 starts first and ends last; worker 1 starts late; worker 2 ends early.
        let t = [
            line(0, &[10, 20, 30, 40, 50, 60]),
            line(15, &[25, 35, 45, 55]),
            line(5, &[15, 25, 35, 45]),
        ];
        assert_eq!(common_window(&t), Some((15, 45)));
        let s = WindowSample::from_timelines(&t).unwrap();
        assert_eq!(s.window_ns, 30.0);
        assert_eq!(s.span_ns, 60.0);
        // Worker 0: half of 10..20, all of 20..30 and 30..40, half of 40..50.
        assert!((s.units[0] - 3.0).abs() < 1e-12, "{:?}", s.units);
        // Worker 1 ran exactly 15..45: three whole units.
        assert!((s.units[1] - 3.0).abs() < 1e-12);
        // Worker 2: all of 15..25, 25..35, 35..45.
        assert!((s.units[2] - 3.0).abs() < 1e-12);
        assert!((s.total_units() - 9.0).abs() < 1e-12);
    }

    #[test]
    fn a_lone_finisher_is_left_out() {
        // Worker 1 needs twice as long per unit; worker 0 ran on alone after 1 stopped at 40.
        let t = [
            line(0, &[10, 20, 30, 40, 50, 60, 70, 80]),
            line(0, &[20, 40]),
        ];
        let s = WindowSample::from_timelines(&t).unwrap();
        assert_eq!(s.window_ns, 40.0);
        assert_eq!(s.units, vec![4.0, 2.0]);
        // A first-start-to-last-end timer would have divided 10 units by 80 ns.
        assert_eq!(s.span_ns, 80.0);
    }

    #[test]
    fn workers_that_never_overlap_give_no_sample() {
        let t = [line(0, &[10]), line(10, &[20])];
        assert_eq!(common_window(&t), None);
        assert!(WindowSample::from_timelines(&t).is_none());
        assert!(WindowSample::from_timelines(&[]).is_none());
        let idle = line(7, &[]);
        assert_eq!(idle.end(), 7);
        assert_eq!(idle.units_in(0, 100), 0.0);
        assert_eq!(line(0, &[5, 25, 30]).longest_unit(), 20);
    }

    #[test]
    fn team_window_counts_units_inside_the_window() {
        let allowed = cpus::allowed_cpus();
        let team_cpus = cpus::cpus_for_threads(2, &allowed);
        let done = AtomicUsize::new(0);
        let samples = team_window(
            &team_cpus,
            &SampleSpec::tiny(),
            |i| Ok(i as u64),
            |x: &mut u64| {
                for _ in 0..1000 {
                    *x = black_box(*x + 1);
                }
                done.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap();
        assert_eq!(samples.len(), 3);
        for s in &samples {
            assert_eq!(s.units.len(), 2);
            assert!(s.window_ns > 0.0 && s.window_ns <= s.span_ns);
            assert!(s.total_units() <= done.load(Ordering::Relaxed) as f64);
        }
        let r = team_window(
            &team_cpus[..1],
            &SampleSpec::tiny(),
            |_| -> Result<()> { Err(anyhow::anyhow!("no memory")) },
            |_| {},
        );
        assert!(r.unwrap_err().to_string().contains("no memory"));
    }

    #[test]
    fn growth_is_bounded() {
        assert_eq!(
            next_iters(1, Duration::from_nanos(1), Duration::from_millis(10)),
            100
        );
        assert_eq!(
            next_iters(10, Duration::from_millis(9), Duration::from_millis(10)),
            20
        );
    }
}
