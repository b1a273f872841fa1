//! What `costlab numa` will measure on a machine: which nodes run threads, which hold memory,
//! how many threads, how much memory. Pure logic over a `Machine`, so that a fixture of a
//! 4-node machine tests it here on a 1-node VM.

use costlab_core::error::usage;
use costlab_core::machine::Machine;
use costlab_core::measure::cpus::{check_threads, format_cpu_list};
use costlab_core::measure::sizes::{format_size, human_size};

/// The line printed (and the reason `costlab run` skips the lab) on a one-node machine.
pub const ONE_NODE: &str = "one NUMA node: local vs remote needs two or more";

/// A node that can run the lab's threads: its id and the CPUs of it this process may use.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuNode {
    pub id: usize,
    pub cpus: Vec<usize>,
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Only these nodes (all when None).
    pub nodes: Option<Vec<usize>>,
    /// Threads for the bandwidth runs (per node for the matrix; in all for the policies).
    pub threads: Option<usize>,
    /// Working set of the latency chase.
    pub size: Option<u64>,
    pub quick: bool,
    /// Measure the bandwidth matrix (the quick plan leaves it out).
    pub bandwidth_matrix: bool,
    pub oversubscribe: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub cpu_nodes: Vec<CpuNode>,
    /// Nodes with memory that memory may be bound to.
    pub mem_nodes: Vec<usize>,
    /// (cpu node, mem node) pairs of the latency (and bandwidth) matrix.
    pub pairs: Vec<(usize, usize)>,
    pub latency_bytes: u64,
    /// Each bandwidth thread reads its own region of this size.
    pub bytes_per_thread: u64,
    /// Threads per node in the bandwidth matrix (0: no matrix).
    pub matrix_threads: usize,
    /// CPUs of the policy run, taken from the nodes in turn so the team spans them all.
    pub policy_cpus: Vec<usize>,
    /// Notes on what was left out and why.
    pub notes: Vec<String>,
}

/// Why the lab cannot run here, or None.
pub fn unavailable(machine: &Machine) -> Option<String> {
    let with_cpus = machine.nodes.iter().filter(|n| !n.cpus.is_empty()).count();
    (machine.nodes.len() < 2 || with_cpus < 1).then(|| ONE_NODE.to_string())
}

/// Plan the run for `machine` with this process allowed on `allowed` CPUs.
pub fn plan(machine: &Machine, allowed: &[usize], req: &Request) -> anyhow::Result<Plan> {
    let ids: Vec<usize> = machine.nodes.iter().map(|n| n.id).collect();
    let chosen: Vec<usize> = match &req.nodes {
        Some(want) => {
            if let Some(bad) = want.iter().find(|n| !ids.contains(n)) {
                return Err(usage(format!(
                    "--nodes names node {bad}, which this machine does not have; its nodes are {}",
                    format_cpu_list(&ids)
                )));
            }
            if want.len() < 2 {
                return Err(usage(
                    "--nodes needs two or more nodes to compare local with remote, like --nodes 0,1",
                ));
            }
            want.clone()
        }
        None => ids,
    };
    let mut notes = Vec::new();
    let mut cpu_nodes = Vec::new();
    let mut mem_nodes = Vec::new();
    for id in &chosen {
        let Some(node) = machine.node(*id) else {
            continue;
        };
        let cpus: Vec<usize> = node
            .cpus
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect();
        if !cpus.is_empty() {
            cpu_nodes.push(CpuNode { id: *id, cpus });
        } else if !node.cpus.is_empty() {
            notes.push(format!(
                "node {id}: none of its CPUs ({}) is in this process's affinity mask; no threads run there",
                format_cpu_list(&node.cpus)
            ));
        }
        if node.mem_total > 0 {
            mem_nodes.push(*id);
        } else {
            notes.push(format!("node {id} has no memory; nothing is bound there"));
        }
    }
    if cpu_nodes.is_empty() || mem_nodes.len() < 2 {
        return Err(usage(format!(
            "the chosen nodes give no local/remote pair (nodes with usable CPUs: {}, with memory: {}); choose others with --nodes",
            cpu_nodes.len(),
            mem_nodes.len()
        )));
    }

    let latency_bytes = req
        .size
        .unwrap_or(if req.quick { 64 << 20 } else { 256 << 20 });
    if latency_bytes < 1 << 20 {
        return Err(usage(format!(
            "--sizes {}: the chase needs at least 1M to leave the caches; use 64M or more",
            format_size(latency_bytes)
        )));
    }
    if latency_bytes > 64 << 30 {
        return Err(usage(format!(
            "--sizes {}: the chase stops at 64G (far past any cache); use 1G or less",
            format_size(latency_bytes)
        )));
    }
    let bytes_per_thread: u64 = if req.quick { 16 << 20 } else { 64 << 20 };

    let most_cpus = cpu_nodes.iter().map(|n| n.cpus.len()).max().unwrap_or(1);
    let all_cpus: usize = cpu_nodes.iter().map(|n| n.cpus.len()).sum();
    if let Some(t) = req.threads {
        check_threads(&[t], all_cpus, req.oversubscribe)?;
    }
    let cap = if req.quick { 4 } else { 8 };
    let matrix_threads = if req.bandwidth_matrix {
        req.threads
            .unwrap_or(most_cpus.min(cap))
            .min(most_cpus.max(1))
    } else {
        0
    };
    let policy_threads = req
        .threads
        .unwrap_or(all_cpus.min(if req.quick { 8 } else { 32 }));
    let policy_cpus = spread(&cpu_nodes, policy_threads);

    // Each mem node must hold the largest single placement with room to spare.
    let largest = latency_bytes
        .max(bytes_per_thread * matrix_threads as u64)
        .max(bytes_per_thread * policy_cpus.len() as u64 / mem_nodes.len().max(1) as u64);
    for id in &mem_nodes {
        if let Some(n) = machine.node(*id) {
            if n.mem_free > 0 && largest > n.mem_free / 2 {
                return Err(usage(format!(
                    "node {id} has {} free; a run needs {} there (half its free memory at most): lower --sizes or --threads",
                    human_size(n.mem_free),
                    human_size(largest)
                )));
            }
        }
    }
    let pairs = pairs(machine, &cpu_nodes, &mem_nodes, req.quick);
    Ok(Plan {
        pairs,
        cpu_nodes,
        mem_nodes,
        latency_bytes,
        bytes_per_thread,
        matrix_threads,
        policy_cpus,
        notes,
    })
}

/// `threads` CPUs taken from the nodes in turn (node 0's first, node 1's first, ...), wrapping
/// round when there are more threads than CPUs.
pub fn spread(nodes: &[CpuNode], threads: usize) -> Vec<usize> {
    let mut order = Vec::new();
    let deepest = nodes.iter().map(|n| n.cpus.len()).max().unwrap_or(0);
    for k in 0..deepest {
        for n in nodes {
            if let Some(&c) = n.cpus.get(k) {
                order.push(c);
            }
        }
    }
    if order.is_empty() {
        return Vec::new();
    }
    (0..threads).map(|i| order[i % order.len()]).collect()
}

/// Every (cpu node, mem node) pair; a quick plan on more than four nodes keeps, per CPU node,
/// the local node and the farthest one (by SLIT distance), so it stays within its budget.
pub fn pairs(
    machine: &Machine,
    cpu_nodes: &[CpuNode],
    mem_nodes: &[usize],
    quick: bool,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for c in cpu_nodes {
        if quick && mem_nodes.len() > 4 {
            let dist = |m: usize| {
                machine
                    .node(c.id)
                    .and_then(|n| n.distances.get(m).copied())
                    .unwrap_or(0)
            };
            if mem_nodes.contains(&c.id) {
                out.push((c.id, c.id));
            }
            if let Some(far) = mem_nodes
                .iter()
                .copied()
                .filter(|&m| m != c.id)
                .max_by_key(|&m| (dist(m), std::cmp::Reverse(m)))
            {
                out.push((c.id, far));
            }
        } else {
            out.extend(mem_nodes.iter().map(|&m| (c.id, m)));
        }
    }
    out
}
