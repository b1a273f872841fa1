//! The conditions a figure was taken under (other processes' CPU, steal, PSI, switches,
//! frequency, the page size asked and got): data, filled by `measure::conditions::Watch` and
//! judged by `measure::quality`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// Placement cases: each thread (by label: "thread 0", "server thread 1", "client") and
    /// the CPUs it was seen running on (sampled from /proc/.../task/TID/stat field 39).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ran_on: BTreeMap<String, Vec<usize>>,
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

impl Conditions {
    /// Take the watched fields from `w`, keeping what the lab set itself (page size asked,
    /// huge fraction).
    pub fn merged_with(&self, w: &Conditions) -> Conditions {
        let mut c = w.clone();
        if self.pages_asked.is_some() {
            c.pages_asked = self.pages_asked.clone();
            c.huge_fraction = self.huge_fraction;
        }
        if c.ran_on.is_empty() {
            c.ran_on = self.ran_on.clone();
        }
        if !self.cpus.is_empty() && c.cpus.is_empty() {
            c.cpus = self.cpus.clone();
        }
        c
    }
}
