//! Echo server throughput and p99 latency against connections, one line per engine.

use super::plot::{Axis, Format, Plot, Scale};
use super::{lab_ran, series_along, unit_of, Chart};
use crate::report::Doc;

pub fn charts(doc: &Doc) -> Vec<Chart> {
    vec![
        one(
            doc,
            "throughput",
            "chart-echo-throughput",
            "Echo throughput vs connections",
            "throughput",
        ),
        one(
            doc,
            "p99",
            "chart-echo-p99",
            "Echo p99 latency vs connections",
            "p99 latency",
        ),
    ]
}

fn one(doc: &Doc, metric: &str, id: &str, title: &str, what: &str) -> Chart {
    if !lab_ran(doc, "echo") {
        return Chart::skipped(id, title, "the echo lab did not run");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == "echo" && r.metric == metric && r.case.contains_key("conns"))
        .collect();
    if rows.is_empty() {
        return Chart::skipped(id, title, format!("no echo {metric} figures in this run"));
    }
    let series = series_along(&rows, "conns", &[]);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let y = if metric == "p99" {
        Axis::auto(
            format!("{what} ({})", unit_of(&rows)),
            &ys,
            30.0,
            Format::Number,
        )
    } else {
        Axis::new(
            format!("{what} ({})", unit_of(&rows)),
            Scale::Linear,
            Format::Number,
        )
    };
    let plot = Plot {
        id: id.into(),
        title: title.into(),
        x: Axis::auto("connections (count)", &xs, 8.0, Format::Number),
        y,
        series,
        guides: vec![],
    };
    Chart {
        id: id.into(),
        title: title.into(),
        svg: Ok(plot.render()),
        caption: "One line per server engine (and client kind where several ran); whiskers span the samples.".into(),
    }
}
