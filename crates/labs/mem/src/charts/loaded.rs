//! Loaded latency: the chase's latency against the bandwidth the other CPUs drew at the same
//! time (`costlab mem loaded`), one curve per traffic kind, idle first.

use costlab_core::model::Doc;
use costlab_history::report::charts::plot::{Axis, Format, Plot, Series};
use costlab_history::report::charts::{lab_ran, Chart};

const ID: &str = "chart-mem-loaded";
const TITLE: &str = "Loaded latency vs bandwidth";

pub fn chart(doc: &Doc) -> Chart {
    if !lab_ran(doc, "mem") {
        return Chart::not_run(ID, TITLE, "mem");
    }
    let lat: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == "mem" && r.metric == "latency" && r.key("op") == "loaded")
        .collect();
    if lat.is_empty() {
        return Chart::skipped(ID, TITLE, "no loaded-latency figures in this run");
    }
    let mut series: Vec<Series> = Vec::new();
    for l in &lat {
        let Some(bw) = doc
            .results
            .iter()
            .find(|b| b.lab == "mem" && b.metric == "bandwidth" && b.case == l.case)
        else {
            continue;
        };
        let name = format!("{} traffic", l.key("traffic"));
        let point = (
            bw.summary.median,
            l.summary.median,
            Some((l.summary.min, l.summary.max)),
        );
        let i = match series.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                series.push(Series::line(name, vec![]));
                series.len() - 1
            }
        };
        series[i].points.push(point);
        // The point is both figures: it carries the worse mark of the two.
        series[i].judge(point.0, l);
        series[i].judge(point.0, bw);
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let mut x = Axis::new(
        "load bandwidth (GB/s)",
        costlab_history::report::charts::plot::Scale::Linear,
        Format::Number,
    );
    x.zero = true;
    let plot = Plot {
        id: ID.into(),
        title: TITLE.into(),
        x,
        y: Axis::auto("chase latency (ns)", &ys, 20.0, Format::Number),
        series,
        guides: Vec::new(),
        marks: vec![],
    };
    Chart::drawn(plot, "One CPU chases pointers while the others stream memory with less and less delay between lines: the leftmost point is idle latency, and latency climbs as the load's bandwidth grows.")
}
