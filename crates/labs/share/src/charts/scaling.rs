//! Throughput of each sharing variant against threads, with the Universal Scalability Law
//! curve the share lab fitted: X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)).

use serde_json::Value;

use costlab_core::model::{Doc, Model};
use costlab_history::report::charts::plot::{Axis, Format, Marker, Plot, Series};
use costlab_history::report::charts::{lab_ran, series_along, unit_of, Chart};

const ID: &str = "chart-share-scaling";
const TITLE: &str = "Shared-line scaling vs threads, with the USL fit";

/// The USL throughput at `n` threads.
pub fn usl(n: f64, sigma: f64, kappa: f64, lambda: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

fn param(m: &Model, k: &str) -> Option<f64> {
    m.params.get(k).and_then(Value::as_f64)
}

fn usl_params(m: &Model) -> Option<(f64, f64, f64)> {
    let lambda = param(m, "lambda").or_else(|| param(m, "lambda_mops"))?;
    Some((param(m, "sigma")?, param(m, "kappa")?, lambda))
}

/// A share model is a USL fit when it has the law's three parameters.
pub fn is_usl(m: &Model) -> bool {
    m.lab == "share" && usl_params(m).is_some()
}

/// The variant a fit belongs to, from its points' case.
fn variant_of(m: &Model) -> Option<String> {
    m.points
        .first()
        .and_then(|p| p.case.get("variant"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub fn chart(doc: &Doc) -> Chart {
    if !lab_ran(doc, "share") {
        return Chart::not_run(ID, TITLE, "share");
    }
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| {
            r.lab == "share"
                && r.metric == "throughput"
                && r.case.contains_key("variant")
                && r.case.contains_key("threads")
        })
        .collect();
    if rows.is_empty() {
        return Chart::skipped(ID, TITLE, "no share throughput figures in this run");
    }
    let mut series = series_along(&rows, "threads", &[]);
    let max_n = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let mut fitted = 0;
    let mut drawn: Vec<Option<String>> = Vec::new();
    let measured = series.len();
    for m in doc.models.iter().filter(|m| is_usl(m)) {
        let Some((sigma, kappa, lambda)) = usl_params(m) else {
            continue;
        };
        // One curve per variant (a lab may give two bounds when two thread counts cannot
        // pin down both terms): the first one stands for it.
        let variant = variant_of(m);
        if drawn.contains(&variant) {
            continue;
        }
        drawn.push(variant.clone());
        let color = variant.as_ref().and_then(|v| {
            series[..measured]
                .iter()
                .position(|s| s.name == *v)
                .map(|i| {
                    costlab_history::report::charts::plot::PALETTE
                        [i % costlab_history::report::charts::plot::PALETTE.len()]
                    .to_string()
                })
        });
        let steps = 60;
        let pts = (0..=steps)
            .map(|i| {
                let n = 1.0 + (max_n - 1.0) * f64::from(i) / f64::from(steps);
                (n, usl(n, sigma, kappa, lambda), None)
            })
            .collect();
        let name = match &variant {
            Some(v) => format!("USL fit {v}"),
            None => format!("USL fit: {}", m.name),
        };
        let mut s = Series::line(name, pts);
        s.color = color;
        s.dashed = true;
        s.marker = Marker::None;
        // The curve takes its variant's colour: one legend entry says what dashed means.
        s.in_legend = false;
        series.push(s);
        fitted += 1;
    }
    if fitted > 0 {
        series.push(Series::key("USL fit (dashed)", true, "#555"));
    }
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series[..measured]
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let plot = Plot {
        id: ID.into(),
        title: TITLE.into(),
        // Scaling starts at one thread; thread counts are whole.
        x: Axis::count("threads (count)", &xs),
        // The variants differ by 100x and more: on a linear axis all but the fastest lie
        // flat on zero.
        y: Axis::auto(
            format!("throughput ({})", unit_of(&rows)),
            &ys,
            8.0,
            Format::Number,
        ),
        series,
        guides: vec![],
        marks: vec![],
    };
    let caption = if fitted == 0 {
        "No USL model in this run, so no fitted curve. A shared written line stops scaling; per-thread copies scale.".to_string()
    } else {
        "Log scale where the variants differ by 8x or more. Dashed: the Universal Scalability Law fitted to the measurements, in the variant's colour (sigma: contention, kappa: coherence crosstalk).".to_string()
    };
    Chart::drawn(plot, caption)
}

#[cfg(test)]
mod tests {
    #[test]
    fn usl_is_linear_without_contention_and_peaks_with_it() {
        assert_eq!(super::usl(4.0, 0.0, 0.0, 10.0), 40.0);
        // sigma 0.1, kappa 0.01 at N = 4: 4 / (1 + 0.3 + 0.12) = 2.8169
        assert!((super::usl(4.0, 0.1, 0.01, 1.0) - 4.0 / 1.42).abs() < 1e-12);
    }
}
