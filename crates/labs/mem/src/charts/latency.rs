//! Load-to-use latency (pointer chase) against working-set size, cache sizes marked.

use serde_json::Value;

use super::MEM_KEYS;
use costlab_core::model::Doc;
use costlab_history::report::charts::plot::{Axis, Format, Guide, Plot, Scale};
use costlab_history::report::charts::{lab_ran, plain, series_along, unit_of, xs_ys, Chart};

const ID: &str = "chart-mem-latency";
const TITLE: &str = "Memory latency vs working-set size";

/// (size, "L1d 32K") for each data or unified cache in the machine description.
pub fn cache_guides(machine: &Value) -> Vec<Guide> {
    let mut out: Vec<Guide> = Vec::new();
    let Some(caches) = machine.get("caches").and_then(Value::as_array) else {
        return out;
    };
    for c in caches {
        let kind = c.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "Instruction" {
            continue;
        }
        let (Some(level), Some(size)) = (
            c.get("level").and_then(Value::as_u64),
            c.get("size").and_then(Value::as_u64),
        ) else {
            continue;
        };
        if size == 0 || out.iter().any(|g| g.x == size as f64) {
            continue;
        }
        let name = if kind == "Data" {
            format!("L{level}d")
        } else {
            format!("L{level}")
        };
        out.push(Guide {
            x: size as f64,
            label: format!("{name} {}", costlab_core::measure::sizes::format_size(size)),
        });
    }
    out
}

/// Cache sizes as the mem lab recorded them on its plateau rows ("level": "L2", "cache": bytes),
/// for when the machine description has none.
fn plateau_guides(doc: &Doc) -> Vec<Guide> {
    let mut out: Vec<Guide> = Vec::new();
    for r in doc.results.iter().filter(|r| r.lab == "mem") {
        let (Some(level), Some(size)) = (
            // A plateau given no level marks no cache.
            r.case
                .get("level")
                .and_then(Value::as_str)
                .filter(|l| *l != "none"),
            r.case.get("cache").and_then(Value::as_u64),
        ) else {
            continue;
        };
        if size > 0 && !out.iter().any(|g| g.x == size as f64) {
            out.push(Guide {
                x: size as f64,
                label: format!(
                    "{level} {}",
                    costlab_core::measure::sizes::format_size(size)
                ),
            });
        }
    }
    out
}

pub fn chart(doc: &Doc) -> Chart {
    if !lab_ran(doc, "mem") {
        return Chart::not_run(ID, TITLE, "mem");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "mem" && r.metric == "latency" && r.key("op") == "chase" && plain(r, &MEM_KEYS)
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(ID, TITLE, "no pointer-chase latency figures in this run");
    }
    let series = series_along(&rows, "block", &["op"]);
    let (xs, ys) = xs_ys(&series);
    let mut guides = cache_guides(&doc.machine);
    let mut from = "the kernel reports";
    if guides.is_empty() {
        guides = plateau_guides(doc);
        from = "the mem lab found";
    }
    let mut x = Axis::auto("working-set size (bytes)", &xs, 4.0, Format::Bytes);
    if guides.is_empty() && matches!(x.scale, Scale::Linear) {
        x.zero = false;
    }
    let plot = Plot {
        id: ID.into(),
        title: TITLE.into(),
        x,
        y: Axis::auto(
            format!("latency ({})", unit_of(&rows)),
            &ys,
            20.0,
            Format::Number,
        ),
        series,
        guides,
        marks: vec![],
    };
    // The caption says only what the chart draws: the dashed lines when there are sizes to mark.
    let mut caption =
        "Each access depends on the one before, so this is the full load-to-use latency."
            .to_string();
    // One size is drawn as bars, which mark no cache sizes.
    if !plot.guides.is_empty() && plot.single_x().is_none() {
        caption.push_str(&format!(
            " Dashed lines mark the cache sizes {from}; latency steps up past each."
        ));
    }
    Chart::drawn(plot, caption)
}
