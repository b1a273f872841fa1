//! Machines side by side: the grid of every machine's latest headline figures, as a terminal
//! table (`costlab machines`) and as an HTML page (`report --machines`). `commands::fleet`
//! fills the grid from the history.

use std::collections::BTreeMap;

use crate::report::sheet::figure;
use crate::store::redact;
use costlab_core::model::Quality;

pub use crate::analysis::compare::lower_is_better;

/// One headline figure of a machine: its median, unit and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub median: f64,
    pub unit: String,
    pub quality: Option<Quality>,
    pub quality_reasons: Vec<String>,
}

impl Figure {
    /// Marked figures (disturbed, noisy) are shown but never named the best: they must not be
    /// read as clean.
    fn comparable(&self) -> bool {
        self.quality.is_none_or(|q| q == Quality::Ok) && self.median.is_finite()
    }

    fn mark(&self) -> &'static str {
        self.quality.map_or("", Quality::mark)
    }
}

/// One machine: its id, what it is, and its latest run's headlines.
pub struct MachineColumn {
    pub id: String,
    pub summary: String,
    pub run: String,
    pub started: String,
    pub runs: usize,
    /// label -> its figure
    pub figures: BTreeMap<String, Figure>,
}

/// The machines side by side: the rows' labels in first-seen order, and the columns.
pub struct Grid {
    pub labels: Vec<(String, String)>,
    pub machines: Vec<MachineColumn>,
}

impl Grid {
    /// The column index of the best machine for a row (None with fewer than two values).
    pub fn best(&self, label: &str, unit: &str) -> Option<usize> {
        let vals: Vec<(usize, f64)> = self
            .machines
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.figures.get(label).map(|f| (i, f)))
            .filter(|(_, f)| f.comparable())
            .map(|(i, f)| (i, f.median))
            .collect();
        if vals.len() < 2 {
            return None;
        }
        let lower = lower_is_better(unit, label);
        vals.into_iter()
            .min_by(|a, b| {
                let o = a.1.total_cmp(&b.1);
                if lower {
                    o
                } else {
                    o.reverse()
                }
            })
            .map(|(i, _)| i)
    }
}

pub fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// The grid as a terminal table; the best machine per row carries a `*`.
pub fn render(g: &Grid) -> String {
    if g.machines.is_empty() {
        return "the history is empty: run a lab or `costlab run` first\n".to_string();
    }
    let mut out = String::from(
        "machines in the history (latest run of each lab; * best per row among unmarked figures)\n",
    );
    for m in &g.machines {
        out.push_str(&format!(
            "  {}  {} · {} runs, latest {} ({})\n",
            short(&m.id),
            m.summary,
            m.runs,
            m.run,
            m.started
        ));
    }
    let mut head = vec!["figure".to_string(), "unit".to_string()];
    head.extend(g.machines.iter().map(|m| short(&m.id)));
    let rows: Vec<Vec<String>> = g
        .labels
        .iter()
        .map(|(label, unit)| {
            let best = g.best(label, unit);
            let mut row = vec![label.clone(), unit.clone()];
            for (i, m) in g.machines.iter().enumerate() {
                row.push(match m.figures.get(label) {
                    Some(f) => format!(
                        "{}{}{}",
                        figure(f.median),
                        f.mark(),
                        if best == Some(i) { " *" } else { "" }
                    ),
                    None => "—".to_string(),
                });
            }
            row
        })
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    out.push_str(&crate::report::table::render(&head, &rows));
    out.push('\n');
    // The reasons do not fit the grid: one line each under it.
    let mut marked = Vec::new();
    for (label, _) in &g.labels {
        for m in &g.machines {
            if let Some(f) = m.figures.get(label).filter(|f| !f.mark().is_empty()) {
                marked.push(format!(
                    "  {} {label} on {}: {}\n",
                    f.mark(),
                    short(&m.id),
                    costlab_core::measure::quality::quote(
                        format!("{} {}", figure(f.median), f.unit),
                        f.quality,
                        &f.quality_reasons
                    )
                ));
            }
        }
    }
    if !marked.is_empty() {
        out.push_str(&format!(
            "marked: {}\n",
            crate::report::verdict::MARKS_LEGEND
        ));
        out.extend(marked);
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The grid as one self-contained HTML page.
pub fn render_html(g: &Grid, source: &str) -> String {
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>costlab: machines side by side</title>\
         <style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}\
         td.best{background:#e3f6e3;font-weight:bold}td.marked{color:#b00020}</style></head><body>\n",
    );
    h.push_str(&format!(
        "<h1>Machines side by side</h1><p>From {}: each machine's latest run of each lab; \
         the best value per row is marked (lower is better for times and costs, higher for \
         throughput and ratios), among figures that are not themselves marked: {} (the reason \
         is the cell's tooltip).</p>\n<ul>",
        esc(&redact(source)),
        esc(crate::report::verdict::MARKS_LEGEND)
    ));
    for m in &g.machines {
        h.push_str(&format!(
            "<li><code>{}</code> {} · {} runs, latest <code>{}</code> ({})</li>",
            esc(&m.id),
            esc(&m.summary),
            m.runs,
            esc(&m.run),
            esc(&m.started)
        ));
    }
    h.push_str("</ul>\n<table id=\"machines\"><tr><th>figure</th><th>unit</th>");
    for m in &g.machines {
        h.push_str(&format!(
            "<th title=\"{}\">{}</th>",
            esc(&m.summary),
            esc(&short(&m.id))
        ));
    }
    h.push_str("</tr>\n");
    for (label, unit) in &g.labels {
        let best = g.best(label, unit);
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td>",
            esc(label),
            esc(unit)
        ));
        for (i, m) in g.machines.iter().enumerate() {
            match m.figures.get(label) {
                Some(f) if best == Some(i) => h.push_str(&format!(
                    "<td class=\"best\">{} ★</td>",
                    esc(&figure(f.median))
                )),
                Some(f) if !f.mark().is_empty() => h.push_str(&format!(
                    "<td class=\"marked\" title=\"{}\">{}{}</td>",
                    esc(&crate::report::verdict::verdict_text(
                        f.quality,
                        &f.quality_reasons
                    )),
                    esc(&figure(f.median)),
                    f.mark()
                )),
                Some(f) => h.push_str(&format!("<td>{}</td>", esc(&figure(f.median)))),
                None => h.push_str("<td>—</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></body></html>\n");
    h
}

/// The grid as JSON (`machines --json`): each machine with its latest run and its headline
/// figures, each with median, unit, verdict and reasons, and which machine is best per figure.
pub fn to_json(g: &Grid) -> serde_json::Value {
    use serde_json::json;
    json!({
        "figures": g.labels.iter().map(|(label, unit)| json!({
            "figure": label,
            "unit": unit,
            "best": g.best(label, unit).map(|i| g.machines[i].id.clone()),
        })).collect::<Vec<_>>(),
        "machines": g.machines.iter().map(|m| json!({
            "id": m.id,
            "machine": m.summary,
            "run": m.run,
            "started": m.started,
            "runs": m.runs,
            "figures": m.figures.iter().map(|(label, f)| (label.clone(), json!({
                "median": f.median,
                "unit": f.unit,
                "quality": f.quality.map(|q| q.word()),
                "quality_reasons": f.quality_reasons,
            }))).collect::<serde_json::Map<String, serde_json::Value>>(),
        })).collect::<Vec<_>>(),
    })
}
