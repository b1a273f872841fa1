//! A pipe's bytes carried from one CPU to another: `pipe-cross`. A writer pinned to one CPU
//! writes `size` bytes into a pipe with room for them (it never blocks); a reader pinned to
//! another CPU, told by a flag in memory (not by the pipe: no wake-up, no switch), reads them
//! out (it never blocks either). Each side times its own call on its thread's CPU clock; the
//! figure is the pair's, per round. `pipe-rw` makes the same pair on one thread, where the
//! pipe's pages are still in the writer's caches when it reads them; here the reader's CPU
//! takes every line from the other's cache (across a socket or a chiplet, from memory), and
//! the pages go back to the allocator on the reader's CPU, to be taken again on the writer's.
//! That is a producer and a consumer on two CPUs (`tar | gzip`): here 1.7x the one-thread
//! pair's per-byte cost, 8 KiB at a time through a 64 KiB pipe.
//!
//! The wake-ups and switches such a pair makes when one side waits are priced apart
//! (`wake-ipi`, `wake-halted`, the switch terms), so none happens here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::measure::cpus::{last_two, Pinned};
use crate::measure::cputime::thread_cpu_ns;
use crate::measure::{cancel, SampleSpec};

/// Rounds per sample (256 rounds of 64 KiB: about 5 ms here), and untimed ones first.
const ROUNDS: u64 = 256;
const WARM: u64 = 32;

/// The longest one side waits for the other before it gives up (a side that died).
const PATIENCE: Duration = Duration::from_secs(5);

/// The turn the reader sets to stop.
const STOP: u64 = u64::MAX;

/// Spin until `turn` holds `want` (or `STOP`); false where it never came.
fn wait_for(turn: &AtomicU64, want: u64) -> bool {
    let t0 = Instant::now();
    loop {
        match turn.load(Ordering::Acquire) {
            v if v == want => return true,
            STOP => return false,
            _ if t0.elapsed() > PATIENCE => return false,
            _ => std::hint::spin_loop(),
        }
    }
}

/// What a side's timing adds to its call: the thread's CPU clock read twice back to back (a
/// syscall, not the vDSO), the median of 64 such pairs.
fn clock_ns() -> f64 {
    let mut v: Vec<u64> = (0..64)
        .map(|_| {
            let t0 = thread_cpu_ns();
            thread_cpu_ns() - t0
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// ns per write+read pair of `size` bytes, the writer on one CPU and the reader on another,
/// less what the two sides' clock reads add.
pub fn pipe_cross(spec: &SampleSpec, size: usize) -> Result<Vec<f64>> {
    let (mine, theirs) = last_two("a pipe across CPUs needs two CPUs")?;
    let _pin = Pinned::to(mine)?;
    let (r, w) = rustix::pipe::pipe().context("pipe")?;
    // Room for a round's bytes, so that neither side ever waits on the pipe.
    rustix::pipe::fcntl_setpipe_size(&w, size.max(4096) * 2).context("sizing the pipe")?;
    // Turn 2k+1: round k is in the pipe; 2k+2: the reader took it. The reader's CPU time
    // in its reads, summed, beside it.
    let turn = Arc::new(AtomicU64::new(0));
    let read_ns = Arc::new(AtomicU64::new(0));
    let reader = {
        let (turn, read_ns) = (turn.clone(), read_ns.clone());
        std::thread::spawn(move || -> Result<()> {
            let _pin = Pinned::to(theirs)?;
            let mut inn = vec![0u8; size];
            let mut k = 0u64;
            while wait_for(&turn, 2 * k + 1) {
                let t0 = thread_cpu_ns();
                let mut got = 0;
                while got < size {
                    got += rustix::io::read(&r, &mut inn[got..]).context("pipe read")?;
                }
                read_ns.fetch_add(thread_cpu_ns() - t0, Ordering::Relaxed);
                k += 1;
                turn.store(2 * k, Ordering::Release);
            }
            Ok(())
        })
    };
    let out = vec![1u8; size];
    let mut k = 0u64;
    let mut round = |timed: &mut u64| -> Result<()> {
        let t0 = thread_cpu_ns();
        let n = rustix::io::write(&w, &out).context("pipe write")?;
        if n != size {
            bail!("pipe write: {n} of {size} bytes went in");
        }
        *timed += thread_cpu_ns() - t0;
        turn.store(2 * k + 1, Ordering::Release);
        k += 1;
        if !wait_for(&turn, 2 * k) {
            bail!("the reader on CPU {theirs} stopped taking the pipe's bytes");
        }
        Ok(())
    };
    let clock = clock_ns();
    let mut samples = Vec::with_capacity(spec.samples);
    let mut result = (0..WARM).try_for_each(|_| round(&mut 0));
    while result.is_ok() && samples.len() < spec.samples {
        if let Err(e) = cancel::check() {
            result = Err(e);
            break;
        }
        let (mut wrote, read0) = (0, read_ns.load(Ordering::Acquire));
        result = (0..ROUNDS).try_for_each(|_| round(&mut wrote));
        let read = read_ns.load(Ordering::Acquire) - read0;
        samples.push(((wrote + read) as f64 / ROUNDS as f64 - 2.0 * clock).max(0.0));
    }
    turn.store(STOP, Ordering::Release);
    // The reader's own error first: where it could not pin or read, the writer only saw it
    // stop.
    match reader.join() {
        Ok(r) => r?,
        Err(_) => bail!("the pipe's reader thread panicked"),
    }
    result?;
    Ok(samples)
}
