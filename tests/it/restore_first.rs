//! Any costlab invocation first restores what a dead costlab left changed: `--version`,
//! `--help`, `help`, a bad flag and a bad command included, not only a command that parsed.
//! Without the rights to restore, one line names the setting and `sudo costlab restore`, and
//! the journal is kept for a costlab that may.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

/// A pid that ran and no longer runs (its process was reaped).
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// A journal in `dir` of a dead costlab that changed `setting` from `old` to `new`.
fn stale_journal(dir: &Path, setting: &Path, old: &str, new: &str) -> PathBuf {
    let pid = dead_pid();
    let j = serde_json::json!({
        "pid": pid,
        "start": 1,
        "command": "costlab mem --reserve-hugepages",
        "changes": [{"id": 1, "path": setting, "old": old, "new": new, "what": "test pool"}],
    });
    let file = dir.join(format!("{pid}.json"));
    std::fs::write(&file, j.to_string()).unwrap();
    file
}

/// Each kind of invocation, with the exit status it has.
const INVOCATIONS: &[(&[&str], i32)] = &[
    (&["--version"], 0),
    (&["--help"], 0),
    (&["help"], 0),
    (&["mem", "--help"], 0),
    (&["--no-such-flag"], 2),
    (&["no-such-command"], 2),
    (&["mem", "--no-such-flag"], 2),
    (&[], 2),
];

#[test]
fn every_invocation_first_restores_what_a_dead_costlab_left() {
    for (args, exit) in INVOCATIONS {
        let dir = tempfile::tempdir().unwrap();
        let setting = dir.path().join("setting");
        std::fs::write(&setting, "128").unwrap();
        let journals = dir.path().join("journal");
        std::fs::create_dir(&journals).unwrap();
        let file = stale_journal(&journals, &setting, "0", "128");
        let out = common::command()
            .args(*args)
            .env("COSTLAB_JOURNAL_DIR", &journals)
            .env("COSTLAB_DB", dir.path().join("h.db"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*exit), "{args:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(&setting).unwrap(),
            "0",
            "{args:?} did not restore: {err}"
        );
        assert!(!file.exists(), "{args:?} left the journal");
        let said: Vec<&str> = err.lines().filter(|l| l.contains("test pool")).collect();
        assert_eq!(said.len(), 1, "{args:?}: {err}");
        assert!(said[0].contains("restored to 0"), "{args:?}: {err}");
        assert!(!dir.path().join("h.db").exists(), "{args:?} made a history");
    }
}

#[test]
fn without_the_rights_to_restore_one_line_says_sudo_costlab_restore() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let name = "without_the_rights_to_restore_one_line_says_sudo_costlab_restore";
    if !common::is_root() {
        common::skip::skipped(name, "needs root to run costlab as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The setting: root's, not writable by the user costlab runs as.
    let setting = dir.path().join("setting");
    std::fs::write(&setting, "always").unwrap();
    std::fs::set_permissions(&setting, std::fs::Permissions::from_mode(0o644)).unwrap();
    let journals = dir.path().join("journal");
    std::fs::create_dir(&journals).unwrap();
    std::fs::set_permissions(&journals, std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = stale_journal(&journals, &setting, "madvise", "always");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    // The binary must be reachable by `nobody`: skip where the checkout is not.
    let probe = Command::new(common::BIN)
        .arg("--version")
        .uid(65534)
        .gid(65534)
        .env("COSTLAB_JOURNAL_DIR", dir.path().join("none"))
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        common::skip::skipped(name, "the user nobody cannot run the test binary here");
        return;
    }
    let out = Command::new(common::BIN)
        .arg("--version")
        .uid(65534)
        .gid(65534)
        .env("COSTLAB_JOURNAL_DIR", &journals)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("test pool"), "{err}");
    assert!(err.contains("`sudo costlab restore`"), "{err}");
    assert_eq!(std::fs::read_to_string(&setting).unwrap(), "always");
    assert!(
        file.exists(),
        "the journal is kept for a costlab that may restore"
    );

    // With the rights (root here), the next invocation of any kind restores it.
    let out = common::command()
        .arg("--help")
        .env("COSTLAB_JOURNAL_DIR", &journals)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&setting).unwrap(), "madvise");
    assert!(!file.exists());
}
