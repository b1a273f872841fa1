//! Where the counts come from: a file saved by --save-counts, a running process (--pid), or a
//! command counted here and then run untraced for the times the price is checked against.

use std::path::Path;

use anyhow::{Context, Result};

use crate::args::PriceArgs;
use crate::count::{self, Counts, Stdio3, Times};
use crate::gowhatif;
use crate::saved::SavedCounts;
use costlab_core::error::usage;
use costlab_core::measure::units::human_ns;
use costlab_history::report::Outcome;
use costlab_lab::Ctx;

/// Which of the three sources the arguments name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source<'a> {
    Saved(&'a SavedCounts),
    Pid(u32),
    Command,
}

/// What was counted, the command line as shown, and the untraced runs' times.
pub struct Counted {
    pub counts: Counts,
    pub cmdline: String,
    pub untraced: Vec<Times>,
    /// Whether every untraced run's user and system time came from a cgroup of its own
    /// (`untraced_runs`), not from rusage.
    pub untraced_by_cgroup: bool,
    /// A Go program's GC share from its runtime (Some(None): Go, but no GC cycle ran).
    pub go_gc: Option<Option<f64>>,
    /// A Go program's GC cycles as its runtime traced them (the first untraced run's).
    pub go_cycles: Vec<crate::verify::gogc::Cycle>,
}

/// The source of counts: --from first, then --pid, then the command after `--`.
pub fn choose<'a>(args: &PriceArgs, from: Option<&'a SavedCounts>) -> Result<Source<'a>> {
    match (from, args.pid, args.command.is_empty()) {
        (Some(s), _, _) => Ok(Source::Saved(s)),
        (None, Some(pid), _) => Ok(Source::Pid(pid)),
        (None, None, true) => Err(usage(
            "no command to price: give one after --, like costlab price -- ls -l (or --pid PID, or --from FILE)",
        )),
        (None, None, false) => Ok(Source::Command),
    }
}

/// Count (or read) the events of the chosen source.
pub fn count(
    args: &PriceArgs,
    ctx: &Ctx,
    from: Option<&SavedCounts>,
    o: &mut Outcome,
) -> Result<Counted> {
    match choose(args, from)? {
        Source::Saved(s) => Ok(from_saved(args, s, o)),
        Source::Pid(pid) => from_pid(args, pid),
        Source::Command => from_command(args, ctx),
    }
}

/// Counts saved elsewhere, with the untraced times saved beside them unless --once.
fn from_saved(args: &PriceArgs, s: &SavedCounts, o: &mut Outcome) -> Counted {
    o.notes.push(format!(
        "counts from {} ({}counted on {}), nothing run here",
        args.from.as_deref().unwrap_or(Path::new("")).display(),
        if s.complete { "" } else { "cut short when " },
        costlab_core::machine::machine_summary(&s.machine)
    ));
    let untraced = if args.once {
        Vec::new()
    } else {
        s.untraced_times()
    };
    Counted {
        counts: s.counts(),
        cmdline: s.command.clone(),
        untraced,
        untraced_by_cgroup: false,
        go_gc: None,
        go_cycles: Vec::new(),
    }
}

/// A running process's threads, counted for --duration.
fn from_pid(args: &PriceArgs, pid: u32) -> Result<Counted> {
    let d = crate::argcheck::check_duration(args)?;
    let c = count::count_pid(
        pid,
        d,
        (!args.count_only).then_some(args.time_one_in.max(1)),
    )?;
    Ok(Counted {
        counts: c,
        cmdline: format!("--pid {pid}"),
        untraced: Vec::new(),
        untraced_by_cgroup: false,
        go_gc: None,
        go_cycles: Vec::new(),
    })
}

/// The command counted from exec to exit (its exit status kept for costlab's own), then run
/// untraced --runs times.
fn from_command(args: &PriceArgs, ctx: &Ctx) -> Result<Counted> {
    let path = count::program(&args.command)?;
    let mut go_gc = None;
    let mut go_cycles = Vec::new();
    // The first untraced run goes before the traced one, so the traced run and the untraced
    // runs after it find the same page cache and dentries (a first run reading cold files
    // would otherwise put its misses in the traced run only). It is one of the --runs, so
    // the order changes and the number of runs does not.
    let warm = !args.once && !args.count_only && args.runs > 0;
    let mut runs = Vec::new();
    let mut by_cgroup = true;
    if warm {
        runs = untraced_runs(
            args,
            &path,
            0..1,
            &mut go_gc,
            &mut go_cycles,
            &mut by_cgroup,
        )?;
        costlab_core::measure::cancel::check()?;
    }
    // The split's cpu-clock ticks often enough to share a short program's user class (the
    // warm-up run's user time says how short), and no oftener than a tick's cost allows.
    let user = runs.first().map(|t| t.user_ns as u64);
    let tick_ns = crate::measured::tick_period_for(user);
    let mut c = count::count_command(
        &args.command,
        (!args.count_only).then_some(args.time_one_in.max(1)),
        tick_ns,
    )?;
    if let (Some(user), false) = (user, args.count_only) {
        c.notes.push(format!(
            "the split's cpu-clock ticked every {} of each CPU, for about {} ticks over the {} of user time the untraced run took (the longest period {}, the shortest {})",
            human_ns(tick_ns as f64),
            user / tick_ns.max(1),
            human_ns(user as f64),
            human_ns(crate::measured::prog::USER_TICK_PERIOD_NS as f64),
            human_ns(crate::measured::SHORTEST_TICK_NS as f64),
        ));
    }
    if warm {
        c.notes.push(
            "the traced run came second, after one of the untraced runs, so that it and the untraced runs after it found the same caches".into(),
        );
    }
    ctx.program_ended(c.exit_status);
    // Ctrl-C reached the program too: price what it did until then, from its own run.
    if !args.once && !costlab_core::measure::cancel::requested() {
        let from = usize::from(warm);
        let rest = untraced_runs(
            args,
            &path,
            from..args.runs,
            &mut go_gc,
            &mut go_cycles,
            &mut by_cgroup,
        )?;
        runs.extend(rest);
    }
    Ok(Counted {
        counts: c,
        cmdline: costlab_history::store::redact(&args.command.join(" ")),
        untraced_by_cgroup: by_cgroup && !runs.is_empty(),
        untraced: runs,
        go_gc,
        go_cycles,
    })
}

/// The command's untraced runs, their stdio on /dev/null; a Go program's first one also
/// prints its runtime's GC trace, read into `go_gc`. Each runs in a cgroup of its own, and its
/// user and system time are that cgroup's (`count::cgroup_times`); where none can be made,
/// its rusage's, and `by_cgroup` is cleared.
fn untraced_runs(
    args: &PriceArgs,
    path: &Path,
    which: std::ops::Range<usize>,
    go_gc: &mut Option<Option<f64>>,
    go_cycles: &mut Vec<crate::verify::gogc::Cycle>,
    by_cgroup: &mut bool,
) -> Result<Vec<Times>> {
    let mut runs = Vec::new();
    let go = gowhatif::is_go_program(path);
    for i in which {
        costlab_core::measure::cancel::check()?;
        let cg = count::Cgroup::create().ok();
        let dir = cg.as_ref().map(|c| c.dir.as_path());
        let times = if go && i == 0 {
            let mut trace = count::unnamed_file()?;
            let mut spawn = count::Spawn::new(path, &args.command)
                .errors_to(trace.try_clone().context("sharing the GC trace file")?)
                .gctrace();
            if let Some(d) = dir {
                spawn = spawn.in_cgroup(d);
            }
            let times = spawn.run()?.times;
            let text = count::read_back(&mut trace);
            *go_gc = Some(gowhatif::gctrace_share(&text));
            *go_cycles = crate::verify::gogc::cycles(&text);
            times
        } else {
            count::run_program(path, &args.command, dir, Stdio3::Null)?.0
        };
        match dir.and_then(|d| cgroup_times(d, times)) {
            Some(t) => runs.push(t),
            None => {
                *by_cgroup = false;
                runs.push(times);
            }
        }
    }
    Ok(runs)
}

/// A finished run's user and system time from the cpu.stat of the cgroup it ran alone in
/// (made for it, so the figures are its own), its wall time from `ended`; None where the
/// file cannot be read or shows no CPU time.
///
/// Both the cgroup's split and rusage's come from the timer's ticks, and both are scaled to
/// the exact CPU time. rusage splits each process by its own ticks, so a child that ran less
/// than a tick and met none counts all its time as user time: a program of many short
/// children (a shell script, a compiler driver) reads half its system time or less there.
/// The cgroup splits the run's whole CPU time by all its processes' ticks together.
pub fn cgroup_times(dir: &Path, ended: Times) -> Option<Times> {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    let (usage, user, system) = crate::measured::parse_cpu_stat(&text)?;
    (usage > 0).then_some(Times {
        user_ns: user as f64,
        sys_ns: system as f64,
        wall_ns: ended.wall_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_wins_then_pid_then_the_command() {
        let pid = PriceArgs {
            pid: Some(42),
            ..Default::default()
        };
        assert_eq!(choose(&pid, None).unwrap(), Source::Pid(42));
        let cmd = PriceArgs {
            command: vec!["ls".into()],
            ..Default::default()
        };
        assert_eq!(choose(&cmd, None).unwrap(), Source::Command);
        let e = choose(&PriceArgs::default(), None).unwrap_err();
        assert!(
            e.downcast_ref::<costlab_core::error::UsageError>()
                .is_some()
                && e.to_string().starts_with("no command to price"),
            "{e}"
        );
    }

    /// A run's times from the cgroup it ran alone in: user and system add up to the cgroup's
    /// whole CPU time (the kernel scales the ticks' split to it), the wall time is the run's
    /// (root: a cgroup).
    #[test]
    fn a_runs_times_are_its_cgroups() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: a cgroup needs root");
            return;
        }
        let cg = match count::Cgroup::create() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let argv: Vec<String> = ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do /bin/true; done"]
            .map(String::from)
            .to_vec();
        let path = count::program(&argv).unwrap();
        let (times, ..) = count::run_program(&path, &argv, Some(&cg.dir), Stdio3::Null).unwrap();
        let t = cgroup_times(&cg.dir, times).unwrap();
        let stat = std::fs::read_to_string(cg.dir.join("cpu.stat")).unwrap();
        let (usage, _, _) = crate::measured::parse_cpu_stat(&stat).unwrap();
        assert!(
            (t.user_ns + t.sys_ns - usage as f64).abs() <= 1000.0 && usage > 0,
            "{t:?} against {stat}"
        );
        assert_eq!(t.wall_ns, times.wall_ns);
        assert_eq!(cgroup_times(Path::new("/nonexistent"), times), None);
    }
}
