//! An interrupted run (Ctrl-C, simulated with measure::cancel::simulate) keeps what finished,
//! is stored incomplete, restores the setting it changed and leaves the database sound.
//! One test in its own binary: the Ctrl-C flag is process-wide.

use crate::common::fake::{ctx, run_info, Act, Fake};
use costlab::runner::run_labs;
use costlab_history::report::sheet::LabStatus;
use costlab_history::store::Store;
use costlab_lab::Lab;

#[test]
fn ctrl_c_keeps_what_finished_and_restores_state() {
    let _serial = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let setting = dir.path().join("nr_hugepages");
    std::fs::write(&setting, "0\n").unwrap();
    let db = dir.path().join("h.db");
    let store = Store::open(&db).unwrap();
    let labs: Vec<Box<dyn Lab>> = vec![
        Box::new(Fake {
            name: "syscall",
            act: Act::Give,
        }),
        Box::new(Fake {
            name: "mem",
            act: Act::ChangeThenInterrupt(setting.clone()),
        }),
        Box::new(Fake {
            name: "echo",
            act: Act::Never,
        }),
    ];
    let done = run_labs(&labs, &ctx(), false, run_info("int1")).unwrap();
    // `costlab run` stores the run whole once it is done.
    store.save_doc(&done.doc, &done.sheet).unwrap();
    costlab_core::measure::cancel::simulate(false);

    assert!(done.interrupted);
    assert!(!done.doc.run.complete);
    assert_eq!(done.sheet.len(), 2, "echo never started");
    assert_eq!(done.sheet[1].status, LabStatus::Interrupted);
    assert_eq!(done.doc.results.len(), 2, "syscall's figures kept");
    // the setting the interrupted lab changed is back, and the notes say so
    assert_eq!(std::fs::read_to_string(&setting).unwrap().trim(), "0");
    assert!(
        done.doc
            .notes
            .iter()
            .any(|n| n == "fake pool: restored to 0"),
        "{:?}",
        done.doc.notes
    );
    assert!(done
        .doc
        .notes
        .iter()
        .any(|n| n == "echo: not run (interrupted)"));
    drop(store);

    // a fresh connection sees a sound database with the incomplete run and what finished
    let store = Store::open(&db).unwrap();
    assert_eq!(store.integrity().unwrap(), "ok");
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].complete);
    assert_eq!(runs[0].figures, 2);
    let sheet = store.load_sheet("int1").unwrap();
    assert_eq!(sheet[0].status, LabStatus::Ran);
    assert_eq!(sheet[1].status, LabStatus::Interrupted);
}
