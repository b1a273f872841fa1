//! What each slot of the split's accounting array is a line of: its (class, event).

use std::collections::BTreeMap;

use super::prog;

const SOFTIRQ_NAMES: [&str; 10] = [
    "hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
];

/// A slot's (class, event).
pub fn slot_name(
    slot: u32,
    syscalls: &BTreeMap<u32, String>,
    irqs: &BTreeMap<u32, String>,
) -> (&'static str, String) {
    use prog::*;
    match slot {
        SYS_OTHER => ("syscall", "syscall_511_and_up".into()),
        OPEN_CREATE => ("syscall", "openat:create".into()),
        paths::NEWFSTATAT_FD => ("syscall", "newfstatat:fd".into()),
        MMAP_FILE => ("syscall", "mmap:file".into()),
        DIRENT_BYTES => ("bytes", "dirents".into()),
        EXEC_FAILED => ("syscall", "execve:failed".into()),
        s if s < SYS_OTHER => (
            "syscall",
            syscalls
                .get(&s)
                .cloned()
                .unwrap_or_else(|| format!("syscall_{s}")),
        ),
        USER => ("user", "user".into()),
        FAULT_MINOR => ("fault", "minor".into()),
        FAULT_MAJOR => ("fault", "major".into()),
        FAULT_OPEN | FAULT_OPEN_WRITE | FAULT_OPEN_FILE | FAULT_OPEN_COW => {
            ("fault", "unfinished".into())
        }
        FAULT_FILE => ("fault", "minor:file".into()),
        FAULT_COW => ("fault", "minor:cow".into()),
        s if (SOFTIRQ_BASE..SOFTIRQ_BASE + SOFTIRQS).contains(&s) => {
            let v = (s - SOFTIRQ_BASE) as usize;
            (
                "softirq",
                SOFTIRQ_NAMES
                    .get(v)
                    .map_or(format!("softirq_{v}"), |n| n.to_string()),
            )
        }
        s if (VEC_BASE..IRQ_BASE).contains(&s) => (
            "irq",
            VECTORS
                .get((s - VEC_BASE) as usize)
                .map_or(format!("vector_{s}"), |n| n.to_string()),
        ),
        s => {
            let n = s - IRQ_BASE;
            (
                "irq",
                irqs.get(&n)
                    .map_or(format!("irq{n}"), |name| format!("{n}:{name}")),
            )
        }
    }
}
