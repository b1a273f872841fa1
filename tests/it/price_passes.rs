//! A create's passes over recently deleted inodes (ext4 without a journal), counted by the
//! measured split and priced at the create-pass term: a shell that deletes 1000 files, waits
//! past the second of their deletion and makes 200 passes over 1000 inodes with each create.
//! Needs root and BPF, and a file system root on ext4 without a journal: skips with the reason
//! without them. Beside it, the page-cache count the file-system terms price the same way: the
//! pages read from small files. None asserts a time.

use crate::common::{self, skip};
use costlab_core::measure::unitcost::{fsops, passes};
use costlab_price::count;

#[test]
fn a_creates_passes_over_deleted_inodes_are_counted_and_priced() {
    let name = "a_creates_passes_over_deleted_inodes_are_counted_and_priced";
    if let Some(why) = count::unavailable() {
        skip::skipped_unless_ci(name, &why);
        return;
    }
    // A directory at the file system's root: ext4 puts it in a group of its own, away from
    // other tests' deletions, whose inodes the creates would pass over too.
    let Ok(root) = fsops::mount_point(&std::env::temp_dir()) else {
        skip::skipped(
            name,
            "the temporary folder's mount is not in /proc/self/mountinfo",
        );
        return;
    };
    if !passes::passes_deleted_inodes(&root).unwrap_or(false) {
        skip::skipped(
            name,
            "the temporary folder is not on ext4 without a journal",
        );
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix(".costlab-passes-")
        .tempdir_in(&root)
        .unwrap();
    let db = tempfile::tempdir().unwrap();
    let _one = common::serial();
    let script = format!(
        "cd '{}' && for i in $(seq 1000); do : > d$i; done; rm -f d*; sleep 1.2; for i in $(seq 200); do : > t$i; done",
        dir.path().display()
    );
    let doc = crate::price_measured::price(&db.path().join("h.db"), &["--", "sh", "-c", &script]);
    let row = |metric: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                r["lab"] == "price"
                    && r["case"]["class"] == "inodes"
                    && r["case"]["event"] == "passed over"
                    && r["metric"] == metric
            })
            .and_then(|r| r["summary"]["median"].as_f64())
    };
    let passes = row("count").expect("no `inodes passed over` row");
    assert!(
        (180_000.0..=220_000.0).contains(&passes),
        "200 creates after 1000 deletions passed over {passes} inodes, not about 200000"
    );
    let unit = row("unit_cost").expect("the passes have no unit cost");
    assert!(unit > 0.0, "create-pass priced at {unit} ns");
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("calibrated here"),
        "no calibration note: {notes}"
    );
}

/// The pages read from small files (at most 32 KiB), counted exactly from the file's size
/// read in the kernel: a whole read of a 5000-byte file takes its 2 pages, the empty read at
/// its end none, and a 40000-byte file's read none (were the size misread, 1000 more); priced
/// (at the read-small term).
#[test]
fn the_pages_read_from_small_files_are_counted_exactly() {
    let name = "the_pages_read_from_small_files_are_counted_exactly";
    let Some((dir, exe)) = crate::price_measured::edges(name) else {
        return;
    };
    let db = dir.path().join("h.db");
    let _one = common::serial();
    let doc =
        crate::price_measured::price(&db, &["--", exe.to_str().unwrap(), "smallfiles", "100"]);
    let r = crate::price_measured::rows(&doc);
    // 2 × 100, and the pages the kernel reads of the (small) test program's own file at its
    // exec: its header and program headers, 3 here.
    let pages = r
        .get(&(
            "pages".into(),
            "read from small files".into(),
            "count".into(),
        ))
        .copied()
        .unwrap_or(0.0);
    assert!((200.0..=210.0).contains(&pages), "{pages} pages: {r:?}");
    let priced = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["case"]["event"] == "read from small files" && x["metric"] == "unit_cost");
    assert!(priced, "no unit cost for the pages read from small files");
}
