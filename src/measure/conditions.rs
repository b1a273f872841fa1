//! What else happened on the machine while a case took its samples, so every figure carries
//! the conditions it was taken under (DESIGN: "Say under what conditions each figure was taken").
//!
//! A `Watch` is started before a case's samples and finished after them. It reads, at both
//! ends, /proc/stat per CPU (all CPU time on the CPUs the case used), this process's own
//! threads' CPU time (so the rest is other processes'), steal, PSI where /proc/pressure
//! exists, the process's involuntary context switches and migrations, and the CPU frequency
//! where cpufreq exposes it. Labs that measure memory add the huge-page fraction of their
//! region (`Conditions::pages`).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::procstat::{self, CpuTimes, ProcSnapshot};

/// The conditions one case's samples were taken under. Every field is optional: a machine
/// that does not expose a source (no PSI, no cpufreq) leaves it out rather than guessing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Conditions {
    /// The CPUs the case ran on (its threads' affinity).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// How long the samples took, wall clock, in ms.
    #[serde(default)]
    pub wall_ms: f64,
    /// Per CPU used: the % of that CPU's time that other processes took (busy time on the CPU
    /// minus this process's share, as a share of the wall time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_cpu_pct: BTreeMap<String, f64>,
    /// The largest of `other_cpu_pct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_max_pct: Option<f64>,
    /// Time the hypervisor stole from the CPUs used, % of their time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// PSI `some avg10` at the end of the samples (%), by resource (cpu, memory, io).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub psi_some_avg10: BTreeMap<String, f64>,
    /// Involuntary context switches of this process's threads during the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
    /// CPU migrations of this process's threads during the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    /// Mean current frequency of the CPUs used (MHz), where cpufreq exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz: Option<f64>,
    /// Whether boost (turbo) was on, where cpufreq exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<bool>,
    /// Memory cases: the page size asked for ("4k", "thp", "2m", "1g").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_asked: Option<String>,
    /// Memory cases: the fraction of the region backed by huge pages (0..1), from smaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_fraction: Option<f64>,
}

impl Conditions {
    /// Record the page size a memory case asked for and the fraction of its region that the
    /// kernel backed with huge pages.
    pub fn pages(mut self, asked: &str, huge_fraction: Option<f64>) -> Self {
        self.pages_asked = Some(asked.to_string());
        self.huge_fraction = huge_fraction;
        self
    }
}

/// A running record of the conditions around one case. Cheap: a few /proc reads at each end.
pub struct Watch {
    cpus: Vec<usize>,
    started: Instant,
    before: Option<ProcSnapshot>,
}

impl Watch {
    /// Start watching the CPUs a case will use (empty: every CPU this process may use).
    pub fn start(cpus: &[usize]) -> Watch {
        let cpus = if cpus.is_empty() {
            super::cpus::allowed_cpus()
        } else {
            cpus.to_vec()
        };
        Watch {
            before: ProcSnapshot::take(&cpus).ok(),
            cpus,
            started: Instant::now(),
        }
    }

    /// Stop watching and say what happened meanwhile.
    pub fn finish(self) -> Conditions {
        let wall = self.started.elapsed();
        let after = ProcSnapshot::take(&self.cpus).ok();
        let mut c = Conditions {
            cpus: self.cpus.clone(),
            wall_ms: wall.as_secs_f64() * 1e3,
            ..Default::default()
        };
        if let (Some(b), Some(a)) = (&self.before, &after) {
            procstat::fill(&mut c, b, a, wall.as_secs_f64());
        }
        if let Some(a) = &after {
            c.psi_some_avg10 = a.psi.clone();
        }
        c.freq_mhz = procstat::mean_freq_mhz(&self.cpus);
        c.boost = procstat::boost();
        c
    }
}

/// CPU time per CPU from /proc/stat, in clock ticks: what a Watch differences.
pub type PerCpu = BTreeMap<usize, CpuTimes>;
