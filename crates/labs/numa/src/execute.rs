//! Measuring a plan: the latency matrix, the bandwidth matrix and the three placements, each
//! case with its counters and any page found off its node, then the SLIT model.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::json;

use crate::cases::{bandwidth_case, latency_case, CaseResult};
use crate::model::slit_model;
use crate::plan::Plan;
use crate::policy::Placement;
use crate::LAB;
use costlab_core::machine::{numa, Machine};
use costlab_core::measure::counters::{self, Readings};
use costlab_core::measure::SampleSpec;
use costlab_history::report::progress::{self, ProgressBar};
use costlab_history::report::Outcome;

/// What every case of one plan shares.
struct Run<'a> {
    plan: &'a Plan,
    spec: &'a SampleSpec,
    with_counters: bool,
    bar: ProgressBar,
    out: Outcome,
}

impl Run<'_> {
    /// Add one case's figure, its counters and its misplaced-page notes, and step the bar.
    fn record(
        &mut self,
        case: costlab_history::report::Case,
        metric: &str,
        unit: &str,
        (r, readings): (CaseResult, Option<Readings>),
    ) {
        let from = self.out.results.len();
        self.out.push(LAB, case, metric, unit, r.samples);
        counters::attach(&readings, &mut self.out.results, from);
        self.out.notes.extend(r.misplaced);
        self.bar.inc(1);
    }
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
    let steps = plan.pairs.len() * (1 + usize::from(plan.matrix_threads > 0))
        + usize::from(!plan.policy_cpus.is_empty()) * 3;
    let mut run = Run {
        plan,
        spec,
        with_counters,
        bar: progress::bar(steps as u64, LAB),
        out,
    };
    let node_cpus: BTreeMap<usize, Vec<usize>> = plan
        .cpu_nodes
        .iter()
        .map(|n| (n.id, n.cpus.clone()))
        .collect();
    latency_matrix(&mut run, &node_cpus)?;
    if plan.matrix_threads > 0 {
        bandwidth_matrix(&mut run, &node_cpus)?;
    }
    if !plan.policy_cpus.is_empty() {
        placements(&mut run, machine)?;
    }
    run.bar.finish_and_clear();
    let mut out = run.out;
    if let Some(m) = slit_model(machine, &out) {
        out.models.push(m);
    }
    Ok(out)
}

/// One thread on each node's first CPU chasing through memory bound to each node.
fn latency_matrix(run: &mut Run, node_cpus: &BTreeMap<usize, Vec<usize>>) -> Result<()> {
    let plan = run.plan;
    for &(i, j) in &plan.pairs {
        run.bar
            .set_message(format!("latency node {i} -> memory on node {j}"));
        let cpu = node_cpus[&i][0];
        let (spec, bytes) = (run.spec, plan.latency_bytes);
        let measured = counters::around(run.with_counters, || latency_case(cpu, j, bytes, spec))?;
        run.record(
            costlab_core::case! {"cpu_node" => i, "mem_node" => j, "policy" => "bind", "threads" => 1},
            "latency",
            "ns",
            measured,
        );
    }
    Ok(())
}

/// A node's threads reading memory bound to each node.
fn bandwidth_matrix(run: &mut Run, node_cpus: &BTreeMap<usize, Vec<usize>>) -> Result<()> {
    let plan = run.plan;
    for &(i, j) in &plan.pairs {
        run.bar
            .set_message(format!("bandwidth node {i} -> memory on node {j}"));
        // A node with fewer usable CPUs runs fewer threads rather than doubling up.
        let cpus: Vec<usize> = node_cpus[&i]
            .iter()
            .copied()
            .take(plan.matrix_threads)
            .collect();
        let spec = run.spec;
        let measured = counters::around(run.with_counters, || {
            bandwidth_case(
                &cpus,
                |_| Placement::Bind(j),
                None,
                plan.bytes_per_thread,
                spec,
            )
        })?;
        run.record(
            costlab_core::case! {"cpu_node" => i, "mem_node" => j, "policy" => "bind", "threads" => cpus.len()},
            "bandwidth",
            "GB/s",
            measured,
        );
    }
    Ok(())
}

/// The policy CPUs reading their memory bound to their own nodes, interleaved over all, and
/// first-touched by one initialising thread.
fn placements(run: &mut Run, machine: &Machine) -> Result<()> {
    let plan = run.plan;
    let cpus = &plan.policy_cpus;
    let toucher = cpus[0];
    let node_of = |cpu: usize| machine.node_of_cpu(cpu).unwrap_or(0);
    let runs: [(&str, serde_json::Value); 3] = [
        ("bind", json!("local")),
        ("interleave", json!("all")),
        ("first-touch", json!(null)),
    ];
    for (policy, mem_node) in runs {
        run.bar
            .set_message(format!("{} threads, {policy}", cpus.len()));
        let spec = run.spec;
        let (bw, readings) = counters::around(run.with_counters, || match policy {
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
        run.record(
            costlab_core::case! {"cpu_node" => "all", "mem_node" => mem_node, "policy" => policy, "threads" => cpus.len()},
            "bandwidth",
            "GB/s",
            (bw, readings),
        );
    }
    Ok(())
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
