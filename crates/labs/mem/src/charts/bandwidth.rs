//! Memory bandwidth against block size, one line per page backing (and op, threads where they
//! vary), one chart for sequential and one for random access.

use super::MEM_KEYS;

/// The keys of a bandwidth figure this chart draws: the lab's own, the kernel behind it (ISA
/// and store kind, which every bandwidth row carries) and the block asked for where the block
/// was rounded.
const DRAWN_KEYS: [&str; 8] = [
    MEM_KEYS[0],
    MEM_KEYS[1],
    MEM_KEYS[2],
    MEM_KEYS[3],
    MEM_KEYS[4],
    "isa",
    "store",
    "block_asked",
];
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
    let all: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == "mem" && r.metric == "bandwidth" && r.key("pattern") == pattern)
        .collect();
    let rows: Vec<_> = all
        .iter()
        .copied()
        .filter(|r| plain(r, &DRAWN_KEYS))
        .collect();
    if rows.is_empty() {
        // Never "no figures" beside a sheet that shows some: say which figures are not drawn.
        let why = if all.is_empty() {
            format!("no {word} bandwidth figures in this run")
        } else {
            format!(
                "the run's {} {word} bandwidth figures are of a kind this chart does not draw \
                 (shared regions or loaded runs); the tables show them",
                all.len()
            )
        };
        return Chart::skipped(&id, &title, why);
    }
    // The kernel's ISA and store kind follow from the op, so they name no series of their own.
    let series = series_along(&rows, "block", &["pattern", "isa", "store", "block_asked"]);
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

#[cfg(test)]
mod tests {
    use costlab_core::case;
    use costlab_core::model::{Doc, Outcome, ResultRow, RunInfo};

    fn doc(rows: Vec<ResultRow>) -> Doc {
        let run = RunInfo {
            id: "t".into(),
            started: "2026-11-27T00:00:00Z".into(),
            costlab: "0".into(),
            command: "costlab mem".into(),
            complete: true,
        };
        Doc::new(
            run,
            serde_json::Value::Null,
            Outcome {
                results: rows,
                ..Default::default()
            },
        )
    }

    fn row(block: u64, op: &str, shared: bool) -> ResultRow {
        let mut case = case! {
            "op" => op, "pattern" => "seq", "pages" => "4k", "block" => block, "threads" => 1,
            "isa" => "avx2", "store" => if op == "read" { "none" } else { "temporal" }
        };
        if shared {
            case.insert("shared".into(), true.into());
        }
        ResultRow::new("mem", case, "bandwidth", "GB/s", vec![30.0, 31.0, 32.0]).unwrap()
    }

    /// The rows the lab writes carry the kernel's ISA and store kind: they are drawn, and the
    /// kernel names no series (read and write are two lines, not four).
    #[test]
    fn figures_with_the_kernel_keys_are_drawn() {
        let rows = vec![
            row(16 << 10, "read", false),
            row(1 << 28, "read", false),
            row(16 << 10, "write", false),
            row(1 << 28, "write", false),
        ];
        let c = super::one(&doc(rows), "seq");
        let plot = c.plot.expect("drawn, not skipped");
        let names: Vec<&str> = plot.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read", "write"]);
    }

    /// Figures the chart leaves out are never called absent.
    #[test]
    fn a_chart_left_out_never_says_there_are_no_figures_when_there_are() {
        let c = super::one(&doc(vec![row(1 << 28, "read", true)]), "seq");
        let why = c.svg.expect_err("skipped");
        assert!(!why.starts_with("no "), "{why}");
        assert!(why.contains("1 sequential bandwidth figures"), "{why}");
        let c = super::one(&doc(vec![row(1 << 28, "read", false)]), "rand");
        assert_eq!(
            c.svg.expect_err("skipped"),
            "no random bandwidth figures in this run"
        );
    }
}
