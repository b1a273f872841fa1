//! The timer tick, per tick: what a task loses to the local timer's interrupt. A thread
//! pinned to one CPU reads the clock in a tight loop; each read far later than the loop's
//! step is a time something took the CPU from it. The CPU's local timer interrupts (the
//! `LOC` row of /proc/interrupts) counted over the same window say how many of those gaps are
//! ticks; the tick is the median of the shortest that many gaps (the rest, longer, are other
//! tasks and the host).

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
                gaps.push(now - last);
            }
            last = now;
            if now > window.as_nanos() as u64 {
                break;
            }
        }
        let ticks = loc_now(cpu)?.saturating_sub(before) as usize;
        match tick_of(gaps, ticks) {
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

    #[test]
    fn the_tick_is_the_median_of_as_many_shortest_gaps_as_ticks() {
        assert_eq!(tick_of(vec![900, 5000, 1000, 1100, 80000], 3), Some(1000.0));
        assert_eq!(tick_of(vec![900], 0), None);
    }
}
