//! `costlab price --verify`: bad input, a small trial end to end (its rows, its verdicts, the
//! THP mode put back, `compare` of two trials), a costlab killed with SIGKILL while the THP
//! mode was changed, put back by the next costlab command, and a Ctrl-C that puts it back and
//! leaves nothing in the temporary directory. Counting needs root and bpftrace; changing the
//! THP mode needs root and THP: those tests say why they skip. None asserts a time.

use crate::common::price_refused;
use crate::common::{self, skip};

use std::process::Command;
use std::time::{Duration, Instant};

use costlab_price::count;

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Runs that may change the THP mode hold price's own lock: its tests count faults, which the
/// THP mode changes, and compare them with perf's counts of another run.

#[test]
fn verify_bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = common::costlab_db(&db, &["price", "--verify", "--rate", "([0-9", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(
        err.contains("--rate ([0-9: not a regular expression"),
        "{err}"
    );
    let out = common::costlab_db(&db, &["price", "--rate", "x", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("--verify"), "{err}");
    let out = common::costlab_db(&db, &["price", "--verify", "--work", "(x", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("--work (x: not a regular expression"), "{err}");
    let out = common::costlab_db(&db, &["price", "--work", "x", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("--work is for a trial: add --verify"), "{err}");
    let out = common::costlab_db(&db, &["price", "--reserve-hugepages", "--", "true"]);
    price_refused(&out, &[]);
    let out = common::costlab_db(&db, &["price", "--verify", "--pid", "1"]);
    let err = price_refused(&out, &[]);
    assert!(err.starts_with("costlab: --verify with --pid"), "{err}");
    let out = common::costlab_db(&db, &["price", "--verify", "--", "no-such-command-costlab"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("no such command"), "{err}");
    let h = common::costlab_db(&db, &["history"]);
    assert!(!String::from_utf8_lossy(&h.stdout).contains("price"));
}

/// A program that fails every run (`sh -c 'exit 3'`) fails in both arms of the first trial:
/// `--verify` stops there, with one line saying so, instead of running every round; the
/// command exits with the program's status, after its line, and the run is stored.
#[test]
fn verify_stops_a_trial_whose_program_fails_in_both_arms() {
    let name = "verify_stops_a_trial_whose_program_fails_in_both_arms";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let out = common::costlab_db(
        &db,
        &[
            "price",
            "--verify",
            "--runs",
            "4",
            "--quick",
            "--samples",
            "3",
            "--json",
            "-",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the program's status: {err}");
    let stop: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("costlab: --verify stopped: "))
        .collect();
    assert_eq!(stop.len(), 1, "one line says the trial stopped: {err}");
    assert!(
        stop[0].contains("failed as it is (exit status 3) and with the remedy '")
            && stop[0].contains("(exit status 3)"),
        "{err}"
    );
    assert!(
        !err.contains("round 2/4"),
        "no round after the first: {err}"
    );
    assert_eq!(
        err.trim_end().lines().last(),
        Some("costlab: the program exited with status 3"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let judged = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price" && r["case"].get("verdict").is_some())
        .count();
    assert_eq!(judged, 0, "no trial is judged on a failing program");
    let tried = doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("what-ifs tried"))
        })
        .expect("the trials' model")
        .to_string();
    assert!(tried.contains("over 0 pairs"), "{tried}");
    assert!(tried.contains("not tried: --verify stopped: "), "{tried}");
    let h = common::costlab_db(&db, &["history"]);
    assert!(
        String::from_utf8_lossy(&h.stdout).contains("exit 3"),
        "stored"
    );
}

fn thp_mode() -> Option<String> {
    std::fs::read_to_string(THP)
        .ok()
        .map(|t| costlab_core::machine::restore::chosen(&t))
}

/// Why a trial of the THP mode cannot run here, or None.
fn thp_unavailable() -> Option<String> {
    if let Some(why) = count::unavailable() {
        return Some(why);
    }
    match thp_mode().as_deref() {
        None => Some("no transparent huge pages in this kernel".into()),
        Some("always") => Some("THP is already always: there is no change to try".into()),
        _ => None,
    }
}

fn verified(db: &std::path::Path) -> serde_json::Value {
    let out = common::costlab_db(
        db,
        &[
            "price",
            "--verify",
            "--runs",
            "2",
            "--quick",
            "--samples",
            "3",
            "--rate",
            r"([0-9.]+) [kMG]?B/s",
            "--work",
            r"([0-9]+) bytes",
            "--json",
            "-",
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=4M",
            "count=2",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("costlab: verify: round 2/2"), "{err}");
    crate::common::schema::doc(&out.stdout)
}

#[test]
fn a_small_verify_tries_each_remedy_and_puts_the_thp_mode_back() {
    let name = "a_small_verify_tries_each_remedy_and_puts_the_thp_mode_back";
    if let Some(why) = thp_unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let before = thp_mode();
    let doc = verified(&db);
    assert_eq!(thp_mode(), before, "the THP mode is put back");
    let rows: Vec<&serde_json::Value> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price" && r["case"].get("verdict").is_some())
        .collect();
    let verdicts = ["confirmed", "refuted", "level", "size-off", "not-tried"];
    for r in &rows {
        assert!(
            verdicts.contains(&r["case"]["verdict"].as_str().unwrap()),
            "{r}"
        );
        assert!(
            r["case"]["what"].is_string() && r["case"]["command"].is_string(),
            "{r}"
        );
    }
    let measured = |what: &str| {
        rows.iter()
            .find(|r| r["case"]["what"] == what && r["metric"] == "measured_saved")
            .unwrap_or_else(|| panic!("no measured_saved for {what}: {rows:?}"))
    };
    // dd's 4 MiB buffer: about a thousand faults, so THP is tried; and pinning always is.
    for what in ["thp", "pin"] {
        let m = measured(what);
        assert_eq!(m["unit"], "ns");
        assert_eq!(
            m["samples"].as_array().unwrap().len(),
            2,
            "one per pair: {m}"
        );
    }
    assert_eq!(measured("thp")["case"]["of"], "kernel");
    // THP's model predicts a size: its `saved` row holds the prediction's bounds.
    let saved = rows
        .iter()
        .find(|r| r["case"]["what"] == "thp" && r["metric"] == "saved")
        .expect("a predicted saving for thp");
    assert_eq!(saved["samples"].as_array().unwrap().len(), 3);
    // dd prints its rate: a change per pair.
    assert!(
        rows.iter().any(|r| r["metric"] == "rate_change"),
        "{rows:?}"
    );
    // dd prints the bytes it copied, the same in every run: the work changed by nothing, so
    // each saving at equal work is the saving as measured.
    let work: Vec<&&serde_json::Value> = rows
        .iter()
        .filter(|r| r["metric"] == "work_change")
        .collect();
    assert!(!work.is_empty(), "{rows:?}");
    for r in work {
        assert!(
            r["samples"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x.as_f64() == Some(0.0)),
            "{r}"
        );
    }
    // The trial's model: predicted beside measured, and its lines.
    let model = doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str().unwrap().starts_with("what-ifs tried"))
        .expect("the trial's model");
    assert!(
        model["points"].as_array().is_some_and(|p| !p.is_empty()),
        "{model}"
    );
    let lines: Vec<&str> = model["verdict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("thp (THP always): predicted saving")),
        "{lines:?}"
    );
    // One node here or two: NUMA is tried or said not to be.
    assert!(
        lines.iter().any(|l| l.starts_with("numa-policy")),
        "{lines:?}"
    );

    // A second trial, and compare shows each what-if's verdict in both.
    let again = verified(&db);
    let (a, b) = (
        doc["run"]["id"].as_str().unwrap(),
        again["run"]["id"].as_str().unwrap(),
    );
    let out = common::costlab_db(&db, &["compare", a, b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("what-if thp (THP always): A "))
        .unwrap_or_else(|| panic!("no thp verdict line in {text}"));
    assert!(line.contains(", B "), "{line}");

    // The report's what-ifs: the trial's predicted saving beside the measured one, its
    // interval and verdict, in the page's lead.
    let report = dir.path().join("report");
    let out = common::costlab_db(&db, &["report", a, "--out-dir", report.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        html.contains("id=\"what-ifs\""),
        "no what-ifs in the report"
    );
    assert!(
        html.contains("<td>thp</td><td>THP always</td><td>kernel</td>"),
        "no thp trial in the report"
    );
    assert!(html.contains("what-ifs tried over 2 pairs"), "no tally");
}

#[test]
fn strict_exits_3_when_a_trial_refutes_a_what_if() {
    let name = "strict_exits_3_when_a_trial_refutes_a_what_if";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return skip::skipped(name, "one CPU: there is no pinning to try");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("slowpinned");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/price/slowpinned.c"
    );
    let cc = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .output();
    match cc {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => return skip::skipped_unless_ci(name, &format!("no C compiler (cc): {e}")),
    }
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let before = thp_mode();
    let out = common::costlab_db(
        &db,
        &[
            "price",
            "--verify",
            "--strict",
            // Four pairs, not two: with two the interval is the mean ± 12.7 standard errors
            // (Student's t at one degree of freedom), and under a loaded CI machine a 40-fold
            // slowdown once stayed inside it (level); with four it is ± 3.2.
            "--runs",
            "4",
            "--quick",
            "--samples",
            "3",
            "--",
            exe.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(thp_mode(), before, "the THP mode is put back");
    // Pinned, the program does forty times the work: the pinning what-if is refuted, and
    // --strict turns that into exit 3 with a line naming it.
    assert!(
        err.contains("pin (pinned to CPU") && err.contains("refuted"),
        "{err}"
    );
    assert!(
        err.lines().any(
            |l| l.starts_with("costlab: strict: what-if pin (pinned to CPU")
                && l.contains(") refuted: the trial measured")
        ),
        "{err}"
    );
    // --strict beside a program's status: 124, never the program's 3.
    let strict = costlab_core::error::beside_program::STRICT;
    assert_eq!(out.status.code(), Some(strict.into()), "{err}");
    // The trials were judged on the measured split, the tracer's own cost taken out.
    assert!(
        err.contains("the split's own cost, taken out of every traced run's kernel time"),
        "{err}"
    );
    assert!(
        err.contains("the kernel's saving by measured class: syscall"),
        "{err}"
    );
    // Without --strict the same refutation is reported, not an error.
    let out = common::costlab_db(
        &db,
        &[
            "price",
            "--verify",
            "--runs",
            "1",
            "--quick",
            "--samples",
            "3",
            "--",
            exe.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_costlab_killed_while_thp_was_changed_leaves_it_for_the_next_command_to_put_back() {
    let name = "a_costlab_killed_while_thp_was_changed_leaves_it_for_the_next_command_to_put_back";
    if let Some(why) = thp_unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let before = thp_mode().unwrap();
    // Its own journal: no other costlab in this suite recovers (and reports) it first.
    let journal = dir.path().join("journal");
    // The program is slow on purpose: each run sleeps, so a run with THP changed lasts
    // long enough to be killed in (the mode is looked at every 20 ms; a run it misses, the
    // next round's is seen).
    let mut child = crate::common::command()
        .args([
            "price",
            "--verify",
            "--runs",
            "20",
            "--quick",
            "--samples",
            "3",
            "--",
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null; sleep 0.3",
        ])
        .env("COSTLAB_DB", &db)
        .env("COSTLAB_JOURNAL_DIR", &journal)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while thp_mode().as_deref() != Some("always") && t0.elapsed() < Duration::from_secs(180) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let changed = thp_mode().as_deref() == Some("always");
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no guard runs
    child.wait().unwrap();
    assert!(
        changed,
        "costlab price --verify never set the THP mode to always"
    );
    assert_eq!(
        thp_mode().as_deref(),
        Some("always"),
        "a SIGKILL runs no guard: the mode stays until the next command"
    );
    let out = crate::common::command()
        .arg("history")
        .env("COSTLAB_DB", &db)
        .env("COSTLAB_JOURNAL_DIR", &journal)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        thp_mode().as_deref(),
        Some(before.as_str()),
        "put back: {err}"
    );
    assert!(
        err.contains(&format!(
            "THP mode (price --verify): restored to {before} (left at always by costlab pid {pid}"
        )),
        "{err}"
    );
    // Its program was left running in the killed run's cgroup: end it.
    common::end_killed_price_program(pid);
}

#[test]
fn ctrl_c_while_thp_was_changed_puts_it_back_and_stores_the_rounds_that_ran() {
    let name = "ctrl_c_while_thp_was_changed_puts_it_back_and_stores_the_rounds_that_ran";
    if let Some(why) = thp_unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let before = thp_mode().unwrap();
    // Its own temporary directory: what a cut-short run leaves there is seen.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let child = crate::common::command()
        .args([
            "price",
            "--verify",
            "--runs",
            "20",
            "--quick",
            "--samples",
            "3",
            "--",
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null; sleep 0.4",
        ])
        .env("COSTLAB_DB", &db)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while thp_mode().as_deref() != Some("always") && t0.elapsed() < Duration::from_secs(180) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let changed = thp_mode().as_deref() == Some("always");
    // SAFETY: a plain kill(2) of the test's own child, by its pid: costlab alone gets the
    // SIGINT (its program, in its own cgroup, runs on to its end).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        changed,
        "costlab price --verify never set the THP mode to always: {err}"
    );
    assert_eq!(
        thp_mode().as_deref(),
        Some(before.as_str()),
        "put back: {err}"
    );
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("(incomplete: interrupted)"), "{err}");
    assert!(err.contains("note: --verify was cut short: "), "{err}");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    let h = common::costlab_db(&db, &["history"]);
    assert!(
        String::from_utf8_lossy(&h.stdout).contains("sleep 0.4"),
        "stored"
    );
}
