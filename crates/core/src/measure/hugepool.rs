//! The kernel's hugetlb pools as a mapping sees them: a pool's size and free pages, and the fix
//! for a pool too small for a region. Here, below `machine`, because mapping a region
//! (`measure::region`) needs it; `machine::pages` reads the rest of the page settings.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where the kernel keeps its hugetlb pools.
pub const SYSFS_HUGEPAGES: &str = "/sys/kernel/mm/hugepages";

/// A pool's size and the pages free for a new mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolState {
    pub total: u64,
    pub free: u64,
}

/// The sysfs folder of the pool of `page` bytes: hugepages-2048kB.
pub fn pool_dir(root: &Path, page: u64) -> PathBuf {
    root.join(format!("hugepages-{}kB", page / 1024))
}

/// The pool of `page` bytes, or None when the kernel has no such pool.
pub fn read_pool(root: &Path, page: u64) -> Result<Option<PoolState>> {
    let dir = pool_dir(root, page);
    if !dir.is_dir() {
        return Ok(None);
    }
    let num = |name: &str| -> Result<u64> {
        let text = std::fs::read_to_string(dir.join(name))
            .with_context(|| format!("reading {}", dir.join(name).display()))?
            .trim()
            .to_string();
        text.parse::<u64>()
            .map_err(|_| anyhow::anyhow!("{}: not a number: '{text}'", dir.join(name).display()))
    };
    // Pages another process has reserved (mapped, not yet touched) still count as free in
    // free_hugepages but cannot be had: subtract them.
    let resv = if dir.join("resv_hugepages").exists() {
        num("resv_hugepages")?
    } else {
        0
    };
    Ok(Some(PoolState {
        total: num("nr_hugepages")?,
        free: num("free_hugepages")?.saturating_sub(resv),
    }))
}

/// The fix for a short pool, as one clause: the command, or the flag that runs it for us.
pub fn fix_hint(page: u64, needed: u64) -> String {
    let root = Path::new(SYSFS_HUGEPAGES);
    let total = read_pool(root, page)
        .ok()
        .flatten()
        .map_or(needed, |p| p.total + needed.saturating_sub(p.free));
    format!(
        "reserve them with: echo {total} > {} (as root), or add --reserve-hugepages",
        pool_dir(root, page).join("nr_hugepages").display()
    )
}
