//! What the pin lab records of a run besides its count: the scheduler's counters and where
//! each thread was seen running; and the placing of the current thread.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use costlab_core::measure::{cpus, procstat};

/// One run's figures.
pub struct Run {
    pub per_s: f64,
    pub migrations_per_s: Option<f64>,
    pub switches_per_s: Option<f64>,
    /// Thread label -> CPUs it was seen on.
    pub seen: BTreeMap<String, BTreeSet<usize>>,
    pub why_no_counters: Option<String>,
}

/// The CPU each of these tasks is on now (field 39 of /proc/PID/task/TID/stat).
pub fn where_now(tasks: &[(String, String)], seen: &mut BTreeMap<String, BTreeSet<usize>>) {
    for (label, path) in tasks {
        if let Some(cpu) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| procstat::parse_pid_stat(&t))
            .and_then(|s| s.processor)
        {
            seen.entry(label.clone()).or_default().insert(cpu);
        }
    }
}

pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Pin the current thread to `set`, or leave it free to run on any `allowed` CPU.
pub fn pin_to(set: &[usize], allowed: &[usize]) -> Result<()> {
    if set.is_empty() {
        cpus::pin_current_to(allowed)
    } else {
        cpus::pin_current_to(set)
    }
}

/// "thread 0 on CPU 1,2; thread 1 on CPU 3".
pub fn describe_seen(seen: &BTreeMap<String, BTreeSet<usize>>) -> String {
    seen.iter()
        .map(|(k, v)| {
            format!(
                "{k} on CPU {}",
                v.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
