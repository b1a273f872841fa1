//! The timer tick, per tick: what a task loses to the local timer's interrupt. A thread
//! pinned to one CPU reads the clock in a tight loop; each read far later than the loop's
//! step is a time something took the CPU from it. The ticks among those gaps are the ones that
//! start at one phase of the tick's period: the tick is the median of those (the rest are
//! other tasks and the host, at any phase). The CPU's local timer interrupts (the `LOC` row of
//! /proc/interrupts) counted over the same window say how many ticks there were; where no
//! period's phase holds them, the tick is the median of the shortest that many gaps.
//!
//! Revision 1 took that median always. In a VM the host takes the vCPU for 1-7 us at any
//! phase about as often as the tick comes (here 233 such gaps a second beside 250 ticks of
//! 13-15 us), so the shortest gaps were half the host's: the term read 1.6-6.6 us in some
//! runs, 12.2-13.4 us in others.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::measure::cpus::{allowed_cpus, Pinned};
use crate::measure::{cancel, SampleSpec};

/// A gap longer than this is an interruption, not the loop's own step.
const GAP_NS: u64 = 400;

/// The count in /proc/interrupts' row `row` (its label: `LOC:`) for CPU `cpu` (the header
/// names the columns `CPU0 CPU1 ...`).
pub fn row_count(text: &str, row: &str, cpu: usize) -> Option<u64> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let col = head.iter().position(|h| *h == format!("CPU{cpu}"))?;
    let line = lines.find(|l| l.trim_start().starts_with(row))?;
    line.split_whitespace().nth(1 + col)?.parse().ok()
}

/// The count in the `LOC:` row (the local timer's interrupts) for CPU `cpu`.
pub fn local_timer_count(text: &str, cpu: usize) -> Option<u64> {
    row_count(text, "LOC:", cpu)
}

fn loc_now(cpu: usize) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").context("reading /proc/interrupts")?;
    local_timer_count(&text, cpu)
        .ok_or_else(|| anyhow::anyhow!("/proc/interrupts has no LOC row for CPU {cpu}"))
}

/// The tick rates a kernel is built with (CONFIG_HZ), whose periods are tried.
pub const HZ: [u64; 4] = [100, 250, 300, 1000];
/// The width of a phase bin, ns: wider than a tick's jitter, narrow beside its period.
const BIN_NS: u64 = 50_000;

/// The ticks among `gaps` ((start, length) ns, the start on the clock the tick keeps its
/// period in), over a window of `window_ns`: for each rate in `HZ`, the gaps are binned by
/// their start's phase in its period; the rate whose fullest bin holds the largest share of
/// the ticks its period makes in the window, at least half, names them: the gaps in that bin
/// and its two neighbours. Their median, ns; None where no rate's ticks come at one phase.
pub fn periodic_tick(gaps: &[(u64, u64)], window_ns: u64) -> Option<f64> {
    let mut best: Option<(f64, u64, u64)> = None;
    for hz in HZ {
        let period = 1_000_000_000 / hz;
        let expected = window_ns / period;
        if expected < 4 {
            continue;
        }
        let bins = period.div_ceil(BIN_NS);
        let mut count = vec![0u64; bins as usize];
        for (start, _) in gaps {
            count[((start % period) / BIN_NS) as usize] += 1;
        }
        let (bin, most) = count
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| **c)
            .map(|(b, c)| (b as u64, *c))?;
        let share = most as f64 / expected as f64;
        if share >= 0.5 && best.is_none_or(|(s, _, _)| share > s) {
            best = Some((share, period, bin));
        }
    }
    let (_, period, bin) = best?;
    let bins = period.div_ceil(BIN_NS);
    let mut at: Vec<u64> = gaps
        .iter()
        .filter(|(start, _)| {
            let b = (start % period) / BIN_NS;
            b == bin || (b + 1) % bins == bin || (bin + 1) % bins == b
        })
        .map(|(_, len)| *len)
        .collect();
    at.sort_unstable();
    Some(at[at.len() / 2] as f64)
}

/// The median of the `n` shortest gaps, ns.
pub fn tick_of(mut gaps: Vec<u64>, n: usize) -> Option<f64> {
    if n == 0 || gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable();
    gaps.truncate(n);
    Some(gaps[gaps.len() / 2] as f64)
}

/// ns per tick, one sample per window of at least 100 ms (25 ticks at 250 Hz).
pub fn tick(spec: &SampleSpec) -> Result<Vec<f64>> {
    let cpu = *allowed_cpus().last().context("no CPU allowed")?;
    let _pin = Pinned::to(cpu)?;
    let window = spec.min_sample.max(Duration::from_millis(100));
    let mut out = Vec::with_capacity(spec.samples);
    for _ in 0..spec.samples {
        cancel::check()?;
        let before = loc_now(cpu)?;
        let mut gaps = Vec::with_capacity(1024);
        let t0 = Instant::now();
        let mut last = 0u64;
        loop {
            let now = t0.elapsed().as_nanos() as u64;
            if now - last > GAP_NS {
                gaps.push((last, now - last));
            }
            last = now;
            if now > window.as_nanos() as u64 {
                break;
            }
        }
        let ticks = loc_now(cpu)?.saturating_sub(before) as usize;
        // Phases from the window's start: the same shift for every tick in it.
        let tick = periodic_tick(&gaps, window.as_nanos() as u64)
            .or_else(|| tick_of(gaps.iter().map(|g| g.1).collect(), ticks));
        match tick {
            Some(t) => out.push(t),
            None => bail!("no local timer tick on CPU {cpu} in {window:?} (a tickless CPU?)"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_timer_row_is_read_by_the_cpus_column() {
        let text = "           CPU0       CPU1\n  0:         40          0   IO-APIC   2-edge      timer\nLOC:     123456     789012   Local timer interrupts\n";
        assert_eq!(local_timer_count(text, 0), Some(123456));
        assert_eq!(local_timer_count(text, 1), Some(789012));
        assert_eq!(local_timer_count(text, 2), None);
    }

    /// 25 ticks of 13 us every 4 ms (jittered a few us), among 40 shorter gaps of the host's
    /// at other phases: the periodic ones are the ticks; the shortest 25 would be the host's.
    #[test]
    fn the_ticks_are_the_gaps_at_one_phase_of_their_period() {
        let mut gaps: Vec<(u64, u64)> = (0..25u64)
            .map(|k| {
                (
                    1_234_567 + k * 4_000_000 + (k * 7919) % 5_000,
                    13_000 + (k % 5) * 400,
                )
            })
            .collect();
        let mut x = 12345u64;
        for _ in 0..40 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let start = (x >> 20) % 100_000_000;
            if (start % 4_000_000).abs_diff(1_234_567) > 200_000 {
                gaps.push((start, 1_000 + (x >> 50) % 6_000));
            }
        }
        gaps.sort_unstable();
        assert_eq!(periodic_tick(&gaps, 100_000_000), Some(13_800.0));
        assert!(tick_of(gaps.iter().map(|g| g.1).collect(), 25).unwrap() < 10_000.0);
        // No period's phase holds them: no tick named.
        let noise: Vec<(u64, u64)> = gaps.iter().filter(|g| g.1 < 10_000).copied().collect();
        assert_eq!(periodic_tick(&noise, 100_000_000), None);
    }

    #[test]
    fn the_tick_is_the_median_of_as_many_shortest_gaps_as_ticks() {
        assert_eq!(tick_of(vec![900, 5000, 1000, 1100, 80000], 3), Some(1000.0));
        assert_eq!(tick_of(vec![900], 0), None);
    }
}
