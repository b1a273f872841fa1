//! Network interfaces: the NUMA node of each NIC and the CPUs its interrupts land on. A process
//! bound to the socket that also takes the NIC's interrupts shares its cores with them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sysfs::Root;

/// One row of /proc/interrupts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IrqRow {
    /// The IRQ number or name ("38", "NMI").
    pub irq: String,
    /// The rest of the row after the counts: chip, hwirq, handler names.
    pub desc: String,
    /// CPU id -> interrupts taken there (CPUs with none left out).
    pub per_cpu: BTreeMap<usize, u64>,
}

/// A network interface backed by a device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NetIface {
    pub name: String,
    /// The device's NUMA node; None where the kernel does not know (-1, or no such file).
    pub numa_node: Option<usize>,
    /// The interrupt rows that belong to this interface.
    pub irqs: Vec<IrqRow>,
}

impl NetIface {
    /// Interrupts per CPU over all of the interface's rows.
    pub fn irq_cpus(&self) -> BTreeMap<usize, u64> {
        let mut total = BTreeMap::new();
        for r in &self.irqs {
            for (&cpu, &n) in &r.per_cpu {
                *total.entry(cpu).or_insert(0) += n;
            }
        }
        total
    }
}

/// Parse /proc/interrupts: the header names the CPU of each column (offline CPUs have none).
pub fn parse_interrupts(text: &str) -> Vec<IrqRow> {
    let mut lines = text.lines();
    let cpus: Vec<usize> = match lines.next() {
        Some(h) => h
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
            .collect(),
        None => return Vec::new(),
    };
    lines
        .filter_map(|line| {
            let (irq, rest) = line.trim_start().split_once(':')?;
            let mut rest = rest.trim_start();
            let mut per_cpu = BTreeMap::new();
            for &cpu in &cpus {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let Ok(n) = rest[..end].parse::<u64>() else {
                    break;
                };
                if n > 0 {
                    per_cpu.insert(cpu, n);
                }
                rest = rest[end..].trim_start();
            }
            Some(IrqRow {
                irq: irq.trim().to_string(),
                desc: rest.trim().to_string(),
                per_cpu,
            })
        })
        .collect()
}

/// True when `word` appears in `text` as a whole name (not inside a longer one: eth1 is not
/// in eth10).
pub fn names(text: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
    })
}

/// Interfaces with a device (virtual ones such as lo have none), their node and IRQ rows. A
/// row belongs to an interface when it names it ("eth0-TxRx-0"), names its device
/// ("virtio2-input.0", "mlx5_comp0@pci:0000:3b:00.0"), or is one of the device's MSI vectors.
pub fn read_ifaces(root: &Root) -> Vec<NetIface> {
    let irqs = root
        .text("proc/interrupts")
        .map(|t| parse_interrupts(&t))
        .unwrap_or_default();
    root.entries("sys/class/net")
        .into_iter()
        .filter_map(|name| {
            let dev = format!("sys/class/net/{name}/device");
            let dev_path = root.path(&dev);
            if !dev_path.exists() {
                return None;
            }
            let numa_node = root
                .number::<i64>(&format!("{dev}/numa_node"))
                .and_then(|n| usize::try_from(n).ok());
            let dev_name = std::fs::read_link(&dev_path)
                .ok()
                .and_then(|p| p.file_name()?.to_str().map(str::to_string));
            let mut msi: Vec<String> = root.entries(&format!("{dev}/msi_irqs"));
            if msi.is_empty() {
                // virtio: the vectors belong to the PCI function one level up.
                msi = std::fs::canonicalize(&dev_path)
                    .ok()
                    .and_then(|p| std::fs::read_dir(p.parent()?.join("msi_irqs")).ok())
                    .map(|rd| {
                        rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                            .collect()
                    })
                    .unwrap_or_default();
            }
            let mine = irqs
                .iter()
                .filter(|r| {
                    names(&r.desc, &name)
                        || dev_name.as_deref().is_some_and(|d| names(&r.desc, d))
                        || msi.contains(&r.irq)
                })
                .cloned()
                .collect();
            Some(NetIface {
                name,
                numa_node,
                irqs: mine,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_rows_follow_the_header_columns() {
        let t = "           CPU0       CPU2\n 38:          0       1516  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nERR:          0\nLOC:   5  6   Local timer interrupts\n";
        let rows = parse_interrupts(t);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].irq, "38");
        assert_eq!(rows[0].per_cpu, BTreeMap::from([(2, 1516)]));
        assert_eq!(
            rows[0].desc,
            "PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0"
        );
        assert_eq!(rows[1].desc, "");
        assert_eq!(rows[2].per_cpu, BTreeMap::from([(0, 5), (2, 6)]));
        assert!(parse_interrupts("").is_empty());
    }

    #[test]
    fn whole_names_only() {
        assert!(names("eth0-TxRx-0", "eth0"));
        assert!(!names("eth01-TxRx-0", "eth0"));
        assert!(names("mlx5_comp0@pci:0000:3b:00.0", "0000:3b:00.0"));
        assert!(names("1-edge virtio2-input.0", "virtio2"));
        assert!(!names("virtio20-input.0", "virtio2"));
        assert!(!names("x", ""));
    }
}
