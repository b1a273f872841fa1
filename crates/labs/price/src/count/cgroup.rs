//! The cgroup v2 the priced program joins, so that everything it starts is counted with it;
//! created under costlab's own cgroup and removed after, with those left by killed runs.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::host::{mount_point, mounts};
use costlab_core::error::usage;
use costlab_core::machine::restore;

/// A cgroup v2 directory for the program, under costlab's own cgroup; removed on drop.
/// Its name holds costlab's pid (how a later costlab finds those a killed one left), so one
/// process has one at a time: a second `create` waits for the first to be dropped (tests run
/// on threads of one process). Never create one while holding another.
pub struct Cgroup {
    pub dir: PathBuf,
    _one: std::sync::MutexGuard<'static, ()>,
}

/// Held by the live `Cgroup` of this process.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Cgroup {
    pub fn create() -> Result<Cgroup> {
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let root = mount_point(&mounts(), "cgroup2")
            .ok_or_else(|| usage("no cgroup v2 hierarchy is mounted: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified)"))?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_string))
            .unwrap_or_else(|| "/".into());
        let dir = root
            .join(own.trim_start_matches('/'))
            .join(format!("costlab-price-{}", std::process::id()));
        sweep_stale(dir.parent().unwrap_or(&root));
        std::fs::create_dir(&dir).map_err(|e| {
            usage(format!(
                "cannot create the cgroup {} ({e}): costlab price needs root and a writable cgroup v2 tree",
                dir.display()
            ))
        })?;
        Ok(Cgroup { dir, _one: one })
    }
}

impl Cgroup {
    /// Its path under the cgroup v2 mount (what perf -G takes).
    pub fn rel(&self) -> Option<String> {
        let root = mount_point(&mounts(), "cgroup2")?;
        crate::samples::cgroup_rel(&self.dir, &root)
    }
}

/// Remove the empty cgroups of costlab processes that no longer run (killed with SIGKILL
/// before they could remove their own). One that still holds processes stays.
fn sweep_stale(parent: &Path) {
    for d in restore::journal::left_by_dead(parent, "costlab-price-") {
        let _ = std::fs::remove_dir(d);
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Processes the program left running keep the cgroup; their count is said elsewhere.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
