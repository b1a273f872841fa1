//! Reading the machine: CPU, caches, NUMA, pages, mitigations, kernel features, perf.
//! (`restore` is the one place that changes a setting, and always puts it back.)

pub mod restore;

use serde::{Deserialize, Serialize};

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
    pub hypervisor: Option<String>,
}

impl Machine {
    /// Probe the running machine. Never fails: what cannot be read stays empty.
    pub fn probe() -> Machine {
        Machine {
            cpus_online: crate::measure::cpus::allowed_cpus().len(),
            arch: std::env::consts::ARCH.to_string(),
            base_page: rustix::param::page_size() as u64,
            ..Default::default()
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
}

impl Machine {
    /// A readable table of the machine.
    pub fn render(&self) -> String {
        let rows = vec![
            vec!["CPU".to_string(), self.cpu_model.clone()],
            vec!["CPUs online".to_string(), self.cpus_online.to_string()],
            vec!["kernel".to_string(), self.kernel.clone()],
        ];
        crate::report::table::render(&["what", "value"], &rows) + "\n"
    }
}
