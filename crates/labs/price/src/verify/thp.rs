//! The huge-page model, as a trial judges it.
//!
//! Before (costlab up to issue 34): the minor faults / 512, each at a 2 MiB first touch. It
//! held only for a program that touches its memory once, densely, and never gives it back.
//!
//! Now: it predicts from the 4 KiB run's counts only where they can know the answer, and
//! withdraws itself elsewhere, naming why:
//! - a Go program: its runtime marks its heap for huge pages itself and its scavenger returns
//!   memory with madvise, which splits a huge page it returns part of; each one touched again
//!   is a new 2 MiB fault that zeroes 2 MiB. How many, a 4 KiB run cannot count;
//! - a program that returns memory with madvise: the same splits and refaults;
//! - a heap that grows and shrinks by brk in steps under 2 MiB: a THP fault needs the whole
//!   2 MiB inside the mapping, so most of its faults stay 4 KiB (khugepaged collapses them
//!   later, on its own CPU), and glibc's hugetlb tunable splits and refaults at each move.
//!
//! After a trial, the THP run's own counted events are priced at the cost lab's terms: its
//! huge faults (thp_fault_alloc, each zeroing 2 MiB: the fault-thp term) and its remaining
//! 4 KiB faults, against the 4 KiB run's faults. Splits and compaction stalls have no term and
//! are said with their counts; collapses are khugepaged's CPU, not the program's.

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use super::measure::RunMeasure;
use super::verdict::Predicted;
use crate::count::Counts;
use crate::pricing::Units;

/// A model's answer before the trial: a saving (bounds, ns) and how it got it, or why it
/// withdraws.
#[derive(Debug, Clone, PartialEq)]
pub enum Prediction {
    Saves(Predicted, String),
    Withdrawn(String),
}

fn calls(counts: &Counts, name: &str) -> u64 {
    counts
        .syscalls
        .iter()
        .filter(|(k, _)| crate::pricing::base_name(k) == name)
        .map(|(_, n)| *n)
        .sum()
}

/// f x fault-4k - ceil(f / 512) x fault-thp, per unit sample: (min, median, max) ns.
fn dense(f: u64, units: &Units) -> Option<(f64, f64, f64)> {
    let (small, huge) = (units.get("fault-4k")?, units.get("fault-thp")?);
    let after = f.div_ceil(512) as f64;
    let saved: Vec<f64> = small
        .samples
        .iter()
        .enumerate()
        .map(|(i, x)| f as f64 * x - after * huge.samples[i % huge.samples.len()])
        .collect();
    let s = Summary::of(&saved)?;
    Some((s.min, s.median, s.max))
}

/// The model before issue 34 (faults / 512 at a 2 MiB first touch), kept to show beside.
pub fn before(counts: &Counts, units: &Units) -> Option<(f64, f64, f64)> {
    let f = counts.anon_faults();
    (f >= 512).then(|| dense(f, units))?
}

/// The model now: the saving in kernel time, or why it withdraws.
pub fn predict(counts: &Counts, units: &Units, go: bool) -> Prediction {
    let f = counts.anon_faults();
    let madvise = calls(counts, "madvise");
    if go {
        return Prediction::Withdrawn(format!(
            "a Go program: its runtime asks for huge pages itself and returns memory with madvise ({madvise} calls counted); under THP each return of part of a huge page splits it, and each split page touched again is a new 2 MiB fault that zeroes 2 MiB: a 4 KiB run cannot count them"
        ));
    }
    // A THP fault needs the whole aligned 2 MiB inside the mapping when it happens: a heap
    // that grows (and is trimmed) by brk in smaller steps mostly faults 4 KiB pages, and with
    // glibc's tunable each move of its top splits or refaults a huge page.
    let brk = calls(counts, "brk");
    let step = (f * 4096).checked_div(brk).unwrap_or(u64::MAX);
    if brk > 4 && step < 2 << 20 {
        return Prediction::Withdrawn(format!(
            "its heap moves by brk {brk} times, ~{} KiB a call: a huge page needs the whole 2 MiB inside the mapping when it is touched, and each move of the top splits or refaults one; how many, a 4 KiB run cannot count",
            step / 1024
        ));
    }
    if madvise > 0 {
        return Prediction::Withdrawn(format!(
            "the program returns memory with madvise ({madvise} calls counted): under THP each return inside a huge page splits it and its refault zeroes 2 MiB again; a 4 KiB run cannot count those"
        ));
    }
    match dense(f, units) {
        Some(p) => Prediction::Saves(
            Some(p),
            format!(
                "{f} faults as ~{} 2 MiB first touches, each zeroing 2 MiB (the cost lab's fault-thp); leaves out: file-backed faults (THP does not change them; counted here as anonymous), regions touched only in part (each still zeroes 2 MiB), and the TLB's share of user time",
                f.div_ceil(512)
            ),
        ),
        None => Prediction::Withdrawn(
            "no fault-4k and fault-thp terms measured here: run costlab cost".into(),
        ),
    }
}

/// The THP run's counted events priced, against the 4 KiB run's faults: the change in
/// kernel time they explain (positive: saved), ns, and a line on what is left out.
pub fn explained(a: &RunMeasure, b: &RunMeasure, units: &Units) -> Option<(f64, String)> {
    let (small, huge) = (units.get("fault-4k")?, units.get("fault-thp")?);
    let (small, huge) = (small.summary()?.median, huge.summary()?.median);
    let huge_faults = b.thp_event("thp_fault_alloc");
    let b_small = b.minor_faults.saturating_sub(huge_faults);
    let saved =
        a.minor_faults as f64 * small - (b_small as f64 * small + huge_faults as f64 * huge);
    let splits = b.thp_event("thp_split_pmd") + b.thp_event("thp_split_page");
    let stalls = b.thp_event("compact_stall");
    let collapses = b.thp_event("thp_collapse_alloc");
    let scope = if b.thp_scope == "machine" {
        " (THP events from /proc/vmstat: the whole machine's over the run)"
    } else {
        ""
    };
    let calls = if b.memory_calls.is_empty() {
        String::new()
    } else {
        format!(
            "; memory returned: madvise {} calls with THP against {} without, munmap {} against {}, brk {} against {}",
            b.calls("madvise"),
            a.calls("madvise"),
            b.calls("munmap"),
            a.calls("munmap"),
            b.calls("brk"),
            a.calls("brk")
        )
    };
    Some((
        saved,
        format!(
            "its THP run's events: {huge_faults} huge faults at {} each (2 MiB zeroed), {b_small} 4 KiB faults against {} without; no term prices its {splits} splits or {stalls} compaction stalls; its {collapses} collapses are khugepaged's CPU, not the program's{calls}{scope}",
            human_ns(huge),
            a.minor_faults
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::Unit;

    fn units() -> Units {
        let mut u = Units::new();
        for (k, v) in [("fault-4k", 1000.0), ("fault-thp", 60_000.0)] {
            u.insert(
                k.into(),
                Unit {
                    samples: vec![v],
                    rows: Vec::new(),
                    from: "fixture".into(),
                },
            );
        }
        u
    }

    fn counts(faults: u64, madvise: u64) -> Counts {
        let mut c = Counts::default();
        c.events.insert(("fault".into(), "minor".into()), faults);
        if madvise > 0 {
            c.syscalls.insert("madvise".into(), madvise);
        }
        c
    }

    #[test]
    fn a_program_that_touches_once_is_priced_as_before() {
        let c = counts(65_536, 0);
        let before = before(&c, &units()).unwrap();
        // 65536 x 1 us - 128 x 60 us
        assert!((before.1 - (65_536e3 - 128.0 * 60e3)).abs() < 1.0);
        match predict(&c, &units(), false) {
            Prediction::Saves(Some(p), why) => {
                assert_eq!(p, before);
                assert!(why.contains("leaves out"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_go_program_or_one_that_returns_memory_withdraws() {
        match predict(&counts(65_536, 40), &units(), true) {
            Prediction::Withdrawn(why) => assert!(why.starts_with("a Go program"), "{why}"),
            other => panic!("{other:?}"),
        }
        match predict(&counts(65_536, 3), &units(), false) {
            Prediction::Withdrawn(why) => assert!(why.contains("3 calls"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut heap = counts(65_536, 0);
        heap.syscalls.insert("brk".into(), 2000);
        match predict(&heap, &units(), false) {
            Prediction::Withdrawn(why) => {
                assert!(why.contains("brk 2000 times, ~131 KiB"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // A few brk calls (a loader's, a small heap's) do not make a program's faults unknowable.
        heap.syscalls.insert("brk".into(), 3);
        assert!(matches!(
            predict(&heap, &units(), false),
            Prediction::Saves(..)
        ));
        assert!(matches!(
            predict(&counts(65_536, 0), &Units::new(), false),
            Prediction::Withdrawn(_)
        ));
    }

    #[test]
    fn the_thp_runs_events_explain_the_change() {
        let a = RunMeasure {
            minor_faults: 10_000,
            ..Default::default()
        };
        let mut b = RunMeasure {
            minor_faults: 600,
            thp_scope: "cgroup",
            ..Default::default()
        };
        b.thp.insert("thp_fault_alloc".into(), 100);
        b.thp.insert("thp_split_pmd".into(), 7);
        b.memory_calls.insert("madvise".into(), 40);
        let (saved, why) = explained(&a, &b, &units()).unwrap();
        assert!(
            why.contains("madvise 40 calls with THP against 0 without"),
            "{why}"
        );
        // 10000 x 1 us - (500 x 1 us + 100 x 60 us) = 3.5 ms
        assert!((saved - 3.5e6).abs() < 1.0, "{saved}");
        assert!(why.contains("7 splits"), "{why}");
    }
}
