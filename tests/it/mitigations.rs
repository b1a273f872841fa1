//! `costlab mitigations` and the boot-time workflow: on this host, each control is measured on
//! and off where the kernel offers a per-task control, or named in one line where it does not;
//! `costlab compare` names two runs' mitigation difference and what it moved; and end to end,
//! an emulated machine booted once with `mitigations=off` and once without runs the syscall
//! and echo labs, and the host compares the two runs. Output only, never costs.

use std::path::Path;

use serde_json::Value;

use crate::common::vng::{self, Guest};
use crate::common::{costlab_db, costlab_ok, BIN};

const CONTROLS: [&str; 2] = ["store-bypass", "indirect-branch"];

#[test]
fn each_control_is_measured_on_and_off_or_named_in_one_line_and_the_run_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let json = dir.path().join("m.json");
    // Short where a control is offered: no echo servers, one round, few samples.
    let out = costlab_ok(
        &db,
        &[
            "mitigations",
            "--no-echo",
            "--rounds",
            "1",
            "--samples",
            "2",
            "--batches",
            "1",
            "--quick",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: Value = crate::common::schema::doc_file(&json);
    assert!(doc["results"].is_array(), "{doc}");
    for control in CONTROLS {
        let rows: Vec<&Value> = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["case"]["control"] == control)
            .collect();
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("note: {control}: ")))
            .collect();
        if rows.is_empty() {
            // Not offered: exactly one line, saying what the kernel reports and what to do.
            assert_eq!(lines.len(), 1, "{control}: {stdout}");
            assert!(lines[0].contains("PR_GET_SPECULATION_CTRL"), "{}", lines[0]);
            let notes = doc["notes"].as_array().unwrap();
            assert!(notes.iter().any(|n| n
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{control}: ")))));
        } else {
            assert!(lines.is_empty(), "{control} measured and named: {stdout}");
            for state in ["on", "off"] {
                for call in ["getppid", "tcp-send", "tcp-recv"] {
                    assert!(
                        rows.iter().any(|r| r["case"]["state"] == state
                            && r["case"]["call"] == call
                            && r["metric"] == "latency"
                            && r["unit"] == "ns"),
                        "{control} {state} {call}: {rows:?}"
                    );
                }
            }
            assert!(
                stdout.contains(&format!("forcing {control} on")),
                "{stdout}"
            );
        }
    }
    // Stored like every lab's run.
    let hist = costlab_ok(&db, &["history", "--json", "-"]);
    let runs: Value = serde_json::from_slice(&hist.stdout).unwrap();
    assert!(
        runs[0]["command"]
            .as_str()
            .is_some_and(|c| c.contains(" mitigations --no-echo")),
        "{runs}"
    );
}

#[test]
fn bad_input_and_a_child_outside_its_state_exit_2_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    for args in [
        &["mitigations", "--case", "mds"][..],
        &["mitigations", "--batches", "0"],
        &["mitigations", "--rounds", "0"],
        &["mitigations", "--conns", "x"],
    ] {
        let out = costlab_db(&db, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    // A child started without the state it names refuses to measure (its parent sets it
    // between fork and exec): nothing here forces speculation off for this test's process.
    let out = costlab_db(
        &db,
        &[
            "mitigations",
            "child",
            "--control",
            "store-bypass",
            "--state",
            "on",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(0) {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("start it through `costlab mitigations`"),
            "{err}"
        );
    }
}

/// A stored run as `costlab import` takes it: the syscall lab's s, w and t(n) and the echo
/// model's crossover, on a machine with or without `mitigations=off`.
fn run_doc(id: &str, off: bool) -> Value {
    let k = if off { 1.0 } else { 3.0 };
    let row = |call: &str, batch: u32, x: f64| {
        let samples: Vec<f64> = (0..7).map(|i| x + f64::from(i)).collect();
        serde_json::json!({"lab": "syscall", "case": {"call": call, "batch": batch},
            "metric": "latency", "unit": "ns",
            "summary": {"median": x + 3.0, "min": x, "max": x + 6.0, "mad": 2.0, "n": 7},
            "samples": samples})
    };
    let (v2, params) = if off {
        (
            "Vulnerable; STIBP: disabled",
            serde_json::json!(["mitigations=off"]),
        )
    } else {
        (
            "Mitigation: Retpolines; STIBP: disabled",
            serde_json::json!([]),
        )
    };
    serde_json::json!({
        "schema": "costlab/1",
        "run": {"id": id, "started": "2026-11-26T08:00:00Z", "costlab": "0.1.0",
                "command": "costlab run --quick --labs syscall,echo", "complete": true},
        "machine": {"cpu_model": "QEMU", "mitigations": {
            "entries": {"meltdown": "Not affected", "spectre_v2": v2},
            "cmdline": if off { serde_json::json!("off") } else { Value::Null },
            "params": params}},
        "results": [
            row("getppid", 1, 230.0 * k),
            row("tcp-send", 1, 230.0 * k + 900.0 * k),
            row("tcp-recv", 1, 230.0 * k + 300.0),
            row("uring-nop", 1, 400.0 * k),
            row("uring-nop", 16, 40.0 * k),
        ],
        "models": [{"lab": "echo", "name": "per-request server CPU",
            "params": {"s_ns": 230.0 * k, "crossover_article": if off { 5 } else { 2 }, "crossover_refined": if off { Value::Null } else { serde_json::json!(3) }},
            "points": [], "verdict": []}],
        "notes": []
    })
}

/// `costlab compare`'s table and the mitigation lines of runs A and B, and its JSON.
fn compare(db: &Path, a: &str, b: &str) -> (String, Value) {
    let out = costlab_ok(db, &["compare", a, b]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let out = costlab_ok(db, &["compare", a, b, "--json", "-"]);
    let json = serde_json::from_slice(&out.stdout).expect("compare --json parses");
    (text, json)
}

#[test]
fn compare_names_the_mitigation_difference_and_what_it_moved() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    for (id, off) in [("boot-default", false), ("boot-off", true)] {
        let f = dir.path().join(format!("{id}.json"));
        std::fs::write(&f, run_doc(id, off).to_string()).unwrap();
        costlab_ok(&db, &["import", f.to_str().unwrap()]);
    }
    let (text, json) = compare(&db, "boot-default", "boot-off");
    let differ = text
        .lines()
        .find(|l| l.starts_with("mitigations differ: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        differ.contains("kernel command line A: none (the kernel's default), B: mitigations=off"),
        "{differ}"
    );
    assert!(differ.contains("spectre_v2: A \"Mitigation: Retpolines; STIBP: disabled\", B \"Vulnerable; STIBP: disabled\""), "{differ}");
    let moved = text
        .lines()
        .find(|l| l.starts_with("what they moved (A -> B): "))
        .unwrap_or_else(|| panic!("{text}"));
    for want in [
        "s 693.0 -> 233.0 ns",
        "w send 2700.0 -> 900.0 ns",
        "t(1) ",
        "t(16) ",
        "crossover (article's form) 2 -> 5; crossover (refined) 3 -> none",
    ] {
        assert!(moved.contains(want), "{want}: {moved}");
    }
    let m = &json["mitigations"];
    assert_eq!(m["differ"], true, "{json}");
    assert_eq!(m["params"]["b"][0], "mitigations=off");
    let terms: Vec<&str> = m["moved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["term"].as_str().unwrap())
        .collect();
    assert_eq!(
        terms,
        [
            "s",
            "w send",
            "w recv",
            "t(1)",
            "t(16)",
            "crossover (article's form)",
            "crossover (refined)"
        ]
    );
    // The same mitigations: nothing named.
    let f = dir.path().join("again.json");
    std::fs::write(&f, run_doc("boot-default-2", false).to_string()).unwrap();
    costlab_ok(&db, &["import", f.to_str().unwrap()]);
    let (text, json) = compare(&db, "boot-default", "boot-default-2");
    assert!(!text.contains("mitigations differ"), "{text}");
    assert_eq!(json["mitigations"], serde_json::json!({"differ": false}));
}

/// The guest's script for one boot: a quick syscall run and a short echo run into
/// `dir/NAME-syscall.json` and `dir/NAME-echo.json` (`costlab run --quick --labs syscall,echo`
/// would hold both in one run, but takes a minute under the emulator; these take 20 s). The
/// echo window is 2 s: under the emulator on a busy host, io_uring's server answered nothing
/// in three windows of 300 ms once, and the test failed once more in CI with 1 s windows (the
/// message was cut; the rest of that run's failures were a loaded host's).
fn boot_script(dir: &Path, name: &str) -> String {
    let file = |what: &str| dir.join(format!("{name}-{what}")).display().to_string();
    format!(
        "export COSTLAB_DB=/tmp/costlab-mitigations.db; cat /proc/cmdline; \
         {BIN} syscall --quick --samples 3 --batches 1,16 --retry-budget 0 --json {} >/dev/null 2>{}; \
         echo \"==syscall $?\"; \
         {BIN} echo --quick --case epoll,uring --conns 1 --duration 2s --samples 1 --retry-budget 0 \
         --json {} >/dev/null 2>>{}; echo \"==echo $?\"",
        file("syscall.json"),
        file("err"),
        file("echo.json"),
        file("err"),
    )
}

#[test]
fn an_emulated_machine_booted_with_and_without_mitigations_off_is_compared() {
    if let Some(why) = vng::cannot_boot() {
        crate::common::skip::skipped_unless_ci("mitigations_two_boots", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().to_str().unwrap().to_string();
    let started = std::time::Instant::now();
    // Both boots at once: the two guests share nothing but the directory they write to, and
    // their costs are never read.
    let boots: Vec<(String, std::thread::JoinHandle<Guest>)> =
        [("default", None), ("off", Some("mitigations=off"))]
            .into_iter()
            .map(|(name, append)| {
                let mut options: Vec<String> =
                    ["--cpus", "2", "--memory", "1G", "--rwdir", &shared]
                        .into_iter()
                        .map(String::from)
                        .collect();
                if let Some(a) = append {
                    options.extend(["--append".to_string(), a.to_string()]);
                }
                let script = boot_script(dir.path(), name);
                let handle = std::thread::spawn(move || {
                    let args: Vec<&str> = options.iter().map(String::as_str).collect();
                    vng::boot(&args, &script)
                });
                (name.to_string(), handle)
            })
            .collect();
    let mut ran = Vec::new();
    for (name, h) in boots {
        let g = h.join().unwrap();
        ran.push((name, g.stdout.clone(), g));
    }
    eprintln!(
        "mitigations: both guests ran in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    for (name, stdout, out) in &ran {
        if !stdout.contains("==syscall") {
            crate::common::skip::skipped_unless_ci(
                "mitigations_two_boots",
                &format!(
                    "the {name} guest did not boot or run costlab (stamps: {}; {})",
                    out.stamps(),
                    out.tail()
                ),
            );
            return;
        }
        let err =
            std::fs::read_to_string(dir.path().join(format!("{name}-err"))).unwrap_or_default();
        for part in ["syscall", "echo"] {
            assert!(
                stdout.contains(&format!("=={part} 0")),
                "{name}: costlab {part} failed:\n{stdout}\n{err}"
            );
        }
    }
    // The off boot's kernel got the switch; the default one did not.
    assert!(ran[1].1.contains("mitigations=off") && !ran[0].1.contains("mitigations=off"));

    let db = dir.path().join("h.db");
    let import = |name: &str, part: &str| -> String {
        let f = dir.path().join(format!("{name}-{part}.json"));
        let doc: Value = crate::common::schema::doc_file(&f);
        costlab_ok(&db, &["import", f.to_str().unwrap()]);
        doc["run"]["id"].as_str().unwrap().to_string()
    };
    for (part, terms) in [
        (
            "syscall",
            &["s ", "w send ", "w recv ", "t(1) ", "t(16) "][..],
        ),
        (
            "echo",
            &["s ", "crossover (article's form) ", "crossover (refined) "][..],
        ),
    ] {
        let (a, b) = (import("default", part), import("off", part));
        let (text, json) = compare(&db, &a, &b);
        eprintln!("{text}");
        let differ = text
            .lines()
            .find(|l| l.starts_with("mitigations differ: "))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            differ
                .contains("kernel command line A: none (the kernel's default), B: mitigations=off"),
            "{differ}"
        );
        // The emulated CPU is open to Spectre v1 and v2: mitigated by default, not when off.
        assert!(differ.contains("spectre_v2: A \"Mitigation"), "{differ}");
        assert!(differ.contains("B \"Vulnerable"), "{differ}");
        let moved = text
            .lines()
            .find(|l| l.starts_with("what they moved (A -> B): "))
            .unwrap_or_else(|| panic!("{text}"));
        for term in terms {
            assert!(moved.contains(term), "{part}: {term}: {moved}");
        }
        let m = &json["mitigations"];
        assert_eq!(m["differ"], true);
        assert!(m["states"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "spectre_v2"));
    }
}
