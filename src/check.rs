//! `costlab check`: what on this machine will disturb figures, each with its fix, in the manner
//! of pyperf's `system show`; `--tune` applies the safe fixes around a command and restores them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use crate::cli::CheckArgs;
use costlab_core::error::usage;
use costlab_core::machine::restore::{self, SettingGuard};
use costlab_core::measure::procstat;

/// How a finding bears on measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fine for measuring.
    Ok,
    /// Will disturb or bias figures: fix it, or read figures with it in mind.
    Warn,
    /// A fact worth knowing; no fix.
    Info,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub item: String,
    pub value: String,
    pub level: Level,
    /// What to do about it (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

fn finding(item: &str, value: impl Into<String>, level: Level, fix: impl Into<String>) -> Finding {
    Finding {
        item: item.to_string(),
        value: value.into(),
        level,
        fix: fix.into(),
    }
}

/// A process that used CPU while we looked.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Busy {
    pub pid: u32,
    pub name: String,
    /// % of one CPU over the window.
    pub cpu_pct: f64,
}

/// Where /proc and /sys are: the real ones, or a fixture tree in tests.
pub struct Root(pub PathBuf);

impl Root {
    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(rel.trim_start_matches('/')))
            .ok()
            .map(|s| s.trim().to_string())
    }
}

/// Process CPU ticks by pid, with names, from `<root>/proc`.
fn process_ticks(root: &Path) -> BTreeMap<u32, (String, u64)> {
    procstat::processes(root)
        .map(|(pid, name, s)| (pid, (name, s.utime + s.stime)))
        .collect()
}

/// Processes whose CPU use between two snapshots `secs` apart is above `min_pct` of a CPU.
pub fn busy_between(
    before: &BTreeMap<u32, (String, u64)>,
    after: &BTreeMap<u32, (String, u64)>,
    secs: f64,
    hz: f64,
    min_pct: f64,
    me: u32,
) -> Vec<Busy> {
    let mut busy: Vec<Busy> = after
        .iter()
        .filter(|(pid, _)| **pid != me)
        .filter_map(|(pid, (name, t1))| {
            let t0 = before.get(pid).map_or(*t1, |x| x.1);
            let pct = 100.0 * t1.saturating_sub(t0) as f64 / hz / secs;
            (pct >= min_pct).then(|| Busy {
                pid: *pid,
                name: name.clone(),
                cpu_pct: (pct * 10.0).round() / 10.0,
            })
        })
        .collect();
    busy.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    busy
}

/// Everything `check` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub window_s: f64,
    pub busy: Vec<Busy>,
    pub findings: Vec<Finding>,
}

/// Look at the machine for `window` (processes' CPU use and steal are rates).
pub fn inspect(root: &Root, window: Duration, need_bytes: u64) -> Report {
    let hz = procstat::ticks_per_second() as f64;
    let stat0 = root.read("proc/stat").unwrap_or_default();
    let vm0 = root.read("proc/vmstat").unwrap_or_default();
    let p0 = process_ticks(&root.0);
    let t = Instant::now();
    std::thread::sleep(window);
    let secs = t.elapsed().as_secs_f64();
    let p1 = process_ticks(&root.0);
    let stat1 = root.read("proc/stat").unwrap_or_default();
    let vm1 = root.read("proc/vmstat").unwrap_or_default();
    let busy = busy_between(&p0, &p1, secs, hz, 5.0, std::process::id());
    let mut f = Vec::new();

    if busy.is_empty() {
        f.push(finding(
            "busy processes",
            "none above 5% of a CPU",
            Level::Ok,
            "",
        ));
    } else {
        let list: Vec<String> = busy
            .iter()
            .take(5)
            .map(|b| format!("{} (pid {}) {:.0}%", b.name, b.pid, b.cpu_pct))
            .collect();
        f.push(finding(
            "busy processes",
            list.join(", "),
            Level::Warn,
            "stop them, or wait: figures taken beside them will be marked disturbed",
        ));
    }

    // Steal over the window, all CPUs.
    let (s0, s1) = (procstat::parse_stat(&stat0), procstat::parse_stat(&stat1));
    let (mut steal, mut total) = (0u64, 0u64);
    for (cpu, a) in &s1 {
        if let Some(b) = s0.get(cpu) {
            steal += a.steal.saturating_sub(b.steal);
            total += a.total().saturating_sub(b.total());
        }
    }
    let steal_pct = if total > 0 {
        100.0 * steal as f64 / total as f64
    } else {
        0.0
    };
    f.push(if steal_pct > 2.0 {
        finding(
            "steal",
            format!("{steal_pct:.1}% of CPU time taken by the hypervisor"),
            Level::Warn,
            "another guest shares these physical CPUs: measure at a quieter time, or on dedicated (pinned) vCPUs",
        )
    } else {
        finding("steal", format!("{steal_pct:.1}%"), Level::Ok, "")
    });

    // Frequency scaling.
    let governors: Vec<String> = (0..1024)
        .map_while(|c| {
            root.read(&format!(
                "sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ))
        })
        .collect();
    if governors.is_empty() {
        f.push(finding(
            "governor",
            "no cpufreq (a VM, or the host controls frequency)",
            Level::Info,
            "",
        ));
    } else {
        let mut kinds = governors.clone();
        kinds.sort();
        kinds.dedup();
        let ok = kinds.iter().all(|g| g == "performance");
        f.push(finding(
            "governor",
            kinds.join(","),
            if ok { Level::Ok } else { Level::Warn },
            if ok {
                ""
            } else {
                "costlab check --tune (sets performance for the command, then restores)"
            },
        ));
    }
    let boost = root
        .read("sys/devices/system/cpu/cpufreq/boost")
        .map(|v| v == "1")
        .or_else(|| {
            root.read("sys/devices/system/cpu/intel_pstate/no_turbo")
                .map(|v| v == "0")
        });
    f.push(match boost {
        Some(true) => finding(
            "boost",
            "on",
            Level::Warn,
            "costlab check --tune (turbo makes the clock depend on temperature and on the other cores' load)",
        ),
        Some(false) => finding("boost", "off", Level::Ok, ""),
        None => finding("boost", "not exposed", Level::Info, ""),
    });

    // SMT: siblings share a core's caches and ports.
    match root.read("sys/devices/system/cpu/smt/active").as_deref() {
        Some("1") => {
            let busy_sib = smt_busy_siblings(root, &s0, &s1);
            f.push(finding(
                "SMT",
                if busy_sib.is_empty() {
                    "on; siblings idle".to_string()
                } else {
                    format!("on; busy sibling CPUs: {}", busy_sib.join(", "))
                },
                if busy_sib.is_empty() {
                    Level::Info
                } else {
                    Level::Warn
                },
                "pin with --cpus to one thread per core, or keep siblings idle",
            ));
        }
        Some(_) => f.push(finding("SMT", "off", Level::Ok, "")),
        None => f.push(finding("SMT", "not exposed", Level::Info, "")),
    }

    // Memory management.
    let thp = root
        .read("sys/kernel/mm/transparent_hugepage/enabled")
        .and_then(|s| bracketed(&s));
    let defrag = root
        .read("sys/kernel/mm/transparent_hugepage/defrag")
        .and_then(|s| bracketed(&s));
    f.push(finding(
        "THP",
        format!(
            "enabled={}, defrag={}",
            thp.as_deref().unwrap_or("?"),
            defrag.as_deref().unwrap_or("?")
        ),
        if thp.as_deref() == Some("never") {
            Level::Warn
        } else {
            Level::Info
        },
        if thp.as_deref() == Some("never") {
            "the mem lab's thp cases cannot get huge pages: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"
        } else {
            "with defrag=always or madvise a THP fault may compact memory: the mem lab reports the huge fraction it got"
        },
    ));
    match root.read("proc/sys/kernel/numa_balancing").as_deref() {
        Some("0") => f.push(finding("numa_balancing", "0", Level::Ok, "")),
        Some(v) => f.push(finding(
            "numa_balancing",
            v,
            Level::Warn,
            "the kernel moves pages and tasks while you measure: costlab check --tune (sets 0, then restores)",
        )),
        None => f.push(finding("numa_balancing", "not built in", Level::Info, "")),
    }
    if let Some(v) = root.read("proc/sys/vm/zone_reclaim_mode") {
        f.push(finding(
            "zone_reclaim_mode",
            v.clone(),
            if v == "0" { Level::Ok } else { Level::Warn },
            if v == "0" {
                ""
            } else {
                "reclaim on the local node before going remote skews NUMA figures: sysctl vm.zone_reclaim_mode=0"
            },
        ));
    }
    let irqbalance = p1.values().any(|(n, _)| n == "irqbalance");
    f.push(finding(
        "irqbalance",
        if irqbalance { "running" } else { "not running" },
        if irqbalance { Level::Warn } else { Level::Ok },
        if irqbalance {
            "it moves interrupts between CPUs during a run: systemctl stop irqbalance (the pin lab places IRQs itself)"
        } else {
            ""
        },
    ));
    if let Some(v) = root.read("proc/sys/kernel/nmi_watchdog") {
        f.push(finding(
            "NMI watchdog",
            v.clone(),
            if v == "0" { Level::Ok } else { Level::Info },
            if v == "0" {
                ""
            } else {
                "it takes a hardware counter and interrupts each CPU periodically: sysctl kernel.nmi_watchdog=0"
            },
        ));
    }
    let swap = |t: &str, k: &str| -> u64 {
        t.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let swapped = (swap(&vm1, "pswpin ") + swap(&vm1, "pswpout "))
        .saturating_sub(swap(&vm0, "pswpin ") + swap(&vm0, "pswpout "));
    f.push(if swapped > 0 {
        finding(
            "swap activity",
            format!("{swapped} pages in {secs:.1} s"),
            Level::Warn,
            "memory is short: close programs or measure smaller blocks",
        )
    } else {
        finding("swap activity", "none", Level::Ok, "")
    });
    let meminfo = root.read("proc/meminfo").unwrap_or_default();
    let kib = |k: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    if let Some(avail) = kib("MemAvailable:") {
        let avail = avail * 1024;
        let ok = avail >= need_bytes;
        f.push(finding(
            "memory available",
            format!(
                "{} available, the planned run needs about {}",
                costlab_core::measure::sizes::human_size(avail),
                costlab_core::measure::sizes::human_size(need_bytes)
            ),
            if ok { Level::Ok } else { Level::Warn },
            if ok {
                ""
            } else {
                "free memory, or pass smaller --sizes / --live"
            },
        ));
    }
    for res in ["cpu", "memory", "io"] {
        if let Some(v) = root
            .read(&format!("proc/pressure/{res}"))
            .as_deref()
            .and_then(procstat::parse_psi_some_avg10)
        {
            if v > 5.0 {
                f.push(finding(
                    &format!("PSI {res}"),
                    format!("some avg10 = {v:.1}%"),
                    Level::Warn,
                    format!("tasks waited for {res} in the last 10 s: something competes for it"),
                ));
            }
        }
    }
    Report {
        window_s: secs,
        busy,
        findings: f,
    }
}

/// "always [madvise] never" -> "madvise".
fn bracketed(s: &str) -> Option<String> {
    let a = s.find('[')?;
    let b = s[a..].find(']')? + a;
    Some(s[a + 1..b].to_string())
}

/// SMT sibling CPUs that were busy (over 20%) during the window.
fn smt_busy_siblings(
    root: &Root,
    s0: &costlab_core::measure::procstat::PerCpu,
    s1: &costlab_core::measure::procstat::PerCpu,
) -> Vec<String> {
    let mut out = Vec::new();
    for (cpu, a) in s1 {
        let Some(sibs) = root.read(&format!(
            "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
        )) else {
            continue;
        };
        let Ok(list) = costlab_core::measure::cpus::parse_cpu_list(&sibs) else {
            continue;
        };
        if list.len() < 2 {
            continue;
        }
        if let Some(b) = s0.get(cpu) {
            let busy = a.busy.saturating_sub(b.busy) as f64;
            let tot = a.total().saturating_sub(b.total()).max(1) as f64;
            if busy / tot > 0.2 {
                out.push(cpu.to_string());
            }
        }
    }
    out
}

/// The findings as a table for the terminal.
pub fn render(r: &Report) -> String {
    let mut rows = Vec::new();
    for f in &r.findings {
        let mark = match f.level {
            Level::Ok => "ok",
            Level::Warn => "WARN",
            Level::Info => "info",
        };
        rows.push(vec![
            f.item.clone(),
            mark.to_string(),
            f.value.clone(),
            f.fix.clone(),
        ]);
    }
    let mut out = format!(
        "what may disturb figures on this machine (watched for {:.1} s)\n",
        r.window_s
    );
    out.push_str(&costlab_history::report::table::render(
        &["item", "", "state", "fix"],
        &rows,
    ));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !r.busy.is_empty() {
        out.push_str("busy processes (CPU % of one CPU while we watched):\n");
        for b in r.busy.iter().take(10) {
            out.push_str(&format!(
                "  {:>6}  {:<20} {:>5.0}%\n",
                b.pid, b.name, b.cpu_pct
            ));
        }
    }
    let warns = r.findings.iter().filter(|f| f.level == Level::Warn).count();
    out.push_str(&if warns == 0 {
        "nothing here should disturb costlab's figures\n".to_string()
    } else {
        format!("{warns} item(s) may disturb figures; figures taken meanwhile carry their conditions and verdicts\n")
    });
    out
}

/// The safe settings `--tune` applies: governor performance, boost off, numa_balancing off.
/// Returns the guards (dropping them restores) and a note per change.
pub fn tune() -> Result<(Vec<SettingGuard>, Vec<String>)> {
    if !rustix::process::geteuid().is_root() {
        return Err(usage(
            "--tune changes system settings and needs root: run it as root, or drop --tune",
        ));
    }
    let mut guards = Vec::new();
    let mut notes = Vec::new();
    let mut set = |path: PathBuf, value: &str, what: String| -> Result<()> {
        if !path.exists() {
            return Ok(());
        }
        let old = restore::read_setting(&path)?;
        if old == value {
            return Ok(());
        }
        guards.push(restore::change_setting(&path, value, &what)?);
        notes.push(format!("{what}: {old} -> {value} for the command"));
        Ok(())
    };
    for c in 0..1024 {
        let p = PathBuf::from(format!(
            "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
        ));
        if !p.exists() {
            if !Path::new(&format!("/sys/devices/system/cpu/cpu{c}")).exists() {
                break;
            }
            continue;
        }
        set(p, "performance", format!("CPU {c} governor"))?;
    }
    set(
        PathBuf::from("/sys/devices/system/cpu/cpufreq/boost"),
        "0",
        "boost".into(),
    )?;
    set(
        PathBuf::from("/sys/devices/system/cpu/intel_pstate/no_turbo"),
        "1",
        "turbo (intel_pstate no_turbo)".into(),
    )?;
    set(
        PathBuf::from("/proc/sys/kernel/numa_balancing"),
        "0",
        "numa_balancing".into(),
    )?;
    if notes.is_empty() {
        notes.push(
            "tune: nothing to change here (no cpufreq governor or boost control exposed, numa_balancing already off or absent)"
                .to_string(),
        );
    }
    Ok((guards, notes))
}

/// `costlab check [--json FILE] [--tune -- COMMAND...]`.
pub fn command(args: &CheckArgs) -> Result<()> {
    let need = match &args.need {
        Some(t) => costlab_core::measure::sizes::parse_size(t)?,
        None => 4 << 30,
    };
    if args.tune {
        if args.command.is_empty() {
            return Err(usage(
                "--tune needs a command after `--`, e.g. costlab check --tune -- costlab mem latency; or use costlab run --tune",
            ));
        }
        let (guards, notes) = tune()?;
        for n in &notes {
            eprintln!("costlab check: {n}");
        }
        let status = std::process::Command::new(&args.command[0])
            .args(&args.command[1..])
            .status();
        drop(guards);
        for n in restore::restored_notes() {
            eprintln!("costlab check: {n}");
        }
        let status = status.map_err(|e| {
            usage(format!(
                "cannot run '{}': {e}; give a command on PATH after `--`",
                args.command[0]
            ))
        })?;
        if !status.success() {
            anyhow::bail!("the tuned command exited with {status}");
        }
        return Ok(());
    }
    let report = inspect(&Root(PathBuf::from("/")), Duration::from_millis(1000), need);
    let text = render(&report);
    match args.json.as_deref() {
        Some("-") => {
            eprint!("{text}");
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
                .map_err(|e| usage(format!("cannot write --json {path}: {e}")))?;
            print!("{text}");
        }
        None => print!("{text}"),
    }
    let warns: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| {
            if f.fix.is_empty() {
                format!("{}: {}", f.item, f.value)
            } else {
                format!("{}: {} (fix: {})", f.item, f.value, f.fix)
            }
        })
        .collect();
    if args.strict && !warns.is_empty() {
        for w in &warns {
            eprintln!("costlab: strict: WARN {w}");
        }
        return Err(anyhow::Error::new(costlab_core::error::Gate {
            what: "WARN findings (--strict)",
            lines: warns,
            status: 3,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_processes_are_ranked_and_self_is_left_out() {
        let before: BTreeMap<u32, (String, u64)> = [
            (10, ("stress-ng-cpu".to_string(), 100)),
            (11, ("bash".to_string(), 5)),
            (12, ("costlab".to_string(), 0)),
        ]
        .into();
        let after: BTreeMap<u32, (String, u64)> = [
            (10, ("stress-ng-cpu".to_string(), 200)),
            (11, ("bash".to_string(), 6)),
            (12, ("costlab".to_string(), 100)),
            (13, ("new".to_string(), 50)),
        ]
        .into();
        let b = busy_between(&before, &after, 1.0, 100.0, 5.0, 12);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].name, "stress-ng-cpu");
        assert_eq!(b[0].cpu_pct, 100.0);
    }

    #[test]
    fn a_fixture_machine_is_read_with_fixes() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("proc/stat", "cpu0 10 0 10 100 0 0 0 0\n");
        w("proc/sys/kernel/numa_balancing", "1\n");
        w("proc/sys/vm/zone_reclaim_mode", "0\n");
        w(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        w(
            "sys/kernel/mm/transparent_hugepage/defrag",
            "[always] defer madvise never\n",
        );
        w(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave\n",
        );
        w("sys/devices/system/cpu/cpufreq/boost", "1\n");
        w("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 1024 kB\n");
        w(
            "proc/42/stat",
            "42 (irqbalance) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 1 1",
        );
        let r = inspect(
            &Root(d.path().to_path_buf()),
            Duration::from_millis(10),
            1 << 30,
        );
        let get = |item: &str| r.findings.iter().find(|f| f.item == item).unwrap().clone();
        assert_eq!(get("governor").level, Level::Warn);
        assert_eq!(get("governor").value, "powersave");
        assert_eq!(get("boost").level, Level::Warn);
        assert_eq!(get("numa_balancing").level, Level::Warn);
        assert_eq!(get("zone_reclaim_mode").level, Level::Ok);
        assert_eq!(get("THP").value, "enabled=madvise, defrag=always");
        assert_eq!(get("irqbalance").value, "running");
        assert_eq!(get("memory available").level, Level::Warn);
        assert!(render(&r).contains("item(s) may disturb figures"));
    }
}
