//! The memory side of `check`: transparent huge pages, NUMA balancing and zone reclaim, swap
//! activity while it watched, and whether the planned run fits in the memory available.

use super::{finding, Finding, Level, Root};

/// THP and its defrag setting, as the mem lab's thp cases meet them.
pub(super) fn thp_finding(root: &Root) -> Finding {
    let thp = root
        .read("sys/kernel/mm/transparent_hugepage/enabled")
        .and_then(|s| bracketed(&s));
    let defrag = root
        .read("sys/kernel/mm/transparent_hugepage/defrag")
        .and_then(|s| bracketed(&s));
    finding(
        "THP",
        format!(
            "enabled={}, defrag={}",
            thp.as_deref().unwrap_or("?"),
            defrag.as_deref().unwrap_or("?")
        ),
        if thp.as_deref() == Some("never") {
            Level::Warn
        } else {
            Level::Info
        },
        if thp.as_deref() == Some("never") {
            "the mem lab's thp cases cannot get huge pages: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"
        } else {
            "with defrag=always or madvise a THP fault may compact memory: the mem lab reports the huge fraction it got"
        },
    )
}

/// "always [madvise] never" -> "madvise".
fn bracketed(s: &str) -> Option<String> {
    let a = s.find('[')?;
    let b = s[a..].find(']')? + a;
    Some(s[a + 1..b].to_string())
}

/// NUMA balancing on: the kernel may move pages and tasks mid-measurement.
pub(super) fn numa_balancing_finding(root: &Root) -> Finding {
    match root.read("proc/sys/kernel/numa_balancing").as_deref() {
        Some("0") => finding("numa_balancing", "0", Level::Ok, ""),
        Some(v) => finding(
            "numa_balancing",
            v,
            Level::Warn,
            "the kernel moves pages and tasks while you measure: costlab check --tune (sets 0, then restores)",
        ),
        None => finding("numa_balancing", "not built in", Level::Info, ""),
    }
}

/// Zone reclaim on: a node reclaims locally before it goes remote; None where absent.
pub(super) fn zone_reclaim_finding(root: &Root) -> Option<Finding> {
    let v = root.read("proc/sys/vm/zone_reclaim_mode")?;
    Some(finding(
        "zone_reclaim_mode",
        v.clone(),
        if v == "0" { Level::Ok } else { Level::Warn },
        if v == "0" {
            ""
        } else {
            "reclaim on the local node before going remote skews NUMA figures: sysctl vm.zone_reclaim_mode=0"
        },
    ))
}

/// Pages swapped in or out between the two /proc/vmstat snapshots `secs` apart.
pub(super) fn swap_finding(vm0: &str, vm1: &str, secs: f64) -> Finding {
    let swap = |t: &str, k: &str| -> u64 {
        t.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let swapped = (swap(vm1, "pswpin ") + swap(vm1, "pswpout "))
        .saturating_sub(swap(vm0, "pswpin ") + swap(vm0, "pswpout "));
    if swapped > 0 {
        finding(
            "swap activity",
            format!("{swapped} pages in {secs:.1} s"),
            Level::Warn,
            "memory is short: close programs or measure smaller blocks",
        )
    } else {
        finding("swap activity", "none", Level::Ok, "")
    }
}

/// MemAvailable against the `need_bytes` the planned run needs; None where not reported.
pub(super) fn available_finding(root: &Root, need_bytes: u64) -> Option<Finding> {
    let meminfo = root.read("proc/meminfo").unwrap_or_default();
    let kib = |k: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let avail = kib("MemAvailable:")? * 1024;
    let ok = avail >= need_bytes;
    Some(finding(
        "memory available",
        format!(
            "{} available, the planned run needs about {}",
            costlab_core::measure::sizes::human_size(avail),
            costlab_core::measure::sizes::human_size(need_bytes)
        ),
        if ok { Level::Ok } else { Level::Warn },
        if ok {
            ""
        } else {
            "free memory, or pass smaller --sizes / --live"
        },
    ))
}
