//! Calls priced cold: the split counts each syscall's calls by the CPU's busy time since the
//! last call of the same kind there, and the price raises their units by the `cold-call`
//! term's curve read at those gaps. On the events program: getppid calls in a tight loop land
//! in the first bucket, the same calls after a busy loop in the upper ones, the same calls
//! after a sleep (the CPU idle in between, on a quiet machine) in the lower ones. Needs root and BPF (skips
//! without). None asserts a time.

use crate::price::events_or_skip;
use crate::price_measured::price;

/// A line's buckets in a counts file: [calls, sum of gaps] each.
fn gaps_of(saved: &std::path::Path, class: &str, event: &str) -> Vec<[u64; 2]> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    let line = doc["measured"]["lines"]
        .as_array()
        .expect("a split in the counts file")
        .iter()
        .find(|l| l["class"] == class && l["event"] == event)
        .unwrap_or_else(|| panic!("no {class} {event} line: {}", doc["measured"]));
    serde_json::from_value(line["since_same"].clone()).expect("the line's gaps")
}

fn gaps(saved: &std::path::Path) -> Vec<[u64; 2]> {
    gaps_of(saved, "syscall", "getppid")
}

/// The share of the CPUs' time they idled, at and above which the slept calls are asked to
/// find their CPU quiet.
const QUIET: f64 = 0.5;

/// The CPUs' idle time (idle and iowait, in clock ticks, core's /proc/stat parser) and how
/// many CPUs there are. The idle time is the kernel's own account of its idle loop; the busy
/// fields are sampled at ticks, so busy time is taken as the wall time on each CPU less its
/// idle time (a vCPU the host took away was not idle).
struct Idle {
    ticks: u64,
    cpus: usize,
    at: std::time::Instant,
}

fn idle_now() -> Idle {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let per_cpu = costlab_core::measure::procstat::parse_stat(&stat);
    Idle {
        ticks: per_cpu.values().map(|c| c.idle).sum(),
        cpus: per_cpu.len(),
        at: std::time::Instant::now(),
    }
}

#[test]
fn calls_are_told_cold_by_the_busy_time_since_the_last_of_their_kind() {
    let name = "calls_are_told_cold_by_the_busy_time_since_the_last_of_their_kind";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let saved = dir.path().join("counts.json");
    let _one = crate::common::serial();
    let exe = exe.to_str().unwrap();
    let run = |mode: &str, n: &str| {
        price(
            &db,
            &["--save-counts", saved.to_str().unwrap(), "--", exe, mode, n],
        )
    };
    // Seven buckets, every call in one.
    let tight_doc = run("getppid", "20000");
    let tight = gaps(&saved);
    assert_eq!(tight.len(), 7, "{tight:?}");
    let calls: u64 = tight.iter().map(|b| b[0]).sum();
    assert!(calls >= 20000, "{tight:?}");
    // A tight loop's calls come within 1 us of each other.
    assert!(tight[0][0] as f64 >= 0.9 * 20000.0, "{tight:?}");
    // After a busy loop of 10^6 rounds (200-1000 us here) each, the calls are past 16 us.
    let spaced_doc = run("spaced", "300");
    let spaced = gaps(&saved);
    let late: u64 = spaced[3..].iter().map(|b| b[0]).sum();
    assert!(late >= 240, "{spaced:?}");
    // After a 300 us sleep each. A gap is the CPU's busy time, never its idle time, whatever
    // else runs: the gaps of the calls on one CPU are stretches of its busy time that do not
    // overlap, so together they are no more than the CPUs' busy time over the run (a tick's
    // rounding of /proc/stat's idle time on each).
    let before = idle_now();
    let _ = run("slept", "300");
    let after = idle_now();
    let slept = gaps(&saved);
    let calls: u64 = slept.iter().map(|b| b[0]).sum();
    assert!(calls >= 300, "{slept:?}");
    let tick_ns = 1e9 / costlab_core::measure::procstat::ticks_per_second() as f64;
    let cpus = after.cpus as f64;
    let all_ns = after.at.duration_since(before.at).as_nanos() as f64 * cpus;
    let idle_ns = (after.ticks - before.ticks) as f64 * tick_ns;
    let busy_ns = (all_ns - idle_ns).max(0.0);
    let idle = idle_ns / all_ns;
    let summed: u64 = slept.iter().map(|b| b[1]).sum();
    assert!(
        summed as f64 <= busy_ns + 2.0 * cpus * tick_ns,
        "gaps of {summed} ns beside {busy_ns} ns of busy CPU time: {slept:?}"
    );
    // With the CPUs idle for most of the run, the sleeper's CPU halts while it sleeps: the busy
    // time between two calls is the sleep's own call and wake-up, under 64 us, for most of
    // them. Other work on its CPU fills those gaps (a suite's emulated guests beside it did, on
    // every call), so on a busy machine only the bound above is asked.
    if idle >= QUIET {
        let quick: u64 = slept[..4].iter().map(|b| b[0]).sum();
        assert!(
            quick >= 150,
            "the CPUs {:.0}% idle: {slept:?}",
            idle * 100.0
        );
    } else {
        eprintln!(
            "{name}: the CPUs were idle {:.0}% of the slept run (under {:.0}%): its gaps checked \
             against the busy time only",
            idle * 100.0,
            QUIET * 100.0
        );
    }
    // Each bucket's sum lies within its bounds.
    for (b, [n, sum]) in spaced.iter().enumerate() {
        let lo = if b == 0 { 0 } else { 1u64 << (8 + 2 * b) };
        assert!(*sum >= lo * n, "bucket {b}: {n} calls, {sum} ns");
        if b < 6 {
            assert!(
                *sum <= (1u64 << (10 + 2 * b)) * n,
                "bucket {b}: {n} calls, {sum} ns"
            );
        }
    }
    // Fresh pages written one after another: their faults are counted too, close together.
    let _ = run("touch", "5000");
    let minor = gaps_of(&saved, "fault", "minor");
    let faults: u64 = minor.iter().map(|b| b[0]).sum();
    assert!(faults >= 5000, "{minor:?}");
    assert!(minor[0][0] + minor[1][0] >= 4500, "{minor:?}");
    // The spaced calls are cold, the tight ones (nearly) hot: the note gives the share of the
    // calls 65 us or more after the last of their kind, and the curve.
    let cold = |doc: &serde_json::Value| -> f64 {
        let notes = doc["notes"].to_string();
        let at = notes
            .find("calls after other work")
            .unwrap_or_else(|| panic!("no note of the cold calls: {notes}"));
        let rest = &notes[at..];
        assert!(rest.contains("cost term cold-call"), "{rest}");
        let pct = rest.find("% of them came").expect("a share");
        let start = rest[..pct].rfind('(').unwrap() + 1;
        rest[start..pct].parse().unwrap()
    };
    // The startup's calls and faults are few beside 20000, and beside 300 spaced ones.
    assert!(cold(&tight_doc) <= 10.0, "{}", tight_doc["notes"]);
    assert!(cold(&spaced_doc) >= 30.0, "{}", spaced_doc["notes"]);
}
