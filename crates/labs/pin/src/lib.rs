//! The pin lab: what thread placement costs. Three workloads, each under the placements that
//! apply to it:
//! - memory: a dependent chase per thread over its own region larger than the last-level
//!   cache (each step waits for DRAM, so two threads on one CPU split one core's time);
//! - sharing: every thread increments one shared atomic (the line moves between cores);
//! - echo: the echo server (`costlab echo serve`, a child process) and a ping-pong client.
//!
//! Placements: pinned (one thread per CPU; the server away from the network interrupts),
//! free (no affinity), stacked (two busy threads on one CPU), irq-cpu (the server on the CPU
//! that takes the NIC's or virtio's interrupts, from the machine's IRQ table; with
//! `--move-irqs` the interrupts are moved there, through the restore journal), and from the
//! topology sysfs gives (`machine::CpuPlace`): same-core (SMT siblings), same-node, cross-node
//! and per-core, for `--threads N`. A placement named on the command line that this machine
//! cannot give is refused in one line before anything runs. Each figure comes with the
//! scheduler's counters (CPU migrations, context switches, per second), IPC where a PMU counts
//! it, and where each thread was seen running (sampled from /proc/.../task/*/stat field 39,
//! kept in the row's `conditions.ran_on`).

pub mod args;
mod echo;
pub mod irqs;
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
use costlab_core::measure::{cancel, counters, cpus, cycle};
use costlab_history::report::{progress, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

use placement::Placement;
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
    let layout = placement::Layout::new(&allowed, &ctx.machine.cpu_places);
    let irqs = placement::net_irqs(&ctx.machine.net);
    let queues = irqs::queue_irqs(&ctx.machine.net);
    let no_irqs = irqs::why_none(&ctx.machine.net);
    if plan.move_irqs && !queues.is_empty() && !rustix::process::geteuid().is_root() {
        return Err(usage(
            "--move-irqs writes /proc/irq/N/smp_affinity_list (root only): run as root, or leave it out to place the server on the CPU that takes the interrupts now",
        ));
    }
    let mut out = Outcome::default();
    let todo = placements_to_run(
        plan,
        &layout,
        &irqs,
        &queues,
        no_irqs.as_deref(),
        &allowed,
        &mut out,
    )?;
    if plan.move_irqs {
        if let Some(why) = &no_irqs {
            out.notes.push(why.clone());
        }
    }
    let chains = chase_chains(plan, &todo)?;
    let runs = ctx.spec.samples.max(1);
    let each = plan.duration / runs as u32;
    let bar = progress::bar(todo.len() as u64, "pin");
    for (w, p, threads, sets) in todo {
        cancel::check()?;
        bar.set_message(format!("{} {}", w.name(), p.name()));
        let mark = out.results.len();
        // Watch the CPUs the placement uses: a stacked pair on one CPU leaves the other
        // idle, and ours is not someone else's time there.
        let mut used: Vec<usize> = sets.iter().flatten().copied().collect();
        used.sort_unstable();
        used.dedup();
        let moved = if p == Placement::IrqCpu && plan.move_irqs && !queues.is_empty() {
            let cpu = sets[0].first().copied().unwrap_or(allowed[0]);
            let (guards, notes) = irqs::move_to(&queues, cpu);
            out.notes
                .push(format!("{} irq-cpu: {}", w.name(), notes.join("; ")));
            Some(guards)
        } else {
            None
        };
        let watch = Watch::start(&used);
        let (measured, readings) = counters::around(true, || {
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
            Ok((per_s, migr, sw, seen, why))
        })?;
        let (per_s, migr, sw, seen, why) = measured;
        if let Some(guards) = moved {
            let restored: Vec<String> = guards.into_iter().filter_map(|g| g.restore()).collect();
            if !restored.is_empty() {
                out.notes.push(restored.join("; "));
            }
        }
        bar.inc(1);
        let case = || case! {"workload" => w.name(), "placement" => p.name(), "threads" => threads};
        out.push(LAB, case(), "throughput", w.unit(), per_s);
        out.push(LAB, case(), "migrations", "per s", migr);
        out.push(LAB, case(), "context_switches", "per s", sw);
        // On the throughput row only: the IPC column is read beside it.
        if let (Some(r), Some(row)) = (readings, out.results.get_mut(mark)) {
            r.attach(row);
        }
        let mut cond = watch.finish();
        cond.ran_on = seen
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().copied().collect()))
            .collect();
        out.attach_conditions(mark, cond);
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

/// One placement to measure: its workload, placement, thread count and each thread's CPUs.
type Todo = (Workload, Placement, usize, Vec<Vec<usize>>);

/// Every placement worked out before anything runs: one named on the command line that is
/// impossible here is refused now, in one line, not after minutes of the others; one the plan
/// chose by default is left out with a note.
fn placements_to_run(
    plan: &Plan,
    layout: &placement::Layout,
    irqs: &BTreeMap<usize, u64>,
    queues: &[irqs::QueueIrq],
    no_irqs: Option<&str>,
    allowed: &[usize],
    out: &mut Outcome,
) -> Result<Vec<Todo>> {
    let mut todo = Vec::new();
    for &w in &plan.workloads {
        for &p in w
            .placements()
            .iter()
            .filter(|p| plan.placements.contains(p))
        {
            let n = w.threads(plan.threads);
            let sets = match placement::assign(p, n, layout, irqs) {
                Ok(s) => Ok(s),
                // Moving the interrupts makes a CPU the IRQ CPU even where none takes any yet.
                Err(_) if p == Placement::IrqCpu && plan.move_irqs && !queues.is_empty() => {
                    Ok((0..n).map(|i| vec![allowed[i % allowed.len()]]).collect())
                }
                Err(why) if p == Placement::IrqCpu => Err(no_irqs.map_or(why, str::to_string)),
                Err(why) => Err(why),
            };
            match sets {
                Ok(s) => todo.push((w, p, n, s)),
                Err(why) if plan.explicit => {
                    return Err(usage(
                        if why.starts_with(p.name()) || why.starts_with("IRQ") {
                            why
                        } else {
                            format!("{}: {why}", p.name())
                        },
                    ))
                }
                Err(why) => {
                    out.notes
                        .push(format!("{} {}: not measured: {why}", w.name(), p.name()))
                }
            }
        }
    }
    Ok(todo)
}

/// Chase chains, built once (a random cycle through CHASE_BYTES of u32 indices), in parallel:
/// a 64 MiB cycle takes a while to shuffle. At most four: more threads share them, each
/// starting at its own point of the cycle.
fn chase_chains(plan: &Plan, todo: &[Todo]) -> Result<Vec<Vec<u32>>> {
    if todo.iter().any(|t| t.0 == Workload::Memory) {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..plan.threads.clamp(1, 4))
                .map(|i| s.spawn(move || cycle::sattolo(CHASE_BYTES / 4, 0x9e37 + i as u64)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("building a chase panicked")))
                .collect::<Result<Vec<_>>>()
        })
    } else {
        Ok(Vec::new())
    }
}

pub struct PinLab;

impl Lab for PinLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<PinArgs>(
            "pin",
            "Pinned vs free-running vs badly placed threads (two on one CPU, on the IRQ CPU, on SMT siblings, across nodes)",
            "Examples:\n  costlab pin\n  costlab pin --case memory --placement pinned,free,stacked\n  costlab pin --case sharing --threads 4 --placement same-core,same-node,cross-node,per-core\n  costlab pin --case echo --placement irq-cpu --move-irqs",
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
