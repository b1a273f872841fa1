//! `costlab numa-maps`: where a process's memory lives, node by node, from /proc/PID/numa_maps.
//!
//! Each numa_maps line is one mapping; `N<node>=<count>` counts pages of that mapping's
//! `kernelpagesize_kB` (a page size, not a count), so a 1 GiB hugetlb page counts 1 GiB.
//! `huge` marks hugetlb mappings; `anon=<count>` says how many of a mapping's pages are
//! anonymous (a file mapping's copied-on-write pages are anonymous too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use costlab_core::error::usage;
use costlab_core::machine::sysfs::{kv, kv_bytes, Root};
use costlab_core::machine::Machine;
use costlab_core::measure::cpus::{format_cpu_list, parse_cpu_list};
use costlab_history::report::Outcome;

const MIB: f64 = (1u64 << 20) as f64;

/// One mapping's resident pages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapping {
    pub huge: bool,
    pub file: bool,
    /// Bytes per page (kernelpagesize_kB * 1024; 4 KiB when absent).
    pub page_size: u64,
    /// Node -> resident pages of `page_size`.
    pub pages: BTreeMap<usize, u64>,
    /// Anonymous pages in the mapping (all of its pages when it is not a file mapping).
    pub anon: u64,
}

/// Parse numa_maps text. Lines that make no sense are skipped; nothing here can panic.
pub fn parse_numa_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut words = line.split_whitespace();
    let addr = words.next()?;
    u64::from_str_radix(addr, 16).ok()?;
    let _policy = words.next()?;
    let mut m = Mapping {
        page_size: 4096,
        ..Default::default()
    };
    let mut anon = None;
    for w in words {
        if w == "huge" {
            m.huge = true;
            continue;
        }
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        match k {
            "file" => m.file = true,
            "anon" => anon = v.parse::<u64>().ok(),
            "kernelpagesize_kB" => {
                if let Some(b) = v.parse::<u64>().ok().and_then(|kb| kb.checked_mul(1024)) {
                    m.page_size = b;
                }
            }
            _ => {
                if let Some(node) = k.strip_prefix('N').and_then(|n| n.parse::<usize>().ok()) {
                    if let Ok(n) = v.parse::<u64>() {
                        let e = m.pages.entry(node).or_insert(0);
                        *e = e.saturating_add(n);
                    }
                }
            }
        }
    }
    let total: u64 = m.pages.values().fold(0u64, |a, b| a.saturating_add(*b));
    m.anon = if m.file {
        anon.unwrap_or(0).min(total)
    } else {
        total
    };
    Some(m)
}

/// Bytes on one node by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMemory {
    pub anon: f64,
    pub file: f64,
    pub huge: f64,
}

impl NodeMemory {
    pub fn total(&self) -> f64 {
        self.anon + self.file + self.huge
    }

    fn add(&mut self, o: &NodeMemory) {
        self.anon += o.anon;
        self.file += o.file;
        self.huge += o.huge;
    }
}

/// Memory per node. A file mapping's anonymous pages are not placed per node by the kernel's
/// report, so they are shared out over its nodes in proportion (exact when on one node).
pub fn per_node(maps: &[Mapping]) -> BTreeMap<usize, NodeMemory> {
    let mut out: BTreeMap<usize, NodeMemory> = BTreeMap::new();
    for m in maps {
        let total = m.pages.values().fold(0u64, |a, &b| a.saturating_add(b));
        if total == 0 {
            continue;
        }
        // Both shares from whole page counts, so neither can go below zero by rounding.
        let anon_share = m.anon as f64 / total as f64;
        let file_share = (total - m.anon.min(total)) as f64 / total as f64;
        let size = m.page_size as f64;
        for (&node, &pages) in &m.pages {
            let bytes = pages as f64 * size;
            let e = out.entry(node).or_default();
            if m.huge {
                e.huge += bytes;
            } else {
                e.anon += bytes * anon_share;
                e.file += bytes * file_share;
            }
        }
    }
    out
}

/// What /proc/PID/status adds: name, the CPUs the process may run on, its RSS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub name: String,
    pub cpus_allowed: Vec<usize>,
    /// VmRSS in bytes (hugetlb pages are not in it).
    pub rss: Option<u64>,
    pub hugetlb: Option<u64>,
}

pub fn parse_status(text: &str) -> Status {
    Status {
        name: kv(text, "Name").unwrap_or("").to_string(),
        cpus_allowed: kv(text, "Cpus_allowed_list")
            .and_then(|l| parse_cpu_list(l).ok())
            .unwrap_or_default(),
        rss: kv_bytes(text, "VmRSS"),
        hugetlb: kv_bytes(text, "HugetlbPages"),
    }
}

/// A process's memory by node, and what its status says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMemory {
    pub pid: u32,
    pub status: Status,
    pub nodes: BTreeMap<usize, NodeMemory>,
}

impl ProcessMemory {
    pub fn all(&self) -> NodeMemory {
        let mut t = NodeMemory::default();
        for m in self.nodes.values() {
            t.add(m);
        }
        t
    }

    /// Nodes whose CPUs the process may run on.
    pub fn cpu_nodes(&self, machine: &Machine) -> BTreeSet<usize> {
        machine
            .nodes
            .iter()
            .filter(|n| n.cpus.iter().any(|c| self.status.cpus_allowed.contains(c)))
            .map(|n| n.id)
            .collect()
    }

    /// The warning where a process allowed on some nodes' CPUs has memory on other nodes.
    pub fn placement_warning(&self, machine: &Machine) -> Option<String> {
        let cpu_nodes = self.cpu_nodes(machine);
        let with_cpus = machine.nodes.iter().filter(|n| !n.cpus.is_empty()).count();
        if cpu_nodes.is_empty() || cpu_nodes.len() >= with_cpus {
            return None;
        }
        let remote: Vec<(usize, f64)> = self
            .nodes
            .iter()
            .filter(|(n, m)| !cpu_nodes.contains(n) && m.total() > 0.0)
            .map(|(n, m)| (*n, m.total()))
            .collect();
        if remote.is_empty() {
            return None;
        }
        let bytes: f64 = remote.iter().map(|r| r.1).sum();
        let share = 100.0 * bytes / self.all().total().max(1.0);
        let on: Vec<String> = cpu_nodes.iter().map(usize::to_string).collect();
        let off: Vec<String> = remote
            .iter()
            .map(|(n, b)| format!("node {n} {:.1} MiB", b / MIB))
            .collect();
        Some(format!(
            "pid {} ({}) may run only on CPUs {} (node {}) but {:.0}% of its memory is elsewhere: {}; every access there is remote (bind memory with the CPUs: numactl --cpunodebind={n} --membind={n})",
            self.pid,
            self.status.name,
            format_cpu_list(&self.status.cpus_allowed),
            on.join(", "),
            share,
            off.join(", "),
            n = on.join(",")
        ))
    }
}

/// Why /proc/PID/numa_maps could not be read, from the error the kernel gave: the process
/// is gone, the kernel has no NUMA support (no numa_maps file), or it refused the read (with
/// the path, and, for root, the rule that refused it rather than advice to become root).
fn read_error(
    e: &std::io::Error,
    path: &Path,
    pid: u32,
    still_there: bool,
    root: bool,
) -> anyhow::Error {
    let path = path.display();
    match e.kind() {
        _ if !still_there || e.raw_os_error() == Some(libc::ESRCH) => usage(format!(
            "no process {pid}: it exited; check the PID (ps -e lists running processes)"
        )),
        std::io::ErrorKind::NotFound => usage(format!(
            "cannot read {path}: the kernel has no numa_maps (built without NUMA support, CONFIG_NUMA)"
        )),
        std::io::ErrorKind::PermissionDenied if root => usage(format!(
            "cannot read {path}: the kernel refused it even to root (EACCES: the ptrace access check; a container or sandbox that hides this process, or Yama/LSM policy); run costlab where process {pid} lives"
        )),
        std::io::ErrorKind::PermissionDenied => usage(format!(
            "cannot read {path}: permission denied (EACCES); run as the process's owner or as root"
        )),
        _ => usage(format!("cannot read {path}: {e}")),
    }
}

/// Read /proc/PID/numa_maps and status under `root`. A PID that does not exist or cannot be
/// read is bad input (exit 2).
pub fn read_process(root: &Path, pid: u32) -> anyhow::Result<ProcessMemory> {
    let r = Root::new(root);
    let dir = r.path(&format!("proc/{pid}"));
    if !dir.exists() {
        return Err(usage(format!(
            "no process {pid}: check the PID (ps -e lists running processes)"
        )));
    }
    let maps_path = dir.join("numa_maps");
    let bytes = std::fs::read(&maps_path).map_err(|e| {
        read_error(
            &e,
            &maps_path,
            pid,
            dir.exists(),
            rustix::process::geteuid().is_root(),
        )
    })?;
    let maps = parse_numa_maps(&String::from_utf8_lossy(&bytes));
    // Read status right after numa_maps so RSS is taken at (nearly) the same moment.
    let status = r
        .text(&format!("proc/{pid}/status"))
        .map(|t| parse_status(&t))
        .unwrap_or_default();
    Ok(ProcessMemory {
        pid,
        status,
        nodes: per_node(&maps),
    })
}

/// Parse the PID arguments; `--self` adds this process.
pub fn parse_pids(args: &[String], this: bool) -> anyhow::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for a in args {
        let pid: u32 = a.parse().ok().filter(|&p| p > 0).ok_or_else(|| {
            usage(format!(
                "bad PID '{a}': expected a process id like 1234 (or --self)"
            ))
        })?;
        pids.push(pid);
    }
    if this {
        pids.push(std::process::id());
    }
    if pids.is_empty() {
        return Err(usage(
            "numa-maps needs a PID or --self: costlab numa-maps 1234 or costlab numa-maps --self",
        ));
    }
    Ok(pids)
}

/// Rows for one process: per node and "all", kinds anon / file / huge / total, in MiB; and its
/// VmRSS (metric "rss") for comparison. One reading each: memory is a state, not a timing.
pub fn outcome_for(machine: &Machine, procs: &[ProcessMemory]) -> Outcome {
    let mut out = Outcome::default();
    for p in procs {
        let mut push = |node: serde_json::Value, m: &NodeMemory| {
            for (kind, bytes) in [
                ("anon", m.anon),
                ("file", m.file),
                ("huge", m.huge),
                ("total", m.total()),
            ] {
                out.push(
                    "numa-maps",
                    costlab_core::case! {"pid" => p.pid, "node" => node.clone(), "kind" => kind},
                    "memory",
                    "MiB",
                    vec![bytes / MIB],
                );
            }
        };
        for (node, m) in &p.nodes {
            push(serde_json::json!(node), m);
        }
        push(serde_json::json!("all"), &p.all());
        if let Some(rss) = p.status.rss {
            out.push(
                "numa-maps",
                costlab_core::case! {"pid" => p.pid, "source" => "VmRSS"},
                "rss",
                "MiB",
                vec![rss as f64 / MIB],
            );
        }
        if let Some(w) = p.placement_warning(machine) {
            out.notes.push(w);
        }
    }
    out
}

/// The terminal table: one row per process and node.
pub fn render(procs: &[ProcessMemory]) -> String {
    let mut rows = Vec::new();
    let f = |b: f64| format!("{:.1}", b / MIB);
    for p in procs {
        let label = format!("{} ({})", p.pid, p.status.name);
        for (node, m) in &p.nodes {
            rows.push(vec![
                label.clone(),
                node.to_string(),
                f(m.anon),
                f(m.file),
                f(m.huge),
                f(m.total()),
            ]);
        }
        let all = p.all();
        rows.push(vec![
            label.clone(),
            "all".to_string(),
            f(all.anon),
            f(all.file),
            f(all.huge),
            f(all.total()),
        ]);
    }
    let mut text = costlab_history::report::table::render(
        &[
            "pid",
            "node",
            "anon MiB",
            "file MiB",
            "huge MiB",
            "total MiB",
        ],
        &rows,
    ) + "\n";
    for p in procs {
        if let Some(rss) = p.status.rss {
            let all = p.all();
            let mapped = all.total() - all.huge;
            text += &format!(
                "pid {}: numa_maps {:.1} MiB without hugetlb vs VmRSS {:.1} MiB ({:+.1}%); hugetlb {:.1} MiB is not in RSS\n",
                p.pid,
                mapped / MIB,
                rss as f64 / MIB,
                100.0 * (mapped - rss as f64) / (rss as f64).max(1.0),
                all.huge / MIB
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_error_names_the_real_cause() {
        use costlab_core::error::{exit_code, one_line};
        use std::io::{Error, ErrorKind};
        let path = Path::new("/proc/7/numa_maps");
        let said = |e: Error, there: bool, root: bool| {
            let err = read_error(&e, path, 7, there, root);
            assert_eq!(exit_code(&err), 2);
            one_line(&err)
        };
        assert!(said(Error::from(ErrorKind::NotFound), false, true).contains("no process 7"));
        assert!(said(Error::from_raw_os_error(libc::ESRCH), true, false).contains("no process 7"));
        let no_numa = said(Error::from(ErrorKind::NotFound), true, false);
        assert!(no_numa.contains("CONFIG_NUMA") && no_numa.contains("/proc/7/numa_maps"));
        let as_root = said(Error::from_raw_os_error(libc::EACCES), true, true);
        assert!(as_root.contains("EACCES") && !as_root.contains("or as root"));
        let as_user = said(Error::from_raw_os_error(libc::EACCES), true, false);
        assert!(as_user.contains("run as the process's owner or as root"));
    }

    #[test]
    fn a_process_without_numa_maps_means_a_kernel_without_numa() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/42")).unwrap();
        let err = read_process(dir.path(), 42).unwrap_err();
        assert!(costlab_core::error::one_line(&err).contains("CONFIG_NUMA"));
        let err = read_process(dir.path(), 43).unwrap_err();
        assert!(costlab_core::error::one_line(&err).contains("no process 43"));
    }
    use proptest::prelude::*;

    #[test]
    fn lines_parse_with_their_page_size() {
        let m = parse_numa_maps(
            "7f0000000000 default file=/anon_hugepage\\040(deleted) huge anon=2 dirty=2 N1=2 kernelpagesize_kB=1048576\n\
             01a00000 default heap anon=10 dirty=10 N0=6 N1=4 kernelpagesize_kB=4\n\
             00400000 default file=/bin/x anon=1 mapped=4 N0=4 kernelpagesize_kB=4\n\
             7f9000200000 default\n\
             garbage line\n",
        );
        assert_eq!(m.len(), 4);
        assert!(m[0].huge && m[0].file);
        assert_eq!(m[0].page_size, 1 << 30);
        assert_eq!(m[0].pages, BTreeMap::from([(1, 2)]));
        assert_eq!(m[1].anon, 10);
        assert_eq!(m[2].anon, 1);
        assert!(m[3].pages.is_empty());
        let nodes = per_node(&m);
        assert_eq!(nodes[&1].huge, 2.0 * (1u64 << 30) as f64);
        assert_eq!(nodes[&0].anon, (6.0 + 1.0) * 4096.0);
        assert_eq!(nodes[&0].file, 3.0 * 4096.0);
    }

    #[test]
    fn pids_are_checked() {
        assert_eq!(parse_pids(&["12".into()], false).unwrap(), vec![12]);
        for bad in ["x", "0", "-3"] {
            let e = parse_pids(&[bad.to_string()], false).unwrap_err();
            assert_eq!(costlab_core::error::exit_code(&e), 2);
        }
        assert!(parse_pids(&[], false).is_err());
        assert_eq!(parse_pids(&[], true).unwrap(), vec![std::process::id()]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let text = String::from_utf8_lossy(&bytes);
            let maps = parse_numa_maps(&text);
            let _ = per_node(&maps);
            let _ = parse_status(&text);
        }

        #[test]
        fn numa_maps_shaped_noise_never_panics(
            lines in proptest::collection::vec(
                ("[0-9a-f]{1,16}", "(default|bind:0|interleave:0-3)",
                 proptest::collection::vec("(N[0-9]{1,3}|anon|file|kernelpagesize_kB|huge|mapped)=?[0-9]{0,25}", 0..8)),
                0..20)
        ) {
            let text: String = lines
                .iter()
                .map(|(a, p, w)| format!("{a} {p} {}\n", w.join(" ")))
                .collect();
            let maps = parse_numa_maps(&text);
            let nodes = per_node(&maps);
            for m in nodes.values() {
                prop_assert!(m.anon >= 0.0 && m.file >= 0.0 && m.huge >= 0.0);
            }
        }
    }
}
