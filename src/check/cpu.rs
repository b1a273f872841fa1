//! The CPU side of `check`: steal by the hypervisor, frequency scaling (governor, boost) and
//! SMT siblings that were busy while it watched.

use costlab_core::measure::procstat::PerCpu;

use super::{finding, Finding, Level, Root};

/// Steal over the window, all CPUs.
pub(super) fn steal_finding(s0: &PerCpu, s1: &PerCpu) -> Finding {
    let (mut steal, mut total) = (0u64, 0u64);
    for (cpu, a) in s1 {
        if let Some(b) = s0.get(cpu) {
            steal += a.steal.saturating_sub(b.steal);
            total += a.total().saturating_sub(b.total());
        }
    }
    let steal_pct = if total > 0 {
        100.0 * steal as f64 / total as f64
    } else {
        0.0
    };
    if steal_pct > 2.0 {
        finding(
            "steal",
            format!("{steal_pct:.1}% of CPU time taken by the hypervisor"),
            Level::Warn,
            "another guest shares these physical CPUs: measure at a quieter time, or on dedicated (pinned) vCPUs",
        )
    } else {
        finding("steal", format!("{steal_pct:.1}%"), Level::Ok, "")
    }
}

/// The cpufreq governors in use: anything but performance lets the clock wander.
pub(super) fn governor_finding(root: &Root) -> Finding {
    let governors: Vec<String> = (0..1024)
        .map_while(|c| {
            root.read(&format!(
                "sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ))
        })
        .collect();
    if governors.is_empty() {
        return finding(
            "governor",
            "no cpufreq (a VM, or the host controls frequency)",
            Level::Info,
            "",
        );
    }
    let mut kinds = governors.clone();
    kinds.sort();
    kinds.dedup();
    let ok = kinds.iter().all(|g| g == "performance");
    finding(
        "governor",
        kinds.join(","),
        if ok { Level::Ok } else { Level::Warn },
        if ok {
            ""
        } else {
            "costlab check --tune (sets performance for the command, then restores)"
        },
    )
}

/// Whether boost (turbo) is on, from cpufreq or intel_pstate.
pub(super) fn boost_finding(root: &Root) -> Finding {
    let boost = root
        .read("sys/devices/system/cpu/cpufreq/boost")
        .map(|v| v == "1")
        .or_else(|| {
            root.read("sys/devices/system/cpu/intel_pstate/no_turbo")
                .map(|v| v == "0")
        });
    match boost {
        Some(true) => finding(
            "boost",
            "on",
            Level::Warn,
            "costlab check --tune (turbo makes the clock depend on temperature and on the other cores' load)",
        ),
        Some(false) => finding("boost", "off", Level::Ok, ""),
        None => finding("boost", "not exposed", Level::Info, ""),
    }
}

/// SMT: siblings share a core's caches and ports.
pub(super) fn smt_finding(root: &Root, s0: &PerCpu, s1: &PerCpu) -> Finding {
    match root.read("sys/devices/system/cpu/smt/active").as_deref() {
        Some("1") => {
            let busy_sib = smt_busy_siblings(root, s0, s1);
            finding(
                "SMT",
                if busy_sib.is_empty() {
                    "on; siblings idle".to_string()
                } else {
                    format!("on; busy sibling CPUs: {}", busy_sib.join(", "))
                },
                if busy_sib.is_empty() {
                    Level::Info
                } else {
                    Level::Warn
                },
                "pin with --cpus to one thread per core, or keep siblings idle",
            )
        }
        Some(_) => finding("SMT", "off", Level::Ok, ""),
        None => finding("SMT", "not exposed", Level::Info, ""),
    }
}

/// SMT sibling CPUs that were busy (over 20%) during the window.
fn smt_busy_siblings(root: &Root, s0: &PerCpu, s1: &PerCpu) -> Vec<String> {
    let mut out = Vec::new();
    for (cpu, a) in s1 {
        let Some(sibs) = root.read(&format!(
            "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
        )) else {
            continue;
        };
        let Ok(list) = costlab_core::measure::cpus::parse_cpu_list(&sibs) else {
            continue;
        };
        if list.len() < 2 {
            continue;
        }
        if let Some(b) = s0.get(cpu) {
            let busy = a.busy.saturating_sub(b.busy) as f64;
            let tot = a.total().saturating_sub(b.total()).max(1) as f64;
            if busy / tot > 0.2 {
                out.push(cpu.to_string());
            }
        }
    }
    out
}
