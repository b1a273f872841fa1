//! The SLIT distance model set against the measured latency matrix.

use serde_json::json;

use crate::LAB;
use costlab_core::machine::Machine;
use costlab_history::report::{Model, ModelPoint, Outcome};

/// The SLIT distance model: remote latency = local latency x distance / 10. Firmware writes
/// these distances; the measurement says whether they describe the machine.
pub fn slit_model(machine: &Machine, out: &Outcome) -> Option<Model> {
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
