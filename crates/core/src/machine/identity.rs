//! Which machine a run came from, and the facts of its set-up that move a figure.
//!
//! The id is a hash (never the raw value: /etc/machine-id is meant to stay private) of
//! /etc/machine-id, the DMI product name and the CPU model: stable across reboots, kernel
//! upgrades and re-runs, different between two instances of the same type (each has its own
//! machine-id). The fingerprint is what may change on the same machine between two runs.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::sysfs::Root;

/// Lower-case hex SHA-256 of `data`.
pub fn hash_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The machine's id: 16 hex digits of SHA-256 over machine-id, DMI product and CPU model.
/// Empty when none of the three is known.
pub fn machine_id(root: &Root, cpu_model: &str) -> String {
    let mid = root
        .value("etc/machine-id")
        .or_else(|| root.value("var/lib/dbus/machine-id"))
        .unwrap_or_default();
    let product = root
        .value("sys/class/dmi/id/product_name")
        .unwrap_or_default();
    if mid.is_empty() && product.is_empty() && cpu_model.is_empty() {
        return String::new();
    }
    let key = format!("costlab-machine\n{mid}\n{product}\n{cpu_model}");
    hash_hex(key.as_bytes())[..16].to_string()
}

/// What may differ between two runs on one machine and move its figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Fingerprint {
    pub kernel: String,
    /// The CPU's microcode revision ("0x1000065"), as /proc/cpuinfo has it.
    pub microcode: String,
    /// The kernel's mitigations in one line.
    pub mitigations: String,
    /// cpufreq's governor on CPU 0 ("" without cpufreq, as in most VMs).
    pub governor: String,
    /// Transparent hugepages: the selected mode of `enabled`.
    pub thp: String,
    /// SMT control: on, off, forceoff, notsupported, notimplemented ("" when unknown).
    pub smt: String,
    /// The DMI product ("" when the machine has no DMI tables).
    pub product: String,
    pub hypervisor: Option<String>,
}

/// The microcode revision from /proc/cpuinfo's text (the first CPU's).
pub fn microcode(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "microcode").then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

pub fn read_fingerprint(
    root: &Root,
    kernel: &str,
    mitigations: &str,
    thp: &str,
    hypervisor: Option<&str>,
) -> Fingerprint {
    Fingerprint {
        kernel: kernel.to_string(),
        microcode: microcode(&root.text("proc/cpuinfo").unwrap_or_default()),
        mitigations: mitigations.to_string(),
        governor: root
            .value("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .unwrap_or_default(),
        thp: thp.to_string(),
        smt: root
            .value("sys/devices/system/cpu/smt/control")
            .unwrap_or_default(),
        product: root
            .value("sys/class/dmi/id/product_name")
            .unwrap_or_default(),
        hypervisor: hypervisor.map(str::to_string),
    }
}

/// The machine's stable id: the one the run recorded (`machine.id`, a hash of
/// /etc/machine-id, the DMI product and the CPU model), else, for documents from before
/// costlab recorded one, a hash of the CPU model, CPU count and memory size (marked `~`).
pub fn machine_id_of(machine: &Value) -> String {
    if let Some(id) = machine
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        return id.to_string();
    }
    let key = format!(
        "{}|{}|{}",
        machine
            .get("cpu_model")
            .and_then(Value::as_str)
            .unwrap_or(""),
        machine
            .get("cpus_online")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        machine
            .get("mem_total")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    );
    format!("~{}", &hash_hex(key.as_bytes())[..11])
}

/// "Intel Xeon ... · 2 CPUs · 6.1.0" from the machine JSON, whatever of it is known.
pub fn machine_summary(machine: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = machine
        .get("cpu_model")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(m.to_string());
    }
    if let Some(n) = machine.get("cpus_online").and_then(Value::as_u64) {
        parts.push(format!("{n} CPUs"));
    }
    if let Some(k) = machine
        .get("kernel")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(k.to_string());
    }
    if let Some(h) = machine.get("hypervisor").and_then(Value::as_str) {
        parts.push(format!("VM ({h})"));
    }
    if parts.is_empty() {
        "unknown machine".to_string()
    } else {
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_a_stable_hash_of_the_three_facts_and_hides_machine_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/machine-id"),
            "0123456789abcdef0123456789abcdef\n",
        )
        .unwrap();
        let root = Root::new(dir.path());
        let a = machine_id(&root, "AMD EPYC 7B13");
        assert_eq!(a.len(), 16);
        assert_eq!(a, machine_id(&root, "AMD EPYC 7B13"));
        assert!(!a.contains("0123456789"));
        assert_ne!(a, machine_id(&root, "Intel Xeon"));
        std::fs::write(
            dir.path().join("etc/machine-id"),
            "fedcba9876543210fedcba9876543210\n",
        )
        .unwrap();
        assert_ne!(a, machine_id(&root, "AMD EPYC 7B13"));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(machine_id(&Root::new(empty.path()), ""), "");
    }

    #[test]
    fn microcode_is_read_from_cpuinfo() {
        let text =
            "processor\t: 0\nmicrocode\t: 0x1000065\nprocessor\t: 1\nmicrocode\t: 0x1000065\n";
        assert_eq!(microcode(text), "0x1000065");
        assert_eq!(microcode("processor: 0\n"), "");
    }
}
