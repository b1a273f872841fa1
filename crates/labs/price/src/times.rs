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

/// The traced run's kernel time net of the tracer (`net`) over the untraced runs' mean
/// system time (`sys`, one a run), and the line that says it: the check that the tracer's
/// cost taken out is the cost it added (within 15%, or the line says it is not). The mean,
/// not the median: each run's system time is whole ticks of the timer scaled, and a short
/// program's median sits on one tick count where the mean sees them all.
pub fn untraced_line(net: f64, sys: &[f64]) -> (f64, String) {
    let n = sys.len().max(1);
    let mean = sys.iter().sum::<f64>() / n as f64;
    let r = net / mean.max(1.0);
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
    let tail = if (0.85..=1.15).contains(&r) {
        "within 15%".to_string()
    } else {
        format!(
            "outside 15%: the tracer's cost taken out is not all it added to this program, or the untraced runs' few ticks of the timer say their system time too coarsely ({runs}; more runs, --runs N, say it finer)"
        )
    };
    (
        r,
        format!(
            "untraced, the program spent {} in the kernel ({runs}): the traced run's kernel time, net of the tracer, is {r:.2}x that, {tail}",
            human_ns(mean)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traced_kernel_time_is_checked_against_the_untraced_runs() {
        let (r, text) = untraced_line(44e6, &[30e6, 50e6, 40e6]);
        assert!((r - 1.1).abs() < 1e-9, "{r}");
        assert!(
            text.contains(
                "40.00 ms in the kernel (the mean of 3 untraced runs, 30.00 ms–50.00 ms)"
            ),
            "{text}"
        );
        assert!(text.ends_with("1.10x that, within 15%"), "{text}");
        let (r, text) = untraced_line(40e6, &[20e6]);
        assert_eq!(r, 2.0);
        assert!(
            text.contains("(one untraced run)") && text.contains("2.00x that, outside 15%"),
            "{text}"
        );
        // No system time at all: a ratio against a nanosecond, never a division by zero.
        assert!(untraced_line(5.0, &[0.0]).0.is_finite());
        assert!(untraced_line(5.0, &[]).0.is_finite());
    }
}
