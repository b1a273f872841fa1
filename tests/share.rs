//! The sharing lab through the binary: JSON shape, and one-line exit-2 errors on bad input.

use std::process::{Command, Output};

fn costlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_costlab"))
        .args(args)
        .output()
        .expect("running costlab")
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
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
    let n_threads = threads.split(',').count();
    assert_eq!(results.len(), 2 * n_threads * 2);
    for r in results {
        assert_eq!(r["lab"], "share");
        assert!(r["case"]["variant"].is_string() && r["case"]["threads"].is_u64());
        let (metric, unit) = (r["metric"].as_str().unwrap(), r["unit"].as_str().unwrap());
        assert!(
            (metric, unit) == ("throughput", "Mop/s") || (metric, unit) == ("latency", "ns"),
            "{metric} {unit}"
        );
        assert_eq!(r["samples"].as_array().unwrap().len(), 2);
        assert!(r["summary"]["median"].as_f64().unwrap() > 0.0);
    }
    let models = doc["models"].as_array().unwrap();
    if n_threads == 2 {
        // Two thread counts: each case gets its two bounds, each checked at both points.
        assert_eq!(models.len(), 4);
        for m in models {
            assert_eq!(m["points"].as_array().unwrap().len(), 2);
            assert!(m["params"]["sigma"].as_f64().unwrap() >= 0.0);
            assert!(m["params"]["kappa"].as_f64().unwrap() >= 0.0);
        }
        let tables = String::from_utf8_lossy(&out.stderr);
        assert!(tables.contains("model extrapolation"));
        assert!(tables.contains("cache line"));
    }
}

#[test]
fn c2c_writes_from_and_to_rows() {
    if cpus() < 2 {
        eprintln!(
            "skipped: core-to-core needs at least 2 CPUs, this machine has {}",
            cpus()
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("from \\ to"));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    assert_usage_error(
        &["share", "--case", "arc-shard"],
        "unknown case 'arc-shard'",
    );
    assert_usage_error(&["share", "--threads", "4096"], "--oversubscribe");
    assert_usage_error(&["share", "--threads", "0"], "at least one thread");
    assert_usage_error(&["share", "--threads", "two"], "bad thread count");
    assert_usage_error(&["share", "c2c", "--cpus", "4095"], "CPU 4095");
    assert_usage_error(&["share", "c2c", "--cpus", "0"], "at least two CPUs");
    assert_usage_error(&["share", "c2c", "--cpus", "x"], "bad CPU list");
}
