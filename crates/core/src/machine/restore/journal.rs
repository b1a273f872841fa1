//! The restore journal: every setting costlab changes is written here before the change and
//! removed after the restore. One file per process (`<pid>.json`), in /run/costlab when root,
//! else the user's data directory (`$COSTLAB_JOURNAL_DIR` overrides both).
//!
//! A journal whose process no longer runs (the pid is gone, or now belongs to a process started
//! at another time) is stale: the next costlab command restores what it lists. A journal whose
//! process still runs is never touched, except that a stale change to the same setting is
//! handed to it: the live process then restores the older value when it finishes, so two
//! costlab processes never undo each other's live changes, and the setting still ends where it
//! was before either of them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub path: PathBuf,
    pub old: String,
    pub new: String,
    pub what: String,
    /// A mount made for the run: restoring it is unmounting `path` (journals written before
    /// mounts existed read as false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mount: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub pid: u32,
    /// The process's start time (clock ticks after boot, /proc/PID/stat field 22): a pid
    /// reused by another process does not make a stale journal look live.
    pub start: u64,
    pub command: String,
    pub changes: Vec<Entry>,
}

/// Serialises this process's journal writes; the file lock serialises processes.
static LOCAL: Mutex<()> = Mutex::new(());

/// Where root's journals live.
const ROOT_DIR: &str = "/run/costlab";

/// Where journals live.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("COSTLAB_JOURNAL_DIR") {
        return PathBuf::from(d);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from(ROOT_DIR);
    }
    dirs::data_dir()
        .map(|d| d.join("costlab").join("journal"))
        .unwrap_or_else(|| std::env::temp_dir().join("costlab-journal"))
}

/// The start time of process `pid`, or None when it does not run (a zombie, killed and not
/// yet reaped, runs no more: its guards will never restore anything).
pub fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // rest starts at field 3 (state); starttime is field 22.
    if matches!(f.next(), Some("Z") | Some("X")) {
        return None;
    }
    f.nth(18)?.parse().ok()
}

/// The entries of `dir` named `PREFIX<pid>` whose process no longer runs: what a costlab
/// killed with SIGKILL left there (its cgroup, its sample folder) for the next one to remove.
pub fn left_by_dead(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| start_time(pid).is_none())
        })
        .map(|e| e.path())
        .collect()
}

fn alive(j: &Journal) -> bool {
    start_time(j.pid) == Some(j.start)
}

/// An exclusive lock on the journal directory for the life of the guard.
struct DirLock {
    _file: std::fs::File,
}

fn lock(dir: &Path) -> Result<DirLock> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the restore journal directory {}", dir.display()))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .with_context(|| format!("opening {}", dir.join(".lock").display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .with_context(|| format!("locking {}", dir.display()))?;
    Ok(DirLock { _file: file })
}

fn own_path(dir: &Path) -> PathBuf {
    dir.join(format!("{}.json", std::process::id()))
}

fn load(path: &Path) -> Option<Journal> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Write atomically: a crash mid-write leaves the old journal or the new one, never half.
fn store(path: &Path, j: &Journal) -> Result<()> {
    if j.changes.is_empty() {
        let _ = std::fs::remove_file(path);
        return Ok(());
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(j)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(())
}

fn own_journal(path: &Path) -> Journal {
    load(path).unwrap_or_else(|| {
        let pid = std::process::id();
        Journal {
            pid,
            start: start_time(pid).unwrap_or(0),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            changes: Vec::new(),
        }
    })
}

/// Record a change before it is made.
pub fn record(id: u64, path: &Path, old: &str, new: &str, what: &str) -> Result<()> {
    append(Entry {
        id,
        path: path.to_path_buf(),
        old: old.to_string(),
        new: new.to_string(),
        what: what.to_string(),
        mount: false,
    })
}

/// Record a mount of `fstype` at `path` before it is made.
pub fn record_mount(id: u64, path: &Path, fstype: &str, what: &str) -> Result<()> {
    append(Entry {
        id,
        path: path.to_path_buf(),
        old: "unmounted".into(),
        new: format!("{fstype} mounted"),
        what: what.to_string(),
        mount: true,
    })
}

fn append(e: Entry) -> Result<()> {
    let _l = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir();
    let _lock = lock(&d)?;
    let p = own_path(&d);
    let mut j = own_journal(&p);
    j.changes.push(e);
    store(&p, &j)
}

/// The value to restore for change `id`, as the journal has it now (a stale journal may have
/// handed this process an older value).
pub fn old_value(id: u64) -> Option<String> {
    let _l = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let j = load(&own_path(&dir()))?;
    j.changes.into_iter().find(|c| c.id == id).map(|c| c.old)
}

/// Drop change `id` from the journal (after its restore); the file goes with the last one.
/// Called from signal-time paths too, so it takes no directory lock: only this process
/// writes its own file, except for a hand-over, which rewrites it whole under the lock.
pub fn forget(id: u64) {
    let _l = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = own_path(&dir());
    if let Some(mut j) = load(&p) {
        j.changes.retain(|c| c.id != id);
        let _ = store(&p, &j);
    }
}

/// What recovering a stale journal did, one line each.
/// Without root (and with no journal directory named), root's journals are looked at too: a
/// setting a dead costlab run with sudo left changed is named, with the command that restores it.
pub fn recover_stale() -> Vec<String> {
    let mut notes = recover_in(&dir());
    if std::env::var_os("COSTLAB_JOURNAL_DIR").is_none() && !rustix::process::geteuid().is_root() {
        notes.extend(left_for_root(Path::new(ROOT_DIR)));
    }
    notes
}

/// Recover the stale journals in `d` (tests point it at a temporary directory).
pub fn recover_in(d: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(d) else {
        return Vec::new();
    };
    let files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    if files.is_empty() {
        return Vec::new();
    }
    let Ok(_lock) = lock(d) else {
        return Vec::new();
    };
    let mut journals: Vec<(PathBuf, Journal)> = files
        .into_iter()
        .filter_map(|p| load(&p).map(|j| (p, j)))
        .collect();
    let mut notes = Vec::new();
    let (mut unrestored, mut denied_whats) = (Vec::new(), Vec::new());
    let me = std::process::id();
    let stale: Vec<usize> = (0..journals.len())
        .filter(|&i| journals[i].1.pid != me && !alive(&journals[i].1))
        .collect();
    for i in stale {
        let (path, j) = journals[i].clone();
        for c in j.changes.iter().rev() {
            // A live costlab changed the same setting after the dead one: let it restore the
            // dead one's older value when it finishes.
            let live = journals.iter_mut().find(|(_, lj)| {
                lj.pid != j.pid && alive(lj) && lj.changes.iter().any(|x| x.path == c.path)
            });
            if let Some((lpath, lj)) = live {
                if let Some(x) = lj.changes.iter_mut().find(|x| x.path == c.path) {
                    x.old = c.old.clone();
                }
                let _ = store(lpath, lj);
                notes.push(format!(
                    "{}: left changed by costlab pid {} (no longer running); costlab pid {} changes it now and will restore it to {}",
                    c.what, j.pid, lj.pid, c.old
                ));
                continue;
            }
            let done = if c.mount {
                // A live costlab reading the same mount keeps its own entry: only a mount no
                // live process holds is undone.
                super::unmount(&c.path).map(|()| {
                    format!(
                        "{}: unmounted (left mounted by costlab pid {}, which no longer runs)",
                        c.what, j.pid
                    )
                })
            } else {
                std::fs::write(&c.path, &c.old).map(|()| {
                    format!(
                        "{}: restored to {} (left at {} by costlab pid {}, which no longer runs)",
                        c.what, c.old, c.new, j.pid
                    )
                })
            };
            match done {
                Ok(line) => notes.push(line),
                Err(e) if denied(&e) => {
                    // Kept for a costlab that may: this one says which, and how, once.
                    unrestored.push(c.clone());
                    denied_whats.push(c.what.clone());
                }
                Err(e) if c.mount => notes.push(format!(
                    "{}: could NOT unmount {}: {e}; run as root: umount {}",
                    c.what,
                    c.path.display(),
                    c.path.display()
                )),
                Err(e) => notes.push(format!(
                    "{}: could NOT restore {} to {}: {e}; run as root: echo {} > {}",
                    c.what,
                    c.path.display(),
                    c.old,
                    c.old,
                    c.path.display()
                )),
            }
        }
        if !unrestored.is_empty() {
            let mut left = j.clone();
            // Gathered last change first: kept in the order they were made.
            left.changes = std::mem::take(&mut unrestored).into_iter().rev().collect();
            let _ = store(&path, &left);
            journals[i].1.changes.clear();
            continue;
        }
        let _ = std::fs::remove_file(&path);
        journals[i].1.changes.clear();
    }
    if !denied_whats.is_empty() {
        notes.push(needs_root(&denied_whats));
    }
    notes
}

/// Whether a restore failed for want of rights (another costlab, as root, can do it).
fn denied(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EPERM)
}

/// The one line for settings a dead costlab left changed that this one may not put back.
fn needs_root(whats: &[String]) -> String {
    let mut whats = whats.to_vec();
    whats.dedup();
    format!(
        "{} left changed by a costlab that no longer runs; this costlab has no rights to put {} back: run `sudo costlab restore`",
        whats.join(", "),
        if whats.len() == 1 { "it" } else { "them" }
    )
}

/// Root's journals, as a costlab without root sees them: what a dead costlab run as root left
/// changed, in one line naming it and `sudo costlab restore` (nothing is touched).
fn left_for_root(root_dir: &Path) -> Option<String> {
    let whats: Vec<String> = std::fs::read_dir(root_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| load(&p))
        .filter(|j| !alive(j))
        .flat_map(|j| j.changes.into_iter().map(|c| c.what))
        .collect();
    (!whats.is_empty()).then(|| needs_root(&whats))
}

/// Hand the value this process would put back at `path` (`old`) to a live costlab that changed
/// the same setting after this one did (its entry found `new`, this one's value, as its old
/// one): that process restores `old` when it ends, and this one leaves the setting as it is,
/// so two costlabs that change one setting at once put back the value from before both.
/// Returns that process's pid; None where none runs (restore as usual).
pub fn hand_over(path: &Path, old: &str, new: &str) -> Option<u32> {
    hand_over_in(&dir(), path, old, new)
}

fn hand_over_in(d: &Path, path: &Path, old: &str, new: &str) -> Option<u32> {
    let _l = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let files: Vec<PathBuf> = std::fs::read_dir(d)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    let _lock = lock(d).ok()?;
    let me = std::process::id();
    for p in files {
        let Some(mut j) = load(&p) else {
            continue;
        };
        if j.pid == me || !alive(&j) {
            continue;
        }
        let later = j
            .changes
            .iter_mut()
            .find(|x| !x.mount && x.path == path && x.old == new);
        if let Some(x) = later {
            x.old = old.to_string();
            if store(&p, &j).is_ok() {
                return Some(j.pid);
            }
        }
    }
    None
}

/// Journals of other costlab processes that still run, for `costlab restore` to list.
pub fn live_others() -> Vec<Journal> {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .flatten()
        .filter_map(|e| load(&e.path()))
        .filter(|j| j.pid != me && alive(j))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_journal(d: &Path, pid: u32, start: u64, changes: Vec<Entry>) -> PathBuf {
        let p = d.join(format!("{pid}.json"));
        store(
            &p,
            &Journal {
                pid,
                start,
                command: "costlab mem latency".into(),
                changes,
            },
        )
        .unwrap();
        p
    }

    fn entry(id: u64, path: &Path, old: &str, new: &str) -> Entry {
        Entry {
            id,
            path: path.to_path_buf(),
            old: old.into(),
            new: new.into(),
            what: "2m hugepage pool".into(),
            mount: false,
        }
    }

    /// A pid that does not run: past the kernel's pid_max default range.
    const DEAD: u32 = 4_000_000;

    #[test]
    fn a_dead_process_journal_is_restored_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let setting = d.path().join("nr_hugepages");
        std::fs::write(&setting, "1024").unwrap();
        let j = write_journal(d.path(), DEAD, 1, vec![entry(1, &setting, "0", "1024")]);
        let notes = recover_in(d.path());
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "0");
        assert!(!j.exists());
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with(
                "2m hugepage pool: restored to 0 (left at 1024 by costlab pid 4000000"
            ),
            "{notes:?}"
        );
        assert!(recover_in(d.path()).is_empty());
    }

    #[test]
    fn a_journal_from_before_mounts_reads_its_changes_as_settings() {
        let old = r#"{"pid": 7, "start": 1, "command": "costlab mem", "changes": [
            {"id": 1, "path": "/x", "old": "0", "new": "512", "what": "2m hugepage pool"}]}"#;
        let j: Journal = serde_json::from_str(old).unwrap();
        assert!(!j.changes[0].mount);
        // A setting's entry is written as before: no `mount` key.
        assert!(!serde_json::to_string(&j).unwrap().contains("mount"));
        let m = Entry {
            mount: true,
            ..j.changes[0].clone()
        };
        assert!(serde_json::to_string(&m)
            .unwrap()
            .contains("\"mount\":true"));
    }

    #[test]
    fn a_reused_pid_does_not_make_a_journal_live() {
        let d = tempfile::tempdir().unwrap();
        let setting = d.path().join("s");
        std::fs::write(&setting, "9").unwrap();
        // pid 1 runs, but it was not started at tick 1 + u64 noise.
        let start = start_time(1).unwrap_or(0) + 12345;
        write_journal(d.path(), 1, start, vec![entry(1, &setting, "3", "9")]);
        recover_in(d.path());
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "3");
    }

    #[test]
    fn a_live_process_journal_is_never_touched() {
        let d = tempfile::tempdir().unwrap();
        let setting = d.path().join("s");
        std::fs::write(&setting, "512").unwrap();
        // Our parent test harness process is alive: use our own pid's parent.
        let ppid = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
        let j = write_journal(
            d.path(),
            ppid,
            start_time(ppid).unwrap(),
            vec![entry(1, &setting, "0", "512")],
        );
        assert!(recover_in(d.path()).is_empty());
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "512");
        assert!(j.exists());
    }

    #[test]
    fn a_change_a_live_costlab_made_after_this_one_is_handed_the_older_value() {
        // A set THP madvise -> always; live B then found always and set always. A ending first
        // must not write madvise under B: B is handed madvise to restore when it ends.
        let d = tempfile::tempdir().unwrap();
        let setting = d.path().join("enabled");
        let ppid = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
        let live = write_journal(
            d.path(),
            ppid,
            start_time(ppid).unwrap(),
            vec![entry(3, &setting, "always", "always")],
        );
        assert_eq!(
            hand_over_in(d.path(), &setting, "madvise", "always"),
            Some(ppid)
        );
        assert_eq!(load(&live).unwrap().changes[0].old, "madvise");
        // B ending first finds A's entry, whose old value is not B's: nothing handed over, B
        // restores its own (A's) value as usual.
        let other = d.path().join("nr_hugepages");
        write_journal(
            d.path(),
            ppid,
            start_time(ppid).unwrap(),
            vec![entry(4, &other, "0", "512")],
        );
        assert_eq!(hand_over_in(d.path(), &other, "512", "1024"), None);
        // A dead process's journal is never handed anything.
        write_journal(d.path(), DEAD, 1, vec![entry(5, &other, "1024", "1024")]);
        assert_eq!(hand_over_in(d.path(), &other, "512", "1024"), None);
    }

    #[test]
    fn a_stale_change_under_a_live_one_is_handed_over() {
        // Dead A raised the pool 0 -> 512; live B raised it 512 -> 1024 and will restore 512.
        // Recovering A must not write 0 under B's feet; B must restore 0 when it ends.
        let d = tempfile::tempdir().unwrap();
        let setting = d.path().join("nr_hugepages");
        std::fs::write(&setting, "1024").unwrap();
        write_journal(d.path(), DEAD, 1, vec![entry(1, &setting, "0", "512")]);
        let ppid = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
        let live = write_journal(
            d.path(),
            ppid,
            start_time(ppid).unwrap(),
            vec![entry(7, &setting, "512", "1024")],
        );
        let notes = recover_in(d.path());
        assert_eq!(std::fs::read_to_string(&setting).unwrap(), "1024");
        let j = load(&live).unwrap();
        assert_eq!(j.changes[0].old, "0");
        assert!(notes[0].contains("will restore it to 0"), "{notes:?}");
    }
}
