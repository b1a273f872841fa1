//! Which processes used CPU while `check` watched: their ticks sampled before and after the
//! window, ranked, and the finding that names them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{finding, Finding, Level};
use costlab_core::measure::procstat;

/// A process that used CPU while we looked.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Busy {
    pub pid: u32,
    pub name: String,
    /// % of one CPU over the window.
    pub cpu_pct: f64,
}

/// Process CPU ticks by pid, with names, from `<root>/proc`.
pub(super) fn process_ticks(root: &Path) -> BTreeMap<u32, (String, u64)> {
    procstat::processes(root)
        .map(|(pid, name, s)| (pid, (name, s.utime + s.stime)))
        .collect()
}

/// Processes whose CPU use between two snapshots `secs` apart is above `min_pct` of a CPU.
pub fn busy_between(
    before: &BTreeMap<u32, (String, u64)>,
    after: &BTreeMap<u32, (String, u64)>,
    secs: f64,
    hz: f64,
    min_pct: f64,
    me: u32,
) -> Vec<Busy> {
    let mut busy: Vec<Busy> = after
        .iter()
        .filter(|(pid, _)| **pid != me)
        .filter_map(|(pid, (name, t1))| {
            let t0 = before.get(pid).map_or(*t1, |x| x.1);
            let pct = 100.0 * t1.saturating_sub(t0) as f64 / hz / secs;
            (pct >= min_pct).then(|| Busy {
                pid: *pid,
                name: name.clone(),
                cpu_pct: (pct * 10.0).round() / 10.0,
            })
        })
        .collect();
    busy.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    busy
}

/// The busiest five of `busy`, or that none was above 5% of a CPU.
pub(super) fn busy_finding(busy: &[Busy]) -> Finding {
    if busy.is_empty() {
        finding("busy processes", "none above 5% of a CPU", Level::Ok, "")
    } else {
        let list: Vec<String> = busy
            .iter()
            .take(5)
            .map(|b| format!("{} (pid {}) {:.0}%", b.name, b.pid, b.cpu_pct))
            .collect();
        finding(
            "busy processes",
            list.join(", "),
            Level::Warn,
            "stop them, or wait: figures taken beside them will be marked disturbed",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_processes_are_ranked_and_self_is_left_out() {
        let before: BTreeMap<u32, (String, u64)> = [
            (10, ("stress-ng-cpu".to_string(), 100)),
            (11, ("bash".to_string(), 5)),
            (12, ("costlab".to_string(), 0)),
        ]
        .into();
        let after: BTreeMap<u32, (String, u64)> = [
            (10, ("stress-ng-cpu".to_string(), 200)),
            (11, ("bash".to_string(), 6)),
            (12, ("costlab".to_string(), 100)),
            (13, ("new".to_string(), 50)),
        ]
        .into();
        let b = busy_between(&before, &after, 1.0, 100.0, 5.0, 12);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].name, "stress-ng-cpu");
        assert_eq!(b[0].cpu_pct, 100.0);
    }
}
