//! The Universal Scalability Law fitted to each case's curve, and what the fit says about
//! the measured points (`usl` has the fit itself).

use super::*;

pub(super) const TWO_POINTS: &str = "only two thread counts were measured: the USL then has one equation (for T = 1, 2: sigma + 2 kappa = 2 X(1)/X(2) - 1) for two unknowns, so it is not a fit. The sigma-only fit (kappa = 0) is an upper bound and the kappa-only fit (sigma = 0) a lower bound for every larger T; both pass through the measured points, and the truth lies between them. Measure on a machine with more CPUs to pin the curve down.";

/// The median throughput of `v` at each measured thread count.
pub(super) fn curve(v: Variant, rows: &[ResultRow]) -> Vec<(usize, ResultRow)> {
    let mut pts: Vec<(usize, ResultRow)> = rows
        .iter()
        .filter(|r| r.metric == "throughput" && r.key("variant") == v.name())
        .filter_map(|r| r.key("threads").parse().ok().map(|t| (t, r.clone())))
        .collect();
    pts.sort_by_key(|p| p.0);
    pts
}

/// The USL fit (or the two bounds) of one case's curve, as report models.
pub(super) fn usl_models(v: Variant, rows: &[ResultRow]) -> Vec<Model> {
    let pts = curve(v, rows);
    let points: Vec<usl::Point> = pts
        .iter()
        .map(|(t, r)| usl::Point {
            n: *t as f64,
            x: r.summary.median,
        })
        .collect();
    let fits = match usl::analyse(&points) {
        usl::Analysis::Full(f) => vec![f],
        usl::Analysis::Bounds {
            sigma_only,
            kappa_only,
        } => vec![sigma_only, kappa_only],
        usl::Analysis::TooFew => return vec![],
    };
    fits.into_iter()
        .map(|f| {
            let mut params = Map::new();
            params.insert("fit".into(), json!(f.shape.label()));
            params.insert("lambda_mops".into(), json!(f.lambda));
            params.insert("sigma".into(), json!(f.sigma));
            params.insert("kappa".into(), json!(f.kappa));
            params.insert("peak_threads".into(), json!(f.peak()));
            params.insert("rel_rms".into(), json!(f.rel_rms));
            let extrapolated: Map<String, Value> = usl::EXTRAPOLATE_TO
                .iter()
                .map(|&n| (n.to_string(), json!(f.predict(n as f64))))
                .collect();
            params.insert("extrapolated_mops".into(), Value::Object(extrapolated));
            params.insert("extrapolation".into(), json!("model, not measured"));
            let model_points = pts
                .iter()
                .map(|(t, r)| ModelPoint {
                    case: r.case.clone(),
                    predicted: f.predict(*t as f64),
                    measured: r.summary.median,
                    unit: "Mop/s".into(),
                })
                .collect();
            let mut m = Model {
                lab: LAB.into(),
                name: format!("USL {} ({})", v.name(), f.shape.label()),
                params,
                points: model_points,
                verdict: usl_verdict(v, &f, &pts),
            };
            // The fit is read from every point of the curve.
            let inputs: Vec<&ResultRow> = pts.iter().map(|(_, r)| r).collect();
            costlab_core::measure::quality::model_inherits(&mut m, &inputs);
            m
        })
        .collect()
}

/// A fit that misses a measured point by more than this says so.
pub(super) const MISS: f64 = 0.10;

pub(super) fn usl_verdict(v: Variant, f: &usl::Fit, pts: &[(usize, ResultRow)]) -> Vec<String> {
    let shape = match f.shape {
        usl::Shape::Full => "fit",
        usl::Shape::SigmaOnly => "upper bound (all cost as contention)",
        usl::Shape::KappaOnly => "lower bound (all cost as coherency)",
    };
    let peak = match f.peak() {
        Some(p) if p <= 1.0 => "more threads never beat one".to_string(),
        Some(p) => format!("throughput peaks near {p:.0} threads"),
        None if f.sigma > 0.0 => format!(
            "throughput never falls but flattens toward {:.1} Mop/s",
            f.lambda / f.sigma
        ),
        None => "throughput grows linearly".to_string(),
    };
    let mut out = vec![format!(
        "{} {shape}: sigma {:.4}, kappa {:.5}; {peak}; model extrapolation to 128 threads: {:.1} Mop/s",
        v.name(),
        f.sigma,
        f.kappa,
        f.predict(128.0)
    )];
    for (t, r) in pts {
        let (pred, meas) = (f.predict(*t as f64), r.summary.median);
        if meas > 0.0 && ((pred - meas) / meas).abs() > MISS {
            out.push(format!(
                "{} at T={t}: the USL predicts {pred:.1} Mop/s, measured {meas:.1} ({:+.0}%): one smooth curve does not follow this case here{}",
                v.name(),
                100.0 * (pred - meas) / meas,
                if *t > cpus::allowed_cpus().len() {
                    " (oversubscribed: this point measures the scheduler's time slicing)"
                } else {
                    " (a step such as the first line transfer, or a different cost per op beyond this T)"
                }
            ));
        }
    }
    out
}
