//! The split's programs' own cost per event, from the kernel's BPF statistics
//! (BPF_ENABLE_STATS: run_cnt and run_time_ns of each program), in a calibration run of its
//! own: turning the statistics on adds two clock reads to every run, so never in a timed run.
//! dd of COUNT (200000) 512-byte blocks from /dev/zero to /dev/null runs in a fresh cgroup
//! under the split, every call timed and one in 16, and each program's runs and ns per run
//! are printed, with the programs' time per syscall of dd. Root and BPF needed.
//!
//! With `-- CMD...`, CMD runs instead of dd (every call timed), and each program's runs are
//! also given per exec and per task the split counted.
//!
//! `cargo run --release -p costlab-price --example progcost [COUNT | -- CMD...]`

use std::process::Command;

use anyhow::{bail, Result};
use costlab_price::count::{self, cgroup::Cgroup};
use costlab_price::measured::Tracer;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--") {
        return command(&args[1..]);
    }
    let count: u64 = args
        .first()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(200_000);
    let _stats = costlab_bpf::prog::RunStats::enable()?;
    for period in [1u32, 16] {
        let cg = Cgroup::create()?;
        let id = costlab_price::bpf::cgroup_id(&cg.dir)?;
        let t = Tracer::attach_with(id, period)?;
        let st = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=512 count={count} status=none",
                cg.dir.display()
            ))
            .status()?;
        if !st.success() {
            bail!("dd failed: {st}");
        }
        let stats = t.run_stats();
        let (split, _) = t.finish_counted(&cg.dir)?;
        let calls: u64 = split
            .lines
            .iter()
            .filter(|l| l.class == "syscall")
            .map(|l| l.count)
            .sum();
        println!(
            "one call in {period} timed: dd made {calls} syscalls; the programs, from the kernel's run statistics:"
        );
        let mut total = 0u64;
        for (hook, r) in stats.iter().filter(|(_, r)| r.count > 0) {
            total += r.time_ns;
            println!(
                "  {hook:44} {:>10} runs {:>8.1} ns a run",
                r.count,
                r.time_ns as f64 / r.count as f64
            );
        }
        println!(
            "  all programs: {:.1} ns per syscall of dd (every program's time, all tasks, / dd's syscalls)",
            total as f64 / calls.max(1) as f64
        );
    }
    Ok(())
}

/// CMD under the split, every call timed: each program's runs and ns, and per exec and task.
fn command(cmd: &[String]) -> Result<()> {
    if cmd.is_empty() {
        bail!("progcost: give a command after --");
    }
    let _stats = costlab_bpf::prog::RunStats::enable()?;
    let cg = Cgroup::create()?;
    let id = costlab_price::bpf::cgroup_id(&cg.dir)?;
    let path = count::program(cmd)?;
    let t = Tracer::attach_with(id, 1)?;
    let (_, end, _, _) = count::run_program(&path, cmd, Some(&cg.dir), count::Stdio3::Null)?;
    if end.failed() {
        bail!("{}", end.line());
    }
    let stats = t.run_stats();
    let (split, _) = t.finish_counted(&cg.dir)?;
    let (execs, tasks) = (
        split.calls(&costlab_price::pricing::EXECS),
        split.calls(&["clone", "clone3", "fork", "vfork"]),
    );
    let faults: u64 = split
        .lines
        .iter()
        .filter(|l| l.class == "fault")
        .map(|l| l.count)
        .sum();
    println!("{execs} execs, {tasks} tasks made, {faults} user faults; the programs:");
    let mut total = 0u64;
    for (hook, r) in stats.iter().filter(|(_, r)| r.count > 0) {
        total += r.time_ns;
        println!(
            "  {hook:44} {:>10} runs {:>8.1} ns a run {:>10.1} ns a task",
            r.count,
            r.time_ns as f64 / r.count as f64,
            r.time_ns as f64 / tasks.max(1) as f64
        );
    }
    println!(
        "  all programs: {:.3} ms, {:.1} us a task made",
        total as f64 / 1e6,
        total as f64 / 1e3 / tasks.max(1) as f64
    );
    Ok(())
}
