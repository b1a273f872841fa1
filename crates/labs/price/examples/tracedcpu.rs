//! What each of the price's tracers adds to a command's CPU time, part by part: the command
//! runs ROUNDS times (default 10) in each of five ways, interleaved, each run in a fresh cgroup
//! whose cpu.stat usage (exact) is its CPU time: untraced; under the sampler's perf events
//! alone (cpu-clock on the cgroup, as the calibration's traced loops carry them); under the
//! split alone; under both; and under the split and the price's own `perf record -a -g -G`
//! (its buffer, call chains and side-band records). The medians, and each way's excess over the untraced median, say
//! which tracer a program pays for beyond the calibration (`costlab price` prints the
//! calibrated cost beside its CPU check). Root and BPF needed; run on a quiet machine.
//!
//! `cargo run --release -p costlab-price --example tracedcpu -- [ROUNDS] -- CMD...`

use std::path::Path;

use anyhow::{bail, Context, Result};
use costlab_price::count::{self, cgroup::Cgroup};
use costlab_price::measured::{parse_cpu_stat, Tracer};

/// One run of `cmd` in a fresh cgroup, with the split (`split`), the sampler's events
/// (`sampler`) and `perf record` (`record`) on it or not: its CPU time, ns.
fn run(path: &Path, cmd: &[String], (split, sampler, record): (bool, bool, bool)) -> Result<f64> {
    let cg = Cgroup::create()?;
    let _record = match (record, cg.rel()) {
        (true, Some(rel)) => Some(costlab_price::samples::Sampler::start(&rel)?),
        (true, None) => bail!("the cgroup is not under the cgroup v2 mount"),
        _ => None,
    };
    let tracer = if split {
        Some(Tracer::attach(costlab_price::bpf::cgroup_id(&cg.dir)?)?)
    } else {
        None
    };
    let _events = if sampler {
        let dir = std::fs::File::open(&cg.dir)?;
        Some(costlab_bpf::perf::cgroup_sampler(
            &dir,
            costlab_price::samples::HZ,
        )?)
    } else {
        None
    };
    let (_, end, _, _) = count::run_program(path, cmd, Some(&cg.dir), count::Stdio3::Null)?;
    if end.failed() {
        bail!("{}", end.line());
    }
    if let Some(t) = tracer {
        t.finish_counted(&cg.dir)?;
    }
    let stat = std::fs::read_to_string(cg.dir.join("cpu.stat"))?;
    let (usage, _, _) = parse_cpu_stat(&stat).context("no cpu.stat")?;
    Ok(usage as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let at = args
        .iter()
        .position(|a| a == "--")
        .context("usage: tracedcpu [ROUNDS] -- CMD...")?;
    let rounds: usize = match at {
        0 => 10,
        _ => args[0].parse().context("ROUNDS is a count")?,
    };
    let cmd = &args[at + 1..];
    if cmd.is_empty() {
        bail!("usage: tracedcpu [ROUNDS] -- CMD...");
    }
    let ways = [
        ("untraced", (false, false, false)),
        ("sampler's events", (false, true, false)),
        ("split", (true, false, false)),
        ("split and sampler", (true, true, false)),
        ("split, perf record", (true, false, true)),
    ];
    let mut ns = vec![Vec::new(); ways.len()];
    // One warm-up run, then each round runs every way once, in turn.
    let path = count::program(cmd)?;
    run(&path, cmd, ways[0].1)?;
    for _ in 0..rounds {
        for (i, (_, way)) in ways.iter().enumerate() {
            ns[i].push(run(&path, cmd, *way)?);
        }
    }
    let base = median(&mut ns[0].clone());
    for (i, (name, _)) in ways.iter().enumerate() {
        let v = &mut ns[i];
        let m = median(v);
        println!(
            "{name:18} {:9.2} ms CPU (median of {rounds}; {:.2}-{:.2}), {:+8.2} ms over untraced",
            m / 1e6,
            v[0] / 1e6,
            v[v.len() - 1] / 1e6,
            (m - base) / 1e6
        );
    }
    Ok(())
}
