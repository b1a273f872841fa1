//! A create's passes over recently deleted inodes (ext4 without a journal), counted by the
//! measured split and priced at the create-pass term: a shell that deletes 1000 files, waits
//! past the second of their deletion and makes 200 passes over 1000 inodes with each create.
//! Needs root and BPF, and a loop device to mount a small ext4 of its own: skips with the
//! reason without them. Beside it, the page-cache count the file-system terms price the same
//! way: the pages read from small files. None asserts a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, skip};
use costlab_core::measure::unitcost::passes;
use costlab_price::count;

/// An ext4 without a journal in a sparse 1 GiB file (8 groups, no flex groups, so that the
/// calibration's scratch directories find a group clear of the test's deletions; about
/// 1 MiB written), loop-mounted for one test and unmounted when
/// the test ends however it ends. The test's creates pass over the inodes deleted in the
/// same group in the last seconds (up to 305 s while the group's inode table is unwritten),
/// and on the root file system those were other tests' too: other tests' scratch
/// directories share the Orlov allocator's few emptiest groups, and one CI run counted
/// 802184 passes for 200000. On a file system of its own, only the test's deletions are
/// passed over.
struct Ext4(PathBuf);

impl Ext4 {
    /// Make and mount it under `dir`; the reason where it cannot be.
    fn mount(dir: &Path) -> Result<Ext4, String> {
        let img = dir.join("ext4.img");
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(1 << 30))
            .map_err(|e| e.to_string())?;
        let run = |c: &mut Command| {
            let out = c.output().map_err(|e| format!("{c:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{c:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-T", "default", "-O", "^has_journal,^flex_bg"])
            .arg(&img))?;
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt))?;
        Ok(Ext4(mnt))
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_creates_passes_over_deleted_inodes_are_counted_and_priced() {
    let name = "a_creates_passes_over_deleted_inodes_are_counted_and_priced";
    if let Some(why) = count::unavailable() {
        skip::skipped_unless_ci(name, &why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fs = match Ext4::mount(tmp.path()) {
        Ok(fs) => fs,
        Err(why) => {
            skip::skipped_unless_ci(name, &format!("no ext4 of its own: {why}"));
            return;
        }
    };
    assert!(
        passes::passes_deleted_inodes(&fs.0).unwrap(),
        "an ext4 made without a journal is not seen as one"
    );
    let dir = fs.0.join("d");
    std::fs::create_dir(&dir).unwrap();
    let db = crate::common::calibrated_db(tmp.path());
    let _one = common::serial();
    let script = format!(
        "cd '{}' && for i in $(seq 1000); do : > d$i; done; rm -f d*; sleep 1.2; for i in $(seq 200); do : > t$i; done",
        dir.display()
    );
    // Run from the mount: the calibration that turns the split's buffer touches into passes
    // is measured on the file system of costlab's working directory.
    let doc = common::price_with(&db, &["--", "sh", "-c", &script], |c| {
        c.current_dir(&fs.0);
    });
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
    let db = crate::common::calibrated_db(dir.path());
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

/// edges.c's `mode n` priced on the calibrated history, without cargo's LD_LIBRARY_PATH (the
/// loader would stat each folder in it by path): its price rows (`price_measured::rows`); None
/// where the test is skipped (`price_measured::edges`).
fn edges_rows(name: &str, mode: &str, n: &str) -> Option<BTreeMap<(String, String, String), f64>> {
    let (dir, exe) = crate::price_measured::edges(name)?;
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    let doc = common::price_with(&db, &["--", exe.to_str().unwrap(), mode, n], |c| {
        c.env_remove("LD_LIBRARY_PATH");
    });
    Some(crate::price_measured::rows(&doc))
}

/// The components of the paths the stat family walks, counted from the path read at each
/// call's entry: edges.c `stats N` makes four stats a round of 2, 3 (a `//` and a `.`), 0 (by
/// fd, AT_EMPTY_PATH) and 2 components, 7N in all (the loader's own stats of its libraries are
/// by fd too, where no LD_LIBRARY_PATH sends it searching folders); priced at the path-component term, the stats at their own part.
#[test]
fn the_components_of_stated_paths_are_counted_exactly() {
    // Without cargo's LD_LIBRARY_PATH (edges_rows): the loader stats each folder in it by path
    // (409 more components here).
    let name = "the_components_of_stated_paths_are_counted_exactly";
    let Some(r) = edges_rows(name, "stats", "500") else {
        return;
    };
    let row = |class: &str, event: &str, metric: &str| {
        r.get(&(class.into(), event.into(), metric.into())).copied()
    };
    let components = row("path", "components", "count").unwrap_or(0.0);
    assert!(
        (3500.0..=3520.0).contains(&components),
        "{components} path components for 500 rounds of 7"
    );
    assert!(
        row("path", "components", "unit_cost").is_some_and(|u| u > 0.0),
        "the components have no unit cost"
    );
    // The stats by fd (an empty path: no component walked) are a line of their own, priced
    // at the fstat term; the loader's fstats of the libraries it opens are in it too.
    let by_fd = row("syscall", "newfstatat:fd", "count").unwrap_or(0.0);
    assert!(
        (500.0..=520.0).contains(&by_fd),
        "{by_fd} stats by fd for 500 rounds of 1"
    );
    assert!(
        row("syscall", "newfstatat:fd", "unit_cost").is_some_and(|u| u > 0.0),
        "the stats by fd have no unit cost"
    );
    // The stats by path, newfstatat's and statx's, are priced at one own part (pricing's unit
    // tests check what it is), each raised by its own calls' cold share (the user time before
    // them: cold.rs), which moves a unit by less than twofold.
    let (fstatat, statx) = (
        row("syscall", "newfstatat", "unit_cost"),
        row("syscall", "statx", "unit_cost"),
    );
    let (Some(a), Some(b)) = (fstatat, statx) else {
        panic!("{fstatat:?} {statx:?}");
    };
    assert!(a > 0.0 && (0.5..=2.0).contains(&(a / b)), "{a} {b}");
    // Every stat by path found the one inode of /dev/null: one first touch.
    let first = row("stats", "first touches", "count").unwrap_or(0.0);
    assert_eq!(first, 1.0, "first touches of /dev/null's one inode");
}

/// N files each stated three times (twice by the folder's fd and name, once by statx of a
/// path): N first touches of an inode, whatever the call and the path; the others found
/// theirs again. Priced (the stat-distinct term less a stat of one file again) on their own
/// line.
#[test]
fn the_inodes_stats_find_first_are_counted_once_each() {
    let name = "the_inodes_stats_find_first_are_counted_once_each";
    let Some(r) = edges_rows(name, "firststats", "300") else {
        return;
    };
    let row = |metric: &str| {
        r.get(&("stats".into(), "first touches".into(), metric.into()))
            .copied()
    };
    let first = row("count").unwrap_or(0.0);
    assert!(
        (300.0..=304.0).contains(&first),
        "{first} first touches for 300 files stated three times each"
    );
    assert!(
        row("unit_cost").is_some(),
        "the first touches have no unit cost"
    );
}

/// A read into a buffer the program has not touched takes a page fault in the kernel for each
/// page: counted on the call (not among the minor faults, which the counter counted them in)
/// and priced at the anonymous fault term.
#[test]
fn the_faults_a_read_takes_in_the_kernel_are_counted_on_it() {
    let name = "the_faults_a_read_takes_in_the_kernel_are_counted_on_it";
    let Some(r) = edges_rows(name, "kfaults", "2000") else {
        return;
    };
    let row = |class: &str, event: &str, metric: &str| {
        r.get(&(class.into(), event.into(), metric.into())).copied()
    };
    let inside = row("pages", "faulted in syscalls", "count").unwrap_or(0.0);
    assert!(
        (2000.0..=2010.0).contains(&inside),
        "{inside} faults inside syscalls for a read into 2000 fresh pages"
    );
    assert!(
        row("pages", "faulted in syscalls", "unit_cost").is_some(),
        "the faults inside syscalls have no unit cost"
    );
    let minor = row("fault", "minor", "count").unwrap_or(0.0);
    assert!(
        minor < 1000.0,
        "{minor} minor faults: the read's 2000 are counted among them again"
    );
}

/// A file read through a mapping twice: its first pass's faults are the run's first on their
/// 64 KiB of the file, the second's find theirs mapped before; the first touches are priced.
#[test]
fn a_files_first_faults_on_each_range_are_told_from_the_faults_that_come_back() {
    let name = "a_files_first_faults_on_each_range_are_told_from_the_faults_that_come_back";
    let Some(r) = edges_rows(name, "ffirst", "1600") else {
        return;
    };
    let row = |class: &str, event: &str, metric: &str| {
        r.get(&(class.into(), event.into(), metric.into())).copied()
    };
    // 1600 pages: 100 windows of 16, each faulted on once a pass (the program's own binary
    // and libraries add their few).
    let first = row("file faults", "first touches", "count").unwrap_or(0.0);
    let faults = row("fault", "minor:file", "count").unwrap_or(0.0);
    assert!(
        (100.0..=200.0).contains(&first),
        "{first} first touches of a 100-window file read twice"
    );
    assert!(
        faults >= first + 95.0,
        "{faults} file faults, {first} of them first: the second pass's 100 were not told apart"
    );
    assert!(
        row("file faults", "first touches", "unit_cost").is_some(),
        "the first touches have no unit cost"
    );
}
