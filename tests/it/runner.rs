//! `costlab run`'s orchestration with fake labs: skipped and failed labs are reported and the
//! rest go on; every lab reaches the history.

use crate::common::fake::{ctx, run_info, Act, Fake};
use costlab::runner::{run_labs, select};
use costlab_core::error::exit_code;
use costlab_history::report::sheet::LabStatus;
use costlab_history::store::Store;
use costlab_lab::Lab;

#[test]
fn skipped_and_failed_labs_are_reported_and_the_rest_go_on() {
    let _serial = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    let labs: Vec<Box<dyn Lab>> = vec![
        Box::new(Fake {
            name: "gc",
            act: Act::Unavailable("no Go toolchain: install golang-go"),
        }),
        Box::new(Fake {
            name: "mem",
            act: Act::Fail("mmap of 1 GiB failed: out of memory\nsecond line"),
        }),
        Box::new(Fake {
            name: "syscall",
            act: Act::Give,
        }),
    ];
    let done = run_labs(&labs, &ctx(), false, run_info("t1")).unwrap();
    // `costlab run` stores the run whole once it is done.
    store.save_doc(&done.doc, &done.sheet).unwrap();
    assert!(!done.interrupted);
    assert!(
        !done.doc.run.complete,
        "a failed lab makes the run incomplete"
    );
    assert_eq!(done.sheet.len(), 3);
    assert_eq!(
        done.sheet[0].status,
        LabStatus::Skipped("no Go toolchain: install golang-go".into())
    );
    assert!(
        matches!(&done.sheet[1].status, LabStatus::Failed(l) if !l.contains('\n') && l.contains("mmap"))
    );
    assert_eq!(done.sheet[2].status, LabStatus::Ran);
    assert_eq!(done.sheet[2].headlines[0].label, "syscall s");
    assert_eq!(done.doc.results.len(), 2);
    assert!(done.doc.notes.iter().any(|n| n == "syscall: fake note"));
    assert!(done
        .doc
        .notes
        .iter()
        .any(|n| n.starts_with("gc skipped: no Go toolchain")));
    let text = costlab_history::report::sheet::render_text(&done.sheet);
    assert!(
        text.contains("syscall s") && text.contains("gc skipped") && text.contains("mem failed")
    );

    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].complete);
    assert_eq!(runs[0].figures, 2);
    assert_eq!(store.load_sheet("t1").unwrap(), done.sheet);
    assert_eq!(store.load_doc("t1").unwrap().notes, done.doc.notes);
}

#[test]
fn a_run_of_available_labs_is_complete() {
    let _serial = crate::common::serial();
    let labs: Vec<Box<dyn Lab>> = vec![
        Box::new(Fake {
            name: "syscall",
            act: Act::Give,
        }),
        Box::new(Fake {
            name: "numa",
            act: Act::Unavailable("one NUMA node"),
        }),
    ];
    let done = run_labs(&labs, &ctx(), false, run_info("t2")).unwrap();
    assert!(
        done.doc.run.complete,
        "a skipped lab does not make a run incomplete"
    );
}

#[test]
fn labs_are_selected_by_name_and_unknown_names_are_bad_input() {
    let _serial = crate::common::serial();
    let all = || -> Vec<Box<dyn Lab>> {
        vec![
            Box::new(Fake {
                name: "mem",
                act: Act::Give,
            }),
            Box::new(Fake {
                name: "syscall",
                act: Act::Give,
            }),
            Box::new(Fake {
                name: "echo",
                act: Act::Give,
            }),
        ]
    };
    let picked = select(all(), Some("echo, mem")).unwrap();
    let names: Vec<&str> = picked.iter().map(|l| l.name()).collect();
    assert_eq!(names, ["mem", "echo"], "run order is all()'s");
    assert_eq!(select(all(), None).unwrap().len(), 3);
    let Err(e) = select(all(), Some("mem,disk")) else {
        panic!("disk accepted")
    };
    assert_eq!(exit_code(&e), 2);
    assert!(
        e.to_string().contains("unknown lab 'disk'")
            && e.to_string().contains("mem, syscall, echo")
    );
    assert!(select(all(), Some(",")).is_err());
}
