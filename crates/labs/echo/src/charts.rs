//! Echo server throughput and p99 latency against connections, one line per engine; with
//! several message sizes, throughput and server CPU per request against size, one line per
//! engine at each connection count.

use costlab_core::model::{Doc, ResultRow};
use costlab_history::report::charts::plot::{Axis, Format, Plot, Scale};
use costlab_history::report::charts::{lab_ran, num, series_along, unit_of, xs_ys, Chart};

/// The message sizes the run swept, in bytes, ascending.
fn sizes(doc: &Doc) -> Vec<f64> {
    let mut v: Vec<f64> = doc
        .results
        .iter()
        .filter(|r| r.lab == "echo")
        .filter_map(|r| num(r.case.get("size")))
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// A row of the echo sweep at `size` (every row when the run has one size or none).
fn at_size(r: &ResultRow, size: Option<f64>) -> bool {
    size.is_none() || num(r.case.get("size")) == size
}

pub fn charts(doc: &Doc) -> Vec<Chart> {
    let mut v = by_conns(doc);
    // One size (or none): nothing to draw along size, and no line saying so on every page.
    if sizes(doc).len() < 2 {
        return v;
    }
    v.push(by_size(
        doc,
        "throughput",
        "chart-echo-size-throughput",
        "Echo throughput vs message size",
        "throughput",
    ));
    v.push(by_size(
        doc,
        "server_cpu_per_req",
        "chart-echo-size-cpu",
        "Echo server CPU per request vs message size",
        "server CPU per request",
    ));
    v
}

fn by_size(doc: &Doc, metric: &str, id: &str, title: &str, what: &str) -> Chart {
    if !lab_ran(doc, "echo") {
        return Chart::not_run(id, title, "echo");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "echo"
                && r.metric == metric
                && r.case.contains_key("size")
                && r.case.contains_key("engine")
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(id, title, format!("no echo {metric} figures in this run"));
    }
    let series = series_along(&rows, "size", &[]);
    let (xs, ys) = xs_ys(&series);
    let plot = Plot {
        id: id.into(),
        title: title.into(),
        x: Axis::auto("message size (bytes)", &xs, 2.0, Format::Bytes),
        y: Axis::auto(
            format!("{what} ({})", unit_of(&rows)),
            &ys,
            30.0,
            Format::Number,
        ),
        series,
        guides: vec![],
        marks: vec![],
    };
    Chart::drawn(
        plot,
        "One line per engine at each connection count (and client kind where several ran); whiskers span the samples. Log scale where the figures span 30x or more.",
    )
}

fn by_conns(doc: &Doc) -> Vec<Chart> {
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
        return Chart::not_run(id, title, "echo");
    }
    // Several sizes: against connections, the smallest size alone (the size charts show the
    // rest), so no line mixes sizes.
    let all = sizes(doc);
    let size = (all.len() > 1).then(|| all[0]);
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "echo"
                && r.metric == metric
                && r.case.contains_key("conns")
                && at_size(r, size)
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(id, title, format!("no echo {metric} figures in this run"));
    }
    let series = series_along(&rows, "conns", &[]);
    let (xs, ys) = xs_ys(&series);
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
        x: Axis {
            integer: true,
            ..Axis::auto("connections (count)", &xs, 8.0, Format::Number)
        },
        y,
        series,
        guides: vec![],
        marks: vec![],
    };
    let mut caption = "One line per server engine (and client kind where several ran); whiskers span the samples.".to_string();
    if let Some(b) = size {
        caption.push_str(&format!(
            " Messages of {} only; the charts by size show the others.",
            costlab_core::measure::sizes::format_size(b as u64)
        ));
    }
    Chart::drawn(plot, caption)
}
