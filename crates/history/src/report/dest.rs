//! Output paths checked before anything is measured: a path that cannot be written is bad
//! input (exit 2 at once), not a failure found after minutes of measuring.

use std::path::{Path, PathBuf};

use anyhow::Result;

use costlab_core::error::usage;

/// The nearest ancestor of `path` (itself included) that exists.
fn existing_ancestor(path: &Path) -> PathBuf {
    let mut p = if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path.to_path_buf()
    };
    loop {
        if p.exists() {
            return p;
        }
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent.to_path_buf(),
            _ => return PathBuf::from("."),
        }
    }
}

/// Can a file be created in `dir`? Tried for real (create and remove a probe file), since
/// permission bits say nothing for root on /proc or a read-only mount.
fn dir_takes_files(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".costlab-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Check that `dest` (a file path, or "-" for stdout) can be written, naming `flag` if not.
pub fn check_file(flag: &str, dest: &str) -> Result<()> {
    if dest == "-" {
        return Ok(());
    }
    let path = Path::new(dest);
    if path.is_dir() {
        return Err(usage(format!(
            "{flag} {dest} is a directory: give a file path"
        )));
    }
    if path.exists() {
        return std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(|_| ())
            .map_err(|e| usage(format!("cannot write {flag} {dest}: {e}")));
    }
    // A file is written into its folder as it is: costlab creates no folder for it, so a
    // missing one is refused now, not after the run.
    let parent = path.parent().unwrap_or(Path::new("."));
    if !parent.as_os_str().is_empty() && !parent.exists() {
        return Err(usage(format!(
            "cannot write {flag} {dest}: no folder {}: create it (mkdir -p {}) or give another path",
            parent.display(),
            parent.display()
        )));
    }
    check_creatable(flag, dest, parent)
}

/// Check that `dir` exists as a writable directory or can be created.
pub fn check_dir(flag: &str, dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{flag} {} is a file: give a directory",
            dir.display()
        )));
    }
    check_creatable(flag, &dir.display().to_string(), dir)
}

fn check_creatable(flag: &str, dest: &str, dir: &Path) -> Result<()> {
    let base = existing_ancestor(dir);
    if !base.is_dir() {
        return Err(usage(format!(
            "cannot write {flag} {dest}: {} is not a directory",
            base.display()
        )));
    }
    dir_takes_files(&base).map_err(|e| {
        usage(format!(
            "cannot write {flag} {dest}: {} does not take new files ({e}); pick another path",
            base.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn proc_and_missing_roots_are_refused_as_bad_input() {
        let e = check_file("--json", "/proc/nope.json").unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("--json /proc/nope.json"), "{e}");
        assert!(check_file("--out", "/proc/nope/x.csv").is_err());
        assert!(check_dir("--out", Path::new("/proc/x")).is_err());
    }

    #[test]
    fn writable_places_pass_and_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.json");
        check_file("--json", f.to_str().unwrap()).unwrap();
        check_file("--json", "-").unwrap();
        check_dir("--out", &dir.path().join("new/deeper")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        std::fs::write(&f, "x").unwrap();
        check_file("--json", f.to_str().unwrap()).unwrap();
        assert!(check_dir("--out", &f).is_err());
        assert!(check_file("--json", dir.path().to_str().unwrap()).is_err());
        let missing = dir.path().join("no/such/a.json");
        let e = check_file("--json", missing.to_str().unwrap()).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("no folder"), "{e}");
        assert!(!dir.path().join("no").exists());
    }
}
