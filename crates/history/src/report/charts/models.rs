//! Each model's prediction beside the measurement: along the case key the points sweep (one
//! pair of lines per group of the other keys), or, when they sweep none, as predicted against
//! measured with the line where they agree. A lab with many models (one fit per variant) gets
//! one chart of all its fits' points.

use super::plot::{Axis, Format, Marker, Plot, Point, Scale, Series, PALETTE};
use std::fmt::Write;

use super::{esc, num, Chart};
use costlab_core::model::{Doc, Model, ModelPoint};

/// More models than this from one lab are drawn together.
const PER_LAB: usize = 3;

pub fn charts(doc: &Doc) -> Vec<Chart> {
    if doc.models.is_empty() {
        // Nothing fitted, nothing to draw: the report shows only what the run has.
        return Vec::new();
    }
    let mut labs: Vec<&str> = Vec::new();
    for m in &doc.models {
        if !labs.contains(&m.lab.as_str()) {
            labs.push(&m.lab);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    for lab in labs {
        // A model with no points (price's check) has nothing to draw: its verdict lines are
        // in the report's models section, not a card saying there is no chart.
        let of: Vec<&Model> = doc
            .models
            .iter()
            .filter(|m| m.lab == lab && !m.points.is_empty())
            .collect();
        if of.is_empty() {
            continue;
        }
        if of.len() > PER_LAB {
            out.push(together(i, lab, &of));
            i += 1;
        } else {
            for m in of {
                out.push(one(i, m));
                i += 1;
            }
        }
    }
    out
}

/// The numeric case key whose value differs between the points, if there is one.
fn sweep_key(points: &[ModelPoint]) -> Option<String> {
    let first = points.first()?;
    first
        .case
        .keys()
        .find(|k| {
            points.iter().all(|p| num(p.case.get(*k)).is_some())
                && points.iter().any(|p| p.case.get(*k) != first.case.get(*k))
        })
        .cloned()
}

/// Points grouped by their case without the sweep key, each group named by it.
fn groups<'a>(points: &'a [ModelPoint], key: &str) -> Vec<(String, Vec<&'a ModelPoint>)> {
    let mut out: Vec<(String, Vec<&ModelPoint>)> = Vec::new();
    for p in points {
        let name = p
            .case
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .filter(|(k, v)| points.iter().any(|q| q.case.get(k.as_str()) != Some(v)))
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => s.clone(),
                other => format!("{k} {other}"),
            })
            .collect::<Vec<_>>()
            .join(" ");
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(p),
            None => out.push((name, vec![p])),
        }
    }
    out
}

fn scatter(id: &str, title: &str, unit: &str, pts: Vec<Point>, label: &str) -> Plot {
    let all: Vec<f64> = pts.iter().flat_map(|p| [p.0, p.1]).collect();
    let (lo, hi) = super::plot::min_max(&all);
    let mut points = Series::line(label, pts);
    points.line = false;
    let mut diag = Series::line("predicted = measured", vec![(lo, lo, None), (hi, hi, None)]);
    diag.dashed = true;
    diag.marker = Marker::None;
    diag.color = Some("#888".into());
    let scale = if lo > 0.0 && hi / lo > 30.0 {
        Scale::Log(10.0)
    } else {
        Scale::Linear
    };
    Plot {
        id: id.into(),
        title: title.into(),
        x: Axis::new(format!("measured ({unit})"), scale, Format::Number),
        y: Axis::new(format!("predicted ({unit})"), scale, Format::Number),
        series: vec![points, diag],
        guides: vec![],
        marks: vec![],
    }
}

fn worst(points: &[&ModelPoint]) -> f64 {
    points
        .iter()
        .map(|p| p.error().abs())
        .filter(|e| e.is_finite())
        .fold(0.0f64, f64::max)
}

fn together(i: usize, lab: &str, models: &[&Model]) -> Chart {
    let id = format!("chart-model-{i}");
    let title = format!(
        "Models ({lab}): {} fits, predicted vs measured",
        models.len()
    );
    let points: Vec<&ModelPoint> = models.iter().flat_map(|m| &m.points).collect();
    let Some(first) = points.first() else {
        return Chart::skipped(&id, &title, "the models have no points");
    };
    let unit = first.unit.clone();
    let pts = points
        .iter()
        .map(|p| (p.measured, p.predicted, None))
        .collect();
    let plot = scatter(&id, &title, &unit, pts, "fitted cases");
    let n_exact = models.iter().filter(|m| exact(m)).count();
    let tested: Vec<&ModelPoint> = models
        .iter()
        .filter(|m| !exact(m))
        .flat_map(|m| &m.points)
        .collect();
    let fit = if tested.is_empty() {
        "Every fit is exact: each has no more points than parameters, so agreement tells nothing."
            .to_string()
    } else {
        format!(
            "Largest disagreement {:.0}% over the fits with more points than parameters{}.",
            worst(&tested) * 100.0,
            if n_exact > 0 {
                format!(
                    "; {n_exact} fits are exact (as many points as parameters) and tell nothing"
                )
            } else {
                String::new()
            }
        )
    };
    let mut chart = Chart::drawn(
        plot,
        format!(
            "Every point of the {} {lab} models; on the dashed line the model is exact. {fit}",
            models.len()
        ),
    );
    let mut d = String::new();
    for m in models {
        let _ = write!(d, "<h4>{}</h4>", esc(&m.name));
        details(&mut d, m);
    }
    chart.details = d;
    chart
}

fn one(i: usize, m: &Model) -> Chart {
    let id = format!("chart-model-{i}");
    let title = format!("Model ({}): {}", m.lab, m.name);
    if m.points.is_empty() {
        return Chart::skipped(&id, &title, "the model has no points");
    }
    let unit = m.points[0].unit.clone();
    let plot = if let Some(key) = sweep_key(&m.points) {
        let mut series = Vec::new();
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for (g, (name, pts)) in groups(&m.points, &key).into_iter().enumerate() {
            let color = PALETTE[g % PALETTE.len()].to_string();
            let mut meas: Vec<Point> = Vec::new();
            let mut pred: Vec<Point> = Vec::new();
            for p in pts {
                let x = num(p.case.get(&key)).unwrap_or(f64::NAN);
                meas.push((x, p.measured, None));
                pred.push((x, p.predicted, None));
            }
            meas.sort_by(|a, b| a.0.total_cmp(&b.0));
            pred.sort_by(|a, b| a.0.total_cmp(&b.0));
            xs.extend(meas.iter().map(|p| p.0));
            ys.extend(meas.iter().chain(&pred).map(|p| p.1));
            let label = |what: &str| {
                if name.is_empty() {
                    what.to_string()
                } else {
                    format!("{name} {what}")
                }
            };
            let mut measured = Series::line(label("measured"), meas);
            measured.color = Some(color.clone());
            let mut predicted = Series::line(label("predicted"), pred);
            predicted.dashed = true;
            predicted.marker = Marker::Square;
            predicted.color = Some(color);
            series.push(measured);
            series.push(predicted);
        }
        Plot {
            id: id.clone(),
            title: title.clone(),
            x: {
                let (label, format) = key_axis(&key);
                Axis::auto(label, &xs, 8.0, format)
            },
            y: Axis::auto(
                format!("predicted and measured ({unit})"),
                &ys,
                30.0,
                Format::Number,
            ),
            series,
            guides: vec![],
            marks: vec![],
        }
    } else {
        let pts = m
            .points
            .iter()
            .map(|p| (p.measured, p.predicted, None))
            .collect();
        scatter(&id, &title, &unit, pts, "cases")
    };
    let mut chart = Chart::drawn(
        plot,
        format!("Solid: measured; dashed: the model. {}.", fit_text(m)),
    );
    let mut d = String::new();
    details(&mut d, m);
    chart.details = d;
    chart
}

/// The axis label and format of a case key: its unit, never "(case)".
pub fn key_axis(key: &str) -> (String, Format) {
    match key {
        "block" | "size" => (format!("{key} (bytes)"), Format::Bytes),
        "threads" | "conns" | "load_threads" => (format!("{key} (count)"), Format::Number),
        "batch" => ("batch (ops per submit)".into(), Format::Number),
        "headroom" => ("headroom (x live heap)".into(), Format::Number),
        "delay" => ("delay (ns between lines)".into(), Format::Number),
        "from" | "to" | "cpu_node" | "mem_node" | "node" => (format!("{key} (id)"), Format::Number),
        other => (format!("{other} (as given)"), Format::Number),
    }
}

/// A number with three significant digits: 101.75066768882248 -> "102", 0.012345 -> "0.0123".
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{x:.2e}");
    }
    let e = a.log10().floor() as i32;
    let unit = 10f64.powi(e - 2);
    let r = (x / unit).round() * unit;
    let decimals = (2 - e).max(0) as usize;
    format!("{r:.decimals$}")
}

/// A parameter's value for the table: numbers to three significant digits.
pub fn param_text(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), sig3),
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{k}: {}", param_text(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Array(a) => a.iter().map(param_text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// How many parameters the model fitted to its points: a USL fit says its shape (a bound
/// fits two of lambda, sigma, kappa); other models count their numeric parameters.
fn free_params(m: &Model) -> usize {
    match m.params.get("fit").and_then(|v| v.as_str()) {
        Some("full") => 3,
        Some(_) => 2,
        None => m.params.values().filter(|v| v.is_number()).count(),
    }
}

/// True when the model has no more points than parameters and meets them all: agreement
/// is then arithmetic, not evidence.
pub fn exact(m: &Model) -> bool {
    let pts: Vec<&ModelPoint> = m.points.iter().collect();
    !pts.is_empty() && pts.len() <= free_params(m) && worst(&pts) < 0.005
}

fn count_word(n: usize) -> String {
    const WORDS: [&str; 10] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    WORDS
        .get(n)
        .map_or_else(|| n.to_string(), |w| w.to_string())
}

/// "exact: two points, two parameters", or "largest disagreement 12% over 5 points".
pub fn fit_text(m: &Model) -> String {
    let pts: Vec<&ModelPoint> = m.points.iter().collect();
    if exact(m) {
        let (n, p) = (pts.len(), free_params(m));
        return format!(
            "exact: {} point{}, {} parameter{}",
            count_word(n),
            if n == 1 { "" } else { "s" },
            count_word(p),
            if p == 1 { "" } else { "s" }
        );
    }
    format!(
        "largest disagreement {:.0}% over {} point{}",
        worst(&pts) * 100.0,
        pts.len(),
        if pts.len() == 1 { "" } else { "s" }
    )
}

/// A model's verdicts and its points, predicted beside measured (folded under its chart).
fn details(o: &mut String, m: &Model) {
    for v in &m.verdict {
        let _ = write!(o, "<p class=\"verdict\">{}</p>", esc(v));
    }
    o.push_str("<table class=\"points\"><tr><th>case</th><th>predicted</th><th>measured</th><th>unit</th><th>error</th></tr>");
    for p in &m.points {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{:+.1}%</td></tr>",
            esc(&costlab_core::model::case_text(&p.case)),
            sig3(p.predicted),
            sig3(p.measured),
            esc(&p.unit),
            p.error() * 100.0
        );
    }
    o.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(101.75066768882248), "102");
        assert_eq!(sig3(0.012345), "0.0123");
        assert_eq!(sig3(1.0), "1.00");
        assert_eq!(sig3(1450.0), "1450");
        assert_eq!(sig3(-2.34567), "-2.35");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(sig3(12345678.0), "1.23e7");
        assert_eq!(param_text(&serde_json::json!("full")), "full");
    }

    #[test]
    fn case_keys_get_units() {
        assert_eq!(key_axis("batch").0, "batch (ops per submit)");
        assert_eq!(
            key_axis("size"),
            ("size (bytes)".to_string(), Format::Bytes)
        );
        assert!(!key_axis("whatever").0.contains("(case)"));
    }
}
