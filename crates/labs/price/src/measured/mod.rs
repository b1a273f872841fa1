//! Where a program's CPU time went, measured in the kernel: every task of its cgroup has its
//! on-CPU time split at each kernel transition into user time, each syscall by name (with the
//! time it waited off CPU inside the call kept apart), user page faults (minor, major),
//! interrupts and softirqs that ran while it was current. The classes are checked against the
//! cgroup's own cpu.stat usage (the scheduler's sum_exec_runtime): they must add up to it.
//!
//! `prog` holds the programs (written with costlab-bpf's named instructions, which loads them),
//! `btf` finds the two kernel facts they need. `measure_command` measures one run of a
//! command in a fresh cgroup; `Tracer` attaches to a cgroup for a caller that runs it.

pub mod beside;
pub mod btf;
pub mod chart;
pub mod inodes;
mod pages;
mod procfs;
pub mod prog;
mod slots;
mod split;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};

use crate::count::cgroup::Cgroup;
use crate::count::host;
use crate::count::program::{self, Stdio3, Times};
use crate::count::syscalls;
use costlab_bpf::uapi::perf::{
    PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_PAGE_FAULTS_MIN,
};
use costlab_bpf::{Asm, Attached, Hook, Map};
use costlab_core::error::usage;
use prog::{IrqSlot, Maps, Target};

pub use pages::PageCounts;
pub use procfs::*;
pub use slots::slot_name;
pub use split::*;

/// The syscall counts the split's sys_enter kept: by number, and the read/write family's
/// sampled calls by (number, fd), as `bpf::SyscallCounter` gives them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    pub ids: BTreeMap<u32, u64>,
    pub by_fd: BTreeMap<(u32, u32), u64>,
    /// The bytes those sampled calls returned, by the same (number, fd) keys.
    pub fd_bytes: BTreeMap<(u32, u32), u64>,
    /// Of openat's calls (in `ids`), those with O_CREAT: priced as creates.
    pub creates: u64,
    /// Of newfstatat's calls (in `ids`), those with an empty path (glibc's fstat): priced
    /// as stats by fd.
    pub stats_by_fd: u64,
    /// Of mmap's calls (in `ids`), those of a file (no MAP_ANONYMOUS): priced at mmap-file.
    pub mmap_files: u64,
    /// The bytes of directory entries getdents64 returned.
    pub dirent_bytes: u64,
    /// execve calls that failed (not in `ids`' execve: added back there, as creates are).
    pub exec_failed: u64,
    /// Of the minor faults, those the page cache served and those copied on write (the
    /// rest are anonymous pages).
    pub fault_file: u64,
    pub fault_cow: u64,
    /// Interrupts the tracked tasks sent to other CPUs inside syscalls (`prog::IPI_SENT`).
    pub ipis_sent: u64,
    /// Interrupts they sent inside their user faults (`prog::IPI_FAULT`).
    pub ipis_in_faults: u64,
    /// Pages their processes still mapped when the last thread of each exited, file and
    /// anonymous (`prog::EXIT_FILE_PAGES`, `EXIT_ANON_PAGES`): what the exits unmapped.
    pub exit_file_pages: u64,
    pub exit_anon_pages: u64,
    /// Pages whose page-table entries their forks copied (`prog::FORK_PAGES`).
    pub fork_pages: u64,
    /// Mappings the exits tore down and the forks copied (`prog::EXIT_VMAS`, `FORK_VMAS`).
    pub exit_vmas: u64,
    pub fork_vmas: u64,
    /// Pages and mappings of the address spaces execs tore down (`prog::EXEC_PAGES`, ...).
    pub exec_pages: u64,
    pub exec_vmas: u64,
    /// Pages (file, anonymous) and mappings munmap calls took out (`prog::exit::MUNMAP_*`).
    pub munmap_pages: (u64, u64),
    pub munmap_vmas: u64,
    /// Pages the read faults' fault-around mapped (`prog::FAULT_FILE_PAGES`), and the faults
    /// on a 64 KiB window of a file new to the run (`prog::FAULT_FILE_FIRST`).
    pub fault_file_pages: u64,
    pub fault_file_first: u64,
    /// The components of the paths the stat family's calls walked (`prog::paths`).
    pub path_components: u64,
    /// The stats by path that found an inode no stat of the run had found before
    /// (`prog::paths::STAT_FIRST`).
    pub stats_first: u64,
    /// Waits that ended on a CPU woken from a halt (`prog::HALT_IN`).
    pub halted_in: u64,
    /// The page cache as the tracked tasks used it (`prog::pages`): pages taken in inside a
    /// read (or another syscall that is not a write), inside a write, outside a syscall
    /// (faults); folios taken out; bytes sent to a disk to be written. None where the
    /// tracepoints could not be attached.
    pub pages: Option<PageCounts>,
    /// Buffers touched inside tracked tasks' inode allocations, and those allocations
    /// (`prog::inodes`): a create's passes over recently deleted inodes, once calibrated.
    pub inode_touches: u64,
    pub inode_windows: u64,
}

impl Counted {
    /// What slot `s` adds to the counts, with `n` its count word: a syscall's number, the
    /// calls told apart (still counted under their number), the kinds of faults, the page
    /// cache's counts.
    fn take(&mut self, s: u32, n: u64) {
        if n == 0 {
            return;
        }
        if s < prog::SYS_OTHER {
            *self.ids.entry(s).or_default() += n;
        }
        match s {
            prog::EXEC_FAILED => {
                *self.ids.entry(prog::NR_EXECVE as u32).or_default() += n;
                self.exec_failed = n;
            }
            prog::OPEN_CREATE => {
                // Still openat calls, for every count that compares by number.
                *self.ids.entry(prog::NR_OPENAT as u32).or_default() += n;
                self.creates = n;
            }
            prog::paths::NEWFSTATAT_FD => {
                *self
                    .ids
                    .entry(prog::paths::NR_NEWFSTATAT as u32)
                    .or_default() += n;
                self.stats_by_fd = n;
            }
            prog::MMAP_FILE => {
                *self.ids.entry(prog::NR_MMAP as u32).or_default() += n;
                self.mmap_files = n;
            }
            prog::FAULT_FILE => self.fault_file = n,
            prog::FAULT_COW => self.fault_cow = n,
            prog::IPI_SENT => self.ipis_sent = n,
            prog::HALT_IN => self.halted_in = n,
            prog::IPI_FAULT => self.ipis_in_faults = n,
            prog::EXIT_FILE_PAGES => self.exit_file_pages = n,
            prog::EXIT_ANON_PAGES => self.exit_anon_pages = n,
            prog::FORK_PAGES => self.fork_pages = n,
            prog::EXIT_VMAS => self.exit_vmas = n,
            prog::FORK_VMAS => self.fork_vmas = n,
            prog::EXEC_PAGES => self.exec_pages = n,
            prog::EXEC_VMAS => self.exec_vmas = n,
            // Entries' counts less exits': a sum that wrapped below zero (other threads'
            // faults during the calls outweighing them) is none.
            prog::MUNMAP_FILE_PAGES => self.munmap_pages.0 = (n as i64).max(0) as u64,
            prog::MUNMAP_ANON_PAGES => self.munmap_pages.1 = (n as i64).max(0) as u64,
            prog::MUNMAP_VMAS => self.munmap_vmas = (n as i64).max(0) as u64,
            prog::FAULT_FILE_PAGES => self.fault_file_pages = n,
            prog::paths::PATH_COMPONENTS => self.path_components = n,
            prog::paths::STAT_FIRST => self.stats_first = n,
            prog::FAULT_FILE_FIRST => self.fault_file_first = n,
            prog::inodes::INODE_TOUCHES => self.inode_touches = n,
            prog::inodes::INODE_WINDOWS => self.inode_windows = n,
            _ => {}
        }
        if let Some(p) = self.pages.as_mut() {
            match s {
                prog::PAGES_READ => p.read = n,
                prog::PAGES_WRITE => p.write = n,
                prog::PAGES_OTHER => p.other = n,
                prog::PAGES_DROPPED => p.dropped = n,
                prog::WRITEBACK_BYTES => p.writeback_bytes = n,
                prog::pages::PAGES_SMALL => p.small = n,
                _ => {}
            }
        }
    }
}

/// The split's programs, attached for one cgroup; detached when dropped.
pub struct Tracer {
    slots: Map,
    by_fd: Option<FdMaps>,
    _state: Map,
    _tasks: Map,
    _seen: Map,
    _progs: Vec<(String, Attached)>,
    notes: Vec<String>,
    period: u32,
    tick_ns: u64,
    /// What a syscall outside the split costs more while it is attached (ns, costlab's own
    /// getppid before and after), and the machine's busy CPU time when it attached (ns).
    foreign_ns: f64,
    busy_at_attach: Option<u64>,
    /// Whether `prog::pages`' tracepoints are attached, and the page cache's work by slot.
    pages: bool,
    work: Map,
}

/// getppid calls in each of the loops that time a foreign syscall's added cost.
const FOREIGN_CALLS: u32 = 20_000;

/// ns per getppid of this thread (the fastest of three loops).
fn getppid_ns() -> f64 {
    (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            for _ in 0..FOREIGN_CALLS {
                std::hint::black_box(rustix::process::getppid());
            }
            t.elapsed().as_nanos() as f64 / FOREIGN_CALLS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The machine's busy CPU time so far (/proc/stat's cpu line less idle and iowait), ns.
pub fn machine_busy_ns(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let all: u64 = f.iter().sum();
    let idle = f.get(3)? + f.get(4)?;
    let hz = costlab_core::measure::procstat::ticks_per_second().max(1);
    Some((all - idle) * 1_000_000_000 / hz)
}

fn busy_now() -> Option<u64> {
    machine_busy_ns(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The by-fd sample's arrays: its calls, and the bytes they returned (`prog::ByFd`).
type FdMaps = (Map, Map);

/// The split's maps: the slots, each CPU's state, the switched-out tasks, and the by-fd
/// sample (x86-64 only: it reads the first argument from pt_regs, whose layout is x86-64's).
fn maps() -> Result<(Map, Map, Map, Option<FdMaps>, Map, Map)> {
    let by_fd = if cfg!(target_arch = "x86_64") {
        Some((
            Map::percpu_array(8, crate::bpf::FD_SLOTS)?,
            Map::percpu_array(8, crate::bpf::FD_SLOTS)?,
        ))
    } else {
        None
    };
    Ok((
        Map::percpu_array(prog::SLOT_SIZE, prog::SLOTS)?,
        state_map()?,
        Map::hash(prog::TASK_SIZE, 1 << 16)?,
        by_fd,
        Map::percpu_array(prog::pages::WORK_SIZE, prog::SLOTS)?,
        Map::hash_u64(1, prog::paths::STATS_SEEN)?,
    ))
}

/// The per-CPU state, every CPU's with the split's start in it (`prog::ST_START`: where the
/// first call of a kind on a CPU counts its gap from).
fn state_map() -> Result<Map> {
    let state = Map::percpu_array(prog::STATE_SIZE, 1)?;
    let mut st = vec![0u8; prog::STATE_SIZE as usize];
    let at = prog::ST_START as usize;
    st[at..at + 8].copy_from_slice(&ktime_ns().to_ne_bytes());
    state.update(&0u32.to_ne_bytes(), &st)?;
    Ok(state)
}

/// The clock the programs read (bpf_ktime_get_ns: CLOCK_MONOTONIC), ns.
fn ktime_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Time every syscall (the default), or one in `n` of each kind.
pub const EVERY_CALL: u32 = 1;

impl Tracer {
    /// Probe the kernel, build and attach every program for the cgroup `cgroup_id`. The four
    /// the split cannot do without (sys_enter, sys_exit, sched_switch, sched_process_fork)
    /// fail it; one of the others that fails leaves a note naming it and the reason.
    pub fn attach(cgroup_id: u64) -> Result<Tracer> {
        Tracer::attach_with(cgroup_id, EVERY_CALL)
    }

    /// `attach`, timing one syscall in `period` of each kind (a power of two, 1 to 1024; 1:
    /// every call) on each CPU; every call is counted either way.
    pub fn attach_with(cgroup_id: u64, period: u32) -> Result<Tracer> {
        Tracer::attach_to(
            prog::Who::Cgroup(cgroup_id),
            period,
            prog::USER_TICK_PERIOD_NS,
        )
    }

    /// `attach_with` for `who` (a cgroup's tasks, or a running process's threads), its user
    /// class shared by a cpu-clock tick each `tick_ns` of each CPU.
    pub fn attach_to(who: prog::Who, period: u32, tick_ns: u64) -> Result<Tracer> {
        if !(1..=1024).contains(&period) || !period.is_power_of_two() {
            bail!(usage(format!(
                "cannot time one call in {period}: give a power of two from 1 to 1024"
            )));
        }
        let release = costlab_bpf::kernel_release();
        let has_btf = Path::new("/sys/kernel/btf/vmlinux").exists();
        if let Some(why) = missing(&release, has_btf) {
            bail!(usage(why));
        }
        let btf = btf::Btf::vmlinux().map_err(|e| {
            usage(format!(
                "cannot read /sys/kernel/btf/vmlinux ({e}); use --count-only"
            ))
        })?;
        let pid_offset = btf.member_offset("task_struct", "pid").ok_or_else(|| {
            usage("this kernel's BTF has no task_struct.pid: the measured split cannot follow switches; use --count-only")
        })?;
        let rss = prog::RssAt::of(&btf);
        // The possible CPUs size every per-CPU map: unread, that is its own error.
        costlab_bpf::cpus::possible()?;
        let fail = |e: &dyn std::fmt::Display| {
            usage(format!(
                "cannot measure in the kernel: {e}; costlab price needs root and BPF (or use --count-only)"
            ))
        };
        let (slots, state, tasks, by_fd, work, seen) = maps().map_err(|e| fail(&e))?;
        let m = Maps {
            slots: slots.fd(),
            state: state.fd(),
            tasks: tasks.fd(),
            work: work.fd(),
            seen: seen.fd(),
            by_fd: by_fd.as_ref().map(|(calls, bytes)| prog::ByFd {
                calls: calls.fd(),
                bytes: bytes.fd(),
            }),
        };
        let t = Target {
            who,
            pid_offset: pid_offset as i32,
            period,
            tick_ns,
            rss,
        };
        let raw = Hook::raw_tracepoint;
        let mut progs = Vec::new();
        let bare = getppid_ns();
        // Switches and forks first, so that no task starts untracked once the syscalls are.
        for (a, hook) in [
            (prog::sched_switch(&m, &t), raw("sched_switch")),
            (prog::sched_process_fork(&m, &t), raw("sched_process_fork")),
            (prog::sys_exit(&m, &t), raw("sys_exit")),
            (prog::sys_enter(&m, &t), raw("sys_enter")),
        ] {
            let p = costlab_bpf::attach(&a.finish()?, &hook).map_err(|e| fail(&e))?;
            progs.push((hook.name(), p));
        }
        let mut notes = Vec::new();
        attach_optional(&m, &t, &mut progs, &mut notes);
        let pages = pages::attach(&m, &mut progs, &mut notes);
        pages::attach_small(&m, &btf, &mut progs, &mut notes);
        inodes::attach(&m, &mut progs, &mut notes);
        // costlab is outside the split's tasks: its getppid now takes the others' path.
        let foreign_ns = (getppid_ns() - bare).max(0.0);
        Ok(Tracer {
            slots,
            by_fd,
            _state: state,
            _tasks: tasks,
            _seen: seen,
            _progs: progs,
            notes,
            period,
            tick_ns,
            foreign_ns,
            busy_at_attach: busy_now(),
            pages,
            work,
        })
    }

    /// Each attached program's runs and their time so far, by its hook (counted only while
    /// `costlab_bpf::RunStats` is held).
    pub fn run_stats(&self) -> Vec<(String, costlab_bpf::Runs)> {
        self._progs
            .iter()
            .filter_map(|(h, p)| Some((h.clone(), p.program().run_stats().ok()?)))
            .collect()
    }

    /// Detach and read every slot, named, with the cgroup's cpu.stat from `cgroup_dir`.
    pub fn finish(self, cgroup_dir: &Path) -> Result<Split> {
        Ok(self.finish_counted(cgroup_dir)?.0)
    }

    /// `finish`, and the syscall counts sys_enter kept (the run's counts: by number, every
    /// number below the shared slot, as `bpf::SyscallCounter` reads them; and by fd).
    pub fn finish_counted(self, cgroup_dir: &Path) -> Result<(Split, Counted)> {
        self.finish_with(|| {
            let stat = std::fs::read_to_string(cgroup_dir.join("cpu.stat")).unwrap_or_default();
            parse_cpu_stat(&stat).ok_or_else(|| {
                format!(
                    "no cpu.stat in {}: nothing to check the split against",
                    cgroup_dir.display()
                )
            })
        })
    }

    /// `finish_counted` for a process's threads: the usage is what its threads ran since
    /// `before` (`ProcessCpu::read` when the tracer attached).
    pub fn finish_process(self, pid: u32, before: &ProcessCpu) -> Result<(Split, Counted)> {
        self.finish_with(|| match ProcessCpu::read(pid) {
            Some(after) => Ok(after.since(before)),
            None => Err(format!(
                "process {pid} is gone: its threads' run time was not read, nothing to check the split against"
            )),
        })
    }

    /// Read `stat` (usage, user, system ns) and every slot, detach, and build the split.
    fn finish_with(
        self,
        stat: impl FnOnce() -> std::result::Result<(u64, u64, u64), String>,
    ) -> Result<(Split, Counted)> {
        let Tracer {
            slots,
            by_fd,
            _progs,
            mut notes,
            period,
            tick_ns,
            foreign_ns,
            busy_at_attach,
            pages,
            work,
            ..
        } = self;
        // The usage and the slots are read while the programs still run, one right after the
        // other, so that both cover the same time: a process priced by --pid runs on, and
        // programs detached one by one (a sys_enter's detach takes 15-20 ms) would charge it
        // with a switch program gone.
        let stat = stat();
        let busy = busy_now()
            .zip(busy_at_attach)
            .map(|(b, a)| b.saturating_sub(a));
        let mut counted = Counted {
            by_fd: match &by_fd {
                Some((calls, _)) => crate::bpf::read_by_fd(calls)?,
                None => BTreeMap::new(),
            },
            fd_bytes: match &by_fd {
                Some((_, bytes)) => crate::bpf::read_by_fd(bytes)?,
                None => BTreeMap::new(),
            },
            pages: pages.then(PageCounts::default),
            ..Counted::default()
        };
        let syscalls = syscalls::syscall_names(Path::new("/"));
        let irqs =
            parse_interrupts(&std::fs::read_to_string("/proc/interrupts").unwrap_or_default());
        let mut lines = Vec::new();
        let mut ticks = [0u64; 2];
        // The counters the split reads apart from its lines, by slot.
        let mut apart = BTreeMap::new();
        let mut squares = BTreeMap::new();
        const WORDS: usize = prog::SLOT_SIZE as usize / 8;
        for s in 0..prog::SLOTS {
            let v: [u64; WORDS] = summed(&slots, s)?;
            if v == [0; WORDS] {
                continue;
            }
            counted.take(s, v[0]);
            match s {
                prog::USER_TICK_KERNEL | prog::USER_TICK_USER => {
                    ticks[(s - prog::USER_TICK_KERNEL) as usize] = v[0];
                    continue;
                }
                prog::DROPPED | prog::OTHERS | prog::LATE_JOINS | prog::JOINED_BEFORE => {
                    apart.insert(s, v[0]);
                    continue;
                }
                prog::DIRENT_BYTES => {
                    counted.dirent_bytes = v[0];
                    continue;
                }
                _ => {}
            }
            // The counters past the fault kinds are events, not lines (a call's own slot
            // among them, the stats by fd, is one).
            let moved_call = s == prog::paths::NEWFSTATAT_FD || s == prog::MMAP_FILE;
            if (prog::PAGES_READ..prog::SLOTS).contains(&s) && !moved_call {
                continue;
            }
            let (class, event) = slot_name(s, &syscalls, &irqs);
            // The four open fault classes are one line, "fault unfinished".
            if let Some(l) = lines
                .iter_mut()
                .find(|l: &&mut Line| l.class == class && l.event == event)
            {
                l.count += v[0];
                l.cpu_ns += v[1];
                l.wait_ns += v[2];
                l.waits += v[3];
                continue;
            }
            let call = s <= prog::SYS_OTHER || s == prog::OPEN_CREATE || moved_call;
            let at = prog::gaps::SLOT_GAPS as usize / 8;
            let gaps =
                match call || matches!(s, prog::FAULT_MINOR | prog::FAULT_FILE | prog::FAULT_COW) {
                    true => (0..prog::gaps::BUCKETS)
                        .map(|b| [v[at + 2 * b], v[at + 2 * b + 1]])
                        .collect(),
                    false => Vec::new(),
                };
            let timed = if period > 1 && call {
                squares.insert(event.clone(), v[prog::SLOT_SQUARES as usize / 8]);
                v[prog::SLOT_TIMED as usize / 8]
            } else {
                0
            };
            lines.push(Line {
                class: class.into(),
                event,
                count: v[0],
                cpu_ns: v[1],
                wait_ns: v[2],
                waits: v[3],
                timed,
                since_same: gaps,
                ..Line::default()
            });
        }
        pages::add_work(&work, &mut lines, &syscalls, &irqs)?;
        let (usage_ns, stat_user_ns, stat_system_ns) = match stat {
            Ok(t) => t,
            Err(why) => {
                notes.push(why);
                (0, 0, 0)
            }
        };
        let mut split = Split {
            lines,
            usage_ns,
            stat_user_ns,
            stat_system_ns,
            notes,
            dropped: apart.get(&prog::DROPPED).copied().unwrap_or(0),
            late_joins: apart.get(&prog::LATE_JOINS).copied().unwrap_or(0),
            others_syscalls: apart.get(&prog::OTHERS).copied().unwrap_or(0),
            sample_period: period,
            tick_period_ns: tick_ns,
            joined_before_ns: 0,
        };
        split.leave_out_before_join(apart.get(&prog::JOINED_BEFORE).copied().unwrap_or(0));
        let extra = if period > 1 {
            split.estimate(&squares)
        } else {
            0
        };
        split.share_user_less(ticks[0], ticks[1], extra);
        split.note_others(foreign_ns, busy);
        split.close();
        detach_all(_progs);
        Ok((split, counted))
    }
}

/// Detach the split's programs all at once, each on a thread of its own: one detach waits
/// out a grace period (15-20 ms here), and one after the other they took some 200 ms of
/// every traced run's end (and of each of the tracer's calibration loops, about 20 a price).
fn detach_all(progs: Vec<(String, Attached)>) {
    std::thread::scope(|s| {
        for p in progs {
            // Where no thread can be had, the refused closure is dropped here, and the
            // program it holds detached with it: never a panic.
            let _ = std::thread::Builder::new().spawn_scoped(s, move || drop(p));
        }
    });
}

/// The first N u64 words of per-CPU map `map`'s value at `key`, each summed over the CPUs.
/// The sum wraps: a word can move between CPUs (an open fault's time, charged on one CPU to
/// `FAULT_OPEN`, moves to its own slot at its end on another), so one CPU's word may be below
/// zero and only the sum is a figure.
fn summed<const N: usize>(map: &Map, key: u32) -> Result<[u64; N]> {
    let mut v = [0u64; N];
    for cpu in map.values(key)? {
        for (i, x) in v.iter_mut().enumerate() {
            let w = u64::from_le_bytes(cpu[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            *x = x.wrapping_add(w);
        }
    }
    Ok(v)
}

/// The split's programs that a kernel may lack (each missing one is a note, not an error):
/// faults and their kinds, interrupts, softirqs, the system vectors and the user-time tick.
fn attach_optional(
    m: &Maps,
    t: &prog::Target,
    progs: &mut Vec<(String, Attached)>,
    notes: &mut Vec<String>,
) {
    let raw = Hook::raw_tracepoint;
    let mut optional = |a: Asm, hook: Hook, what: &str| match a
        .finish()
        .and_then(|p| Ok(costlab_bpf::attach(&p, &hook)?))
    {
        Ok(p) => progs.push((hook.name(), p)),
        Err(e) => notes.push(format!("{what} not measured: {e}")),
    };
    // A fault's start is the exceptions tracepoint; its end, the software event the
    // kernel raises as handle_mm_fault returns (fexit there is refused on some kernels).
    optional(
        prog::fault_begin(m, t),
        raw("page_fault_user"),
        "user page faults (their start)",
    );
    // The page cache serving a fault makes it a file fault (or a private file page's
    // copy on write). Kernels before 6.9 have neither tracepoint: the faults are then
    // priced by their error code alone.
    optional(
        prog::fault_from_page_cache(m),
        raw("mm_filemap_fault"),
        "file-backed faults (mm_filemap_fault)",
    );
    optional(
        prog::fault_around(m),
        raw("mm_filemap_map_pages"),
        "file-backed faults and the pages they map (mm_filemap_map_pages)",
    );
    for (slot, config, name) in [
        (
            prog::FAULT_MINOR,
            PERF_COUNT_SW_PAGE_FAULTS_MIN,
            "page-faults-min",
        ),
        (
            prog::FAULT_MAJOR,
            PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            "page-faults-maj",
        ),
    ] {
        optional(
            prog::fault_end(m, slot),
            Hook::PerfSoftware {
                config,
                period: 1,
                name: name.into(),
            },
            &format!("user page faults' end ({name})"),
        );
    }
    // In the sender: an interrupt to another CPU (in a VM an exit, paid inside the call that
    // woke a task asleep there).
    optional(
        prog::pages::ipi_sent(m),
        raw("ipi_send_cpu"),
        "interrupts sent to other CPUs (a wake-up's cost to the waker unpriced)",
    );
    // A task's exit: a thread killed by its process's exit tears itself down (the last one
    // unmaps the process) outside any syscall of its own; that goes to exit_group.
    optional(
        prog::task_exit(m, t.rss),
        raw("sched_process_exit"),
        "a killed thread's exit (its teardown stays in the class it was killed in)",
    );
    // In the idle loop: a CPU that halted (not only polled) while a tracked task slept.
    optional(
        prog::wake::idle(m),
        raw("cpu_idle"),
        "wake-ups on a halted CPU (the wakee's side of a cross-CPU wake-up unpriced)",
    );
    // A wakee switched in from the idle task is charged from where it was put on that CPU's
    // run queue (its wake-up, or its move there); a task first seen, from its last charge.
    for (a, hook, what) in [
        (prog::wake::woken(m, t.pid_offset), "sched_wakeup", "wake-ups onto an idle CPU (the wakee's time from its wake-up to its switch in unmeasured)"),
        (prog::wake::woken(m, t.pid_offset), "sched_wakeup_new", "new tasks started on an idle CPU (their time from their wake-up to their first switch in unmeasured)"),
        (prog::wake::woken(m, t.pid_offset), "sched_migrate_task", "tasks moved to an idle CPU (their time from the move to their switch in unmeasured)"),
        (prog::join::first_charge(m), "sched_stat_runtime", "the kernel's charges of run time (what it charged for a task before the split first saw it stays in the usage, unmeasured)"),
        (prog::irq_enter(m, t, IrqSlot::Numbered), "irq_handler_entry", "interrupts"),
        (prog::irq_exit(m, false), "irq_handler_exit", "interrupts' end"),
        (prog::irq_enter(m, t, IrqSlot::Softirq), "softirq_entry", "softirqs"),
        (prog::irq_exit(m, true), "softirq_exit", "softirqs' end"),
    ] {
        optional(a, raw(hook), what);
    }
    if cfg!(target_arch = "x86_64") {
        // cpu-clock every `tick_ns` of each CPU: the ticks that share the user class between
        // user mode and the kernel work inside it.
        optional(
            prog::user_tick(m),
            Hook::PerfSoftware {
                config: PERF_COUNT_SW_CPU_CLOCK,
                period: t.tick_ns,
                name: "cpu-clock".into(),
            },
            "the kernel work inside user time (sampled)",
        );
        for (i, v) in prog::VECTORS.iter().enumerate() {
            let slot = prog::VEC_BASE + i as u32;
            optional(
                prog::irq_enter(m, t, IrqSlot::Fixed(slot)),
                raw(&format!("{v}_entry")),
                &format!("the {v} interrupt"),
            );
            optional(
                prog::irq_exit(m, false),
                raw(&format!("{v}_exit")),
                &format!("the {v} interrupt's end"),
            );
        }
    }
}

/// What the split needs that a kernel may lack: None, or one line naming it and the version
/// that has it.
pub fn missing(release: &str, btf: bool) -> Option<String> {
    match costlab_bpf::kernel_version(release) {
        Some(v) if v < (5, 5) => Some(format!(
            "kernel {release} lacks bpf_probe_read_kernel and BTF for its own types, which the measured split needs (5.5 or later); use --count-only"
        )),
        None => Some(format!(
            "cannot tell the kernel's version from '{release}': the measured split needs 5.5 or later; use --count-only"
        )),
        _ if !btf => Some(format!(
            "kernel {release} has no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF, 5.5 or later with the option), which the measured split needs; use --count-only"
        )),
        _ => None,
    }
}

/// One measured run of `argv` in a fresh cgroup: its split, its times and exit status. What
/// the what-ifs' A/B runs are judged on.
pub fn measure_command(
    argv: &[String],
    stdio: Stdio3,
) -> Result<(Split, Times, costlab_core::error::ProgramEnd)> {
    let path = program::program(argv)?;
    if let Some(why) = host::unavailable() {
        bail!(usage(why));
    }
    let cg = Cgroup::create()?;
    let tracer = Tracer::attach(crate::bpf::cgroup_id(&cg.dir)?)?;
    let run = program::run_program(&path, argv, Some(&cg.dir), stdio);
    let split = tracer.finish(&cg.dir)?;
    let (times, status, _, _) = run?;
    Ok((split, times, status))
}

#[cfg(test)]
mod tests;
