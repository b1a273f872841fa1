//! What the measured split adds to a traced run, per event, measured here now, so a trial
//! judged on the split's classes can take it out.
//!
//! The split's cost is per event: two programs a syscall, two a user fault, one a switch, one
//! a page-cache lookup (the small files' count, on every cached read). A
//! remedy that changes how many events a program makes changes the tracer's cost with it: THP
//! divides the faults by 512, so a traced THP run would look cheaper by the tracer's own cost
//! of the faults it no longer takes. So before the trials, small loops run in a cgroup of
//! their own, traced and untraced, interleaved: getppid (syscalls), mappings of a cached page
//! (mmaps), first reads of 4 KiB anonymous pages (user faults), a pipe ping-pong of two processes on
//! two CPUs where there are two (switches: each wait leaves its CPU to the idle task, out of
//! the cgroup and back, as a program's waits on another CPU do; the waits that came back on a
//! halted CPU are these), the same ping-pong on one CPU (local switches: each wait hands the
//! CPU to the other process, inside the cgroup, as tar and gzip do on one CPU), one-byte preads of a cached file (lookups),
//! stats of one file again and again (a path read, and the result's inode found in the run's
//! set of inodes), stats of 20000 files once each (each inode put in that set) and children
//! forked on one CPU that each exec `true` (a fork and exec, beyond the loader's calls and
//! faults, counted as the events they are). Each
//! event's cost is the traced loop's CPU (cpu.stat, exact) less the untraced one's, per event,
//! less the other events' costs found before it.
//!
//! Where the traced run had the sampler beside the split (`perf record -a -g -G`), the traced
//! loops have its events too (`costlab_bpf::perf::cgroup_sampler`: the same cpu-clock events
//! on the loop's cgroup, without a buffer), so its cost is measured with the split's: each
//! switch into or out of the cgroup stops and starts perf's events (a blocking pipe read cost
//! 15 us a call under both here, 5 us under the split alone), each sample interrupts and
//! walks the stacks (the tick's share of the CPU).
//!
//! The tracer's programs run in kernel mode, so their whole cost is taken from the kernel
//! time. (Part of it runs before a transition's clock read and the split first charges it to
//! the class being left, user for a syscall's entry; the cpu-clock ticks that find a task in
//! the kernel while its class is user move that share back to kernel-other, so over a run the
//! split's kernel time holds it. Over the loops' few ms the ticks are too few to part it
//! finer, so it is not parted.)
//!
//! The loops run in a forked child that makes only raw syscalls and plain stores (no
//! allocation: costlab has threads, and a forked child of a threaded process may touch no lock).

use std::os::fd::AsRawFd;

use anyhow::{bail, Context, Result};

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use super::loops::{cached_file, cached_page, child_loop, true_program, Kind, INODES};
use crate::count::Cgroup;
use crate::measured::{parse_cpu_stat, Split, Tracer};

/// The tracer's cost per syscall, user fault and switch, ns of kernel time each; and its cost
/// per ns of CPU (its cpu-clock tick, which finds the kernel's share of user time: a timer
/// interrupt on each CPU however few events a program makes), as a fraction of untraced CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overhead {
    pub syscall: f64,
    pub fault: f64,
    /// A switch to the idle task and back, its CPU halted meanwhile: the wait left the
    /// program's cgroup (with the sampler, perf's events stop and start again).
    pub switch: f64,
    /// A switch that stays inside the program's cgroup (to another of its tasks on the same
    /// CPU, or back from a CPU that only polled): the tracer's programs on the switch and the
    /// wake-up, no cgroup crossed. Here about a tenth of `switch` with the sampler.
    pub switch_local: f64,
    /// A page-cache lookup of a cached read.
    pub lookup: f64,
    /// A stat family call's path read and its components counted, and where it succeeds, its
    /// result's inode number read and looked up in the run's set of inodes found.
    pub path: f64,
    /// A stat's first touch of an inode: its insert into the run's set (`prog::paths`).
    pub inode: f64,
    /// An mmap beyond its syscall's cost: with the sampler, the side-band record `perf
    /// record` asks every mapping for (its file's path among it).
    pub mmap: f64,
    /// A user fault the page cache served, beyond `fault`: the split's programs on the page
    /// cache's fault tracepoints, and its look into the run's set of windows.
    pub file_fault: f64,
    /// A child forked that execs, beyond its counted events (the fork's, the exec's and the
    /// exit's programs, and what they leave to the new program).
    pub exec: f64,
    pub per_cpu: f64,
    /// Measured with the sampler's events beside the split.
    pub sampler: bool,
}

/// The events of one traced run that the tracer pays for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Events {
    pub syscalls: u64,
    /// User faults (the split's fault lines): faults taken inside syscalls run one short
    /// program and are not counted here.
    pub faults: u64,
    /// Voluntary and involuntary switches of the tree (rusage).
    pub switches: u64,
    /// Of them, the waits its tasks came back from on a CPU that had halted (the split's
    /// `halted_in`): each left the cgroup for the idle task. The rest are priced at
    /// `switch_local`.
    pub halted: u64,
    /// Page-cache lookups of cached reads (inside syscalls: on their lines).
    pub lookups: u64,
    /// Stat family calls, whose paths the split reads.
    pub paths: u64,
    /// mmap calls (each also one of `syscalls`).
    pub mmaps: u64,
    /// Stats by path that found an inode first (each also one of `paths`).
    pub inodes: u64,
    /// User faults the page cache served (each also one of `faults`).
    pub file_faults: u64,
    /// Execs that succeeded (`pricing::EXECS`; each also one of `syscalls`).
    pub execs: u64,
}

impl Events {
    /// The events the split counted, with the tree's switches and the inodes its stats found
    /// first (`Counted::stats_first`).
    pub fn of(split: &Split, switches: u64, inodes: u64) -> Events {
        let sum = |class: &str| -> u64 {
            split
                .lines
                .iter()
                .filter(|l| l.class == class)
                .map(|l| l.count)
                .sum()
        };
        Events {
            syscalls: sum("syscall"),
            faults: split
                .lines
                .iter()
                .filter(|l| l.class == "fault" && l.event != "unfinished")
                .map(|l| l.count)
                .sum(),
            switches,
            halted: split.lines.iter().map(|l| l.halted_in).sum(),
            lookups: split.lines.iter().map(|l| l.lookups).sum(),
            paths: split.calls(&crate::pricing::STATS),
            mmaps: split.calls(&crate::pricing::MMAPS),
            inodes,
            file_faults: split.line("fault", "minor:file").map_or(0, |l| l.count),
            execs: split.calls(&crate::pricing::EXECS),
        }
    }
}

impl Overhead {
    /// The tracer's cost of `e`, ns of kernel time.
    pub fn of(&self, e: &Events) -> f64 {
        let halted = e.halted.min(e.switches);
        e.syscalls as f64 * self.syscall
            + e.faults as f64 * self.fault
            + halted as f64 * self.switch
            + (e.switches - halted) as f64 * self.switch_local
            + e.lookups as f64 * self.lookup
            + e.paths as f64 * self.path
            + e.mmaps as f64 * self.mmap
            + e.inodes as f64 * self.inode
            + e.file_faults as f64 * self.file_fault
            + e.execs as f64 * self.exec
    }

    /// The tracer's cost of its tick over a traced run of `usage_ns` CPU (which holds it).
    pub fn of_time(&self, usage_ns: f64) -> f64 {
        usage_ns * self.per_cpu / (1.0 + self.per_cpu)
    }

    /// The tracer's whole cost in a traced run: its events and its tick.
    pub fn of_run(&self, e: &Events, usage_ns: f64) -> f64 {
        self.of(e) + self.of_time(usage_ns)
    }

    /// One line for the output.
    pub fn line(&self) -> String {
        format!(
            "the {}own cost, taken out of every traced run's kernel time: {} a syscall, {} a user fault ({} more one the page cache served), {} a switch to a halted CPU's idle task and back ({} one inside the program's cgroup), {} a page-cache lookup, {} a stat's path read, {} a stat's first touch of an inode, {} an mmap, {} a fork and exec, and {} {:.2}% of the CPU",
            if self.sampler {
                "split's and the sampler's "
            } else {
                "split's "
            },
            human_ns(self.syscall),
            human_ns(self.fault),
            human_ns(self.file_fault),
            human_ns(self.switch),
            human_ns(self.switch_local),
            human_ns(self.lookup),
            human_ns(self.path),
            human_ns(self.inode),
            human_ns(self.mmap),
            human_ns(self.exec),
            if self.sampler {
                "their ticks and samples (in the loops)"
            } else {
                "its tick"
            },
            100.0 * self.per_cpu
        )
    }

    /// Measure it: each loop untraced then traced, `rounds` times, the medians; with each
    /// round's figure of each event, by `EVENTS`' names (a loop that made none of its events,
    /// the lookups on a tmpfs, has none: counted as free). `sampler`: with the sampler's perf
    /// events on the traced loops.
    pub fn measure(rounds: usize, sampler: bool) -> Result<(Overhead, Rounds)> {
        let rounds = rounds.max(1);
        let mut all = Rounds::default();
        let mut o = Overhead {
            sampler,
            ..Overhead::default()
        };
        // First the ticks' share of a loop that makes no events: the time the split measured
        // on the local timer's line of the traced loop, over the rest of its CPU. (The
        // difference of a traced and an untraced run read 0-17% from price to price here,
        // two runs' noise where the ticks cost ~1%; the line's time is measured, and holds
        // the kernel's own tick too: ~0.2% high.) Then each event's cost, the traced loop's
        // own timer interrupts taken out the same way.
        let files = Distinct::create()?;
        let mut share = Vec::new();
        // Every loop once a round, the rounds one after the other, so that each event's
        // rounds are spread over the whole calibration: a slow stretch of the host moves one
        // or two of them, not all (a fault's rounds read 621, 707, 846, 804, 766, 287 and 212
        // ns in a row here when each loop ran its rounds back to back: a median of 707 where
        // the other calibrations of the day gave 279-367). Each event's figure is computed
        // after all of them, in `KINDS`' order, the costs of those before it known.
        let mut runs: Vec<Vec<(LoopRun, LoopRun)>> = KINDS.iter().map(|_| Vec::new()).collect();
        let mut free = [false; KINDS.len()];
        for round in 0..rounds {
            costlab_core::measure::cancel::check()?;
            let traced = run_loop(Kind::Spin, Some(sampler), &files)?;
            let rest = traced.usage_ns - traced.timer_ns;
            if rest > 0.0 {
                share.push(traced.timer_ns / rest);
            }
            for (i, &kind) in KINDS.iter().enumerate() {
                if free[i] {
                    continue;
                }
                costlab_core::measure::cancel::check()?;
                // The order alternates: a loop that runs second finds what the first left
                // warm (its program's pages, the allocator's free lists), and each side
                // runs second in half the rounds.
                let (plain, traced) = if round % 2 == 0 {
                    let plain = run_loop(kind, None, &files)?;
                    (plain, run_loop(kind, Some(sampler), &files)?)
                } else {
                    let traced = run_loop(kind, Some(sampler), &files)?;
                    (run_loop(kind, None, &files)?, traced)
                };
                if kind == Kind::Lookups && kind.events(&traced, &o).0 == 0.0 {
                    // A temp folder whose reads the page cache does not serve by lookups (a
                    // tmpfs): the programs' lookups are not measured here; counted as free.
                    free[i] = true;
                    continue;
                }
                runs[i].push((plain, traced));
            }
        }
        o.per_cpu = Summary::of(&share).map_or(0.0, |s| s.median);
        all.push(("tick", share));
        for (i, &kind) in KINDS.iter().enumerate() {
            let mut per = Vec::new();
            for (plain, traced) in &runs[i] {
                let (n, others) = kind.events(traced, &o);
                if n == 0.0 {
                    bail!("the {} loop made none of its events", kind.word());
                }
                let extra = traced.usage_ns - plain.usage_ns - others - traced.timer_ns;
                per.push((extra / n).max(0.0));
            }
            let c = Summary::of(&per).map_or(0.0, |s| s.median);
            all.push((kind.event(), per));
            match kind {
                Kind::Syscalls => o.syscall = c,
                Kind::Faults => o.fault = c,
                Kind::Switches => o.switch = c,
                Kind::LocalSwitches => o.switch_local = c,
                Kind::Lookups => o.lookup = c,
                Kind::Paths => o.path = c,
                Kind::Mmaps => o.mmap = c,
                Kind::Inodes => o.inode = c,
                Kind::FileFaults => o.file_fault = c,
                Kind::Execs => o.exec = c,
                Kind::Spin => {}
            }
        }
        Ok((o, all))
    }

    /// Set the figure of one of `EVENTS`; false for another name.
    pub fn set(&mut self, event: &str, v: f64) -> bool {
        let slot = match event {
            "syscall" => &mut self.syscall,
            "fault" => &mut self.fault,
            "switch" => &mut self.switch,
            "switch_local" => &mut self.switch_local,
            "lookup" => &mut self.lookup,
            "path" => &mut self.path,
            "mmap" => &mut self.mmap,
            "inode" => &mut self.inode,
            "file_fault" => &mut self.file_fault,
            "exec" => &mut self.exec,
            "tick" => &mut self.per_cpu,
            _ => return false,
        };
        *slot = v;
        true
    }
}

/// What the tracer pays for, by name: its cost per event of each, and "tick", its timer's
/// share of the CPU (a fraction of the untraced CPU, not ns).
pub const EVENTS: [&str; 11] = [
    "syscall",
    "fault",
    "file_fault",
    "switch",
    "switch_local",
    "lookup",
    "path",
    "mmap",
    "inode",
    "exec",
    "tick",
];

/// The loops of the events, in the order their figures are computed: each loop's other events
/// are priced at the figures before it (the switches' non-halted waits at the local loop's).
const KINDS: [Kind; 10] = [
    Kind::Syscalls,
    Kind::Mmaps,
    Kind::Faults,
    Kind::FileFaults,
    Kind::LocalSwitches,
    Kind::Switches,
    Kind::Lookups,
    Kind::Paths,
    Kind::Inodes,
    Kind::Execs,
];

/// Each round's figure of each event measured, by name.
pub type Rounds = Vec<(&'static str, Vec<f64>)>;

impl Kind {
    /// How many of its own events a traced loop made, and the tracer's cost of the others
    /// (priced at the costs found so far).
    fn events(self, run: &LoopRun, so_far: &Overhead) -> (f64, f64) {
        let e = run.events;
        let (n, rest) = match self {
            Kind::Spin => (0, e),
            Kind::Syscalls => (e.syscalls, Events { syscalls: 0, ..e }),
            Kind::Faults => (e.faults, Events { faults: 0, ..e }),
            // The waits back on a halted CPU, the others at the local loop's cost (measured
            // first); where none halted (one CPU, or an idle loop that polls), every switch.
            Kind::Switches if e.halted > 0 => {
                let halted = e.halted.min(e.switches);
                (
                    halted,
                    Events {
                        switches: e.switches - halted,
                        halted: 0,
                        ..e
                    },
                )
            }
            Kind::Switches => (
                e.switches,
                Events {
                    switches: 0,
                    halted: 0,
                    ..e
                },
            ),
            // One CPU: its waits switch to the other process; any that halted are left out.
            Kind::LocalSwitches => {
                let halted = e.halted.min(e.switches);
                (
                    e.switches - halted,
                    Events {
                        switches: halted,
                        ..e
                    },
                )
            }
            Kind::Lookups => (e.lookups, Events { lookups: 0, ..e }),
            Kind::Paths => (e.paths, Events { paths: 0, ..e }),
            Kind::Mmaps => (e.mmaps, Events { mmaps: 0, ..e }),
            Kind::Inodes => (e.inodes, Events { inodes: 0, ..e }),
            Kind::FileFaults => (
                e.file_faults,
                Events {
                    file_faults: 0,
                    ..e
                },
            ),
            // Its switches, each between a parent and its child on one CPU, stay inside the
            // loop's cgroup: at the local switch's cost, as a program's are.
            Kind::Execs => (
                e.execs,
                Events {
                    execs: 0,
                    halted: 0,
                    ..e
                },
            ),
        };
        (n as f64, so_far.of(&rest))
    }
}

/// One loop's run: its cgroup's CPU and its events.
#[derive(Debug, Clone, Copy, Default)]
struct LoopRun {
    usage_ns: f64,
    events: Events,
    /// Traced: the time the split measured on the local timer's line (the tracers' ticks and
    /// the kernel's own), ns; 0 untraced.
    timer_ns: f64,
}

/// The path and inode loops' files: a folder in the temp folder of `INODES` empty files, by
/// their whole paths (a stat of each walks the temp folder's components and its own two, one
/// more than the stat term's path), removed with it.
struct Distinct {
    dir: std::path::PathBuf,
    paths: Vec<std::ffi::CString>,
}

impl Distinct {
    fn create() -> Result<Distinct> {
        let dir = std::env::temp_dir().join(format!("costlab-inodes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Owned from here: removed on the way out, whatever fails below.
        let mut d = Distinct {
            dir,
            paths: Vec::with_capacity(INODES),
        };
        for i in 0..INODES {
            let p = d.dir.join(format!("{i:05}"));
            std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?;
            d.paths.push(
                std::ffi::CString::new(p.into_os_string().into_encoded_bytes())
                    .context("the temp folder's path holds a NUL")?,
            );
        }
        Ok(d)
    }
}

impl Drop for Distinct {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Run one loop in a cgroup of its own, untraced (`traced` None) or traced by the split,
/// with the sampler's events beside it (`Some(true)`) or not.
fn run_loop(kind: Kind, traced: Option<bool>, files: &Distinct) -> Result<LoopRun> {
    let cg = Cgroup::create()?;
    let tracer = match traced {
        Some(_) => Some(Tracer::attach(crate::bpf::cgroup_id(&cg.dir)?)?),
        None => None,
    };
    let _sampler = match traced {
        Some(true) => {
            let dir = std::fs::File::open(&cg.dir)
                .with_context(|| format!("opening {}", cg.dir.display()))?;
            Some(
                costlab_bpf::perf::cgroup_sampler(&dir, crate::samples::HZ)
                    .context("opening the sampler's cpu-clock events on the loops' cgroup")?,
            )
        }
        _ => None,
    };
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(cg.dir.join("cgroup.procs"))
        .with_context(|| format!("opening {}/cgroup.procs", cg.dir.display()))?;
    let fd = procs.as_raw_fd();
    // The CPUs of the switch loop's two processes: the one this thread runs on now, and
    // another online one where there is one.
    // SAFETY: sched_getcpu takes nothing and returns a CPU number or -1.
    let here = unsafe { libc::sched_getcpu() }.max(0) as usize;
    let there = costlab_bpf::cpus::online()
        .ok()
        .and_then(|cpus| cpus.into_iter().find(|c| *c != here))
        .unwrap_or(here);
    let set = |cpu: usize| {
        // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid cpu_set_t.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        set
    };
    let sets = [set(here), set(there)];
    let program = true_program()?;
    let file = match kind {
        Kind::Lookups | Kind::Mmaps => Some(cached_page()?),
        Kind::FileFaults => Some(cached_file()?),
        _ => None,
    };
    // SAFETY: fork(2). The child runs only `child_loop`, which makes raw syscalls and plain
    // stores into memory it maps itself, and ends with _exit: nothing that takes a lock or
    // allocates, as a child forked from a threaded process must not.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork failed ({})", std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; never returns.
        unsafe {
            child_loop(
                fd,
                kind,
                &sets,
                file.as_ref().map_or(-1, |f| f.as_raw_fd()),
                &files.paths,
                &program,
            )
        };
    }
    drop(procs);
    let (status, ru) = crate::count::program::reap(pid);
    let split = tracer.map(|t| t.finish_counted(&cg.dir)).transpose()?;
    if status.failed() {
        bail!("the {} loop failed ({})", kind.word(), status.line());
    }
    let stat = std::fs::read_to_string(cg.dir.join("cpu.stat")).unwrap_or_default();
    let (usage, _, _) = parse_cpu_stat(&stat).context("no cpu.stat for the tracer's loops")?;
    let switches = (ru.ru_nvcsw + ru.ru_nivcsw) as u64;
    let events = match &split {
        Some((s, c)) => Events::of(s, switches, c.stats_first),
        None => Events {
            switches,
            ..Events::default()
        },
    };
    let timer_ns = split
        .as_ref()
        .and_then(|(s, _)| s.line("irq", "local_timer"))
        .map_or(0.0, |l| l.cpu_ns as f64);
    Ok(LoopRun {
        usage_ns: usage as f64,
        events,
        timer_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_of_a_runs_events_is_each_count_times_its_cost() {
        let o = Overhead {
            syscall: 100.0,
            fault: 300.0,
            switch: 500.0,
            switch_local: 200.0,
            lookup: 50.0,
            path: 70.0,
            mmap: 1800.0,
            inode: 300.0,
            file_fault: 400.0,
            exec: 30_000.0,
            per_cpu: 0.25,
            sampler: false,
        };
        let e = Events {
            syscalls: 1000,
            faults: 10,
            switches: 2,
            halted: 2,
            lookups: 0,
            paths: 0,
            mmaps: 0,
            inodes: 0,
            file_faults: 0,
            execs: 0,
        };
        assert_eq!(o.of(&e), 100_000.0 + 3000.0 + 1000.0);
        // An exec at 30000 (its calls are among the 1000); the exec loop's switches, between
        // a parent and its child on one CPU, are local ones (2 at 200).
        let spawns = Events { execs: 1, ..e };
        assert_eq!(o.of(&spawns), 104_000.0 + 30_000.0);
        let run = LoopRun {
            usage_ns: 0.0,
            events: spawns,
            timer_ns: 0.0,
        };
        assert_eq!(Kind::Execs.events(&run, &o), (1.0, 103_400.0));
        // 4 of the 10 faults served by the page cache, each 400 more.
        let file = Events {
            file_faults: 4,
            ..e
        };
        assert_eq!(o.of(&file), 104_000.0 + 1600.0);
        let run = LoopRun {
            usage_ns: 0.0,
            events: file,
            timer_ns: 0.0,
        };
        assert_eq!(Kind::FileFaults.events(&run, &o), (4.0, 104_000.0));
        // A path read each of 5 stats, at 70.
        assert_eq!(o.of(&Events { paths: 5, ..e }), 104_000.0 + 350.0);
        // A lookup each of 40 reads, at 50 ns.
        let reads = Events { lookups: 40, ..e };
        assert_eq!(o.of(&reads), 104_000.0 + 2000.0);
        // A side-band record each of 3 mmaps, at 1800 (their syscalls are among the 1000).
        assert_eq!(o.of(&Events { mmaps: 3, ..e }), 104_000.0 + 5400.0);
        // 4 stats, 2 of them finding their inode first: a path read each, an insert each of 2.
        let firsts = Events {
            paths: 4,
            inodes: 2,
            ..e
        };
        assert_eq!(o.of(&firsts), 104_000.0 + 280.0 + 600.0);
        let run = LoopRun {
            usage_ns: 0.0,
            events: firsts,
            timer_ns: 0.0,
        };
        assert_eq!(Kind::Inodes.events(&run, &o), (2.0, 104_000.0 + 280.0));
        let run = LoopRun {
            usage_ns: 0.0,
            events: Events { mmaps: 3, ..e },
            timer_ns: 0.0,
        };
        assert_eq!(Kind::Mmaps.events(&run, &o), (3.0, 104_000.0));
        // The tick's part: a traced run of 1.25 ms holds 0.25 ms of it (a quarter of 1 ms).
        assert_eq!(o.of_time(1_250_000.0), 250_000.0);
        assert_eq!(o.of_run(&e, 1_250_000.0), 104_000.0 + 250_000.0);
        // A loop's own events are left out of the others' cost.
        let run = LoopRun {
            usage_ns: 0.0,
            events: e,
            timer_ns: 0.0,
        };
        let (n, others) = Kind::Faults.events(&run, &o);
        assert_eq!(n, 10.0);
        assert_eq!(others, 100_000.0 + 1000.0);
        assert!(o.line().contains("a user fault"));
    }

    #[test]
    fn a_switch_back_on_a_halted_cpu_costs_the_tracer_more_than_one_inside_the_cgroup() {
        let o = Overhead {
            switch: 10_000.0,
            switch_local: 1000.0,
            ..Overhead::default()
        };
        // 3 of 10 switches came back on a halted CPU.
        let e = Events {
            switches: 10,
            halted: 3,
            ..Events::default()
        };
        assert_eq!(o.of(&e), 3.0 * 10_000.0 + 7.0 * 1000.0);
        // A halted count above the switches (a sampled split's estimate) prices no switch
        // twice and none below zero.
        assert_eq!(
            o.of(&Events {
                switches: 2,
                halted: 5,
                ..e
            }),
            20_000.0
        );
        let run = |events| LoopRun {
            usage_ns: 0.0,
            events,
            timer_ns: 0.0,
        };
        // The switch loop's own events are its halted waits; the others at the local cost.
        assert_eq!(Kind::Switches.events(&run(e), &o), (3.0, 7000.0));
        // Where none halted (one CPU, an idle loop that polls), every switch is its own.
        let polled = Events { halted: 0, ..e };
        assert_eq!(Kind::Switches.events(&run(polled), &o), (10.0, 0.0));
        // The local loop's own events are the waits that did not halt.
        let local = Events {
            switches: 100,
            halted: 1,
            ..Events::default()
        };
        let (n, _) = Kind::LocalSwitches.events(&run(local), &o);
        assert_eq!(n, 99.0);
        assert!(o.line().contains("inside the program's cgroup"));
    }

    #[test]
    fn a_splits_events_are_its_syscalls_and_finished_user_faults() {
        let line = |class: &str, event: &str, count: u64| crate::measured::Line {
            class: class.into(),
            event: event.into(),
            count,
            ..Default::default()
        };
        let mut read = line("syscall", "read", 10);
        read.lookups = 9;
        read.halted_in = 3;
        let s = Split {
            lines: vec![
                read,
                line("syscall", "write", 5),
                line("syscall", "statx", 2),
                line("syscall", "mmap", 3),
                line("syscall", "clone3", 2),
                line("syscall", "clone", 1),
                line("syscall", "execve", 1),
                line("syscall", "execve:failed", 4),
                line("fault", "minor", 5),
                line("fault", "minor:file", 2),
                line("fault", "major", 1),
                line("fault", "unfinished", 3),
                line("user", "user", 1),
            ],
            ..Default::default()
        };
        assert_eq!(
            Events::of(&s, 4, 1),
            Events {
                syscalls: 28,
                faults: 8,
                switches: 4,
                halted: 3,
                lookups: 9,
                paths: 2,
                mmaps: 3,
                inodes: 1,
                file_faults: 2,
                execs: 1,
            }
        );
    }

    #[test]
    fn the_tracers_cost_per_event_is_measured_here() {
        if crate::count::unavailable().is_some() || !nix_root() {
            eprintln!("skipped: needs root, BPF and a cgroup v2 tree");
            return;
        }
        let (o, rounds) = Overhead::measure(1, true).unwrap();
        // One round's figure of every event but the lookups, which a tmpfs cannot make.
        for e in EVENTS.iter().filter(|e| **e != "lookup") {
            assert!(
                rounds.iter().any(|(n, v)| n == e && v.len() == 1),
                "{e}: {rounds:?}"
            );
        }
        // Every cost is a number of ns, none below zero.
        for c in [
            o.syscall,
            o.fault,
            o.file_fault,
            o.switch,
            o.switch_local,
            o.lookup,
            o.path,
            o.inode,
            o.exec,
            o.per_cpu,
        ] {
            assert!(c.is_finite() && c >= 0.0, "{o:?}");
        }
    }

    fn nix_root() -> bool {
        // SAFETY: geteuid takes nothing and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }
}
