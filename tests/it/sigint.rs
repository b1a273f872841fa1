//! Ctrl-C sent to a real `costlab run`: once a lab is running, SIGINT stops the run at the
//! next sample boundary; the run is stored incomplete, the database is sound, exit 130.
//! With no lab built in (or none available here), the run just completes: the interrupted
//! path is then covered in-process by tests/interrupt.rs.
//!
//! Ctrl-C sent to a lab on its own (`costlab syscall`): the calls that finished are printed and
//! stored as an incomplete run, exit 130.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use costlab_history::store::Store;

#[test]
fn sigint_during_a_lab_keeps_the_run_incomplete_and_the_db_sound() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut child = crate::common::command()
        .arg("--db")
        .arg(&db)
        .args(["run", "--out-dir"])
        .arg(dir.path().join("report"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("running its quick plan") {
                let _ = tx.send(());
            }
        }
    });
    // Wait for a lab to start (or for the run to end without one).
    let started = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    if started {
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        assert_eq!(rc, 0);
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("costlab run did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = reader.join();
    let store = Store::open(&db).unwrap();
    assert_eq!(store.integrity().unwrap(), "ok");
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    if started {
        assert_eq!(status.code(), Some(130));
        assert!(!runs[0].complete);
        assert!(dir.path().join("report/index.html").is_file());
    } else {
        assert_eq!(status.code(), Some(0));
    }
}

#[test]
fn sigint_during_a_lab_prints_and_stores_the_calls_that_finished() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut cmd = crate::common::command();
    cmd.arg("--db")
        .arg(&db)
        .args(["syscall", "--samples", "20"])
        .env_remove("COSTLAB_DB");
    // In a process group of its own, so that it can be signalled as `timeout -s INT` does.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // The second call starting means the first has finished.
    let ran = common::run_acting(&mut cmd, "costlab: syscall: clock_gettime", |pid| {
        // As `timeout -s INT` delivers it: to the child, then to its process group. One
        // request arriving twice must not read as Ctrl-C pressed twice (quit at once).
        // SAFETY: kill(2) on the pid (and group) of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
        assert_eq!(
            // SAFETY: as above, to the child's own process group.
            unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGINT) },
            0
        );
    });
    assert!(!ran.stderr.contains("interrupted twice"), "{}", ran.stderr);
    let err = &ran.stderr;
    assert_eq!(ran.status.code(), Some(130), "{err}");
    assert!(ran.stdout.contains("getppid"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("note: interrupted (Ctrl-C)"),
        "{}",
        ran.stdout
    );
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("costlab: run "))
        .and_then(|l| l.strip_suffix(" (incomplete: interrupted)"))
        .unwrap_or_else(|| panic!("no incomplete run named: {err}"));

    let store = Store::open(&db).unwrap();
    assert_eq!(store.integrity().unwrap(), "ok");
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, id);
    assert!(!runs[0].complete);
    let doc = store.load_doc(id).unwrap();
    let calls: Vec<String> = doc.results.iter().map(|r| r.key("call")).collect();
    assert!(calls.contains(&"getppid".to_string()), "{calls:?}");
    assert!(
        doc.results.len() < 20,
        "only the calls that finished: {calls:?}"
    );
    assert!(doc
        .notes
        .iter()
        .any(|n| n.starts_with("interrupted (Ctrl-C)")));
    drop(store);

    // `costlab history` says so.
    let out = crate::common::command()
        .arg("--db")
        .arg(&db)
        .arg("history")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let listing = String::from_utf8_lossy(&out.stdout);
    let row = listing.lines().find(|l| l.contains(id)).unwrap();
    assert!(row.contains("INCOMPLETE"), "{listing}");
}
