//! The sharing lab through the binary: the rows asked for and nothing else, summaries that are
//! the summaries of their samples, latency that is the inverse of throughput, USL fits that
//! go through their points, and one-line exit-2 errors on bad input.

use crate::common::costlab;
use crate::common::json;

use crate::common::skip;

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let out = costlab(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(lines[0].contains(needle), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn cases_write_variant_and_threads_rows_and_usl_models() {
    let threads = if cpus() >= 2 { "1,2" } else { "1" };
    let out = costlab(&[
        "share",
        "--case",
        "arc-shared,atomic-padded",
        "--threads",
        threads,
        "--quick",
        "--samples",
        "2",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    assert_eq!(doc["schema"], "costlab/1");
    let results = doc["results"].as_array().unwrap();
    let counts: Vec<u64> = threads.split(',').map(|t| t.parse().unwrap()).collect();
    // One throughput and one latency row per (case, thread count) asked for, in that order.
    let mut want = Vec::new();
    for variant in ["arc-shared", "atomic-padded"] {
        for &t in &counts {
            want.push((variant.to_string(), t));
        }
    }
    let mut got = Vec::new();
    for r in results {
        assert_eq!(r["lab"], "share");
        let key = (
            r["case"]["variant"].as_str().unwrap().to_string(),
            r["case"]["threads"].as_u64().unwrap(),
        );
        if got.last() != Some(&key) {
            got.push(key);
        }
        let (metric, unit) = (r["metric"].as_str().unwrap(), r["unit"].as_str().unwrap());
        assert!(
            (metric, unit) == ("throughput", "Mop/s") || (metric, unit) == ("latency", "ns"),
            "{metric} {unit}"
        );
        assert_eq!(samples(r).len(), 2, "--samples 2");
        check_summary(r);
    }
    assert_eq!(got, want);
    assert_eq!(results.len(), 2 * want.len());
    // Latency is the time one thread takes per operation: threads * 1000 / Mop/s, sample by
    // sample.
    for pair in results.chunks(2) {
        let (tp, lat) = (&pair[0], &pair[1]);
        assert_eq!(
            (tp["metric"].as_str(), lat["metric"].as_str()),
            (Some("throughput"), Some("latency"))
        );
        let t = tp["case"]["threads"].as_f64().unwrap();
        for (m, l) in samples(tp).iter().zip(samples(lat)) {
            let want = t * 1000.0 / m;
            assert!(
                (l - want).abs() <= 1e-6 * want,
                "latency {l} vs {want} at {t} threads"
            );
        }
    }
    let models = doc["models"].as_array().unwrap();
    if counts.len() < 2 {
        skip::skipped(
            "cases_write_variant_and_threads_rows_and_usl_models (USL part)",
            "one CPU: a USL fit needs two thread counts",
        );
        return;
    }
    // Two thread counts: each case gets its two bounds, each checked at both points; two
    // points and two parameters, so each fit goes through its points and says so.
    assert_eq!(models.len(), 4);
    for m in models {
        let points = m["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        assert!(m["params"]["sigma"].as_f64().unwrap() >= 0.0);
        assert!(m["params"]["kappa"].as_f64().unwrap() >= 0.0);
        let variant = points[0]["case"]["variant"].as_str().unwrap();
        for p in points {
            let threads = p["case"]["threads"].as_u64().unwrap();
            let row = results
                .iter()
                .find(|r| {
                    r["metric"] == "throughput"
                        && r["case"]["variant"] == variant
                        && r["case"]["threads"] == threads
                })
                .unwrap();
            let median = row["summary"]["median"].as_f64().unwrap();
            let (measured, predicted) = (
                p["measured"].as_f64().unwrap(),
                p["predicted"].as_f64().unwrap(),
            );
            assert!(
                (measured - median).abs() <= 1e-9 * median,
                "{measured} vs {median}"
            );
            // Two points, two parameters: the fit goes through both (so lambda is the one-
            // thread figure), unless the second point beats linear scaling, where both
            // parameters stop at zero and the model is lambda x N.
            let lambda = m["params"]["lambda_mops"].as_f64().unwrap();
            let linear = m["params"]["sigma"] == 0.0 && m["params"]["kappa"] == 0.0;
            let want = if linear {
                lambda * threads as f64
            } else {
                measured
            };
            assert!((predicted - want).abs() <= 1e-6 * want, "{m}");
        }
        assert!(!m["verdict"].as_array().unwrap().is_empty());
    }
    let tables = String::from_utf8_lossy(&out.stderr);
    assert!(tables.contains("model extrapolation"));
    assert!(tables.contains("cache line"));
}

fn samples(r: &serde_json::Value) -> Vec<f64> {
    r["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// The row's summary is that of its samples: n, min, max and median (the mean of the middle
/// two for an even n), every sample finite and above zero.
fn check_summary(r: &serde_json::Value) {
    let mut xs = samples(r);
    assert!(!xs.is_empty(), "{r}");
    assert!(xs.iter().all(|x| x.is_finite() && *x > 0.0), "{r}");
    xs.sort_by(f64::total_cmp);
    let s = &r["summary"];
    let n = xs.len();
    let median = if n.is_multiple_of(2) {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    } else {
        xs[n / 2]
    };
    assert_eq!(s["n"].as_u64(), Some(n as u64));
    assert_eq!(s["min"].as_f64(), Some(xs[0]));
    assert_eq!(s["max"].as_f64(), Some(xs[n - 1]));
    assert!(
        (s["median"].as_f64().unwrap() - median).abs() <= 1e-9 * median,
        "{r}"
    );
}

#[test]
fn c2c_writes_from_and_to_rows() {
    if cpus() < 2 {
        skip::skipped(
            "c2c_writes_from_and_to_rows",
            &format!(
                "core-to-core needs at least 2 CPUs, this machine has {}",
                cpus()
            ),
        );
        return;
    }
    let out = costlab(&[
        "share",
        "c2c",
        "--cpus",
        "0,1",
        "--samples",
        "2",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    let results = doc["results"].as_array().unwrap();
    // The pair's latency, and the spread of its per-address medians.
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["metric"], "address_spread");
    assert_eq!(results[1]["unit"], "%");
    assert!(
        results[0]["quality"].is_string()
            && results[0]["conditions"]["cpus"] == serde_json::json!([0, 1])
    );
    assert_eq!(results[0]["case"]["from"], 0);
    assert_eq!(results[0]["case"]["to"], 1);
    assert_eq!(results[0]["metric"], "latency");
    assert_eq!(results[0]["unit"], "ns");
    check_summary(&results[0]);
    // Two samples at each of the probe's addresses.
    assert!(samples(&results[0]).len() >= 2, "{}", results[0]);
    let spread = results[1]["summary"]["median"].as_f64().unwrap();
    assert!(spread.is_finite() && spread >= 0.0, "{spread}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("from \\ to"));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    assert_usage_error(
        &["share", "--case", "arc-shard"],
        "unknown case 'arc-shard'",
    );
    assert_usage_error(&["share", "--threads", "4096"], "--oversubscribe");
    assert_usage_error(
        &["share", "--threads", "0"],
        "bad thread count '0': use a whole number from 1",
    );
    assert_usage_error(&["share", "--threads", "two"], "bad thread count");
    assert_usage_error(&["share", "c2c", "--cpus", "4095"], "CPU 4095");
    assert_usage_error(&["share", "c2c", "--cpus", "0"], "at least two CPUs");
    assert_usage_error(&["share", "c2c", "--cpus", "x"], "bad CPU list");
}
