//! Reading the machine: CPU, caches, NUMA, pages, mitigations, kernel features, perf.
//! (`restore` is the one place that changes a setting, and always puts it back.)
//!
//! `Machine::probe_at(root)` reads only files under `root` (so fixture trees of other machines
//! parse exactly); `Machine::probe()` reads `/` and adds what only a live check can tell:
//! affinity, CPUID, whether a hardware counter opens.

pub mod caches;
pub mod cpu;
pub mod identity;
pub mod kernel;
pub mod net;
pub mod numa;
pub mod pages;
pub mod restore;
pub mod security;
pub mod speculation;
pub mod sysfs;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use cpu::CpuPlace;
pub use identity::machine_summary;
pub use net::{IrqRow, NetIface};
pub use numa::NumaNode;
pub use security::Mitigations;
use sysfs::Root;

/// One cache as the kernel describes it (sysfs cpu*/cache/index*).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cache {
    pub level: u8,
    /// "Data", "Instruction" or "Unified".
    pub kind: String,
    pub size: u64,
    pub line: u64,
    /// Groups of CPUs that share one instance of this cache.
    pub shared_by: Vec<Vec<usize>>,
}

/// A hugepage pool of one page size.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HugePool {
    pub page_size: u64,
    pub total: u64,
    pub free: u64,
    pub reserved: u64,
    pub surplus: u64,
}

/// What costlab knows of the machine it measures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub arch: String,
    pub cpus_online: usize,
    pub caches: Vec<Cache>,
    pub numa_nodes: usize,
    pub base_page: u64,
    pub hugepages: Vec<HugePool>,
    pub thp: String,
    pub kernel: String,
    /// None on bare metal; the hypervisor's name (or how we know there is one) in a VM.
    pub hypervisor: Option<String>,

    #[serde(default)]
    pub cpu_vendor: String,
    /// The flags of `cpu::FLAGS_THAT_MATTER` this CPU has.
    #[serde(default)]
    pub cpu_flags: Vec<String>,
    #[serde(default)]
    pub online_cpus: Vec<usize>,
    /// CPUs this process may run on (live probe only).
    #[serde(default)]
    pub allowed_cpus: Vec<usize>,
    /// 1 without SMT, 2 with two hardware threads per core, ...
    #[serde(default)]
    pub threads_per_core: usize,
    #[serde(default)]
    pub cores: usize,
    #[serde(default)]
    pub sockets: usize,
    #[serde(default)]
    pub nodes: Vec<NumaNode>,
    /// Where each online CPU sits: core (SMT siblings), package, node.
    #[serde(default)]
    pub cpu_places: Vec<CpuPlace>,
    /// Bytes of RAM (MemTotal).
    #[serde(default)]
    pub mem_total: u64,
    #[serde(default)]
    pub thp_defrag: String,
    #[serde(default)]
    pub mitigations: Mitigations,
    #[serde(default)]
    pub mitigations_summary: String,
    /// kernel.io_uring_disabled (None: the kernel has no such switch).
    #[serde(default)]
    pub io_uring_disabled: Option<u8>,
    #[serde(default)]
    pub io_uring: String,
    #[serde(default)]
    pub perf_event_paranoid: Option<i32>,
    /// Whether a hardware counter (cycles) opens here; None when not checked (fixtures).
    #[serde(default)]
    pub hw_counters_work: Option<bool>,
    /// Why hardware counters do not work.
    #[serde(default)]
    pub hw_counters_reason: Option<String>,
    #[serde(default)]
    pub zone_reclaim_mode: Option<u32>,
    #[serde(default)]
    pub numa_balancing: Option<u32>,
    #[serde(default)]
    pub net: Vec<NetIface>,
    /// The machine's stable id (a hash of /etc/machine-id, DMI product and CPU model).
    #[serde(default)]
    pub id: String,
    /// Kernel, microcode, mitigations, governor, THP, SMT, hypervisor: what may change
    /// between two runs on this machine.
    #[serde(default)]
    pub fingerprint: identity::Fingerprint,
}

impl Machine {
    /// Probe the running machine. Never fails: what cannot be read stays empty.
    pub fn probe() -> Machine {
        let mut m = Machine::probe_at(Path::new("/"));
        m.allowed_cpus = crate::measure::cpus::allowed_cpus();
        if m.cpus_online == 0 {
            m.cpus_online = m.allowed_cpus.len();
        }
        let release = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        if !release.is_empty() {
            m.kernel = release.clone();
            m.fingerprint.kernel = release;
        }
        if m.hypervisor.is_some() {
            if let Some(name) = kernel::cpuid_hypervisor() {
                m.hypervisor = Some(name.clone());
                m.fingerprint.hypervisor = Some(name);
            }
        }
        let (works, reason) = match crate::measure::counters::probe_hardware() {
            Ok(()) => (true, None),
            Err(why) => (false, Some(why)),
        };
        m.hw_counters_work = Some(works);
        m.hw_counters_reason = reason;
        m
    }

    /// Read the machine described by the `sys/` and `proc/` trees under `root`.
    pub fn probe_at(root: &Path) -> Machine {
        let root = Root::new(root);
        let info = cpu::parse_cpuinfo(&root.text("proc/cpuinfo").unwrap_or_default());
        let mut topo = cpu::read_topology(&root);
        let nodes = numa::read_nodes(&root);
        for p in &mut topo.places {
            p.node = numa::node_of_cpu(&nodes, p.cpu);
        }
        let (thp, thp_defrag) = pages::read_thp(&root);
        let mitigations = security::read_mitigations(&root);
        let io_uring_disabled = root.number("proc/sys/kernel/io_uring_disabled");
        let kernel_version = kernel::read_kernel_version(&root);
        let hypervisor = kernel::read_hypervisor(&root, info.hypervisor_flag);
        let fingerprint = identity::read_fingerprint(
            &root,
            &kernel_version,
            &mitigations.summary(),
            &thp,
            hypervisor.as_deref(),
        );
        let id = identity::machine_id(&root, &info.model);
        Machine {
            cpu_model: info.model,
            arch: std::env::consts::ARCH.to_string(),
            cpus_online: topo.online.len(),
            caches: caches::read_caches(&root, &topo.online),
            numa_nodes: nodes.len().max(1),
            base_page: rustix::param::page_size() as u64,
            hugepages: pages::read_pools(&root),
            thp,
            kernel: kernel_version,
            hypervisor,
            cpu_vendor: info.vendor,
            cpu_flags: info.flags,
            online_cpus: topo.online,
            allowed_cpus: Vec::new(),
            threads_per_core: topo.threads_per_core,
            cores: topo.cores,
            sockets: topo.sockets,
            nodes,
            cpu_places: topo.places,
            mem_total: pages::read_mem_total(&root),
            thp_defrag,
            mitigations_summary: mitigations.summary(),
            mitigations,
            io_uring: kernel::io_uring_meaning(io_uring_disabled),
            io_uring_disabled,
            perf_event_paranoid: root.number("proc/sys/kernel/perf_event_paranoid"),
            hw_counters_work: None,
            hw_counters_reason: None,
            zone_reclaim_mode: root.number("proc/sys/vm/zone_reclaim_mode"),
            numa_balancing: root.number("proc/sys/kernel/numa_balancing"),
            net: net::read_ifaces(&root),
            id,
            fingerprint,
        }
    }

    /// Size of the data (or unified) cache at `level`, if the kernel reports one.
    pub fn cache_size(&self, level: u8) -> Option<u64> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.kind != "Instruction")
            .map(|c| c.size)
    }

    /// The hugepage pool of `page_size` bytes, if the kernel has one.
    pub fn pool(&self, page_size: u64) -> Option<&HugePool> {
        self.hugepages.iter().find(|p| p.page_size == page_size)
    }

    /// Mitigations in one line, for a syscall figure to be read against.
    pub fn mitigations_summary(&self) -> String {
        self.mitigations.summary()
    }

    /// True when the CPU has `flag` (one of `cpu::FLAGS_THAT_MATTER`).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.cpu_flags.iter().any(|f| f == flag)
    }

    /// The NUMA node `cpu` belongs to.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        numa::node_of_cpu(&self.nodes, cpu)
    }

    /// The node with id `id`.
    pub fn node(&self, id: usize) -> Option<&NumaNode> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
