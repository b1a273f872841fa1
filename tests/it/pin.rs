//! `costlab pin` from the command line: bad input exits 2 with one line, and a short run's
//! JSON rows carry the documented case keys (workload, placement) and metrics.

use crate::common::ran_db as costlab;

/// The one line of a bad input's stderr, after checking the exit status is 2.
fn refused(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let ran = costlab(&dir.path().join("h.db"), args);
    let err = ran.stderr.trim_end().to_string();
    assert_eq!(ran.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("costlab: "), "{err}");
    err
}

#[test]
fn bad_workloads_placements_and_durations_exit_2_with_one_line() {
    for (args, want) in [
        (
            &["pin", "--case", "disk"][..],
            "unknown workload 'disk': use memory, sharing, echo",
        ),
        (
            &["pin", "--placement", "pinned,nowhere"],
            "unknown placement 'nowhere'",
        ),
        (&["pin", "--placement", ""], "--placement is empty"),
        (&["pin", "--case", "memory,,echo"], "an item is empty"),
        (
            &["pin", "--duration", "10ms"],
            "use a time from 50ms to 600s",
        ),
        (&["pin", "--duration", "soon"], "bad --duration 'soon'"),
        (&["pin", "--samples", "0"], "--samples 0"),
    ] {
        let err = refused(args);
        assert!(err.contains(want), "{args:?}: want {want}: {err}");
    }
}

#[test]
fn an_impossible_placement_is_refused_in_one_line_before_anything_runs() {
    // No machine here has 256 physical cores, SMT siblings 256 wide or 256 CPUs on a node.
    for (placement, want) in [
        (
            "per-core",
            "per-core runs one thread per physical core: 256 threads need 256 cores",
        ),
        ("same-node", "256 threads need 256 CPUs on a node"),
    ] {
        let err = refused(&[
            "pin",
            "--case",
            "sharing",
            "--threads",
            "256",
            "--placement",
            placement,
        ]);
        assert!(err.contains(want), "{placement}: {err}");
    }
    let err = refused(&["pin", "--threads", "0"]);
    assert!(err.contains("bad --threads '0'"), "{err}");
    // What this machine lacks is refused by name, in the line the README shows.
    let m = costlab_core::machine::Machine::probe();
    if m.threads_per_core == 1 {
        assert_eq!(
            refused(&["pin", "--placement", "same-core"]),
            "costlab: same-core needs SMT siblings; this machine has 1 thread per core"
        );
    }
    if m.nodes.iter().filter(|n| !n.cpus.is_empty()).count() < 2 {
        assert_eq!(
            refused(&["pin", "--placement", "cross-node"]),
            "costlab: cross-node needs two NUMA nodes; this machine has 1"
        );
    }
}

#[test]
fn an_unknown_option_gets_clap_s_whole_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let ran = costlab(&dir.path().join("h.db"), &["pin", "--bogus"]);
    assert_eq!(ran.status.code(), Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr
            .starts_with("costlab: unexpected argument '--bogus'")
            && ran.stderr.contains("Usage: costlab pin [OPTIONS]"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_short_run_writes_rows_by_workload_and_placement() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: pin needs two CPUs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ran = costlab(
        &dir.path().join("h.db"),
        &[
            "pin",
            "--case",
            "sharing,echo",
            "--placement",
            "pinned,stacked",
            "--duration",
            "200ms",
            "--samples",
            "2",
            "--json",
            "-",
        ],
    );
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr);
    let doc: serde_json::Value = crate::common::schema::doc(&ran.stdout);
    assert_eq!(doc["schema"], "costlab/1");
    let rows = doc["results"].as_array().unwrap();
    for want_w in ["sharing", "echo"] {
        for want_p in ["pinned", "stacked"] {
            let r = rows
                .iter()
                .find(|r| {
                    r["metric"] == "throughput"
                        && r["case"]["workload"] == want_w
                        && r["case"]["placement"] == want_p
                })
                .unwrap_or_else(|| panic!("no throughput of {want_w} {want_p}: {rows:?}"));
            assert!(r["summary"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert_eq!(r["summary"]["n"], 2, "{r}");
        }
    }
    for r in rows {
        assert_eq!(r["lab"], "pin");
        let metric = r["metric"].as_str().unwrap();
        assert!(
            ["throughput", "migrations", "context_switches"].contains(&metric),
            "{metric}"
        );
        // Where each thread ran, by thread, on CPUs this machine has.
        let ran_on = r["conditions"]["ran_on"].as_object().expect("ran_on");
        assert!(!ran_on.is_empty(), "{r}");
        if r["case"]["placement"] == "stacked" && r["case"]["workload"] == "sharing" {
            let cpus: Vec<&serde_json::Value> = ran_on.values().collect();
            assert_eq!(cpus.len(), 2, "{r}");
            assert_eq!(cpus[0], cpus[1], "stacked threads share one CPU: {r}");
            assert_eq!(cpus[0].as_array().unwrap().len(), 1, "{r}");
        }
        if metric == "throughput" {
            // IPC counted, or the reason it is not (no PMU in a VM).
            assert!(
                r["counters"]["IPC"].is_number() || r["unsupported_counters"]["IPC"].is_string(),
                "{r}"
            );
        }
        let unit = r["unit"].as_str().unwrap();
        match metric {
            "throughput" => assert!(["Mop/s", "req/s"].contains(&unit), "{unit}"),
            _ => assert_eq!(unit, "per s"),
        }
    }
    // The tables went to stderr, stdout is the JSON alone.
    assert!(ran.stderr.contains("placement"), "{}", ran.stderr);
}
