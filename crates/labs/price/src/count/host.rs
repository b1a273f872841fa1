//! What counting needs of the host: root, a cgroup v2 hierarchy and tracefs
//! (mounted for the run where it is not); each missing one said as one line naming the fix.

use std::path::{Path, PathBuf};

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::machine::restore::{self, SettingGuard};

/// The mount point of a file system type in /proc/mounts text.
pub fn mount_point(mounts: &str, fstype: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == fstype).then(|| PathBuf::from(f[1]))
    })
}

pub(super) fn mounts() -> String {
    std::fs::read_to_string("/proc/mounts").unwrap_or_default()
}

/// Why counting cannot start here, as one line naming the fix; None when it can.
pub fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("costlab price counts in the kernel with BPF and needs root: run it with sudo (or as root)".into());
    }
    if mount_point(&mounts(), "cgroup2").is_none() {
        return Some("costlab price needs a cgroup v2 hierarchy: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified)".into());
    }
    None
}

/// The first `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    })
}

pub(super) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// tracefs, mounted for the run (through the restore journal) where it is not mounted.
pub fn tracefs() -> Result<(PathBuf, Option<SettingGuard>)> {
    let m = mounts();
    if let Some(p) = mount_point(&m, "tracefs") {
        return Ok((p, None));
    }
    let at = PathBuf::from("/sys/kernel/tracing");
    let guard = restore::mount_for_run(&at, "tracefs", "tracefs at /sys/kernel/tracing")
        .map_err(|e| {
            usage(format!(
                "cannot mount tracefs at /sys/kernel/tracing ({}): mount it (mount -t tracefs nodev /sys/kernel/tracing) and run costlab price again",
                costlab_core::error::one_line(&e)
            ))
        })?;
    Ok((at, Some(guard)))
}
