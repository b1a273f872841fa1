//! Garbage-collection overhead against heap headroom, every runtime's curve on one chart
//! (go, java-g1, java-parallel, java-zgc, java-shenandoah), with the 10% line and the two
//! points the Biscuit paper reports for Go (34% at 0.5x headroom, 9% at 2x).

use costlab_core::model::Doc;
use costlab_history::report::charts::plot::{Axis, Format, Marker, Plot, Scale, Series};
use costlab_history::report::charts::{lab_ran, num, series_along, Chart};

const ID: &str = "chart-gc-headroom";
const TITLE: &str = "GC overhead vs heap headroom";

/// (headroom as a multiple of the live heap, overhead %) from the Biscuit paper (OSDI '18).
pub const PAPER_POINTS: [(f64, f64); 2] = [(0.5, 34.0), (2.0, 9.0)];

pub fn chart(doc: &Doc) -> Chart {
    if !lab_ran(doc, "gc") {
        return Chart::not_run(ID, TITLE, "gc");
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
        for mut s in series_along(&of, "headroom", &["live"]) {
            s.name = if s.name == metric {
                metric.replace('_', " ")
            } else {
                format!("{} {}", s.name, metric.replace('_', " "))
            };
            series.push(s);
        }
    }
    let xs: Vec<f64> = rows
        .iter()
        .filter_map(|r| num(r.case.get("headroom")))
        .collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if lo.is_finite() && hi > lo {
        let mut target = Series::line("10% GC", vec![(lo, 10.0, None), (hi, 10.0, None)]);
        target.dashed = true;
        target.marker = Marker::None;
        target.color = Some("#888".into());
        series.push(target);
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
        marks: vec![],
    };
    Chart::drawn(plot, "The less spare heap, the more often the collector runs: GC share of CPU by headroom, one curve per runtime (Go: GOGC or GOMEMLIMIT; Java: -Xmx = live x (1 + h)). Dashed: 10%. Diamonds: the Biscuit paper's figures for Go (34% at 0.5x, 9% at 2x).")
}
