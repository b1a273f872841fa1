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
pub mod prog;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::count::cgroup::Cgroup;
use crate::count::host;
use crate::count::program::{self, Stdio3, Times};
use crate::count::syscalls;
use costlab_bpf::uapi::perf::{
    PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_PAGE_FAULTS_MIN,
};
use costlab_bpf::{Asm, Attached, Hook, Map};
use costlab_core::error::usage;
use costlab_core::model::Quality;
use prog::{IrqSlot, Maps, Target};

/// One class and event's measured time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// user, syscall, fault, irq, softirq, kernel-other.
    pub class: String,
    /// The syscall's name, minor/major, the irq or softirq's name; `user` for user time.
    pub event: String,
    pub count: u64,
    /// ns on CPU in it.
    pub cpu_ns: u64,
    /// ns off CPU inside it (switched out in a syscall or a fault).
    pub wait_ns: u64,
    /// How many times it was switched out inside it.
    pub waits: u64,
    /// A sampled split's syscall: the calls timed (of `count`), from which `cpu_ns`,
    /// `wait_ns` and `waits` are estimated. 0: every call timed, the figures exact.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timed: u64,
    /// The estimate's 95% interval, half its width, ns (0 where exact).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_ci_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The measured split of one run, and the cgroup's cpu.stat to check it against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub lines: Vec<Line>,
    /// cpu.stat usage_usec, in ns: the figure the classes must add up to.
    pub usage_ns: u64,
    /// cpu.stat user_usec and system_usec (tick-sampled), ns.
    pub stat_user_ns: u64,
    pub stat_system_ns: u64,
    /// What could not be measured and why (an event this kernel or machine lacks).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Differences of two clock reads that came out below zero, dropped (their time stays
    /// where the later read put it).
    #[serde(default)]
    pub dropped: u64,
    /// Syscalls of tasks outside the cgroup while the split ran (each took the traced path).
    #[serde(default)]
    pub others_syscalls: u64,
    /// One syscall in this many of each kind was timed (0 or 1: every call).
    #[serde(default)]
    pub sample_period: u32,
}

/// The classes against the cgroup's usage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SumCheck {
    pub measured_ns: u64,
    pub usage_ns: u64,
    /// (measured - usage) / usage, %.
    pub diff_pct: f64,
}

impl SumCheck {
    /// Within the 2% the split promises.
    pub fn holds(&self) -> bool {
        self.diff_pct.abs() <= 2.0
    }
}

impl Split {
    /// ns on CPU in the measured classes (every line but the unmeasured rest).
    pub fn measured_ns(&self) -> u64 {
        self.lines
            .iter()
            .filter(|l| !(l.class == "kernel-other" && l.event == "unmeasured"))
            .fold(0u64, |a, l| a.saturating_add(l.cpu_ns))
    }

    /// Every syscall figure is an estimate from one call in `sample_period` timed.
    pub fn sampled(&self) -> bool {
        self.sample_period > 1
    }

    /// Lines that cannot be: more time in one class than the whole cgroup used.
    pub fn impossible(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| self.usage_ns > 0 && l.cpu_ns > self.usage_ns)
            .collect()
    }

    /// The split's own verdict and its reasons: not ok (disturbed) where a class passes the
    /// cgroup's usage, or the unmeasured time passes 1% of it; noisy where the classes miss
    /// the usage by more than 2%.
    pub fn quality(&self) -> (Quality, Vec<String>) {
        let mut why = Vec::new();
        let mut q = Quality::Ok;
        for l in self.impossible() {
            q = Quality::Disturbed;
            why.push(format!(
                "{} {} holds more CPU time than the cgroup used: the split is not ok",
                l.class, l.event
            ));
        }
        let rest = self.unmeasured_ns();
        if self.usage_ns > 0 && rest as f64 > 0.01 * self.usage_ns as f64 {
            q = Quality::Disturbed;
            why.push(format!(
                "{:.1}% of the usage is unmeasured ({} clock differences dropped): more than 1%",
                100.0 * rest as f64 / self.usage_ns as f64,
                self.dropped
            ));
        }
        if q == Quality::Ok && self.check().is_some_and(|c| !c.holds()) {
            q = Quality::Noisy;
            why.push("the measured classes do not add up to the cgroup's usage within 2%".into());
        }
        (q, why)
    }

    /// ns of kernel-other time (measured inside user time, or the unmeasured rest).
    pub fn kernel_other_ns(&self) -> u64 {
        self.class_ns("kernel-other")
    }
    pub fn class_ns(&self, class: &str) -> u64 {
        self.lines
            .iter()
            .filter(|l| l.class == class)
            .map(|l| l.cpu_ns)
            .sum()
    }
    pub fn check(&self) -> Option<SumCheck> {
        (self.usage_ns > 0).then(|| {
            let m = self.measured_ns();
            SumCheck {
                measured_ns: m,
                usage_ns: self.usage_ns,
                diff_pct: 100.0 * (m as f64 - self.usage_ns as f64) / self.usage_ns as f64,
            }
        })
    }
    /// The kernel part of the usage: usage less the measured user time.
    pub fn kernel_ns(&self) -> u64 {
        self.usage_ns.saturating_sub(self.class_ns("user"))
    }
    /// The kernel time no transition names: usage less every measured class (0 where the
    /// classes reach or pass the usage).
    pub fn unmeasured_ns(&self) -> u64 {
        self.usage_ns.saturating_sub(self.measured_ns())
    }

    /// The kernel time no transition names: the kernel-other found inside user time and the
    /// unmeasured rest.
    pub fn unnamed_kernel_ns(&self) -> u64 {
        let inside: u64 = self
            .lines
            .iter()
            .filter(|l| l.class == "kernel-other" && l.event != "unmeasured")
            .map(|l| l.cpu_ns)
            .sum();
        inside + self.unmeasured_ns()
    }
    /// `attributed` and `kernel_attributed` (%), with `sampled_named_ns` of the otherwise
    /// unnamed kernel time named by samples (a subsystem), capped at that time.
    pub fn attributed(&self, sampled_named_ns: u64) -> Option<(f64, f64)> {
        if self.usage_ns == 0 {
            return None;
        }
        let unnamed = self.unnamed_kernel_ns();
        let named = self.usage_ns.saturating_sub(unnamed) + sampled_named_ns.min(unnamed);
        let kernel = self.kernel_ns();
        let kernel_named = kernel.saturating_sub(unnamed) + sampled_named_ns.min(unnamed);
        let pct = |a: u64, b: u64| {
            if b == 0 {
                100.0
            } else {
                100.0 * a as f64 / b as f64
            }
        };
        Some((pct(named, self.usage_ns), pct(kernel_named, kernel)))
    }
    /// Share the user class by the cpu-clock ticks that found it in kernel mode (`kernel`)
    /// and in user mode (`user`): the kernel's part becomes the line kernel-other
    /// "inside user time" (the entry and exit paths, signals, returns from preemption).
    pub fn share_user(&mut self, kernel: u64, user: u64) {
        self.share_user_less(kernel, user, 0)
    }

    /// `share_user` after `estimate` took `extra` ns (untimed syscalls, which the ticks also
    /// found in kernel mode) out of the user class: the ticks' kernel part of the user class
    /// as it was, less what the estimate already took.
    pub fn share_user_less(&mut self, kernel: u64, user: u64, extra: u64) {
        if kernel == 0 || kernel + user == 0 {
            return;
        }
        let Some(u) = self.lines.iter_mut().find(|l| l.class == "user") else {
            return;
        };
        let before = u.cpu_ns + extra;
        let whole = (before as f64 * kernel as f64 / (kernel + user) as f64) as u64;
        let part = whole.saturating_sub(extra).min(u.cpu_ns);
        u.cpu_ns -= part;
        self.lines.push(Line {
            class: "kernel-other".into(),
            event: "inside user time".into(),
            count: kernel,
            cpu_ns: part,
            ..Line::default()
        });
        self.notes.push(format!(
            "{kernel} of {} cpu-clock ticks in user time found the task in the kernel (entry and exit paths, signals, returns from preemption): that share of user time is kernel-other",
            kernel + user
        ));
    }

    /// A sampled split: each syscall line's timed calls scaled up to all its calls (cpu,
    /// wait, waits), with the estimate's 95% interval from the timed calls' spread (`squares`
    /// by slot: the sum of their last on-CPU stretch's squares), and the time the untimed
    /// calls left in the user class taken out of it. Returns that time (ns).
    pub fn estimate(&mut self, squares: &BTreeMap<String, u64>) -> u64 {
        let user = self.class_ns("user");
        // Each sampled line's scaled figures and the time it takes out of user.
        let mut wanted = Vec::new();
        let mut var_sum = 0f64;
        for (i, l) in self.lines.iter().enumerate() {
            if l.class != "syscall" || l.timed == 0 || l.timed >= l.count {
                continue;
            }
            let (n, all) = (l.timed as f64, l.count as f64);
            let mean = l.cpu_ns as f64 / n;
            let sq = squares.get(&l.event).copied().unwrap_or(0) as f64 / n;
            let var = (sq - mean * mean).max(0.0);
            // The total over `all` calls from `n` drawn: its variance, finite population.
            let v = all * all * var / n * (1.0 - n / all);
            var_sum += v;
            let extra = l.cpu_ns as f64 * (all / n - 1.0);
            wanted.push((i, all / n, extra, (1.96 * v.sqrt()) as u64));
        }
        // The untimed calls' time can only have come from the user class: an estimate that
        // wants more is scaled down to it (each line alike), so no line passes the usage.
        let total: f64 = wanted.iter().map(|w| w.2).sum();
        let fit = if total > user as f64 && total > 0.0 {
            self.notes.push(format!(
                "the sampled estimate wanted {:.3} ms more than the {:.3} ms the untimed calls can have taken from user time: scaled down to it",
                (total - user as f64) / 1e6,
                user as f64 / 1e6
            ));
            user as f64 / total
        } else {
            1.0
        };
        let mut taken = 0u64;
        for (i, f, extra, ci) in wanted {
            let l = &mut self.lines[i];
            let add = ((extra * fit) as u64).min(user - taken);
            taken += add;
            l.cpu_ns += add;
            l.cpu_ci_ns = ci;
            l.wait_ns = (l.wait_ns as f64 * f) as u64;
            l.waits = (l.waits as f64 * f) as u64;
        }
        if let Some(u) = self.lines.iter_mut().find(|l| l.class == "user") {
            u.cpu_ns -= taken;
            u.cpu_ci_ns = (1.96 * var_sum.sqrt()) as u64;
        }
        taken
    }

    /// What the split cost the rest of the machine: its other tasks' syscalls (counted by
    /// sys_enter) at `foreign_ns` each (measured when it attached), against the machine's
    /// busy time outside the split's tasks (`busy_ns`, all of it, less the usage). A note
    /// when that passes 5% of their time, one line either way.
    pub fn note_others(&mut self, foreign_ns: f64, busy_ns: Option<u64>) {
        if self.others_syscalls == 0 {
            return;
        }
        let cost = self.others_syscalls as f64 * foreign_ns;
        let theirs = busy_ns.map(|b| b.saturating_sub(self.usage_ns) as f64);
        let head = format!(
            "{} syscalls of other tasks took the traced path while the split ran, {:.0} ns each more (measured at attach): {:.2} ms of their time",
            self.others_syscalls,
            foreign_ns,
            cost / 1e6
        );
        self.notes.push(match theirs {
            Some(t) if t > 0.0 && cost > 0.05 * t => format!(
                "{head}, {:.1}% of the {:.1} ms the rest of the machine ran: above 5%, the tracing slowed the other tasks (--time-one-in does not help them; a shorter run does)",
                100.0 * cost / t,
                t / 1e6
            ),
            Some(t) if t > 0.0 => format!(
                "{head}, {:.1}% of the {:.1} ms the rest of the machine ran",
                100.0 * cost / t,
                t / 1e6
            ),
            _ => head,
        });
    }

    /// The unmeasured rest as a line (its count: the clock differences dropped), and the
    /// notes on what the split could not time.
    pub fn close(&mut self) {
        let rest = self.unmeasured_ns();
        if rest > 0 || self.dropped > 0 {
            self.lines.push(Line {
                class: "kernel-other".into(),
                event: "unmeasured".into(),
                count: self.dropped,
                cpu_ns: rest,
                ..Line::default()
            });
        }
        if self.dropped > 0 {
            self.notes.push(format!(
                "{} differences of two clock reads came out below zero (a program nested inside another on an interrupt): dropped, counted on the unmeasured line",
                self.dropped
            ));
        }
        if self.sampled() {
            self.notes.push(format!(
                "an estimate: one syscall in {} of each kind was timed on each CPU (every call counted); each syscall's time is its timed calls' scaled to all its calls, with a 95% interval",
                self.sample_period
            ));
            let kernel = self.kernel_ns().max(1) as f64;
            let mut big: Vec<&Line> = self
                .lines
                .iter()
                .filter(|l| l.cpu_ci_ns > 0 && l.cpu_ns as f64 >= 0.01 * kernel)
                .collect();
            big.sort_by_key(|l| std::cmp::Reverse(l.cpu_ns));
            for l in big.iter().take(8) {
                let of = if l.timed > 0 {
                    format!("; {} of {} calls timed", l.timed, l.count)
                } else {
                    String::new()
                };
                let name = if l.class == l.event {
                    l.event.clone()
                } else {
                    format!("{} {}", l.class, l.event)
                };
                self.notes.push(format!(
                    "estimate: {name} {:.3} ms ± {:.3} ms (95%{of})",
                    l.cpu_ns as f64 / 1e6,
                    l.cpu_ci_ns as f64 / 1e6,
                ));
            }
        }
    }

    /// The line of `class`/`event`.
    pub fn line(&self, class: &str, event: &str) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| l.class == class && l.event == event)
    }
}

/// What a process's threads have run so far: the process's CPU clock (every thread's
/// sum_exec_runtime, those that ended included, brought up to date for a thread running now:
/// the figure a cgroup's usage sums), and its user and system time (/proc/PID/stat,
/// tick-sampled).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessCpu {
    pub cpu_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

impl ProcessCpu {
    pub fn read(pid: u32) -> Option<ProcessCpu> {
        let cpu_ns = process_clock_ns(pid)?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (u, s) = parse_stat_times(&stat)?;
        let hz = costlab_core::measure::procstat::ticks_per_second().max(1);
        Some(ProcessCpu {
            cpu_ns,
            user_ns: u * 1_000_000_000 / hz,
            system_ns: s * 1_000_000_000 / hz,
        })
    }

    /// (usage, user, system) ns from `before` to this reading.
    pub fn since(&self, before: &ProcessCpu) -> (u64, u64, u64) {
        (
            self.cpu_ns.saturating_sub(before.cpu_ns),
            self.user_ns.saturating_sub(before.user_ns),
            self.system_ns.saturating_sub(before.system_ns),
        )
    }
}

/// Another process's CPU clock (clock_getcpuclockid), ns.
fn process_clock_ns(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t to the valid pointer given.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the valid pointer given.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// schedstat's first field: the thread's time on CPU, ns.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// /proc/PID/stat's utime and stime (fields 14 and 15), in clock ticks.
pub fn parse_stat_times(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// cpu.stat's usage_usec, user_usec, system_usec as ns.
pub fn parse_cpu_stat(text: &str) -> Option<(u64, u64, u64)> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    Some((
        field("usage_usec")? * 1000,
        field("user_usec")? * 1000,
        field("system_usec")? * 1000,
    ))
}

/// Interrupt numbers to names from /proc/interrupts (the last field of each numbered line).
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(':')?;
            let n: u32 = n.parse().ok()?;
            let name = rest.split_whitespace().last()?;
            Some((n, name.to_string()))
        })
        .collect()
}

const SOFTIRQ_NAMES: [&str; 10] = [
    "hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
];

/// A slot's (class, event).
pub fn slot_name(
    slot: u32,
    syscalls: &BTreeMap<u32, String>,
    irqs: &BTreeMap<u32, String>,
) -> (&'static str, String) {
    use prog::*;
    match slot {
        SYS_OTHER => ("syscall", "syscall_511_and_up".into()),
        s if s < SYS_OTHER => (
            "syscall",
            syscalls
                .get(&s)
                .cloned()
                .unwrap_or_else(|| format!("syscall_{s}")),
        ),
        USER => ("user", "user".into()),
        FAULT_MINOR => ("fault", "minor".into()),
        FAULT_MAJOR => ("fault", "major".into()),
        FAULT_OPEN => ("fault", "unfinished".into()),
        s if (SOFTIRQ_BASE..SOFTIRQ_BASE + SOFTIRQS).contains(&s) => {
            let v = (s - SOFTIRQ_BASE) as usize;
            (
                "softirq",
                SOFTIRQ_NAMES
                    .get(v)
                    .map_or(format!("softirq_{v}"), |n| n.to_string()),
            )
        }
        s if (VEC_BASE..IRQ_BASE).contains(&s) => (
            "irq",
            VECTORS
                .get((s - VEC_BASE) as usize)
                .map_or(format!("vector_{s}"), |n| n.to_string()),
        ),
        s => {
            let n = s - IRQ_BASE;
            (
                "irq",
                irqs.get(&n)
                    .map_or(format!("irq{n}"), |name| format!("{n}:{name}")),
            )
        }
    }
}

/// The syscall counts the split's sys_enter kept: by number, and the read/write family's
/// sampled calls by (number, fd), as `bpf::SyscallCounter` gives them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    pub ids: BTreeMap<u32, u64>,
    pub by_fd: BTreeMap<(u32, u32), u64>,
}

/// The split's programs, attached for one cgroup; detached when dropped.
pub struct Tracer {
    slots: Map,
    by_fd: Option<Map>,
    _state: Map,
    _tasks: Map,
    _progs: Vec<(String, Attached)>,
    notes: Vec<String>,
    period: u32,
    /// What a syscall of a task outside the split costs more while it is attached (ns, a
    /// getppid loop of costlab's own before and after attaching), and the machine's busy CPU
    /// time when it attached (ns).
    foreign_ns: f64,
    busy_at_attach: Option<u64>,
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
        Tracer::attach_to(prog::Who::Cgroup(cgroup_id), period)
    }

    /// `attach_with` for `who`: a cgroup's tasks, or a running process's threads.
    pub fn attach_to(who: prog::Who, period: u32) -> Result<Tracer> {
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
        // The possible CPUs size every per-CPU map: unread, that is its own error.
        costlab_bpf::cpus::possible()?;
        let fail = |e: &dyn std::fmt::Display| {
            usage(format!(
                "cannot measure in the kernel: {e}; costlab price needs root and BPF (or use --count-only)"
            ))
        };
        let slots = Map::percpu_array(prog::SLOT_SIZE, prog::SLOTS).map_err(|e| fail(&e))?;
        let state = Map::percpu_array(prog::STATE_SIZE, 1).map_err(|e| fail(&e))?;
        let tasks = Map::hash(prog::TASK_SIZE, 1 << 16).map_err(|e| fail(&e))?;
        // The by-fd sample reads the first argument from pt_regs, whose layout is x86-64's.
        let by_fd = if cfg!(target_arch = "x86_64") {
            Some(Map::percpu_array(8, crate::bpf::FD_SLOTS).map_err(|e| fail(&e))?)
        } else {
            None
        };
        let m = Maps {
            slots: slots.fd(),
            state: state.fd(),
            tasks: tasks.fd(),
            by_fd: by_fd.as_ref().map(Map::fd),
        };
        let t = Target {
            who,
            pid_offset: pid_offset as i32,
            period,
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
            prog::fault_begin(&m),
            raw("page_fault_user"),
            "user page faults (their start)",
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
                prog::fault_end(&m, slot),
                Hook::PerfSoftware {
                    config,
                    period: 1,
                    name: name.into(),
                },
                &format!("user page faults' end ({name})"),
            );
        }
        optional(
            prog::irq_enter(&m, IrqSlot::Numbered),
            raw("irq_handler_entry"),
            "interrupts",
        );
        optional(
            prog::irq_exit(&m, false),
            raw("irq_handler_exit"),
            "interrupts' end",
        );
        optional(
            prog::irq_enter(&m, IrqSlot::Softirq),
            raw("softirq_entry"),
            "softirqs",
        );
        optional(
            prog::irq_exit(&m, true),
            raw("softirq_exit"),
            "softirqs' end",
        );
        if cfg!(target_arch = "x86_64") {
            // cpu-clock every USER_TICK_PERIOD_NS of each CPU (its period in ns): the ticks
            // that share the user class between user mode and the kernel work inside it.
            optional(
                prog::user_tick(&m),
                Hook::PerfSoftware {
                    config: PERF_COUNT_SW_CPU_CLOCK,
                    period: prog::USER_TICK_PERIOD_NS,
                    name: "cpu-clock".into(),
                },
                "the kernel work inside user time (sampled)",
            );
            for (i, v) in prog::VECTORS.iter().enumerate() {
                let slot = prog::VEC_BASE + i as u32;
                optional(
                    prog::irq_enter(&m, IrqSlot::Fixed(slot)),
                    raw(&format!("{v}_entry")),
                    &format!("the {v} interrupt"),
                );
                optional(
                    prog::irq_exit(&m, false),
                    raw(&format!("{v}_exit")),
                    &format!("the {v} interrupt's end"),
                );
            }
        }
        // costlab is outside the split's tasks: its getppid now takes the path every other
        // task's syscalls take while the split is attached.
        let foreign_ns = (getppid_ns() - bare).max(0.0);
        Ok(Tracer {
            slots,
            by_fd,
            _state: state,
            _tasks: tasks,
            _progs: progs,
            notes,
            period,
            foreign_ns,
            busy_at_attach: busy_now(),
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
            foreign_ns,
            busy_at_attach,
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
                Some(map) => crate::bpf::read_by_fd(map)?,
                None => BTreeMap::new(),
            },
            ..Counted::default()
        };
        let syscalls = syscalls::syscall_names(Path::new("/"));
        let irqs =
            parse_interrupts(&std::fs::read_to_string("/proc/interrupts").unwrap_or_default());
        let mut lines = Vec::new();
        let mut ticks = [0u64; 2];
        let (mut dropped, mut others) = (0, 0);
        let mut squares = BTreeMap::new();
        const WORDS: usize = prog::SLOT_SIZE as usize / 8;
        for s in 0..prog::SLOTS {
            let mut v = [0u64; WORDS];
            for cpu in slots.values(s)? {
                for (i, x) in v.iter_mut().enumerate() {
                    let w = u64::from_le_bytes(cpu[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                    *x = x.saturating_add(w);
                }
            }
            if v == [0; WORDS] {
                continue;
            }
            if s < prog::SYS_OTHER && v[0] > 0 {
                counted.ids.insert(s, v[0]);
            }
            match s {
                prog::USER_TICK_KERNEL | prog::USER_TICK_USER => {
                    ticks[(s - prog::USER_TICK_KERNEL) as usize] = v[0];
                    continue;
                }
                prog::DROPPED => {
                    dropped = v[0];
                    continue;
                }
                prog::OTHERS => {
                    others = v[0];
                    continue;
                }
                _ => {}
            }
            let (class, event) = slot_name(s, &syscalls, &irqs);
            let timed = if period > 1 && s <= prog::SYS_OTHER {
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
                ..Line::default()
            });
        }
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
            dropped,
            others_syscalls: others,
            sample_period: period,
        };
        let extra = if period > 1 {
            split.estimate(&squares)
        } else {
            0
        };
        split.share_user_less(ticks[0], ticks[1], extra);
        split.note_others(foreign_ns, busy);
        split.close();
        drop(_progs);
        Ok((split, counted))
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
pub fn measure_command(argv: &[String], stdio: Stdio3) -> Result<(Split, Times, i32)> {
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
mod tests {
    use super::*;

    fn line(class: &str, event: &str, cpu: u64) -> Line {
        Line {
            class: class.into(),
            event: event.into(),
            count: 1,
            cpu_ns: cpu,
            ..Line::default()
        }
    }

    #[test]
    fn what_is_missing_is_one_line_with_the_version_that_has_it() {
        assert_eq!(missing("6.18.44", true), None);
        let old = missing("5.4.0-100-generic", true).unwrap();
        assert!(old.contains("5.5 or later") && !old.contains('\n'));
        let nobtf = missing("6.1.0", false).unwrap();
        assert!(nobtf.contains("CONFIG_DEBUG_INFO_BTF") && !nobtf.contains('\n'));
        assert!(missing("junk", true).unwrap().contains("version"));
    }

    #[test]
    fn a_processs_cpu_clock_and_times_are_read_and_differenced() {
        assert_eq!(parse_schedstat("123456 789 10\n"), Some(123456));
        assert_eq!(parse_schedstat(""), None);
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 0\n";
        assert_eq!(parse_stat_times(stat), Some((250, 75)));
        let before = ProcessCpu {
            cpu_ns: 1500,
            user_ns: 10,
            system_ns: 5,
        };
        let after = ProcessCpu {
            cpu_ns: 2400,
            user_ns: 30,
            system_ns: 6,
        };
        assert_eq!(after.since(&before), (900, 20, 1));
        // This process's own clock: read, and moving.
        let me = ProcessCpu::read(std::process::id()).unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(ProcessCpu::read(std::process::id()).unwrap().cpu_ns > me.cpu_ns);
    }

    #[test]
    fn the_other_tasks_cost_is_noted_above_five_percent_of_their_time() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        let hz = costlab_core::measure::procstat::ticks_per_second();
        assert_eq!(machine_busy_ns(stat), Some(150 * 1_000_000_000 / hz));
        let mut s = Split {
            usage_ns: 1_000_000,
            others_syscalls: 100_000,
            ..Split::default()
        };
        // 100000 calls x 100 ns = 10 ms of 101 - 1 = 100 ms: 10%.
        s.note_others(100.0, Some(101_000_000));
        assert!(
            s.notes[0].contains("10.0% of the 100.0 ms") && s.notes[0].contains("above 5%"),
            "{:?}",
            s.notes
        );
        let mut s = Split {
            usage_ns: 1_000_000,
            others_syscalls: 1_000,
            ..Split::default()
        };
        s.note_others(100.0, Some(101_000_000));
        assert!(s.notes[0].contains("0.1% of") && !s.notes[0].contains("above 5%"));
        let mut none = Split::default();
        none.note_others(100.0, Some(1));
        assert!(none.notes.is_empty());
    }

    #[test]
    fn cpu_stat_and_interrupts_parse() {
        let s = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        assert_eq!(parse_cpu_stat(s), Some((1_500_000, 1_000_000, 500_000)));
        assert_eq!(parse_cpu_stat("nr_periods 0\n"), None);
        let i = "           CPU0       CPU1\n  4:        120          0  IO-APIC   4-edge      ttyS0\n NMI:          0          0   Non-maskable interrupts\n 24:  5  6  PCI-MSI 49152-edge      virtio0-input.0\n";
        let m = parse_interrupts(i);
        assert_eq!(m.get(&4).map(String::as_str), Some("ttyS0"));
        assert_eq!(m.get(&24).map(String::as_str), Some("virtio0-input.0"));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn slots_are_named_for_their_class() {
        let sys: BTreeMap<u32, String> = [(0, "read".to_string())].into();
        let irq: BTreeMap<u32, String> = [(4, "ttyS0".to_string())].into();
        assert_eq!(slot_name(0, &sys, &irq), ("syscall", "read".into()));
        assert_eq!(slot_name(7, &sys, &irq), ("syscall", "syscall_7".into()));
        assert_eq!(slot_name(prog::USER, &sys, &irq).0, "user");
        assert_eq!(
            slot_name(prog::FAULT_MAJOR, &sys, &irq),
            ("fault", "major".into())
        );
        assert_eq!(
            slot_name(prog::SOFTIRQ_BASE + 3, &sys, &irq),
            ("softirq", "net_rx".into())
        );
        assert_eq!(
            slot_name(prog::VEC_BASE, &sys, &irq),
            ("irq", "local_timer".into())
        );
        assert_eq!(
            slot_name(prog::IRQ_BASE + 4, &sys, &irq),
            ("irq", "4:ttyS0".into())
        );
    }

    #[test]
    fn the_sum_check_and_the_attributed_shares() {
        let s = Split {
            lines: vec![
                line("user", "user", 600),
                line("syscall", "read", 300),
                line("fault", "minor", 50),
                line("kernel-other", "unmeasured", 50),
            ],
            usage_ns: 1000,
            ..Split::default()
        };
        let c = s.check().unwrap();
        assert_eq!(c.measured_ns, 950);
        assert!((c.diff_pct + 5.0).abs() < 1e-9);
        assert!(!c.holds());
        assert_eq!(s.unnamed_kernel_ns(), 50);
        let (all, kernel) = s.attributed(0).unwrap();
        assert!((all - 95.0).abs() < 1e-9);
        assert!((kernel - 350.0 / 400.0 * 100.0).abs() < 1e-9);
        // Samples naming 20 ns of the unmeasured 50.
        let (all, _) = s.attributed(20).unwrap();
        assert!((all - 97.0).abs() < 1e-9);
        // A split that passes its usage names everything.
        let over = Split {
            lines: vec![line("user", "user", 1010)],
            usage_ns: 1000,
            ..Split::default()
        };
        assert!(over.check().unwrap().holds());
        assert_eq!(over.attributed(0).unwrap().0, 100.0);
        assert!(Split::default().check().is_none());
        // Ticks share user time: a quarter of its ticks in kernel mode.
        let mut s = Split {
            lines: vec![line("user", "user", 800), line("syscall", "read", 200)],
            usage_ns: 1000,
            ..Split::default()
        };
        s.share_user(25, 75);
        assert_eq!(s.class_ns("user"), 600);
        assert_eq!(
            s.line("kernel-other", "inside user time").unwrap().cpu_ns,
            200
        );
        assert_eq!(s.measured_ns(), 1000);
        assert_eq!(s.unnamed_kernel_ns(), 200);
        let (all, kernel) = s.attributed(0).unwrap();
        assert!((all - 80.0).abs() < 1e-9 && (kernel - 50.0).abs() < 1e-9);
    }

    /// A line above the cgroup's usage (a difference gone below zero, read unsigned) makes
    /// the split not ok and fails its sum check, which sums the printed lines without
    /// wrapping; unmeasured time past 1% of the usage makes it disturbed, with the dropped
    /// differences counted on the unmeasured line.
    #[test]
    fn an_impossible_line_is_not_ok_and_unmeasured_past_one_percent_is_disturbed() {
        let wrapped = Split {
            lines: vec![
                line("user", "user", 600),
                line("syscall", "rt_sigaction", u64::MAX - 400),
                line("syscall", "read", 800),
            ],
            usage_ns: 1000,
            ..Split::default()
        };
        assert_eq!(wrapped.impossible().len(), 1);
        assert_eq!(wrapped.measured_ns(), u64::MAX);
        assert!(!wrapped.check().unwrap().holds());
        let (q, why) = wrapped.quality();
        assert_eq!(q, Quality::Disturbed);
        assert!(
            why[0].contains("rt_sigaction") && why[0].contains("not ok"),
            "{why:?}"
        );

        let mut s = Split {
            lines: vec![line("user", "user", 700), line("syscall", "read", 285)],
            usage_ns: 1000,
            dropped: 3,
            ..Split::default()
        };
        s.close();
        let u = s.line("kernel-other", "unmeasured").unwrap();
        assert_eq!((u.count, u.cpu_ns), (3, 15));
        assert!(s.notes.iter().any(|n| n.starts_with("3 differences")));
        let (q, why) = s.quality();
        assert_eq!(q, Quality::Disturbed, "{why:?}");
        assert!(why[0].contains("1.5% of the usage is unmeasured (3 clock differences dropped)"));
        // Within 1%: ok, the dropped differences still shown.
        let mut s = Split {
            lines: vec![line("user", "user", 700), line("syscall", "read", 295)],
            usage_ns: 1000,
            dropped: 2,
            ..Split::default()
        };
        s.close();
        assert_eq!(s.quality(), (Quality::Ok, vec![]));
        assert_eq!(s.line("kernel-other", "unmeasured").unwrap().count, 2);
    }

    /// A sampled split: 100 of 1600 reads timed, 200 ns each with a spread, scaled to all
    /// 1600; the untimed calls' time that stayed in user comes out of it; the ticks' kernel
    /// share is taken of user as it was, less what the estimate took; the sum is kept.
    #[test]
    fn a_sampled_split_is_scaled_with_an_interval_and_keeps_its_sum() {
        let mut s = Split {
            lines: vec![
                Line {
                    timed: 100,
                    wait_ns: 10,
                    ..line("syscall", "read", 20_000)
                },
                line("user", "user", 800_000),
            ],
            usage_ns: 820_000,
            sample_period: 16,
            ..Split::default()
        };
        s.lines[0].count = 1600;
        let before = s.measured_ns();
        // Each timed call 200 ns ± 50 (var 2500): squares = n (mean² + var).
        let sq: BTreeMap<String, u64> = [("read".to_string(), 100 * (40_000 + 2_500))].into();
        let extra = s.estimate(&sq);
        assert_eq!(extra, 300_000);
        let r = s.line("syscall", "read").unwrap();
        assert_eq!((r.cpu_ns, r.wait_ns), (320_000, 160));
        // sd 50, n 100 of 1600: 1600 * 50 / 10 * sqrt(1 - 1/16) * 1.96.
        let ci = 1.96 * 1600.0 * 5.0 * (15.0f64 / 16.0).sqrt();
        assert!((r.cpu_ci_ns as f64 - ci).abs() < 2.0, "{}", r.cpu_ci_ns);
        assert_eq!(s.class_ns("user"), 500_000);
        assert_eq!(s.measured_ns(), before);
        // Half the ticks in kernel mode: half of user as it was (400 us) is kernel, of which
        // the estimate took 300.
        s.share_user_less(50, 50, extra);
        assert_eq!(s.class_ns("user"), 400_000);
        // An estimate that wants more than user holds is scaled down to it: no line passes
        // the usage, the sum is kept.
        let mut over = Split {
            lines: vec![
                Line {
                    timed: 10,
                    count: 160,
                    ..line("syscall", "read", 10_000)
                },
                line("user", "user", 50_000),
            ],
            usage_ns: 60_000,
            sample_period: 16,
            ..Split::default()
        };
        assert_eq!(over.estimate(&BTreeMap::new()), 50_000);
        assert_eq!(over.line("syscall", "read").unwrap().cpu_ns, 60_000);
        assert_eq!(over.class_ns("user"), 0);
        assert!(over.notes[0].contains("scaled down"));
        assert_eq!(
            s.line("kernel-other", "inside user time").unwrap().cpu_ns,
            100_000
        );
        assert_eq!(s.measured_ns(), before);
        s.close();
        assert!(s
            .notes
            .iter()
            .any(|n| n.starts_with("an estimate: one syscall in 16")));
        assert!(s
            .notes
            .iter()
            .any(|n| n.starts_with("estimate: syscall read 0.320 ms ±")
                && n.contains("100 of 1600 calls timed")));
    }

    /// A real run of dd in a fresh cgroup: its reads and writes, user time, the sum check.
    /// Needs root and BPF: skipped with the reason where they are missing.
    #[test]
    fn a_real_run_is_split_and_adds_up() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: the measured split needs root");
            return;
        }
        let argv: Vec<String> = "dd if=/dev/zero of=/dev/null bs=512 count=200000"
            .split(' ')
            .map(String::from)
            .collect();
        let (split, _, status) = match measure_command(&argv, Stdio3::Null) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        for l in &split.lines {
            eprintln!("{l:?}");
        }
        eprintln!("{:?} notes {:?}", split.check(), split.notes);
        assert_eq!(status, 0);
        let read = split.line("syscall", "read").expect("dd's reads");
        assert!(read.count >= 200_000 && read.cpu_ns > 0);
        assert!(split.line("syscall", "write").unwrap().count >= 200_000);
        assert!(split.class_ns("user") > 0);
        let c = split.check().expect("cpu.stat read");
        assert!(c.diff_pct.abs() < 10.0, "{c:?}");
    }
}
