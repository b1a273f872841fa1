//! Each figure's stored values across runs, per machine: what `costlab trend` analyses
//! (`analysis::trend`).

use std::collections::BTreeMap;

use anyhow::Result;

use super::Store;
use crate::analysis::trend::Point;
use costlab_core::model::Quality;

/// (figure, machine) -> (unit, points).
pub type Series = BTreeMap<(String, String), (String, Vec<Point>)>;

/// The part of a result's stored verdict column a trend reads.
#[derive(Default, serde::Deserialize)]
struct StoredVerdict {
    #[serde(default)]
    quality: Option<Quality>,
    #[serde(default)]
    quality_reasons: Vec<String>,
}

pub fn series(store: &Store) -> Result<Series> {
    let rows = store.read_rows(
        "SELECT x.figure_id, r.machine_id, x.unit, r.id, r.started, x.summary, x.verdict
         FROM results x JOIN runs r ON r.id = x.run_id
         ORDER BY r.started, r.id, x.seq",
    )?;
    let mut out = Series::new();
    for r in rows {
        let t = |i: usize| r[i].text().unwrap_or_default();
        let summary: serde_json::Value = serde_json::from_str(&t(5)).unwrap_or_default();
        let Some(median) = summary.get("median").and_then(serde_json::Value::as_f64) else {
            continue;
        };
        let entry = out
            .entry((t(0), t(1)))
            .or_insert_with(|| (t(2), Vec::new()));
        // A figure repeated within a run: the first row wins (as in compare).
        if entry.1.last().is_some_and(|p| p.run == t(3)) {
            continue;
        }
        let verdict: StoredVerdict = serde_json::from_str(&t(6)).unwrap_or_default();
        entry.1.push(Point {
            run: t(3),
            started: t(4),
            median,
            quality: verdict.quality,
            quality_reasons: verdict.quality_reasons,
        });
    }
    Ok(out)
}
