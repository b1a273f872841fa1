//! The measured split of one run (its lines, the cgroup's usage to check them against), its
//! sum check and verdict, and what the reader makes of a sampled split (the estimate and its
//! interval), the unmeasured rest and the other tasks' cost.

use std::collections::BTreeMap;

use costlab_core::model::Quality;
use serde::{Deserialize, Serialize};

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
    /// A syscall's calls (or a minor fault kind's faults) by the time since the last of its
    /// kind on the same CPU (since the split's start there for the first), in
    /// `prog::gaps::BOUNDS`' buckets: each the calls and the sum of their gaps, ns (the timed
    /// calls only, where the split is sampled). Before 2026-12-07 a split kept `gaps` here, by
    /// the user time before each call: such a file is read without it (no call priced cold).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since_same: Vec<[u64; 2]>,
    /// The page cache's work done inside this syscall (`prog::pages`): pages taken in (not by
    /// a write), folios taken out, bytes sent to a disk to be written.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pages_in: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folios_dropped: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub written_back: u64,
    /// Interrupts sent to another CPU inside this syscall (a wake-up of a task asleep on an
    /// idle CPU, mostly), or inside this kind of user fault (a copy on write's TLB shootdown).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ipis_sent: u64,
    /// Waits inside it that ended on a CPU woken from a halt (the wakee's switch back in).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub halted_in: u64,
    /// ext4 inode allocations inside it, the buffers touched inside them, and the recently
    /// deleted inodes they passed over (`measured::inodes`: from the touches, calibrated).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inode_windows: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inode_touches: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inodes_passed: u64,
    /// Pages it read from files of at most 32 KiB (`prog::pages::small_read`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub small_pages: u64,
    /// Page-cache lookups inside it (a cached read's, of any file), each running the small
    /// files' program: its cost is taken out at `TracerCost::lookup`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookups: u64,
    /// The components of the paths the call walked (a stat family line: `prog::paths`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub path_components: u64,
    /// Page faults on the program's memory the kernel took inside it (a read into a buffer
    /// not touched yet: `prog::pages::kernel_fault`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_faults: u64,
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
    /// Tracked tasks found running on a CPU whose switch into them was not traced, joined at
    /// their next event there (`prog::LATE_JOINS`): the time before it is unmeasured.
    #[serde(default)]
    pub late_joins: u64,
    /// Syscalls of tasks outside the cgroup while the split ran (each took the traced path).
    #[serde(default)]
    pub others_syscalls: u64,
    /// One syscall in this many of each kind was timed (0 or 1: every call).
    #[serde(default)]
    pub sample_period: u32,
    /// The period of the cpu-clock ticks that shared the user class, ns (0 where unset:
    /// counts saved before it was chosen per program, which had the longest; read it through
    /// `tick_period`).
    #[serde(default)]
    pub tick_period_ns: u64,
    /// Run time the kernel charged a task for before the split first saw it (from its last
    /// update to the split's first event of it, charged at the next update), left out of
    /// `usage_ns`, ns: for a price, costlab's child moving itself into the cgroup (its write
    /// to cgroup.procs) before its exec. (`prog::JOINED_BEFORE`.)
    #[serde(default)]
    pub joined_before_ns: u64,
}

/// The least period of those ticks, ns. A tick costs a busy CPU of this VM about 2.3% at a
/// 1 ms period. At 250 us a python start's usage grew by 10 ms and only 4.3 ms of it was
/// taken out as the tracer's; at 500 us its net kernel time (48 ms) stayed within the rounds
/// at 4 ms (41-48 ms), and so the shortest is 500 us.
pub const SHORTEST_TICK_NS: u64 = 500_000;
/// How many ticks the user class of a program should get, where the period allows: a share
/// near 10% from 200 ticks is within 4 points (95%); from the 1-5 ticks a 30 ms program got at
/// the longest period, anything from 1% to 75%.
pub const TICKS_WANTED: u64 = 200;

/// The tick period for a program whose untraced run took `user_ns` of user time (None: not
/// known, the longest): `TICKS_WANTED` ticks over it, within `SHORTEST_TICK_NS` and the
/// longest, in whole 50 us.
pub fn tick_period_for(user_ns: Option<u64>) -> u64 {
    let longest = super::prog::USER_TICK_PERIOD_NS;
    match user_ns {
        Some(ns) if ns > 0 => {
            let p = (ns / TICKS_WANTED).clamp(SHORTEST_TICK_NS, longest);
            p / 50_000 * 50_000
        }
        _ => longest,
    }
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
    /// Leave out of the usage what the kernel charged tasks for before the split first saw
    /// them (`joined_before_ns`), with a note where there was any.
    pub fn leave_out_before_join(&mut self, ns: u64) {
        self.joined_before_ns = ns;
        if ns > 0 && self.usage_ns > 0 {
            self.usage_ns = self.usage_ns.saturating_sub(ns);
            self.notes.push(format!(
                "the cgroup's usage less {} charged to its tasks before the split first saw them (costlab's child moving itself into the cgroup, before the program's exec: the kernel charges what ran since its last update to the cgroup the task is in at the next)",
                costlab_core::measure::units::human_ns(ns as f64)
            ));
        }
    }

    /// ns on CPU in the measured classes (every line but the unmeasured rest).
    pub fn measured_ns(&self) -> u64 {
        self.lines
            .iter()
            .filter(|l| !(l.class == "kernel-other" && l.event == "unmeasured"))
            .fold(0u64, |a, l| a.saturating_add(l.cpu_ns))
    }

    /// The period of the ticks that shared the user class, ns (0, unset: the longest).
    pub fn tick_period(&self) -> u64 {
        match self.tick_period_ns {
            0 => super::prog::USER_TICK_PERIOD_NS,
            p => p,
        }
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
    /// The 95% interval's half-width of `kernel_ns`, ns: the usage is exact, so it is the
    /// user class's, whose estimates are the kernel-other found inside user time (the
    /// cpu-clock ticks) and, in a sampled split, the untimed calls' time taken out of it;
    /// the two are independent, so their root sum of squares.
    pub fn kernel_ci_ns(&self) -> u64 {
        let ci =
            |class: &str, event: &str| self.line(class, event).map_or(0.0, |l| l.cpu_ci_ns as f64);
        let (user, inside) = (ci("user", "user"), ci("kernel-other", "inside user time"));
        (user * user + inside * inside).sqrt() as u64
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
        // The kernel's share of the user class, from few ticks: Jeffreys' estimate of a
        // proportion, (k + 1/2) / (n + 1), which a handful of ticks that all found the task
        // in the kernel (a short, kernel-heavy run) does not turn into "no user time at all".
        let ticks = (kernel + user) as f64 + 1.0;
        let share = (kernel as f64 + 0.5) / ticks;
        let whole = (before as f64 * share) as u64;
        let part = whole.saturating_sub(extra).min(u.cpu_ns);
        u.cpu_ns -= part;
        // A proportion from few ticks is loose: its 95% interval, as time.
        let ci = (before as f64 * 1.96 * (share * (1.0 - share) / ticks).sqrt()) as u64;
        self.lines.push(Line {
            class: "kernel-other".into(),
            event: "inside user time".into(),
            count: kernel,
            cpu_ns: part,
            cpu_ci_ns: ci,
            ..Line::default()
        });
        self.notes.push(format!(
            "{kernel} of {} cpu-clock ticks in user time found the task in the kernel (entry and exit paths, signals, returns from preemption): that share of user time is kernel-other, {:.3} ms ± {:.3} ms (95%)",
            kernel + user,
            part as f64 / 1e6,
            ci as f64 / 1e6
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
        if self.late_joins > 0 {
            let times = match self.late_joins {
                1 => "once".to_string(),
                n => format!("{n} times"),
            };
            self.notes.push(format!(
                "{times} a tracked task was found running on a CPU where no switch into it was traced (the kernel showed it leave, not come back): it was taken up again at its next syscall, fault or interrupt there, in the class it left in, and its time before that is on the unmeasured line"
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

    /// The calls on the syscall lines named in `names` (`pricing::EXECS`, `pricing::MMAPS` ...).
    pub fn calls(&self, names: &[&str]) -> u64 {
        self.lines
            .iter()
            .filter(|l| l.class == "syscall" && names.contains(&l.event.as_str()))
            .map(|l| l.count)
            .sum()
    }

    /// The line of `class`/`event`.
    pub fn line(&self, class: &str, event: &str) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| l.class == class && l.event == event)
    }
}

/// What the tracer costs per event, measured beside the traced run (`verify::overhead`): a
/// syscall, a user fault, a switch (inside the syscall that waited), and its cpu-clock
/// tick's interrupts over the run (on the local timer's line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TracerCost {
    pub syscall: f64,
    pub fault: f64,
    /// A wait back on a CPU that had halted (the line's `halted_in`).
    pub switch: f64,
    /// Any other wait: inside the program's cgroup (absent in a price stored before it was
    /// measured apart: every wait at `switch`).
    #[serde(default)]
    pub switch_local: Option<f64>,
    pub tick_ns: f64,
    /// A buffer touch inside an inode allocation (`measured::inodes`' calibration).
    #[serde(default)]
    pub touch: f64,
    /// A page-cache lookup of a cached read (`verify::overhead`'s lookup loop).
    #[serde(default)]
    pub lookup: f64,
    /// A stat family call's path read and its components counted (`prog::paths`; the
    /// overhead's path loop).
    #[serde(default)]
    pub path: f64,
    /// An mmap beyond its syscall's cost (the sampler's side-band record: the overhead's
    /// mmap loop).
    #[serde(default)]
    pub mmap: f64,
    /// A stat's first touch of an inode, its insert into the run's set (the overhead's inode
    /// loop), and the run's count of them: shared over the stat lines by their counts.
    #[serde(default)]
    pub inode: f64,
    #[serde(default)]
    pub inodes: u64,
    /// The run's file faults on a window new to it (`prog::FAULT_FILE_FIRST`), each an insert
    /// into the same set at the same cost: on the file faults' line.
    #[serde(default)]
    pub windows: u64,
    /// A user fault the page cache served, beyond `fault` (the overhead's file fault loop):
    /// on the `fault minor:file` line.
    #[serde(default)]
    pub file_fault: f64,
    /// A child forked that execs, beyond its counted events (the overhead's exec loop): on
    /// the execve lines.
    #[serde(default)]
    pub exec: f64,
}
