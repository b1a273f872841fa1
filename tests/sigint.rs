//! Ctrl-C sent to a real `costlab run`: once a lab is running, SIGINT stops the run at the
//! next sample boundary; the run is stored incomplete, the database is sound, exit 130.
//! With no lab built in (or none available here), the run just completes: the interrupted
//! path is then covered in-process by tests/interrupt.rs.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use costlab::store::Store;

#[test]
fn sigint_during_a_lab_keeps_the_run_incomplete_and_the_db_sound() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_costlab"))
        .arg("--db")
        .arg(&db)
        .args(["run", "--report"])
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
