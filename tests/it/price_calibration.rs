//! The tracer's calibration (its own cost per event), kept in the history: the first price of
//! a history measures it and stores it with its run (class `tracer`, docs/src/contract.md);
//! the next on the same machine, kernel and build reuses it and names that run;
//! `--recalibrate` measures it again. Needs root and BPF (skips without). None asserts a time.

use crate::common;
use crate::price::events_or_skip;

/// The tracer rows of a document: (event, tracer) of each.
fn tracer_rows(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price" && r["case"]["class"] == "tracer")
        .map(|r| {
            assert_eq!(r["metric"], "tracer_cost", "{r}");
            let kernel = r["case"]["kernel"].as_str().unwrap_or("");
            assert!(!kernel.is_empty(), "{r}");
            let build = r["case"]["build"].as_str().unwrap_or("");
            assert!(build.starts_with(env!("CARGO_PKG_VERSION")), "{r}");
            (
                r["case"]["event"].as_str().unwrap().to_string(),
                r["case"]["tracer"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The note on the tracer's own cost.
fn tracer_note(doc: &serde_json::Value) -> String {
    doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.contains("own cost, taken out of every traced run"))
        .unwrap_or_else(|| panic!("no tracer note: {}", doc["notes"]))
        .to_string()
}

fn run_id(doc: &serde_json::Value) -> String {
    doc["run"]["id"].as_str().unwrap().to_string()
}

#[test]
fn the_tracers_calibration_is_stored_reused_and_measured_again_on_request() {
    let name = "the_tracers_calibration_is_stored_reused_and_measured_again_on_request";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = dir.path().join("h.db");
    let _one = common::serial();
    let exe = exe.to_str().unwrap();
    let price = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["--", exe, "getppid", "100"]);
        common::price_with(&db, &args, |_| {})
    };
    // An empty history: measured, and every event's row stored with the run.
    let first = price(&[]);
    let rows = tracer_rows(&first);
    let mut events: Vec<&str> = rows.iter().map(|(e, _)| e.as_str()).collect();
    events.sort();
    assert_eq!(
        events,
        [
            "exec",
            "fault",
            "file_fault",
            "inode",
            "lookup",
            "mmap",
            "path",
            "switch",
            "switch_local",
            "syscall",
            "tick"
        ],
        "{rows:?}"
    );
    let tracer = rows[0].1.clone();
    assert!(rows.iter().all(|(_, t)| *t == tracer), "{rows:?}");
    let note = tracer_note(&first);
    assert!(
        note.contains("measured here now and stored with this run"),
        "{note}"
    );
    // The same machine, kernel and build within the day: reused, named by its run, not stored
    // again.
    let second = price(&[]);
    assert!(tracer_rows(&second).is_empty());
    let note = tracer_note(&second);
    assert!(
        note.contains(&format!("by run {}", run_id(&first))) && note.contains("reused"),
        "{note}"
    );
    // --recalibrate: measured again, and stored with that run.
    let third = price(&["--recalibrate"]);
    assert_eq!(tracer_rows(&third).len(), 11);
    let note = tracer_note(&third);
    assert!(note.contains("measured here now (--recalibrate)"), "{note}");
    // The newest is what the next price reuses.
    let fourth = price(&[]);
    let note = tracer_note(&fourth);
    assert!(
        note.contains(&format!("by run {}", run_id(&third))),
        "{note}"
    );
}

/// The check of the calibration: without --once, the untraced runs ran each in a cgroup of
/// its own, and the traced run's kernel time, net of the tracer, is set against their system
/// time (a ratio, said in the verdict).
#[test]
fn the_traced_runs_kernel_time_is_set_against_the_untraced_runs() {
    let name = "the_traced_runs_kernel_time_is_set_against_the_untraced_runs";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = common::calibrated_db(dir.path());
    let _one = common::serial();
    let out = common::command_db(&db)
        .args([
            "price",
            "--quick",
            "--samples",
            "3",
            "--runs",
            "2",
            "--json",
            "-",
            "--",
        ])
        .args([exe.to_str().unwrap(), "touch", "3000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc = common::schema::doc(&out.stdout);
    for metric in ["traced_to_untraced", "traced_to_untraced_cpu"] {
        let ratio = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case"]["class"] == "program" && r["metric"] == metric)
            .and_then(|r| r["summary"]["median"].as_f64())
            .unwrap_or_else(|| panic!("no {metric} row: {}", doc["results"]));
        assert!(ratio.is_finite() && ratio > 0.0, "{metric} {ratio}");
    }
    let notes = doc["notes"].to_string();
    assert!(notes.contains("each ran in a cgroup of its own"), "{notes}");
    let verdict = doc["models"][0]["verdict"].to_string();
    assert!(
        verdict.contains("untraced, the program spent") && verdict.contains("on CPU"),
        "{verdict}"
    );
}

#[test]
fn recalibrate_without_a_split_is_refused_before_anything_runs() {
    for (other, why) in [
        (&["--count-only", "--", "true"][..], "--count-only"),
        (&["--pid", "1"][..], "--pid"),
        (&["--from", "/nonexistent/counts.json"][..], "--from"),
    ] {
        let mut args = vec!["price", "--recalibrate"];
        args.extend(other);
        let out = common::costlab(&args);
        common::price_refused(&out, &["--recalibrate with", why, "drop --recalibrate"]);
    }
}
