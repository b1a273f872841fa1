//! Calls priced cold: a syscall after the program's own work finds the kernel's code and data
//! out of the CPU's caches and costs more than the same call in the loop its term was timed
//! in. The split counts each call's user time before it by bucket (`prog::gaps`); the
//! `cold-call` term gives the work after which a call is cold (its `latency`: a sweep of twice
//! the private cache) and the extra a cold call costs per ns of a hot one (`per_ns`). A
//! call's unit is raised by that extra times its cold share: the share of that work it had,
//! at most all of it.

use crate::measured::prog::gaps::BOUNDS;
use crate::measured::Split;
use crate::unit::{Unit, Units};

/// The unit names of the term's two figures.
pub const WORK: &str = "cold-call";
pub const EXTRA: &str = "cold-call/ns";

/// Σ min(gap, t) / (calls × t) over a line's buckets, `t` ns the work that makes a call cold:
/// a bucket wholly below `t` at its sum, one wholly at or above at its calls × t, the one
/// `t` falls in at the smaller of the two. None without calls or a positive `t`.
pub fn share(gaps: &[[u64; 2]], t: f64) -> Option<f64> {
    let calls: u64 = gaps.iter().map(|g| g[0]).sum();
    if calls == 0 || t.is_nan() || t <= 0.0 {
        return None;
    }
    let mut cold = 0.0;
    for (b, [n, sum]) in gaps.iter().enumerate() {
        let lo = if b == 0 { 0.0 } else { BOUNDS[b - 1] as f64 };
        let hi = BOUNDS.get(b).map_or(f64::INFINITY, |&h| h as f64);
        let (n, sum) = (*n as f64, *sum as f64);
        cold += if hi <= t {
            sum
        } else if lo >= t {
            n * t
        } else {
            sum.min(n * t)
        };
    }
    Some((cold / (calls as f64 * t)).clamp(0.0, 1.0))
}

/// The split's line for a priced syscall or fault (by its name, or a call's without its fd
/// kind).
fn gaps_of<'a>(split: &'a Split, class: &str, name: &str) -> Option<&'a [[u64; 2]]> {
    let of = |e: &str| {
        split
            .lines
            .iter()
            .find(|l| l.class == class && l.event == e && !l.gaps.is_empty())
    };
    // A call's name without the kind of fd its calls went to (`read:file` is a `read`).
    let base = name.split_once(':').map_or(name, |(b, _)| b);
    of(name).or_else(|| of(base)).map(|l| l.gaps.as_slice())
}

/// The cold share of a syscall's calls or a minor fault kind's faults (`class` syscall or
/// fault), where the split counted their gaps and the term is in `units`.
pub fn share_of(split: Option<&Split>, units: &Units, class: &str, name: &str) -> Option<f64> {
    let t = units.get(WORK)?.summary()?.median;
    units.get(EXTRA)?;
    share(gaps_of(split?, class, name)?, t)
}

/// `unit` raised for calls of cold share `share`: each sample × (1 + the term's extra ×
/// share), the term's figures joining the unit's.
pub fn raised(unit: &Unit, units: &Units, share: f64) -> Unit {
    let Some(extra) = units.get(EXTRA) else {
        return unit.clone();
    };
    let e = &extra.samples;
    let mut u = unit.clone();
    for (i, x) in u.samples.iter_mut().enumerate() {
        *x *= 1.0 + e.get(i % e.len().max(1)).copied().unwrap_or(0.0) * share;
    }
    u.rows.extend(extra.rows.iter().cloned());
    u.from = format!(
        "{}, raised by {:.0}% cold ({})",
        u.from,
        share * 100.0,
        extra.from
    );
    u
}

/// The note that says what the cold calls added: the calls the split saw, their mean cold
/// share, the term's work and extra.
pub fn note(split: Option<&Split>, units: &Units) -> Option<String> {
    let split = split?;
    let t = units.get(WORK)?.summary()?.median;
    let extra = units.get(EXTRA)?.summary()?.median;
    let (mut calls, mut cold) = (0u64, 0.0);
    for l in split
        .lines
        .iter()
        .filter(|l| l.class == "syscall" || l.class == "fault")
    {
        if let Some(s) = share(&l.gaps, t) {
            let n: u64 = l.gaps.iter().map(|g| g[0]).sum();
            calls += n;
            cold += s * n as f64;
        }
    }
    (calls > 0).then(|| {
        format!(
            "calls after the program's own work: the split timed the user time before each of {calls} syscalls and minor faults; {:.0}% of them (weighted by that time, up to {:.1} us: a sweep of twice the private cache here) came cold, and a cold call costs {:.2}x one in a loop (cost term cold-call: getppid, stat, open and close, mmap and munmap, a 4 KiB pread, a fault of a fresh page): each call's unit is raised by its own share (run {})",
            cold / calls as f64 * 100.0,
            t / 1e3,
            1.0 + extra,
            units[EXTRA].from.trim_start_matches("run ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_after_no_work_is_hot_and_after_enough_work_cold() {
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        g[0] = [10, 10 * 200];
        assert!((share(&g, 30_000.0).unwrap() - 200.0 / 30_000.0).abs() < 1e-9);
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        g[BOUNDS.len()] = [4, 4 * 5_000_000];
        assert_eq!(share(&g, 30_000.0), Some(1.0));
    }

    #[test]
    fn the_bucket_that_holds_the_work_counts_each_call_at_most_once() {
        // 30 us falls in [16.4, 65.5) us: two calls of 20 us and one of 60 us.
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        g[3] = [3, 100_000];
        let s = share(&g, 30_000.0).unwrap();
        assert!(
            (s - 1.0).abs() < 1e-9,
            "min(100 us, 3 × 30 us) = 90 us: {s}"
        );
        g[3] = [3, 60_000];
        assert!((share(&g, 30_000.0).unwrap() - 60.0 / 90.0).abs() < 1e-9);
        // Half the calls hot, half cold.
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        g[0] = [5, 0];
        g[6] = [5, 5 * 2_000_000];
        assert!((share(&g, 30_000.0).unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn no_calls_or_no_work_is_no_share() {
        assert_eq!(share(&[[0, 0]; 7], 30_000.0), None);
        assert_eq!(share(&[[1, 5]; 7], 0.0), None);
    }

    #[test]
    fn a_raised_unit_carries_the_terms_figures() {
        let unit = |v: Vec<f64>, from: &str| Unit {
            samples: v,
            rows: Vec::new(),
            from: from.into(),
        };
        let mut units = Units::new();
        units.insert(
            EXTRA.into(),
            unit(vec![0.6, 0.6], "run r1: cost term=cold-call per_ns"),
        );
        let u = raised(&unit(vec![1000.0, 1100.0], "run r0"), &units, 0.5);
        assert_eq!(u.samples, vec![1300.0, 1430.0]);
        assert!(u.from.contains("cold-call"), "{}", u.from);
    }
}
