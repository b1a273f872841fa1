//! The cpu lab through the binary: the branch and loop-order rows with the keys and units
//! the contract (docs/src/contract.md) names, their models, the counter columns (read, or unsupported with why), and
//! one-line exit-2 errors on bad input. No timing is asserted.

use crate::common::json;

use serde_json::Value;

use crate::common::costlab;

fn time_rows(doc: &Value) -> Vec<&Value> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "cpu" && r["metric"] == "time")
        .collect()
}

#[test]
fn branch_rows_cover_both_variants_on_both_orders_with_a_model() {
    let doc = json(&costlab(&[
        "cpu",
        "branch",
        "--sizes",
        "16K",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]));
    let rows = time_rows(&doc);
    let got: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["unit"], "ns");
            assert_eq!(r["case"]["test"], "branch");
            assert_eq!(r["case"]["size"], 16384);
            assert_eq!(r["summary"]["n"], 2);
            assert!(r["quality"].is_string(), "every figure has a verdict: {r}");
            (
                r["case"]["variant"].as_str().unwrap().to_string(),
                r["case"]["data"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("branchy", "sorted"),
        ("branchy", "shuffled"),
        ("branchless", "sorted"),
        ("branchless", "shuffled"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    let models = doc["models"].as_array().unwrap();
    assert!(
        models
            .iter()
            .any(|m| m["params"]["mispredict_ns"].is_number()),
        "{models:?}"
    );
}

#[test]
fn loop_order_with_counters_reads_them_or_says_why() {
    let out = costlab(&[
        "cpu",
        "loop-order",
        "--sizes",
        "256K",
        "--samples",
        "2",
        "--quick",
        "--counters",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    let rows = time_rows(&doc);
    let variants: Vec<&str> = rows
        .iter()
        .map(|r| r["case"]["variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["row-major", "column-major"]);
    for r in &rows {
        assert!(r["case"]["n"].as_u64().unwrap() > 1, "{r}");
        let counted = r["counters"]
            .as_object()
            .is_some_and(|c| c.contains_key("cache-misses/element"));
        let why = r["unsupported_counters"]["cache-misses"].as_str();
        assert!(
            counted || why.is_some(),
            "cache-misses neither read nor explained: {r}"
        );
    }
    // The tables went to stderr (stdout is the JSON); their counter columns say which.
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("cache-misses/el"), "{text}");
    let no_pmu = rows.iter().any(|r| {
        r["unsupported_counters"]["cache-misses"]
            .as_str()
            .is_some_and(|w| w.starts_with("no hardware PMU"))
    });
    if no_pmu {
        assert!(text.contains("unsupported: no PMU"), "{text}");
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for (args, needle) in [
        (
            vec!["cpu", "branch", "--case", "row-major"],
            "unknown branch variant",
        ),
        (
            vec!["cpu", "loop-order", "--sizes", "1K"],
            "loop-order takes sizes",
        ),
        (vec!["cpu", "branch", "--sizes", "lots"], "lots"),
    ] {
        let out = costlab(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
