//! The restore journal against a real setting: a costlab killed with SIGKILL while it holds a
//! raised 2 MiB hugepage pool leaves a journal, and the next costlab command puts the pool
//! back and says so in one line. Needs root and a 2 MiB pool in sysfs; says so and passes
//! without them (it cannot change the setting it tests).

use crate::common::skip;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn sigkill_mid_change_is_restored_by_the_next_command() {
    if !crate::common::is_root() || !Path::new(POOL).exists() {
        skip::skipped(
            "sigkill_mid_change_is_restored_by_the_next_command",
            &format!("needs root and {POOL} to raise a real pool"),
        );
        return;
    }
    // The mem lab's tests raise the same pool.
    let _one = crate::common::serial();
    let before = read(POOL);
    let journal = tempfile::tempdir().unwrap();
    let db = journal.path().join("h.db");
    let mut child = crate::common::command()
        .args([
            "mem",
            "latency",
            "--sizes",
            "1G,2G",
            "--pages",
            "2m",
            "--reserve-hugepages",
        ])
        .env("COSTLAB_JOURNAL_DIR", journal.path())
        .env("COSTLAB_DB", &db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the pool is raised (the journal is written before the change).
    let t = Instant::now();
    while read(POOL) == before && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let raised = read(POOL);
    let files: Vec<_> = std::fs::read_dir(journal.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .collect();
    child.kill().unwrap(); // SIGKILL: no guard, no handler runs
    child.wait().unwrap();
    if raised == before {
        std::fs::write(POOL, &before).ok();
        panic!("the pool was never raised (still {before}); cannot test the journal");
    }
    assert_eq!(files.len(), 1, "one journal for the killed process");
    assert_eq!(read(POOL), raised, "nothing restored the pool yet");

    // Any invocation restores first, `--version` included.
    let out = crate::common::command()
        .arg("--version")
        .env("COSTLAB_JOURNAL_DIR", journal.path())
        .env("COSTLAB_DB", &db)
        .output()
        .unwrap();
    let after = read(POOL);
    if after != before {
        std::fs::write(POOL, &before).ok();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(after, before, "the next command restored the pool");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("restored to")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with(&format!(
            "costlab: 2m hugepage pool: restored to {before} (left at {raised}"
        )),
        "{err}"
    );
    // Nothing left for `costlab restore` to do.
    let out = crate::common::command()
        .arg("restore")
        .env("COSTLAB_JOURNAL_DIR", journal.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no setting left changed"));
}

/// The NIC's queue interrupts and their smp_affinity_list now.
fn queue_affinities() -> Vec<(u32, String)> {
    let m = costlab_core::machine::Machine::probe();
    costlab_pin::irqs::queue_irqs(&m.net)
        .into_iter()
        .filter_map(|q| {
            let p = format!("/proc/irq/{}/smp_affinity_list", q.irq);
            Some((q.irq, std::fs::read_to_string(p).ok()?.trim().to_string()))
        })
        .collect()
}

fn put_back(before: &[(u32, String)]) {
    for (irq, v) in before {
        let _ = std::fs::write(format!("/proc/irq/{irq}/smp_affinity_list"), v);
    }
}

/// Puts the IRQs back as they were when it drops, a failed assertion included: the test
/// kills the process that would have, and its journal's folder goes with the test.
struct PutBack(Vec<(u32, String)>);

impl Drop for PutBack {
    fn drop(&mut self) {
        put_back(&self.0);
    }
}

/// `costlab pin --move-irqs` killed with SIGKILL while the NIC's interrupts sit on the server's
/// CPU: the next costlab command puts every smp_affinity_list back. Needs root and a network
/// device with queue interrupts (virtio-net here); says so and passes without them.
#[test]
fn sigkill_with_irqs_moved_is_restored_by_the_next_command() {
    use std::os::unix::process::CommandExt;
    let name = "sigkill_with_irqs_moved_is_restored_by_the_next_command";
    let before = queue_affinities();
    if !crate::common::is_root() || before.is_empty() {
        skip::skipped(name, "needs root and a NIC with queue interrupts to move");
        return;
    }
    let _put_back = PutBack(before.clone());
    let journal = tempfile::tempdir().unwrap();
    let db = journal.path().join("h.db");
    let mut child = crate::common::command()
        .args([
            "pin",
            "--case",
            "echo",
            "--placement",
            "irq-cpu",
            "--move-irqs",
            "--duration",
            "20s",
            "--samples",
            "1",
        ])
        .env("COSTLAB_JOURNAL_DIR", journal.path())
        .env("COSTLAB_DB", &db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group, so the echo server it starts goes with it.
        .process_group(0)
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut moved = before.clone();
    while moved == before && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        moved = queue_affinities();
    }
    let journals = std::fs::read_dir(journal.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    // SAFETY: SIGKILL to the process group we started (its id is the child's pid).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    child.wait().unwrap();
    if moved == before {
        skip::skipped(
            name,
            "no queue interrupt moved (already on the server's CPU, or managed by the kernel)",
        );
        return;
    }
    assert_eq!(journals, 1, "one journal for the killed process");
    // The lab moves its IRQs one at a time, and the kill may land between two: what it left
    // is read after it is gone (in one CI run the wait above saw the first of two moved).
    let moved = queue_affinities();
    assert_ne!(moved, before, "nothing restored the IRQs yet");

    // Any invocation restores first, `--version` included.
    let out = crate::common::command()
        .arg("--version")
        .env("COSTLAB_JOURNAL_DIR", journal.path())
        .env("COSTLAB_DB", &db)
        .output()
        .unwrap();
    let after = queue_affinities();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(after, before, "the next command restored every IRQ");
    let changed = before.iter().zip(&moved).filter(|(b, m)| b != m).count();
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("smp_affinity_list: restored to"))
        .collect();
    assert_eq!(lines.len(), changed, "{err}");
    assert!(lines[0].starts_with("costlab: IRQ "), "{err}");
}
