//! The tracer's own cost in a traced run: its cost per event (the history's calibration, or
//! measured now) times the run's events, and its timer interrupts at the local timer line's
//! time an interrupt.

use costlab_core::measure::units::human_ns;
use costlab_history::report::Outcome;
use costlab_lab::Ctx;

use crate::verify::{calibration, overhead};
use crate::{count, measured, pricing};

/// The tracer's own cost in the traced run, at its cost per event (`verify::overhead`'s
/// loops: the history's fresh figures, or measured here now and stored with this run) and
/// said in a note; None (and a note) where it cannot be measured.
pub(crate) fn tracer_cost(
    ctx: &Ctx,
    again: bool,
    split: &measured::Split,
    counts: &count::Counts,
    o: &mut Outcome,
) -> Option<(f64, measured::TracerCost)> {
    let switches = counts.class_total("switch");
    match calibration::get(ctx, calibration::ROUNDS, counts.samples.is_some(), again) {
        Ok(cal) => {
            let oh = cal.overhead;
            o.results.extend(cal.rows);
            let inodes = counts.event("stats", "first touches");
            let windows = counts.event("file faults", "first touches");
            // A file fault's first touch of a window is the same insert into the same set as
            // a stat's of an inode: both at the inode loop's cost.
            let ev = overhead::Events::of(split, switches, inodes + windows);
            // The tracers' own timer interrupts (the sampler's, one a sample, and the split's
            // cpu-clock) are on the local timer's line, each timed there: their count at the
            // line's time an interrupt, where the line was measured; else the loops' share.
            let sampled = counts.samples.as_ref().map_or(0, |s| s.total);
            let parts = pricing::timer_parts(split, sampled);
            let tick_ns = match split.line("irq", "local_timer") {
                Some(l) if l.count > 0 => {
                    (parts.sampler + parts.split) as f64 * l.cpu_ns as f64 / l.count as f64
                }
                _ => oh.of_time(split.usage_ns as f64),
            };
            let ns = oh.of(&ev) + tick_ns;
            o.notes.push(format!(
                "{} ({}): {} in this run{}",
                oh.line(),
                cal.origin,
                human_ns(ns),
                if parts.sampler + parts.split > 0 {
                    format!(
                        " (of it {} the {} timer interrupts of the sampler and the split, at the local timer line's time an interrupt)",
                        human_ns(tick_ns),
                        parts.sampler + parts.split
                    )
                } else {
                    String::new()
                }
            ));
            let per_event = measured::TracerCost {
                syscall: oh.syscall,
                fault: oh.fault,
                switch: oh.switch,
                switch_local: Some(oh.switch_local),
                tick_ns,
                touch: 0.0,
                lookup: oh.lookup,
                path: oh.path,
                mmap: oh.mmap,
                inode: oh.inode,
                inodes,
                windows,
                file_fault: oh.file_fault,
                exec: oh.exec,
            };
            Some((ns, per_event))
        }
        Err(e) if costlab_core::measure::cancel::is_interrupt(&e) => None,
        Err(e) => {
            o.notes.push(format!(
                "the tracer's own cost was not measured ({}): the kernel time includes it",
                costlab_core::error::one_line(&e)
            ));
            None
        }
    }
}
