//! What counting adds to each syscall of the counted program, measured here now: getppid in a
//! loop with the counter attached to this process, paired with the loop without it. `--once`
//! and `--pid` check the price against the traced run's own system time, which holds that
//! cost; it is taken out (syscalls counted × this cost), and the note says so.

use std::time::Instant;

use anyhow::Result;

use super::bpf::{SyscallCounter, Whose};
use super::count::{Counts, Times};
use costlab_core::model::Summary;

/// Calls per timed loop: 10 000 (a loop of about 1.5 ms here). Loops of 100 000 (seven pairs,
/// about 0.25 s in all) were each long enough to be preempted often on a shared machine, and
/// their median moved with it (MADs of 3-59 ns over five runs, not quiet); fifteen pairs of
/// 10 000 gave MADs of 1-4 ns beside them, in about 60 ms (now in blocks: `per_syscall`).
const CALLS: u32 = 10_000;

/// ns the counter adds to one syscall of a counted process: one sample per loop counted,
/// each less an uncounted loop.
///
/// The loops run in blocks, not in alternate pairs: uncounted loops, one attach, the counted
/// loops, one detach, the rest of the uncounted ones; sample i is counted loop i less uncounted
/// loop i (taken from before and after the counted block in turn, so a drift over the blocks
/// is met from both sides). Attaching the first program to sys_enter soon after the last one
/// was detached waits for an RCU grace period (the kernel's tracepoint_add_func,
/// TP_TRANSITION_SYNC_1_0_1: 15-25 ms here); alternate pairs paid one for every pair, about
/// 0.27 s of the 0.3 s the calibration took on every --once run.
pub fn per_syscall(loops: usize) -> Result<Vec<f64>> {
    let me = std::process::id();
    let loop_ns = || {
        let t = Instant::now();
        for _ in 0..CALLS {
            // SAFETY: getppid takes no arguments and cannot fail.
            unsafe {
                libc::syscall(libc::SYS_getppid);
            }
        }
        t.elapsed().as_nanos() as f64 / CALLS as f64
    };
    loop_ns(); // warm
    let before = loops.div_ceil(2);
    let mut plain = Vec::with_capacity(loops);
    for _ in 0..before {
        costlab_core::measure::cancel::check()?;
        plain.push(loop_ns());
    }
    let counter = SyscallCounter::attach(Whose::Process(me))?;
    let mut traced = Vec::with_capacity(loops);
    for _ in 0..loops {
        costlab_core::measure::cancel::check()?;
        traced.push(loop_ns());
    }
    drop(counter);
    for _ in before..loops {
        costlab_core::measure::cancel::check()?;
        plain.push(loop_ns());
    }
    Ok(paired(&traced, &plain))
}

/// Counted loop i less uncounted loop j(i): the uncounted ones taken alternately from the
/// block before (the first `ceil(n/2)`) and the block after, never below zero.
pub fn paired(traced: &[f64], plain: &[f64]) -> Vec<f64> {
    let before = plain.len().div_ceil(2);
    let (first, second) = plain.split_at(before);
    let mut order = Vec::with_capacity(plain.len());
    for (i, p) in first.iter().enumerate() {
        order.push(*p);
        if let Some(q) = second.get(i) {
            order.push(*q);
        }
    }
    traced
        .iter()
        .zip(order)
        .map(|(t, p)| (t - p).max(0.0))
        .collect()
}

/// The counted syscalls of a run (every name, every kind of fd).
pub fn syscalls(counts: &Counts) -> u64 {
    counts.syscalls.values().sum()
}

/// The traced run's times with the counting's cost per syscall taken out of its system time
/// (never below zero), and what was taken, ns.
pub fn untraced(counts: &Counts, cost: &Summary) -> (Times, f64) {
    let taken = (syscalls(counts) as f64 * cost.median).min(counts.times.sys_ns);
    let mut t = counts.times;
    t.sys_ns -= taken;
    (t, taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_counted_loop_is_set_against_uncounted_ones_from_both_sides_in_turn() {
        // Uncounted: 10, 11, 12 before the counted block; 20, 21 after it.
        let plain = [10.0, 11.0, 12.0, 20.0, 21.0];
        let traced = [30.0, 30.0, 30.0, 30.0, 30.0];
        assert_eq!(paired(&traced, &plain), vec![20.0, 10.0, 19.0, 9.0, 18.0]);
        // Never below zero.
        assert_eq!(paired(&[5.0], &[9.0]), vec![0.0]);
    }

    #[test]
    fn the_tracing_cost_comes_out_of_the_system_time_and_no_further() {
        let mut c = Counts::default();
        c.syscalls.insert("getppid".into(), 1000);
        c.syscalls.insert("read:dev".into(), 1000);
        c.times = Times {
            user_ns: 5e5,
            sys_ns: 1e6,
            wall_ns: 2e6,
        };
        let cost = Summary::of(&[100.0, 120.0, 140.0]).unwrap();
        let (t, taken) = untraced(&c, &cost);
        assert_eq!(taken, 240_000.0);
        assert_eq!(t.sys_ns, 760_000.0);
        assert_eq!(t.user_ns, 5e5);
        let dear = Summary::of(&[1e6]).unwrap();
        assert_eq!(untraced(&c, &dear).0.sys_ns, 0.0);
    }
}
