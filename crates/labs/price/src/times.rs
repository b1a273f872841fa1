//! The times the price is checked against: the untraced runs' where there are any, else the
//! traced run's own, less the counting's cost where it was measured here.

use anyhow::Result;

use crate::args::PriceArgs;
use crate::count::Times;
use crate::source::Counted;
use crate::{tracecost, LAB, TRACING_PAIRS};
use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;
use costlab_history::report::{Outcome, ResultRow};

/// The times to check against, each choice said in a note; `saved` when the counts came
/// from --from.
pub fn times_for(
    args: &PriceArgs,
    saved: bool,
    counted: &Counted,
    o: &mut Outcome,
) -> Result<Vec<Times>> {
    let (counts, untraced) = (&counted.counts, &counted.untraced);
    if untraced.is_empty() && saved {
        // Counted elsewhere: the counting's cost there is not known here, so none is taken out.
        o.notes.push(
            "times from the traced run as saved: its system time includes the counting's own cost there".into(),
        );
        return Ok(vec![counts.times]);
    }
    if !untraced.is_empty() {
        o.notes.push(format!(
            "times from {} untraced run(s) of the same command after the traced one (their stdin, stdout and stderr were /dev/null){}",
            untraced.len(),
            if counted.untraced_by_cgroup {
                "; each ran in a cgroup of its own, and its user and system time are that cgroup's cpu.stat: the timer's ticks over all the run's processes, scaled to its CPU time (rusage splits each process by its own ticks, and a child shorter than a tick that met none counts as all user time)"
            } else {
                "; user and system time from rusage (no cgroup could be made for them): a child shorter than a tick that met none counts as all user time"
            }
        ));
        return Ok(untraced.clone());
    }
    if counts.measured.is_some() && args.pid.is_none() {
        // The split counted the syscalls itself: the counter whose cost tracecost measures
        // did not run, and the split's own cost per syscall is not measured here.
        o.notes.push(
            "times from the traced run: its system time includes the measured split's own cost (two tracepoints and two clock reads a syscall), not taken out".into(),
        );
        return Ok(vec![counts.times]);
    }
    // The traced run's own times: take the counting's cost out of its system time.
    let whose = if args.pid.is_some() {
        "the process's CPU time while it was counted (/proc/PID/stat, clock ticks)"
    } else {
        "the traced run"
    };
    let cost = tracecost::per_syscall(TRACING_PAIRS)?;
    o.results.extend(ResultRow::new(
        LAB,
        costlab_core::case! {"class" => "tracing", "event" => "per-syscall", "command" => counted.cmdline.as_str()},
        "latency",
        "ns",
        cost.clone(),
    ));
    Ok(match Summary::of(&cost) {
        Some(c) => {
            let (t, taken) = tracecost::untraced(counts, &c);
            o.notes.push(format!(
                "times from {whose}, less the counting's own cost: {} syscalls x {} each (the counter's cost per getppid, measured here now) = {} taken out of its system time",
                tracecost::syscalls(counts),
                costlab_core::measure::units::human_ns(c.median),
                costlab_core::measure::units::human_ns(taken)
            ));
            vec![t]
        }
        None => vec![counts.times],
    })
}

/// The traced run's figures net of the tracer's calibrated cost: its kernel time (the
/// split's) and its whole CPU time (the cgroup's usage).
#[derive(Debug, Clone, Copy)]
pub struct Traced {
    pub kernel_ns: f64,
    pub cpu_ns: f64,
    /// Its waits that ended on a CPU woken from a halt.
    pub halted: u64,
}

/// The traced run set against the untraced runs: the check that the tracer's cost taken out
/// is the cost it added.
#[derive(Debug, Clone)]
pub struct UntracedCheck {
    /// The traced kernel time over the untraced runs' mean system time.
    pub kernel_ratio: f64,
    /// The traced CPU time over the untraced runs' mean CPU time.
    pub cpu_ratio: f64,
    pub text: String,
}

/// Check the traced run against the untraced runs' system times (`sys`) and CPU times
/// (`cpu`), one a run, by their means. The kernel time is the check, but each run's
/// system time is whole ticks of the timer scaled (a short program's median sits on one tick
/// count, where the mean sees them all, and it is still coarse); its CPU time is exact, and
/// tracing leaves the program's own user work as it was, so what the traced run used beyond
/// the untraced ones, net of the calibrated cost, is tracer cost the calibration missed (or
/// the program's own spread from run to run).
pub fn untraced_check(traced: Traced, sys: &[f64], cpu: &[f64]) -> UntracedCheck {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (sys_mean, cpu_mean) = (mean(sys), mean(cpu));
    let kernel_ratio = traced.kernel_ns / sys_mean.max(1.0);
    let cpu_ratio = traced.cpu_ns / cpu_mean.max(1.0);
    let (lo, hi) = sys
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let runs = match sys.len() {
        0 | 1 => "one untraced run".to_string(),
        n => format!(
            "the mean of {n} untraced runs, {}–{}",
            human_ns(lo),
            human_ns(hi)
        ),
    };
    let within = |r: f64| (0.85..=1.15).contains(&r);
    let kernel = if within(kernel_ratio) {
        "within 15%".to_string()
    } else if kernel_ratio > 1.0 && traced.halted > 0 {
        format!("outside 15% ({}, and {} of its waits ended on a CPU woken from a halt: the kernel charges such a wake-up's way back in, from the wake-up through the idle loop's exit, to the task's CPU time, but parts CPU time into user and system by its ticks, and a tick there finds the idle task, so that time is shared out by the run's user share and its system time reads low; the CPU time below is exact)", runs, traced.halted)
    } else {
        format!("outside 15% (a short run's system time is a few ticks: {runs}; --runs N says it finer)")
    };
    let extra = traced.cpu_ns - cpu_mean;
    let cpu = if extra.abs() <= 0.02 * cpu_mean {
        "the tracer's cost taken out is the cost it added, within 2% of the CPU time".to_string()
    } else if extra > 0.0 {
        format!(
            "it used {} more than they did: tracer cost its calibration did not take out (or the program's own spread from run to run), {:.0}% of the traced kernel time",
            human_ns(extra),
            100.0 * extra / traced.kernel_ns.max(1.0)
        )
    } else {
        format!(
            "they used {} more than it did: the program's own spread from run to run, or a calibration above what the tracer cost here",
            human_ns(-extra)
        )
    };
    let text = format!(
        "untraced, the program spent {} in the kernel and {} on CPU ({runs}): the traced run's kernel time, net of the tracer, is {kernel_ratio:.2}x the first, {kernel}; its CPU time, net of the tracer, is {cpu_ratio:.2}x the second (CPU time is exact, system time is ticks): {cpu}",
        human_ns(sys_mean),
        human_ns(cpu_mean)
    );
    UntracedCheck {
        kernel_ratio,
        cpu_ratio,
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traced_run_is_checked_against_the_untraced_runs() {
        let t = |k: f64, c: f64| Traced {
            kernel_ns: k,
            cpu_ns: c,
            halted: 0,
        };
        let c = untraced_check(t(44e6, 100e6), &[30e6, 50e6, 40e6], &[90e6, 110e6, 100e6]);
        assert!((c.kernel_ratio - 1.1).abs() < 1e-9, "{c:?}");
        assert!((c.cpu_ratio - 1.0).abs() < 1e-9, "{c:?}");
        assert!(
            c.text.contains("40.00 ms in the kernel and 100.00 ms on CPU (the mean of 3 untraced runs, 30.00 ms–50.00 ms)"),
            "{}",
            c.text
        );
        assert!(c.text.contains("1.10x the first, within 15%"), "{}", c.text);
        assert!(
            c.text.ends_with(
                "the tracer's cost taken out is the cost it added, within 2% of the CPU time"
            ),
            "{}",
            c.text
        );
        // The traced run used 10 ms more CPU than the untraced one: a quarter of its kernel time.
        let c = untraced_check(t(40e6, 110e6), &[20e6], &[100e6]);
        assert_eq!(c.kernel_ratio, 2.0);
        assert!((c.cpu_ratio - 1.1).abs() < 1e-9);
        assert!(
            c.text.contains("(one untraced run)")
                && c.text.contains("2.00x the first, outside 15%"),
            "{}",
            c.text
        );
        assert!(
            c.text.contains("it used 10.00 ms more than they did")
                && c.text.contains("25% of the traced kernel time"),
            "{}",
            c.text
        );
        // A run whose waits ended on halted CPUs: its system time reads low, and says why.
        let woken = Traced {
            halted: 3000,
            ..t(40e6, 110e6)
        };
        let c = untraced_check(woken, &[20e6], &[100e6]);
        assert!(
            c.text.contains("2.00x the first, outside 15% (one untraced run, and 3000 of its waits ended on a CPU woken from a halt")
                && c.text.contains("its system time reads low"),
            "{}",
            c.text
        );
        let c = untraced_check(t(40e6, 90e6), &[40e6], &[100e6]);
        assert!(
            c.text.contains("they used 10.00 ms more than it did"),
            "{}",
            c.text
        );
        // No runs or no time at all: ratios against a nanosecond, never a division by zero.
        assert!(untraced_check(t(5.0, 5.0), &[0.0], &[0.0])
            .kernel_ratio
            .is_finite());
        assert!(untraced_check(t(5.0, 5.0), &[], &[]).cpu_ratio.is_finite());
    }
}
