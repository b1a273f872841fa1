//! The read and write terms at a program's own sizes. `costlab cost` measures file-read,
//! file-write and pipe-rw at 64 B, a page and 64 KiB (`unitcost::RW_SIZES`); a call's cost is
//! not one line across that range (a 4 KiB write that extends a file makes a page each call,
//! a 64 B one a page in 64), so the program's calls are priced on the segment between the two
//! measured sizes its mean size falls in: its fixed part and per-byte part are that segment's
//! intercept and slope, and a call of the mean size is priced at what the term measured there
//! (interpolated between the two). The mean is the program's own (rchar over its reads, wchar
//! over its writes: the kernel keeps no bytes per fd), never fitted on its times. A run whose
//! pipes crossed CPUs (`pipes_crossed`) has its pipe calls and bytes priced at `pipe-cross`,
//! the pair with its writer and reader on two CPUs.

use costlab_core::measure::unitcost::RW_SIZES;

use crate::count::Counts;
use crate::terms_of::{READS, WRITES};
use crate::unit::{Unit, Units};

/// The name of a sized term's figure at `size` other than its smallest ("file-read[4096]").
pub fn at_size(term: &str, size: u64) -> String {
    format!("{term}[{size}]")
}

/// A term's figure at each of `points` (its first, the smallest, stored under the term's own
/// name; the others as `at_size`); None where one is missing.
pub fn figures<'a>(units: &'a Units, term: &str, points: &[u64]) -> Option<Vec<&'a Unit>> {
    points
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            if i == 0 {
                units.get(term)
            } else {
                units.get(&at_size(term, p))
            }
        })
        .collect()
}

/// `units` with file-read, file-write and pipe-rw (and their per-byte parts) replaced by the
/// segment the program's mean size falls in, where the term was measured at every size of
/// `RW_SIZES`; a term measured at two sizes only stays the line through them.
pub fn at_program_sizes(counts: &Counts, units: &Units) -> Units {
    // The calls of a family, whatever kind of fd each went to (`read:file` is a read).
    let calls = |family: &[&str]| -> u64 {
        counts
            .syscalls
            .iter()
            .filter(|(n, _)| family.contains(&n.split(':').next().unwrap_or(n)))
            .map(|(_, c)| *c)
            .sum()
    };
    let (reads, writes) = (calls(&READS), calls(&WRITES));
    let mean = |bytes: u64, calls: u64| (calls > 0).then(|| bytes as f64 / calls as f64);
    let read = mean(counts.rchar, reads);
    let write = mean(counts.wchar, writes);
    let both = mean(counts.rchar + counts.wchar, reads + writes);
    let mut out = units.clone();
    for (term, mean, what) in [
        ("file-read", read, "read"),
        ("file-write", write, "write"),
        ("pipe-rw", both, "read and write"),
        ("pipe-cross", both, "read and write"),
    ] {
        let Some(mean) = mean else { continue };
        if let Some((fixed, per_byte)) = segment(units, term, mean, what) {
            out.insert(term.to_string(), fixed);
            out.insert(format!("{term}/byte"), per_byte);
        }
    }
    if pipes_crossed(counts) {
        for (one, across) in [
            ("pipe-rw", "pipe-cross"),
            ("pipe-rw/byte", "pipe-cross/byte"),
        ] {
            if let Some(u) = out.get(across).cloned() {
                let from = format!("{} (the run's wake-ups crossed CPUs: its pipes' writers and readers ran apart)", u.from);
                out.insert(one.to_string(), Unit { from, ..u });
            }
        }
    }
    out
}

/// Whether the run's pipes carried bytes from one CPU to another: it used pipes, and its
/// wake-ups crossed CPUs (an interrupt sent to wake a task on another CPU, or a task woken
/// on a CPU that had halted). Then a pipe's bytes are priced at `pipe-cross` (the writer on
/// one CPU, the reader on another), not at `pipe-rw` (both on one thread, the pages still in
/// its caches). A pipe whose two ends share a CPU wakes its reader there: no such wake-up.
pub fn pipes_crossed(counts: &Counts) -> bool {
    let piped = counts.syscalls.keys().any(|n| n.ends_with(":pipe"));
    let across = [("ipi", "sent"), ("wakeup", "on a halted cpu")]
        .iter()
        .any(|(c, e)| {
            counts
                .events
                .get(&(c.to_string(), e.to_string()))
                .is_some_and(|&n| n > 0)
        });
    piped && across
}

/// The note a run whose pipes crossed CPUs gets: why, and the two pairs' per-byte costs
/// (their 64 B-64 KiB slopes), or that `pipe-cross` was not measured here. None otherwise.
pub fn crossed_note(counts: &Counts, units: &Units) -> Option<String> {
    if !pipes_crossed(counts) {
        return None;
    }
    let n = |c: &str, e: &str| {
        counts
            .events
            .get(&(c.to_string(), e.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let why = format!(
        "the run's pipes crossed CPUs ({} interrupts sent to wake a task on another CPU, {} tasks woken on a CPU that had halted)",
        n("ipi", "sent"),
        n("wakeup", "on a halted cpu")
    );
    let per_byte = |t: &str| units.get(t).and_then(Unit::summary).map(|s| s.median);
    Some(match (per_byte("pipe-cross/byte"), per_byte("pipe-rw/byte")) {
        (Some(across), Some(one)) => format!(
            "{why}: its pipe calls and bytes are priced at pipe-cross, a write on one CPU and its read on another ({across:.3} ns a byte a pair), not at pipe-rw, both on one thread ({one:.3} ns)"
        ),
        (Some(across), None) => format!(
            "{why}: its pipe calls and bytes are priced at pipe-cross, a write on one CPU and its read on another ({across:.3} ns a byte a pair)"
        ),
        (None, _) => format!(
            "{why}, but pipe-cross (a write on one CPU and its read on another) is not measured here: its pipes are priced at pipe-rw, both on one thread, which reads the pipe's pages from its own caches (low)"
        ),
    })
}

/// (fixed part, per-byte part) of `term` on the segment of `RW_SIZES` that `mean` falls in
/// (below the smallest or above the largest, the nearest segment carried on), where every
/// size's figure is there. Sample by sample: where the segment falls (a page read costs less
/// than 64 bytes of a page not in a cache) the per-byte part is 0 and the fixed part the
/// figure at the mean; where its intercept is below zero, the fixed part is 0 and the
/// per-byte part the figure at the mean over the mean. Either way a call of the mean size is
/// priced at the segment's figure there.
fn segment(units: &Units, term: &str, mean: f64, what: &str) -> Option<(Unit, Unit)> {
    let figs = figures(units, term, &RW_SIZES)?;
    let i = RW_SIZES[1..RW_SIZES.len() - 1]
        .iter()
        .take_while(|&&s| mean > s as f64)
        .count();
    let (a, b) = (RW_SIZES[i] as f64, RW_SIZES[i + 1] as f64);
    let (lo, hi) = (figs[i], figs[i + 1]);
    let n = lo.samples.len().max(hi.samples.len());
    let (mut fixed, mut per_byte) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for k in 0..n {
        let la = lo.samples[k % lo.samples.len().max(1)];
        let lb = hi.samples[k % hi.samples.len().max(1)];
        let slope = (lb - la) / (b - a);
        let at_mean = (la + (mean - a) * slope).max(0.0);
        let (f, p) = if slope < 0.0 {
            (at_mean, 0.0)
        } else if la - a * slope < 0.0 {
            (0.0, at_mean / mean.max(1.0))
        } else {
            (la - a * slope, slope)
        };
        fixed.push(f);
        per_byte.push(p);
    }
    let mut rows = lo.rows.clone();
    rows.extend(hi.rows.iter().cloned());
    let from = format!(
        "{term} at {a} and {b} B (the segment this program's mean {what}, {mean:.0} B, falls in): {} and {}",
        lo.from, hi.from
    );
    let unit = |samples| Unit {
        samples,
        rows: rows.clone(),
        from: from.clone(),
    };
    Some((unit(fixed), unit(per_byte)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(x: f64) -> Unit {
        Unit {
            samples: vec![x],
            rows: Vec::new(),
            from: "t".into(),
        }
    }

    fn counts(rchar: u64, reads: u64) -> Counts {
        let mut c = Counts {
            rchar,
            ..Default::default()
        };
        c.syscalls.insert("read:file".into(), reads);
        c
    }

    fn read_units(l64: f64, l4k: f64, l64k: f64) -> Units {
        let mut u = Units::new();
        u.insert("file-read".into(), unit(l64));
        u.insert(at_size("file-read", 4096), unit(l4k));
        u.insert(at_size("file-read", 65536), unit(l64k));
        u.insert("file-read/byte".into(), unit(99.0));
        u
    }

    fn priced_call(u: &Units, mean: f64) -> f64 {
        u["file-read"].samples[0] + mean * u["file-read/byte"].samples[0]
    }

    #[test]
    fn a_call_of_the_mean_size_is_priced_at_the_segments_figure_there() {
        let u = read_units(300.0, 1300.0, 7000.0);
        // A mean of a page: the figure measured at a page, from either segment.
        let at_page = at_program_sizes(&counts(4096 * 10, 10), &u);
        assert!((priced_call(&at_page, 4096.0) - 1300.0).abs() < 1e-6);
        // Between 64 B and a page: on that segment, not the 64 B–64 KiB line.
        let small = at_program_sizes(&counts(2080 * 10, 10), &u);
        let want = 300.0 + (2080.0 - 64.0) * 1000.0 / 4032.0;
        assert!((priced_call(&small, 2080.0) - want).abs() < 1e-6);
        assert!((small["file-read"].samples[0] - (300.0 - 64.0 * 1000.0 / 4032.0)).abs() < 1e-6);
        // Above 64 KiB: the upper segment carried on.
        let big = at_program_sizes(&counts(131072 * 10, 10), &u);
        let slope = 5700.0 / 61440.0;
        assert!((big["file-read/byte"].samples[0] - slope).abs() < 1e-9);
        assert!(
            (priced_call(&big, 131072.0) - (1300.0 + (131072.0 - 4096.0) * slope)).abs() < 1e-6
        );
        assert!(big["file-read"].from.contains("4096 and 65536"));
    }

    #[test]
    fn a_falling_segment_or_one_below_zero_still_prices_the_mean_at_its_figure() {
        // A page read cheaper than 64 bytes of a page (each a page not in a cache).
        let u = read_units(500.0, 420.0, 4800.0);
        let s = at_program_sizes(&counts(1000 * 4, 4), &u);
        assert_eq!(s["file-read/byte"].samples[0], 0.0);
        let want = 500.0 + (1000.0 - 64.0) * (420.0 - 500.0) / 4032.0;
        assert!((s["file-read"].samples[0] - want).abs() < 1e-6);
        // An upper segment whose intercept is below zero: no fixed part, the mean's figure
        // over its bytes.
        let u = read_units(100.0, 200.0, 20000.0);
        let s = at_program_sizes(&counts(8192 * 3, 3), &u);
        assert_eq!(s["file-read"].samples[0], 0.0);
        let at = 200.0 + 4096.0 * 19800.0 / 61440.0;
        assert!((priced_call(&s, 8192.0) - at).abs() < 1e-6);
    }

    #[test]
    fn pipes_whose_wake_ups_crossed_cpus_are_priced_at_the_pair_across_cpus() {
        let mut u = Units::new();
        for (term, l64, l4k, l64k) in [
            ("pipe-rw", 500.0, 600.0, 10_600.0),
            ("pipe-cross", 800.0, 1000.0, 20_000.0),
        ] {
            u.insert(term.into(), unit(l64));
            u.insert(at_size(term, 4096), unit(l4k));
            u.insert(at_size(term, 65536), unit(l64k));
        }
        let mut c = Counts {
            rchar: 8192 * 10,
            wchar: 8192 * 10,
            ..Default::default()
        };
        c.syscalls.insert("read:pipe".into(), 10);
        c.syscalls.insert("write:pipe".into(), 10);
        let pair = |s: &Units| s["pipe-rw"].samples[0] + 8192.0 * s["pipe-rw/byte"].samples[0];
        // No wake-up across CPUs: the one-thread pair, at the program's mean size.
        let one = at_program_sizes(&c, &u);
        assert!(!pipes_crossed(&c));
        assert!((pair(&one) - (600.0 + 4096.0 * 10_000.0 / 61440.0)).abs() < 1e-6);
        // An interrupt sent to wake a task elsewhere: the pair across CPUs, named so.
        c.events.insert(("ipi".into(), "sent".into()), 3);
        let across = at_program_sizes(&c, &u);
        assert!(pipes_crossed(&c));
        assert!((pair(&across) - (1000.0 + 4096.0 * 19_000.0 / 61440.0)).abs() < 1e-6);
        assert!(across["pipe-rw"].from.contains("crossed CPUs"));
        // The note says why, with both pairs' per-byte costs; without pipe-cross, that too.
        u.insert("pipe-rw/byte".into(), unit(0.15));
        u.insert("pipe-cross/byte".into(), unit(0.3));
        let note = crossed_note(&c, &u).unwrap();
        assert!(note.contains("3 interrupts sent"), "{note}");
        assert!(note.contains("(0.300 ns a byte a pair)"), "{note}");
        assert!(note.contains("(0.150 ns)"), "{note}");
        u.remove("pipe-cross/byte");
        let note = crossed_note(&c, &u).unwrap();
        assert!(
            note.contains(
                "pipe-cross (a write on one CPU and its read on another) is not measured here"
            ),
            "{note}"
        );
        assert_eq!(crossed_note(&Counts::default(), &u), None);
        // No pipes: nothing changes, whatever the wake-ups.
        c.syscalls.clear();
        c.syscalls.insert("read:file".into(), 10);
        assert!(!pipes_crossed(&c));
    }

    #[test]
    fn a_term_without_a_pages_figure_or_a_program_without_reads_keeps_its_line() {
        let mut u = read_units(300.0, 1300.0, 7000.0);
        u.remove(&at_size("file-read", 4096));
        let s = at_program_sizes(&counts(4096 * 10, 10), &u);
        assert_eq!(s["file-read/byte"].samples[0], 99.0);
        let u = read_units(300.0, 1300.0, 7000.0);
        let s = at_program_sizes(&Counts::default(), &u);
        assert_eq!(s["file-read/byte"].samples[0], 99.0);
    }
}
