//! NUMA nodes: their CPUs, memory and distance rows, and the kernel's NUMA policies.

use serde::{Deserialize, Serialize};

use super::sysfs::Root;

/// One NUMA node as sysfs describes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NumaNode {
    pub id: usize,
    pub cpus: Vec<usize>,
    /// Bytes of memory on the node (its meminfo MemTotal).
    pub mem_total: u64,
    pub mem_free: u64,
    /// SLIT distances to every node, in node order (10 = local).
    pub distances: Vec<u32>,
}

pub fn read_nodes(root: &Root) -> Vec<NumaNode> {
    let base = "sys/devices/system/node";
    let ids = root
        .cpu_list(&format!("{base}/online"))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| root.numbered(base, "node"));
    ids.into_iter()
        .map(|id| {
            let dir = format!("{base}/node{id}");
            let meminfo = root.text(&format!("{dir}/meminfo")).unwrap_or_default();
            NumaNode {
                id,
                cpus: root.cpu_list(&format!("{dir}/cpulist")).unwrap_or_default(),
                mem_total: node_meminfo(&meminfo, "MemTotal").unwrap_or(0),
                mem_free: node_meminfo(&meminfo, "MemFree").unwrap_or(0),
                distances: root
                    .value(&format!("{dir}/distance"))
                    .map(|d| {
                        d.split_whitespace()
                            .filter_map(|x| x.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A "Node 0 MemTotal:  8874188 kB" line's value in bytes.
fn node_meminfo(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.split_whitespace().last()? != key {
            return None;
        }
        let kb: u64 = v.split_whitespace().next()?.parse().ok()?;
        kb.checked_mul(1024)
    })
}

/// A node's numastat counters (numa_hit, numa_miss, numa_foreign, interleave_hit,
/// local_node, other_node: pages), from sysfs node*/numastat.
pub fn read_numastat(root: &Root, node: usize) -> std::collections::BTreeMap<String, u64> {
    parse_numastat(
        &root
            .text(&format!("sys/devices/system/node/node{node}/numastat"))
            .unwrap_or_default(),
    )
}

/// "numa_hit 12345" lines.
pub fn parse_numastat(text: &str) -> std::collections::BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// One key of a node's meminfo ("FilePages", "MemFree"), in bytes.
pub fn read_node_meminfo(root: &Root, node: usize, key: &str) -> Option<u64> {
    node_meminfo(
        &root.text(&format!("sys/devices/system/node/node{node}/meminfo"))?,
        key,
    )
}

/// The node whose CPU list holds `cpu`.
pub fn node_of_cpu(nodes: &[NumaNode], cpu: usize) -> Option<usize> {
    nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id)
}

/// What vm.zone_reclaim_mode's bits mean (0 = allocate from other nodes before reclaiming).
pub fn zone_reclaim_meaning(mode: u32) -> String {
    if mode == 0 {
        return "0: off (take memory from other nodes before reclaiming locally)".to_string();
    }
    let mut parts = vec!["reclaim locally first"];
    if mode & 2 != 0 {
        parts.push("write dirty pages");
    }
    if mode & 4 != 0 {
        parts.push("swap pages");
    }
    format!("{mode}: {} (can stall allocations)", parts.join(", "))
}

/// What kernel.numa_balancing means.
pub fn numa_balancing_meaning(v: u32) -> String {
    match v {
        0 => "0: off".to_string(),
        1 => "1: on (pages migrate toward the CPUs that touch them)".to_string(),
        2 => "2: memory tiering mode".to_string(),
        n => format!("{n}: on (mode bits {n})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_meminfo_lines() {
        let t = "Node 1 MemTotal:        8874188 kB\nNode 1 MemFree:  100 kB\n";
        assert_eq!(node_meminfo(t, "MemTotal"), Some(8874188 * 1024));
        assert_eq!(node_meminfo(t, "MemFree"), Some(102400));
        assert_eq!(node_meminfo(t, "MemUsed"), None);
        assert!(zone_reclaim_meaning(0).starts_with("0: off"));
        assert!(zone_reclaim_meaning(3).contains("write dirty pages"));
        let st = parse_numastat("numa_hit 1719\nnuma_miss 0\nother_node 12\nbad\n");
        assert_eq!(st.get("numa_hit"), Some(&1719));
        assert_eq!(st.get("other_node"), Some(&12));
        assert_eq!(st.len(), 3);
    }
}
