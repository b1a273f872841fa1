//! Shared by the integration tests, once: running the costlab binary, the fixture document
//! and a cost sheet for it, fakes, PostgreSQL, real servers (daemon), skips.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};

use costlab_core::measure::Summary;
use costlab_history::report::sheet::{LabSheet, LabStatus};
use costlab_history::report::Doc;
use costlab_lab::Headline;

pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/results-fixture-all-labs.json"
);

/// Every page of the manual (docs/src/**/*.md), in a stable order.
pub fn manual_pages() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("docs/src readable") {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src")),
        &mut out,
    );
    out.sort();
    out
}

/// The hand-made fixture (made-up figures, for tests only).
pub fn fixture() -> Doc {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture readable");
    Doc::from_json(&text).expect("fixture parses")
}

/// Every chart id the report draws for the fixture (two models in it).
pub const CHART_IDS: [&str; 11] = [
    "chart-mem-bandwidth-seq",
    "chart-mem-bandwidth-rand",
    "chart-mem-latency",
    "chart-echo-throughput",
    "chart-echo-p99",
    "chart-model-0",
    "chart-model-1",
    "chart-share-scaling",
    "chart-c2c",
    "chart-gc-headroom",
    "chart-mem-loaded",
];

/// A sheet for the fixture: headlines read off its rows, one skipped lab.
pub fn fixture_sheet(doc: &Doc) -> Vec<LabSheet> {
    let h = |lab: &str, metric: &str, label: &str, reading: &str| {
        let r = doc
            .results
            .iter()
            .find(|r| r.lab == lab && r.metric == metric)
            .expect("row in fixture");
        Headline {
            label: label.into(),
            summary: Summary::of(&r.samples).unwrap(),
            unit: r.unit.clone(),
            reading: reading.into(),
            ..Default::default()
        }
    };
    vec![
        LabSheet {
            lab: "mem".into(),
            status: LabStatus::Ran,
            headlines: vec![h(
                "mem",
                "bandwidth",
                "seq read bandwidth, 16K",
                "fixture reading",
            )],
        },
        LabSheet {
            lab: "syscall".into(),
            status: LabStatus::Ran,
            headlines: vec![h(
                "syscall",
                "latency",
                "syscall s (getppid)",
                "fixture reading",
            )],
        },
        LabSheet {
            lab: "numa".into(),
            status: LabStatus::Skipped("one NUMA node: nothing to compare".into()),
            headlines: vec![],
        },
    ]
}
/// The costlab binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_costlab");

/// costlab, ready for arguments: stdin closed (nothing may wait on a terminal), the history
/// the test command chose (`COSTLAB_DB`, a throwaway one under `make test`), no PostgreSQL
/// password from the environment.
pub fn command() -> Command {
    let mut c = Command::new(BIN);
    c.stdin(Stdio::null())
        .env_remove("PGPASSWORD")
        .env("PGPASSFILE", "/nonexistent/pgpass");
    c
}

/// costlab on the history `db` (a SQLite file or a postgres:// URL), whatever COSTLAB_DB says.
pub fn command_db(db: impl AsRef<OsStr>) -> Command {
    let mut c = command();
    c.arg("--db").arg(db).env_remove("COSTLAB_DB");
    c
}

/// `costlab ARGS`, run to its end.
pub fn costlab(args: &[&str]) -> Output {
    command().args(args).output().expect("costlab runs")
}

/// `costlab --db DB ARGS`, run to its end.
pub fn costlab_db(db: impl AsRef<OsStr>, args: &[&str]) -> Output {
    command_db(db).args(args).output().expect("costlab runs")
}

/// `costlab --db DB ARGS`, run to its end, which must succeed: its stderr is the message
/// otherwise.
pub fn costlab_ok(db: impl AsRef<OsStr>, args: &[&str]) -> Output {
    let out = costlab_db(db, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `costlab price --once ARGS` into the history `db`, its command set up by `setup` first
/// (a working directory, an environment): the JSON document.
pub fn price_with(
    db: &std::path::Path,
    args: &[&str],
    setup: impl FnOnce(&mut std::process::Command),
) -> serde_json::Value {
    let mut cmd = command_db(db);
    setup(&mut cmd);
    let out = cmd
        .args([
            "price",
            "--once",
            "--quick",
            "--samples",
            "3",
            "--json",
            "-",
        ])
        .args(args)
        .output()
        .expect("costlab runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    schema::doc(&out.stdout)
}

/// Bytes a program wrote, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run that must succeed and write one costlab/1 document on stdout: the document, validated
/// against the result contract's schema first.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    schema::doc(&out.stdout)
}

/// Bad input refused the one way costlab refuses it: exit 2 before anything ran, nothing on
/// stdout, one line on stderr (costlab's, no panic) holding each of `needles`, never the test
/// PostgreSQL's password. The line, for the caller's own checks.
pub fn one_line_exit_2(out: &Output, needles: &[&str]) -> String {
    one_line_refusal(out, 2, needles)
}

/// `costlab price` refused the same way, with the status its own refusals take beside a
/// program's (docs/src/exit-status.md): 127 for a program that is not there, 126 for one that
/// cannot be executed, 125 for everything else.
pub fn price_refused(out: &Output, needles: &[&str]) -> String {
    use costlab_core::error::beside_program::{COSTLAB, NOT_FOUND};
    let err = text(&out.stderr);
    let want = if err.contains("no such command") {
        NOT_FOUND
    } else if err.contains("is not executable") || err.contains("is a directory") {
        126
    } else {
        COSTLAB
    };
    one_line_refusal(out, want.into(), needles)
}

/// One refusal line and exit `status`, nothing on stdout: see `one_line_exit_2`.
fn one_line_refusal(out: &Output, status: i32, needles: &[&str]) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "exit status: {err}");
    assert!(
        out.stdout.is_empty(),
        "nothing half-written on stdout: {}\n{err}",
        text(&out.stdout)
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("costlab"), "costlab's own line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "missing '{n}' in: {err}");
    }
    assert!(!err.contains(pg::PASSWORD), "{err}");
    err
}

/// A document with another run id, so that one fixture can be stored more than once.
pub fn with_id(mut doc: Doc, id: &str) -> Doc {
    doc.run.id = id.to_string();
    doc
}

/// One test at a time where tests share something of this process or this machine: labs run
/// in this process share its Ctrl-C state (`measure::cancel`) and restore journal, so one
/// test's simulated Ctrl-C never reaches another's run; `costlab price` runs may mount and
/// unmount tracefs. The integration tests are one binary, so such tests take this lock.
///
/// It also keeps out every test holding `tracing()`: a serial test that checks the split's
/// figures (its classes adding up to the cgroup's usage) must not run beside another
/// `costlab price`, whose programs run in every task on the machine.
pub fn serial() -> Serial {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let alone = TRACERS.write().unwrap_or_else(|e| e.into_inner());
    Serial {
        _one: one,
        _alone: alone,
    }
}

/// A history for a test of `costlab price`, at `dir`/h.db, that already holds this machine's
/// tracer calibrations (the split's and the sampler's own cost per event, which a price takes
/// out, and the split's alone, which a --verify's trials take out) and the unit costs a price
/// of `true` needs: a copy of one history made once per test run by `costlab price --verify
/// --runs 1 -- true`. A price or a verify with the split then reuses those calibrations, as a
/// user's second one does, instead of spending 10-20 s measuring them again in every test; the
/// tests of the calibration itself (price_calibration) and those that check a refusal stores
/// nothing start from an empty history.
///
/// Call it before taking `serial()`: the first call takes that lock to make the copy's source.
/// Where no price can run here (no BPF, no root), the path of an empty history.
pub fn calibrated_db(dir: &std::path::Path) -> std::path::PathBuf {
    static SOURCE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let source = SOURCE.get_or_init(|| {
        let _one = serial();
        let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        // One per test process; those of processes gone are removed.
        for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("calibrated-")
                .and_then(|r| r.strip_suffix(".db"));
            if pid.is_some_and(|p| !std::path::Path::new("/proc").join(p).exists()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let path = tmp.join(format!("calibrated-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let out = command_db(&path)
            .args([
                "price",
                "--verify",
                "--runs",
                "1",
                "--quick",
                "--samples",
                "3",
                "--",
                "true",
            ])
            .output()
            .expect("costlab runs");
        out.status.success().then_some(path)
    });
    let db = dir.join("h.db");
    if let Some(src) = source {
        std::fs::copy(src, &db).expect("the calibrated history copies");
    }
    db
}

/// `serial()`'s guard: the lock and no tracer of another test running.
pub struct Serial {
    _one: std::sync::MutexGuard<'static, ()>,
    _alone: std::sync::RwLockWriteGuard<'static, ()>,
}

static TRACERS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by a test that is not serial but runs `costlab price` on a program (its split's
/// programs attached to every CPU): such tests may run beside each other, never beside a
/// serial one. Under a second tracer whose program kept both CPUs switching (775 involuntary
/// switches in one 127 ms run against 5-28), the split's classes passed the cgroup's usage by
/// 10-14% in 4 of 23 runs here. A test holding this must never take `serial()` (it would
/// wait on itself).
pub fn tracing() -> std::sync::RwLockReadGuard<'static, ()> {
    TRACERS.read().unwrap_or_else(|e| e.into_inner())
}

/// Whether the tests run as root (the parts that change system state need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub mod daemon;
pub mod fake;
pub mod pg;
pub mod schema;
pub mod skip;
pub mod vng;

/// What a spawned costlab did: its exit status and its whole stdout and stderr.
pub struct Ran {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// `costlab --db DB ARGS` to its end, its output as text, re-measuring nothing (the figures
/// are not judged by the tests that use it).
pub fn ran_db(db: &std::path::Path, args: &[&str]) -> Ran {
    let out = command_db(db)
        .env("COSTLAB_RETRY_BUDGET", "0")
        .args(args)
        .output()
        .expect("costlab runs");
    Ran {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `cmd`, and once a line of its stderr contains `marker`, do `act` (stop a server, fill a
/// disk, send SIGINT) while it goes on; then wait for it to end. Waiting on a line the program
/// prints, not on a fixed sleep, keeps the test independent of how fast this machine is.
pub fn run_acting(cmd: &mut std::process::Command, marker: &str, act: impl FnOnce(u32)) -> Ran {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("costlab starts");
    let mut stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let marker_owned = marker.to_string();
    let err_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(&marker_owned) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let seen = rx.recv_timeout(std::time::Duration::from_secs(120)).is_ok();
    if seen {
        act(child.id());
    } else {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let stderr = err_reader.join().unwrap();
    let stdout = out_reader.join().unwrap();
    assert!(seen, "costlab never printed '{marker}':\n{stderr}");
    Ran {
        status,
        stdout,
        stderr,
    }
}

/// The results file named in the one line of a run the history could not take (exit 1, or
/// 125 from `costlab price`); no
/// run id is printed for it, since it is stored nowhere.
pub fn figures_file_of_unsaved_run(ran: &Ran) -> std::path::PathBuf {
    let err = &ran.stderr;
    // 1, or `costlab price`'s own failure beside its program's statuses (125).
    let price_failed = i32::from(costlab_core::error::beside_program::COSTLAB);
    assert!(
        matches!(ran.status.code(), Some(1)) || ran.status.code() == Some(price_failed),
        "exit {:?}: {err}",
        ran.status.code()
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("history not saved"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        !err.lines()
            .any(|l| l.starts_with("costlab: run ") || l.starts_with("costlab run: stored as run")),
        "an id printed for a run stored nowhere: {err}"
    );
    let file = lines[0]
        .split("the run's figures are in ")
        .nth(1)
        .and_then(|t| t.split(" (`costlab import").next())
        .unwrap_or_else(|| panic!("no file named: {err}"));
    std::path::PathBuf::from(file)
}

/// End the program a killed `costlab price` (process `pid`) left running in its cgroup
/// (`costlab-price-PID` beside this test's own), by its pids, and remove the cgroup.
pub fn end_killed_price_program(pid: u32) {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    if let Some(root) = costlab_price::count::mount_point(&mounts, "cgroup2") {
        let cg = root
            .join(own.trim_start_matches('/'))
            .join(format!("costlab-price-{pid}"));
        let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
        for p in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: a plain kill(2) of the test's own orphaned program, by its pid.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = std::fs::remove_dir(&cg);
    }
}
