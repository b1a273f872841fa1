//! The times the price is checked against: the untraced runs' where there are any, else the
//! traced run's own, less the counting's cost where it was measured here.

use anyhow::Result;

use crate::args::PriceArgs;
use crate::count::Times;
use crate::source::Counted;
use crate::{tracecost, LAB, TRACING_PAIRS};
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
            "times from {} untraced run(s) of the same command after the traced one (their stdin, stdout and stderr were /dev/null)",
            untraced.len()
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
