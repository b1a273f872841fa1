//! Many machines, one history: `import` (results.json documents from elsewhere), `push` (runs
//! from this history into a shared one), `machines` (every machine's latest headline figures
//! side by side) and `report --machines` (the same as an HTML page).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::usage;
use crate::measure::quality::Quality;
use crate::report::sheet::{figure, LabSheet};

use super::open_existing;
use super::{redact, RunRow, Store};

/// Whether a smaller figure is the better one, read from its unit and label.
pub fn lower_is_better(unit: &str, label: &str) -> bool {
    let l = label.to_ascii_lowercase();
    match unit {
        "ns" | "us" | "µs" | "ms" | "s" | "cycles" => true,
        "%" => !(l.contains("cut") || l.contains("saving") || l.contains("gain")),
        _ => false,
    }
}

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

/// Every machine in the history (or those `wanted` names), each with its latest complete run
/// (the latest run when none is complete).
pub fn grid(store: &Store, wanted: Option<&[String]>) -> Result<Grid> {
    let runs = store.runs()?;
    let mut by_machine: BTreeMap<String, Vec<&RunRow>> = BTreeMap::new();
    for r in &runs {
        by_machine.entry(r.machine_id.clone()).or_default().push(r);
    }
    let mut chosen: Vec<String> = by_machine.keys().cloned().collect();
    if let Some(w) = wanted.filter(|w| !w.iter().any(|x| x == "all")) {
        chosen = w
            .iter()
            .map(|name| {
                let hits: Vec<&String> = by_machine.keys().filter(|k| k.contains(name.as_str())).collect();
                match hits.len() {
                    1 => Ok(hits[0].clone()),
                    0 => Err(usage(format!(
                        "no machine '{name}' in the history: see `costlab machines` for ids"
                    ))),
                    n => Err(usage(format!(
                        "'{name}' matches {n} machines: give more of the id (see `costlab machines`)"
                    ))),
                }
            })
            .collect::<Result<_>>()?;
    }
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut machines = Vec::new();
    for id in chosen {
        let list = &by_machine[&id];
        let latest = list
            .iter()
            .rev()
            .find(|r| r.complete)
            .or(list.last())
            .expect("a machine has a run");
        let mut figures = BTreeMap::new();
        // Headlines of the machine's latest run of each lab (a lab run alone counts too).
        let mut seen_labs = std::collections::HashSet::new();
        for r in list.iter().rev() {
            for sheet in judged_sheet(store, &r.id)? {
                if !seen_labs.insert(sheet.lab.clone()) {
                    continue;
                }
                for h in sheet.headlines {
                    if !labels.iter().any(|(l, _)| *l == h.label) {
                        labels.push((h.label.clone(), h.unit.clone()));
                    }
                    figures.entry(h.label).or_insert(Figure {
                        median: h.summary.median,
                        unit: h.unit,
                        quality: h.quality,
                        quality_reasons: h.quality_reasons,
                    });
                }
            }
        }
        machines.push(MachineColumn {
            id: id.clone(),
            summary: latest.machine_summary.clone(),
            run: latest.id.clone(),
            started: latest.started.clone(),
            runs: list.len(),
            figures,
        });
    }
    Ok(Grid { labels, machines })
}

fn short(id: &str) -> String {
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
                    crate::measure::quality::quote(
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

/// A stored run's sheet with every headline judged. Runs stored before headlines carried their
/// verdict get it from the run's stored figures (loaded only then), so `machines`, `report`
/// and `export` mark an old run's figures as they mark a new one's.
pub fn judged_sheet(store: &Store, id: &str) -> Result<Vec<LabSheet>> {
    let mut sheet = store.load_sheet(id)?;
    if sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .any(|h| h.quality.is_none())
    {
        let doc = store.load_doc(id)?;
        crate::report::verdict::judge_sheet(&mut sheet, &doc.results);
    }
    Ok(sheet)
}

pub fn machines(db: Option<&Path>) -> Result<()> {
    let store = open_existing(db)?;
    print!("{}", render(&grid(&store, None)?));
    Ok(())
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

pub fn report_machines(db: Option<&Path>, list: &str, out: Option<&Path>) -> Result<()> {
    let store = open_existing(db)?;
    let wanted: Vec<String> = list
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if wanted.is_empty() {
        return Err(usage(
            "--machines needs machine ids (see `costlab machines`) or \"all\"",
        ));
    }
    let g = grid(&store, Some(&wanted))?;
    let dir = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("costlab-report").join("machines"));
    std::fs::create_dir_all(&dir).map_err(|e| {
        usage(format!(
            "cannot create {}: {e}; pass --out DIR",
            dir.display()
        ))
    })?;
    let page = dir.join("index.html");
    std::fs::write(&page, render_html(&g, &store.describe()))
        .with_context(|| format!("writing {}", page.display()))?;
    println!("report: {}", page.display());
    Ok(())
}
