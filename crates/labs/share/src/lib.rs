//! The sharing lab: what a written cache line costs when cores share it.
//!
//! `costlab share` runs each case (shared and per-thread Arcs, shared, padded and falsely
//! shared atomics, a mutex, shared reads) with T pinned threads and fits the Universal
//! Scalability Law to each curve; `costlab share c2c` measures the one-way latency of a line
//! moving between two cores, the unit every shared write pays.

pub mod args;
pub mod c2c;
pub mod cases;
pub mod charts;
pub mod usl;

mod fit;
mod render;
mod sampling;
#[cfg(test)]
mod tests;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{json, Map, Value};

use args::{C2cArgs, ShareArgs, ShareWhat};
use cases::{Bench, Variant};
use costlab_core::error::usage;
use costlab_core::measure::conditions::{judged_case, RetryBudget, Watch};
use costlab_core::measure::cputime::thread_cpu_ns;
use costlab_core::measure::{counters, cpus, stats, team, SampleSpec, Summary};
use costlab_history::report::{progress, table, Model, ModelPoint, Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

use fit::*;
use render::*;
pub use render::{render, Ratio};
use sampling::*;

pub const LAB: &str = "share";

/// Why shared writes cost what they cost, in one line for every report.
pub(crate) const WHY: &str = "why: a core may write a cache line only while it holds the line's only copy; when another core writes the same line (a shared refcount, a shared counter, or a neighbour's counter on the same 64 bytes) the line must travel between the cores' caches on every write, and each trip costs about one core-to-core latency. Reads let every cache keep a copy, so nothing travels.";

/// `costlab share`: the cases over a thread sweep, and their USL fits.
pub fn run(args: &ShareArgs, ctx: &Ctx) -> Result<Outcome> {
    let variants = match &args.case {
        Some(text) => cases::parse_cases(text)?,
        None => Variant::ALL.to_vec(),
    };
    let allowed = cpus::allowed_cpus();
    let threads = match &args.threads {
        Some(text) => cpus::parse_threads(text)?,
        None => default_threads(allowed.len(), ctx.quick),
    };
    cpus::check_threads(&threads, allowed.len(), args.oversubscribe)?;
    let mut threads = threads;
    threads.sort_unstable();
    threads.dedup();
    let load_before = load_average();
    let mut out = measure_cases(
        &variants,
        &threads,
        &allowed,
        &ctx.spec,
        ctx.counters,
        &ctx.retry,
    )?;
    out.notes
        .extend(busy_note(load_before, load_average(), allowed.len()));
    Ok(out)
}

/// The 1-minute load average, if the kernel shows it.
pub(crate) fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A warning when other work competed for the CPUs: threads that share a line only pay for
/// it while they run at the same time, so a busy machine hides (or fakes) the cost.
pub(crate) fn busy_note(before: Option<f64>, after: Option<f64>, cpus: usize) -> Option<String> {
    let load = before.into_iter().chain(after).fold(f64::NAN, f64::max);
    // Our own threads add up to `cpus` to the load while we run.
    (load > cpus as f64 * 1.5).then(|| {
        format!(
            "the machine was busy (load average {load:.1} on {cpus} CPUs): other processes took turns on our CPUs, so our threads often did not run at the same time and a shared line then costs little; samples where that showed are dropped (see the other notes), but rerun on a quiet machine for firm figures."
        )
    })
}

/// `costlab share c2c`: one-way latency for every pair of CPUs (or of `--cpus`).
pub fn run_c2c(args: &C2cArgs, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    let chosen = match &args.common.cpus {
        Some(text) => {
            let wanted = cpus::parse_cpu_list(text)?;
            cpus::check_cpus(&wanted, &allowed)?;
            wanted
        }
        None => allowed.clone(),
    };
    if chosen.len() < 2 {
        return Err(usage(format!(
            "c2c needs at least two CPUs to bounce a line between, got {}; name two or more with --cpus",
            cpus::format_cpu_list(&chosen)
        )));
    }
    let spec = c2c::C2cSpec::new(args.common.samples, ctx.quick);
    let pairs = if ctx.quick {
        c2c::star_pairs(&chosen)
    } else {
        c2c::pairs(&chosen)
    };
    let mut out = measure_c2c(&pairs, &spec, ctx.counters)?;
    out.notes
        .extend(kernel_cache_sharing(&ctx.machine, &chosen));
    out.notes.extend(vm_note(&ctx.machine));
    Ok(out)
}

/// Under a hypervisor CPU ids are vCPUs: the host decides (and may change) which physical
/// cores they run on, so the distance c2c measures can change from run to run.
/// `machine.hypervisor` is set whenever /proc/cpuinfo has the `hypervisor` flag
/// (`machine::kernel::read_hypervisor`), so it alone says whether this is a VM.
pub(crate) fn vm_note(machine: &costlab_core::machine::Machine) -> Option<String> {
    machine.hypervisor.is_some().then(|| {
        "this is a virtual machine: CPU ids are vCPUs, and the host decides which physical cores they run on (SMT siblings, a shared L3, another chiplet or socket) and may move them, so c2c figures can change between runs; a stable figure is stable only while the host keeps the placement".to_string()
    })
}

/// What the kernel says about which of `chosen` share a cache, to set beside the groups
/// the latencies suggest.
pub(crate) fn kernel_cache_sharing(
    machine: &costlab_core::machine::Machine,
    chosen: &[usize],
) -> Vec<String> {
    let mut out = Vec::new();
    for c in machine.caches.iter().filter(|c| c.kind != "Instruction") {
        let groups: Vec<String> = c
            .shared_by
            .iter()
            .map(|g| {
                g.iter()
                    .copied()
                    .filter(|x| chosen.contains(x))
                    .collect::<Vec<_>>()
            })
            .filter(|g| g.len() > 1)
            .map(|g| format!("{{{}}}", cpus::format_cpu_list(&g)))
            .collect();
        if !groups.is_empty() {
            out.push(format!(
                "the kernel says L{} ({}) is shared by {}",
                c.level,
                costlab_core::measure::sizes::human_size(c.size),
                groups.join(" ")
            ));
        }
    }
    out
}

/// 1, 2, 4, ... up to `cpus`, and `cpus` itself: the machine's shape, quick plan or not
/// (the quick plan takes shorter samples instead).
pub fn default_threads(cpus: usize, _quick: bool) -> Vec<usize> {
    let cpus = cpus.max(1);
    let mut t: Vec<usize> = std::iter::successors(Some(1usize), |x| x.checked_mul(2))
        .take_while(|&x| x < cpus)
        .collect();
    t.push(cpus);
    t.dedup();
    t
}

/// The sharing lab for `costlab run`.
pub struct ShareLab;

impl Lab for ShareLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<ShareArgs>(
            "share",
            "What sharing a written cache line costs: shared Arcs, atomics, false sharing, a mutex; how far each scales (USL fit); `share c2c` for core-to-core latency",
            "Examples:\n  costlab share\n  costlab share --case arc-shared,arc-per-thread --threads 1,2,4\n  costlab share c2c --cpus 0-3",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: ShareArgs = parsed(m)?;
        Ok(match args.what {
            Some(ShareWhat::C2c(c2c)) => {
                Invocation::measure(c2c.common.clone(), move |ctx| run_c2c(&c2c, ctx))
            }
            None => Invocation::measure(args.common.clone(), move |ctx| run(&args, ctx)),
        })
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        charts::charts(doc)
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let allowed = cpus::allowed_cpus();
        let (threads, spec) = if full {
            (default_threads(allowed.len(), false), ctx.spec.clone())
        } else {
            // About 3 s: every case at T=1 and T=all, short samples.
            let spec = SampleSpec {
                samples: ctx.spec.samples.min(7),
                min_sample: Duration::from_millis(15),
                warmup: Duration::from_millis(15),
            };
            (default_threads(allowed.len(), true), spec)
        };
        let load_before = load_average();
        let mut out = measure_cases(
            &Variant::ALL,
            &threads,
            &allowed,
            &spec,
            ctx.counters,
            &ctx.retry,
        )?;
        out.notes
            .extend(busy_note(load_before, load_average(), allowed.len()));
        if allowed.len() >= 2 {
            // Quick: the first CPU against every other (one row of the matrix shows the
            // machine's shape: siblings, shared caches, sockets); full: every pair.
            let pairs = if full {
                c2c::pairs(&allowed)
            } else {
                c2c::star_pairs(&allowed)
            };
            let c2c_spec = c2c::C2cSpec::new(None, !full);
            out.extend(measure_c2c(&pairs, &c2c_spec, ctx.counters)?);
            if full {
                out.notes
                    .extend(kernel_cache_sharing(&ctx.machine, &allowed));
            }
        } else {
            out.notes
                .push("c2c skipped: this process may use only one CPU".to_string());
        }
        Ok(out)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}

/// The cost-sheet lines of a share outcome.
pub fn headlines(outcome: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    for r in ratios(outcome) {
        let (label, cause) = if r.better == Variant::ArcPerThread {
            (
                "share: per-thread Arcs vs shared Arcs",
                "each clone/drop of a shared Arc writes the refcount's line, which must move between cores",
            )
        } else {
            (
                "share: padded vs falsely shared counters",
                "counters packed into one line move that line between cores on every add, though no data is shared",
            )
        };
        let reading = if r.threads < 2 {
            format!(
                "{:.2}x at one thread: nothing is shared with one CPU; run on two or more to see the cost",
                r.summary.median
            )
        } else {
            format!(
                "{:.1}x the throughput at {} threads: {cause}",
                r.summary.median, r.threads
            )
        };
        out.push(
            Headline {
                label: format!("{label} (T={})", r.threads),
                summary: r.summary,
                unit: "x".into(),
                reading,
                ..Default::default()
            }
            .judged_by(&[&r.inputs[0], &r.inputs[1]]),
        );
    }
    if let Some((a, b, row)) = c2c_rows(outcome).into_iter().next() {
        out.push(Headline {
            label: format!("share c2c: one-way latency CPU {a} <-> {b}"),
            summary: row.summary,
            unit: "ns".into(),
            reading: format!(
                "a write to a line CPU {b} holds waits about {:.0} ns for it to come over to CPU {a}",
                row.summary.median
            ),
            ..Default::default()
        }
        .judged_by(&[row]));
    }
    out
}
