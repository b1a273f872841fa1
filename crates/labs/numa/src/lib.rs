//! The NUMA lab: what remote memory costs here. A node x node latency matrix (one thread on
//! node i chasing pointers through memory bound to node j), the same for streaming bandwidth,
//! and a multi-threaded bandwidth run under three placements: bind each thread's memory to its
//! own node, interleave over all nodes, and first-touch by one initialising thread (what a
//! program that fills its buffers serially gets). `numa-maps` (maps.rs) shows where a running
//! process's memory is.

pub mod args;
pub mod kernels;
pub mod maps;
pub mod plan;
pub mod policy;

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::json;

use args::{NumaArgs, NumaMapsArgs};
use costlab_core::error::usage;
use costlab_core::machine::{numa, Machine};
use costlab_core::measure::counters::{self, Readings};
use costlab_core::measure::cpus::{allowed_cpus, parse_cpu_list, Pinned};
use costlab_core::measure::{sizes, team, SampleSpec};
use costlab_history::report::{progress, Model, ModelPoint, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

use costlab_core::measure::region::PageKind;
use plan::{Plan, Request};
use policy::{majority, place, place_range, Placement, Region};

const LAB: &str = "numa";

/// `costlab numa`.
pub fn run(args: &NumaArgs, ctx: &Ctx) -> Result<Outcome> {
    let req = request_from(args, ctx)?;
    run_request(ctx, &req)
}

fn request_from(args: &NumaArgs, ctx: &Ctx) -> Result<Request> {
    let nodes = match &args.nodes {
        Some(t) => Some(parse_cpu_list(t).map_err(|_| {
            usage(format!(
                "bad node list '{t}': use node ids and ranges like 0,1 or 0-3"
            ))
        })?),
        None => None,
    };
    let threads = match &args.threads {
        Some(t) => Some(
            costlab_lab::args::one("--threads", t, "numa runs one thread count per placement")?
                .trim()
                .parse::<usize>()
                .map_err(|_| {
                    usage(format!(
                        "bad --threads '{t}': expected a whole number like 8"
                    ))
                })?,
        ),
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

/// Measure a plan: latency matrix, bandwidth matrix, placements. Real code for two or more
/// nodes; on one node the tests drive it with the 1 x 1 plan (node 0 to node 0).
pub fn execute(
    machine: &Machine,
    plan: &Plan,
    spec: &SampleSpec,
    with_counters: bool,
) -> Result<Outcome> {
    let mut out = Outcome::default();
    out.notes.extend(plan.notes.iter().cloned());
    out.notes.extend(sysctl_notes(machine));
    let node_cpus: BTreeMap<usize, Vec<usize>> = plan
        .cpu_nodes
        .iter()
        .map(|n| (n.id, n.cpus.clone()))
        .collect();
    let steps = plan.pairs.len() * (1 + usize::from(plan.matrix_threads > 0))
        + usize::from(!plan.policy_cpus.is_empty()) * 3;
    let bar = progress::bar(steps as u64, LAB);

    for &(i, j) in &plan.pairs {
        bar.set_message(format!("latency node {i} -> memory on node {j}"));
        let cpu = node_cpus[&i][0];
        let from = out.results.len();
        let (lat, readings) = counters::around(with_counters, || {
            latency_case(cpu, j, plan.latency_bytes, spec)
        })?;
        out.push(
            LAB,
            costlab_core::case! {"cpu_node" => i, "mem_node" => j, "policy" => "bind", "threads" => 1},
            "latency",
            "ns",
            lat.samples,
        );
        counters::attach(&readings, &mut out.results, from);
        out.notes.extend(lat.misplaced);
        bar.inc(1);
    }

    if plan.matrix_threads > 0 {
        for &(i, j) in &plan.pairs {
            bar.set_message(format!("bandwidth node {i} -> memory on node {j}"));
            // A node with fewer usable CPUs runs fewer threads rather than doubling up.
            let cpus: Vec<usize> = node_cpus[&i]
                .iter()
                .copied()
                .take(plan.matrix_threads)
                .collect();
            let from = out.results.len();
            let (bw, readings) = counters::around(with_counters, || {
                bandwidth_case(
                    &cpus,
                    |_| Placement::Bind(j),
                    None,
                    plan.bytes_per_thread,
                    spec,
                )
            })?;
            out.push(
                LAB,
                costlab_core::case! {"cpu_node" => i, "mem_node" => j, "policy" => "bind", "threads" => cpus.len()},
                "bandwidth",
                "GB/s",
                bw.samples,
            );
            counters::attach(&readings, &mut out.results, from);
            out.notes.extend(bw.misplaced);
            bar.inc(1);
        }
    }

    if !plan.policy_cpus.is_empty() {
        let cpus = &plan.policy_cpus;
        let toucher = cpus[0];
        let node_of = |cpu: usize| machine.node_of_cpu(cpu).unwrap_or(0);
        let runs: [(&str, serde_json::Value); 3] = [
            ("bind", json!("local")),
            ("interleave", json!("all")),
            ("first-touch", json!(null)),
        ];
        for (policy, mem_node) in runs {
            bar.set_message(format!("{} threads, {policy}", cpus.len()));
            let from = out.results.len();
            let (bw, readings) = counters::around(with_counters, || match policy {
                "bind" => bandwidth_case(
                    cpus,
                    |k| Placement::Bind(node_of(cpus[k])),
                    None,
                    plan.bytes_per_thread,
                    spec,
                ),
                "interleave" => bandwidth_case(
                    cpus,
                    |_| Placement::Interleave(plan.mem_nodes.clone()),
                    None,
                    plan.bytes_per_thread,
                    spec,
                ),
                _ => bandwidth_case(
                    cpus,
                    |_| Placement::FirstTouch,
                    Some(toucher),
                    plan.bytes_per_thread,
                    spec,
                ),
            })?;
            let mem_node = if mem_node.is_null() {
                // Where the one initialising thread's touches put it, as observed.
                bw.landed.map_or(json!(node_of(toucher)), |n| json!(n))
            } else {
                mem_node
            };
            out.push(
                LAB,
                costlab_core::case! {"cpu_node" => "all", "mem_node" => mem_node, "policy" => policy, "threads" => cpus.len()},
                "bandwidth",
                "GB/s",
                bw.samples,
            );
            counters::attach(&readings, &mut out.results, from);
            out.notes.extend(bw.misplaced);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if let Some(m) = slit_model(machine, &out) {
        out.models.push(m);
    }
    Ok(out)
}

/// zone_reclaim_mode and numa_balancing, shown beside the figures: either can move or stall
/// the placements measured here.
fn sysctl_notes(machine: &Machine) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(z) = machine.zone_reclaim_mode {
        notes.push(format!(
            "vm.zone_reclaim_mode = {}",
            numa::zone_reclaim_meaning(z)
        ));
    }
    if let Some(b) = machine.numa_balancing {
        let mut s = format!(
            "kernel.numa_balancing = {}",
            numa::numa_balancing_meaning(b)
        );
        if b != 0 {
            s.push_str("; first-touch pages may migrate during the run");
        }
        notes.push(s);
    }
    notes
}

/// One case's samples, where its memory landed, and notes where it is not where it was meant.
pub struct CaseResult {
    pub samples: Vec<f64>,
    pub landed: Option<usize>,
    pub misplaced: Vec<String>,
}

fn check_landed(region: &Region, want: &Placement) -> (Option<usize>, Vec<String>) {
    let seen = match policy::nodes(region, 64) {
        Ok(s) => s,
        Err(e) => return (None, vec![format!("could not check page placement: {e}")]),
    };
    let landed = majority(&seen);
    let mut notes = Vec::new();
    if let Placement::Bind(j) = want {
        if seen.keys().any(|n| n != j) {
            notes.push(format!(
                "memory bound to node {j} was found on nodes {:?} (pages sampled per node)",
                seen
            ));
        }
    }
    (landed, notes)
}

/// ns per dependent load: a thread on `cpu` chasing through `bytes` bound to `mem_node`.
pub fn latency_case(
    cpu: usize,
    mem_node: usize,
    bytes: u64,
    spec: &SampleSpec,
) -> Result<CaseResult> {
    let mut region = Region::untouched(bytes, PageKind::Thp)?;
    place(&region, &Placement::Bind(mem_node))?;
    kernels::build_chase(region.as_mut_slice_u64(), 0x9E37_79B9_7F4A_7C15 ^ bytes);
    let (landed, misplaced) = check_landed(&region, &Placement::Bind(mem_node));
    let words = region.as_slice_u64();
    let samples = team(
        &[cpu],
        spec,
        |_| Ok(0usize),
        |at, n| {
            *at = kernels::chase(words, *at, n);
        },
    )?;
    Ok(CaseResult {
        samples: samples.iter().map(|s| s.ns_per_iter()).collect(),
        landed,
        misplaced,
    })
}

/// GB/s of `cpus.len()` threads each reading its own `bytes_per_thread` slice of one region.
/// Slice k is placed by `placement(k)`; with `toucher`, one thread pinned there writes the
/// whole region first (first-touch), otherwise the placement decides and who writes does not
/// matter.
pub fn bandwidth_case(
    cpus: &[usize],
    placement: impl Fn(usize) -> Placement,
    toucher: Option<usize>,
    bytes_per_thread: u64,
    spec: &SampleSpec,
) -> Result<CaseResult> {
    let slice = bytes_per_thread as usize;
    let mut region = Region::system_default((slice * cpus.len()) as u64)?;
    let first = placement(0);
    if matches!(first, Placement::Interleave(_)) {
        place(&region, &first)?;
    } else {
        for k in 0..cpus.len() {
            place_range(&region, k * slice, slice, &placement(k))?;
        }
    }
    let _restore = match toucher {
        Some(cpu) => Some(Pinned::to(cpu)?),
        None => None,
    };
    for (k, chunk) in region.as_mut_slice_u64().chunks_mut(slice / 8).enumerate() {
        chunk.fill(k as u64 + 1);
    }
    let (landed, mut misplaced) = check_landed(&region, &first);
    if (1..cpus.len()).any(|k| placement(k) != first) {
        misplaced.clear(); // slices bound to different nodes: the whole-region check does not apply
    }
    let words = region.as_slice_u64();
    let per = slice / 8;
    let samples = team(
        cpus,
        spec,
        |k| Ok(&words[k * per..(k + 1) * per]),
        |mine: &mut &[u64], n| {
            for _ in 0..n {
                kernels::read_all(mine);
            }
        },
    )?;
    let total = (slice * cpus.len()) as f64;
    Ok(CaseResult {
        samples: samples
            .iter()
            .map(|s| costlab_core::measure::units::gb_per_s(total * s.iters as f64, s.ns))
            .collect(),
        landed,
        misplaced,
    })
}

/// The SLIT distance model: remote latency = local latency x distance / 10. Firmware writes
/// these distances; the measurement says whether they describe the machine.
fn slit_model(machine: &Machine, out: &Outcome) -> Option<Model> {
    let lat = |i: usize, j: usize| {
        out.find(
            "latency",
            &costlab_core::case! {"cpu_node" => i, "mem_node" => j},
        )
        .map(|r| r.summary.median)
    };
    let mut points = Vec::new();
    let mut verdict = Vec::new();
    for r in out.results.iter().filter(|r| r.metric == "latency") {
        let (Some(i), Some(j)) = (
            r.case.get("cpu_node").and_then(|v| v.as_u64()),
            r.case.get("mem_node").and_then(|v| v.as_u64()),
        ) else {
            continue;
        };
        let (i, j) = (i as usize, j as usize);
        if i == j {
            continue;
        }
        let (Some(local), Some(d)) = (
            lat(i, i),
            machine.node(i).and_then(|n| n.distances.get(j).copied()),
        ) else {
            continue;
        };
        let p = ModelPoint {
            case: costlab_core::case! {"cpu_node" => i, "mem_node" => j},
            predicted: local * d as f64 / 10.0,
            measured: r.summary.median,
            unit: "ns".to_string(),
        };
        if p.error().abs() > 0.25 {
            verdict.push(format!(
                "node {i} -> {j}: SLIT distance {d} predicts {:.0} ns, measured {:.0} ns ({:+.0}%)",
                p.predicted,
                p.measured,
                100.0 * p.error()
            ));
        }
        points.push(p);
    }
    if points.is_empty() {
        return None;
    }
    if verdict.is_empty() {
        verdict.push("SLIT distances predict remote latency within 25% on every pair".to_string());
    }
    let mut params = serde_json::Map::new();
    params.insert("rule".into(), json!("remote = local x distance / 10"));
    let mut m = Model {
        lab: LAB.to_string(),
        name: "remote latency from SLIT distance".to_string(),
        params,
        points,
        verdict,
    };
    // Checked against every latency on the matrix, locals included.
    let inputs: Vec<&costlab_history::report::ResultRow> = out
        .results
        .iter()
        .filter(|r| r.metric == "latency")
        .collect();
    costlab_core::measure::quality::model_inherits(&mut m, &inputs);
    Some(m)
}

/// The terminal rendering: the matrices, the placements, the model. Empty when nothing was
/// measured (one node: the note says why).
pub fn render(outcome: &Outcome) -> String {
    if outcome.results.is_empty() {
        return String::new();
    }
    let mut text = String::new();
    for (metric, unit, title) in [
        (
            "latency",
            "ns",
            "latency, thread on node (row) -> memory on node (column)",
        ),
        (
            "bandwidth",
            "GB/s",
            "bandwidth, threads on node (row) -> memory on node (column)",
        ),
    ] {
        let rows: Vec<_> = outcome
            .results
            .iter()
            .filter(|r| {
                r.metric == metric && r.key("policy") == "bind" && r.key("cpu_node") != "all"
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut cpu_nodes: Vec<String> = rows.iter().map(|r| r.key("cpu_node")).collect();
        cpu_nodes.dedup();
        let mut mem_nodes: Vec<String> = rows.iter().map(|r| r.key("mem_node")).collect();
        mem_nodes.sort_by_key(|s| s.parse::<usize>().unwrap_or(usize::MAX));
        mem_nodes.dedup();
        let mut headers = vec![unit.to_string()];
        headers.extend(mem_nodes.iter().map(|m| format!("mem {m}")));
        let table: Vec<Vec<String>> = cpu_nodes
            .iter()
            .map(|c| {
                let threads = rows
                    .iter()
                    .find(|r| &r.key("cpu_node") == c)
                    .map(|r| r.key("threads"))
                    .unwrap_or_default();
                let mut row = vec![format!("cpu {c} ({threads} thr)")];
                for m in &mem_nodes {
                    row.push(
                        rows.iter()
                            .find(|r| &r.key("cpu_node") == c && &r.key("mem_node") == m)
                            .map_or("—".to_string(), |r| r.summary.show(1)),
                    );
                }
                row
            })
            .collect();
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        text += &format!(
            "{title}\n{}\n",
            costlab_history::report::table::render(&h, &table)
        );
    }
    let placements: Vec<Vec<String>> = outcome
        .results
        .iter()
        .filter(|r| r.key("cpu_node") == "all")
        .map(|r| {
            vec![
                r.key("policy"),
                r.key("mem_node"),
                r.key("threads"),
                r.summary.show(2),
            ]
        })
        .collect();
    if !placements.is_empty() {
        text += &format!(
            "multi-threaded read bandwidth by placement\n{}\n",
            costlab_history::report::table::render(
                &["policy", "memory on", "threads", "GB/s"],
                &placements
            )
        );
    }
    for m in &outcome.models {
        text += &format!("model: {}\n", m.name);
        for v in &m.verdict {
            text += &format!("  {v}\n");
        }
    }
    for r in &outcome.results {
        if let Some(c) = &r.counters {
            let readings = Readings {
                counters: c.clone(),
                unsupported: r.unsupported_counters.clone().unwrap_or_default(),
            };
            text += &format!(
                "counters [{}]: {}\n",
                r.figure_id(),
                readings.summary_line()
            );
        }
    }
    text
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
        let args: NumaArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
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
        run_request(ctx, &req)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}

fn headlines(outcome: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    let lat: Vec<_> = outcome
        .results
        .iter()
        .filter(|r| r.metric == "latency")
        .collect();
    let local = |i: &str| {
        lat.iter()
            .find(|r| r.key("cpu_node") == i && r.key("mem_node") == i)
            .copied()
    };
    if let Some(worst) = lat
        .iter()
        .filter(|r| r.key("cpu_node") != r.key("mem_node"))
        .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
    {
        if let Some(local_row) = local(&worst.key("cpu_node")) {
            let l = local_row.summary;
            out.push(
                Headline {
                    label: format!(
                        "remote DRAM latency (node {} -> node {})",
                        worst.key("cpu_node"),
                        worst.key("mem_node")
                    ),
                    summary: worst.summary,
                    unit: "ns".to_string(),
                    reading: format!(
                        "remote memory costs {:.2}x local here ({:.0} ns vs {:.0} ns)",
                        worst.summary.median / l.median,
                        worst.summary.median,
                        l.median
                    ),
                    ..Default::default()
                }
                // The ratio in the reading is remote over local: both are inputs.
                .judged_by(&[worst, local_row]),
            );
        }
    }
    let placed = |p: &str| {
        outcome
            .results
            .iter()
            .find(|r| r.key("cpu_node") == "all" && r.key("policy") == p)
    };
    if let (Some(bind), Some(inter), Some(ft)) =
        (placed("bind"), placed("interleave"), placed("first-touch"))
    {
        let best = [bind, inter, ft]
            .into_iter()
            .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
            .unwrap_or(bind);
        out.push(
            Headline {
                label: format!(
                    "read bandwidth, {} threads, best placement",
                    best.key("threads")
                ),
                summary: best.summary,
                unit: "GB/s".to_string(),
                reading: format!(
                    "{} wins: bind {:.1}, interleave {:.1}, first-touch by one thread {:.1} GB/s",
                    best.key("policy"),
                    bind.summary.median,
                    inter.summary.median,
                    ft.summary.median
                ),
                ..Default::default()
            }
            // "wins" compares the three placements: each is an input.
            .judged_by(&[bind, inter, ft]),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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
