//! The report's charts: the plotter (`plot`), the models' charts (`models`), and what every
//! chart is made of. A lab draws its own charts (`Lab::charts`, in its folder) from these
//! pieces; the report's caller hands them in. Each chart is either an inline <svg> (with an
//! id, axes with units and a legend) or the reason it is left out.

mod axis;
pub mod models;
pub mod plot;

use serde_json::Value;

use costlab_core::model::{Doc, ResultRow};
use plot::{Plot, Series};

/// One chart of the report.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The id of its <svg> (and of the line that replaces it when skipped).
    pub id: String,
    pub title: String,
    /// The SVG, or why there is none.
    pub svg: Result<String, String>,
    /// One line saying how to read it.
    pub caption: String,
    /// HTML folded under the chart (a model's verdicts and points), already escaped.
    pub details: String,
    /// The plot the SVG was drawn from, so `report --against` can overlay a second run.
    pub plot: Option<Plot>,
    /// Set when the chart is left out because its lab did not run: the report names such
    /// labs once, in one line, instead of a card per chart.
    pub not_run: Option<String>,
}

impl Chart {
    pub fn skipped(id: &str, title: &str, why: impl Into<String>) -> Chart {
        Chart {
            id: id.to_string(),
            title: title.to_string(),
            svg: Err(why.into()),
            caption: String::new(),
            details: String::new(),
            plot: None,
            not_run: None,
        }
    }

    /// A chart left out because `lab` did not run in this run (no card: one line names it).
    pub fn not_run(id: &str, title: &str, lab: &str) -> Chart {
        Chart {
            not_run: Some(lab.to_string()),
            ..Chart::skipped(id, title, format!("the {lab} lab did not run"))
        }
    }

    /// A chart drawn from `plot`; when a point is marked, the caption says what the mark means.
    pub fn drawn(plot: Plot, caption: impl Into<String>) -> Chart {
        let mut caption = caption.into();
        if plot.has_verdicts() {
            caption.push_str(
                " Marked points and hatched bars are figures that are not ok (! disturbed, ~ noisy): \
                 not to be read as clean; the Quality table says why.",
            );
        }
        Chart {
            id: plot.id.clone(),
            title: plot.title.clone(),
            svg: Ok(plot.render()),
            caption,
            details: String::new(),
            plot: Some(plot),
            not_run: None,
        }
    }

    /// A chart drawn by hand (not a `Plot`): it cannot be overlaid.
    pub fn svg(id: &str, title: &str, svg: String, caption: impl Into<String>) -> Chart {
        Chart {
            svg: Ok(svg),
            caption: caption.into(),
            ..Chart::skipped(id, title, "")
        }
    }
}

/// Every chart of the report, in the order they appear: the labs' charts of `doc` as the
/// caller drew them (`labs::charts`), then the models'.
pub fn all(doc: &Doc, lab_charts: Vec<Chart>) -> Vec<Chart> {
    let mut v = lab_charts;
    v.extend(models::charts(doc));
    v
}

/// Escape text for HTML and SVG.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// True when the run has any row of `lab`.
pub fn lab_ran(doc: &Doc, lab: &str) -> bool {
    doc.results.iter().any(|r| r.lab == lab)
}

/// A case value as a number: JSON numbers, sizes ("4K"), "2x" headrooms, plain numbers.
pub fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim().trim_end_matches(['x', 'X']);
            t.parse::<f64>().ok().or_else(|| {
                costlab_core::measure::sizes::parse_size(t)
                    .ok()
                    .map(|b| b as f64)
            })
        }
        _ => None,
    }
}

fn value_text(k: &str, v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => format!("{k} {other}"),
    }
}

/// Group rows into series along `x_key`: one series per combination of the other case keys
/// that vary between rows (keys in `ignore` aside), named by those values. Points are
/// (x, median, (min, max)), sorted by x.
pub fn series_along(rows: &[&ResultRow], x_key: &str, ignore: &[&str]) -> Vec<Series> {
    let mut keys: Vec<String> = Vec::new();
    for r in rows {
        for k in r.case.keys() {
            if k != x_key && !ignore.contains(&k.as_str()) && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let varying: Vec<String> = keys
        .into_iter()
        .filter(|k| {
            let first = rows.first().and_then(|r| r.case.get(k));
            rows.iter().any(|r| r.case.get(k) != first)
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let Some(x) = num(r.case.get(x_key)) else {
            continue;
        };
        let name = varying
            .iter()
            .filter_map(|k| r.case.get(k).map(|v| value_text(k, v)))
            .collect::<Vec<_>>()
            .join(" ");
        let name = if name.is_empty() {
            r.metric.clone()
        } else {
            name
        };
        let i = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name.clone());
                out.push(Series::line(name, vec![]));
                names.len() - 1
            }
        };
        out[i]
            .points
            .push((x, r.summary.median, Some((r.summary.min, r.summary.max))));
        out[i].judge(x, r);
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// True when the row's case uses no key outside `keys`: the plain sweep points, not summary
/// rows a lab adds with extra keys (a plateau's "level", a comparison's "versus").
pub fn plain(r: &ResultRow, keys: &[&str]) -> bool {
    r.case.keys().all(|k| keys.contains(&k.as_str()))
}

/// The unit of the first row, for an axis label.
/// Every x and every y the series plot, for the axes' ranges.
pub fn xs_ys(series: &[Series]) -> (Vec<f64>, Vec<f64>) {
    let points = series.iter().flat_map(|s| s.points.iter());
    (
        points.clone().map(|p| p.0).collect(),
        points.map(|p| p.1).collect(),
    )
}

pub fn unit_of(rows: &[&ResultRow]) -> String {
    rows.first().map(|r| r.unit.clone()).unwrap_or_default()
}

/// Every chart of run `a`, with run `b` drawn over it (dashed, lighter) where both have the
/// chart, and the figures `changed` (A's median, label) ringed. Each run comes with its labs'
/// charts, as for `all`.
pub fn all_against(
    a: (&Doc, Vec<Chart>),
    b: (&Doc, Vec<Chart>),
    changed: &[(f64, String)],
) -> Vec<Chart> {
    let (a, a_labs) = a;
    let (b, b_labs) = b;
    let bs = all(b, b_labs);
    all(a, a_labs)
        .into_iter()
        .map(|mut c| {
            let other = bs
                .iter()
                .find(|o| o.id == c.id)
                .and_then(|o| o.plot.as_ref());
            match (&c.plot, other) {
                (Some(pa), Some(pb)) => {
                    let p = overlay(pa, pb, &a.run.id, &b.run.id, changed);
                    c.svg = Ok(p.render());
                    c.plot = Some(p);
                }
                (Some(_), None) => {
                    c.caption
                        .push_str(" Run B has no figures for this chart: A alone is drawn.");
                }
                _ => {}
            }
            c
        })
        .collect()
}

/// Run B's series beside run A's: the same colour per series name, B dashed and faded, a
/// legend key for each run; A's points whose figure changed significantly are ringed.
pub fn overlay(a: &Plot, b: &Plot, a_id: &str, b_id: &str, changed: &[(f64, String)]) -> Plot {
    use plot::{Mark, PALETTE};
    // The key's line style says which run is which; its text names the run.
    let mut b_key = Series::key(format!("B: {b_id}"), true, "#333");
    b_key.faded = true;
    let mut series = vec![Series::key(format!("A: {a_id}"), false, "#333"), b_key];
    let mut used = vec![false; b.series.len()];
    for (i, s) in a.series.iter().enumerate() {
        let color = s
            .color
            .clone()
            .unwrap_or_else(|| PALETTE[i % PALETTE.len()].to_string());
        let mut sa = s.clone();
        sa.color = Some(color.clone());
        series.push(sa);
        if let Some(j) = (0..b.series.len()).find(|j| !used[*j] && b.series[*j].name == s.name) {
            used[j] = true;
            let mut sb = b.series[j].clone();
            sb.color = Some(color);
            sb.dashed = true;
            sb.faded = true;
            sb.name = format!("{} (B)", sb.name);
            series.push(sb);
        }
    }
    let extra = (0..b.series.len()).filter(|j| !used[*j]);
    for (k, j) in extra.enumerate() {
        let mut sb = b.series[j].clone();
        if sb.color.is_none() {
            sb.color = Some(PALETTE[(a.series.len() + k) % PALETTE.len()].to_string());
        }
        sb.dashed = true;
        sb.faded = true;
        sb.name = format!("{} (B)", sb.name);
        series.push(sb);
    }
    let mut marks = a.marks.clone();
    for s in &a.series {
        for (x, y, _) in &s.points {
            if let Some((_, label)) = changed.iter().find(|(m, _)| m == y) {
                marks.push(Mark {
                    x: *x,
                    y: *y,
                    label: label.clone(),
                });
            }
        }
    }
    Plot {
        series,
        marks,
        ..a.clone()
    }
}
