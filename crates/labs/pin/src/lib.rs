//! The pin lab: what thread placement costs. Three workloads, each under the placements that
//! apply to it:
//! - memory: a dependent chase per thread over its own region larger than the last-level
//!   cache (each step waits for DRAM, so two threads on one CPU split one core's time);
//! - sharing: every thread increments one shared atomic (the line moves between cores);
//! - echo: the echo server (`costlab echo serve`, a child process) and a ping-pong client.
//!
//! Placements: pinned (one thread per CPU; the server away from the network interrupts),
//! free (no affinity), stacked (two busy threads on one CPU), irq-cpu (the server on the CPU
//! that takes the NIC's or virtio's interrupts, from the machine's IRQ table). Each figure
//! comes with the scheduler's counters (CPU migrations, context switches, per second) and
//! where each thread was seen running (sampled from /proc/.../task/*/stat).

pub mod args;
mod echo;
mod observe;
pub mod placement;
pub mod plan;
mod render;
mod workers;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, Result};

use args::PinArgs;
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::{cancel, cpus, cycle};
use costlab_history::report::{progress, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub use plan::{Plan, Workload, WORKLOADS};
pub use render::{headlines, readings, render};
use workers::CHASE_BYTES;

pub const LAB: &str = "pin";

/// `costlab pin`: the plan its arguments ask for, measured.
pub fn run(args: &PinArgs, ctx: &Ctx) -> Result<Outcome> {
    execute(&Plan::parse(args, ctx.quick)?, ctx)
}

pub fn execute(plan: &Plan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    if allowed.len() < 2 {
        return Err(usage(
            "pin needs two CPUs or more to compare placements: allow more CPUs (taskset)",
        ));
    }
    let irqs = placement::net_irqs(&ctx.machine.net);
    let mut out = Outcome::default();
    let threads = 2usize;
    // Chase chains, built once (a random cycle through CHASE_BYTES of u32 indices).
    // Built in parallel, one thread per chain: a 64 MiB cycle takes a while to shuffle.
    let chains: Vec<Vec<u32>> = if plan.workloads.contains(&Workload::Memory) {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|i| s.spawn(move || cycle::sattolo(CHASE_BYTES / 4, 0x9e37 + i as u64)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("building a chase panicked")))
                .collect::<Result<Vec<_>>>()
        })?
    } else {
        Vec::new()
    };
    let runs = ctx.spec.samples.max(1);
    let each = plan.duration / runs as u32;
    let total: usize = plan
        .workloads
        .iter()
        .map(|w| {
            w.placements()
                .iter()
                .filter(|p| plan.placements.contains(p))
                .count()
        })
        .sum();
    let bar = progress::bar(total as u64, "pin");
    for &w in &plan.workloads {
        for &p in w
            .placements()
            .iter()
            .filter(|p| plan.placements.contains(p))
        {
            cancel::check()?;
            bar.set_message(format!("{} {}", w.name(), p.name()));
            let sets = match placement::assign(p, threads, &allowed, &irqs) {
                Ok(s) => s,
                Err(why) => {
                    out.notes
                        .push(format!("{} {}: not measured: {why}", w.name(), p.name()));
                    bar.inc(1);
                    continue;
                }
            };
            let mark = out.results.len();
            // Watch the CPUs the placement uses: a stacked pair on one CPU leaves the other
            // idle, and ours is not someone else's time there.
            let mut used: Vec<usize> = sets.iter().flatten().copied().collect();
            used.sort_unstable();
            used.dedup();
            let watch = Watch::start(&used);
            let mut per_s = Vec::new();
            let mut migr = Vec::new();
            let mut sw = Vec::new();
            let mut seen: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
            let mut why = None;
            for _ in 0..runs {
                cancel::check()?;
                let r = match w {
                    Workload::Echo => echo::run_echo(&sets, &allowed, each)?,
                    _ => workers::run_workers(w, &sets, &allowed, &chains, each)?,
                };
                per_s.push(r.per_s);
                migr.extend(r.migrations_per_s);
                sw.extend(r.switches_per_s);
                for (k, v) in r.seen {
                    seen.entry(k).or_default().extend(v);
                }
                why = why.or(r.why_no_counters);
            }
            bar.inc(1);
            let case =
                || case! {"workload" => w.name(), "placement" => p.name(), "threads" => threads};
            out.push(LAB, case(), "throughput", w.unit(), per_s);
            out.push(LAB, case(), "migrations", "per s", migr);
            out.push(LAB, case(), "context_switches", "per s", sw);
            out.attach_conditions(mark, watch.finish());
            let placed = sets
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        "free".to_string()
                    } else {
                        cpus::format_cpu_list(s)
                    }
                })
                .collect::<Vec<_>>()
                .join(" + ");
            out.notes.push(format!(
                "{} {}: placed on {placed}; seen running: {}",
                w.name(),
                p.name(),
                observe::describe_seen(&seen)
            ));
            if let Some(why) = why {
                out.notes.push(format!("counters: {why}"));
            }
        }
    }
    bar.finish_and_clear();
    if let Some(cpu) = placement::irq_cpu(&irqs, &allowed) {
        out.notes.push(format!(
            "network interrupts: CPU {cpu} takes the most ({}); loopback traffic raises none of them, so irq-cpu here measures sharing that CPU with the device's background interrupts",
            irqs.get(&cpu).copied().unwrap_or(0)
        ));
    }
    out.notes.extend(readings(&out));
    out.notes.dedup();
    Ok(out)
}

pub struct PinLab;

impl Lab for PinLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<PinArgs>(
            "pin",
            "Pinned vs free-running vs badly placed threads (two on one CPU, on the IRQ CPU)",
            "Examples:\n  costlab pin\n  costlab pin --case memory --placement pinned,free,stacked",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: PinArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        (cpus::allowed_cpus().len() < 2).then(|| "one CPU: no placements to compare".into())
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        execute(&Plan::for_run(full), ctx)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}
