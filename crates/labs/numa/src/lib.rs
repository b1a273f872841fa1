//! The NUMA lab: what remote memory costs here. A node x node latency matrix (one thread on
//! node i chasing pointers through memory bound to node j), the same for streaming bandwidth,
//! and a multi-threaded bandwidth run under three placements: bind each thread's memory to its
//! own node, interleave over all nodes, and first-touch by one initialising thread (what a
//! program that fills its buffers serially gets). `numa-maps` (maps.rs) shows where a running
//! process's memory is.

pub mod args;
mod cases;
mod dir;
mod execute;
pub mod kernels;
pub mod knobs;
pub mod maps;
mod model;
pub mod plan;
pub mod policy;
mod render;

use anyhow::Result;

use args::{NumaArgs, NumaKnobsArgs, NumaMapsArgs};
use costlab_core::error::usage;
use costlab_core::measure::cpus::{allowed_cpus, parse_cpu_list};
use costlab_core::measure::sizes;
use costlab_history::report::Outcome;
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub use cases::{bandwidth_case, latency_case, CaseResult};
pub use execute::execute;
use plan::Request;
use render::headlines;
pub use render::render;

const LAB: &str = "numa";

/// `costlab numa`.
pub fn run(args: &NumaArgs, ctx: &Ctx) -> Result<Outcome> {
    let req = request_from(args, ctx)?;
    run_request(ctx, &req)
}

fn request_from(args: &NumaArgs, ctx: &Ctx) -> Result<Request> {
    let nodes = match &args.nodes {
        Some(t) => Some(parse_cpu_list(t).map_err(|e| {
            // A node given twice is named, as in every list; anything else is malformed.
            let e = e.to_string();
            match e
                .rsplit_once(": CPU ")
                .filter(|_| e.contains("given twice"))
            {
                Some((_, dup)) => usage(format!(
                    "bad node list '{t}': node {}",
                    dup.replace("CPU", "node")
                )),
                None => usage(format!(
                    "bad node list '{t}': use node ids and ranges like 0,1 or 0-3"
                )),
            }
        })?),
        None => None,
    };
    let threads = match &args.threads {
        Some(t) => Some(costlab_core::measure::units::parse_count(
            costlab_lab::args::one("--threads", t, "numa runs one thread count per placement")?,
            "--threads",
            1,
            1 << 16,
            "8",
        )? as usize),
        None => None,
    };
    let size = args
        .size
        .as_deref()
        .map(|s| costlab_lab::args::one("--sizes", s, "the numa chase takes one working set"))
        .transpose()?
        .map(sizes::parse_size)
        .transpose()?;
    Ok(Request {
        nodes,
        threads,
        size,
        quick: ctx.quick,
        bandwidth_matrix: true,
        oversubscribe: args.oversubscribe,
    })
}

fn run_request(ctx: &Ctx, req: &Request) -> Result<Outcome> {
    if let Some(why) = plan::unavailable(&ctx.machine) {
        return Ok(Outcome {
            notes: vec![why],
            ..Default::default()
        });
    }
    let allowed = allowed_cpus();
    let plan = plan::plan(&ctx.machine, &allowed, req)?;
    execute(&ctx.machine, &plan, &ctx.spec, ctx.counters)
}

/// `costlab numa-knobs`.
pub fn run_knobs(args: &NumaKnobsArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = knobs::KnobPlan::parse(
        args.knobs.as_deref(),
        args.size.as_deref(),
        args.fill.as_deref(),
        args.dir.as_deref(),
        args.change_knobs,
        ctx.quick,
        ctx.spec.samples,
    )?;
    if let Some(why) = plan::unavailable(&ctx.machine) {
        return Ok(Outcome {
            notes: vec![format!(
                "{why}; the NUMA knobs (zone_reclaim_mode, numa_balancing) act between nodes, so there is nothing to measure"
            )],
            ..Default::default()
        });
    }
    knobs::execute(&ctx.machine, &plan)
}

/// `costlab numa-maps`.
pub fn run_maps(args: &NumaMapsArgs, ctx: &Ctx) -> Result<(Outcome, String)> {
    let pids = maps::parse_pids(&args.pids, args.this)?;
    let procs = pids
        .iter()
        .map(|&p| maps::read_process(std::path::Path::new("/"), p))
        .collect::<Result<Vec<_>>>()?;
    Ok((
        maps::outcome_for(&ctx.machine, &procs),
        maps::render(&procs),
    ))
}

/// The lab as `costlab run` drives it.
pub struct NumaLab;

impl Lab for NumaLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![
            command::<NumaArgs>(
                "numa",
                "Local vs remote memory: node x node latency and bandwidth, bind vs interleave vs first-touch",
                "Examples:\n  costlab numa\n  costlab numa --nodes 0,1 --sizes 1G\n  costlab numa --threads 4 --quick",
            ),
            command::<NumaKnobsArgs>(
                "numa-knobs",
                "zone_reclaim_mode and numa_balancing, 0 vs 1, on the workloads they are for, with per-node numastat",
                "Examples:\n  costlab numa-knobs --quick\n  costlab numa-knobs --change-knobs --dir /var/tmp\n  costlab numa-knobs --case numa-balancing --sizes 1G --change-knobs",
            ),
            command::<NumaMapsArgs>(
                "numa-maps",
                "Where a process's memory lives, node by node (from /proc/PID/numa_maps)",
                "Examples:\n  costlab numa-maps $(pidof postgres)\n  costlab numa-maps --self\n  costlab numa-maps 1234 --json maps.json",
            ),
        ]
    }
    fn invoke(&self, name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        if name == "numa-maps" {
            // numa-maps renders what it read (the processes), not its outcome: the reading
            // hands its tables to the rendering.
            let args: NumaMapsArgs = parsed(m)?;
            let text = std::rc::Rc::new(std::cell::RefCell::new(String::new()));
            let kept = text.clone();
            return Ok(Invocation::measure_rendered(
                args.common(),
                move |ctx| {
                    let (outcome, rendered) = run_maps(&args, ctx)?;
                    *kept.borrow_mut() = rendered;
                    Ok(outcome)
                },
                move |_| text.take(),
            ));
        }
        if name == "numa-knobs" {
            let args: NumaKnobsArgs = parsed(m)?;
            return Ok(Invocation::measure(args.common.clone(), move |ctx| {
                run_knobs(&args, ctx)
            }));
        }
        let args: NumaArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome) + &knobs::render(outcome)
    }

    fn unavailable(&self, ctx: &Ctx) -> Option<String> {
        plan::unavailable(&ctx.machine)
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        // Quick: the latency matrix at 64 MiB and the three placements (about 5 s on 2-4 nodes).
        let req = Request {
            quick: !full,
            bandwidth_matrix: full,
            ..Default::default()
        };
        let mut out = run_request(ctx, &req)?;
        if full && plan::unavailable(&ctx.machine).is_none() {
            // The knobs at their current settings (a run changes nothing privileged): the
            // workloads and numastat; `numa-knobs --change-knobs` compares 0 with 1.
            let knobs = knobs::KnobPlan::parse(None, None, None, None, false, true, 1)
                .and_then(|p| knobs::execute(&ctx.machine, &p));
            match knobs {
                Ok(k) => out.extend(k),
                Err(e) => out.notes.push(format!("numa-knobs: not measured: {e:#}")),
            }
        }
        Ok(out)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::slit_model;
    use costlab_core::machine::Machine;
    use serde_json::json;
    use std::path::Path;

    /// A two-node outcome as `execute` builds it on a real machine, to check the matrix
    /// rendering, the SLIT model and the headlines without one.
    fn two_node_outcome() -> Outcome {
        let mut o = Outcome::default();
        for (i, j, ns) in [(0, 0, 90.0), (0, 1, 150.0), (1, 0, 140.0), (1, 1, 92.0)] {
            o.push(
                LAB,
                costlab_core::case! {"cpu_node" => i, "mem_node" => j, "policy" => "bind", "threads" => 1},
                "latency",
                "ns",
                vec![ns, ns + 1.0, ns - 1.0],
            );
        }
        for (policy, mem, gbs) in [
            ("bind", json!("local"), 40.0),
            ("interleave", json!("all"), 30.0),
            ("first-touch", json!(0), 20.0),
        ] {
            o.push(
                LAB,
                costlab_core::case! {"cpu_node" => "all", "mem_node" => mem, "policy" => policy, "threads" => 8},
                "bandwidth",
                "GB/s",
                vec![gbs],
            );
        }
        o
    }

    #[test]
    fn matrices_model_and_headlines_on_two_nodes() {
        let root: std::path::PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "../../../tests/fixtures/xeon-2s-4node",
        ]
        .iter()
        .collect();
        let m = Machine::probe_at(Path::new(&root));
        let mut o = two_node_outcome();
        let model = slit_model(&m, &o).unwrap();
        // Distance 11 between nodes 0 and 1: 90 x 1.1 = 99 ns predicted, 150 measured.
        assert_eq!(model.points.len(), 2);
        assert!((model.points[0].predicted - 99.0).abs() < 1e-9);
        assert_eq!(model.points[0].measured, 150.0);
        assert!(model.verdict[0]
            .starts_with("node 0 -> 1: SLIT distance 11 predicts 99 ns, measured 150 ns"));
        o.models.push(model);

        let text = render(&o);
        assert!(text.contains("mem 0") && text.contains("mem 1"), "{text}");
        assert!(text.contains("cpu 1 (1 thr)"));
        assert!(text.contains("first-touch"));

        let h = headlines(&o);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].label, "remote DRAM latency (node 0 -> node 1)");
        assert_eq!(
            h[0].reading,
            "remote memory costs 1.67x local here (150 ns vs 90 ns)"
        );
        assert_eq!(
            h[1].reading,
            "bind wins: bind 40.0, interleave 30.0, first-touch by one thread 20.0 GB/s"
        );
        assert!(headlines(&Outcome::default()).is_empty());
        assert_eq!(render(&Outcome::default()), "");
    }
}
