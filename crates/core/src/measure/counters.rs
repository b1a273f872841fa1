//! `--counters`: perf counters read around each case.
//!
//! A lab wraps each case in `around(ctx.counters, || ...)` and attaches the readings to the
//! rows that case produced with `Readings::attach_from`. Hardware counters that the machine
//! cannot give (no PMU in a VM, perf_event_paranoid) are reported in `unsupported` with the
//! reason; software counters still come.
//!
//! Each counter is opened on its own (not as a group): the kernel refuses `inherit` with group
//! reads, and `inherit` is what makes threads started inside the case count too. Where the PMU
//! has fewer registers than events the kernel time-shares them; counts are scaled by
//! enabled / running time, as `perf stat` does.

use std::collections::BTreeMap;
use std::io;

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};

use crate::model::ResultRow;

/// Counter values for one case, and the counters that could not be read with why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    pub counters: BTreeMap<String, f64>,
    pub unsupported: BTreeMap<String, String>,
}

impl Readings {
    /// Put these readings on a result row (the JSON's "counters" / "unsupported_counters").
    pub fn attach(&self, row: &mut ResultRow) {
        row.counters = Some(self.counters.clone());
        if !self.unsupported.is_empty() {
            row.unsupported_counters = Some(self.unsupported.clone());
        }
    }

    /// Attach to every row from index `from` on (the rows one case just pushed).
    pub fn attach_from(&self, rows: &mut [ResultRow], from: usize) {
        for row in rows.iter_mut().skip(from) {
            self.attach(row);
        }
    }

    /// "IPC 1.23, cache-misses 4.5M, page-faults 120; not supported: cycles, ... (why)".
    pub fn summary_line(&self) -> String {
        let mut parts: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| {
                if k == "IPC" {
                    format!("{k} {v:.2}")
                } else {
                    format!("{k} {}", short_count(*v))
                }
            })
            .collect();
        if !self.unsupported.is_empty() {
            let mut reasons: Vec<&String> = self.unsupported.values().collect();
            reasons.dedup();
            let names: Vec<&str> = self.unsupported.keys().map(String::as_str).collect();
            parts.push(format!(
                "not supported: {} ({})",
                names.join(", "),
                reasons
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        parts.join(", ")
    }
}

/// Attach readings (if `--counters` gave any) to the rows pushed since index `from`: the last
/// line of the pattern a lab uses around each case:
///
/// ```ignore
/// let from = out.results.len();
/// let (samples, readings) = counters::around(ctx.counters, || measure_case(...))?;
/// out.push(LAB, case, "latency", "ns", samples); counters::attach(&readings, &mut out.results, from);
/// ```
pub fn attach(readings: &Option<Readings>, rows: &mut [ResultRow], from: usize) {
    if let Some(r) = readings {
        r.attach_from(rows, from);
    }
}

pub fn short_count(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The counters `--counters` reads, by the names `perf stat` uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Cycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    DtlbLoadMisses,
    ItlbLoadMisses,
    BranchMisses,
    PageFaults,
    ContextSwitches,
}

pub const ALL: [Kind; 9] = [
    Kind::Cycles,
    Kind::Instructions,
    Kind::CacheReferences,
    Kind::CacheMisses,
    Kind::DtlbLoadMisses,
    Kind::ItlbLoadMisses,
    Kind::BranchMisses,
    Kind::PageFaults,
    Kind::ContextSwitches,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cycles => "cycles",
            Kind::Instructions => "instructions",
            Kind::CacheReferences => "cache-references",
            Kind::CacheMisses => "cache-misses",
            Kind::DtlbLoadMisses => "dTLB-load-misses",
            Kind::ItlbLoadMisses => "iTLB-load-misses",
            Kind::BranchMisses => "branch-misses",
            Kind::PageFaults => "page-faults",
            Kind::ContextSwitches => "context-switches",
        }
    }

    /// Software counters are kept by the kernel and work without a PMU.
    pub fn is_software(self) -> bool {
        matches!(self, Kind::PageFaults | Kind::ContextSwitches)
    }

    fn builder(self) -> Builder<'static> {
        let tlb = |which| Cache {
            which,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        };
        match self {
            Kind::Cycles => Builder::new(Hardware::CPU_CYCLES),
            Kind::Instructions => Builder::new(Hardware::INSTRUCTIONS),
            Kind::CacheReferences => Builder::new(Hardware::CACHE_REFERENCES),
            Kind::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
            Kind::DtlbLoadMisses => Builder::new(tlb(CacheId::DTLB)),
            Kind::ItlbLoadMisses => Builder::new(tlb(CacheId::ITLB)),
            Kind::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
            Kind::PageFaults => Builder::new(Software::PAGE_FAULTS),
            Kind::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        }
    }
}

/// Open one counter on this process and the threads it starts from now on, disabled. Kernel
/// work is counted where allowed (a syscall's cost is mostly kernel); where
/// perf_event_paranoid forbids it, user space only — except context switches, which happen
/// only in the kernel and so cannot be counted at all then.
fn open(kind: Kind) -> Result<Opened, String> {
    let build = |exclude_kernel: bool| {
        kind.builder()
            .observe_self()
            .any_cpu()
            .inherit(true)
            .exclude_kernel(exclude_kernel)
            .build()
    };
    match build(false) {
        Ok(c) => Ok(Opened {
            counter: c,
            user_only: false,
        }),
        Err(e) if is_denied(&e) && kind != Kind::ContextSwitches => build(true)
            .map(|c| Opened {
                counter: c,
                user_only: true,
            })
            .map_err(|e| reason(kind, &e)),
        Err(e) => Err(reason(kind, &e)),
    }
}

/// An open counter, and whether it had to leave kernel work out.
struct Opened {
    counter: Counter,
    user_only: bool,
}

/// The key in `unsupported` that says counts leave out the kernel's share.
pub const KERNEL_SIDE: &str = "kernel-side counts";

fn is_denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// Why `kind` could not be opened, in words a user can act on.
fn reason(kind: Kind, e: &io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    explain(
        kind,
        e.raw_os_error(),
        paranoid,
        has_cpu_pmu(),
        &e.to_string(),
    )
}

/// The reason text from the facts (kept apart so that tests can feed it any case).
pub fn explain(
    kind: Kind,
    errno: Option<i32>,
    paranoid: Option<i32>,
    cpu_pmu: bool,
    err: &str,
) -> String {
    let p = paranoid.map_or("?".to_string(), |p| p.to_string());
    match errno {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_paranoid {p} forbids it; run as root (CAP_PERFMON) or sysctl kernel.perf_event_paranoid=1"
        ),
        Some(libc::ENOSYS) => {
            "perf_event_open is not available (kernel without perf events, or a seccomp filter)"
                .to_string()
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) | Some(libc::EINVAL)
            if !kind.is_software() && !cpu_pmu =>
        {
            "no hardware PMU in this VM (no CPU PMU under /sys/bus/event_source/devices)"
                .to_string()
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this CPU's PMU has no such event".to_string()
        }
        _ => format!("perf_event_open failed: {err}"),
    }
}

/// A CPU PMU is registered ("cpu" on x86, "cpu_core"/"cpu_atom" on hybrid Intel, "armv8_*" on arm).
pub fn has_cpu_pmu() -> bool {
    std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .any(|n| n == "cpu" || n.starts_with("cpu_") || n.starts_with("armv"))
        })
        .unwrap_or(false)
}

/// Whether a hardware counter (cycles) opens here, or why not. For `costlab machine`.
pub fn probe_hardware() -> Result<(), String> {
    open(Kind::Cycles).map(|_| ())
}

/// Scale a count for time-sharing of PMU registers; None when it never ran.
fn scaled(count: u64, enabled: Option<u64>, running: Option<u64>) -> Option<f64> {
    match (enabled, running) {
        (Some(e), Some(0)) => (e == 0).then_some(count as f64),
        (Some(e), Some(r)) => Some(count as f64 * e as f64 / r as f64),
        _ => Some(count as f64),
    }
}

/// How cases that are sampled side by side (interleaved in time, one window) are grouped:
/// all together, or each alone when counters are read, since a counter reading belongs to one
/// case's samples only.
pub fn side_by_side<T: Clone>(counted: bool, cases: &[T]) -> Vec<Vec<T>> {
    if counted {
        cases.iter().map(|c| vec![c.clone()]).collect()
    } else {
        vec![cases.to_vec()]
    }
}

/// Run `f` with counters open on this process (threads it starts are counted too) when
/// `enabled`; returns `f`'s value and the readings (None when not enabled).
pub fn around<T>(
    enabled: bool,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Option<Readings>)> {
    if !enabled {
        return Ok((f()?, None));
    }
    let mut readings = Readings::default();
    let mut open_counters: Vec<(Kind, Counter)> = Vec::new();
    let mut user_only = false;
    for kind in ALL {
        match open(kind) {
            Ok(o) => {
                user_only |= o.user_only;
                open_counters.push((kind, o.counter));
            }
            Err(why) => {
                readings.unsupported.insert(kind.name().to_string(), why);
            }
        }
    }
    for (kind, c) in open_counters.iter_mut() {
        if let Err(e) = c.enable() {
            readings
                .unsupported
                .insert(kind.name().to_string(), format!("enabling failed: {e}"));
        }
    }
    if user_only {
        let p = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
        readings.unsupported.insert(
            KERNEL_SIDE.to_string(),
            format!(
                "perf_event_paranoid {} forbids counting in the kernel: the counts are user space only",
                p.trim()
            ),
        );
    }
    let value = f();
    for (_, c) in open_counters.iter_mut() {
        let _ = c.disable();
    }
    let value = value?;
    for (kind, mut c) in open_counters {
        if readings.unsupported.contains_key(kind.name()) {
            continue;
        }
        match c.read_full() {
            Ok(d) => {
                let v = scaled(
                    d.count(),
                    d.time_enabled().map(|t| t.as_nanos() as u64),
                    d.time_running().map(|t| t.as_nanos() as u64),
                );
                match v {
                    Some(v) => {
                        readings.counters.insert(kind.name().to_string(), v);
                    }
                    None => {
                        readings.unsupported.insert(
                            kind.name().to_string(),
                            "never scheduled on the PMU (its registers were all in use)"
                                .to_string(),
                        );
                    }
                }
            }
            Err(e) => {
                readings
                    .unsupported
                    .insert(kind.name().to_string(), format!("reading failed: {e}"));
            }
        }
    }
    if let (Some(i), Some(c)) = (
        readings.counters.get("instructions"),
        readings.counters.get("cycles"),
    ) {
        if *c > 0.0 {
            readings.counters.insert("IPC".to_string(), i / c);
        }
    } else {
        let why = readings
            .unsupported
            .get("cycles")
            .or_else(|| readings.unsupported.get("instructions"))
            .cloned();
        if let Some(why) = why {
            readings.unsupported.insert("IPC".to_string(), why);
        }
    }
    Ok((value, Some(readings)))
}

/// The scheduler's software counters on this process and everything it starts from now on
/// (threads and child processes): CPU migrations and context switches. They need no PMU;
/// where perf_event_open is refused they are None and `why` says so.
pub struct Scheduling {
    migrations: Option<Counter>,
    switches: Option<Counter>,
    pub why: Option<String>,
}

impl Scheduling {
    /// Open and enable both counters.
    pub fn start() -> Scheduling {
        let open_one = |ev: Software| {
            let mut c = Builder::new(ev)
                .observe_self()
                .any_cpu()
                .inherit(true)
                // Both happen in the kernel: counting user space only would count nothing.
                .exclude_kernel(false)
                .build()?;
            c.enable()?;
            Ok::<Counter, io::Error>(c)
        };
        let mut why = None;
        let mut take = |ev: Software, name: &str| match open_one(ev) {
            Ok(c) => Some(c),
            Err(e) => {
                why.get_or_insert_with(|| format!("{name}: perf_event_open failed: {e}"));
                None
            }
        };
        let migrations = take(Software::CPU_MIGRATIONS, "cpu-migrations");
        let switches = take(Software::CONTEXT_SWITCHES, "context-switches");
        Scheduling {
            migrations,
            switches,
            why,
        }
    }

    /// (migrations, context switches) so far.
    pub fn read(&mut self) -> (Option<u64>, Option<u64>) {
        let r = |c: &mut Option<Counter>| c.as_mut().and_then(|c| c.read().ok());
        (r(&mut self.migrations), r(&mut self.switches))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_cause() {
        assert!(
            explain(Kind::Cycles, Some(libc::ENOENT), Some(2), false, "")
                .starts_with("no hardware PMU")
        );
        assert_eq!(
            explain(Kind::Cycles, Some(libc::ENOENT), Some(2), true, ""),
            "this CPU's PMU has no such event"
        );
        assert!(explain(Kind::Cycles, Some(libc::EACCES), Some(3), true, "")
            .starts_with("perf_event_paranoid 3 forbids it"));
        assert!(explain(Kind::PageFaults, Some(99), None, true, "boom").ends_with("boom"));
    }

    #[test]
    fn scaling_for_time_sharing() {
        assert_eq!(scaled(100, Some(10), Some(5)), Some(200.0));
        assert_eq!(scaled(100, None, None), Some(100.0));
        assert_eq!(scaled(0, Some(10), Some(0)), None);
        assert_eq!(scaled(0, Some(0), Some(0)), Some(0.0));
    }

    #[test]
    fn disabled_gives_no_readings() {
        let (v, r) = around(false, || Ok(7)).unwrap();
        assert_eq!((v, r), (7, None));
    }

    /// On any machine: every counter is either read or reported with a reason, and the
    /// software page-fault counter sees the pages a thread started inside touches.
    #[test]
    fn every_counter_is_read_or_explained() {
        let (_, r) = around(true, || {
            std::thread::spawn(|| {
                let v = vec![1u8; 8 << 20];
                std::hint::black_box(&v);
            })
            .join()
            .map_err(|_| anyhow::anyhow!("thread panicked"))
        })
        .unwrap();
        let r = r.unwrap();
        for k in ALL {
            assert!(
                r.counters.contains_key(k.name()) || r.unsupported.contains_key(k.name()),
                "{} neither read nor explained",
                k.name()
            );
        }
        if let Some(pf) = r.counters.get("page-faults") {
            // 8 MiB first touched in the child thread: well over 100 faults even with THP.
            assert!(
                *pf >= 1.0,
                "page faults from the child thread were not counted"
            );
        }
    }
}
