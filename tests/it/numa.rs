//! The NUMA lab and numa-maps: fixture parsing, planning on a 4-node fixture, the measuring
//! path on this machine's node 0, and the binary's one-node behaviour and exit codes.

use crate::common::costlab;

use std::path::PathBuf;
use std::process::Command;

use costlab_core::machine::Machine;
use costlab_core::measure::cpus::allowed_cpus;
use costlab_core::measure::SampleSpec;
use costlab_numa::plan::{self, CpuNode, Plan, Request};
use costlab_numa::{execute, maps};
use serde_json::Value;

fn root(name: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name]
        .iter()
        .collect()
}

#[test]
fn numa_maps_of_a_process_with_2m_and_1g_pages() {
    let m = Machine::probe_at(&root("xeon-2s-4node"));
    let p = maps::read_process(&root("xeon-2s-4node"), 4242).unwrap();
    assert_eq!(p.status.name, "mysqld");
    assert_eq!(p.status.cpus_allowed, vec![0, 4]);
    assert_eq!(p.nodes.len(), 4);
    let n0 = p.nodes[&0];
    assert_eq!(
        (n0.anon, n0.file, n0.huge),
        (8990720.0, 671744.0, 8388608.0)
    );
    let n1 = p.nodes[&1];
    assert_eq!(
        (n1.anon, n1.file, n1.huge),
        (2506752.0, 163840.0, 2147483648.0)
    );
    assert_eq!(
        (p.nodes[&2].anon, p.nodes[&3].total()),
        (409600.0, 409600.0)
    );
    let all = p.all();
    assert_eq!(
        (all.anon, all.file, all.huge),
        (12316672.0, 835584.0, 2155872256.0)
    );
    // Without hugetlb, numa_maps adds up to the status VmRSS exactly.
    assert_eq!(all.total() - all.huge, p.status.rss.unwrap() as f64);
    assert_eq!(p.status.hugetlb, Some(2105344 * 1024));
    assert_eq!(p.cpu_nodes(&m).into_iter().collect::<Vec<_>>(), vec![0]);
    let w = p.placement_warning(&m).unwrap();
    assert!(w.starts_with("pid 4242 (mysqld) may run only on CPUs 0,4 (node 0) but 99% of its memory is elsewhere: node 1 2050.5 MiB, node 2 0.4 MiB, node 3 0.4 MiB"), "{w}");

    let out = maps::outcome_for(&m, &[p]);
    // 5 node labels (0-3, all) x 4 kinds + the rss row.
    assert_eq!(out.results.len(), 21);
    let huge_all = out
        .find(
            "memory",
            &costlab_core::case! {"pid" => 4242, "node" => "all", "kind" => "huge"},
        )
        .unwrap();
    assert_eq!(huge_all.unit, "MiB");
    assert_eq!(huge_all.summary.median, 2056.0);
    assert_eq!(out.notes.len(), 1);
}

#[test]
fn planning_on_the_four_node_fixture() {
    let m = Machine::probe_at(&root("xeon-2s-4node"));
    assert_eq!(plan::unavailable(&m), None);
    let all: Vec<usize> = (0..8).collect();
    let p = plan::plan(
        &m,
        &all,
        &Request {
            bandwidth_matrix: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        p.cpu_nodes,
        (0..4)
            .map(|i| CpuNode {
                id: i,
                cpus: vec![i, i + 4]
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(p.mem_nodes, vec![0, 1, 2, 3]);
    assert_eq!(p.pairs.len(), 16);
    assert_eq!(p.pairs[5], (1, 1));
    assert_eq!(p.latency_bytes, 256 << 20);
    assert_eq!(p.matrix_threads, 2);
    // The policy team takes node 0's first CPU, node 1's first, ... then the siblings.
    assert_eq!(p.policy_cpus, vec![0, 1, 2, 3, 4, 5, 6, 7]);

    // Restricted to CPUs 0-1 (nodes 0 and 1): threads only there, memory still everywhere.
    let p = plan::plan(
        &m,
        &[0, 1],
        &Request {
            quick: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        p.cpu_nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(p.pairs.len(), 8);
    assert_eq!(p.matrix_threads, 0);
    assert_eq!(p.latency_bytes, 64 << 20);
    assert_eq!(p.policy_cpus, vec![0, 1]);
    assert_eq!(p.notes.len(), 2);

    let code = |r: anyhow::Result<Plan>| costlab_core::error::exit_code(&r.unwrap_err());
    let req = |f: fn(&mut Request)| {
        let mut r = Request::default();
        f(&mut r);
        r
    };
    assert_eq!(
        code(plan::plan(&m, &all, &req(|r| r.nodes = Some(vec![0, 9])))),
        2
    );
    assert_eq!(
        code(plan::plan(&m, &all, &req(|r| r.nodes = Some(vec![1])))),
        2
    );
    assert_eq!(code(plan::plan(&m, &all, &req(|r| r.threads = Some(0)))), 2);
    assert_eq!(code(plan::plan(&m, &all, &req(|r| r.threads = Some(9)))), 2);
    assert_eq!(code(plan::plan(&m, &all, &req(|r| r.size = Some(4096)))), 2);
    assert_eq!(
        code(plan::plan(&m, &all, &req(|r| r.size = Some(65 << 30)))),
        2
    );
    // 40 GiB cannot fit in half of node 0's 48 GiB free.
    assert_eq!(
        code(plan::plan(&m, &all, &req(|r| r.size = Some(40 << 30)))),
        2
    );
    let two = plan::plan(&m, &all, &req(|r| r.nodes = Some(vec![0, 3]))).unwrap();
    assert_eq!(two.pairs, vec![(0, 0), (0, 3), (3, 0), (3, 3)]);

    let vm = Machine::probe_at(&root("epyc-vm-1node"));
    assert_eq!(
        plan::unavailable(&vm).as_deref(),
        Some("one NUMA node: local vs remote needs two or more")
    );
}

#[test]
fn quick_plans_on_many_nodes_keep_local_and_farthest() {
    let mut m = Machine::probe_at(&root("xeon-2s-4node"));
    let mut extra = m.nodes.clone();
    for n in extra.iter_mut() {
        n.id += 4;
        n.cpus = n.cpus.iter().map(|c| c + 8).collect();
    }
    m.nodes.extend(extra);
    for n in m.nodes.iter_mut() {
        n.distances = (0..8)
            .map(|j| {
                if j == n.id {
                    10
                } else {
                    20 + (j as u32 + n.id as u32) % 8
                }
            })
            .collect();
    }
    let cpus: Vec<CpuNode> = m
        .nodes
        .iter()
        .map(|n| CpuNode {
            id: n.id,
            cpus: n.cpus.clone(),
        })
        .collect();
    let mem: Vec<usize> = (0..8).collect();
    let pairs = plan::pairs(&m, &cpus, &mem, true);
    assert_eq!(pairs.len(), 16);
    // Node 0: distances 20 + j % 8, farthest is node 7.
    assert_eq!(&pairs[..2], &[(0, 0), (0, 7)]);
    assert_eq!(plan::pairs(&m, &cpus, &mem, false).len(), 64);
}

/// The measuring path, run here as a 1 x 1 plan on node 0 with counters on: every row gets
/// counters, hardware ones explained where the VM has no PMU.
#[test]
fn the_measuring_path_runs_on_node_zero_with_counters() {
    let m = Machine::probe();
    let allowed = allowed_cpus();
    let node0: Vec<usize> = m.node(0).map_or(allowed.clone(), |n| {
        n.cpus
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect()
    });
    let p = Plan {
        cpu_nodes: vec![CpuNode {
            id: 0,
            cpus: node0.clone(),
        }],
        mem_nodes: vec![0],
        pairs: vec![(0, 0)],
        latency_bytes: 2 << 20,
        bytes_per_thread: 2 << 20,
        matrix_threads: 1,
        policy_cpus: node0.iter().copied().take(2).collect(),
        notes: vec![],
    };
    let spec = SampleSpec {
        samples: 3,
        min_sample: std::time::Duration::from_millis(2),
        warmup: std::time::Duration::from_millis(2),
    };
    let out = execute(&m, &p, &spec, true).unwrap();
    println!("{}", costlab_numa::render(&out));
    assert_eq!(out.results.len(), 5, "{:?}", out.results);
    let lat = out
        .find(
            "latency",
            &costlab_core::case! {"cpu_node" => 0, "mem_node" => 0, "policy" => "bind"},
        )
        .unwrap();
    assert!(lat.summary.median > 0.0 && lat.summary.n == 3);
    for policy in ["bind", "interleave", "first-touch"] {
        let r = out
            .find(
                "bandwidth",
                &costlab_core::case! {"cpu_node" => "all", "policy" => policy},
            )
            .unwrap();
        assert!(r.summary.median > 0.0);
    }
    let ft = out
        .find(
            "bandwidth",
            &costlab_core::case! {"policy" => "first-touch"},
        )
        .unwrap();
    assert_eq!(ft.case["mem_node"], serde_json::json!(0));
    for r in &out.results {
        let c = r.counters.as_ref().expect("counters on every row");
        let un = r.unsupported_counters.clone().unwrap_or_default();
        for name in [
            "cycles",
            "instructions",
            "IPC",
            "dTLB-load-misses",
            "page-faults",
        ] {
            assert!(
                c.contains_key(name) || un.contains_key(name),
                "{name} missing"
            );
        }
        assert!(c.contains_key("page-faults"), "software counters must come");
    }
    // Where the machine has no usable PMU (this VM), every hardware counter says so.
    if m.hw_counters_work == Some(false) {
        for r in &out.results {
            let un = r.unsupported_counters.as_ref().unwrap();
            for name in [
                "cycles",
                "instructions",
                "IPC",
                "cache-references",
                "cache-misses",
                "dTLB-load-misses",
                "iTLB-load-misses",
                "branch-misses",
            ] {
                assert!(!un[name].is_empty(), "{name} not explained");
            }
        }
    }
    assert!(out.models.is_empty(), "no remote pair, no SLIT model");
    let text = costlab_numa::render(&out);
    assert!(
        text.contains("latency") && text.contains("first-touch") && text.contains("counters [")
    );
    assert!(
        allowed_cpus() == allowed,
        "the main thread's affinity is restored"
    );
}

#[test]
fn one_node_says_so_in_one_line() {
    let vm_like = Machine::probe().numa_nodes < 2;
    let out = costlab(&["numa", "--quick", "--counters", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0));
    if vm_like {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines[0],
            "note: one NUMA node: local vs remote needs two or more"
        );
        // Then only the run's id, for compare and export.
        assert_eq!(lines.len(), 2, "{err}");
        assert!(lines[1].starts_with("costlab: run "), "{err}");
        let doc: Value = crate::common::schema::doc(&out.stdout);
        assert_eq!(doc["schema"], "costlab/1");
        assert_eq!(doc["results"].as_array().unwrap().len(), 0);
    }
}

#[test]
fn numa_knobs_on_one_node_say_so_in_one_line() {
    if Machine::probe().numa_nodes >= 2 {
        return; // two_node.rs runs the knobs in the emulated two-node machine
    }
    let out = costlab(&["numa-knobs", "--quick", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "note: one NUMA node: local vs remote needs two or more; the NUMA knobs (zone_reclaim_mode, numa_balancing) act between nodes, so there is nothing to measure"
    );
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[1].starts_with("costlab: run "), "{err}");
    let doc: Value = crate::common::schema::doc(&out.stdout);
    assert_eq!(doc["results"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for args in [
        &["numa-knobs", "--case", "swap"][..],
        &["numa-knobs", "--sizes", "1K"],
        &["numa-knobs", "--sizes", "8M,16M"],
        &["numa", "--sizes", "0"],
        &["numa", "--threads", "x"],
        &["numa", "--nodes", "a-b"],
        &["numa-maps", "4000000000"],
        &["numa-maps", "nope"],
        &["numa-maps"],
    ] {
        let out = costlab(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("costlab: "), "{err}");
    }
}

/// Must show: numa-maps on a running costlab process totals its RSS within 5%. The same
/// process reads its numa_maps and then its status; hugetlb pages are in neither RSS nor (here)
/// the mapping, so the comparison is numa_maps without hugetlb against VmRSS.
#[test]
fn numa_maps_self_matches_rss() {
    let out = costlab(&["numa-maps", "--self", "--json", "-"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = crate::common::schema::doc(&out.stdout);
    let rows = doc["results"].as_array().unwrap();
    let find = |metric: &str, node: &str, kind: &str| {
        rows.iter()
            .find(|r| {
                r["metric"] == metric
                    && (node.is_empty() || r["case"]["node"] == node)
                    && (kind.is_empty() || r["case"]["kind"] == kind)
            })
            .map(|r| r["summary"]["median"].as_f64().unwrap())
    };
    let total = find("memory", "all", "total").unwrap();
    let huge = find("memory", "all", "huge").unwrap();
    let rss = find("rss", "", "").unwrap();
    let mapped = total - huge;
    assert!(rss > 0.5, "RSS {rss} MiB looks wrong");
    assert!(
        (mapped - rss).abs() / rss <= 0.05,
        "numa_maps {mapped:.2} MiB vs VmRSS {rss:.2} MiB"
    );
    let pid = rows[0]["case"]["pid"].as_u64().unwrap();
    assert!(rows.iter().all(|r| r["case"]["pid"].as_u64() == Some(pid)));
}

/// Another process, read by PID while it runs.
#[test]
fn numa_maps_of_another_process() {
    let mut child = Command::new("sleep").arg("20").spawn().expect("sleep");
    let pid = child.id().to_string();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = costlab(&["numa-maps", &pid, "--json", "-"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = crate::common::schema::doc(&out.stdout);
    let rows = doc["results"].as_array().unwrap();
    let median = |metric: &str, kind: &str| {
        rows.iter()
            .find(|r| {
                r["metric"] == metric
                    && (kind.is_empty()
                        || (r["case"]["kind"] == kind && r["case"]["node"] == "all"))
            })
            .and_then(|r| r["summary"]["median"].as_f64())
            .unwrap()
    };
    let mapped = median("memory", "total") - median("memory", "huge");
    let rss = median("rss", "");
    assert!(median("memory", "file") > 0.0);
    assert!(
        (mapped - rss).abs() / rss <= 0.05,
        "numa_maps {mapped:.2} MiB vs VmRSS {rss:.2} MiB"
    );
}
