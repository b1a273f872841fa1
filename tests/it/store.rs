//! The history store, the same suite on both backends: an embedded SQLite file and a throwaway
//! PostgreSQL cluster (tests/it/common/pg.rs). Round trip, naming runs, incremental writes,
//! concurrent writers, migrations both ways, a newer schema refused, idempotent saves,
//! transactions that leave nothing behind, redaction of database passwords.

use crate::common;
use crate::common::command_db as costlab_bin;
use crate::common::with_id;

use std::path::PathBuf;

use costlab_core::error::exit_code;
use costlab_history::report::sheet::LabStatus;
use costlab_history::store::{migrate, Store};

/// A fresh, empty history on one backend.
pub struct Fresh {
    _dir: Option<tempfile::TempDir>,
    pub target: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

fn fresh(kind: Kind) -> Fresh {
    match kind {
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("h.db");
            Fresh {
                _dir: Some(dir),
                target,
            }
        }
        Kind::Postgres => Fresh {
            _dir: None,
            target: PathBuf::from(common::pg::cluster().fresh()),
        },
    }
}

/// Each case once per backend: `sqlite::name` and `postgres::name`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(super::Kind::Sqlite) } )*
        }
        mod postgres {
            $( #[test] fn $name() { super::$name(super::Kind::Postgres) } )*
        }
    };
}

both!(
    a_document_round_trips_through_the_database,
    runs_are_named_by_id_prefix_or_last,
    two_writers_at_once_both_land,
    migrations_go_down_and_up_again,
    a_newer_schema_is_refused,
    a_failed_write_leaves_nothing,
    saving_a_present_run_again_is_skipped,
    database_passwords_are_never_stored,
    one_labs_figures_are_read_for_one_machine_newest_first,
);

fn a_document_round_trips_through_the_database(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let doc = common::fixture();
    let sheet = common::fixture_sheet(&doc);
    store.save_doc(&doc, &sheet).unwrap();
    let back = store.load_doc(&doc.run.id).unwrap();
    assert_eq!(back.run, doc.run);
    assert_eq!(back.machine, doc.machine);
    assert_eq!(back.models, doc.models);
    assert_eq!(back.notes, doc.notes);
    assert_eq!(back.results.len(), doc.results.len());
    for (a, b) in back.results.iter().zip(&doc.results) {
        assert_eq!(a.figure_id(), b.figure_id());
        // case key order is the lab's, kept
        assert_eq!(
            a.case.keys().collect::<Vec<_>>(),
            b.case.keys().collect::<Vec<_>>()
        );
        assert_eq!(a.samples, b.samples);
        assert_eq!(a.summary, b.summary);
    }
    assert_eq!(store.load_sheet(&doc.run.id).unwrap(), sheet);
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].figures, doc.results.len());
    assert!(runs[0].complete);
    assert!(runs[0].machine_summary.starts_with("FIXTURE CPU"));
    assert_eq!(store.integrity().unwrap(), "ok");
}

fn runs_are_named_by_id_prefix_or_last(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let doc = common::fixture();
    store
        .save_doc(&with_id(doc.clone(), "20261122T100000Z-aaaaaa"), &[])
        .unwrap();
    store
        .save_doc(&with_id(doc.clone(), "20261122T100000Z-aabbbb"), &[])
        .unwrap();
    store
        .save_doc(&with_id(doc, "20261122T100000Z-cccccc"), &[])
        .unwrap();
    assert_eq!(store.resolve("last").unwrap(), "20261122T100000Z-cccccc");
    assert_eq!(
        store.resolve("20261122T100000Z-aab").unwrap(),
        "20261122T100000Z-aabbbb"
    );
    let ambiguous = store.resolve("20261122T100000Z-aa").unwrap_err();
    assert_eq!(exit_code(&ambiguous), 2);
    assert!(ambiguous.to_string().contains("matches 2 runs"));
    assert_eq!(exit_code(&store.resolve("nope").unwrap_err()), 2);
    // LIKE wildcards in a name are not wildcards
    assert!(store.resolve("%").is_err());
}

fn two_writers_at_once_both_land(kind: Kind) {
    let f = fresh(kind);
    let path = f.target.clone();
    let doc = common::fixture();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            let doc = doc.clone();
            std::thread::spawn(move || {
                // each writer has its own connection, as two processes would
                let store = Store::open(&path).unwrap();
                for i in 0..15 {
                    store
                        .save_doc(&with_id(doc.clone(), &format!("w{w}-{i:02}")), &[])
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 30);
    assert!(runs.iter().all(|r| r.figures == doc.results.len()));
    assert_eq!(store.integrity().unwrap(), "ok");
}

fn migrations_go_down_and_up_again(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    assert_eq!(migrate::version(&store).unwrap(), migrate::LATEST);
    let doc = common::fixture();
    // Down one step at a time to nothing, and back up, on an empty history.
    for v in (0..migrate::LATEST).rev() {
        assert_eq!(migrate::migrate_to(&store, v).unwrap(), v + 1);
        assert_eq!(migrate::version(&store).unwrap(), v);
    }
    // At 0 there are no tables: a save fails, and leaves nothing.
    assert!(store.save_doc(&doc, &[]).is_err());
    assert_eq!(migrate::migrate_to(&store, migrate::LATEST).unwrap(), 0);
    store.save_doc(&doc, &[]).unwrap();
    assert_eq!(
        store.load_doc(&doc.run.id).unwrap().results.len(),
        doc.results.len()
    );
    // Down to version 2 drops the machine id column, keeps the runs; up again restores it.
    migrate::migrate_to(&store, 2).unwrap();
    assert!(
        store.runs().is_err(),
        "runs() reads machine_id, gone at version 2"
    );
    assert_eq!(
        store.load_doc(&doc.run.id).unwrap().results.len(),
        doc.results.len()
    );
    migrate::migrate_to(&store, migrate::LATEST).unwrap();
    assert_eq!(store.runs().unwrap().len(), 1);
    // A reopen finds it up to date and changes nothing.
    drop(store);
    let store = Store::open(&f.target).unwrap();
    assert_eq!(migrate::version(&store).unwrap(), migrate::LATEST);
    assert_eq!(
        exit_code(&migrate::migrate_to(&store, migrate::LATEST + 1).unwrap_err()),
        2
    );
}

fn a_newer_schema_is_refused(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    store
        .write(|tx| {
            tx.exec(
                "UPDATE schema_version SET version = $1",
                &[(migrate::LATEST + 1).into()],
            )?;
            Ok(())
        })
        .unwrap();
    drop(store);
    let e = Store::open(&f.target)
        .err()
        .expect("a newer schema is refused");
    assert_eq!(exit_code(&e), 2);
    let line = costlab_core::error::one_line(&e);
    assert!(line.contains("newer than this costlab"), "{line}");
    assert!(line.contains("upgrade costlab"), "{line}");
    assert!(!line.contains(common::pg::PASSWORD), "{line}");
}

fn a_failed_write_leaves_nothing(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let doc = common::fixture();
    let r: anyhow::Result<()> = store.write(|tx| {
        tx.exec(
            "INSERT INTO runs (id, started, costlab, command, machine, machine_summary, complete)
             VALUES ($1, 'x', 'x', 'x', '{}', 'x', 0)",
            &["half".into()],
        )?;
        anyhow::bail!("cut off mid-run")
    });
    assert!(r.is_err());
    assert!(store.runs().unwrap().is_empty());
    // A document whose models cannot be stored (no models table, as at version 1 with it
    // dropped) leaves no run either: the run row went in first, in the same transaction.
    store
        .write(|tx| {
            tx.batch("ALTER TABLE models RENAME TO models_away")?;
            Ok(())
        })
        .unwrap();
    assert!(store.save_doc(&doc, &[]).is_err());
    assert!(store.runs().unwrap().is_empty());
}

fn saving_a_present_run_again_is_skipped(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let doc = common::fixture();
    let sheet = common::fixture_sheet(&doc);
    assert!(store.save_doc_if_new(&doc, &sheet).unwrap());
    assert!(!store.save_doc_if_new(&doc, &sheet).unwrap());
    assert!(store.has_run(&doc.run.id).unwrap());
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].figures, doc.results.len());
    // A plain save of a present id is refused (primary key), not doubled.
    assert!(store.save_doc(&doc, &sheet).is_err());
    assert_eq!(store.runs().unwrap()[0].figures, doc.results.len());
}

fn database_passwords_are_never_stored(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let mut doc = common::fixture();
    doc.run.command = "costlab --db postgres://ann:hunter2@db.example/costlab run".into();
    doc.notes = vec!["pushed to postgresql://ann:hunter2@db.example/x?password=hunter2".into()];
    store.save_doc(&doc, &[]).unwrap();
    let back = store.load_doc(&doc.run.id).unwrap();
    let all = serde_json::to_string(&back).unwrap();
    assert!(!all.contains("hunter2"), "{all}");
    assert_eq!(
        back.run.command,
        "costlab --db postgres://ann:***@db.example/costlab run"
    );
    assert!(back.notes[0].contains("postgresql://ann:***@db.example/x?password=***"));
    assert!(!store.describe().contains(common::pg::PASSWORD));
    assert!(!store.runs().unwrap()[0].command.contains("hunter2"));
}

#[test]
fn a_lab_run_alone_is_recorded_with_its_sheet() {
    // What emit() does after a lab command: store the document, headlines from the lab.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub/dir/h.db");
    let doc = common::fixture();
    let store = Store::open(&db).unwrap();
    costlab_history::store::record(&store, Some(&db), &doc, &costlab::registry::sheet_of(&doc))
        .unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, doc.run.id);
    let sheet = store.load_sheet(&doc.run.id).unwrap();
    let labs: Vec<&str> = sheet.iter().map(|s| s.lab.as_str()).collect();
    assert_eq!(
        labs,
        [
            "mem",
            "syscall",
            "echo",
            "share",
            "share c2c",
            "gc",
            "gc tax",
            "numa"
        ]
    );
    assert!(sheet.iter().all(|s| s.status == LabStatus::Ran));
}

/// The results file a run fell back to: a costlab/1 document with figures in it.
fn fallback_doc(file: &std::path::Path) -> costlab_history::report::Doc {
    let text = std::fs::read_to_string(file).unwrap();
    crate::common::schema::doc(&text);
    let doc = costlab_history::report::Doc::from_json(&text).unwrap();
    assert_eq!(doc.schema, "costlab/1");
    assert!(!doc.results.is_empty(), "{text}");
    doc
}

/// A tmpfs mounted for one test, unmounted when the test ends however it ends.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Write zeros until the file system says it is full.
fn fill(dir: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    // The last partial block too: nothing may be left for SQLite's next page.
    while f.write_all(&[0u8; 512]).is_ok() {}
    while f.write_all(&[0u8]).is_ok() {}
}

#[test]
fn a_full_disk_under_sqlite_keeps_the_figures_in_a_file_and_the_history_sound() {
    let name = "a_full_disk_under_sqlite_keeps_the_figures_in_a_file_and_the_history_sound";
    if !common::is_root() {
        common::skip::skipped(name, "mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        common::skip::skipped(name, "cannot mount a tmpfs here (no CAP_SYS_ADMIN?)");
        return;
    }
    let _unmount = Tmpfs(mnt.clone());
    let db = mnt.join("h.db");
    // The history holds one whole run before the disk fills.
    let out = costlab_bin(&db)
        .args(["import", common::FIXTURE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));

    // The disk fills while the lab measures (after the history was opened and checked).
    let ran = common::run_acting(
        costlab_bin(&db).args(["syscall", "--quick"]),
        "costlab: syscall: ",
        |_| fill(&mnt),
    );
    assert!(ran.stderr.contains("full"), "{}", ran.stderr);
    let file = common::figures_file_of_unsaved_run(&ran);
    let doc = fallback_doc(&file);
    // The tables were still printed: the figures reached the user.
    assert!(ran.stdout.contains("getppid"), "{}", ran.stdout);

    // Room again: the history is sound, holds no part of the run, and takes the file whole.
    std::fs::remove_file(mnt.join("filler")).unwrap();
    let store = Store::open(&db).unwrap();
    assert_eq!(store.integrity().unwrap(), "ok");
    assert_eq!(store.runs().unwrap().len(), 1);
    assert!(!store.has_run(&doc.run.id).unwrap());
    drop(store);
    let out = costlab_bin(&db).arg("import").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let store = Store::open(&db).unwrap();
    let back = store.load_doc(&doc.run.id).unwrap();
    assert_eq!(back.results.len(), doc.results.len());
    let _ = std::fs::remove_file(&file);
}

#[test]
fn postgres_stopped_during_a_run_keeps_the_figures_in_a_file_and_the_history_sound() {
    // A cluster of this test's own: it is stopped mid-run.
    let c = common::pg::own_cluster();
    let url = c.fresh();
    let dir = tempfile::tempdir().unwrap();
    let ran = common::run_acting(
        costlab_bin(&url)
            .args(["run", "--labs", "syscall", "--out-dir"])
            .arg(dir.path().join("report")),
        "running its quick plan",
        |_| c.stop_now(),
    );
    assert!(!ran.stderr.contains(common::pg::PASSWORD), "{}", ran.stderr);
    let file = common::figures_file_of_unsaved_run(&ran);
    let doc = fallback_doc(&file);

    c.start_server();
    let store = Store::open(std::path::Path::new(&url)).unwrap();
    assert_eq!(store.integrity().unwrap(), "ok");
    // The run is stored whole or not at all: no run row, no stray rows of its figures.
    assert!(store.runs().unwrap().is_empty());
    let stray = store
        .read_rows("SELECT COUNT(*) FROM results")
        .unwrap()
        .first()
        .map(|r| r[0].int());
    assert_eq!(stray, Some(0));
    drop(store);
    // The file stores the run once the server is back.
    let out = costlab_bin(&url).arg("import").arg(&file).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(std::path::Path::new(&url)).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].complete, doc.run.complete);
    assert_eq!(runs[0].figures, doc.results.len());
    let _ = std::fs::remove_file(&file);
}

/// `Store::figures_of` (what a price reads its kept calibration with): the rows of one lab and
/// metric of one machine's runs, each with its run's id and start, newest run first; another
/// machine's runs are left out.
fn one_labs_figures_are_read_for_one_machine_newest_first(kind: Kind) {
    let f = fresh(kind);
    let store = Store::open(&f.target).unwrap();
    let doc = common::fixture();
    let (lab, metric) = (doc.results[0].lab.clone(), doc.results[0].metric.clone());
    let per_run = doc
        .results
        .iter()
        .filter(|r| r.lab == lab && r.metric == metric)
        .count();
    for (id, started) in [
        ("20261122T100000Z-aaaaaa", "2026-11-22T10:00:00Z"),
        ("20261123T100000Z-bbbbbb", "2026-11-23T10:00:00Z"),
    ] {
        let mut d = with_id(doc.clone(), id);
        d.run.started = started.into();
        store.save_doc(&d, &[]).unwrap();
    }
    let mut other = with_id(doc.clone(), "20261124T100000Z-cccccc");
    other.run.started = "2026-11-24T10:00:00Z".into();
    other.machine["id"] = "another-machine".into();
    store.save_doc(&other, &[]).unwrap();
    let me = store
        .runs()
        .unwrap()
        .into_iter()
        .find(|r| r.id == "20261122T100000Z-aaaaaa")
        .unwrap()
        .machine_id;
    let found = store.figures_of(&lab, &metric, &me).unwrap();
    assert_eq!(found.len(), 2 * per_run);
    assert!(found[..per_run].iter().all(
        |(id, started, _)| id == "20261123T100000Z-bbbbbb" && started.starts_with("2026-11-23")
    ));
    assert!(found[per_run..]
        .iter()
        .all(|(id, _, _)| id == "20261122T100000Z-aaaaaa"));
    assert!(found
        .iter()
        .all(|(_, _, r)| r.lab == lab && r.metric == metric));
    let want: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == lab && r.metric == metric)
        .map(|r| r.figure_id())
        .collect();
    let got: Vec<_> = found[..per_run]
        .iter()
        .map(|(_, _, r)| r.figure_id())
        .collect();
    assert_eq!(got, want, "in the run's order");
    assert!(store
        .figures_of(&lab, "no-such-metric", &me)
        .unwrap()
        .is_empty());
}
