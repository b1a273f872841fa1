//! Each model's prediction beside the measurement: along the case key the points sweep, or,
//! when they sweep none, as predicted against measured with the line where they agree.

use super::plot::{Axis, Format, Marker, Plot, Point, Scale, Series};
use super::{num, Chart};
use crate::report::{Doc, Model};

pub fn charts(doc: &Doc) -> Vec<Chart> {
    if doc.models.is_empty() {
        return vec![Chart::skipped(
            "chart-models",
            "Models: predicted vs measured",
            "no lab in this run fitted a model",
        )];
    }
    doc.models
        .iter()
        .enumerate()
        .map(|(i, m)| one(i, m))
        .collect()
}

/// The numeric case key whose value differs between the points, if there is one.
fn sweep_key(m: &Model) -> Option<String> {
    let first = m.points.first()?;
    first
        .case
        .keys()
        .find(|k| {
            m.points.iter().all(|p| num(p.case.get(*k)).is_some())
                && m.points
                    .iter()
                    .any(|p| p.case.get(*k) != first.case.get(*k))
        })
        .cloned()
}

fn one(i: usize, m: &Model) -> Chart {
    let id = format!("chart-model-{i}");
    let title = format!("Model ({}): {}", m.lab, m.name);
    if m.points.is_empty() {
        return Chart::skipped(&id, &title, "the model has no points");
    }
    let unit = m.points[0].unit.clone();
    let plot = if let Some(key) = sweep_key(m) {
        let mut pred = Vec::new();
        let mut meas = Vec::new();
        for p in &m.points {
            let x = num(p.case.get(&key)).unwrap_or(f64::NAN);
            pred.push((x, p.predicted, None));
            meas.push((x, p.measured, None));
        }
        pred.sort_by(|a, b| a.0.total_cmp(&b.0));
        meas.sort_by(|a, b| a.0.total_cmp(&b.0));
        let xs: Vec<f64> = meas.iter().map(|p| p.0).collect();
        let ys: Vec<f64> = meas.iter().chain(&pred).map(|p| p.1).collect();
        let mut predicted = Series::line("predicted", pred);
        predicted.dashed = true;
        predicted.marker = Marker::Square;
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
            series: vec![Series::line("measured", meas), predicted],
            guides: vec![],
        }
    } else {
        let pts: Vec<Point> = m
            .points
            .iter()
            .map(|p| (p.measured, p.predicted, None))
            .collect();
        let all: Vec<f64> = pts.iter().flat_map(|p| [p.0, p.1]).collect();
        let (lo, hi) = super::plot::min_max(&all);
        let mut points = Series::line("cases", pts);
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
            id: id.clone(),
            title: title.clone(),
            x: Axis::new(format!("measured ({unit})"), scale, Format::Number),
            y: Axis::new(format!("predicted ({unit})"), scale, Format::Number),
            series: vec![points, diag],
            guides: vec![],
        }
    };
    let worst = m
        .points
        .iter()
        .map(|p| p.error().abs())
        .fold(0.0f64, f64::max);
    Chart {
        id,
        title,
        svg: Ok(plot.render()),
        caption: format!(
            "Largest disagreement {:.0}%. {}",
            worst * 100.0,
            m.verdict.join(" ")
        ),
    }
}
