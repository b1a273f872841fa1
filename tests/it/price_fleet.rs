//! `costlab price` across machines: counts saved and priced again, here and on another
//! machine (no root), in SQLite and PostgreSQL; terms the history holds only noisy; two prices
//! of one command compared; the report's chart and the exports; `--strict`; bad fleet input.

use crate::common::price_refused;
use crate::price::{events_or_skip, FIXTURES};

use std::collections::BTreeMap;
use std::path::Path;

/// The fixture run of machine A's (made-up) unit costs, and machine B's id.
const RUN_A: &str = "20261120T100000Z-f1a701";
const MACHINE_B: &str = "f1b7000000000b02";

fn fixture(name: &str) -> String {
    Path::new(FIXTURES).join(name).display().to_string()
}

/// A history (a SQLite file or a postgres:// URL) holding machines A's and B's unit costs.
fn fleet_history(db: &str) {
    let out = crate::common::costlab_db(
        db,
        &[
            "import",
            &fixture("terms-machine-a.json"),
            &fixture("terms-machine-b.json"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `costlab --db DB ARGS --json -`: exit 0, its document.
fn priced_doc(db: &str, args: &[&str]) -> (serde_json::Value, String) {
    // Before any `--`: what follows it is the priced command's.
    let mut all = vec![args[0], "--json", "-"];
    all.extend(&args[1..]);
    let out = crate::common::command_db(db)
        .env("COSTLAB_RETRY_BUDGET", "0")
        .args(&all)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    (crate::common::schema::doc(&out.stdout), err)
}

/// The price rows of a document: (class, event, metric, on) -> median.
fn price_rows(doc: &serde_json::Value) -> BTreeMap<(String, String, String, String), f64> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price")
        .map(|r| {
            let key = |k: &str| r["case"][k].as_str().unwrap_or("").to_string();
            (
                (
                    key("class"),
                    key("event"),
                    r["metric"].as_str().unwrap().into(),
                    key("on"),
                ),
                r["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn median(
    rows: &BTreeMap<(String, String, String, String), f64>,
    c: &str,
    e: &str,
    m: &str,
    on: &str,
) -> f64 {
    *rows
        .get(&(c.into(), e.into(), m.into(), on.into()))
        .unwrap_or_else(|| panic!("no row {c} {e} {m} on={on}: {rows:?}"))
}

/// The --from/--on run every store is checked with: the fixture counts priced at A's terms
/// and B's; its rows and what it printed.
fn check_from_and_on(db: &str) -> serde_json::Value {
    fleet_history(db);
    let (doc, err) = priced_doc(
        db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
            "--on",
            "f1b7",
        ],
    );
    let rows = price_rows(&doc);
    // Counts as saved; each priced at A's unit here and at B's on B.
    assert_eq!(median(&rows, "syscall", "getppid", "count", ""), 1000.0);
    assert_eq!(median(&rows, "syscall", "getppid", "unit_cost", ""), 166.0);
    assert_eq!(
        median(&rows, "syscall", "getppid", "unit_cost", MACHINE_B),
        274.0
    );
    assert_eq!(
        median(&rows, "syscall", "getppid", "priced", MACHINE_B),
        274_000.0
    );
    assert_eq!(median(&rows, "fault", "minor", "priced", ""), 1_024_000.0);
    // A send at the syscall lab's loopback TCP send, on either machine.
    assert_eq!(median(&rows, "syscall", "sendto", "unit_cost", ""), 1500.0);
    assert_eq!(
        median(&rows, "syscall", "sendto", "unit_cost", MACHINE_B),
        1950.0
    );
    assert_eq!(
        median(&rows, "fault", "minor", "priced", MACHINE_B),
        1_331_200.0
    );
    // The times are the saved untraced run's.
    assert_eq!(median(&rows, "program", "total", "sys_time", ""), 2.5e6);
    let here = median(&rows, "program", "total", "priced_kernel", "");
    let there = median(&rows, "program", "total", "priced_kernel", MACHINE_B);
    assert!(there > here, "{there} vs {here}");
    // Both columns side by side, and the line naming the terms that differ.
    assert!(err.contains("unit ns on f1b70000"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("on f1b7000000000b02 this program's kernel time is "))
        .unwrap_or_else(|| panic!("no --on line: {err}"));
    assert!(line.contains(&format!("{:.2}x", there / here)), "{line}");
    assert!(line.contains("s is 274 vs 166 ns"), "{line}");
    assert!(line.contains("fault-4k is 1300 vs 1000 ns"), "{line}");
    assert!(err.contains("nothing run here"), "{err}");
    // Stored whole: the run in the history is the document, row for row.
    let out = crate::common::costlab_db(db, &["export", "last"]);
    let stored: serde_json::Value = crate::common::schema::doc(&out.stdout);
    assert_eq!(stored["run"]["id"], doc["run"]["id"]);
    assert_eq!(price_rows(&stored), rows);
    assert_eq!(
        stored["results"].as_array().unwrap().len(),
        doc["results"].as_array().unwrap().len()
    );
    assert_eq!(stored["models"], doc["models"]);
    doc
}

#[test]
fn counts_from_a_file_are_priced_here_and_on_a_second_stored_machine_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    check_from_and_on(&db);
}

#[test]
fn counts_from_a_file_are_priced_here_and_on_a_second_stored_machine_in_postgres() {
    let url = crate::common::pg::cluster().fresh();
    check_from_and_on(&url);
}

/// A term the history holds only as a figure that is not ok is priced with that figure and
/// flagged, not measured again at the price's own cost.
#[test]
fn a_term_the_history_holds_only_noisy_is_used_and_flagged_not_measured_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("terms-machine-a.json")).unwrap())
            .unwrap();
    for r in doc["results"].as_array_mut().unwrap() {
        if r["lab"] == "cost" && r["case"]["term"] == "fault-4k" {
            r["quality"] = "noisy".into();
        }
    }
    let noisy = dir.path().join("terms-noisy.json");
    std::fs::write(&noisy, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = crate::common::costlab_db(&db, &["import", noisy.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, err) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    assert!(
        err.contains("the history has no ok figure for fault-4k (run 20261120T100000Z-f1a701"),
        "{err}"
    );
    assert!(!err.contains("measured first"), "{err}");
}

/// `--once` with `--from`: the saved traced run's times, as saved (the counting's cost on the
/// machine that counted is not known here, so nothing is taken out), and nothing measured.
#[test]
fn once_from_a_file_uses_the_saved_traced_times_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let (doc, err) = priced_doc(
        &db,
        &[
            "price",
            "--once",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    let rows = price_rows(&doc);
    assert_eq!(median(&rows, "program", "total", "sys_time", ""), 3.0e6);
    assert_eq!(median(&rows, "program", "total", "user_time", ""), 1.5e6);
    assert!(err.contains("times from the traced run as saved"), "{err}");
    assert!(!rows.keys().any(|k| k.0 == "tracing"), "{rows:?}");
}

#[test]
fn two_prices_of_one_command_compare_class_by_class() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let (a, _) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    // The same command counted again with 3x the getppid calls and fewer faults.
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("counts.json")).unwrap()).unwrap();
    for e in saved["events"].as_array_mut().unwrap() {
        match (e["class"].as_str().unwrap(), e["event"].as_str().unwrap()) {
            ("syscall", "getppid") => e["count"] = 3000.into(),
            ("fault", "minor") => e["count"] = 200.into(),
            _ => {}
        }
    }
    let second = dir.path().join("counts-2.json");
    std::fs::write(&second, saved.to_string()).unwrap();
    let (b, _) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            second.to_str().unwrap(),
            "--terms-run",
            RUN_A,
        ],
    );
    let (ia, ib) = (
        a["run"]["id"].as_str().unwrap(),
        b["run"]["id"].as_str().unwrap(),
    );
    let out = crate::common::costlab_db(&db, &["compare", ia, ib]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no '{needle}' in {text}"))
            .to_string()
    };
    assert!(
        line("class=syscall command=fixture-program --made-up event=getppid priced")
            .contains("+200.0%")
    );
    assert!(
        line("class=fault command=fixture-program --made-up event=minor count").contains("-80.5%")
    );
    assert!(
        line("class=spawn command=fixture-program --made-up event=process priced")
            .contains("+0.0%")
    );
    assert!(
        line("class=program command=fixture-program --made-up event=total priced_kernel")
            .contains('%')
    );
}

#[test]
fn a_price_has_its_chart_in_the_report_and_its_rows_in_csv_and_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    let out_dir = dir.path().join("report");
    let out =
        crate::common::costlab_db(&db, &["report", "last", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(
        html.contains("<svg id=\"chart-price-cpu\""),
        "no price chart"
    );
    for piece in [
        "user time",
        "kernel: fault",
        "kernel: syscall",
        "kernel work no term prices",
    ] {
        assert!(html.contains(piece), "{piece} not drawn");
    }
    assert!(
        html.contains("One bar of the program&#39;s CPU time"),
        "caption"
    );
    // Price never runs in `costlab run`: a report without it names no price lab.
    assert!(!html.contains("Not run: price"));
    // Its check leads the page (no split ran: the one total is the system time), no empty card.
    assert!(!html.contains("the model has no points"));
    assert!(html.contains("id=\"one-total\">No split ran") && html.contains("system time"));

    let out = crate::common::costlab_db(&db, &["export", "last", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    let head = csv.lines().next().unwrap();
    for col in ["class", "event", "command"] {
        assert!(head.split(',').any(|c| c == col), "{head}");
    }
    assert!(
        csv.lines().any(
            |l| l.contains(",price,syscall,getppid,fixture-program --made-up,")
                && l.contains(",priced,ns,166000,")
        ),
        "{csv}"
    );
    let out = crate::common::costlab_db(&db, &["export", "last", "--format", "markdown"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("## price"), "{md}");
    assert!(
        md.contains(
            "| class=syscall event=getppid command=fixture-program --made-up | priced | 166000 |"
        ),
        "{md}"
    );
}

/// `--strict` as in every lab: exit 3 and a line per figure that is not ok. A price takes
/// only ok stored figures as units, so from the clean fixture terms nothing is marked and
/// --strict passes (a unit measured now, on a busy machine, is what could fail it: not a
/// thing a test can pin down).
#[test]
fn strict_passes_a_price_read_from_ok_terms_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let out = crate::common::costlab_db(
        &db,
        &[
            "price",
            "--strict",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
            "--on",
            MACHINE_B,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("costlab: strict:"), "{err}");
    assert!(err.contains("quality: all "), "{err}");
}

#[test]
fn bad_fleet_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let check = |args: &[&str], needles: &[&str]| {
        let out = crate::common::costlab_db(&db, args);
        let err = price_refused(&out, &[]);
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err}");
        }
    };
    let missing = dir.path().join("missing.json");
    check(
        &["price", "--from", missing.to_str().unwrap()],
        &["cannot read --from", "no such file", "--save-counts FILE"],
    );
    let garbled = dir.path().join("garbled.json");
    std::fs::write(&garbled, "{\"schema\": \"costlab-counts/1\", \"events\": 7").unwrap();
    check(
        &["price", "--from", garbled.to_str().unwrap()],
        &["is not a costlab counts file", "not JSON"],
    );
    std::fs::write(
        &garbled,
        std::fs::read_to_string(fixture("terms-machine-a.json")).unwrap(),
    )
    .unwrap();
    check(
        &["price", "--from", garbled.to_str().unwrap()],
        &["is not a costlab counts file", "schema 'costlab/1'"],
    );
    let counts = fixture("counts.json");
    check(
        &["price", "--from", &counts, "--on", "no-such-machine"],
        &[
            "--on no-such-machine: no such machine in the history",
            "machines with stored unit costs: f1a7000000000a01, f1b7000000000b02",
        ],
    );
    check(
        &["price", "--from", &counts, "--on", "f1"],
        &["matches 2 machines"],
    );
    // A machine whose runs price nothing (the all-labs fixture without its syscall rows).
    let mut other = crate::common::fixture();
    other.results.retain(|r| r.lab == "mem");
    other.run.id = "20261121T100000Z-f1c7c3".into();
    let mut machine = other.machine.clone();
    machine["id"] = "f1c7000000000c03".into();
    other.machine = machine;
    let file = dir.path().join("no-terms.json");
    std::fs::write(&file, serde_json::to_string(&other).unwrap()).unwrap();
    let out = crate::common::costlab_db(&db, &["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    check(
        &["price", "--from", &counts, "--on", "f1c7"],
        &[
            "machine f1c7000000000c03 has no stored unit costs",
            "f1a7000000000a01, f1b7000000000b02",
        ],
    );
    // --save-counts into a folder that does not exist: refused before anything runs.
    check(
        &[
            "price",
            "--save-counts",
            "/nonexistent/dir/c.json",
            "--",
            "true",
        ],
        &["--save-counts", "no folder /nonexistent/dir"],
    );
    // --from with a command or a --pid: one or the other.
    let out = crate::common::costlab_db(&db, &["price", "--from", &counts, "--", "true"]);
    let refused = costlab_core::error::beside_program::COSTLAB;
    assert_eq!(out.status.code(), Some(refused.into()));
    let out = crate::common::costlab_db(&db, &["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("costlab price"), "nothing stored: {text}");
}

#[test]
fn saved_counts_price_the_same_as_the_run_that_counted_them() {
    let name = "saved_counts_price_the_same_as_the_run_that_counted_them";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let saved = dir.path().join("counts.json");
    let _one = crate::common::serial();
    // At machine A's terms both times, so nothing is measured and the unit costs are equal.
    let (direct, _) = priced_doc(
        &db,
        &[
            "price",
            "--terms-run",
            RUN_A,
            "--save-counts",
            saved.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "getppid",
            "200",
        ],
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(file["schema"], "costlab-counts/1");
    assert_eq!(file["complete"], true);
    assert_eq!(file["untraced"].as_array().unwrap().len(), 1);
    assert!(file["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["class"] == "syscall" && e["event"] == "getppid" && e["count"] == 200));
    let (again, _) = priced_doc(
        &db,
        &[
            "price",
            "--terms-run",
            RUN_A,
            "--from",
            saved.to_str().unwrap(),
        ],
    );
    let (mut a, b) = (price_rows(&direct), price_rows(&again));
    // The tracer's calibration is stored with the run that measured it (where it did); the
    // counts carry its figures per event (tracer_per_event), not its rows.
    a.retain(|k, _| k.0 != "tracer");
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        let w = b[k];
        assert!(
            (v - w).abs() <= 1e-9 * v.abs().max(1.0),
            "{k:?}: {v} then {w}"
        );
    }
}
