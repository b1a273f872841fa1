//! Where each thread of a placement may run, worked out from the CPUs allowed, the machine's
//! topology (which CPUs share a physical core, which node each is on) and its IRQ table. Pure,
//! so the tests can feed it any machine.

use std::collections::BTreeMap;

use costlab_core::machine::{CpuPlace, NetIface};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// One thread per CPU, each pinned (the server away from the NIC's interrupts).
    Pinned,
    /// No affinity: the scheduler places and moves threads.
    Free,
    /// Two busy threads pinned to one CPU.
    Stacked,
    /// The server pinned on the CPU that takes the network interrupts.
    IrqCpu,
    /// One thread per SMT sibling of one physical core (they share its pipeline and caches).
    SameCore,
    /// One thread per CPU of one NUMA node, spread over its cores first.
    SameNode,
    /// Threads dealt over the NUMA nodes in turn (thread 0 on node 0, thread 1 on node 1, ...).
    CrossNode,
    /// One thread per physical core (no two on SMT siblings).
    PerCore,
}

pub const ALL: [Placement; 8] = [
    Placement::Pinned,
    Placement::Free,
    Placement::Stacked,
    Placement::IrqCpu,
    Placement::SameCore,
    Placement::SameNode,
    Placement::CrossNode,
    Placement::PerCore,
];

/// The placement names for help and errors.
pub const NAMES: &str =
    "pinned, free, stacked, irq-cpu, same-core, same-node, cross-node, per-core";

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Pinned => "pinned",
            Placement::Free => "free",
            Placement::Stacked => "stacked",
            Placement::IrqCpu => "irq-cpu",
            Placement::SameCore => "same-core",
            Placement::SameNode => "same-node",
            Placement::CrossNode => "cross-node",
            Placement::PerCore => "per-core",
        }
    }

    pub fn parse(t: &str) -> Option<Placement> {
        ALL.into_iter().find(|p| p.name() == t)
    }
}

/// The machine as the placements see it: the CPUs this process may use, grouped by
/// physical core and by node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layout {
    pub allowed: Vec<usize>,
    /// Allowed CPUs by physical core (SMT siblings together), cores in order of first CPU.
    pub cores: Vec<Vec<usize>>,
    /// Allowed CPUs by NUMA node (node id, CPUs), each node's CPUs in core-spread order:
    /// the first sibling of every core, then the second, ...
    pub nodes: Vec<(usize, Vec<usize>)>,
    /// Hardware threads per core on the machine (all CPUs, not only the allowed ones).
    pub threads_per_core: usize,
    /// NUMA nodes with CPUs on the machine.
    pub machine_nodes: usize,
}

impl Layout {
    /// Read from the machine's CPU places; a CPU the topology does not list is a core of its
    /// own on node 0.
    pub fn new(allowed: &[usize], places: &[CpuPlace]) -> Layout {
        let place = |c: usize| places.iter().find(|p| p.cpu == c);
        let mut cores: Vec<Vec<usize>> = Vec::new();
        for &c in allowed {
            let siblings: Vec<usize> = place(c)
                .map(|p| p.core_cpus.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| vec![c]);
            let mine: Vec<usize> = siblings
                .into_iter()
                .filter(|s| allowed.contains(s))
                .collect();
            if !cores.contains(&mine) {
                cores.push(mine);
            }
        }
        cores.sort_by_key(|c| c.first().copied());
        let deepest = cores.iter().map(Vec::len).max().unwrap_or(0);
        let mut by_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for k in 0..deepest {
            for core in &cores {
                if let Some(&c) = core.get(k) {
                    let node = place(c).and_then(|p| p.node).unwrap_or(0);
                    by_node.entry(node).or_default().push(c);
                }
            }
        }
        let threads_per_core = places
            .iter()
            .map(|p| p.core_cpus.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut machine_nodes: Vec<usize> = places.iter().filter_map(|p| p.node).collect();
        machine_nodes.sort_unstable();
        machine_nodes.dedup();
        Layout {
            allowed: allowed.to_vec(),
            cores,
            nodes: by_node.into_iter().collect(),
            threads_per_core,
            machine_nodes: machine_nodes.len().max(1),
        }
    }
}

/// Interrupts taken per CPU by every network interface (NIC queues; virtio-net in a VM).
pub fn net_irqs(ifaces: &[NetIface]) -> BTreeMap<usize, u64> {
    let mut t = BTreeMap::new();
    for i in ifaces {
        for (cpu, n) in i.irq_cpus() {
            *t.entry(cpu).or_insert(0) += n;
        }
    }
    t
}

/// The allowed CPU that takes the most network interrupts (None when none takes any).
pub fn irq_cpu(irqs: &BTreeMap<usize, u64>, allowed: &[usize]) -> Option<usize> {
    allowed
        .iter()
        .filter_map(|c| irqs.get(c).filter(|&&n| n > 0).map(|n| (*c, *n)))
        .max_by_key(|&(c, n)| (n, std::cmp::Reverse(c)))
        .map(|(c, _)| c)
}

/// The allowed CPU that takes the fewest network interrupts, other than `not` if possible.
pub fn quiet_cpu(irqs: &BTreeMap<usize, u64>, allowed: &[usize], not: Option<usize>) -> usize {
    allowed
        .iter()
        .copied()
        .filter(|&c| Some(c) != not || allowed.len() == 1)
        .min_by_key(|c| (irqs.get(c).copied().unwrap_or(0), *c))
        .unwrap_or(allowed[0])
}

/// Each thread's CPU set (empty: free) for `threads` busy threads. For the echo workload
/// thread 0 is the server and thread 1 the client. Err is one line saying why the placement
/// is impossible here (one CPU only; no SMT; one node; no CPU takes network interrupts).
pub fn assign(
    p: Placement,
    threads: usize,
    layout: &Layout,
    irqs: &BTreeMap<usize, u64>,
) -> Result<Vec<Vec<usize>>, String> {
    let allowed = &layout.allowed;
    if allowed.is_empty() || threads == 0 {
        return Err("no CPUs or no threads".into());
    }
    let irq = irq_cpu(irqs, allowed);
    let one_each = |cpus: Vec<usize>| cpus.into_iter().map(|c| vec![c]).collect();
    match p {
        Placement::Free => Ok(vec![Vec::new(); threads]),
        Placement::Stacked => Ok(vec![vec![allowed[0]]; threads]),
        Placement::Pinned => {
            if allowed.len() < threads {
                return Err(format!(
                    "{threads} threads need {threads} CPUs to pin one per CPU; {} allowed",
                    allowed.len()
                ));
            }
            // The first thread (the server) on the quietest CPU, the rest on the others.
            let first = quiet_cpu(irqs, allowed, irq);
            let rest = allowed.iter().copied().filter(|&c| c != first);
            Ok(one_each(
                std::iter::once(first).chain(rest).take(threads).collect(),
            ))
        }
        Placement::IrqCpu => {
            let Some(irq) = irq else {
                return Err(
                    "no allowed CPU takes network interrupts (see costlab machine's IRQ table)"
                        .into(),
                );
            };
            if allowed.len() < threads {
                return Err(format!(
                    "{threads} threads need {threads} CPUs; {} allowed",
                    allowed.len()
                ));
            }
            let rest = allowed.iter().copied().filter(|&c| c != irq);
            Ok(one_each(
                std::iter::once(irq).chain(rest).take(threads).collect(),
            ))
        }
        Placement::SameCore => {
            if layout.threads_per_core < 2 {
                return Err(format!(
                    "same-core needs SMT siblings; this machine has {} thread per core",
                    layout.threads_per_core
                ));
            }
            let widest = layout.cores.iter().map(Vec::len).max().unwrap_or(0);
            if widest < 2 {
                return Err(
                    "same-core needs two SMT siblings among this process's CPUs; allow a whole core (taskset)"
                        .into(),
                );
            }
            if threads > widest {
                return Err(format!(
                    "same-core runs one thread per SMT sibling: {threads} threads need {threads} siblings; this machine's cores have {widest}"
                ));
            }
            let core = layout.cores.iter().find(|c| c.len() >= threads).unwrap();
            Ok(one_each(core[..threads].to_vec()))
        }
        Placement::SameNode => {
            let widest = layout.nodes.iter().map(|n| n.1.len()).max().unwrap_or(0);
            let Some((_, cpus)) = layout.nodes.iter().find(|n| n.1.len() >= threads) else {
                return Err(format!(
                    "same-node runs one thread per CPU of one node: {threads} threads need {threads} CPUs on a node; the largest has {widest}"
                ));
            };
            Ok(one_each(cpus[..threads].to_vec()))
        }
        Placement::CrossNode => {
            if layout.machine_nodes < 2 {
                return Err(format!(
                    "cross-node needs two NUMA nodes; this machine has {}",
                    layout.machine_nodes
                ));
            }
            if layout.nodes.len() < 2 {
                return Err(
                    "cross-node needs CPUs on two NUMA nodes among this process's CPUs; allow more (taskset)"
                        .into(),
                );
            }
            let k = layout.nodes.len();
            let mut cpus = Vec::new();
            for i in 0..threads {
                match layout.nodes[i % k].1.get(i / k) {
                    Some(&c) => cpus.push(c),
                    None => {
                        return Err(format!(
                            "cross-node deals threads over the nodes one CPU each: {threads} threads need {} CPUs on node {}",
                            i / k + 1,
                            layout.nodes[i % k].0
                        ))
                    }
                }
            }
            Ok(one_each(cpus))
        }
        Placement::PerCore => {
            if threads > layout.cores.len() {
                return Err(format!(
                    "per-core runs one thread per physical core: {threads} threads need {threads} cores; this machine has {}",
                    layout.cores.len()
                ));
            }
            // Cores dealt over the nodes in turn, so two threads do not crowd one node's
            // memory controller when another node has cores free.
            let mut order = Vec::new();
            let deepest = layout.nodes.iter().map(|n| n.1.len()).max().unwrap_or(0);
            for k in 0..deepest {
                for (_, cpus) in &layout.nodes {
                    if let Some(&c) = cpus.get(k) {
                        let core = layout.cores.iter().position(|co| co.contains(&c));
                        if !order.iter().any(|(_, o)| *o == core) {
                            order.push((c, core));
                        }
                    }
                }
            }
            Ok(one_each(
                order.into_iter().take(threads).map(|(c, _)| c).collect(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::machine::{IrqRow, NetIface};

    fn iface(rows: &[(&str, &[(usize, u64)])]) -> NetIface {
        NetIface {
            name: "eth0".into(),
            numa_node: None,
            irqs: rows
                .iter()
                .map(|(irq, per)| IrqRow {
                    irq: irq.to_string(),
                    desc: "virtio2-input.0".into(),
                    per_cpu: per.iter().copied().collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_irq_cpu_is_the_busiest_allowed_one() {
        // This VM's table: virtio2 input on CPU1, output on CPU0, more on CPU1.
        let i = iface(&[("38", &[(1, 2389)]), ("39", &[(0, 2146)])]);
        let t = net_irqs(&[i]);
        assert_eq!(irq_cpu(&t, &[0, 1]), Some(1));
        assert_eq!(irq_cpu(&t, &[0]), Some(0));
        assert_eq!(irq_cpu(&t, &[2, 3]), None);
        assert_eq!(quiet_cpu(&t, &[0, 1], Some(1)), 0);
        assert_eq!(quiet_cpu(&t, &[1], Some(1)), 1);
    }

    /// A flat machine: `n` CPUs, one core each, one node.
    fn flat(n: usize) -> Layout {
        let cpus: Vec<usize> = (0..n).collect();
        let places: Vec<CpuPlace> = cpus
            .iter()
            .map(|&c| CpuPlace {
                cpu: c,
                core_cpus: vec![c],
                node: Some(0),
                ..Default::default()
            })
            .collect();
        Layout::new(&cpus, &places)
    }

    /// The emulated test machine: 2 nodes x 1 core x 2 threads (CPUs 0,1 on node 0).
    fn two_node_smt() -> Layout {
        let places: Vec<CpuPlace> = (0..4)
            .map(|c| CpuPlace {
                cpu: c,
                core_cpus: if c < 2 { vec![0, 1] } else { vec![2, 3] },
                node: Some(c / 2),
                ..Default::default()
            })
            .collect();
        Layout::new(&[0, 1, 2, 3], &places)
    }

    #[test]
    fn placements_on_a_fake_four_cpu_machine() {
        let t: BTreeMap<usize, u64> = [(2, 900), (3, 5)].into_iter().collect();
        let cpus = flat(4);
        assert_eq!(
            assign(Placement::Pinned, 2, &cpus, &t).unwrap(),
            vec![vec![0], vec![1]]
        );
        assert_eq!(
            assign(Placement::IrqCpu, 2, &cpus, &t).unwrap(),
            vec![vec![2], vec![0]]
        );
        assert_eq!(
            assign(Placement::Stacked, 2, &cpus, &t).unwrap(),
            vec![vec![0], vec![0]]
        );
        assert_eq!(
            assign(Placement::Free, 3, &cpus, &t).unwrap(),
            vec![Vec::<usize>::new(); 3]
        );
        // The server avoids the IRQ CPU when pinned, even when it is CPU 0.
        let t0: BTreeMap<usize, u64> = [(0, 100)].into_iter().collect();
        assert_eq!(
            assign(Placement::Pinned, 2, &flat(2), &t0).unwrap(),
            vec![vec![1], vec![0]]
        );
    }

    #[test]
    fn topology_placements_on_two_nodes_with_smt() {
        let l = two_node_smt();
        assert_eq!(l.cores, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(l.nodes, vec![(0, vec![0, 1]), (1, vec![2, 3])]);
        let none = BTreeMap::new();
        let a = |p, n| assign(p, n, &l, &none);
        assert_eq!(a(Placement::SameCore, 2).unwrap(), vec![vec![0], vec![1]]);
        assert_eq!(a(Placement::SameNode, 2).unwrap(), vec![vec![0], vec![1]]);
        assert_eq!(a(Placement::CrossNode, 2).unwrap(), vec![vec![0], vec![2]]);
        assert_eq!(
            a(Placement::CrossNode, 4).unwrap(),
            vec![vec![0], vec![2], vec![1], vec![3]]
        );
        assert_eq!(a(Placement::PerCore, 2).unwrap(), vec![vec![0], vec![2]]);
        assert!(a(Placement::SameCore, 3)
            .unwrap_err()
            .contains("3 threads need 3 siblings; this machine's cores have 2"));
        assert!(a(Placement::PerCore, 3)
            .unwrap_err()
            .contains("3 threads need 3 cores; this machine has 2"));
        assert!(a(Placement::SameNode, 3)
            .unwrap_err()
            .contains("the largest has 2"));
    }

    #[test]
    fn a_machine_without_smt_or_a_second_node_is_refused_in_one_line() {
        let l = flat(2);
        let none = BTreeMap::new();
        assert_eq!(
            assign(Placement::SameCore, 2, &l, &none).unwrap_err(),
            "same-core needs SMT siblings; this machine has 1 thread per core"
        );
        assert_eq!(
            assign(Placement::CrossNode, 2, &l, &none).unwrap_err(),
            "cross-node needs two NUMA nodes; this machine has 1"
        );
        // On one node, one core per CPU: per-core and same-node are pinned by another name.
        assert_eq!(
            assign(Placement::PerCore, 2, &l, &none).unwrap(),
            vec![vec![0], vec![1]]
        );
        assert_eq!(
            assign(Placement::SameNode, 2, &l, &none).unwrap(),
            vec![vec![0], vec![1]]
        );
        // A CPU sysfs does not describe is a core of its own on node 0.
        let bare = Layout::new(&[0, 1], &[]);
        assert_eq!(bare.cores, vec![vec![0], vec![1]]);
        assert_eq!(bare.threads_per_core, 1);
    }

    #[test]
    fn placements_that_do_not_apply_say_why() {
        let none = BTreeMap::new();
        assert!(assign(Placement::IrqCpu, 2, &flat(2), &none)
            .unwrap_err()
            .contains("network interrupts"));
        assert!(assign(Placement::Pinned, 2, &flat(1), &none)
            .unwrap_err()
            .contains("need 2 CPUs"));
        assert_eq!(Placement::parse("irq-cpu"), Some(Placement::IrqCpu));
        assert_eq!(Placement::parse("per-core"), Some(Placement::PerCore));
        assert_eq!(Placement::parse("x"), None);
    }
}
