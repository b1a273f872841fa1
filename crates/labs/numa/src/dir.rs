//! numa-knobs' page-cache folder (`--dir`), checked before anything runs: the zone-reclaim
//! case fills the local node with page cache written to a file there.

use std::path::Path;

use anyhow::Result;

use costlab_core::error::usage;

/// File systems with no page cache to fill, or where no file can be created: proc, sysfs,
/// devpts, cgroup (1 and 2), debugfs, tracefs, bpf, securityfs, configfs, pstore, efivarfs,
/// mqueue, hugetlbfs (statfs f_type magics, linux/magic.h).
const NO_PAGE_CACHE: [(u64, &str); 14] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x1cd1, "devpts"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0xcafe_4a11, "bpf"),
    (0x7363_6673, "securityfs"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0x1980_0202, "mqueue"),
    (0x9584_58f6, "hugetlbfs"),
];

/// The page-cache directory: a folder (not missing, not a file) where costlab may create its
/// fill file, on a file system with a page cache. Checked before anything runs.
pub fn check_dir(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(usage(
            "--dir is empty: give a writable directory on a disk, like /var/tmp",
        ));
    }
    let d = dir.display();
    let meta = std::fs::metadata(dir).map_err(|e| {
        usage(format!(
            "--dir {d}: {}; give an existing writable directory on a disk, like /var/tmp",
            match e.kind() {
                std::io::ErrorKind::NotFound => "no such directory".to_string(),
                _ => e.to_string(),
            }
        ))
    })?;
    if !meta.is_dir() {
        return Err(usage(format!(
            "--dir {d}: not a directory; give a writable directory on a disk, like /var/tmp"
        )));
    }
    let fs = rustix::fs::statfs(dir)
        .map(|s| s.f_type as u64)
        .unwrap_or(0);
    if let Some((_, name)) = NO_PAGE_CACHE.iter().find(|(m, _)| *m == fs) {
        return Err(usage(format!(
            "--dir {d}: a {name} file system, which has no page cache to fill; give a writable directory on a disk, like /var/tmp"
        )));
    }
    // tmpfs and ramfs pages are shared memory, which reclaim cannot drop without swap: the
    // fill would not be page cache, and zone-reclaim would find nothing to reclaim.
    if let Some(name) = match fs {
        0x0102_1994 => Some("tmpfs"),
        0x8584_58f6 => Some("ramfs"),
        _ => None,
    } {
        return Err(usage(format!(
            "--dir {d}: a {name} file system, whose pages are memory that reclaim cannot drop, so zone-reclaim would have no page cache to reclaim; give a writable directory on a disk, like /var/tmp"
        )));
    }
    if let Err(e) = rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    ) {
        let why = match e {
            rustix::io::Errno::ROFS => "on a read-only file system".to_string(),
            e => format!("not writable ({e})"),
        };
        return Err(usage(format!(
            "--dir {d}: {why}; give a writable directory on a disk, like /var/tmp"
        )));
    }
    Ok(())
}
