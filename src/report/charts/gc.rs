//! Garbage-collection overhead against heap headroom, with the two points the Biscuit paper
//! reports for Go (34% at 0.5x headroom, 9% at 2x) to compare against.

use super::plot::{Axis, Format, Marker, Plot, Scale, Series};
use super::{lab_ran, num, series_along, Chart};
use crate::report::Doc;

const ID: &str = "chart-gc-headroom";
const TITLE: &str = "GC overhead vs heap headroom";

/// (headroom as a multiple of the live heap, overhead %) from the Biscuit paper (OSDI '18).
pub const PAPER_POINTS: [(f64, f64); 2] = [(0.5, 34.0), (2.0, 9.0)];

pub fn chart(doc: &Doc) -> Chart {
    if !lab_ran(doc, "gc") {
        return Chart::skipped(ID, TITLE, "the gc lab did not run");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "gc"
                && (r.metric == "gc_cpu_share" || r.metric == "slowdown")
                && num(r.case.get("headroom")).is_some()
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(ID, TITLE, "no gc headroom figures in this run");
    }
    let mut series = Vec::new();
    for metric in ["gc_cpu_share", "slowdown"] {
        let of: Vec<_> = rows
            .iter()
            .copied()
            .filter(|r| r.metric == metric)
            .collect();
        for mut s in series_along(&of, "headroom", &[]) {
            s.name = if s.name == metric {
                metric.replace('_', " ")
            } else {
                format!("{} {}", s.name, metric.replace('_', " "))
            };
            series.push(s);
        }
    }
    let mut paper = Series::line(
        "Biscuit paper (Go)",
        PAPER_POINTS.iter().map(|(x, y)| (*x, *y, None)).collect(),
    );
    paper.line = false;
    paper.marker = Marker::Diamond;
    paper.color = Some("#000".into());
    series.push(paper);
    let plot = Plot {
        id: ID.into(),
        title: TITLE.into(),
        x: Axis::new("headroom (× live heap)", Scale::Linear, Format::Number),
        y: Axis::new("overhead (%)", Scale::Linear, Format::Number),
        series,
        guides: vec![],
    };
    Chart {
        id: ID.into(),
        title: TITLE.into(),
        svg: Ok(plot.render()),
        caption: "The less spare heap, the more often the collector runs. Diamonds: the Biscuit paper's figures (34% at 0.5x, 9% at 2x).".into(),
    }
}
