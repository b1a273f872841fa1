//! Calls priced cold: the split counts each syscall's calls by the user time their task ran
//! just before, and the price raises the unit of calls that came after enough work by the
//! `cold-call` term. On the events program: getppid calls in a tight loop land in the first
//! bucket, the same calls after a busy loop in the upper ones, and the spaced calls' unit is
//! raised where the tight ones' is not. Needs root and BPF (skips without). None asserts a
//! time.

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
    serde_json::from_value(line["gaps"].clone()).expect("the line's gaps")
}

fn gaps(saved: &std::path::Path) -> Vec<[u64; 2]> {
    gaps_of(saved, "syscall", "getppid")
}

#[test]
fn calls_are_told_cold_by_the_user_time_before_them() {
    let name = "calls_are_told_cold_by_the_user_time_before_them";
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
    // A tight loop's calls come within 1 us of user time of each other (an interrupt or a
    // switch between two restarts the gap, never lengthens it).
    assert!(tight[0][0] as f64 >= 0.9 * 20000.0, "{tight:?}");
    // After a busy loop of ~100 us (20-400 us under load) each, the calls are past 16 us.
    let spaced_doc = run("spaced", "300");
    let spaced = gaps(&saved);
    let late: u64 = spaced[3..].iter().map(|b| b[0]).sum();
    assert!(late >= 240, "{spaced:?}");
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
    // The spaced calls are cold, the tight ones (nearly) hot. getppid is a light call, priced
    // beside a split on the line inside user time, so its own unit is none: the note says
    // the share.
    let cold = |doc: &serde_json::Value| -> f64 {
        let notes = doc["notes"].to_string();
        let at = notes
            .find("calls after the program's own work")
            .unwrap_or_else(|| panic!("no note of the cold calls: {notes}"));
        let rest = &notes[at..];
        let pct = rest.find("% of them").expect("a share");
        let start = rest[..pct].rfind(' ').unwrap() + 1;
        rest[start..pct].parse().unwrap()
    };
    // Weighted by each call's gap (up to the term's sweep): the startup's calls are few.
    assert!(cold(&tight_doc) <= 10.0, "{}", tight_doc["notes"]);
    assert!(cold(&spaced_doc) >= 60.0, "{}", spaced_doc["notes"]);
}
