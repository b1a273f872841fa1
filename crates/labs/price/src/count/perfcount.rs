//! The rarer software events (minor and major faults, CPU migrations) counted by the kernel's
//! own perf counters: perf_event_open(2) in counting mode, no sampling and no tracer process,
//! so nothing to compile at the start and nothing to wait for at the end (closing a software
//! counter is cheap; a tracepoint's counter is not, which is why the scheduler's tracepoints
//! are counted by BPF programs instead: `bpf::tp`).
//!
//! For a command, every event is opened once per online CPU on the program's cgroup v2
//! (PERF_FLAG_PID_CGROUP: the kernel counts while a task of that cgroup is current on the CPU,
//! which is what `perf stat -a -G` does), and the CPUs' counts are summed.
//!
//! For `--pid`, each event is opened on each thread of the process (any CPU), with `inherit`
//! limited to threads (`inherit_thread`): a thread the process starts later is counted when a
//! counted thread starts it; one started between the listing of /proc/PID/task and the opens
//! is caught by listing again until no new thread shows.
//!
//! An event that fails to open is left out and said in a note; so is a count the kernel had to
//! scale (a counter that did not run all the time it was enabled: counting events on a CPU are
//! never time-shared, so this should not happen).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;

use anyhow::{Context, Result};
use perf_event::events::Software;
use perf_event::{Builder, Counter};

/// Where the counting is narrowed to.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every task in this cgroup v2 directory (the program and all it starts).
    Cgroup(PathBuf),
    /// The threads of one process.
    Pid(u32),
}

/// Events other than syscalls, by (class, event).
pub type Events = BTreeMap<(String, String), u64>;

/// One counted event: its (class, event) key and the software event it opens.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub class: &'static str,
    pub event: &'static str,
    pub source: Software,
}

impl Spec {
    fn name(&self) -> String {
        let sw = match self.source {
            s if s == Software::PAGE_FAULTS_MIN => "minor-faults",
            s if s == Software::PAGE_FAULTS_MAJ => "major-faults",
            s if s == Software::CPU_MIGRATIONS => "cpu-migrations",
            _ => "other",
        };
        format!("software event {sw}")
    }
}

/// The events to count.
pub fn specs() -> Vec<Spec> {
    let sw = |class, event, source| Spec {
        class,
        event,
        source,
    };
    vec![
        sw("fault", "minor", Software::PAGE_FAULTS_MIN),
        sw("fault", "major", Software::PAGE_FAULTS_MAJ),
        sw("migration", "migration", Software::CPU_MIGRATIONS),
    ]
}

/// One value of one counter as read: the count, and the ns it was enabled and running.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    pub count: u64,
    pub enabled: u64,
    pub running: u64,
}

/// The sum of an event's readings (one a CPU or a thread), each scaled by enabled / running
/// where the kernel did not run it all the time it was enabled; and whether any was scaled.
pub fn total(readings: &[Reading]) -> (u64, bool) {
    let mut sum = 0u64;
    let mut scaled = false;
    for r in readings {
        if r.running > 0 && r.running < r.enabled {
            scaled = true;
            sum += (r.count as u128 * r.enabled as u128 / r.running as u128) as u64;
        } else {
            sum += r.count;
        }
    }
    (sum, scaled)
}

/// The thread ids of a process, from /proc/PID/task.
fn threads(pid: u32) -> BTreeSet<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The builder of one event, counting kernel and user alike (as `perf stat` does as root).
fn builder(spec: &Spec) -> Builder<'static> {
    let mut b = Builder::new(spec.source);
    b.include_kernel().exclude_hv(false);
    b
}

/// Every counter of one event that opened: one a CPU (a cgroup) or one a thread (a process).
struct Opened {
    spec: Spec,
    counters: Vec<Counter>,
}

/// The events counted for one run, while open; read and closed by `finish`.
pub struct PerfCounter {
    opened: Vec<Opened>,
    notes: Vec<String>,
}

impl PerfCounter {
    /// Open and enable every event of `specs()` for `filter`. An event that cannot be
    /// opened is left out and said; only a cgroup that cannot be opened, or a CPU list that
    /// cannot be read, is an error.
    pub fn start(filter: &Filter) -> Result<PerfCounter> {
        let mut notes = Vec::new();
        let specs = specs();
        let mut opened = Vec::new();
        match filter {
            Filter::Cgroup(dir) => {
                let cg = File::open(dir)
                    .with_context(|| format!("opening the cgroup {}", dir.display()))?;
                // A cgroup's events are opened on each CPU online now.
                let cpus = costlab_bpf::cpus::online()?;
                raise_fd_limit(specs.len() * cpus.len());
                for spec in specs {
                    let mut b = builder(&spec);
                    b.observe_cgroup(&cg);
                    let counters: std::io::Result<Vec<Counter>> =
                        cpus.iter().map(|&cpu| b.one_cpu(cpu).build()).collect();
                    push(&mut opened, &mut notes, spec, counters);
                }
            }
            Filter::Pid(pid) => {
                let mut tids = threads(*pid);
                raise_fd_limit(specs.len() * tids.len() * 2);
                let mut thread_only = true;
                for spec in specs {
                    let r = open_threads(&spec, &tids, &mut thread_only);
                    push(&mut opened, &mut notes, spec, r);
                }
                // Threads started between the listing and the opens by a thread not yet
                // counted: list again until none is new.
                for _ in 0..10 {
                    let now = threads(*pid);
                    let new: BTreeSet<u32> = now.difference(&tids).copied().collect();
                    if new.is_empty() {
                        break;
                    }
                    for o in &mut opened {
                        if let Ok(mut more) = open_threads(&o.spec, &new, &mut thread_only) {
                            o.counters.append(&mut more);
                        }
                    }
                    tids = now;
                }
                if !thread_only {
                    notes.push("this kernel cannot limit a counter's inheritance to threads (inherit_thread, 5.13 or later): processes the counted one starts while it is counted are counted with it".into());
                }
            }
        }
        for o in &mut opened {
            for c in &mut o.counters {
                c.enable()
                    .with_context(|| format!("enabling the {}", o.spec.name()))?;
            }
        }
        Ok(PerfCounter { opened, notes })
    }

    /// Stop every counter, read it and sum its CPUs (or threads): counts by (class, event),
    /// and the notes of what was not counted or was scaled.
    pub fn finish(mut self) -> (Events, Vec<String>) {
        for o in &mut self.opened {
            for c in &mut o.counters {
                let _ = c.disable();
            }
        }
        let mut events = Events::new();
        for o in &mut self.opened {
            let mut readings = Vec::with_capacity(o.counters.len());
            let mut failed = None;
            for c in &mut o.counters {
                match c.read_full() {
                    Ok(d) => readings.push(Reading {
                        count: d.count(),
                        enabled: d.time_enabled().map_or(0, |t| t.as_nanos() as u64),
                        running: d.time_running().map_or(0, |t| t.as_nanos() as u64),
                    }),
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                self.notes.push(format!(
                    "{} {} not counted: reading the {} failed ({e})",
                    o.spec.class,
                    o.spec.event,
                    o.spec.name()
                ));
                continue;
            }
            let (n, scaled) = total(&readings);
            if scaled {
                self.notes.push(format!(
                    "{} {}: the kernel time-shared its counter; the count is scaled by enabled/running time, as perf stat does",
                    o.spec.class, o.spec.event
                ));
            }
            if n > 0 {
                *events
                    .entry((o.spec.class.to_string(), o.spec.event.to_string()))
                    .or_insert(0) += n;
            }
        }
        (events, self.notes)
    }
}

/// Keep an event whose counters all opened; say why one did not.
fn push(
    opened: &mut Vec<Opened>,
    notes: &mut Vec<String>,
    spec: Spec,
    counters: std::io::Result<Vec<Counter>>,
) {
    match counters {
        Ok(counters) => opened.push(Opened { spec, counters }),
        Err(e) => notes.push(format!(
            "{} {} not counted: the {} could not be opened ({e})",
            spec.class,
            spec.event,
            spec.name()
        )),
    }
}

/// One counter of `spec` on each of `tids`, inherited by the threads they start. Where the
/// kernel lacks inherit_thread, opened inheriting to every child, and `thread_only` is cleared.
fn open_threads(
    spec: &Spec,
    tids: &BTreeSet<u32>,
    thread_only: &mut bool,
) -> std::io::Result<Vec<Counter>> {
    let mut out = Vec::with_capacity(tids.len());
    for &tid in tids {
        let mut b = builder(spec);
        b.observe_pid(tid as i32).any_cpu().inherit(true);
        if *thread_only {
            b.inherit_thread(true);
        }
        let c = match b.build() {
            Err(e) if *thread_only && e.raw_os_error() == Some(libc::EINVAL) => {
                *thread_only = false;
                b.inherit_thread(false);
                b.build()
            }
            r => r,
        };
        match c {
            Ok(c) => out.push(c),
            // A thread that exited since the listing: nothing of it to count.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Room for `fds` more descriptors: the soft limit raised toward the hard one where it is short
/// (a counter per CPU per event adds up on a large machine).
fn raise_fd_limit(fds: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    let want = (fds as libc::rlim_t + 256).min(lim.rlim_max);
    if want > lim.rlim_cur {
        lim.rlim_cur = want;
        // SAFETY: setrlimit reads the struct it is given; a soft limit within the hard one.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_sum_and_a_time_shared_one_is_scaled() {
        let r = |count, enabled, running| Reading {
            count,
            enabled,
            running,
        };
        assert_eq!(total(&[r(10, 5, 5), r(7, 0, 0)]), (17, false));
        assert_eq!(total(&[r(10, 100, 50), r(1, 3, 3)]), (21, true));
        assert_eq!(total(&[]), (0, false));
    }
}
