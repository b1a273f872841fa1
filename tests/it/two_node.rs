//! The NUMA path on a real two-node kernel: boot an emulated two-node machine with virtme-ng
//! (QEMU without KVM, Debian's kernel, the host's root read-only, /tmp writable) and run
//! costlab inside. Checks placement and output, never costs: the emulator does not slow
//! remote memory.
//!
//! Needs what scripts/install-deps.sh installs (qemu-system-x86, linux-image-amd64, numactl,
//! busybox-static, virtme-ng in /opt/virtme-ng). Skips, saying why, where the guest cannot
//! boot; fails instead when CI=true.

use serde_json::Value;

use crate::common::guest::{self, json_in, section, Boot};

const BIN: &str = env!("CARGO_BIN_EXE_costlab");

/// The guest's script: each command's JSON between markers.
fn script() -> String {
    format!(
        "set -x; echo 0 > /proc/sys/kernel/numa_balancing; export COSTLAB_DB=/tmp/costlab-two-node.db; \
         echo '==machine'; {BIN} machine --json -; \
         echo '==numa'; {BIN} numa --quick --samples 2 --sizes 16M --json - 2>/dev/null; \
         echo '==bind'; numactl --membind=1 --cpunodebind=1 {BIN} numa-maps --self --json - 2>/dev/null; \
         echo '==interleave'; numactl --interleave=0,1 {BIN} numa-maps --self --json - 2>/dev/null; \
         echo '==balancing'; cat /proc/sys/kernel/numa_balancing; echo '==end'"
    )
}

/// MiB of anonymous memory per node from a numa-maps document.
fn anon_by_node(doc: &Value) -> Vec<(u64, f64)> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["case"]["kind"] == "anon" && r["case"]["node"].is_u64())
        .map(|r| {
            (
                r["case"]["node"].as_u64().unwrap(),
                r["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn costlab_on_an_emulated_two_node_machine() {
    if let Some(why) = guest::cannot_boot(&[("numactl", "numactl")]) {
        crate::common::skip::skipped_unless_ci("two_node", &why);
        return;
    }
    let options = ["--cpus", "2", "--memory", "2G"]
        .into_iter()
        .chain(["--numa", "1G,cpus=0", "--numa", "1G,cpus=1"])
        .map(String::from)
        .collect();
    let started = std::time::Instant::now();
    let (stdout, out) = guest::boot(&Boot {
        options,
        script: &script(),
        timeout_s: 600,
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "two_node: guest ran in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if section(&stdout, "machine").is_none() {
        crate::common::skip::skipped_unless_ci(
            "two_node",
            &format!(
                "the guest did not boot or run costlab ({})",
                guest::stderr_tail(&out)
            ),
        );
        return;
    }
    assert!(
        section(&stdout, "end").is_some(),
        "the guest script did not finish:\n{stdout}\n{stderr}"
    );

    // costlab machine: two nodes and their distances.
    let m = json_in(section(&stdout, "machine").unwrap());
    assert_eq!(m["numa_nodes"], 2, "{m}");
    let nodes = m["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    let text = nodes[0].to_string();
    assert!(text.contains("20"), "node 0 has no remote distance: {text}");
    assert_eq!(
        section(&stdout, "balancing").unwrap().trim(),
        "0",
        "numa_balancing is off"
    );

    // costlab numa --quick: both matrices full, 2 x 2 each.
    let numa = json_in(section(&stdout, "numa").unwrap());
    for metric in ["latency", "bandwidth"] {
        let mut cells: Vec<(String, String)> = numa["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["metric"] == metric && r["case"]["policy"] == "bind")
            .map(|r| {
                (
                    r["case"]["cpu_node"].to_string(),
                    r["case"]["mem_node"].to_string(),
                )
            })
            .filter(|(c, _)| c != "\"all\"")
            .collect();
        cells.sort();
        cells.dedup();
        assert_eq!(cells.len(), 4, "{metric} matrix is not 2 x 2: {cells:?}");
    }

    // Bound to node 1: the anonymous memory is on node 1.
    let bind = anon_by_node(&json_in(section(&stdout, "bind").unwrap()));
    let on1: f64 = bind.iter().filter(|(n, _)| *n == 1).map(|x| x.1).sum();
    let total: f64 = bind.iter().map(|x| x.1).sum();
    assert!(
        total > 0.0 && on1 / total > 0.95,
        "bind to node 1: {bind:?}"
    );

    // Interleaved: pages on both nodes.
    let il = anon_by_node(&json_in(section(&stdout, "interleave").unwrap()));
    for node in [0, 1] {
        assert!(
            il.iter().any(|(n, mib)| *n == node && *mib > 0.0),
            "interleave left node {node} empty: {il:?}"
        );
    }
}
