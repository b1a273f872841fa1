//! Changing a system setting for the length of a run, and always putting it back.
//!
//! Every change is recorded in one process-wide list before it is made. It is undone when its
//! guard drops (normal exit and error paths unwind through it) and, for Ctrl-C, by
//! `restore_all` from the signal handler. Restoring twice is harmless: each entry is taken
//! out of the list by whoever restores it first.
//!
//! Each change is also written to a restore journal on disk before it is made (`journal`):
//! a costlab killed with SIGKILL cannot run its guards, so the next costlab command finds the
//! journal of a process that no longer runs and restores what it left.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};

struct Change {
    id: u64,
    path: PathBuf,
    old: String,
    /// The value written (for a hand-over to a costlab that changed the setting after it).
    new: String,
    what: String,
    /// A mount made for the run (undone by unmounting `path`), not a value written.
    mount: bool,
}

static CHANGES: Mutex<Vec<Change>> = Mutex::new(Vec::new());
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
static RESTORED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A setting changed for the run; dropping it writes the old value back.
#[must_use = "the setting is restored when this guard drops"]
pub struct SettingGuard {
    id: u64,
}

impl SettingGuard {
    /// Restore now (same as dropping) and return the note that says what was done.
    pub fn restore(self) -> Option<String> {
        restore_one(self.id)
    }
}

impl Drop for SettingGuard {
    fn drop(&mut self) {
        restore_one(self.id);
    }
}

/// Read a setting file (sysfs/procfs), trimmed.
pub fn read_setting(path: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// Write `value` to the setting at `path`, remembering the old value. `what` names the setting
/// in notes ("2M hugepage pool").
pub fn change_setting(path: &Path, value: &str, what: &str) -> Result<SettingGuard> {
    let old = read_setting(path)?;
    change_from(path, old, value, what)
}

/// The chosen word of a sysfs choice file (`always [madvise] never` -> `madvise`); the text
/// itself when it has no bracketed word.
pub fn chosen(text: &str) -> String {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or(text.trim())
        .to_string()
}

/// Set a sysfs choice file (the THP mode: `always [madvise] never`) to `value`, remembering
/// the chosen word, which is what writing it back takes.
pub fn change_choice(path: &Path, value: &str, what: &str) -> Result<SettingGuard> {
    let old = chosen(&read_setting(path)?);
    change_from(path, old, value, what)
}

fn change_from(path: &Path, old: String, value: &str, what: &str) -> Result<SettingGuard> {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // On disk before the change: after a SIGKILL the next costlab restores it.
    journal::record(id, path, &old, value, what)
        .with_context(|| "writing the restore journal before changing a setting".to_string())?;
    // Record first: if the write lands and we are interrupted, the handler must know.
    CHANGES.lock().unwrap().push(Change {
        id,
        path: path.to_path_buf(),
        old,
        new: value.to_string(),
        what: what.to_string(),
        mount: false,
    });
    let wrote =
        crate::measure::cancel::in_kernel(&format!("setting the {what} to {value}"), || {
            std::fs::write(path, value)
        });
    if let Err(e) = wrote {
        CHANGES.lock().unwrap().retain(|c| c.id != id);
        journal::forget(id);
        return Err(e).with_context(|| format!("writing {value} to {}", path.display()));
    }
    Ok(SettingGuard { id })
}

/// Mount a file system of `fstype` at `path` for the run (tracefs for `costlab price`); it is
/// unmounted when the guard drops, and after a SIGKILL by the next costlab command: the
/// journal records the mount before it is made.
pub fn mount_for_run(path: &Path, fstype: &str, what: &str) -> Result<SettingGuard> {
    use std::os::unix::ffi::OsStrExt;
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    journal::record_mount(id, path, fstype, what)
        .with_context(|| "writing the restore journal before mounting".to_string())?;
    CHANGES.lock().unwrap().push(Change {
        id,
        path: path.to_path_buf(),
        old: "unmounted".into(),
        new: String::new(),
        what: what.to_string(),
        mount: true,
    });
    let target = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let fs = std::ffi::CString::new(fstype)?;
    // SAFETY: NUL-terminated strings that outlive the call; no mount data.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        CHANGES.lock().unwrap().retain(|c| c.id != id);
        journal::forget(id);
        return Err(e).with_context(|| format!("mounting {fstype} at {}", path.display()));
    }
    Ok(SettingGuard { id })
}

/// Unmount what `mount_for_run` mounted (lazily: a reader still inside lets go later).
pub(crate) fn unmount(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn restore_one(id: u64) -> Option<String> {
    let change = {
        let mut list = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
        let pos = list.iter().position(|c| c.id == id)?;
        list.remove(pos)
    };
    Some(write_back(change))
}

fn write_back(mut c: Change) -> String {
    // A stale journal of a killed costlab may have handed us its older value to restore.
    if let Some(old) = journal::old_value(c.id) {
        c.old = old;
    }
    if c.mount {
        let result = unmount(&c.path);
        journal::forget(c.id);
        let note = match result {
            Ok(()) => format!("{}: unmounted", c.what),
            Err(e) => format!(
                "{}: could NOT unmount {}: {e}; run: umount {}",
                c.what,
                c.path.display(),
                c.path.display()
            ),
        };
        RESTORED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(note.clone());
        return note;
    }
    // Another costlab changed the same setting after this one and still runs: it puts back
    // the value from before both when it ends; writing ours now would pull it from under it.
    if let Some(pid) = journal::hand_over(&c.path, &c.old, &c.new) {
        journal::forget(c.id);
        let note = format!(
            "{}: left at {} for costlab pid {pid}, which changed it after this one and still runs: it restores {} when it ends",
            c.what, c.new, c.old
        );
        RESTORED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(note.clone());
        return note;
    }
    let result = std::fs::write(&c.path, &c.old);
    journal::forget(c.id);
    let note = match result {
        Ok(()) => format!("{}: restored to {}", c.what, c.old),
        Err(e) => format!(
            "{}: could NOT restore {} to {}: {e}; run: echo {} > {}",
            c.what,
            c.path.display(),
            c.old,
            c.old,
            c.path.display()
        ),
    };
    RESTORED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(note.clone());
    note
}

/// Undo every change still in force (Ctrl-C handler, last-resort exit paths).
pub fn restore_all() -> Vec<String> {
    let all: Vec<Change> = std::mem::take(&mut *CHANGES.lock().unwrap_or_else(|p| p.into_inner()));
    all.into_iter().rev().map(write_back).collect()
}

/// Notes of every restore done so far in this process (for the run's notes).
pub fn restored_notes() -> Vec<String> {
    RESTORED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// How many changes are still in force.
pub fn pending() -> usize {
    CHANGES.lock().unwrap_or_else(|p| p.into_inner()).len()
}

pub mod journal;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_restores_on_drop_and_restore_all_on_interrupt() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("nr_hugepages");
        let b = dir.path().join("other");
        std::fs::write(&a, "0\n").unwrap();
        std::fs::write(&b, "7\n").unwrap();
        {
            let _g = change_setting(&a, "512", "2M hugepage pool").unwrap();
            assert_eq!(read_setting(&a).unwrap(), "512");
        }
        assert_eq!(read_setting(&a).unwrap(), "0");

        let g = change_setting(&b, "9", "other").unwrap();
        assert_eq!(read_setting(&b).unwrap(), "9");
        let notes = restore_all();
        assert!(
            notes.iter().any(|n| n == "other: restored to 7"),
            "{notes:?}"
        );
        assert_eq!(read_setting(&b).unwrap(), "7");
        // The guard dropping after restore_all must not write again.
        std::fs::write(&b, "8").unwrap();
        drop(g);
        assert_eq!(read_setting(&b).unwrap(), "8");
    }

    #[test]
    fn a_choice_file_is_restored_to_its_chosen_word() {
        assert_eq!(chosen("always [madvise] never"), "madvise");
        assert_eq!(chosen("512"), "512");
        let dir = tempfile::tempdir().unwrap();
        let thp = dir.path().join("enabled");
        std::fs::write(&thp, "always [madvise] never\n").unwrap();
        let g = change_choice(&thp, "always", "THP mode").unwrap();
        assert_eq!(read_setting(&thp).unwrap(), "always");
        assert_eq!(
            g.restore().as_deref(),
            Some("THP mode: restored to madvise")
        );
        assert_eq!(read_setting(&thp).unwrap(), "madvise");
    }

    #[test]
    fn a_failed_write_leaves_nothing_to_restore() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(change_setting(&missing, "1", "x").is_err());
    }
}
