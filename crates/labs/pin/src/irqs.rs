//! IRQ placement: moving a network interface's queue interrupts onto one CPU for a run
//! (`--move-irqs`), through the restore journal, so they are put back on exit, error,
//! Ctrl-C, and after a SIGKILL by the next costlab command.

use std::path::PathBuf;

use costlab_core::machine::restore::{self, SettingGuard};
use costlab_core::machine::NetIface;

/// One queue interrupt of a NIC: its number and its name in /proc/interrupts.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueIrq {
    pub irq: u32,
    pub desc: String,
}

/// The numbered interrupts of the machine's network interfaces (NMI, LOC and other named
/// rows are per-CPU and cannot be moved). Config vectors are left out: they fire on link
/// changes, not traffic.
pub fn queue_irqs(ifaces: &[NetIface]) -> Vec<QueueIrq> {
    let mut v: Vec<QueueIrq> = ifaces
        .iter()
        .flat_map(|i| &i.irqs)
        .filter(|r| !r.desc.ends_with("-config"))
        .filter_map(|r| {
            Some(QueueIrq {
                irq: r.irq.parse().ok()?,
                desc: r.desc.split_whitespace().last().unwrap_or("").to_string(),
            })
        })
        .collect();
    v.sort_by_key(|q| q.irq);
    v.dedup();
    v
}

/// The line that says why no interrupt can be placed here, or None when some can.
pub fn why_none(ifaces: &[NetIface]) -> Option<String> {
    if ifaces.is_empty() {
        return Some(
            "IRQ placement: this machine has only loopback (no network device), so there are no NIC interrupts to move".into(),
        );
    }
    queue_irqs(ifaces).is_empty().then(|| {
        let names: Vec<&str> = ifaces.iter().map(|i| i.name.as_str()).collect();
        format!(
            "IRQ placement: {} has no numbered queue interrupts in /proc/interrupts to move",
            names.join(", ")
        )
    })
}

fn affinity_path(irq: u32) -> PathBuf {
    PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"))
}

/// Move every queue interrupt onto `cpu` for as long as the guards live. Returns the guards
/// and one note per interrupt (moved, already there, or why it could not be).
pub fn move_to(irqs: &[QueueIrq], cpu: usize) -> (Vec<SettingGuard>, Vec<String>) {
    let mut guards = Vec::new();
    let mut notes = Vec::new();
    let want = cpu.to_string();
    for q in irqs {
        let path = affinity_path(q.irq);
        match restore::read_setting(&path) {
            Ok(now) if now == want => {
                notes.push(format!("IRQ {} ({}) already on CPU {cpu}", q.irq, q.desc));
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                notes.push(format!("IRQ {} ({}) not moved: {e:#}", q.irq, q.desc));
                continue;
            }
        }
        let what = format!("IRQ {} ({}) smp_affinity_list", q.irq, q.desc);
        match restore::change_setting(&path, &want, &what) {
            Ok(g) => {
                guards.push(g);
                notes.push(format!("IRQ {} ({}) moved to CPU {cpu}", q.irq, q.desc));
            }
            // Managed interrupts (the kernel spreads them itself) refuse a new affinity.
            Err(e) => notes.push(format!("IRQ {} ({}) not moved: {e:#}", q.irq, q.desc)),
        }
    }
    (guards, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::machine::IrqRow;

    fn row(irq: &str, desc: &str) -> IrqRow {
        IrqRow {
            irq: irq.into(),
            desc: desc.into(),
            per_cpu: Default::default(),
        }
    }

    #[test]
    fn queue_interrupts_are_the_numbered_non_config_rows() {
        let eth0 = NetIface {
            name: "eth0".into(),
            numa_node: None,
            irqs: vec![
                row("37", "PCI-MSIX-0000:00:03.0   0-edge      virtio2-config"),
                row("39", "PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0"),
                row("38", "PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0"),
                row("NMI", "Non-maskable interrupts"),
            ],
        };
        let q = queue_irqs(std::slice::from_ref(&eth0));
        assert_eq!(
            q,
            vec![
                QueueIrq {
                    irq: 38,
                    desc: "virtio2-input.0".into()
                },
                QueueIrq {
                    irq: 39,
                    desc: "virtio2-output.0".into()
                }
            ]
        );
        assert_eq!(why_none(&[eth0]), None);
        assert!(why_none(&[]).unwrap().contains("only loopback"));
        let bare = NetIface {
            name: "eth1".into(),
            ..Default::default()
        };
        assert!(why_none(&[bare]).unwrap().contains("eth1 has no numbered"));
    }
}
