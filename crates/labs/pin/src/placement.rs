//! Where each thread of a placement may run, worked out from the CPUs allowed and the
//! machine's IRQ table. Pure, so the tests can feed it any machine.

use std::collections::BTreeMap;

use costlab_core::machine::NetIface;

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
}

pub const ALL: [Placement; 4] = [
    Placement::Pinned,
    Placement::Free,
    Placement::Stacked,
    Placement::IrqCpu,
];

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Pinned => "pinned",
            Placement::Free => "free",
            Placement::Stacked => "stacked",
            Placement::IrqCpu => "irq-cpu",
        }
    }

    pub fn parse(t: &str) -> Option<Placement> {
        ALL.into_iter().find(|p| p.name() == t)
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
/// thread 0 is the server and thread 1 the client. Err says why the placement does not
/// apply (one CPU only; no CPU takes network interrupts).
pub fn assign(
    p: Placement,
    threads: usize,
    allowed: &[usize],
    irqs: &BTreeMap<usize, u64>,
) -> Result<Vec<Vec<usize>>, String> {
    if allowed.is_empty() || threads == 0 {
        return Err("no CPUs or no threads".into());
    }
    let irq = irq_cpu(irqs, allowed);
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
            Ok(std::iter::once(first)
                .chain(rest)
                .take(threads)
                .map(|c| vec![c])
                .collect())
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
            Ok(std::iter::once(irq)
                .chain(rest)
                .take(threads)
                .map(|c| vec![c])
                .collect())
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

    #[test]
    fn placements_on_a_fake_four_cpu_machine() {
        let t: BTreeMap<usize, u64> = [(2, 900), (3, 5)].into_iter().collect();
        let cpus = [0, 1, 2, 3];
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
            assign(Placement::Pinned, 2, &[0, 1], &t0).unwrap(),
            vec![vec![1], vec![0]]
        );
    }

    #[test]
    fn placements_that_do_not_apply_say_why() {
        let none = BTreeMap::new();
        assert!(assign(Placement::IrqCpu, 2, &[0, 1], &none)
            .unwrap_err()
            .contains("network interrupts"));
        assert!(assign(Placement::Pinned, 2, &[0], &none)
            .unwrap_err()
            .contains("need 2 CPUs"));
        assert_eq!(Placement::parse("irq-cpu"), Some(Placement::IrqCpu));
        assert_eq!(Placement::parse("x"), None);
    }
}
