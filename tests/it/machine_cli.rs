//! `costlab machine` as a user runs it: the table, the JSON, bad input.

use crate::common::costlab;

use serde_json::Value;

#[test]
fn json_has_every_fact() {
    let out = costlab(&["machine", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "cpu_model",
        "arch",
        "cpus_online",
        "caches",
        "numa_nodes",
        "base_page",
        "hugepages",
        "thp",
        "kernel",
        "hypervisor",
        "cpu_flags",
        "online_cpus",
        "allowed_cpus",
        "threads_per_core",
        "nodes",
        "mem_total",
        "mitigations",
        "mitigations_summary",
        "io_uring",
        "perf_event_paranoid",
        "hw_counters_work",
        "zone_reclaim_mode",
        "numa_balancing",
        "net",
    ] {
        assert!(m.get(key).is_some(), "{key} missing");
    }
    assert!(m["cpus_online"].as_u64().unwrap() >= 1);
    assert_eq!(
        m["nodes"].as_array().unwrap().len() as u64,
        m["numa_nodes"].as_u64().unwrap()
    );
    // Live probe: the hardware counter check ran, and a failure says why.
    match m["hw_counters_work"].as_bool() {
        Some(true) => {}
        Some(false) => assert!(!m["hw_counters_reason"].as_str().unwrap().is_empty()),
        None => panic!("hardware counters were not checked"),
    }
}

#[test]
fn table_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    let out = costlab(&["machine", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for row in [
        "CPU",
        "CPUs online",
        "SMT",
        "NUMA nodes",
        "THP",
        "mitigations",
        "io_uring",
        "hardware counters",
    ] {
        assert!(text.contains(row), "{row} missing from the table");
    }
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(back["kernel"].as_str().is_some());

    let bad = costlab(&["machine", "--json", "/nonexistent/dir/m.json"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim().lines().count(),
        1
    );
}
