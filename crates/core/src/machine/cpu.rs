//! The CPU: model, the flags that change what a lab measures, which CPUs are online, SMT.

use serde::{Deserialize, Serialize};

use super::sysfs::Root;

/// Flags (x86 `flags`, arm `Features`) that change a figure: SIMD width for bandwidth kernels,
/// 1G pages, TSC behaviour, PCID/INVPCID (TLB flush cost of mitigations), ERMS/FSRM (memcpy),
/// LSE atomics (arm contention).
pub const FLAGS_THAT_MATTER: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "bmi2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "amx_tile",
    "erms",
    "fsrm",
    "pdpe1gb",
    "constant_tsc",
    "nonstop_tsc",
    "pcid",
    "invpcid",
    "rdtscp",
    "clwb",
    "movdir64b",
    "asimd",
    "sve",
    "sve2",
    "atomics",
];

/// What /proc/cpuinfo says of the first CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuInfo {
    pub model: String,
    pub vendor: String,
    /// The flags of `FLAGS_THAT_MATTER` the CPU has, in that list's order.
    pub flags: Vec<String>,
    /// The `hypervisor` flag: running under a hypervisor (x86).
    pub hypervisor_flag: bool,
}

/// Parse /proc/cpuinfo (first processor block; all CPUs of a machine share these).
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let block = text.split("\n\n").next().unwrap_or("");
    let field = |names: &[&str]| {
        block.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            names.contains(&k.trim()).then(|| v.trim().to_string())
        })
    };
    let have: Vec<String> = field(&["flags", "Features"])
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    CpuInfo {
        model: field(&["model name", "Model name", "cpu model", "Processor"]).unwrap_or_default(),
        vendor: field(&["vendor_id", "CPU implementer"]).unwrap_or_default(),
        flags: FLAGS_THAT_MATTER
            .iter()
            .filter(|f| have.iter().any(|h| h == *f))
            .map(|f| f.to_string())
            .collect(),
        hypervisor_flag: have.iter().any(|h| h == "hypervisor"),
    }
}

/// Online CPUs, SMT and sockets from sysfs topology.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub online: Vec<usize>,
    pub threads_per_core: usize,
    pub sockets: usize,
    pub cores: usize,
    /// Where each online CPU sits (its node is filled in by the caller, from the node lists).
    pub places: Vec<CpuPlace>,
}

/// Where one online CPU sits: its physical core (the SMT siblings that share it), package
/// and NUMA node, from sysfs cpu*/topology and node*/cpulist.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuPlace {
    pub cpu: usize,
    /// The CPUs of its physical core, itself included (core_cpus_list, or
    /// thread_siblings_list on kernels before 5.7); just itself where neither is readable.
    pub core_cpus: Vec<usize>,
    /// core_id: unique only within a package.
    pub core_id: Option<i64>,
    pub package: Option<i64>,
    pub node: Option<usize>,
}

pub fn read_topology(root: &Root) -> Topology {
    let online = root
        .cpu_list("sys/devices/system/cpu/online")
        .unwrap_or_default();
    let mut packages = Vec::new();
    let mut core_groups: Vec<Vec<usize>> = Vec::new();
    let mut places = Vec::new();
    for &cpu in &online {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        let package = root.number::<i64>(&format!("{base}/physical_package_id"));
        if let Some(p) = package {
            if !packages.contains(&p) {
                packages.push(p);
            }
        }
        let siblings = root
            .cpu_list(&format!("{base}/core_cpus_list"))
            .or_else(|| root.cpu_list(&format!("{base}/thread_siblings_list")))
            .filter(|s| s.contains(&cpu));
        if let Some(sib) = &siblings {
            if !core_groups.contains(sib) {
                core_groups.push(sib.clone());
            }
        }
        places.push(CpuPlace {
            cpu,
            // Offline siblings are not places to run.
            core_cpus: siblings
                .map(|s| s.into_iter().filter(|c| online.contains(c)).collect())
                .unwrap_or_else(|| vec![cpu]),
            core_id: root.number(&format!("{base}/core_id")),
            package,
            node: None,
        });
    }
    Topology {
        threads_per_core: core_groups.iter().map(Vec::len).max().unwrap_or(1),
        sockets: packages.len().max(usize::from(!online.is_empty())),
        cores: core_groups.len(),
        online,
        places,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_keeps_only_flags_that_matter() {
        let t = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\nflags\t\t: fpu avx2 hypervisor avx512f sse4_2\n\nprocessor\t: 1\nflags : sve\n";
        let c = parse_cpuinfo(t);
        assert_eq!(c.model, "Xeon X");
        assert_eq!(c.vendor, "GenuineIntel");
        assert_eq!(c.flags, vec!["sse4_2", "avx2", "avx512f"]);
        assert!(c.hypervisor_flag);
        assert_eq!(parse_cpuinfo(""), CpuInfo::default());
    }
}
