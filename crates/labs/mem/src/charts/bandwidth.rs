//! Memory bandwidth against block size, one line per page backing (and op, threads where they
//! vary), one chart for sequential and one for random access.

use super::MEM_KEYS;
use costlab_core::model::Doc;
use costlab_history::report::charts::plot::{Axis, Format, Plot, Scale};
use costlab_history::report::charts::{lab_ran, plain, series_along, unit_of, Chart};

pub fn charts(doc: &Doc) -> Vec<Chart> {
    ["seq", "rand"]
        .iter()
        .map(|pattern| one(doc, pattern))
        .collect()
}

fn one(doc: &Doc, pattern: &str) -> Chart {
    let id = format!("chart-mem-bandwidth-{pattern}");
    let word = if pattern == "seq" {
        "sequential"
    } else {
        "random"
    };
    let title = format!("Memory bandwidth vs block size, {word} access");
    if !lab_ran(doc, "mem") {
        return Chart::not_run(&id, &title, "mem");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "mem"
                && r.metric == "bandwidth"
                && r.key("pattern") == pattern
                && plain(r, &MEM_KEYS)
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(
            &id,
            &title,
            format!("no {word} bandwidth figures in this run"),
        );
    }
    let series = series_along(&rows, "block", &["pattern"]);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let plot = Plot {
        id: id.clone(),
        title: title.clone(),
        x: Axis::auto("block size (bytes)", &xs, 4.0, Format::Bytes),
        y: Axis::new(
            format!("bandwidth ({})", unit_of(&rows)),
            Scale::Linear,
            Format::Number,
        ),
        series,
        guides: vec![],
        marks: vec![],
    };
    if plot.single_x().is_some() {
        // One block: a line chart would stack every series on one tick.
        return Chart::drawn(plot, "One block size in this run, so one bar per series: the median, with min–max whiskers. `costlab mem bandwidth --sizes 16K,4M,1G` sweeps the sizes.");
    }
    Chart::drawn(plot, "Median of the samples with min–max whiskers. Where a line drops, the block has left a cache level; page backings differ once TLB reach runs out.")
}
