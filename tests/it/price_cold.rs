//! Calls priced cold: the split counts each syscall's calls by the CPU's busy time since the
//! last call of the same kind there, and the price raises their units by the `cold-call`
//! term's curve read at those gaps. On the events program: getppid calls in a tight loop land
//! in the first bucket, the same calls after a busy loop in the upper ones, the same calls
//! after a sleep (the CPU idle in between) in the lower ones. Needs root and BPF (skips
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
    // After a 300 us sleep each, the CPU idle between: the busy time between two calls is the
    // sleep's own call and wake-up, well under 64 us, for most of them.
    let _ = run("slept", "300");
    let slept = gaps(&saved);
    let busy: u64 = slept[..4].iter().map(|b| b[0]).sum();
    assert!(busy >= 150, "{slept:?}");
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
