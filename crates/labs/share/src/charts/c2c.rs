//! Core-to-core latency as a heatmap: the one-way cost of handing a cache line from one CPU
//! to another.

use std::collections::BTreeSet;
use std::fmt::Write;

use costlab_core::model::Quality;

use costlab_core::model::{Doc, ResultRow};
use costlab_history::report::charts::{esc, num, Chart};

const ID: &str = "chart-c2c";
const TITLE: &str = "Core-to-core latency (one way)";

/// c2c rows: lab "share c2c", or lab "share" with a "from" key.
fn is_c2c(r: &ResultRow) -> bool {
    r.metric == "latency"
        && (r.lab == "share c2c" || (r.lab == "share" && r.case.contains_key("from")))
        && r.case.contains_key("to")
}

/// White to dark red as t goes 0 to 1.
fn color(t: f64) -> String {
    let t = t.clamp(0.0, 1.0);
    let r = 255.0 - 75.0 * t;
    let g = 245.0 - 215.0 * t;
    let b = 235.0 - 205.0 * t;
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

/// One cell: from CPU, to CPU, the median, and its verdict where not ok.
type Cell = (i64, i64, f64, Option<Quality>);

/// Where the heatmap lies: its CPUs in order, the grid's corner and cell size, and the
/// scale of its colours.
struct Grid {
    cpus: Vec<i64>,
    left: f64,
    top: f64,
    size: f64,
    grid: f64,
    lo: f64,
    hi: f64,
    unit: String,
}

pub fn chart(doc: &Doc) -> Chart {
    let rows: Vec<&ResultRow> = doc.results.iter().filter(|r| is_c2c(r)).collect();
    if rows.is_empty() {
        if !doc.results.iter().any(|r| r.lab.starts_with("share")) {
            return Chart::not_run(ID, TITLE, "share");
        }
        return Chart::skipped(
            ID,
            TITLE,
            "the share lab ran without its core-to-core sweep",
        );
    }
    // Each cell carries its figure's verdict: a marked cell shows its mark and says why.
    let cell = |r: &ResultRow| -> Option<Cell> {
        Some((
            num(r.case.get("from"))? as i64,
            num(r.case.get("to"))? as i64,
            r.summary.median,
            r.quality.filter(|q| *q != Quality::Ok),
        ))
    };
    let cells: Vec<Cell> = rows.iter().filter_map(|r| cell(r)).collect();
    let marked = cells.iter().any(|c| c.3.is_some());
    let cpus: Vec<i64> = cells
        .iter()
        .flat_map(|c| [c.0, c.1])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (lo, hi) = costlab_history::report::charts::plot::min_max(
        &cells.iter().map(|c| c.2).collect::<Vec<_>>(),
    );
    let n = cpus.len().max(1) as f64;
    let size = (300.0 / n).clamp(14.0, 60.0);
    let g = Grid {
        cpus,
        left: 80.0,
        top: 50.0,
        size,
        grid: size * n,
        lo,
        hi,
        unit: rows[0].unit.clone(),
    };
    let (left, top, grid) = (g.left, g.top, g.grid);
    let w = (left + grid + 190.0).max(460.0);
    let h = top + grid + 60.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg id="{ID}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{TITLE}">"#
    );
    let _ = write!(o, r##"<rect width="{w:.0}" height="{h:.0}" fill="#fff"/>"##);
    let _ = write!(
        o,
        r#"<text x="{left}" y="22" font-size="15" font-weight="bold">{TITLE}</text>"#
    );
    draw_cells(&mut o, &g, &cells);
    draw_axes(&mut o, &g);
    draw_legend(&mut o, &g);
    let unit = &g.unit;
    Chart::svg(
        ID,
        TITLE,
        o,
        format!(
            "Darker is slower: {lo:.0}–{hi:.0} {unit}. CPUs that share a core or a cache hand a line over fastest.{}",
            if marked {
                " Cells marked ! (disturbed) or ~ (noisy) are not clean; the Quality table says why."
            } else {
                ""
            }
        ),
    )
}

/// Each cell coloured by its latency, its figure (where a cell is large enough) and its
/// verdict's mark.
fn draw_cells(o: &mut String, g: &Grid, cells: &[Cell]) {
    let (left, top, size, lo, hi) = (g.left, g.top, g.size, g.lo, g.hi);
    for (from, to, v, q) in cells {
        let (Some(i), Some(j)) = (
            g.cpus.iter().position(|c| c == from),
            g.cpus.iter().position(|c| c == to),
        ) else {
            continue;
        };
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        let x = left + size * j as f64;
        let y = top + size * i as f64;
        let _ = write!(
            o,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{size:.1}" height="{size:.1}" fill="{}" stroke="#fff"><title>CPU {from} to CPU {to}: {v:.1} {}{}</title></rect>"##,
            color(t),
            esc(&g.unit),
            q.map_or(String::new(), |q| format!(" ({})", q.word()))
        );
        let mark = q.map_or("", Quality::mark);
        if size >= 34.0 {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{v:.0}{mark}</text>"#,
                x + size / 2.0,
                y + size / 2.0 + 3.0
            );
        } else if !mark.is_empty() {
            let _ = write!(
                o,
                r##"<text class="verdict-mark" x="{:.1}" y="{:.1}" font-size="10" font-weight="bold" fill="#b00020" text-anchor="middle">{mark}</text>"##,
                x + size / 2.0,
                y + size / 2.0 + 3.0
            );
        }
    }
}

/// The CPU ids along both sides, and the axes' names.
fn draw_axes(o: &mut String, g: &Grid) {
    let (left, top, size, grid) = (g.left, g.top, g.size, g.grid);
    for (k, c) in g.cpus.iter().enumerate() {
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{c}</text><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{c}</text>"#,
            left - 4.0,
            top + size * k as f64 + size / 2.0 + 3.0,
            left + size * k as f64 + size / 2.0,
            top + grid + 13.0
        );
    }
    let _ = write!(
        o,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">to CPU (id)</text><text x="20" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 20 {:.1})">from CPU (id)</text>"#,
        left + grid / 2.0,
        top + grid + 32.0,
        top + grid / 2.0,
        top + grid / 2.0
    );
}

/// The colour scale with its unit, and closing the svg.
fn draw_legend(o: &mut String, g: &Grid) {
    let (top, lo, hi) = (g.top, g.lo, g.hi);
    let lx = g.left + g.grid + 30.0;
    let _ = write!(
        o,
        r#"<text x="{lx:.1}" y="{:.1}" font-size="12" font-weight="bold">legend: latency ({})</text>"#,
        top + 4.0,
        esc(&g.unit)
    );
    for k in 0..10 {
        let t = f64::from(k) / 9.0;
        let _ = write!(
            o,
            r#"<rect x="{lx:.1}" y="{:.1}" width="18" height="14" fill="{}"/>"#,
            top + 14.0 + 14.0 * f64::from(9 - k),
            color(t)
        );
    }
    let _ = write!(
        o,
        r#"<text x="{:.1}" y="{:.1}" font-size="11">{hi:.1} {u}</text><text x="{:.1}" y="{:.1}" font-size="11">{lo:.1} {u}</text></svg>"#,
        lx + 24.0,
        top + 25.0,
        lx + 24.0,
        top + 14.0 + 14.0 * 9.0 + 11.0,
        u = esc(&g.unit)
    );
}
