//! A history costlab cannot or may not write, as one table of cases: another program's SQLite
//! file, a damaged page, a missing table, a read-only mount and a full disk, each under the
//! commands that store (a lab, `price`, `import`) and those that only read (`history`,
//! `export`). A refusal is exit 2 and one line naming the history and what to do, before
//! anything ran (price's program never started, no table printed) and with nothing written
//! (the file byte for byte as it was).

use std::path::{Path, PathBuf};

use crate::common;

/// A tmpfs mounted for one case, unmounted when the case ends however it ends.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

fn mount_tmpfs(at: &Path, size: &str) -> Option<Mount> {
    std::fs::create_dir_all(at).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mount(at.to_path_buf()))
}

/// What the history is, made fresh for each case.
#[derive(Clone, Copy, Debug)]
enum History {
    /// A SQLite file of another program (one table of its own).
    Foreign,
    /// Another program's SQLite file in WAL mode that has a table named `runs` of its own.
    ForeignRuns,
    /// costlab's history with the page of its runs table overwritten (header intact).
    DamagedPage,
    /// costlab's history whose `notes` table was dropped.
    MissingTable,
    /// costlab's history on a file system remounted read-only.
    ReadOnlyMount,
    /// costlab's history on a full tmpfs.
    FullDisk,
}

/// A history made for a case: its path and what holds it up.
struct Made {
    db: PathBuf,
    _mount: Option<Mount>,
}

fn costlab_history(db: &Path) {
    common::costlab_ok(db, &["import", common::FIXTURE]);
}

fn sql(db: &Path, text: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(text).unwrap();
}

/// Overwrite the runs table's page (one run: its root is its only page): SQLite's header and
/// schema stay readable, the page does not.
fn damage_runs_page(db: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let (page, size): (i64, i64) = {
        let c = rusqlite::Connection::open(db).unwrap();
        let page = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'runs'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let size = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        (page, size)
    };
    let mut f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    f.seek(SeekFrom::Start(((page - 1) * size) as u64)).unwrap();
    f.write_all(&vec![0xff; size as usize]).unwrap();
}

/// Write zeros until the file system says it is full.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    while f.write_all(&[0u8; 512]).is_ok() {}
    while f.write_all(&[0u8]).is_ok() {}
}

impl History {
    fn needs_root(self) -> bool {
        matches!(self, History::ReadOnlyMount | History::FullDisk)
    }

    /// The history in `dir`; None where this machine cannot make it (said by the caller).
    fn make(self, dir: &Path) -> Option<Made> {
        let db = dir.join("h.db");
        let plain = |db: PathBuf| Some(Made { db, _mount: None });
        match self {
            History::Foreign => {
                sql(&db, "CREATE TABLE t (a, b); INSERT INTO t VALUES (1, 'x');");
                plain(db)
            }
            History::ForeignRuns => {
                sql(
                    &db,
                    "PRAGMA journal_mode=WAL; CREATE TABLE runs (id, speed);
                     INSERT INTO runs VALUES (1, 2);",
                );
                plain(db)
            }
            History::DamagedPage => {
                costlab_history(&db);
                damage_runs_page(&db);
                plain(db)
            }
            History::MissingTable => {
                costlab_history(&db);
                sql(&db, "DROP TABLE notes;");
                plain(db)
            }
            History::ReadOnlyMount => {
                let mnt = dir.join("ro");
                let m = mount_tmpfs(&mnt, "8m")?;
                let db = mnt.join("h.db");
                costlab_history(&db);
                let ro = std::process::Command::new("mount")
                    .args(["-o", "remount,ro"])
                    .arg(&mnt)
                    .status()
                    .is_ok_and(|s| s.success());
                ro.then_some(Made {
                    db,
                    _mount: Some(m),
                })
            }
            History::FullDisk => {
                let mnt = dir.join("full");
                let m = mount_tmpfs(&mnt, "4m")?;
                let db = mnt.join("h.db");
                costlab_history(&db);
                fill(&mnt);
                Some(Made {
                    db,
                    _mount: Some(m),
                })
            }
        }
    }
}

/// The commands of the matrix; `MARK` is replaced by a file price's program would create.
const LAB: &[&str] = &["syscall", "--quick"];
const PRICE: &[&str] = &["price", "--", "touch", "MARK"];
const IMPORT: &[&str] = &["import", "FIXTURE"];
const HISTORY: &[&str] = &["history"];
const EXPORT: &[&str] = &["export", "--format", "csv", "last"];

struct Case {
    history: History,
    args: &'static [&'static str],
    exit: i32,
    /// What the one line must say (refusals), or what stdout must hold (exit 0).
    says: &'static [&'static str],
}

const fn case(
    history: History,
    args: &'static [&'static str],
    exit: i32,
    says: &'static [&'static str],
) -> Case {
    Case {
        history,
        args,
        exit,
        says,
    }
}

const FOREIGN: &[&str] = &["another program", "pass another --db"];
const DAMAGED: &[&str] = &["is damaged", ".recover", "pass another --db"];
const MISSING: &[&str] = &["is damaged", "no table notes", ".recover"];
const READ_ONLY: &[&str] = &["cannot be written", "read-only file system", "--db"];
const FULL: &[&str] = &["is full", "free some space", "--db"];
const LISTED: &[&str] = &["20261122T100000Z-f1x7e0"];
const EXPORTED: &[&str] = &["lab,"];

/// `costlab price` refuses with 125, beside its program's own statuses (docs/src/exit-status.md).
const REFUSED_BESIDE_PROGRAM: i32 = costlab_core::error::beside_program::COSTLAB as i32;

const CASES: &[Case] = &[
    case(History::Foreign, LAB, 2, FOREIGN),
    case(History::Foreign, PRICE, REFUSED_BESIDE_PROGRAM, FOREIGN),
    case(History::Foreign, IMPORT, 2, FOREIGN),
    case(History::Foreign, HISTORY, 2, FOREIGN),
    case(History::Foreign, EXPORT, 2, FOREIGN),
    case(History::ForeignRuns, LAB, 2, FOREIGN),
    case(History::ForeignRuns, IMPORT, 2, FOREIGN),
    case(History::ForeignRuns, HISTORY, 2, FOREIGN),
    case(History::DamagedPage, LAB, 2, DAMAGED),
    case(History::DamagedPage, PRICE, REFUSED_BESIDE_PROGRAM, DAMAGED),
    case(History::DamagedPage, IMPORT, 2, DAMAGED),
    case(History::DamagedPage, HISTORY, 2, DAMAGED),
    case(History::DamagedPage, EXPORT, 2, DAMAGED),
    case(History::MissingTable, LAB, 2, MISSING),
    case(
        History::MissingTable,
        PRICE,
        REFUSED_BESIDE_PROGRAM,
        MISSING,
    ),
    case(History::MissingTable, IMPORT, 2, MISSING),
    case(History::MissingTable, HISTORY, 2, MISSING),
    case(History::MissingTable, EXPORT, 2, MISSING),
    case(History::ReadOnlyMount, LAB, 2, READ_ONLY),
    case(
        History::ReadOnlyMount,
        PRICE,
        REFUSED_BESIDE_PROGRAM,
        READ_ONLY,
    ),
    case(History::ReadOnlyMount, IMPORT, 2, READ_ONLY),
    case(History::ReadOnlyMount, HISTORY, 0, LISTED),
    case(History::ReadOnlyMount, EXPORT, 0, EXPORTED),
    case(History::FullDisk, LAB, 2, FULL),
    case(History::FullDisk, PRICE, REFUSED_BESIDE_PROGRAM, FULL),
    case(History::FullDisk, IMPORT, 2, FULL),
    case(History::FullDisk, HISTORY, 0, LISTED),
];

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

/// The files beside the history (its own, and SQLite's WAL and shared memory).
fn beside(db: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("h.db"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_history_costlab_may_not_write_is_refused_before_the_work_and_left_as_it_was() {
    let name = "a_history_costlab_may_not_write_is_refused_before_the_work_and_left_as_it_was";
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in CASES {
        if c.history.needs_root() && !common::is_root() {
            common::skip::skipped(name, &format!("{:?} needs root to mount", c.history));
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let Some(made) = c.history.make(dir.path()) else {
            common::skip::skipped(name, &format!("cannot make {:?} here", c.history));
            continue;
        };
        ran += 1;
        let mark = dir.path().join("program-ran");
        let args: Vec<String> = c
            .args
            .iter()
            .map(|a| match *a {
                "MARK" => mark.display().to_string(),
                "FIXTURE" => common::FIXTURE.to_string(),
                a => a.to_string(),
            })
            .collect();
        let bytes = sha(&made.db);
        let files = beside(&made.db);
        let out = common::command_db(&made.db)
            .env("COSTLAB_RETRY_BUDGET", "0")
            .args(&args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("{:?} {args:?}", c.history);
        let mut fail = |why: String| failures.push(format!("{what}: {why}\n{stderr}{stdout}"));
        if out.status.code() != Some(c.exit) {
            fail(format!("exit {:?}, not {}", out.status.code(), c.exit));
            continue;
        }
        if c.exit == 2 || c.exit == REFUSED_BESIDE_PROGRAM {
            let lines: Vec<&str> = stderr.lines().collect();
            if lines.len() != 1 {
                fail(format!("{} lines on stderr, not one", lines.len()));
            }
            let line = lines.first().copied().unwrap_or_default();
            if !line.contains(&made.db.display().to_string()) {
                fail("the line does not name the history".into());
            }
            if let Some(w) = c.says.iter().find(|w| !line.contains(*w)) {
                fail(format!("the line does not say '{w}'"));
            }
            if !stdout.is_empty() {
                fail("something was printed on stdout: it ran".into());
            }
            if mark.exists() {
                fail("price's program ran".into());
            }
        } else if let Some(w) = c.says.iter().find(|w| !stdout.contains(*w)) {
            fail(format!("stdout lacks '{w}'"));
        }
        if sha(&made.db) != bytes {
            fail("the history's bytes changed".into());
        }
        if beside(&made.db) != files {
            fail(format!("files beside it changed: {:?}", beside(&made.db)));
        }
    }
    assert!(ran > 0, "no case ran");
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

/// A history of costlab's at an older schema, made read-only, is read? No: it cannot be
/// brought up to date, and the one line says so and how to read it.
#[test]
fn an_old_history_that_cannot_be_written_says_how_to_read_it() {
    let name = "an_old_history_that_cannot_be_written_says_how_to_read_it";
    if !common::is_root() {
        common::skip::skipped(name, "mounting a read-only tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("ro");
    let Some(_m) = mount_tmpfs(&mnt, "8m") else {
        common::skip::skipped(name, "cannot mount a tmpfs here");
        return;
    };
    let db = mnt.join("h.db");
    costlab_history(&db);
    // Down to version 2, as an older costlab left it.
    let store = costlab_history::store::Store::open(&db).unwrap();
    costlab_history::store::migrate::migrate_to(&store, 2).unwrap();
    drop(store);
    assert!(std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&mnt)
        .status()
        .unwrap()
        .success());
    let out = common::costlab_db(&db, &["history"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("schema version 2"), "{err}");
    assert!(err.contains("cp "), "{err}");
}

/// The probe before the work reads every page: on a history of many runs it stays cheap
/// (this checks it answers, not how fast; `bench/` has no figure of it).
#[test]
fn a_sound_history_passes_the_probe_and_a_lab_stores_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    costlab_history(&db);
    let store = costlab_history::store::open_for_run(Some(&db)).unwrap();
    assert_eq!(store.runs().unwrap().len(), 1);
}

/// `price` on a disk that fills while its program runs: the counts are not lost but kept in a
/// results file the one error line names, and `costlab import` takes it back whole.
#[test]
fn price_on_a_disk_that_fills_keeps_its_counts_and_import_takes_them_back() {
    let name = "price_on_a_disk_that_fills_keeps_its_counts_and_import_takes_them_back";
    if !common::is_root() {
        common::skip::skipped(name, "price and mounting a tmpfs need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let Some(_m) = mount_tmpfs(&mnt, "4m") else {
        common::skip::skipped(name, "cannot mount a tmpfs here");
        return;
    };
    let _tracer = common::tracing();
    let db = mnt.join("h.db");
    // The fixture's unit costs are another machine's: price measures what it needs here.
    costlab_history(&db);
    let ran = common::run_acting(
        common::command_db(&db)
            .env("COSTLAB_RETRY_BUDGET", "0")
            .args([
                "price",
                "--runs",
                "1",
                "--quick",
                "--samples",
                "3",
                "--",
                "sh",
                "-c",
                "echo program-started >&2; sleep 2; echo done",
            ]),
        "program-started",
        |_| fill(&mnt),
    );
    assert!(ran.stderr.contains("is full"), "{}", ran.stderr);
    let file = common::figures_file_of_unsaved_run(&ran);
    let text = std::fs::read_to_string(&file).unwrap();
    let doc = costlab_history::report::Doc::from_json(&text).unwrap();
    let counted = doc
        .results
        .iter()
        .filter(|r| r.lab == "price" && r.metric == "count")
        .count();
    assert!(counted > 0, "the program's counts are in the file: {text}");

    std::fs::remove_file(mnt.join("filler")).unwrap();
    let out = common::costlab_db(&db, &["import", &file.display().to_string()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = costlab_history::store::Store::open(&db).unwrap();
    let back = store.load_doc(&doc.run.id).unwrap();
    assert_eq!(back.results.len(), doc.results.len());
    let keys = |d: &costlab_history::report::Doc| -> Vec<(String, String, f64)> {
        d.results
            .iter()
            .map(|r| (r.figure_id(), r.metric.clone(), r.summary.median))
            .collect()
    };
    assert_eq!(keys(&back), keys(&doc));
    let _ = std::fs::remove_file(&file);
}
