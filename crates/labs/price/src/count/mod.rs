//! Counting what a program does, in the kernel: every syscall by id, faults, context switches,
//! migrations, thread and process starts, io_uring submissions, for the program and everything
//! it starts, from its exec to its exit (or for a while, for a running PID).
//!
//! Syscalls are counted by costlab's own BPF program on the raw `sys_enter` tracepoint
//! (`bpf`: a per-CPU array indexed by syscall id, at about the cost of one perf counter), the
//! switches, task starts, wake-ups and TLB flushes by one small BPF program on each raw
//! tracepoint (`bpf::tp`: a perf counter on a tracepoint costs RCU grace periods to close), the
//! faults and migrations by the kernel's perf counters in counting mode (`perfcount`: software
//! events, no sampling), each narrowed to a cgroup v2 that the program joins just before it
//! execs. Syscall ids are named from the kernel headers.
//!
//! This module is the counting itself: every counter attached for one run and read at its end,
//! for a command or for a running PID. Its files hold the parts: `syscalls` (names),
//! `perfcount` (the software events), `host` (what the host must have), `cgroup`, `program`
//! (running it) and `fdwatch` (what the fds point at).

pub mod cgroup;
mod fdwatch;
pub mod host;
pub mod perfcount;
pub mod program;
pub mod syscalls;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::bpf::{self, SyscallCounter, Whose};
use costlab_core::error::usage;

pub use cgroup::Cgroup;
pub use fdwatch::{fd_kind, split_by_fd_kind, FdKinds, FdWatch, Procs};
pub use host::{mount_point, tracefs, unavailable, which};
pub use perfcount::{Events, Filter, PerfCounter};
pub use program::{program, read_back, run_program, unnamed_file, Ended, Spawn, Stdio3, Times};
pub use syscalls::{named, parse_unistd, syscall_names, traced_syscalls};

/// Everything counted of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Syscalls by name (an id the headers do not name is `syscall_<id>`).
    pub syscalls: BTreeMap<String, u64>,
    /// Other events by (class, event): ("fault", "minor"), ("switch", "voluntary"), ...
    pub events: BTreeMap<(String, String), u64>,
    pub times: Times,
    /// Bytes read and written through syscalls (/proc/PID/io rchar, wchar of the tree).
    pub rchar: u64,
    pub wchar: u64,
    /// The largest resident set of one of the tree's processes, bytes (0: not known): the
    /// most memory its work between two calls can have touched (`cold`).
    pub max_rss: u64,
    /// The bytes the split's sampled read/write calls returned (one call in `bpf::SAMPLE`),
    /// by the call's name and its fd's kind ("read:pipe", "write:file"; the plain name for
    /// an fd never seen): what shares rchar and wchar out by kind. Empty without the split.
    pub fd_bytes: BTreeMap<String, u64>,
    /// How the program ended: its exit status, or the signal that killed it.
    pub exit_status: costlab_core::error::ProgramEnd,
    pub notes: Vec<String>,
    /// The CPU time split at the kernel's transitions (absent with --count-only or --pid).
    pub measured: Option<crate::measured::Split>,
    /// The tree's kernel and user stacks sampled on cpu-clock (beside the split).
    pub samples: Option<crate::samples::Samples>,
    /// The split's own cost in this run, ns of kernel time (measured beside it).
    pub tracer_ns: Option<f64>,
    /// The same per event, by kind: what each measured line holds of it.
    pub tracer_per_event: Option<crate::measured::TracerCost>,
}

impl Counts {
    /// The events of one class, all kinds together: ("fault", any) for "fault".
    pub fn class_total(&self, class: &str) -> u64 {
        self.events
            .iter()
            .filter(|((c, _), _)| c == class)
            .map(|(_, n)| *n)
            .sum()
    }

    /// The count of one event, 0 where it was not counted.
    pub fn event(&self, class: &str, event: &str) -> u64 {
        self.events
            .get(&(class.to_string(), event.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The anonymous first touches THP would make fewer: the minor faults taken in user mode
    /// and those taken inside syscalls (a read into a fresh buffer), which the split counts
    /// apart.
    pub fn anon_faults(&self) -> u64 {
        self.event("fault", "minor") + self.event("pages", "faulted in syscalls")
    }
}

/// A counter of io_uring submissions where the kernel has the tracepoint, None elsewhere; one
/// that fails to attach is said in `notes`, not dropped in silence.
fn uring_counter(
    tracefs: &Path,
    whose: Whose,
    notes: &mut Vec<String>,
) -> Option<bpf::EventCounter> {
    if !tracefs.join("events/io_uring/io_uring_submit_req").is_dir() {
        return None;
    }
    match bpf::EventCounter::attach(whose, "io_uring_submit_req") {
        Ok(c) => Some(c),
        Err(e) => {
            notes.push(format!("io_uring submissions not counted: {e}"));
            None
        }
    }
}

/// Add the submissions counted (if any) to `events`.
fn add_submissions(events: &mut BTreeMap<(String, String), u64>, c: Option<bpf::EventCounter>) {
    if let Some(n) = c.and_then(|c| c.read().ok()).filter(|n| *n > 0) {
        *events
            .entry(("uring_submit".into(), "submit".into()))
            .or_insert(0) += n;
    }
}

/// Every counter of one run, attached: perf counters for the software events, the BPF
/// tracepoint, syscall and io_uring counters, the watch on the fds.
struct Counting {
    events: PerfCounter,
    tracepoints: bpf::tp::TracepointCounter,
    /// None beside the measured split, whose sys_enter counts the syscalls itself.
    syscalls: Option<SyscallCounter>,
    submissions: Option<bpf::EventCounter>,
    watch: FdWatch,
    notes: Vec<String>,
}

impl Counting {
    /// `count_syscalls`: attach the syscall counter (not beside the measured split).
    fn start(
        tracefs: &Path,
        filter: Filter,
        whose: Whose,
        procs: Procs,
        count_syscalls: bool,
    ) -> Result<Counting> {
        let events = PerfCounter::start(&filter)?;
        let mut notes = Vec::new();
        Ok(Counting {
            events,
            tracepoints: bpf::tp::TracepointCounter::attach(tracefs, whose, &mut notes)?,
            syscalls: if count_syscalls {
                Some(SyscallCounter::attach(whose)?)
            } else {
                None
            },
            submissions: uring_counter(tracefs, whose, &mut notes),
            watch: FdWatch::start(procs),
            notes,
        })
    }

    /// Stop and read everything: syscalls by name (the read/write family split by fd kind),
    /// other events by (class, event); the notes of what could not be counted go to `notes`.
    /// `split`: the counts the measured split kept, where it ran instead of the counter.
    fn finish(
        self,
        notes: &mut Vec<String>,
        split: Option<crate::measured::Counted>,
    ) -> Result<Finished> {
        notes.extend(self.notes.iter().cloned());
        let kinds = self.watch.stop();
        match kinds.shared() {
            0 => {}
            n => notes.push(format!(
                "{n} fd number(s) were open as different kinds in processes whose pids share their low bits (one by-fd slot): their reads and writes are priced at the call's plain term, not by fd kind"
            )),
        }
        let kinds_of_faults = split.as_ref().map(|s| (s.fault_file, s.fault_cow));
        let pages = split.as_ref().and_then(|s| s.pages);
        let ipis_sent = split.as_ref().map_or(0, |s| s.ipis_sent);
        let halted_in = split.as_ref().map_or(0, |s| s.halted_in);
        let ipis_in_faults = split.as_ref().map_or(0, |s| s.ipis_in_faults);
        let exit_pages = split
            .as_ref()
            .map_or((0, 0), |s| (s.exit_anon_pages, s.exit_file_pages));
        let fork_pages = split.as_ref().map_or(0, |s| s.fork_pages);
        let vmas = split
            .as_ref()
            .map_or((0, 0), |s| (s.exit_vmas, s.fork_vmas));
        let exec = split
            .as_ref()
            .map_or((0, 0), |s| (s.exec_pages, s.exec_vmas));
        let munmap = split.as_ref().map_or((0, 0, 0), |s| {
            (s.munmap_pages.0, s.munmap_pages.1, s.munmap_vmas)
        });
        let fault_around = split.as_ref().map_or(0, |s| s.fault_file_pages);
        let components = split.as_ref().map_or(0, |s| s.path_components);
        let stats_first = split.as_ref().map_or(0, |s| s.stats_first);
        let faults_first = split.as_ref().map_or(0, |s| s.fault_file_first);
        let stats_by_fd = split.as_ref().map_or(0, |s| s.stats_by_fd);
        let mmap_files = split.as_ref().map_or(0, |s| s.mmap_files);
        let fd_bytes = split
            .as_ref()
            .map(|s| s.fd_bytes.clone())
            .unwrap_or_default();
        let (ids, by_fd, creates, dirent_bytes, exec_failed) = match (&self.syscalls, split) {
            (Some(c), _) => (c.read()?, c.read_by_fd()?, 0, 0, 0),
            (None, Some(s)) => (s.ids, s.by_fd, s.creates, s.dirent_bytes, s.exec_failed),
            (None, None) => bail!("no syscall counts: neither the counter nor the split ran"),
        };
        if let Some(c) = self.syscalls {
            detach_off_path(c);
        }
        let (mut events, not_counted) = self.events.finish();
        notes.extend(not_counted);
        events.extend(self.tracepoints.read(notes));
        drop(self.tracepoints);
        add_submissions(&mut events, self.submissions);
        if dirent_bytes > 0 {
            events.insert(("bytes".into(), "dirents".into()), dirent_bytes);
        }
        if stats_first > 0 {
            events.insert(("stats".into(), "first touches".into()), stats_first);
        }
        if components > 0 {
            events.insert(("path".into(), "components".into()), components);
        }
        if let Some((file, cow)) = kinds_of_faults {
            split_faults(&mut events, file, cow);
        }
        if let Some(p) = pages {
            page_events(&mut events, &p);
        }
        if ipis_sent > 0 {
            events.insert(("ipi".into(), "sent".into()), ipis_sent);
        }
        if halted_in > 0 {
            events.insert(("wakeup".into(), "on a halted cpu".into()), halted_in);
        }
        if ipis_in_faults > 0 {
            events.insert(("ipi".into(), "in a fault".into()), ipis_in_faults);
        }
        if fault_around > 0 {
            events.insert(
                ("pages".into(), "mapped by file faults".into()),
                fault_around,
            );
        }
        if faults_first > 0 {
            events.insert(("file faults".into(), "first touches".into()), faults_first);
        }
        for (event, pages) in [
            ("unmapped", exit_pages.0),
            ("unmapped:file", exit_pages.1),
            ("copied at fork", fork_pages),
            ("unmapped at exec", exec.0),
            ("unmapped by munmap:file", munmap.0),
            ("unmapped by munmap", munmap.1),
        ] {
            if pages > 0 {
                events.insert(("bytes".into(), event.into()), pages * 4096);
            }
        }
        for (event, n) in [
            ("unmapped at exit", vmas.0),
            ("copied at fork", vmas.1),
            ("unmapped at exec", exec.1),
            ("unmapped by munmap", munmap.2),
        ] {
            if n > 0 {
                events.insert(("vmas".into(), event.into()), n);
            }
        }
        let names = syscall_names(Path::new("/"));
        let mut syscalls = named(&ids, &names);
        split_by_fd_kind(&mut syscalls, &by_fd, &kinds, &names);
        split_off(&mut syscalls, "openat", "openat:create", creates);
        split_off(&mut syscalls, "newfstatat", "newfstatat:fd", stats_by_fd);
        split_off(&mut syscalls, "mmap", "mmap:file", mmap_files);
        split_off(&mut syscalls, "execve", "execve:failed", exec_failed);
        let fd_bytes = fdwatch::by_fd_kind(&fd_bytes, &kinds, &names);
        Ok((syscalls, events, fd_bytes))
    }
}

/// What `Counting::finish` read: syscalls by name, other events, and the sampled calls'
/// bytes by name and fd kind (`Counts::fd_bytes`).
type Finished = (BTreeMap<String, u64>, Events, BTreeMap<String, u64>);

/// The page faults the split counted inside syscalls, as an event of their own, taken out of
/// the minor faults (the counter's minor faults hold them: it counts a fault in kernel mode
/// as one in user mode).
pub fn kernel_fault_events(events: &mut Events, split: Option<&crate::measured::Split>) {
    let n: u64 = split.map_or(0, |s| s.lines.iter().map(|l| l.kernel_faults).sum());
    if n == 0 {
        return;
    }
    events.insert(("pages".into(), "faulted in syscalls".into()), n);
    if let Some(minor) = events.get_mut(&("fault".to_string(), "minor".to_string())) {
        *minor = minor.saturating_sub(n);
    }
}

/// Take the minor faults the split told apart (a page-cache page mapped, a page copied on
/// write) out of the counter's minor faults into `minor:file` and `minor:cow`, priced at
/// their own terms; the rest stay `minor`, anonymous pages.
pub fn split_faults(events: &mut Events, file: u64, cow: u64) {
    let key = |e: &str| ("fault".to_string(), e.to_string());
    let Some(all) = events.get(&key("minor")).copied() else {
        return;
    };
    let file = file.min(all);
    let cow = cow.min(all - file);
    for (e, n) in [("minor:file", file), ("minor:cow", cow)] {
        if n > 0 {
            events.insert(key(e), n);
        }
    }
    events.insert(key("minor"), all - file - cow);
}

/// The page cache as the split counted it, as events: pages read in (cold reads), read
/// from small files, made by writes, faulted in; folios dropped; bytes written back by the program itself. A zero is left out.
pub fn page_events(events: &mut Events, p: &crate::measured::PageCounts) {
    for (class, event, n) in [
        ("pages", "read in", p.read),
        ("pages", "read from small files", p.small),
        ("pages", "made by writes", p.write),
        ("pages", "faulted in", p.other),
        ("folios", "dropped", p.dropped),
        ("bytes", "written back", p.writeback_bytes),
    ] {
        if n > 0 {
            events.insert((class.into(), event.into()), n);
        }
    }
}

/// Take `n` of `name`'s calls that the split told apart (openat's with O_CREAT, execve's that
/// failed) out of its count into `part` (`openat:create`, `execve:failed`), priced apart.
pub fn split_off(syscalls: &mut BTreeMap<String, u64>, name: &str, part: &str, n: u64) {
    if n == 0 {
        return;
    }
    let Some(all) = syscalls.get_mut(name) else {
        return;
    };
    let c = n.min(*all);
    *all -= c;
    if *all == 0 {
        syscalls.remove(name);
    }
    syscalls.insert(part.into(), c);
}

/// Detach the syscall counter (its counts already read) in a thread of its own: releasing the
/// last program on sys_enter takes 15-20 ms here (the kernel's tracepoint unregistration),
/// which the unit costs' lookup overlaps. The calibration's own attach waits for it (the
/// kernel's tracepoints_mutex), and the process's exit for what is left of it.
fn detach_off_path(counter: SyscallCounter) {
    // A thread that cannot start: the closure is dropped here, detaching as a drop would.
    let _ = std::thread::Builder::new()
        .name("costlab-detach".into())
        .spawn(move || drop(counter));
}

/// Count `argv` from its exec to its exit; with `period` (one syscall in that many timed),
/// measure where its CPU time went too, its user class shared by a tick each `tick_ns`.
pub fn count_command(argv: &[String], period: Option<u32>, tick_ns: u64) -> Result<Counts> {
    let split = period.is_some();
    let path = program(argv)?;
    if let Some(why) = unavailable() {
        bail!(usage(why));
    }
    let (tracefs, _mounted) = tracefs()?;
    let cg = Cgroup::create()?;
    let mut notes = Vec::new();
    // perf starts first and sets itself up while the counters attach. COSTLAB_PRICE_SAMPLES=0
    // leaves sampling out (bench/price-overhead.sh parts the split's cost from perf's).
    let sample = split && std::env::var("COSTLAB_PRICE_SAMPLES").map_or(true, |v| v != "0");
    if split && !sample {
        notes.push("no samples: COSTLAB_PRICE_SAMPLES=0".into());
    }
    let sampler = if sample {
        match cg.rel().map(|r| crate::samples::Sampler::spawn(&r)) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                notes.push(format!("no samples: {e}"));
                None
            }
            None => {
                notes.push("no samples: the cgroup is not under the cgroup v2 mount".into());
                None
            }
        }
    } else {
        None
    };
    let tracer = if split {
        Some(crate::measured::Tracer::attach_to(
            crate::measured::prog::Who::Cgroup(bpf::cgroup_id(&cg.dir)?),
            period.unwrap_or(1),
            tick_ns,
        )?)
    } else {
        None
    };
    let counting = Counting::start(
        &tracefs,
        Filter::Cgroup(cg.dir.clone()),
        Whose::Cgroup(bpf::cgroup_id(&cg.dir)?),
        Procs::Cgroup(cg.dir.clone()),
        tracer.is_none(),
    )?;
    let sampler = match sampler.map(|s| s.ready()) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            notes.push(format!("no samples: {e}"));
            None
        }
        None => None,
    };
    let run = Spawn::new(&path, argv)
        .stdio(Stdio3::Inherit)
        .and_then(|s| s.in_cgroup(&cg.dir).run());
    let (measured, counted) = tracer
        .map(|t| t.finish_counted(&cg.dir))
        .transpose()?
        .unzip();
    let samples = match sampler.map(|s| s.finish()) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            notes.push(format!("no samples: {e}"));
            None
        }
        None => None,
    };
    notes.insert(0,
        "counted from the program's execve (itself counted: the cgroup is joined just before it) to its exit, with every thread and child it started".to_string(),
    );
    let (syscalls, mut events, fd_bytes) = counting.finish(&mut notes, counted)?;
    kernel_fault_events(&mut events, measured.as_ref());
    let ended = run?;
    let (times, exit_status, rchar, wchar) = (ended.times, ended.end, ended.rchar, ended.wchar);
    let left = std::fs::read_to_string(cg.dir.join("cgroup.procs")).unwrap_or_default();
    let left = left.lines().count();
    if left > 0 {
        notes.push(format!(
            "{left} processes the program started still ran when it exited: counted until then"
        ));
    }
    Ok(Counts {
        syscalls,
        events,
        times,
        rchar,
        wchar,
        max_rss: ended.max_rss,
        fd_bytes,
        exit_status,
        notes,
        measured,
        samples,
        tracer_ns: None,
        tracer_per_event: None,
    })
}

/// Count a running process's threads for `duration`; with `split` (one syscall in that many
/// timed), measure where their CPU time went too.
pub fn count_pid(pid: u32, duration: Duration, period: Option<u32>) -> Result<Counts> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!(usage(format!(
            "no process {pid}: give the PID of a running process"
        )));
    }
    if let Some(why) = unavailable() {
        bail!(usage(why));
    }
    let (tracefs, _mounted) = tracefs()?;
    let tracer = period
        .map(|p| {
            let who = crate::measured::prog::Who::Process(pid);
            crate::measured::Tracer::attach_to(who, p, crate::measured::prog::USER_TICK_PERIOD_NS)
        })
        .transpose()?;
    let cpu_before = crate::measured::ProcessCpu::read(pid).unwrap_or_default();
    let counting = Counting::start(
        &tracefs,
        Filter::Pid(pid),
        Whose::Process(pid),
        Procs::One(pid),
        tracer.is_none(),
    )?;
    let before = proc_times(pid);
    let t0 = Instant::now();
    let mut gone = false;
    while t0.elapsed() < duration {
        if costlab_core::measure::cancel::requested() {
            break;
        }
        if costlab_core::machine::restore::journal::start_time(pid).is_none() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = proc_times(pid);
    let wall = t0.elapsed();
    let mut notes = Vec::new();
    let (measured, counted) = tracer
        .map(|t| t.finish_process(pid, &cpu_before))
        .transpose()?
        .unzip();
    let (syscalls, mut events, fd_bytes) = counting.finish(&mut notes, counted)?;
    kernel_fault_events(&mut events, measured.as_ref());
    notes.insert(
        0,
        format!(
            "counted the threads of process {pid} for {:.1} s (its children are not counted)",
            wall.as_secs_f64()
        ),
    );
    if gone {
        notes.push(format!(
            "process {pid} exited during counting: counted until then"
        ));
    }
    let (u0, s0) = before.unwrap_or_default();
    let (u1, s1) = after.unwrap_or((u0, s0));
    Ok(Counts {
        syscalls,
        events,
        times: Times {
            user_ns: u1 - u0,
            sys_ns: s1 - s0,
            wall_ns: wall.as_nanos() as f64,
        },
        rchar: 0,
        wchar: 0,
        max_rss: 0,
        fd_bytes,
        exit_status: Default::default(),
        notes,
        tracer_ns: None,
        tracer_per_event: None,
        measured,
        samples: None,
    })
}

/// (user, system) CPU ns of a process so far, from /proc/PID/stat.
fn proc_times(pid: u32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3; utime and stime are fields 14 and 15.
    let hz = costlab_core::measure::procstat::ticks_per_second().max(1) as f64;
    let tick = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .map(|t| t / hz * 1e9)
    };
    Some((tick(11)?, tick(12)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_leave_openat_for_a_line_of_their_own() {
        let mut s: BTreeMap<String, u64> = [("openat".into(), 10), ("read".into(), 3)].into();
        split_off(&mut s, "openat", "openat:create", 4);
        assert_eq!(s["openat"], 6);
        assert_eq!(s["openat:create"], 4);
        // Every open a create: openat's line goes; never more creates than opens.
        let mut s: BTreeMap<String, u64> = [("openat".into(), 2)].into();
        split_off(&mut s, "openat", "openat:create", 5);
        assert_eq!(s.get("openat"), None);
        assert_eq!(s["openat:create"], 2);
        let mut s: BTreeMap<String, u64> = [("read".into(), 2)].into();
        split_off(&mut s, "openat", "openat:create", 0);
        split_off(&mut s, "openat", "openat:create", 3);
        assert_eq!(s, [("read".to_string(), 2)].into());
        assert_eq!(
            crate::pricing::syscall_pricing("openat:create").map(|p| p.unit),
            Some("create")
        );
        let mut s: BTreeMap<String, u64> = [("execve".into(), 5)].into();
        split_off(&mut s, "execve", "execve:failed", 3);
        assert_eq!((s["execve"], s["execve:failed"]), (2, 3));
        assert_eq!(
            crate::pricing::syscall_pricing("execve:failed").map(|p| p.unit),
            Some("stat")
        );
    }
}
