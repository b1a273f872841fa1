//! The SQLite history: round trip, naming runs, incremental writes, concurrent writers.

mod common;

use costlab::error::exit_code;
use costlab::report::sheet::LabStatus;
use costlab::store::Store;

fn with_id(mut doc: costlab::report::Doc, id: &str) -> costlab::report::Doc {
    doc.run.id = id.to_string();
    doc
}

#[test]
fn a_document_round_trips_through_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
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

#[test]
fn runs_are_named_by_id_prefix_or_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
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

#[test]
fn a_run_written_lab_by_lab_is_incomplete_until_finished() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    let doc = common::fixture();
    let mut run = doc.run.clone();
    run.id = "r1".into();
    store.begin_run(&run, &doc.machine).unwrap();
    let mem: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == "mem")
        .cloned()
        .collect();
    let sheet = common::fixture_sheet(&doc);
    store.add_lab("r1", &sheet[0], &mem, &[]).unwrap();
    assert!(!store.runs().unwrap()[0].complete);
    assert_eq!(store.load_doc("r1").unwrap().results.len(), mem.len());
    store.add_lab("r1", &sheet[2], &[], &[]).unwrap();
    store.finish_run("r1", true, &["n".into()]).unwrap();
    let back = store.load_doc("r1").unwrap();
    assert!(back.run.complete);
    assert_eq!(back.notes, vec!["n".to_string()]);
    let s = store.load_sheet("r1").unwrap();
    assert_eq!(s.len(), 2);
    assert!(matches!(s[1].status, LabStatus::Skipped(ref r) if r.contains("one NUMA node")));
}

#[test]
fn two_writers_at_once_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
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

#[test]
fn a_lab_run_alone_is_recorded_with_its_sheet() {
    // What emit() does after a lab command: store the document, headlines from the lab.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub/dir/h.db");
    let doc = common::fixture();
    costlab::store::commands::record(Some(&db), &doc);
    let store = Store::open(&db).unwrap();
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
    // A history that cannot be written warns and does not fail the lab command.
    costlab::store::commands::record(Some(std::path::Path::new("/proc/no/such/h.db")), &doc);
}
