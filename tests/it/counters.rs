//! `costlab counters --pid`: a running process's software counters as count and rate rows
//! (pid, event), hardware ones read or unsupported with why, and exit 2 with one line for a
//! process that is gone or one this user may not trace. No timing is asserted.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{costlab, skip};

#[test]
fn a_running_process_gives_count_and_rate_rows_per_event() {
    let mut child = Command::new("sleep")
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .expect("sleep starts");
    let pid = child.id().to_string();
    let out = costlab(&[
        "counters",
        "--pid",
        &pid,
        "--duration",
        "300ms",
        "--samples",
        "3",
        "--json",
        "-",
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = crate::common::schema::doc(&out.stdout);
    let rows = doc["results"].as_array().unwrap();
    for event in [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "minor-faults",
        "major-faults",
    ] {
        let of: Vec<&Value> = rows
            .iter()
            .filter(|r| r["case"]["event"] == event)
            .collect();
        let metrics: Vec<&str> = of.iter().map(|r| r["metric"].as_str().unwrap()).collect();
        assert_eq!(metrics, ["count", "rate"], "{event}");
        for r in &of {
            assert_eq!(r["lab"], "counters");
            assert_eq!(r["case"]["pid"].to_string(), pid);
            assert_eq!(r["summary"]["n"], 3);
        }
        let unit = of[1]["unit"].as_str().unwrap();
        assert!(unit.ends_with("per second"), "{event}: {unit}");
    }
    // Hardware events: counted, or each said unsupported with a reason.
    for event in ["cycles", "instructions", "branch-misses", "cache-misses"] {
        let counted = rows.iter().any(|r| r["case"]["event"] == event);
        let why = rows[0]["unsupported_counters"][event].as_str();
        assert!(counted || why.is_some_and(|w| !w.is_empty()), "{event}");
    }
}

#[test]
fn a_process_that_is_gone_exits_2_naming_the_fix() {
    let mut child = Command::new("true").spawn().expect("true starts");
    let pid = child.id().to_string();
    child.wait().unwrap();
    let out = costlab(&["counters", "--pid", &pid, "--duration", "100ms"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is gone") && err.contains("pgrep"), "{err}");
    let out = costlab(&["counters", "--pid", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// As an unprivileged user, root's init may not be traced: one line, exit 2.
#[test]
fn a_process_one_may_not_trace_exits_2_naming_the_fix() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !is_root || setpriv.is_err() {
        skip::skipped(
            "a_process_one_may_not_trace_exits_2_naming_the_fix",
            "needs root and setpriv to run costlab as nobody",
        );
        return;
    }
    let db = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(
        db.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(crate::common::BIN)
        .arg("--db")
        .arg(db.path().join("h.db"))
        .args(["counters", "--pid", "1", "--duration", "100ms"])
        .env("HOME", db.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && !err.contains("may not trace") {
        skip::skipped(
            "a_process_one_may_not_trace_exits_2_naming_the_fix",
            "nobody cannot run the binary from this checkout",
        );
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("may not trace process 1"), "{err}");
}
