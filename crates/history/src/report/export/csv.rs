//! CSV export, tidy: one column per case key, one line per figure (or per sample).

use anyhow::Result;

use costlab_core::model::Doc;

use super::{Exporter, Run};

pub struct Csv;

impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn has_sample_rows(&self) -> bool {
        true
    }
    fn export(&self, run: &Run) -> Result<String> {
        Ok(render_tidy(run.doc, run.raw_samples))
    }
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Case keys a lab adds to a latency row to say which cache level its plateau is: in CSV
/// they become columns of that row, not a second copy of it.
/// A plateau given no level has `level: none` and the level its sizes suggested (`candidate`).
const LEVEL_KEYS: [&str; 5] = ["level", "candidate", "cache", "plateau_from", "plateau_to"];

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The rows to export, each with its case: plateau copies folded into the row they copy.
fn tidy_rows(doc: &Doc) -> Vec<(&costlab_core::model::ResultRow, costlab_core::model::Case)> {
    let base_id = |r: &costlab_core::model::ResultRow| {
        let mut plain = r.clone();
        for k in LEVEL_KEYS {
            plain.case.remove(k);
        }
        plain.figure_id()
    };
    let mut rows: Vec<(&costlab_core::model::ResultRow, costlab_core::model::Case)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in doc.results.iter().filter(|r| !r.case.contains_key("level")) {
        let id = r.figure_id();
        if index.contains_key(&id) {
            continue; // a figure exported once
        }
        index.insert(id, rows.len());
        rows.push((r, r.case.clone()));
    }
    for r in doc.results.iter().filter(|r| r.case.contains_key("level")) {
        match index.get(&base_id(r)) {
            Some(&i) => {
                for k in LEVEL_KEYS {
                    if let Some(v) = r.case.get(k) {
                        rows[i].1.insert(k.to_string(), v.clone());
                    }
                }
            }
            None => {
                index.insert(r.figure_id(), rows.len());
                rows.push((r, r.case.clone()));
            }
        }
    }
    rows
}

/// Tidy (long-form) CSV: one column per case key, one row per figure, or one per sample with
/// `per_sample`; loadable by pandas or R with no parsing. A key a lab does not use is empty.
pub fn render(doc: &Doc) -> String {
    render_tidy(doc, false)
}

pub fn render_tidy(doc: &Doc, per_sample: bool) -> String {
    const FIXED: [&str; 10] = [
        "run_id", "lab", "metric", "unit", "median", "min", "max", "mad", "n", "sample",
    ];
    let rows = tidy_rows(doc);
    let mut keys: Vec<String> = Vec::new();
    for (_, case) in &rows {
        for k in case.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let column = |k: &String| {
        if FIXED.contains(&k.as_str()) || k == "value" {
            format!("case_{k}")
        } else {
            k.clone()
        }
    };
    let mut header: Vec<String> = vec!["run_id".into(), "lab".into()];
    header.extend(keys.iter().map(column));
    header.extend(["metric".to_string(), "unit".to_string()]);
    if per_sample {
        header.extend(["sample".to_string(), "value".to_string()]);
    } else {
        for h in ["median", "min", "max", "mad", "n"] {
            header.push(h.to_string());
        }
    }
    // The verdict travels with every figure (and every sample of it).
    for h in [
        "quality",
        "quality_reasons",
        "other_cpu_max_pct",
        "steal_pct",
    ] {
        header.push(h.to_string());
    }
    let mut out = header
        .iter()
        .map(|h| field(h))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for (r, case) in &rows {
        let mut lead = vec![doc.run.id.clone(), r.lab.clone()];
        lead.extend(
            keys.iter()
                .map(|k| case.get(k).map(cell).unwrap_or_default()),
        );
        lead.extend([r.metric.clone(), r.unit.clone()]);
        let opt = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
        let verdict = [
            r.quality.map(|q| q.word().to_string()).unwrap_or_default(),
            r.quality_reasons.join("; "),
            opt(r.conditions.as_ref().and_then(|c| c.other_cpu_max_pct)),
            opt(r.conditions.as_ref().and_then(|c| c.steal_pct)),
        ];
        let mut line = |tail: Vec<String>| {
            let cells: Vec<String> = lead
                .iter()
                .chain(&tail)
                .chain(&verdict)
                .map(|c| field(c))
                .collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        };
        if per_sample {
            for (i, x) in r.samples.iter().enumerate() {
                line(vec![i.to_string(), x.to_string()]);
            }
        } else {
            line(vec![
                r.summary.median.to_string(),
                r.summary.min.to_string(),
                r.summary.max.to_string(),
                r.summary.mad.to_string(),
                r.summary.n.to_string(),
            ]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(super::field("a b"), "a b");
        assert_eq!(super::field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    fn doc() -> costlab_core::model::Doc {
        let mut o = costlab_core::model::Outcome::default();
        o.push(
            "mem",
            costlab_core::case! {"op" => "chase", "block" => 4096u64},
            "latency",
            "ns",
            vec![1.0, 1.2, 1.1],
        );
        o.push(
            "mem",
            costlab_core::case! {"op" => "chase", "block" => 8192u64},
            "latency",
            "ns",
            vec![1.3, 1.2],
        );
        // The plateau copy of the first row, as the mem lab adds it.
        let mut level = o.results[0].clone();
        level.case.insert("level".into(), "L1".into());
        level.case.insert("cache".into(), 32768u64.into());
        o.results.push(level);
        o.push(
            "syscall",
            costlab_core::case! {"call" => "getppid"},
            "latency",
            "ns",
            vec![50.0],
        );
        let run = costlab_core::model::RunInfo {
            id: "r1".into(),
            started: "2026-11-22T10:00:00Z".into(),
            costlab: "0".into(),
            command: "costlab".into(),
            complete: true,
        };
        costlab_core::model::Doc::new(run, serde_json::json!({}), o)
    }

    #[test]
    fn one_column_per_key_and_plateaus_folded_into_their_row() {
        let text = super::render(&doc());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "run_id,lab,op,block,level,cache,call,metric,unit,median,min,max,mad,n,quality,quality_reasons,other_cpu_max_pct,steal_pct"
        );
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(
            lines[1],
            "r1,mem,chase,4096,L1,32768,,latency,ns,1.1,1,1.2,0.09999999999999987,3,,,,"
        );
        assert!(
            lines[2].starts_with("r1,mem,chase,8192,,,,latency,ns,"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("r1,syscall,,,,,getppid,latency,ns,50,"),
            "{text}"
        );
    }

    #[test]
    fn per_sample_rows() {
        let text = super::render_tidy(&doc(), true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "run_id,lab,op,block,level,cache,call,metric,unit,sample,value,quality,quality_reasons,other_cpu_max_pct,steal_pct"
        );
        assert_eq!(lines.len(), 1 + 3 + 2 + 1, "{text}");
        assert_eq!(lines[2], "r1,mem,chase,4096,L1,32768,,latency,ns,1,1.2,,,,");
    }
}
