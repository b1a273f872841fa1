//! What the proc and cgroup files say of a process's or a cgroup's CPU time, and the
//! interrupts' names: the figures the split is checked against.

use std::collections::BTreeMap;

/// What a process's threads have run so far: the process's CPU clock (every thread's
/// sum_exec_runtime, those that ended included, brought up to date for a thread running now:
/// the figure a cgroup's usage sums), and its user and system time (/proc/PID/stat,
/// tick-sampled).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessCpu {
    pub cpu_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

impl ProcessCpu {
    pub fn read(pid: u32) -> Option<ProcessCpu> {
        let cpu_ns = process_clock_ns(pid)?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (u, s) = parse_stat_times(&stat)?;
        let hz = costlab_core::measure::procstat::ticks_per_second().max(1);
        Some(ProcessCpu {
            cpu_ns,
            user_ns: u * 1_000_000_000 / hz,
            system_ns: s * 1_000_000_000 / hz,
        })
    }

    /// (usage, user, system) ns from `before` to this reading.
    pub fn since(&self, before: &ProcessCpu) -> (u64, u64, u64) {
        (
            self.cpu_ns.saturating_sub(before.cpu_ns),
            self.user_ns.saturating_sub(before.user_ns),
            self.system_ns.saturating_sub(before.system_ns),
        )
    }
}

/// Another process's CPU clock (clock_getcpuclockid), ns.
fn process_clock_ns(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t to the valid pointer given.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the valid pointer given.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// schedstat's first field: the thread's time on CPU, ns.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// /proc/PID/stat's utime and stime (fields 14 and 15), in clock ticks.
pub fn parse_stat_times(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// cpu.stat's usage_usec, user_usec, system_usec as ns.
pub fn parse_cpu_stat(text: &str) -> Option<(u64, u64, u64)> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    Some((
        field("usage_usec")? * 1000,
        field("user_usec")? * 1000,
        field("system_usec")? * 1000,
    ))
}

/// Interrupt numbers to names from /proc/interrupts (the last field of each numbered line).
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(':')?;
            let n: u32 = n.parse().ok()?;
            let name = rest.split_whitespace().last()?;
            Some((n, name.to_string()))
        })
        .collect()
}
