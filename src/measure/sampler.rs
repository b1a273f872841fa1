//! Taking samples: warm up, choose a sample length the clock can resolve, then take N.
//!
//! `sample_fn` times a closure on the calling thread; `team` runs pinned worker threads that
//! build their state on their own CPU (so first-touch puts memory next to them), start each
//! sample on a barrier and are timed from the first start to the last finish.

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
    let started = Instant::now();
    let mut iters = 1u64;
    loop {
        let took = time(&mut run, iters);
        if took >= spec.min_sample {
            break;
        }
        iters = next_iters(iters, took, spec.min_sample);
    }
    while started.elapsed() < spec.warmup {
        time(&mut run, iters);
    }
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
                let state = cpus::pin_current(cpu).and_then(|_| setup(i));
                let mut state = match state {
                    Ok(s) => Some(s),
                    Err(e) => {
                        setup_error.lock().unwrap().get_or_insert(e);
                        None
                    }
                };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;
    use std::sync::atomic::AtomicUsize;

    fn tiny() -> SampleSpec {
        SampleSpec {
            samples: 3,
            min_sample: Duration::from_millis(1),
            warmup: Duration::from_millis(1),
        }
    }

    #[test]
    fn sample_fn_reaches_the_minimum_length() {
        let s = sample_fn(&tiny(), |n| {
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
            &tiny(),
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
            &tiny(),
            |_| -> Result<()> { Err(anyhow::anyhow!("no memory")) },
            |_, _| {},
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
