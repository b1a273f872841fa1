//! What else interrupts a run, for `check`: irqbalance moving interrupts, the NMI watchdog,
//! and tasks stalled on CPU, memory or I/O (PSI).

use std::collections::BTreeMap;

use super::{finding, Finding, Level, Root};
use costlab_core::measure::procstat;

/// Whether irqbalance is among the processes seen at the end of the window.
pub(super) fn irqbalance_finding(procs: &BTreeMap<u32, (String, u64)>) -> Finding {
    let irqbalance = procs.values().any(|(n, _)| n == "irqbalance");
    finding(
        "irqbalance",
        if irqbalance { "running" } else { "not running" },
        if irqbalance { Level::Warn } else { Level::Ok },
        if irqbalance {
            "it moves interrupts between CPUs during a run: systemctl stop irqbalance (the pin lab places IRQs itself)"
        } else {
            ""
        },
    )
}

/// The NMI watchdog holds a hardware counter; None where the kernel has none.
pub(super) fn nmi_watchdog_finding(root: &Root) -> Option<Finding> {
    let v = root.read("proc/sys/kernel/nmi_watchdog")?;
    Some(finding(
        "NMI watchdog",
        v.clone(),
        if v == "0" { Level::Ok } else { Level::Info },
        if v == "0" {
            ""
        } else {
            "it takes a hardware counter and interrupts each CPU periodically: sysctl kernel.nmi_watchdog=0"
        },
    ))
}

/// A finding per resource whose tasks waited over 5% of the last 10 s; none when calm.
pub(super) fn pressure_findings(root: &Root) -> Vec<Finding> {
    let mut f = Vec::new();
    for res in ["cpu", "memory", "io"] {
        if let Some(v) = root
            .read(&format!("proc/pressure/{res}"))
            .as_deref()
            .and_then(procstat::parse_psi_some_avg10)
        {
            if v > 5.0 {
                f.push(finding(
                    &format!("PSI {res}"),
                    format!("some avg10 = {v:.1}%"),
                    Level::Warn,
                    format!("tasks waited for {res} in the last 10 s: something competes for it"),
                ));
            }
        }
    }
    f
}
