//! The command line at its edges: clap's whole message on a parse error, output paths and
//! sample counts checked before anything is measured, degenerate input refused or explained.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn costlab_db(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_costlab"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("COSTLAB_DB")
        .stdin(Stdio::null())
        .output()
        .expect("costlab runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn parse_errors_keep_clap_s_whole_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["echo", "load", "--duration", "1s"],
            &["--target <HOST:PORT>", "Usage: costlab echo load"],
        ),
        (
            &["mem", "latency", "--size", "4K"],
            &["'--sizes'", "Usage: costlab mem latency"],
        ),
        (
            &["export", "last", "--format", "xml"],
            &["possible values: json, csv, markdown"],
        ),
    ];
    for (args, wants) in cases {
        let out = costlab_db(&db, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("costlab: "), "{err}");
        for w in *wants {
            assert!(err.contains(w), "{args:?}: want {w}: {err}");
        }
    }
    // A negative size is a bad size, not an unknown flag.
    let out = costlab_db(&db, &["mem", "bandwidth", "--block", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("bad size '-1'") && err.contains("above zero"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn unwritable_outputs_and_absurd_samples_exit_2_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let cases: &[(&[&str], &str)] = &[
        (
            &["syscall", "--json", "/proc/nope.json"],
            "--json /proc/nope.json",
        ),
        (&["run", "--out", "/proc/x"], "--out /proc/x"),
        (
            &["run", "--json", "/proc/nope.json"],
            "--json /proc/nope.json",
        ),
        (
            &["export", "last", "--out", "/proc/nope/x.csv"],
            "--out /proc/nope/x.csv",
        ),
        (&["report", "last", "--out", "/proc/x"], "--out /proc/x"),
        (&["syscall", "--samples", "0"], "--samples 0"),
        (
            &["mem", "latency", "--samples", "100000000"],
            "at most 1000",
        ),
        (&["syscall", "--cpus", "4095"], "CPU 4095"),
    ];
    for (args, want) in cases {
        let t0 = Instant::now();
        let out = costlab_db(&db, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: measured first");
        assert!(t0.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}

#[test]
fn a_lab_run_names_its_run_id_and_compare_refuses_a_run_against_itself() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = costlab_db(&db, &["numa-maps", "--self"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("costlab: run "))
        .unwrap_or_else(|| panic!("no run id: {err}"))
        .trim()
        .to_string();
    let out = costlab_db(&db, &["export", &id, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = costlab_db(&db, &["compare", "last", &id]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("same run"), "{err}");
    // numa-maps takes no samples: it refuses the options it would ignore.
    let out = costlab_db(&db, &["numa-maps", "--self", "--samples", "3"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A server that accepts and reads but never answers.
fn silent_server() -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        l.set_nonblocking(true).unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        let mut held = Vec::new();
        while Instant::now() < end {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
            for s in &mut held {
                let _ = s.set_nonblocking(true);
                let mut b = [0u8; 4096];
                let _ = s.read(&mut b);
            }
        }
    });
    (addr, h)
}

#[test]
fn a_server_that_never_answers_is_named_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let (addr, _h) = silent_server();
    let out = costlab_db(
        &db,
        &[
            "echo",
            "load",
            "--target",
            &addr,
            "--duration",
            "1s",
            "--client",
            "event",
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("answered no request"), "{err}");
    assert!(
        !text(&out.stdout).contains("throughput"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn echo_load_takes_the_samples_it_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut server = Command::new(env!("CARGO_BIN_EXE_costlab"))
        .args(["echo", "serve", "--engine", "epoll", "--duration", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let json = dir.path().join("load.json");
    let out = costlab_db(
        &db,
        &[
            "echo",
            "load",
            "--target",
            line.trim(),
            "--duration",
            "300ms",
            "--samples",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let tp = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "throughput")
        .expect("a throughput row");
    assert_eq!(tp["samples"].as_array().unwrap().len(), 2, "{tp}");
    // The default client is the same as the experiment's (uring), or its fallback note.
    assert_eq!(tp["case"]["client"], "uring", "{tp}");
}

/// `check --strict` is a gate for CI: exit 3 exactly when the findings hold a WARN (one line
/// each on stderr), 0 otherwise. Which it is depends on this machine now; the link between
/// the findings and the exit status does not.
#[test]
fn check_strict_exits_3_exactly_when_a_finding_warns() {
    let out = common::costlab(&["check", "--strict", "--json", "-"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warns = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "warn")
        .count();
    let err = String::from_utf8_lossy(&out.stderr);
    if warns == 0 {
        assert_eq!(out.status.code(), Some(0), "{err}");
    } else {
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert_eq!(
            err.matches("costlab: strict: WARN ").count(),
            warns,
            "{err}"
        );
    }
    let plain = common::costlab(&["check", "--json", "-"]);
    assert_eq!(plain.status.code(), Some(0));
}
