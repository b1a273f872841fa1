//! `costlab numa-knobs`: the two NUMA sysctls measured on the workloads they exist for.
//!
//! - vm.zone_reclaim_mode on a node whose free memory is filled with page cache: with 0 the
//!   kernel takes a new allocation from another node (remote but quick to get); with 1 it
//!   reclaims the local page cache first (local, but the allocation waits for the reclaim).
//!   Figures: the share of the allocation's pages on the local node, and the time per page
//!   faulted in.
//! - kernel.numa_balancing on memory that starts on a remote node: with 1 the kernel samples
//!   the task's accesses (hint faults, after numa_balancing_scan_delay_ms) and migrates the
//!   pages toward it; with 0 they stay remote. Figures: bandwidth pass by pass, the local
//!   share at the end, pages migrated and hint faults (/proc/vmstat).
//!
//! Each case also records every node's numastat (delta over the case) and FilePages/MemFree
//! before and after. With `--change-knobs` (root) each knob is set to 0 and then 1 through the
//! restore journal; without it, the current setting alone is measured.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use super::dir::check_dir;
use super::kernels;
use super::policy::{self, Placement, Region};
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::machine::{numa, restore, sysfs::Root, Machine};
use costlab_core::measure::{cancel, cpus, sizes};
use costlab_history::report::{progress, Outcome};

const LAB: &str = "numa";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    ZoneReclaim,
    NumaBalancing,
}

pub const KNOBS: [Knob; 2] = [Knob::ZoneReclaim, Knob::NumaBalancing];

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::ZoneReclaim => "zone-reclaim",
            Knob::NumaBalancing => "numa-balancing",
        }
    }
    /// The sysctl's file.
    pub fn path(self) -> &'static str {
        match self {
            Knob::ZoneReclaim => "/proc/sys/vm/zone_reclaim_mode",
            Knob::NumaBalancing => "/proc/sys/kernel/numa_balancing",
        }
    }
    pub fn sysctl(self) -> &'static str {
        match self {
            Knob::ZoneReclaim => "vm.zone_reclaim_mode",
            Knob::NumaBalancing => "kernel.numa_balancing",
        }
    }
    pub fn workload(self) -> &'static str {
        match self {
            Knob::ZoneReclaim => "page-cache-fill",
            Knob::NumaBalancing => "remote-start",
        }
    }
    pub fn parse(t: &str) -> Option<Knob> {
        KNOBS.into_iter().find(|k| k.name() == t)
    }
}

/// What `costlab numa-knobs` will do.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobPlan {
    pub knobs: Vec<Knob>,
    /// The allocation (zone-reclaim) and the remote buffer (numa-balancing).
    pub bytes: u64,
    /// The page cache written to fill the local node; None: the node's free memory less
    /// half the allocation (so the allocation cannot fit without reclaim or spilling).
    pub fill: Option<u64>,
    /// Where the page-cache file is written.
    pub dir: PathBuf,
    /// How long the remote-start workload reads, in passes as many as fit.
    pub run: Duration,
    pub change: bool,
    pub samples: usize,
}

/// The largest page-cache fill the lab writes when none is given: on a node with hundreds of
/// GiB free the note says the fill did not reach the node's free memory.
const FILL_CAP: u64 = 8 << 30;

impl KnobPlan {
    pub fn parse(
        case_list: Option<&str>,
        size: Option<&str>,
        fill: Option<&str>,
        dir: Option<&str>,
        change: bool,
        quick: bool,
        samples: usize,
    ) -> Result<KnobPlan> {
        let knobs = match case_list {
            None => KNOBS.to_vec(),
            Some(t) => sizes::parse_list(t, |s| {
                Knob::parse(s).ok_or_else(|| {
                    usage(format!(
                        "unknown knob '{s}': use zone-reclaim, numa-balancing"
                    ))
                })
            })?,
        };
        let one = |flag: &str, v: Option<&str>| -> Result<Option<u64>> {
            v.map(|s| {
                costlab_lab::args::one(flag, s, "numa-knobs takes one size")
                    .and_then(sizes::parse_size)
            })
            .transpose()
        };
        let bytes = one("--sizes", size)?.unwrap_or(if quick { 64 << 20 } else { 256 << 20 });
        if !(4 << 20..=64 << 30).contains(&bytes) {
            return Err(usage(format!(
                "--sizes {}: use from 4M to 64G",
                sizes::format_size(bytes)
            )));
        }
        let fill = one("--fill", fill)?;
        // The page-cache fill and its folder serve zone-reclaim alone; a folder where it
        // cannot be written is refused before anything runs (on a one-node machine too).
        if !knobs.contains(&Knob::ZoneReclaim) {
            for (flag, given) in [("--dir", dir.is_some()), ("--fill", fill.is_some())] {
                if given {
                    return Err(usage(format!(
                        "{flag} serves only the zone-reclaim knob's page-cache fill: add zone-reclaim to --case, or leave out {flag}"
                    )));
                }
            }
        }
        if let Some(d) = dir {
            check_dir(Path::new(d))?;
        }
        Ok(KnobPlan {
            knobs,
            bytes,
            fill,
            dir: PathBuf::from(dir.unwrap_or("/var/tmp")),
            run: if quick {
                Duration::from_secs(3)
            } else {
                Duration::from_secs(10)
            },
            change,
            // Each zone-reclaim sample refills the node: a few are plenty.
            samples: samples.clamp(1, 3),
        })
    }
}

/// The local node (the first with CPUs this process may use and memory) and a remote one
/// with memory; Err says why there is no such pair.
pub fn nodes_for(machine: &Machine, allowed: &[usize]) -> Result<(usize, Vec<usize>, usize)> {
    let local = machine
        .nodes
        .iter()
        .find(|n| n.mem_total > 0 && n.cpus.iter().any(|c| allowed.contains(c)))
        .ok_or_else(|| usage("no node has both memory and a CPU this process may use"))?;
    let remote = machine
        .nodes
        .iter()
        .find(|n| n.id != local.id && n.mem_total > 0)
        .ok_or_else(|| usage("no second node with memory: the knobs act between nodes"))?;
    let cpus: Vec<usize> = local
        .cpus
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    Ok((local.id, cpus, remote.id))
}

/// The values a knob is measured at: 0 and 1 when changing, else the current one.
fn settings(k: Knob, change: bool) -> Result<Vec<String>> {
    if change {
        return Ok(vec!["0".into(), "1".into()]);
    }
    Ok(vec![restore::read_setting(Path::new(k.path()))?])
}

/// Every node's numastat now.
fn numastat_all(root: &Root, nodes: &[usize]) -> BTreeMap<usize, BTreeMap<String, u64>> {
    nodes
        .iter()
        .map(|&n| (n, numa::read_numastat(root, n)))
        .collect()
}

fn vmstat(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/vmstat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Per cent of a region's pages on `node` (every page asked).
fn local_share(region: &Region, node: usize) -> Result<f64> {
    let pages = region.len() / rustix::param::page_size();
    let seen = policy::nodes(region, pages)?;
    let all: usize = seen.values().sum();
    Ok(100.0 * seen.get(&node).copied().unwrap_or(0) as f64 / all.max(1) as f64)
}

/// Write `bytes` of page cache to a fresh file in `dir` from the calling thread (its pages
/// land on this thread's node), flushed so that the pages are clean and reclaimable.
fn fill_page_cache(dir: &Path, bytes: u64) -> Result<PathBuf> {
    let path = dir.join(format!("costlab-numa-knobs-{}.fill", std::process::id()));
    let mut f = std::fs::File::create(&path).with_context(|| {
        format!(
            "creating the page-cache file in {}: choose a writable directory with --dir",
            dir.display()
        )
    })?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        cancel::check()?;
        let n = left.min(chunk.len() as u64) as usize;
        if let Err(e) = f.write_all(&chunk[..n]) {
            let _ = std::fs::remove_file(&path);
            return Err(e).with_context(|| format!("writing {}", path.display()));
        }
        left -= n as u64;
    }
    f.sync_data()
        .with_context(|| format!("flushing {}", path.display()))?;
    Ok(path)
}

/// The figures of one case besides numastat.
struct Figures {
    rows: Vec<(&'static str, &'static str, Vec<f64>)>,
    notes: Vec<String>,
}

/// zone-reclaim: fill the local node's page cache, then fault `bytes` of anonymous memory in
/// from a CPU of that node.
fn page_cache_fill(plan: &KnobPlan, local: usize, root: &Root) -> Result<Figures> {
    let mut local_pct = Vec::new();
    let mut fault = Vec::new();
    let mut notes = Vec::new();
    for _ in 0..plan.samples {
        let free = numa::read_node_meminfo(root, local, "MemFree").unwrap_or(0);
        let fill = plan
            .fill
            .unwrap_or_else(|| free.saturating_sub(plan.bytes / 2).min(FILL_CAP));
        if plan.fill.is_none() && fill == FILL_CAP {
            notes.push(format!(
                "page-cache-fill: the fill stops at {}; node {local} keeps {} free, so the allocation may fit without reclaim (give --fill)",
                sizes::human_size(FILL_CAP),
                sizes::human_size(free.saturating_sub(FILL_CAP))
            ));
        }
        let file = fill_page_cache(&plan.dir, fill)?;
        let result = (|| -> Result<(f64, f64)> {
            let mut region = Region::system_default(plan.bytes)?;
            let page = rustix::param::page_size();
            let t0 = Instant::now();
            for chunk in region.as_mut_slice().chunks_mut(page) {
                chunk[0] = 1;
            }
            let ns = t0.elapsed().as_nanos() as f64 / (plan.bytes as f64 / page as f64);
            Ok((local_share(&region, local)?, ns))
        })();
        let _ = std::fs::remove_file(&file);
        let (pct, ns) = result?;
        local_pct.push(pct);
        fault.push(ns);
    }
    Ok(Figures {
        rows: vec![
            ("local_share", "%", local_pct),
            ("fault_time", "ns per page", fault),
        ],
        notes,
    })
}

/// numa-balancing: `bytes` placed on the remote node, then read from a CPU of the local node
/// pass after pass for the run's length.
fn remote_start(plan: &KnobPlan, local: usize, remote: usize) -> Result<Figures> {
    let mut bw = Vec::new();
    let mut end_local = Vec::new();
    let mut migrated = Vec::new();
    let mut hints = Vec::new();
    for _ in 0..plan.samples {
        let mut region = Region::system_default(plan.bytes)?;
        policy::place(&region, &Placement::Bind(remote))?;
        region.as_mut_slice_u64().fill(1);
        // The pages stay where they are; the policy goes, so balancing may move them.
        policy::place(&region, &Placement::Default)?;
        let (m0, h0) = (vmstat("numa_pages_migrated"), vmstat("numa_hint_faults"));
        let t0 = Instant::now();
        let mut passes = Vec::new();
        while t0.elapsed() < plan.run || passes.is_empty() {
            cancel::check()?;
            let t = Instant::now();
            std::hint::black_box(kernels::read_all(region.as_slice_u64()));
            passes.push(plan.bytes as f64 / t.elapsed().as_nanos().max(1) as f64);
        }
        let (m1, h1) = (vmstat("numa_pages_migrated"), vmstat("numa_hint_faults"));
        // First pass and last: where the pages started, and where balancing left them.
        bw.push(passes[0]);
        bw.push(*passes.last().unwrap());
        end_local.push(local_share(&region, local)?);
        if let (Some(a), Some(b)) = (m0, m1) {
            migrated.push(b.saturating_sub(a) as f64);
        }
        if let (Some(a), Some(b)) = (h0, h1) {
            hints.push(b.saturating_sub(a) as f64);
        }
    }
    Ok(Figures {
        rows: vec![
            ("bandwidth", "GB/s", bw),
            ("local_share", "%", end_local),
            ("pages_migrated", "pages", migrated),
            ("hint_faults", "count", hints),
        ],
        notes: vec![format!(
            "remote-start: bandwidth samples are each run's first pass and last pass ({} of reading from node {local}'s CPUs over memory that started on node {remote})",
            format!("{:.0} s", plan.run.as_secs_f64())
        )],
    })
}

/// Run the plan on a machine with two nodes or more.
pub fn execute(machine: &Machine, plan: &KnobPlan) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    let (local, local_cpus, remote) = nodes_for(machine, &allowed)?;
    if plan.change && !rustix::process::geteuid().is_root() {
        return Err(usage(
            "--change-knobs writes /proc/sys (root only): run as root, or leave it out to measure the current settings",
        ));
    }
    let root = Root::new(Path::new("/"));
    let ids: Vec<usize> = machine.nodes.iter().map(|n| n.id).collect();
    let out = Outcome::default();
    // The default folder is checked here (one the user gave, when the plan was parsed): a
    // tmpfs one is refused before anything runs.
    if plan.knobs.contains(&Knob::ZoneReclaim) {
        check_dir(&plan.dir)?;
    }
    // The workloads run on the local node's CPUs, so first touch and the fill land there: on
    // a thread of their own, so the caller's thread keeps its affinity.
    std::thread::scope(|s| {
        s.spawn(|| -> Result<Outcome> {
            cpus::pin_current_to(&local_cpus)?;
            run_cases(machine, plan, &root, &ids, local, remote, out)
        })
        .join()
        .map_err(|_| anyhow!("the numa-knobs thread panicked"))?
    })
}

fn run_cases(
    machine: &Machine,
    plan: &KnobPlan,
    root: &Root,
    ids: &[usize],
    local: usize,
    remote: usize,
    mut out: Outcome,
) -> Result<Outcome> {
    // A kernel built without NUMA balancing has no such sysctl: say so, measure the rest.
    let mut knobs = Vec::new();
    for &k in &plan.knobs {
        if Path::new(k.path()).exists() {
            knobs.push(k);
        } else {
            out.notes.push(format!(
                "{}: this kernel has no {} ({}); not measured",
                k.name(),
                k.sysctl(),
                k.path()
            ));
        }
    }
    let cases: Vec<(Knob, String)> = knobs
        .iter()
        .map(|&k| settings(k, plan.change).map(|v| v.into_iter().map(move |s| (k, s))))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let bar = progress::bar(cases.len() as u64, "numa-knobs");
    for (knob, setting) in cases {
        cancel::check()?;
        bar.set_message(format!("{} {setting}", knob.name()));
        let guard = if plan.change {
            Some(restore::change_setting(
                Path::new(knob.path()),
                &setting,
                knob.sysctl(),
            )?)
        } else {
            None
        };
        let before = numastat_all(root, ids);
        let mem_before: Vec<(usize, Option<u64>, Option<u64>)> = ids
            .iter()
            .map(|&n| {
                (
                    n,
                    numa::read_node_meminfo(root, n, "FilePages"),
                    numa::read_node_meminfo(root, n, "MemFree"),
                )
            })
            .collect();
        let figures = match knob {
            Knob::ZoneReclaim => page_cache_fill(plan, local, root),
            Knob::NumaBalancing => remote_start(plan, local, remote),
        };
        let after = numastat_all(root, ids);
        if let Some(g) = guard {
            if let Some(note) = g.restore() {
                out.notes.push(format!("{} {setting}: {note}", knob.name()));
            }
        }
        let figures = figures?;
        let mem_node = match knob {
            Knob::ZoneReclaim => local,
            Knob::NumaBalancing => remote,
        };
        let setting_v: Value = setting
            .parse::<u64>()
            .map_or(Value::from(setting.clone()), Value::from);
        let key = || {
            case! {"knob" => knob.name(), "setting" => setting_v.clone(),
            "workload" => knob.workload(), "cpu_node" => local, "mem_node" => mem_node,
            "size" => plan.bytes}
        };
        for (metric, unit, samples) in figures.rows {
            out.push(LAB, key(), metric, unit, samples);
        }
        out.notes.extend(figures.notes);
        for (node, stats) in &after {
            for (stat, v) in stats {
                let was = before.get(node).and_then(|b| b.get(stat)).copied();
                if let Some(was) = was {
                    out.push(
                        LAB,
                        case! {"knob" => knob.name(), "setting" => setting_v.clone(),
                        "node" => *node, "stat" => stat.as_str()},
                        "numastat",
                        "pages",
                        vec![v.saturating_sub(was) as f64],
                    );
                }
            }
        }
        for (node, file, free) in mem_before {
            for (stat, was, key) in [
                ("FilePages", file, "FilePages"),
                ("MemFree", free, "MemFree"),
            ] {
                let now = numa::read_node_meminfo(root, node, key);
                for (when, v) in [("before", was), ("after", now)] {
                    if let Some(v) = v {
                        out.push(
                            LAB,
                            case! {"knob" => knob.name(), "setting" => setting_v.clone(),
                            "node" => node, "stat" => stat, "when" => when},
                            "memory",
                            "MiB",
                            vec![v as f64 / (1u64 << 20) as f64],
                        );
                    }
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if !plan.change {
        out.notes.push(
            "measured at the current settings only: --change-knobs (root) sets each knob to 0 and then 1, through the restore journal".into(),
        );
    }
    out.notes.extend(readings(&out, machine));
    // Each case repeats the workload's note: keep the first.
    let mut seen = std::collections::HashSet::new();
    out.notes.retain(|n| seen.insert(n.clone()));
    Ok(out)
}

fn median(out: &Outcome, knob: Knob, setting: &str, metric: &str) -> Option<f64> {
    out.results
        .iter()
        .find(|r| {
            r.metric == metric
                && r.key("knob") == knob.name()
                && r.key("setting") == setting
                && r.case.get("workload").is_some()
        })
        .map(|r| r.summary.median)
}

/// What each knob did here, and what the figures can be trusted for.
pub fn readings(out: &Outcome, machine: &Machine) -> Vec<String> {
    let mut v = Vec::new();
    let zr = |s: &str| {
        Some((
            median(out, Knob::ZoneReclaim, s, "local_share")?,
            median(out, Knob::ZoneReclaim, s, "fault_time")?,
        ))
    };
    if let (Some((l0, f0)), Some((l1, f1))) = (zr("0"), zr("1")) {
        let why = if l0 >= 95.0 && l1 >= 95.0 {
            "the allocation stayed local either way: the node still had room after the fill (a larger --fill, or none, fills it)"
        } else if l1 > l0 + 10.0 {
            "1 trades the allocation's time (reclaiming the local page cache) for local pages; 0 spills to the remote node"
        } else {
            "the setting changed little: the fill may be memory reclaim cannot drop (tmpfs, dirty pages), so both spill"
        };
        v.push(format!(
            "reading: zone-reclaim: with 0, {l0:.0}% of the allocation was local ({f0:.0} ns per page); with 1, {l1:.0}% ({f1:.0} ns per page): {why}"
        ));
    }
    let nb = |s: &str| {
        Some((
            median(out, Knob::NumaBalancing, s, "local_share")?,
            median(out, Knob::NumaBalancing, s, "pages_migrated").unwrap_or(0.0),
        ))
    };
    if let (Some((l0, m0)), Some((l1, m1))) = (nb("0"), nb("1")) {
        let why = if l1 > l0 + 10.0 {
            "balancing moved the pages toward the CPU that reads them, after its scan delay"
        } else {
            "balancing moved little in this run: its scan delay and period (kernel.numa_balancing_scan_*) may outlast it; a full run reads longer"
        };
        v.push(format!(
            "reading: numa-balancing: with 0, {l0:.0}% of the remote-start memory ended local ({m0:.0} pages migrated); with 1, {l1:.0}% ({m1:.0} migrated): {why}"
        ));
    }
    if machine.hypervisor.is_some() {
        v.push("reading: in a VM (an emulator most of all) remote memory may cost what local does: where the pages went (local_share, numastat, pages_migrated) holds; the times and bandwidths need real hardware".into());
    }
    v
}

/// The knobs' tables: the figures per knob and setting, then numastat deltas per node.
pub fn render(out: &Outcome) -> String {
    use costlab_history::report::table;
    let mut text = String::new();
    let main: Vec<Vec<String>> = out
        .results
        .iter()
        .filter(|r| r.case.get("workload").is_some() && !r.key("knob").is_empty())
        .map(|r| {
            vec![
                r.key("knob"),
                r.key("setting"),
                r.key("workload"),
                format!("{} -> {}", r.key("cpu_node"), r.key("mem_node")),
                r.metric.clone(),
                format!("{} {}", r.summary.show(2), r.unit),
            ]
        })
        .collect();
    if !main.is_empty() {
        text += &table::render(
            &[
                "knob",
                "setting",
                "workload",
                "cpu node -> memory node",
                "figure",
                "value",
            ],
            &main,
        );
        text += "\n";
    }
    let stats: Vec<Vec<String>> = out
        .results
        .iter()
        .filter(|r| r.metric == "numastat")
        .map(|r| {
            vec![
                r.key("knob"),
                r.key("setting"),
                r.key("node"),
                r.key("stat"),
                table::figure(r.summary.median),
            ]
        })
        .collect();
    if !stats.is_empty() {
        text += &table::render(
            &[
                "knob",
                "setting",
                "node",
                "numastat",
                "pages during the case",
            ],
            &stats,
        );
        text += "\n";
    }
    let mem: Vec<Vec<String>> = out
        .results
        .iter()
        .filter(|r| r.metric == "memory" && r.key("when") == "before")
        .map(|r| {
            let mut after = r.case.clone();
            after.insert("when".into(), Value::from("after"));
            let a = out
                .find("memory", &after)
                .map_or("—".into(), |x| table::figure(x.summary.median));
            vec![
                r.key("knob"),
                r.key("setting"),
                r.key("node"),
                r.key("stat"),
                table::figure(r.summary.median),
                a,
            ]
        })
        .collect();
    if !mem.is_empty() {
        text += &table::render(
            &[
                "knob",
                "setting",
                "node",
                "meminfo",
                "before MiB",
                "after MiB",
            ],
            &mem,
        );
        text += "\n";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn a_plan_takes_knobs_sizes_and_refuses_bad_ones() {
        let p = KnobPlan::parse(
            Some("numa-balancing"),
            Some("16M"),
            None,
            None,
            false,
            true,
            9,
        )
        .unwrap();
        assert_eq!(p.knobs, vec![Knob::NumaBalancing]);
        assert_eq!(p.bytes, 16 << 20);
        assert_eq!(p.samples, 3);
        assert_eq!(p.dir, PathBuf::from("/var/tmp"));
        let disk = env!("CARGO_MANIFEST_DIR");
        let all = KnobPlan::parse(None, None, Some("1G"), Some(disk), true, false, 1).unwrap();
        assert_eq!(all.knobs, KNOBS.to_vec());
        assert_eq!(all.bytes, 256 << 20);
        assert_eq!(all.fill, Some(1 << 30));
        for (k, s, want) in [
            (Some("swap"), None, "unknown knob 'swap'"),
            (None, Some("1K"), "use from 4M to 64G"),
            (None, Some("16M,32M"), "give one value"),
        ] {
            let e = KnobPlan::parse(k, s, None, None, false, true, 1).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{e}");
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn a_page_cache_folder_that_cannot_serve_is_refused_before_anything_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let missing = tmp.path().join("no-such-folder");
        let mut cases = vec![
            (missing.clone(), "no such directory"),
            (file.clone(), "not a directory"),
            (PathBuf::from("/proc"), "a proc file system"),
        ];
        if std::fs::metadata("/dev/shm").is_ok() {
            cases.push((PathBuf::from("/dev/shm"), "a tmpfs file system"));
        }
        for (dir, says) in cases {
            let d = dir.display().to_string();
            let e = KnobPlan::parse(None, None, None, Some(&d), false, true, 1).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{e}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("--dir {d}: {says}")), "{msg}");
            assert!(msg.contains("give") && !msg.contains('\n'), "{msg}");
        }
        // --dir and --fill serve zone-reclaim alone.
        for (dir, fill) in [(Some("/var/tmp"), None), (None, Some("1G"))] {
            let e = KnobPlan::parse(Some("numa-balancing"), None, fill, dir, false, true, 1)
                .unwrap_err();
            assert_eq!(exit_code(&e), 2, "{e}");
            assert!(
                e.to_string().contains("serves only the zone-reclaim knob"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_local_and_remote_nodes_come_from_the_machine() {
        let root: PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "../../../tests/fixtures/xeon-2s-4node",
        ]
        .iter()
        .collect();
        let m = Machine::probe_at(&root);
        let (local, cpus, remote) = nodes_for(&m, &[1, 5, 2]).unwrap();
        assert_eq!((local, cpus, remote), (1, vec![1, 5], 0));
        assert!(nodes_for(&m, &[]).is_err());
    }

    #[test]
    fn readings_compare_the_settings() {
        let mut o = Outcome::default();
        for (s, pct, ns) in [(0, 20.0, 300.0), (1, 95.0, 900.0)] {
            let key = case! {"knob" => "zone-reclaim", "setting" => s, "workload" => "page-cache-fill", "cpu_node" => 0, "mem_node" => 0};
            o.push(LAB, key.clone(), "local_share", "%", vec![pct]);
            o.push(LAB, key, "fault_time", "ns per page", vec![ns]);
        }
        let m = Machine {
            hypervisor: Some("QEMU".into()),
            ..Default::default()
        };
        let r = readings(&o, &m);
        assert!(
            r[0].starts_with("reading: zone-reclaim: with 0, 20% of the allocation was local (300 ns per page); with 1, 95% (900 ns per page): 1 trades"),
            "{r:?}"
        );
        assert!(r[1].contains("need real hardware"), "{r:?}");
        assert!(render(&o).contains("page-cache-fill"));
    }
}
