//! One run of the program for a trial, and what it cost: the CPU of its own cgroup (cpu.stat),
//! its faults (the tree's rusage), the machine's THP events over the run (/proc/vmstat, or the
//! cgroup's memory.stat where the memory controller is on), its wall time, its printed rate
//! and work and, for Go, its runtime's own GC CPU fraction.
//!
//! A traced run (every A and B run of a trial) is measured by the split as well, and its CPU,
//! user and kernel time are the split's, the tracer's own cost of its events taken out
//! (`Traced`); a trial judges only the fields named here.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::count::{Cgroup, Spawn};
use crate::verify::gogc::{self, Cycle};
use crate::verify::overhead::{Events, Overhead};

/// The calls that map and return memory, counted on every run.
pub const MEMORY_CALLS: [&str; 4] = ["mmap", "munmap", "madvise", "brk"];

/// The THP events read over a run: the kernel's vmstat names.
pub const THP_EVENTS: [&str; 7] = [
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_split_page",
    "thp_split_pmd",
    "thp_collapse_alloc",
    "thp_deferred_split_page",
    "compact_stall",
];

/// What one run cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMeasure {
    /// The cgroup's cpu.stat usage_usec: the precise CPU total of the run's tree, ns.
    pub cpu_usage_ns: f64,
    /// Its user and system parts (tick-sampled), ns.
    pub user_ns: f64,
    pub system_ns: f64,
    pub wall_ns: f64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// The largest resident set of the tree, bytes.
    pub max_rss: u64,
    /// THP events over the run by vmstat name (see `thp_scope`).
    pub thp: BTreeMap<String, u64>,
    /// Where `thp` was read: "cgroup" (this run's) or "machine" (every process's).
    pub thp_scope: &'static str,
    /// The number `--rate` found in the program's output.
    pub rate: Option<f64>,
    /// The number `--work` found in it: the work the run did.
    pub work: Option<f64>,
    /// A Go program's GC CPU fraction since its start, % (its last gctrace line).
    pub go_gc_cpu_fraction: Option<f64>,
    /// A Go program's GC cycles, as its gctrace printed them.
    pub go_cycles: Vec<Cycle>,
    /// The calls that map and return memory (mmap, munmap, madvise, brk), counted by costlab's
    /// BPF syscall counter on the run's cgroup; empty where it could not attach.
    pub memory_calls: BTreeMap<String, u64>,
    /// How the run's program ended.
    pub exit_status: costlab_core::error::ProgramEnd,
    /// The programs seen running in its cgroup (with `Setup::watch_programs`).
    pub seen: super::program::Seen,
    /// The measured split of a traced run, and what the tracer itself cost in it; where a run
    /// is traced, `cpu_usage_ns`, `user_ns` and `system_ns` are the split's, the tracer's cost
    /// taken out.
    pub traced: Option<Traced>,
}

/// A traced run's split and the tracer's own cost in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traced {
    pub split: crate::measured::Split,
    pub events: Events,
    /// The tracer's cost of those events, ns of kernel time.
    pub tracer_ns: f64,
}

impl Traced {
    /// A kernel class's time (syscall, fault, irq, softirq, kernel-other), with the tracer's
    /// cost of its own events taken out (syscalls', and their lookups, paths, inodes, mmaps
    /// and execs, from syscalls; user faults' from faults;
    /// the switches' from kernel-other, where it is not known which class a switch left; the
    /// tick's from irq, where its timer interrupt is counted).
    pub fn class_ns(&self, class: &str, o: &Overhead) -> f64 {
        let raw = self.split.class_ns(class) as f64;
        let e = self.events;
        let own = match class {
            "syscall" => o.of(&Events {
                faults: 0,
                file_faults: 0,
                switches: 0,
                ..e
            }),
            "fault" => o.of(&Events {
                faults: e.faults,
                file_faults: e.file_faults,
                ..Events::default()
            }),
            "kernel-other" => o.of(&Events {
                switches: e.switches,
                halted: e.halted,
                ..Events::default()
            }),
            "irq" => o.of_time(self.split.usage_ns as f64),
            _ => 0.0,
        };
        raw - own
    }
}

impl RunMeasure {
    pub fn thp_event(&self, name: &str) -> u64 {
        self.thp.get(name).copied().unwrap_or(0)
    }

    pub fn calls(&self, name: &str) -> u64 {
        self.memory_calls.get(name).copied().unwrap_or(0)
    }
}

/// How a run is started: its environment, CPUs and memory policy on top of the program's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    pub env: Vec<(String, String)>,
    /// CPUs to pin the program to (sched_setaffinity before exec); empty: free.
    pub cpus: Vec<usize>,
    /// Interleave its memory over these nodes (a set_mempolicy mask, before exec); 0: local.
    pub interleave: u64,
    /// Ask the Go runtime for its GC trace (both sides of a Go trial ask).
    pub gctrace: bool,
    /// Look at which programs run in the cgroup (the first run only: the looks cost CPU
    /// beside a trial's runs).
    pub watch_programs: bool,
}

/// Run `argv` (resolved to `path`) once under `setup`, in a cgroup of its own, and measure it;
/// with `split`, traced by the measured split, the tracer's cost (`Overhead`) taken out.
pub fn run_once(
    path: &Path,
    argv: &[String],
    setup: &Setup,
    printed: &super::Printed,
    split: Option<&Overhead>,
) -> Result<RunMeasure> {
    let cg = Cgroup::create()?;
    let mut out = crate::count::unnamed_file()?;
    let mut err = crate::count::unnamed_file()?;
    let mut spawn = Spawn::new(path, argv)
        .output_to(
            out.try_clone().context("sharing the run's output file")?,
            err.try_clone().context("sharing the run's error file")?,
        )
        .in_cgroup(&cg.dir)
        .pin(&setup.cpus)
        .interleave(setup.interleave);
    for (k, v) in &setup.env {
        spawn = spawn.env(k, v);
    }
    if setup.gctrace {
        spawn = spawn.gctrace();
    }
    // A traced run counts its syscalls in the split; an untraced one with the counter (both
    // sides of a trial alike).
    let tracer = match split {
        Some(_) => Some(crate::measured::Tracer::attach(crate::bpf::cgroup_id(
            &cg.dir,
        )?)?),
        None => None,
    };
    let counter = match tracer {
        Some(_) => None,
        None => crate::bpf::cgroup_id(&cg.dir)
            .and_then(|id| crate::bpf::SyscallCounter::attach(crate::bpf::Whose::Cgroup(id)))
            .ok(),
    };
    let before = thp_now(&cg.dir);
    let watch = setup
        .watch_programs
        .then(|| super::program::ExecWatch::start(cg.dir.join("cgroup.procs")));
    let ended = spawn.run();
    let seen = watch
        .map(super::program::ExecWatch::finish)
        .unwrap_or_default();
    let ended = ended?;
    let after = thp_now(&cg.dir);
    let split_run = tracer.map(|t| t.finish_counted(&cg.dir)).transpose()?;
    let memory_calls = counter
        .and_then(|c| c.read().ok())
        .map(|ids| {
            let names = crate::count::syscall_names(Path::new("/"));
            crate::count::named(&ids, &names)
                .into_iter()
                .filter(|(k, _)| MEMORY_CALLS.contains(&k.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let memory_calls = match &split_run {
        Some((s, _)) => s
            .lines
            .iter()
            .filter(|l| l.class == "syscall" && MEMORY_CALLS.contains(&l.event.as_str()))
            .map(|l| (l.event.clone(), l.count))
            .collect(),
        None => memory_calls,
    };
    let stat = std::fs::read_to_string(cg.dir.join("cpu.stat")).unwrap_or_default();
    let (usage_ns, user_ns, system_ns) =
        crate::measured::parse_cpu_stat(&stat).unwrap_or((0, 0, 0));
    let out_text = crate::count::read_back(&mut out);
    let err_text = crate::count::read_back(&mut err);
    let output = format!("{out_text}\n{err_text}");
    let (thp, thp_scope) = match (before, after) {
        (Some((b, scope)), Some((a, _))) => (delta(&b, &a), scope),
        _ => (BTreeMap::new(), "none"),
    };
    let switches = ended.switches;
    let traced = split_run.zip(split).map(|((s, counted), o)| {
        let events = Events::of(&s, switches, counted.stats_first);
        Traced {
            tracer_ns: o.of_run(&events, s.usage_ns as f64),
            split: s,
            events,
        }
    });
    // A traced run is judged on the split, the tracer's own cost taken out.
    let (usage_ns, user_ns, system_ns) = match &traced {
        Some(t) => {
            let user = t.split.class_ns("user") as f64;
            let kernel = t.split.kernel_ns() as f64 - t.tracer_ns;
            (user + kernel, user, kernel)
        }
        None => (usage_ns as f64, user_ns as f64, system_ns as f64),
    };
    Ok(RunMeasure {
        cpu_usage_ns: usage_ns,
        user_ns,
        system_ns,
        wall_ns: ended.times.wall_ns,
        minor_faults: ended.minor_faults,
        major_faults: ended.major_faults,
        max_rss: ended.max_rss,
        thp,
        thp_scope,
        rate: printed.rate.as_ref().and_then(|re| rate_in(re, &output)),
        work: printed.work.as_ref().and_then(|re| rate_in(re, &output)),
        go_gc_cpu_fraction: setup
            .gctrace
            .then(|| crate::gowhatif::gctrace_share(&err_text))
            .flatten(),
        go_cycles: if setup.gctrace {
            gogc::cycles(&err_text)
        } else {
            Vec::new()
        },
        memory_calls,
        exit_status: ended.end,
        seen,
        traced,
    })
}

/// The THP events now: the cgroup's memory.stat when it has them, else the machine's vmstat.
fn thp_now(cg: &Path) -> Option<(BTreeMap<String, u64>, &'static str)> {
    if let Ok(text) = std::fs::read_to_string(cg.join("memory.stat")) {
        let m = events_of(&text);
        if m.contains_key("thp_fault_alloc") {
            return Some((m, "cgroup"));
        }
    }
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    Some((events_of(&text), "machine"))
}

/// The THP events of a `name value` text (memory.stat, /proc/vmstat).
pub fn events_of(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            THP_EVENTS
                .contains(&k)
                .then(|| Some((k.to_string(), v.trim().parse().ok()?)))?
        })
        .collect()
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, a)| {
            (
                k.clone(),
                a.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .collect()
}

/// The program's rate (or work): the last match of `re` in its output, its first group if it
/// has one.
pub fn rate_in(re: &regex_lite::Regex, text: &str) -> Option<f64> {
    let c = re.captures_iter(text).last()?;
    let m = c.get(1).or_else(|| c.get(0))?;
    let s = m.as_str().trim();
    s.parse::<f64>().ok().or_else(|| {
        // A number inside the match: its first run of digits, dots and a sign.
        let start = s.find(|ch: char| ch.is_ascii_digit())?;
        let num: String = s[start..]
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == '.')
            .collect();
        num.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_and_thp_events_are_read_by_name() {
        let stat = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        // The one cpu.stat reader, the measured split's.
        let (usage, _, system) = crate::measured::parse_cpu_stat(stat).unwrap();
        assert_eq!(usage, 1_500_000);
        assert_eq!(system, 500_000);
        assert_eq!(crate::measured::parse_cpu_stat("nice_usec 3\n"), None);
        let vm = "nr_free_pages 5\nthp_fault_alloc 31266\nthp_split_page 2\ncompact_stall 0\n";
        let m = events_of(vm);
        assert_eq!(m.len(), 3);
        assert_eq!(m["thp_fault_alloc"], 31266);
        let later = events_of("thp_fault_alloc 31300\nthp_split_page 2\ncompact_stall 1\n");
        let d = delta(&m, &later);
        assert_eq!(d["thp_fault_alloc"], 34);
        assert_eq!(d["thp_split_page"], 0);
        assert_eq!(d["compact_stall"], 1);
    }

    #[test]
    fn the_rate_is_the_last_match_and_its_first_group() {
        let re = regex_lite::Regex::new(r"(\d+(?:\.\d+)?) ops/s").unwrap();
        let out = "warm up\n1200 ops/s\n1350.5 ops/s\ndone\n";
        assert_eq!(rate_in(&re, out), Some(1350.5));
        let whole = regex_lite::Regex::new(r"rate=\S+").unwrap();
        assert_eq!(rate_in(&whole, "rate=42.5\n"), Some(42.5));
        assert_eq!(rate_in(&re, "nothing\n"), None);
    }
}
