//! The NUMA path on a real two-node kernel: boot an emulated two-node machine with virtme-ng
//! (QEMU without KVM, Debian's kernel, the host's root read-only, /tmp writable) and run
//! costlab inside. Checks placement and output, never costs: the emulator does not slow
//! remote memory.
//!
//! Needs what scripts/install-deps.sh installs (qemu-system-x86, linux-image-amd64, numactl,
//! busybox-static, virtme-ng in /opt/virtme-ng). Skips, saying why, where the guest cannot
//! boot; fails instead when CI=true.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_costlab");

fn vng() -> Option<PathBuf> {
    let opt = PathBuf::from("/opt/virtme-ng/bin/vng");
    if opt.exists() {
        return Some(opt);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("vng"))
            .find(|f| f.exists())
    })
}

fn kernel() -> Option<PathBuf> {
    let mut k: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    k.sort();
    k.pop()
}

fn on_path(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the guest cannot be booted here, or None.
fn cannot_boot() -> Option<String> {
    if vng().is_none() {
        return Some(
            "no vng (pip install virtme-ng into /opt/virtme-ng; scripts/install-deps.sh does)"
                .into(),
        );
    }
    if kernel().is_none() {
        return Some("no /boot/vmlinuz-* (apt-get install linux-image-amd64)".into());
    }
    for (cmd, pkg) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("numactl", "numactl"),
    ] {
        if !on_path(cmd) {
            return Some(format!("no {cmd} (apt-get install {pkg})"));
        }
    }
    None
}

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

/// The text between `==name` and the next marker line.
fn section<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    let start = out.find(&format!("=={name}\n"))? + name.len() + 3;
    let rest = &out[start..];
    let end = rest.find("\n==").map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}

fn json_in(text: &str) -> Value {
    let from = text.find('{').expect("no JSON in the section");
    let to = text.rfind('}').expect("no JSON end in the section");
    serde_json::from_str(&text[from..=to]).expect("the section's JSON parses")
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
    if let Some(why) = cannot_boot() {
        crate::common::skip::skipped_unless_ci("two_node", &why);
        return;
    }
    let (vng, kernel) = (vng().unwrap(), kernel().unwrap());
    let bin_dir = vng.parent().unwrap_or(Path::new("/")).to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("timeout");
    cmd.arg("600")
        .arg(&vng)
        .arg("--run")
        .arg(&kernel)
        .args(["--disable-kvm", "--cpus", "2", "--memory", "2G"])
        .args(["--numa", "1G,cpus=0", "--numa", "1G,cpus=1"])
        .arg("--exec")
        .arg(script())
        .env("PATH", path);
    let started = std::time::Instant::now();
    let out = cmd.output().expect("running vng");
    let stdout = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "two_node: guest ran in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if section(&stdout, "machine").is_none() {
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        crate::common::skip::skipped_unless_ci(
            "two_node",
            &format!(
                "the guest did not boot or run costlab (status {:?}): {tail}",
                out.status.code()
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
