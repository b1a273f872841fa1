//! The memory and sharing workloads: busy threads, placed, for a fixed time. Memory chases
//! a dependent cycle per thread over its own region larger than the last-level cache;
//! sharing increments one shared atomic from every thread.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::observe::{gettid, pin_to, where_now, Run};
use super::plan::Workload;
use costlab_core::measure::counters::Scheduling;

/// Each memory thread's chase region (4-byte indices): larger than any last-level cache here.
pub const CHASE_BYTES: usize = 64 << 20;

/// How long past the run's end the workers may take to start, before the last look at where
/// they run.
const START_WAIT: Duration = Duration::from_secs(10);

/// Run `threads` busy workers (memory or sharing) placed per `sets` for `len`.
pub fn run_workers(
    w: Workload,
    sets: &[Vec<usize>],
    allowed: &[usize],
    chains: &[Vec<u32>],
    len: Duration,
) -> Result<Run> {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let shared = AtomicU64::new(0);
    let tids: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let mut sched = Scheduling::start();
    let (m0, s0) = sched.read();
    let mut seen = BTreeMap::new();
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            let (stop, done, shared, tids) = (&stop, &done, &shared, &tids);
            // Only the memory workload chases; the plan builds no chains without it.
            let chain: &[u32] = chains
                .get(i % chains.len().max(1))
                .map_or(&[], |c| c.as_slice());
            handles.push(scope.spawn(move || -> Result<()> {
                pin_to(set, allowed)?;
                tids.lock().unwrap().push((
                    format!("thread {i}"),
                    format!("/proc/self/task/{}/stat", gettid()),
                ));
                let mut n = 0u64;
                // Threads sharing a chain start at their own points of its cycle.
                let mut p = ((i * 0x9e37_79b1) % chain.len().max(1)) as u32;
                while !stop.load(Ordering::Relaxed) {
                    match w {
                        Workload::Memory => {
                            for _ in 0..256 {
                                p = chain[p as usize];
                            }
                            black_box(p);
                        }
                        _ => {
                            for _ in 0..256 {
                                shared.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    n += 256;
                }
                done.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }));
        }
        while t0.elapsed() < len {
            std::thread::sleep(Duration::from_millis(5));
            where_now(&tids.lock().unwrap(), &mut seen);
        }
        // Every thread is looked at once running before the stop: on a crowded or emulated
        // machine the last of four threads had not started within 100 ms, and the record
        // named three (a two-node guest under TCG beside a CPU hog). One that fails to pin
        // never registers: its error comes from the join.
        let started = Instant::now();
        while tids.lock().unwrap().len() < sets.len() && started.elapsed() < START_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        where_now(&tids.lock().unwrap(), &mut seen);
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().map_err(|_| anyhow!("a worker panicked"))??;
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let (m1, s1) = sched.read();
    Ok(Run {
        per_s: done.load(Ordering::Relaxed) as f64 / secs / 1e6,
        migrations_per_s: m0.zip(m1).map(|(a, b)| (b - a) as f64 / secs),
        switches_per_s: s0.zip(s1).map(|(a, b)| (b - a) as f64 / secs),
        seen,
        why_no_counters: sched.why.take(),
    })
}
