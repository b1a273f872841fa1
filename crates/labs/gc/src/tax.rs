//! The language taxes, three ways.
//!
//! - `attribution` (the headline, as Biscuit measured it): the share of a running
//!   workload's CPU profile samples that fall in GC work, prologues, write barriers,
//!   safety checks, the loads checks fold in, and the kernel (see `attrib`), of all CPU and
//!   of user-mode CPU. It is cross-validated in the same run: the workload is also run
//!   built with -gcflags=-B (the A/B: what removing the bounds checks saves per operation)
//!   and as its layout-shifted twin (the A/A: what moving the same code changes), processes
//!   interleaved, and the attributed share is set beside the A/B difference.
//! - `ab`: each tax the ratio of two builds or variants taken side by side: bounds checks
//!   (plain build vs -gcflags=-B, processes alternated), the stack-check prologue (a caller
//!   with and without //go:nosplit in one binary), and the write barrier (pointer stores
//!   while a GC cycle marks vs while none runs, in one process).
//! - `aa`: the same pairs with nothing removed, only the code moved (the plain build vs
//!   its layout-shifted twin; two copies of the same checked caller): the noise floor an
//!   A/B difference must clear.
//!
//! This file runs the three methods; tax_options.rs holds what is asked, sampler.rs how the
//! profiles are taken, crosscheck.rs the attribution set beside the A/B.

use std::collections::{BTreeSet, HashMap};

use anyhow::Result;

use super::attrib::{self, Class, ClassMap, Counts, SymTab, Tally};
use super::bench::{self, BarrierRun, BoundsRun, Build, ProfileRun, PrologueRun};
use super::crosscheck::Profiled;
pub use super::crosscheck::{cross_check_model, Agreement, CrossCheck, CROSS_CHECK_MODEL};
use super::sampler::{choose_sampler, perf_process, Sampler};
pub use super::sampler::{PERF_HZ, PROFILE_HZ};
pub use super::tax_options::{
    parse_kinds, parse_methods, parse_workloads, Kind, Method, TaxConfig, ATTRIB_LIVE, WARMUP_S,
    WORKLOADS,
};
use super::LAB;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::stats::{median, paired_ratios};
use costlab_core::measure::Summary;
use costlab_history::report::Outcome;

/// Samples each side of the bounds ratio takes inside one process.
const INNER_REPS: usize = 5;

/// Ratios as overhead percentages: (a / b - 1) x 100.
pub fn overhead(a: &[f64], b: &[f64]) -> Vec<f64> {
    paired_ratios(a, b)
        .into_iter()
        .map(|r| (r - 1.0) * 100.0)
        .collect()
}

/// Measure the taxes `cfg` asks for.
pub fn measure(cfg: &TaxConfig) -> Result<Outcome> {
    // Find (or build) the program before anything is printed: a missing toolchain is then
    // the run's one line.
    bench::locate(Build::Plain)?;
    let mut o = Outcome::default();
    if cfg.methods.contains(&Method::Attribution) {
        attribution(&mut o, cfg)?;
    }
    let ab = cfg.methods.contains(&Method::Ab);
    let aa = cfg.methods.contains(&Method::Aa);
    // The kinds' pairs are the ab and aa methods: attribution alone runs none of them.
    let kinds: &[Kind] = if ab || aa { &cfg.kinds } else { &[] };
    for &k in kinds {
        costlab_core::measure::cancel::check()?;
        costlab_history::report::progress::note(&format!("gc tax: {}", k.name()));
        let mark = o.results.len();
        let w = Watch::start(&[]);
        match k {
            Kind::Bounds => bounds(&mut o, cfg.reps, ab, aa)?,
            Kind::Prologue => prologue(&mut o, cfg.reps, ab, aa)?,
            Kind::WriteBarrier if ab => write_barrier(&mut o, cfg.reps, cfg.live)?,
            Kind::WriteBarrier => {}
        }
        o.attach_conditions(mark, w.finish());
    }
    if aa && kinds.contains(&Kind::WriteBarrier) {
        o.notes.push("write-barrier: no A/A pair (its two sides are one binary's two GC states, not two builds); its int-store control is in the note above".to_string());
    }
    for line in resolution(&o) {
        o.notes.push(line);
    }
    Ok(o)
}

fn push(o: &mut Outcome, m: Method, k: Kind, samples: Vec<f64>) {
    o.push(
        LAB,
        costlab_core::case! {"method" => m.name(), "kind" => k.name()},
        "overhead",
        "%",
        samples,
    );
}

/// Per kind with both an A/B and an A/A row: whether the A/B difference clears the A/A
/// noise (the largest |difference| the same code, moved, showed).
pub fn resolution(o: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    for k in [Kind::Bounds, Kind::Prologue] {
        let find = |m: Method| {
            o.results.iter().find(|r| {
                r.metric == "overhead" && r.key("method") == m.name() && r.key("kind") == k.name()
            })
        };
        let (Some(ab), Some(aa)) = (find(Method::Ab), find(Method::Aa)) else {
            continue;
        };
        let noise = aa.summary.min.abs().max(aa.summary.max.abs());
        let verdict = if ab.summary.median.abs() <= noise {
            "the A/B difference is within the A/A noise: this pair cannot resolve the tax"
        } else {
            "the A/B difference is larger than the A/A noise"
        };
        out.push(format!(
            "{}: A/B {:.1}% (median), A/A {:.1}% to {:.1}% (same code, layout moved): {verdict}",
            k.name(),
            ab.summary.median,
            aa.summary.min,
            aa.summary.max
        ));
    }
    out
}
/// The tax by attribution: per workload, `cfg.procs` rounds of profiled processes, each
/// round the plain build and (with the cross-check) the -B build and the layout-shifted
/// twin, in an order that rotates from round to round.
fn attribution(o: &mut Outcome, cfg: &TaxConfig) -> Result<()> {
    let plain = bench::locate(Build::Plain)?;
    let Some(go) = bench::find_go() else {
        o.notes.push("attribution: skipped: it classifies samples against `go tool objdump`, and `go` is not on PATH".to_string());
        return Ok(());
    };
    let mut builds = vec![(Build::Plain, plain.path)];
    if cfg.cross_check {
        match (bench::locate(Build::NoBounds), bench::locate(Build::Shifted)) {
            (Ok(b), Ok(s)) => {
                builds.push((Build::NoBounds, b.path));
                builds.push((Build::Shifted, s.path));
            }
            (Err(e), _) | (_, Err(e)) => o.notes.push(format!(
                "attribution: no A/B cross-check: a build is missing ({e}); `costlab gc build` makes them"
            )),
        }
    }
    let sampler = choose_sampler(cfg.perf_hz);
    o.notes
        .push(format!("attribution: sampler {}", sampler.describe()));
    let mut symtabs: HashMap<Build, SymTab> = HashMap::new();
    let mut checks: Vec<CrossCheck> = Vec::new();
    for &w in &cfg.workloads {
        let mark = o.results.len();
        let watch = Watch::start(&[]);
        let mut procs: Vec<Profiled> = Vec::new();
        for round in 0..cfg.procs {
            for k in 0..builds.len() {
                let (build, path) = &builds[(round + k) % builds.len()];
                costlab_core::measure::cancel::check()?;
                costlab_history::report::progress::note(&format!(
                    "gc tax: profiling the {w} workload, {} build, round {}/{} ({} s)",
                    build.describe(),
                    round + 1,
                    cfg.procs,
                    cfg.seconds
                ));
                let (run, tally) = profile(&sampler, &go, path, *build, w, cfg, &mut symtabs)?;
                procs.push(Profiled {
                    build: *build,
                    run,
                    tally,
                });
            }
        }
        // Each build's disassembly, of the functions its samples fell in.
        let mut maps: HashMap<Build, ClassMap> = HashMap::new();
        for (build, path) in &builds {
            let syms: BTreeSet<String> = procs
                .iter()
                .filter(|p| p.build == *build)
                .flat_map(|p| p.tally.leaf_symbols())
                .collect();
            maps.insert(*build, attrib::class_map_of(&go, path, &syms)?);
        }
        let counts: Vec<Counts> = procs
            .iter()
            .map(|p| maps[&p.build].classify(&p.tally))
            .collect();
        // The attributed shares: the builds with checks (the plain build and its
        // layout-shifted twin are the same code, placed differently).
        let checked: Vec<usize> = (0..procs.len())
            .filter(|&i| procs[i].build != Build::NoBounds)
            .collect();
        let per_proc: Vec<Counts> = checked.iter().map(|&i| counts[i]).collect();
        push_attribution(o, w, &per_proc);
        let runs: Vec<&ProfileRun> = checked.iter().map(|&i| &procs[i].run).collect();
        o.notes
            .extend(attribution_notes(w, &per_proc, &runs, &sampler));
        let plain_tallies: Vec<&Tally> = procs
            .iter()
            .filter(|p| p.build == Build::Plain)
            .map(|p| &p.tally)
            .collect();
        let map = &maps[&Build::Plain];
        let sites: Vec<String> = [Class::Safety, Class::Memory]
            .iter()
            .map(|&c| {
                let top = map.sites(&plain_tallies, c, 3);
                let list = if top.is_empty() {
                    "none".to_string()
                } else {
                    top.iter()
                        .map(|(at, n)| format!("{at} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!("{}'s: {list}", c.name())
            })
            .collect();
        o.notes.push(format!(
            "attribution {w}: where samples fell (plain build, instruction and samples): {}; disassembled {} sampled functions",
            sites.join("; "),
            map.functions()
        ));
        if builds.len() > 1 {
            let cc = CrossCheck::of(w, &procs, &counts);
            cc.push_rows(o);
            checks.push(cc);
        }
        o.attach_conditions(mark, watch.finish());
    }
    if !checks.is_empty() {
        o.models.push(cross_check_model(&checks));
        for cc in &checks {
            o.notes.push(cc.note());
        }
    }
    o.notes.push(format!(
        "attribution classes: {}",
        Class::ALL
            .iter()
            .map(|c| format!("{}: {}", c.name(), c.means()))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    Ok(())
}

/// Run one process of `workload` from `bin` under the sampler; its samples tallied.
fn profile(
    sampler: &Sampler,
    go: &std::path::Path,
    bin: &std::path::Path,
    build: Build,
    workload: &str,
    cfg: &TaxConfig,
    symtabs: &mut HashMap<Build, SymTab>,
) -> Result<(ProfileRun, Tally)> {
    let hz = match sampler {
        Sampler::Perf { hz, .. } => *hz,
        Sampler::Pprof { .. } => PROFILE_HZ,
    };
    let mut args = vec![
        "-live".to_string(),
        ATTRIB_LIVE.min(cfg.live).to_string(),
        "-seconds".to_string(),
        cfg.seconds.to_string(),
        "-warmup".to_string(),
        cfg.warmup.to_string(),
        "-hz".to_string(),
        hz.to_string(),
    ];
    match sampler {
        Sampler::Perf { perf, hz } => {
            args.extend(["profile".to_string(), workload.to_string()]);
            perf_process(perf, *hz, bin, &args)
        }
        Sampler::Pprof { .. } => {
            args.extend([
                "-sampler".to_string(),
                "pprof".to_string(),
                "profile".to_string(),
                workload.to_string(),
            ]);
            let run: ProfileRun = bench::parse(&bench::run(bin, &args, &[])?)?;
            let syms = match symtabs.entry(build) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(attrib::symtab_of(go, bin)?)
                }
            };
            let tally = attrib::tally_pprof(syms, &run.stacks);
            Ok((run, tally))
        }
    }
}

/// Rows for one workload: per class, each process's share (%) of all CPU and of user-mode
/// CPU (`of` = user; kernel has none), and its sample count.
pub fn push_attribution(o: &mut Outcome, workload: &str, per_proc: &[Counts]) {
    for (i, c) in Class::ALL.iter().enumerate() {
        let case = costlab_core::case! {"method" => "attribution", "workload" => workload, "kind" => c.name()};
        let share = |total: fn(&Counts) -> u64| -> Vec<f64> {
            per_proc
                .iter()
                .filter(|p| total(p) > 0)
                .map(|p| 100.0 * p[i] as f64 / total(p) as f64)
                .collect()
        };
        o.push(
            LAB,
            case.clone(),
            "cpu_share",
            "%",
            share(|p| p.iter().sum()),
        );
        if *c != Class::Kernel {
            let mut user = case.clone();
            user.insert("of".to_string(), serde_json::json!("user"));
            o.push(
                LAB,
                user,
                "cpu_share",
                "%",
                share(|p| p.iter().sum::<u64>() - p[Class::Kernel.index()]),
            );
        }
        o.push(
            LAB,
            case,
            "profile_samples",
            "count",
            per_proc.iter().map(|p| p[i] as f64).collect(),
        );
    }
}

/// (class, its samples, all samples, share %, 95% interval in %).
pub type Pooled = (Class, u64, u64, f64, (f64, f64));

/// The pooled share of each class of all CPU, with its 95% interval.
pub fn pooled(per_proc: &[Counts]) -> Vec<Pooled> {
    let total: u64 = per_proc.iter().flatten().sum();
    Class::ALL
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let k: u64 = per_proc.iter().map(|p| p[i]).sum();
            let share = if total > 0 {
                100.0 * k as f64 / total as f64
            } else {
                0.0
            };
            (c, k, total, share, attrib::wilson(k, total))
        })
        .collect()
}

fn attribution_notes(
    w: &str,
    per_proc: &[Counts],
    runs: &[&ProfileRun],
    sampler: &Sampler,
) -> Vec<String> {
    let mut out = Vec::new();
    let shares: Vec<String> = pooled(per_proc)
        .iter()
        .map(|(c, k, _, share, (lo, hi))| {
            format!("{} {share:.2}% [{lo:.2}, {hi:.2}] ({k} samples)", c.name())
        })
        .collect();
    let samples: u64 = per_proc.iter().flatten().sum();
    let kernel: u64 = per_proc.iter().map(|p| p[Class::Kernel.index()]).sum();
    let cpu: f64 = runs.iter().map(|r| r.cpu_s).sum();
    let sys: f64 = runs.iter().map(|r| r.cpu_sys_s).sum();
    let wall: f64 = runs.iter().map(|r| r.wall_s).sum();
    out.push(format!(
        "attribution {w}: pooled over {} processes (the plain build{}), {samples} samples, shares of all CPU: {} (95% binomial intervals); of user-mode CPU, divide by {:.3} (1 - the kernel's share)",
        runs.len(),
        if runs.len() > 1 { " and its layout-shifted twin" } else { "" },
        shares.join(", "),
        if samples > 0 { 1.0 - kernel as f64 / samples as f64 } else { 1.0 }
    ));
    if cpu > 0.0 && samples > 0 && matches!(sampler, Sampler::Perf { .. }) {
        out.push(format!(
            "attribution {w}: kernel mode took {:.1}% of the samples and {:.1}% of the CPU time by getrusage (user {:.2} s, kernel {sys:.2} s): the kernel class is the time spent there, not a guess",
            100.0 * kernel as f64 / samples as f64,
            100.0 * sys / cpu,
            cpu - sys
        ));
    }
    if let Some(first) = runs.first() {
        let runtime_gc = median(
            &runs
                .iter()
                .map(|r| r.gc_cpu_share * 100.0)
                .collect::<Vec<_>>(),
        );
        let limit = match sampler {
            Sampler::Perf { .. } => "perf's software cpu-clock event",
            Sampler::Pprof { .. } => {
                "pprof: the kernel checks CPU-time timers at its tick, so a thread gets at most HZ; kernel time is the samples delivered on a syscall's return"
            }
        };
        out.push(format!(
            "attribution {w}: sampler {}, rate asked {} Hz per CPU-second, got {:.0} ({samples} samples over {cpu:.1} CPU-s, {wall:.1} s wall, after {} s unsampled warm-up, from one GC cycle's end to another's; {limit}); the runtime's own GC accounting says {runtime_gc:.1}% ({})",
            if matches!(sampler, Sampler::Perf { .. }) { "perf" } else { "pprof" },
            first.hz_asked,
            if cpu > 0.0 { samples as f64 / cpu } else { 0.0 },
            first.warmup_s,
            first.go_version
        ));
    }
    out
}

fn show(v: &[f64], prec: usize) -> String {
    Summary::of(v).map_or("—".to_string(), |s| s.show(prec))
}

fn bounds(o: &mut Outcome, reps: usize, ab: bool, aa: bool) -> Result<()> {
    if ab {
        bounds_pair(o, reps, Build::NoBounds)?;
    }
    if aa {
        bounds_pair(o, reps, Build::Shifted)?;
    }
    Ok(())
}

/// The bounds kernel, the plain build against `other` (-B, or the layout-shifted twin).
fn bounds_pair(o: &mut Outcome, reps: usize, other: Build) -> Result<()> {
    let plain = bench::locate(Build::Plain)?;
    let unchecked = match bench::locate(other) {
        Ok(b) => b,
        Err(e) => {
            let (what, suffix) = if other == Build::Shifted {
                ("layout-shifted (A/A)", "-shifted")
            } else {
                ("-gcflags=-B", "-nobounds")
            };
            o.notes.push(format!(
                "bounds: no {what} build ({e}); set COSTLAB_GCBENCH's {suffix} sibling or install Go"
            ));
            return Ok(());
        }
    };
    let args = vec![
        "-reps".to_string(),
        INNER_REPS.to_string(),
        "bounds".to_string(),
    ];
    let (mut checked_ns, mut unchecked_ns) = (Vec::new(), Vec::new());
    for r in 0..reps {
        costlab_core::measure::cancel::check()?;
        // Alternate which build goes first, so neither always runs on a warmer machine.
        let order = if r % 2 == 0 {
            [&plain, &unchecked]
        } else {
            [&unchecked, &plain]
        };
        for bin in order {
            let run: BoundsRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
            let is_plain = std::ptr::eq(bin, &plain);
            if run.bounds_checked != (is_plain || other == Build::Shifted) {
                anyhow::bail!(
                    "{} reports bounds_checked={}; rebuild it with `costlab gc build`",
                    bin.path.display(),
                    run.bounds_checked
                );
            }
            let ns = median(&run.ns_per_iter);
            if is_plain {
                checked_ns.push(ns);
            } else {
                unchecked_ns.push(ns);
            }
        }
    }
    if other == Build::Shifted {
        o.notes.push(format!(
            "bounds A/A: {} ns per iteration, {} in the layout-shifted twin (same source plus one unused function laid out first; {reps} process pairs)",
            show(&checked_ns, 3),
            show(&unchecked_ns, 3)
        ));
        push(
            o,
            Method::Aa,
            Kind::Bounds,
            overhead(&unchecked_ns, &checked_ns),
        );
        return Ok(());
    }
    o.notes.push(format!(
        "bounds: {} ns per iteration checked, {} with -B (thread CPU time; medians of {INNER_REPS} per process, {reps} process pairs)",
        show(&checked_ns, 3),
        show(&unchecked_ns, 3)
    ));
    push(
        o,
        Method::Ab,
        Kind::Bounds,
        overhead(&checked_ns, &unchecked_ns),
    );
    Ok(())
}

fn prologue(o: &mut Outcome, reps: usize, ab: bool, aa: bool) -> Result<()> {
    let bin = bench::locate(Build::Plain)?;
    let args = vec![
        "-reps".to_string(),
        reps.to_string(),
        "prologue".to_string(),
    ];
    let run: PrologueRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
    o.notes.push(format!(
        "prologue: {} ns per call with the stack check, {} with //go:nosplit (thread CPU time; each call makes two leaf calls; code alignment can move this by a few %)",
        show(&run.checked_ns, 3),
        show(&run.nosplit_ns, 3)
    ));
    if ab {
        push(
            o,
            Method::Ab,
            Kind::Prologue,
            overhead(&run.checked_ns, &run.nosplit_ns),
        );
    }
    if aa && !run.checked1_ns.is_empty() {
        push(
            o,
            Method::Aa,
            Kind::Prologue,
            overhead(&run.checked2_ns, &run.checked1_ns),
        );
    }
    Ok(())
}

fn write_barrier(o: &mut Outcome, reps: usize, live: u64) -> Result<()> {
    let bin = bench::locate(Build::Plain)?;
    let args = vec![
        "-live".to_string(),
        live.to_string(),
        "-reps".to_string(),
        reps.to_string(),
        "write-barrier".to_string(),
    ];
    let run: BarrierRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
    if run.ptr_marking_ns.is_empty() {
        o.notes.push(format!(
            "write-barrier: no store chunk fell inside a mark phase in {reps} cycles (marks took {:?} s); use a larger --live",
            run.mark_s
        ));
        return Ok(());
    }
    o.notes.push(format!(
        "write-barrier: {} ns (thread CPU time) per pointer store while marking (the barrier is on between the cycle's two GC pauses, counted by /sched/pauses/total/gc), {} while no GC runs; control (integer stores into the same objects): {} vs {} ns, {}% — the part of the ratio that is the marker's interference, not the barrier; {} marking chunks per cycle over a {} heap, marks took {} s",
        show(&run.ptr_marking_ns, 2),
        show(&run.ptr_idle_ns, 2),
        show(&run.int_marking_ns, 2),
        show(&run.int_idle_ns, 2),
        show(&overhead(&run.int_marking_ns, &run.int_idle_ns), 0),
        show(&run.marking_chunks.iter().map(|&c| c as f64).collect::<Vec<_>>(), 0),
        human_size(live),
        show(&run.mark_s, 2),
    ));
    push(
        o,
        Method::Ab,
        Kind::WriteBarrier,
        overhead(&run.ptr_marking_ns, &run.ptr_idle_ns),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribution_rows_of_all_and_of_user_cpu() {
        let mut o = Outcome::default();
        push_attribution(&mut o, "server", &[[0, 0, 0, 1, 9, 40, 50]]);
        let share = |kind: &str, of: Option<&str>| {
            o.results
                .iter()
                .find(|r| {
                    r.metric == "cpu_share"
                        && r.key("kind") == kind
                        && r.case.get("of").and_then(|v| v.as_str()) == of
                })
                .map(|r| r.summary.median)
        };
        assert_eq!(share("safety", None), Some(1.0));
        assert_eq!(share("memory", Some("user")), Some(15.0));
        assert_eq!(share("kernel", None), Some(40.0));
        assert_eq!(share("kernel", Some("user")), None);
        let n = o
            .results
            .iter()
            .filter(|r| r.metric == "profile_samples")
            .count();
        assert_eq!(n, attrib::N);
    }

    #[test]
    fn overhead_is_paired() {
        let v = overhead(&[1.1, 2.4, 3.0], &[1.0, 2.0, 0.0]);
        assert_eq!(v.len(), 2);
        assert!((v[0] - 10.0).abs() < 1e-9 && (v[1] - 20.0).abs() < 1e-9);
    }
}
