//! Each model's prediction beside the measurement: along the case key the points sweep (one
//! pair of lines per group of the other keys), or, when they sweep none, as predicted against
//! measured with the line where they agree. A lab with many models (one fit per variant) gets
//! one chart of all its fits' points.

use super::plot::{Axis, Format, Marker, Plot, Point, Scale, Series, PALETTE};
use super::{num, Chart};
use crate::report::{Doc, Model, ModelPoint};

/// More models than this from one lab are drawn together.
const PER_LAB: usize = 3;

pub fn charts(doc: &Doc) -> Vec<Chart> {
    if doc.models.is_empty() {
        return vec![Chart::skipped(
            "chart-models",
            "Models: predicted vs measured",
            "no lab in this run fitted a model",
        )];
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
        let of: Vec<&Model> = doc.models.iter().filter(|m| m.lab == lab).collect();
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
    Chart {
        id,
        title,
        svg: Ok(plot.render()),
        caption: format!(
            "Every point of the {} {lab} models; on the dashed line the model is exact. Largest disagreement {:.0}%. The models' verdicts are below the charts.",
            models.len(),
            worst(&points) * 100.0
        ),
    }
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
            x: Axis::auto(format!("{key} (case)"), &xs, 8.0, Format::Number),
            y: Axis::auto(
                format!("predicted and measured ({unit})"),
                &ys,
                30.0,
                Format::Number,
            ),
            series,
            guides: vec![],
        }
    } else {
        let pts = m
            .points
            .iter()
            .map(|p| (p.measured, p.predicted, None))
            .collect();
        scatter(&id, &title, &unit, pts, "cases")
    };
    let points: Vec<&ModelPoint> = m.points.iter().collect();
    Chart {
        id,
        title,
        svg: Ok(plot.render()),
        caption: format!(
            "Solid: measured; dashed: the model. Largest disagreement {:.0}%.",
            worst(&points) * 100.0
        ),
    }
}
