//! The wake-up terms read at the run's own waits. `wake-ipi` (the waker's interrupt) and
//! `wake-halted` (the wakee's way back in) are measured with the sleeper's CPU idle for each
//! of `ipi::IDLE_US`, and both cost more the longer that CPU sat halted (in a VM the host
//! takes a vCPU that halts long further away). A run's waits that ended on a halted CPU are
//! as long as its split says: each such line's time off CPU over its waits. Each line's
//! wake-ups are read there, on the line through the two idle times around its wait (by the
//! logarithm of the time: the points are 50, 250 and 1000 us), held at the end points beyond
//! them, and the lines are weighted by their wake-ups on a halted CPU (the mean of the prices,
//! not the price of the mean: a shell's one wait of seconds for its child moves nothing). A
//! history that holds only the shortest idle time (a run before 2026-12-08) prices at it, as
//! before.

use costlab_core::measure::unitcost::{ipi::IDLE_US, WAIT_TERMS};
use costlab_core::measure::units::human_ns;

use crate::count::Counts;
use crate::measured::Split;
use crate::sizing::figures;
use crate::unit::{Unit, Units};
use costlab_history::report::ResultRow;

/// The run's waits that ended on a halted CPU, by line: (that line's wake-ups on a halted
/// CPU, its mean wait in µs: its time off CPU over its waits), for each line that took one.
pub fn halted_waits(split: &Split) -> Vec<(f64, f64)> {
    split
        .lines
        .iter()
        .filter(|l| l.halted_in > 0 && l.waits > 0)
        .map(|l| {
            (
                l.halted_in as f64,
                l.wait_ns as f64 / l.waits as f64 / 1000.0,
            )
        })
        .collect()
}

/// The run's mean wait on a halted CPU as the terms read it: each line's wait held within the
/// curve's ends (a shell's one wait of seconds for its child moves nothing), weighted by its
/// wake-ups. None without any.
fn mean_wait(waits: &[(f64, f64)]) -> Option<f64> {
    let total: f64 = waits.iter().map(|w| w.0).sum();
    let last = IDLE_US.len() - 1;
    (total > 0.0).then(|| {
        waits
            .iter()
            .map(|&(n, w)| n / total * w.clamp(IDLE_US[0] as f64, IDLE_US[last] as f64))
            .sum()
    })
}

/// `term` over the run's waits: each line's wake-ups at its own mean wait (`at_wait`), the
/// lines weighted by their wake-ups, sample by sample.
fn over_waits(units: &Units, term: &str, waits: &[(f64, f64)]) -> Option<Unit> {
    let total: f64 = waits.iter().map(|w| w.0).sum();
    if total <= 0.0 {
        return None;
    }
    let each: Vec<(f64, Unit)> = waits
        .iter()
        .map(|&(n, w)| at_wait(units, term, w).map(|u| (n / total, u)))
        .collect::<Option<_>>()?;
    let n = each.iter().map(|(_, u)| u.samples.len()).max().unwrap_or(0);
    let samples = (0..n)
        .map(|k| {
            each.iter()
                .map(|(share, u)| share * u.samples[k % u.samples.len().max(1)])
                .sum()
        })
        .collect();
    let mut rows: Vec<ResultRow> = Vec::new();
    for r in each.iter().flat_map(|(_, u)| &u.rows) {
        if !rows.iter().any(|x| x.name() == r.name()) {
            rows.push(r.clone());
        }
    }
    Some(Unit {
        samples,
        rows,
        from: format!(
            "{term} at the run's waits on a halted CPU, each line's on its curve over {} us: {}",
            IDLE_US.map(|i| i.to_string()).join(", "),
            each[0].1.from
        ),
    })
}

/// `term` read at `wait_us` on its idle-time curve: between the two points around it, by the
/// logarithm of the time, sample by sample (the k-th of each, cycling a shorter one); at the
/// nearer end point beyond them. None where a point is missing.
pub fn at_wait(units: &Units, term: &str, wait_us: f64) -> Option<Unit> {
    let figs = figures(units, term, &IDLE_US)?;
    let last = IDLE_US.len() - 1;
    let w = wait_us.clamp(IDLE_US[0] as f64, IDLE_US[last] as f64);
    let i = IDLE_US[1..last]
        .iter()
        .take_while(|&&x| w > x as f64)
        .count();
    let (a, b) = ((IDLE_US[i] as f64).ln(), (IDLE_US[i + 1] as f64).ln());
    let t = (w.ln() - a) / (b - a);
    let (lo, hi) = (figs[i], figs[i + 1]);
    let n = lo.samples.len().max(hi.samples.len());
    let samples = (0..n)
        .map(|k| {
            let x = lo.samples[k % lo.samples.len().max(1)];
            let y = hi.samples[k % hi.samples.len().max(1)];
            x + t * (y - x)
        })
        .collect();
    let mut rows = lo.rows.clone();
    rows.extend(hi.rows.iter().cloned());
    Some(Unit {
        samples,
        rows,
        from: format!(
            "{term} at the run's waits, {wait_us:.0} us (between its {} and {} us figures): {} and {}",
            IDLE_US[i],
            IDLE_US[i + 1],
            lo.from,
            hi.from
        ),
    })
}

/// A wake on a halted CPU, beyond the switch every wait is priced at: the wakee's side of a
/// cross-CPU wake-up (`wake-halted`) less a switch (a hand-off without its futex calls).
pub fn halt_in(units: &Units) -> Option<Unit> {
    let h = units.get("wake-halted")?;
    Some(match units.get("switch") {
        Some(s) => h.minus(&[s]),
        None => h.clone(),
    })
}

/// `units` with the wake-up terms read at the run's waits on a halted CPU, and `halt-in`
/// derived again from the new `wake-halted`; and the note that says so. Unchanged (and no
/// note) where the run took no wake-up on a halted CPU or the curve is not stored.
pub fn at_program_waits(counts: &Counts, units: &Units) -> (Units, Option<String>) {
    let waits = counts
        .measured
        .as_ref()
        .map(halted_waits)
        .unwrap_or_default();
    let Some(mean) = mean_wait(&waits) else {
        return (units.clone(), None);
    };
    let mut out = units.clone();
    let mut read = Vec::new();
    for term in WAIT_TERMS {
        let Some(u) = over_waits(units, term, &waits) else {
            continue;
        };
        if let Some(s) = u.summary() {
            let base = units.get(term).and_then(Unit::summary).map(|b| b.median);
            read.push(match base {
                Some(b) => format!(
                    "{term} {} (at {} us: {})",
                    human_ns(s.median),
                    IDLE_US[0],
                    human_ns(b)
                ),
                None => format!("{term} {}", human_ns(s.median)),
            });
        }
        out.insert(term.to_string(), u);
    }
    if read.is_empty() {
        return (out, None);
    }
    if let Some(h) = halt_in(&out) {
        out.insert("halt-in".into(), h);
    }
    let note = format!(
        "wake-ups: the run's waits that ended on a halted CPU lasted {mean:.0} us on average (each line's time off CPU over its waits, weighted by its wake-ups on a halted CPU, held within {}-{} us), and a CPU halted longer costs both sides more: each line's wake-ups read at its own wait, {} on average",
        IDLE_US[0],
        IDLE_US[IDLE_US.len() - 1],
        read.join(", ")
    );
    (out, Some(note))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::Line;
    use crate::sizing::at_size;

    fn unit(x: f64) -> Unit {
        Unit {
            samples: vec![x, x],
            rows: vec![],
            from: "t".into(),
        }
    }

    fn curve(a: f64, b: f64, c: f64) -> Units {
        let mut u = Units::new();
        u.insert("wake-halted".into(), unit(a));
        u.insert(at_size("wake-halted", IDLE_US[1]), unit(b));
        u.insert(at_size("wake-halted", IDLE_US[2]), unit(c));
        u
    }

    fn median(u: &Unit) -> f64 {
        u.summary().unwrap().median
    }

    #[test]
    fn a_wait_is_read_between_the_idle_times_around_it_by_their_logarithm() {
        let u = curve(10_000.0, 12_000.0, 16_000.0);
        // At the points themselves.
        assert_eq!(median(&at_wait(&u, "wake-halted", 50.0).unwrap()), 10_000.0);
        assert_eq!(
            median(&at_wait(&u, "wake-halted", 250.0).unwrap()),
            12_000.0
        );
        assert_eq!(
            median(&at_wait(&u, "wake-halted", 1000.0).unwrap()),
            16_000.0
        );
        // 500 us is half way from 250 to 1000 by the logarithm.
        let mid = median(&at_wait(&u, "wake-halted", 500.0).unwrap());
        assert!((mid - 14_000.0).abs() < 1e-6, "{mid}");
        // Held at the ends beyond them.
        assert_eq!(median(&at_wait(&u, "wake-halted", 5.0).unwrap()), 10_000.0);
        assert_eq!(median(&at_wait(&u, "wake-halted", 1e6).unwrap()), 16_000.0);
        // A history with the shortest idle time only has no curve.
        let mut old = Units::new();
        old.insert("wake-halted".into(), unit(10_000.0));
        assert!(at_wait(&old, "wake-halted", 500.0).is_none());
    }

    fn line(event: &str, wait_ns: u64, waits: u64, halted_in: u64) -> Line {
        Line {
            class: "syscall".into(),
            event: event.into(),
            count: waits,
            wait_ns,
            waits,
            halted_in,
            ..Line::default()
        }
    }

    #[test]
    fn each_line_is_read_at_its_own_wait_weighted_by_its_halted_wake_ups() {
        let split = Split {
            lines: vec![
                // 1000 waits of 900 us, 900 of them back on a halted CPU.
                line("write", 900_000_000, 1000, 900),
                // 100 waits of 100 us, all back on a halted CPU.
                line("read", 10_000_000, 100, 100),
                // Waits that never halted count for nothing.
                line("futex", 5_000_000_000, 10, 0),
            ],
            ..Split::default()
        };
        assert_eq!(halted_waits(&split), vec![(900.0, 900.0), (100.0, 100.0)]);
        assert!(halted_waits(&Split::default()).is_empty());
        // Each line at its own wait, weighted by its wake-ups: 0.9 at 900 us, 0.1 at 100 us.
        let u = curve(10_000.0, 12_000.0, 16_000.0);
        let w = over_waits(&u, "wake-halted", &halted_waits(&split)).unwrap();
        let at = |x: f64| median(&at_wait(&u, "wake-halted", x).unwrap());
        assert!((median(&w) - (0.9 * at(900.0) + 0.1 * at(100.0))).abs() < 1e-6);
        let mean = mean_wait(&halted_waits(&split)).unwrap();
        assert!((mean - 820.0).abs() < 1e-9, "{mean}");
        // A wait of seconds (a shell's for its child) is held at the curve's end.
        assert_eq!(mean_wait(&[(1.0, 3.5e6)]), Some(1000.0));
        assert_eq!(mean_wait(&[]), None);
    }

    #[test]
    fn a_run_with_long_halted_waits_prices_its_wake_ups_at_them_and_says_so() {
        let mut u = curve(10_000.0, 12_000.0, 16_000.0);
        u.insert("wake-ipi".into(), unit(6_000.0));
        u.insert(at_size("wake-ipi", IDLE_US[1]), unit(6_500.0));
        u.insert(at_size("wake-ipi", IDLE_US[2]), unit(7_000.0));
        u.insert("switch".into(), unit(1_500.0));
        let counts = Counts {
            measured: Some(Split {
                lines: vec![line("write", 1_000_000_000, 1000, 1000)],
                ..Split::default()
            }),
            ..Counts::default()
        };
        let (out, note) = at_program_waits(&counts, &u);
        assert_eq!(median(&out["wake-halted"]), 16_000.0);
        assert_eq!(median(&out["wake-ipi"]), 7_000.0);
        // halt-in follows: the wakee's side less the switch.
        assert_eq!(median(&out["halt-in"]), 14_500.0);
        let note = note.unwrap();
        assert!(note.contains("lasted 1000 us"), "{note}");
        assert!(
            note.contains("wake-halted 16.00 us (at 50 us: 10.00 us)"),
            "{note}"
        );
        // No wake-up on a halted CPU: the units as they were, no note.
        let (same, none) = at_program_waits(&Counts::default(), &u);
        assert_eq!(median(&same["wake-halted"]), 10_000.0);
        assert!(none.is_none());
    }
}
