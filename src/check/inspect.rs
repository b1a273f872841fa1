//! One look at the machine: /proc sampled before and after a window (CPU use and steal are
//! rates), then each finding in the order `check` shows them.

use std::time::{Duration, Instant};

use super::busy::{busy_between, busy_finding, process_ticks};
use super::cpu::{boost_finding, governor_finding, smt_finding, steal_finding};
use super::memory::{
    available_finding, numa_balancing_finding, swap_finding, thp_finding, zone_reclaim_finding,
};
use super::noise::{irqbalance_finding, nmi_watchdog_finding, pressure_findings};
use super::{Report, Root};
use costlab_core::measure::procstat;

/// Look at the machine for `window` (processes' CPU use and steal are rates).
pub fn inspect(root: &Root, window: Duration, need_bytes: u64) -> Report {
    let hz = procstat::ticks_per_second() as f64;
    let stat0 = root.read("proc/stat").unwrap_or_default();
    let vm0 = root.read("proc/vmstat").unwrap_or_default();
    let p0 = process_ticks(&root.0);
    let t = Instant::now();
    // Ctrl-C ends the look early: the rates are over the time it lasted.
    costlab_core::measure::cancel::sleep(window);
    let secs = t.elapsed().as_secs_f64();
    let p1 = process_ticks(&root.0);
    let stat1 = root.read("proc/stat").unwrap_or_default();
    let vm1 = root.read("proc/vmstat").unwrap_or_default();
    let busy = busy_between(&p0, &p1, secs, hz, 5.0, std::process::id());
    let (s0, s1) = (procstat::parse_stat(&stat0), procstat::parse_stat(&stat1));

    let mut f = vec![
        busy_finding(&busy),
        steal_finding(&s0, &s1),
        governor_finding(root),
        boost_finding(root),
        smt_finding(root, &s0, &s1),
        thp_finding(root),
        numa_balancing_finding(root),
    ];
    f.extend(zone_reclaim_finding(root));
    f.push(irqbalance_finding(&p1));
    f.extend(nmi_watchdog_finding(root));
    f.push(swap_finding(&vm0, &vm1, secs));
    f.extend(available_finding(root, need_bytes));
    f.extend(pressure_findings(root));
    Report {
        window_s: secs,
        busy,
        findings: f,
    }
}
