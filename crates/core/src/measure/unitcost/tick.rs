//! The timer tick, per tick: what a task loses to the local timer's interrupt. A thread
//! pinned to one CPU reads the clock in a tight loop; each read far later than the loop's
//! step is a time something took the CPU from it. The ticks among those gaps are the ones that
//! start at one phase of the tick's period: the tick is the median of those (the rest are
//! other tasks and the host, at other phases). The CPU's local timer interrupts (the `LOC` row
//! of /proc/interrupts) counted over the same window bound how many gaps can be ticks. A
//! window where no period's phase holds them is measured again.
//!
//! Revision 1 took the median of as many of the shortest gaps as ticks. In a VM the host
//! takes the vCPU for 1-7 us about as often as the tick comes (here 233 such gaps a second
//! beside 250 ticks of 13-15 us), so half the shortest gaps were the host's: the term read
//! 1.6-6.6 us in some runs, 12.2-13.4 us in others.

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

/// The ticks among `gaps` ((start, length) ns) over a window of `window_ns`, in which the CPU
/// took `ticks` local timer interrupts. For each rate in `HZ`, the gaps are binned by their
/// start's phase in its period, and a phase's share is the gaps in its bin and the two beside
/// it over the ticks the period makes in the window. A period many times the tick's holds
/// them at a few phases, and other periodic gaps can fill one of those: so the rate is the
/// highest whose best phase holds three quarters of its ticks (else the best, if half), and
/// a phase with more gaps than the CPU took interrupts is not the tick's. Of that rate's
/// phases nearly as full as its best, the one whose gaps are longest; their median, ns. None
/// where no rate's ticks come at one phase.
pub fn periodic_tick(gaps: &[(u64, u64)], window_ns: u64, ticks: u64) -> Option<f64> {
    let mut found: Vec<(f64, u64, u64)> = Vec::new();
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
        let near = |b: u64| {
            count[((b + bins - 1) % bins) as usize]
                + count[b as usize]
                + count[((b + 1) % bins) as usize]
        };
        let best = (0..bins)
            .filter(|b| near(*b) <= ticks + 2)
            .max_by_key(|b| near(*b));
        if let Some(b) = best {
            found.push((near(b) as f64 / expected as f64, period, b));
        }
    }
    let pick = found
        .iter()
        .filter(|f| f.0 >= 0.75)
        .min_by_key(|f| f.1)
        .or_else(|| {
            found
                .iter()
                .filter(|f| f.0 >= 0.5)
                .max_by(|a, b| a.0.total_cmp(&b.0))
        })?;
    let (share, period, bin) = *pick;
    let bins = period.div_ceil(BIN_NS);
    let expected = (window_ns / period) as f64;
    let median_at = |bin: u64| {
        let mut at: Vec<u64> = gaps
            .iter()
            .filter(|(start, _)| {
                let b = (start % period) / BIN_NS;
                b == bin || (b + 1) % bins == bin || (bin + 1) % bins == b
            })
            .map(|(_, len)| *len)
            .collect();
        at.sort_unstable();
        (at.len(), at.get(at.len() / 2).copied().unwrap_or(0))
    };
    // The host's own periodic exits can fill another phase as fully (a 1000 Hz host tick
    // fills four phases of a 4 ms period): the tick's gaps hold the guest's handler beside
    // the host's exit, so among phases nearly as full the longest is the tick's.
    let (_, len) = (0..bins)
        .map(median_at)
        .filter(|(n, _)| *n as f64 >= 0.75 * share * expected && *n as u64 <= ticks + 2)
        .max_by_key(|(_, len)| *len)
        .unwrap_or_else(|| median_at(bin));
    Some(len as f64)
}

/// ns per tick, one sample per window of at least 100 ms (25 ticks at 250 Hz).
pub fn tick(spec: &SampleSpec) -> Result<Vec<f64>> {
    let cpu = *allowed_cpus().last().context("no CPU allowed")?;
    let _pin = Pinned::to(cpu)?;
    let window = spec.min_sample.max(Duration::from_millis(100));
    let mut out = Vec::with_capacity(spec.samples);
    let mut windows = 0;
    while out.len() < spec.samples && windows < 3 * spec.samples.max(1) {
        cancel::check()?;
        windows += 1;
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
        let ticks = loc_now(cpu)?.saturating_sub(before);
        // Phases from the window's start: the same shift for every tick in it.
        if let Some(t) = periodic_tick(&gaps, window.as_nanos() as u64, ticks) {
            out.push(t);
        }
    }
    if out.is_empty() {
        bail!("no local timer tick at one phase of a period on CPU {cpu} in {windows} windows of {window:?} (a tickless CPU, or one the host takes at every phase)");
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
        assert_eq!(periodic_tick(&gaps, 100_000_000, 25), Some(13_800.0));
        let mut shortest: Vec<u64> = gaps.iter().map(|g| g.1).collect();
        shortest.sort_unstable();
        assert!(
            shortest[12] < 10_000,
            "the shortest 25 were mostly the host's"
        );
        // Other gaps at one phase of a 20 ms period beside them: 100 Hz's best phase then
        // holds as many gaps as its period makes ticks, but 250 Hz is the higher rate that
        // holds three quarters of its own.
        let mut with = gaps.clone();
        with.extend((0..5u64).map(|k| (3_100_000 + k * 20_000_000, 1_500)));
        assert_eq!(periodic_tick(&with, 100_000_000, 25), Some(13_800.0));
        // No period's phase holds them: no tick named.
        let noise: Vec<(u64, u64)> = gaps.iter().filter(|g| g.1 < 10_000).copied().collect();
        assert_eq!(periodic_tick(&noise, 100_000_000, 25), None);
        // More gaps at a phase than the CPU took interrupts: not the tick's, though fuller.
        let mut host = gaps.clone();
        host.extend((0..25u64).map(|k| (2_000_000 + k * 4_000_000, 1_200)));
        host.extend((0..3u64).map(|k| (2_020_000 + k * 4_000_000, 1_200)));
        assert_eq!(periodic_tick(&host, 100_000_000, 25), Some(13_800.0));
        // As many short gaps at another phase (a host's own 250 Hz): the longer are the tick.
        let mut twin = gaps.clone();
        twin.extend((0..25u64).map(|k| (2_000_000 + k * 4_000_000, 1_500)));
        assert_eq!(periodic_tick(&twin, 100_000_000, 25), Some(13_800.0));
    }
}
