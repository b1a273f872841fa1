//! Reading /proc and /sys for the conditions of a case: per-CPU time, this process's (and its
//! children's) CPU time, switches and migrations, PSI, CPU frequency. Parsers take text so
//! tests feed them fixtures.

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::Conditions;

/// CPU time per CPU from /proc/stat, in clock ticks: what a `conditions::Watch` differences.
pub type PerCpu = BTreeMap<usize, CpuTimes>;

/// One CPU's line of /proc/stat, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

/// Parse the per-CPU lines ("cpu0 ...") of /proc/stat. Busy is user + nice + system, the
/// time tasks ran (guest time is already inside user); interrupt and softirq time is left out:
/// it belongs to no process, and on loopback it is mostly the case's own packets. Idle is
/// idle + iowait; steal is its own field.
pub fn parse_stat(text: &str) -> PerCpu {
    let mut out = PerCpu::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(id) = name.strip_prefix("cpu") else {
            continue;
        };
        let Ok(id) = id.parse::<usize>() else {
            continue; // the "cpu" total line
        };
        let v: Vec<u64> = it.map(|x| x.parse().unwrap_or(0)).collect();
        let f = |i: usize| v.get(i).copied().unwrap_or(0);
        out.insert(
            id,
            CpuTimes {
                busy: f(0) + f(1) + f(2),
                idle: f(3) + f(4),
                steal: f(7),
            },
        );
    }
    out
}

/// Fields of /proc/PID/stat after the command name: utime, stime, cutime, cstime (ticks).
/// The command name may hold spaces and parentheses, so parse from the last ')'.
pub fn parse_pid_stat(text: &str) -> Option<PidStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, so index 11.
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    Some(PidStat {
        ppid: n(1)? as u32,
        utime: n(11)?,
        stime: n(12)?,
        cutime: n(13).unwrap_or(0),
        cstime: n(14).unwrap_or(0),
        processor: n(36).map(|p| p as usize),
        start: n(19).unwrap_or(0),
    })
}

/// The kernel's PF_KTHREAD, in /proc/PID/stat's flags (field 9).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Why a process `--pid` names cannot be counted, from its /proc/PID/stat: a zombie (it ran
/// to its end and waits for its parent), or a kernel thread (no user memory, no program).
/// None when it can be. Checked before anything is counted.
pub fn not_countable(pid: u32, stat: &str) -> Option<String> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = *f.first()?;
    // rest[0] is field 3 (state), so the flags (field 9) are index 6.
    let flags = f.get(6).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    if state == "Z" || state == "X" {
        Some(format!(
            "process {pid} has ended (a zombie waiting for its parent): there is nothing to count; give the PID of a running process"
        ))
    } else if flags & PF_KTHREAD != 0 {
        Some(format!(
            "process {pid} is a kernel thread: it runs no program to count; give the PID of a user process"
        ))
    } else {
        None
    }
}

/// `--pid PID` checked before counting: a process that runs a program (exit 2 otherwise, one
/// line naming why).
pub fn check_countable(pid: u32) -> anyhow::Result<()> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|_| {
        crate::error::usage(format!(
            "--pid {pid}: no such process; give the PID of a running process"
        ))
    })?;
    match not_countable(pid, &stat) {
        Some(why) => Err(crate::error::usage(format!("--pid {pid}: {why}"))),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PidStat {
    pub ppid: u32,
    pub utime: u64,
    pub stime: u64,
    pub cutime: u64,
    pub cstime: u64,
    /// The CPU the task last ran on.
    pub processor: Option<usize>,
    /// When the task started (clock ticks after boot): with the tid, it names one thread, since
    /// a tid is reused as soon as a thread exits.
    pub start: u64,
}

/// `nonvoluntary_ctxt_switches` from /proc/PID/status.
pub fn parse_involuntary(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `se.nr_migrations` from /proc/PID/sched (absent on kernels without SCHED_DEBUG).
pub fn parse_migrations(sched: &str) -> Option<u64> {
    sched.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.nr_migrations")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// `some avg10=` of a /proc/pressure file.
pub fn parse_psi_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix("avg10="))
        .and_then(|v| v.parse().ok())
}

/// Everything one end of a Watch reads.
#[derive(Debug, Clone, Default)]
pub struct ProcSnapshot {
    pub cpus: PerCpu,
    /// This process's CPU time including waited-for children, plus live children's (ticks).
    pub own_ticks: u64,
    /// Live threads of this process: (tid, start time) -> (ticks, last CPU).
    pub threads: BTreeMap<(u32, u64), (u64, Option<usize>)>,
    pub involuntary: Option<u64>,
    pub migrations: Option<u64>,
    pub psi: BTreeMap<String, f64>,
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

impl ProcSnapshot {
    pub fn take(cpus: &[usize]) -> anyhow::Result<ProcSnapshot> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let all = parse_stat(&stat);
        let cpus: PerCpu = all
            .into_iter()
            .filter(|(id, _)| cpus.contains(id))
            .collect();
        let me = std::process::id();
        let own = read("/proc/self/stat")
            .and_then(|t| parse_pid_stat(&t))
            .map(|s| s.utime + s.stime + s.cutime + s.cstime)
            .unwrap_or(0);
        let children = live_children_ticks(me);
        let mut threads = BTreeMap::new();
        let mut involuntary = Some(0u64);
        let mut migrations = Some(0u64);
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for e in dir.flatten() {
                let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
                    continue;
                };
                let base = e.path();
                if let Some(s) = read(base.join("stat")).and_then(|t| parse_pid_stat(&t)) {
                    threads.insert((tid, s.start), (s.utime + s.stime, s.processor));
                }
                let inv = read(base.join("status")).and_then(|t| parse_involuntary(&t));
                involuntary = involuntary.zip(inv).map(|(a, b)| a + b);
                let mig = read(base.join("sched")).and_then(|t| parse_migrations(&t));
                migrations = migrations.zip(mig).map(|(a, b)| a + b);
            }
        }
        // Exited threads' switches are kept in the process's own status line.
        if let Some(p) = read("/proc/self/status").and_then(|t| parse_involuntary(&t)) {
            involuntary = Some(involuntary.unwrap_or(0).max(p));
        }
        let mut psi = BTreeMap::new();
        for res in ["cpu", "memory", "io"] {
            if let Some(v) = read(format!("/proc/pressure/{res}"))
                .as_deref()
                .and_then(parse_psi_some_avg10)
            {
                psi.insert(res.to_string(), v);
            }
        }
        Ok(ProcSnapshot {
            cpus,
            own_ticks: own + children,
            threads,
            involuntary,
            migrations,
            psi,
        })
    }
}

/// CPU ticks of this process's live child processes (the gc lab's Go program, an echo
/// server started as a process): their time is the case's own, not interference.
fn live_children_ticks(me: u32) -> u64 {
    processes(Path::new("/"))
        .filter(|(pid, _, s)| *pid != me && s.ppid == me)
        .map(|(_, _, s)| s.utime + s.stime + s.cutime + s.cstime)
        .sum()
}

/// Every process under `<root>/proc`: pid, command name and its stat fields.
pub fn processes(root: &Path) -> impl Iterator<Item = (u32, String, PidStat)> {
    std::fs::read_dir(root.join("proc"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let text = read(e.path().join("stat"))?;
            let name = text[text.find('(')? + 1..text.rfind(')')?].to_string();
            Some((pid, name, parse_pid_stat(&text)?))
        })
}

/// Fill the interference fields of `c` from two snapshots `wall_s` apart.
pub fn fill(c: &mut Conditions, before: &ProcSnapshot, after: &ProcSnapshot, wall_s: f64) {
    let hz = ticks_per_second() as f64;
    let wall_ticks = (wall_s * hz).max(1.0);
    // Our own time: the process total (children included). Live threads tell which CPU it
    // fell on; what exited threads used is spread evenly over the case's CPUs.
    let own = after.own_ticks.saturating_sub(before.own_ticks) as f64;
    let mut own_on: BTreeMap<usize, f64> = BTreeMap::new();
    let mut placed = 0.0;
    for (tid, (t1, cpu)) in &after.threads {
        let t0 = before.threads.get(tid).map_or(0, |x| x.0);
        let d = t1.saturating_sub(t0) as f64;
        if let Some(cpu) = cpu {
            if after.cpus.contains_key(cpu) {
                *own_on.entry(*cpu).or_default() += d;
                placed += d;
            }
        }
    }
    // What exited threads (and children) used ran on some of the case's CPUs: give it to each
    // CPU in proportion to the busy time live threads do not explain there, so a worker that
    // exited on CPU 1 is not half counted on CPU 0.
    let busy_of = |cpu: &usize, a: &CpuTimes| {
        before
            .cpus
            .get(cpu)
            .map_or(0.0, |b| a.busy.saturating_sub(b.busy) as f64)
    };
    let headroom: BTreeMap<usize, f64> = after
        .cpus
        .iter()
        .map(|(cpu, a)| {
            let placed_here = own_on.get(cpu).copied().unwrap_or(0.0);
            (*cpu, (busy_of(cpu, a) - placed_here).max(0.0))
        })
        .collect();
    let total_headroom: f64 = headroom.values().sum();
    let unplaced = (own - placed).max(0.0);
    let n = after.cpus.len().max(1) as f64;
    let spread_on = |cpu: &usize| -> f64 {
        if total_headroom > 0.0 {
            let h = headroom.get(cpu).copied().unwrap_or(0.0);
            (unplaced * h / total_headroom).min(h.max(unplaced / n))
        } else {
            unplaced / n
        }
    };
    let mut steal = 0.0;
    let mut total = 0.0;
    for (cpu, a) in &after.cpus {
        let Some(b) = before.cpus.get(cpu) else {
            continue;
        };
        let busy = a.busy.saturating_sub(b.busy) as f64;
        let span = (a.total().saturating_sub(b.total()) as f64).max(wall_ticks);
        let mine = own_on.get(cpu).copied().unwrap_or(0.0) + spread_on(cpu);
        // Tick accounting rounds per CPU; one tick either way is not another process.
        let other = (busy - mine - 1.0).max(0.0);
        let pct = (100.0 * other / span).min(100.0);
        c.other_cpu_pct
            .insert(cpu.to_string(), (pct * 10.0).round() / 10.0);
        steal += a.steal.saturating_sub(b.steal) as f64;
        total += span;
    }
    c.other_cpu_max_pct = c
        .other_cpu_pct
        .values()
        .copied()
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    if total > 0.0 {
        c.steal_pct = Some(((1000.0 * steal / total).round()) / 10.0);
    }
    c.involuntary_switches = after
        .involuntary
        .zip(before.involuntary)
        .map(|(a, b)| a.saturating_sub(b));
    c.migrations = after
        .migrations
        .zip(before.migrations)
        .map(|(a, b)| a.saturating_sub(b));
}

/// USER_HZ, the unit of /proc/stat.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; a negative answer means "unknown".
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Mean of scaling_cur_freq over `cpus`, in MHz, where cpufreq exposes it.
pub fn mean_freq_mhz(cpus: &[usize]) -> Option<f64> {
    let khz: Vec<f64> = cpus
        .iter()
        .filter_map(|c| {
            read(format!(
                "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq"
            ))
        })
        .filter_map(|t| t.trim().parse::<f64>().ok())
        .collect();
    (!khz.is_empty()).then(|| (khz.iter().sum::<f64>() / khz.len() as f64 / 1000.0).round())
}

/// Boost state: cpufreq/boost (acpi-cpufreq, amd-pstate) or intel_pstate/no_turbo.
pub fn boost() -> Option<bool> {
    if let Some(t) = read("/sys/devices/system/cpu/cpufreq/boost") {
        return Some(t.trim() == "1");
    }
    read("/sys/devices/system/cpu/intel_pstate/no_turbo").map(|t| t.trim() == "0")
}

#[cfg(test)]
mod tests {
    #[test]
    fn zombies_and_kernel_threads_are_not_countable() {
        let kthreadd = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 25 0";
        let why = super::not_countable(2, kthreadd).unwrap();
        assert!(why.contains("kernel thread"), "{why}");
        let zombie = "77 (sh (x)) Z 1 77 77 0 -1 4227140 0 0 0 0 0 0 0 0 20 0 1 0 9 0";
        let why = super::not_countable(77, zombie).unwrap();
        assert!(why.contains("zombie"), "{why}");
        let user = "9 (a b) S 1 9 9 0 -1 4194560 0 0 0 0 3 1 0 0 20 0 1 0 9 0";
        assert_eq!(super::not_countable(9, user), None);
        assert_eq!(super::not_countable(9, "garbage"), None);
    }

    use super::*;

    const STAT: &str = "cpu  100 0 50 1000 5 0 0 7 0 0\n\
cpu0 60 0 30 500 2 1 1 3 0 0\n\
cpu1 40 0 20 500 3 0 0 4 0 0\n\
intr 1 2 3\n";

    #[test]
    fn proc_stat_per_cpu_lines() {
        let s = parse_stat(STAT);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[&0],
            CpuTimes {
                busy: 90,
                idle: 502,
                steal: 3
            }
        );
        assert_eq!(s[&1].busy, 60);
        assert_eq!(s[&1].steal, 4);
    }

    #[test]
    fn pid_stat_with_spaces_in_the_name() {
        let line = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 40 7 3 20 0 4 0 12345 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 \
                    0 0 0 17 1 0 0 0 0 0";
        let s = parse_pid_stat(line).unwrap();
        assert_eq!(s.ppid, 1);
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (250, 40, 7, 3));
        assert_eq!(s.processor, Some(1));
    }

    #[test]
    fn status_sched_and_psi() {
        let status =
            "Name:\tcostlab\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t42\n";
        assert_eq!(parse_involuntary(status), Some(42));
        let sched = "costlab (1, #threads: 1)\n---\nse.exec_start : 1.0\nse.nr_migrations : 17\n";
        assert_eq!(parse_migrations(sched), Some(17));
        let psi = "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_psi_some_avg10(psi), Some(12.5));
        assert_eq!(parse_psi_some_avg10("garbage"), None);
    }

    fn snap(busy: [u64; 2], own: u64, threads: &[(u32, u64, usize)]) -> ProcSnapshot {
        let mut cpus = PerCpu::new();
        for (i, b) in busy.iter().enumerate() {
            cpus.insert(
                i,
                CpuTimes {
                    busy: *b,
                    idle: 0,
                    steal: 0,
                },
            );
        }
        ProcSnapshot {
            cpus,
            own_ticks: own,
            threads: threads
                .iter()
                .map(|&(t, k, c)| ((t, 0), (k, Some(c))))
                .collect(),
            involuntary: Some(0),
            migrations: Some(0),
            psi: BTreeMap::new(),
        }
    }

    #[test]
    fn other_processes_share_is_busy_minus_ours() {
        // 1 s at 100 Hz. CPU 0: our thread ran all of it. CPU 1: we ran half, someone else
        // the other half.
        let before = snap([0, 0], 0, &[(10, 0, 0), (11, 0, 1)]);
        let mut after = snap([100, 100], 150, &[(10, 100, 0), (11, 50, 1)]);
        after.cpus.get_mut(&0).unwrap().idle = 0;
        let mut c = Conditions::default();
        fill(&mut c, &before, &after, 1.0);
        assert!(c.other_cpu_pct["0"] <= 1.0, "{:?}", c.other_cpu_pct);
        assert!(
            (c.other_cpu_pct["1"] - 49.0).abs() < 1.5,
            "{:?}",
            c.other_cpu_pct
        );
        assert_eq!(c.other_cpu_max_pct, c.other_cpu_pct.get("1").copied());
    }

    #[test]
    fn a_reused_tid_is_another_thread() {
        // Before: an old thread 10 (started at tick 5) had run 90 ticks. After: it exited and a
        // new thread 10 (started at tick 500) ran 100 ticks on CPU 0. The new one's time is
        // its own, not 100 - 90.
        let mut before = snap([0, 0], 0, &[]);
        before.threads.insert((10, 5), (90, Some(0)));
        let mut after = snap([100, 0], 100, &[]);
        after.threads.insert((10, 500), (100, Some(0)));
        let mut c = Conditions::default();
        fill(&mut c, &before, &after, 1.0);
        assert_eq!(c.other_cpu_pct["0"], 0.0, "{:?}", c.other_cpu_pct);
    }

    #[test]
    fn an_exited_worker_is_placed_where_busy_time_is_unexplained() {
        // Worker A (live) ran 70 ticks on CPU 0; worker B exited after 70 ticks on CPU 1.
        let before = snap([0, 0], 0, &[(1, 0, 0)]);
        let after = snap([70, 70], 140, &[(1, 70, 0)]);
        let mut c = Conditions::default();
        fill(&mut c, &before, &after, 0.7);
        assert_eq!(c.other_cpu_max_pct, Some(0.0), "{:?}", c.other_cpu_pct);
        // Stacked on CPU 0, CPU 1 idle: nothing of ours lands on CPU 1, nothing other on 0.
        let after = snap([140, 0], 140, &[]);
        let mut c = Conditions::default();
        fill(&mut c, &snap([0, 0], 0, &[]), &after, 1.4);
        assert_eq!(c.other_cpu_max_pct, Some(0.0), "{:?}", c.other_cpu_pct);
    }

    #[test]
    fn exited_threads_time_is_spread_over_the_case_cpus() {
        // No live thread left (a team joined), but the process used 200 ticks: all ours.
        let before = snap([0, 0], 0, &[]);
        let after = snap([100, 100], 200, &[]);
        let mut c = Conditions::default();
        fill(&mut c, &before, &after, 1.0);
        assert_eq!(c.other_cpu_max_pct, Some(0.0));
    }
}
