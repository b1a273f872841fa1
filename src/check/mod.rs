//! `costlab check`: what on this machine will disturb figures, each with its fix, in the manner
//! of pyperf's `system show`; `--tune` applies the safe fixes around a command and restores them.

//!
//! The findings are read by topic (`busy`, `cpu`, `memory`, `noise`) over one watched window
//! (`inspect`), shown by `render`; `tune` sets the safe fixes and `command` is the CLI entry.

mod busy;
mod command;
mod cpu;
mod inspect;
mod memory;
mod noise;
mod render;
mod tune;

use std::path::PathBuf;

use serde::Serialize;

pub use busy::{busy_between, Busy};
pub use command::command;
pub use inspect::inspect;
pub use render::render;
pub use tune::tune;

/// How a finding bears on measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fine for measuring.
    Ok,
    /// Will disturb or bias figures: fix it, or read figures with it in mind.
    Warn,
    /// A fact worth knowing; no fix.
    Info,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub item: String,
    pub value: String,
    pub level: Level,
    /// What to do about it (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

fn finding(item: &str, value: impl Into<String>, level: Level, fix: impl Into<String>) -> Finding {
    Finding {
        item: item.to_string(),
        value: value.into(),
        level,
        fix: fix.into(),
    }
}

/// Where /proc and /sys are: the real ones, or a fixture tree in tests.
pub struct Root(pub PathBuf);

impl Root {
    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(rel.trim_start_matches('/')))
            .ok()
            .map(|s| s.trim().to_string())
    }
}

/// Everything `check` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub window_s: f64,
    pub busy: Vec<Busy>,
    pub findings: Vec<Finding>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fixture_machine_is_read_with_fixes() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("proc/stat", "cpu0 10 0 10 100 0 0 0 0\n");
        w("proc/sys/kernel/numa_balancing", "1\n");
        w("proc/sys/vm/zone_reclaim_mode", "0\n");
        w(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        w(
            "sys/kernel/mm/transparent_hugepage/defrag",
            "[always] defer madvise never\n",
        );
        w(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave\n",
        );
        w("sys/devices/system/cpu/cpufreq/boost", "1\n");
        w("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 1024 kB\n");
        w(
            "proc/42/stat",
            "42 (irqbalance) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 1 1",
        );
        let r = inspect(
            &Root(d.path().to_path_buf()),
            Duration::from_millis(10),
            1 << 30,
        );
        let get = |item: &str| r.findings.iter().find(|f| f.item == item).unwrap().clone();
        assert_eq!(get("governor").level, Level::Warn);
        assert_eq!(get("governor").value, "powersave");
        assert_eq!(get("boost").level, Level::Warn);
        assert_eq!(get("numa_balancing").level, Level::Warn);
        assert_eq!(get("zone_reclaim_mode").level, Level::Ok);
        assert_eq!(get("THP").value, "enabled=madvise, defrag=always");
        assert_eq!(get("irqbalance").value, "running");
        assert_eq!(get("memory available").level, Level::Warn);
        assert!(render(&r).contains("item(s) may disturb figures"));
    }
}
