//! Hugetlb pools: are there enough free 2 MiB / 1 GiB pages for the run, and if not, either say
//! the exact command that reserves them or (with --reserve-hugepages) raise the pool for the
//! run through `machine::restore`, so the old size comes back on exit, on error and on Ctrl-C.

use std::path::Path;

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::machine::pages::{pool_dir, read_pool, PoolState};
use costlab_core::machine::restore::{self, SettingGuard};
use costlab_core::measure::sizes::human_size;

/// A pool raised for the run. Dropping it puts the old size back.
pub struct Reservation {
    guard: SettingGuard,
    kind: String,
    free_before: u64,
    reserved: u64,
    old_total: u64,
}

impl Reservation {
    /// Put the pool back now and return the run's note
    /// ("2m pages: pool had 0 free; reserved 512 for the run, restored to 0").
    pub fn finish(self) -> String {
        let Reservation {
            guard,
            kind,
            free_before,
            reserved,
            old_total,
        } = self;
        match guard.restore() {
            Some(n) if n.contains("could NOT") => format!(
                "{kind} pages: pool had {free_before} free; reserved {reserved} for the run; {n}"
            ),
            _ => format!(
                "{kind} pages: pool had {free_before} free; reserved {reserved} for the run, restored to {old_total}"
            ),
        }
    }
}

/// Make sure the pool of `page` bytes under `root` has `needed` free pages. `kind` names the
/// page kind in messages ("2m"). Returns a reservation when the pool had to be raised.
pub fn ensure(
    root: &Path,
    kind: &str,
    page: u64,
    needed: u64,
    reserve: bool,
) -> Result<Option<Reservation>> {
    let size = human_size(page);
    let state = read_pool(root, page)?.ok_or_else(|| {
        usage(format!(
            "{kind} pages: this kernel has no {size} hugepage pool ({} is missing); use --pages 4k or thp",
            pool_dir(root, page).display()
        ))
    })?;
    if state.free >= needed {
        return Ok(None);
    }
    let short = needed - state.free;
    let new_total = state.total + short;
    let nr = pool_dir(root, page).join("nr_hugepages");
    if !reserve {
        return Err(usage(format!(
            "{kind} pages: the {size} hugepage pool has {} free, the run needs {needed}; reserve them with: echo {new_total} > {} (as root), or add --reserve-hugepages",
            state.free,
            nr.display()
        )));
    }
    let guard = restore::change_setting(&nr, &new_total.to_string(), &format!("{kind} hugepage pool"))
        .map_err(|e| {
            let denied = e
                .chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(|io| io.kind() == std::io::ErrorKind::PermissionDenied);
            if denied {
                usage(format!(
                    "{kind} pages: --reserve-hugepages needs root to write {}; run as root, or ask an admin to run: echo {new_total} > {}",
                    nr.display(),
                    nr.display()
                ))
            } else {
                e.context(format!("raising the {size} hugepage pool"))
            }
        })?;
    let after = read_pool(root, page)?.unwrap_or(PoolState { total: 0, free: 0 });
    if after.free < needed {
        let got = after.total.saturating_sub(state.total);
        drop(guard); // the pool goes back before we report
        let why = if page >= 1 << 30 {
            format!(
                "free memory is too fragmented for {size} pages; reserve them at boot (kernel command line: hugepagesz=1G hugepages={needed}) or use --pages 2m"
            )
        } else {
            "free memory is too fragmented or too small; free some memory or use smaller --sizes"
                .to_string()
        };
        return Err(usage(format!(
            "{kind} pages: asked the kernel for {short} more {size} pages but it found only {got}; {why}"
        )));
    }
    Ok(Some(Reservation {
        guard,
        kind: kind.to_string(),
        free_before: state.free,
        reserved: short,
        old_total: state.total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    fn fake(total: u64, free: u64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool_dir(dir.path(), 2 << 20);
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::write(pool.join("nr_hugepages"), format!("{total}\n")).unwrap();
        std::fs::write(pool.join("free_hugepages"), format!("{free}\n")).unwrap();
        dir
    }

    #[test]
    fn pages_reserved_by_others_are_not_free() {
        let dir = fake(8, 6);
        let pool = pool_dir(dir.path(), 2 << 20);
        std::fs::write(pool.join("resv_hugepages"), "4\n").unwrap();
        assert_eq!(
            read_pool(dir.path(), 2 << 20).unwrap(),
            Some(PoolState { total: 8, free: 2 })
        );
    }

    fn nr(dir: &tempfile::TempDir) -> String {
        restore::read_setting(&pool_dir(dir.path(), 2 << 20).join("nr_hugepages")).unwrap()
    }

    #[test]
    fn pools_are_read_and_named_like_sysfs() {
        let dir = fake(8, 3);
        assert_eq!(
            pool_dir(dir.path(), 1 << 30).file_name().unwrap(),
            "hugepages-1048576kB"
        );
        assert_eq!(
            read_pool(dir.path(), 2 << 20).unwrap(),
            Some(PoolState { total: 8, free: 3 })
        );
        assert_eq!(read_pool(dir.path(), 1 << 30).unwrap(), None);
    }

    #[test]
    fn enough_free_pages_change_nothing() {
        let dir = fake(8, 8);
        assert!(ensure(dir.path(), "2m", 2 << 20, 8, true)
            .unwrap()
            .is_none());
        assert_eq!(nr(&dir), "8");
    }

    #[test]
    fn a_short_pool_names_the_exact_command() {
        let dir = fake(2, 1);
        let e = ensure(dir.path(), "2m", 2 << 20, 5, false).err().unwrap();
        assert_eq!(exit_code(&e), 2);
        let msg = e.to_string();
        let want = format!(
            "echo 6 > {}",
            pool_dir(dir.path(), 2 << 20).join("nr_hugepages").display()
        );
        assert!(msg.contains(&want), "{msg}");
        assert!(msg.contains("--reserve-hugepages"), "{msg}");
        assert_eq!(nr(&dir), "2");
    }

    #[test]
    fn a_pool_the_kernel_cannot_grow_is_put_back() {
        // A fake sysfs never frees pages when nr_hugepages rises: like fragmented memory.
        let dir = fake(0, 0);
        let e = ensure(dir.path(), "2m", 2 << 20, 4, true).err().unwrap();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("fragmented"), "{e}");
        assert_eq!(nr(&dir), "0");
    }

    #[test]
    fn a_reservation_is_restored_when_finished() {
        let dir = fake(0, 0);
        let pool = pool_dir(dir.path(), 2 << 20);
        // Play the kernel: the pages appear as soon as the pool is raised.
        std::fs::write(pool.join("free_hugepages"), "4").unwrap();
        std::fs::write(pool.join("nr_hugepages"), "0").unwrap();
        // free already covers it: nothing to do.
        assert!(ensure(dir.path(), "2m", 2 << 20, 4, true)
            .unwrap()
            .is_none());
        std::fs::write(pool.join("free_hugepages"), "0").unwrap();
        let guard =
            restore::change_setting(&pool.join("nr_hugepages"), "4", "2m hugepage pool").unwrap();
        let r = Reservation {
            guard,
            kind: "2m".into(),
            free_before: 0,
            reserved: 4,
            old_total: 0,
        };
        assert_eq!(nr(&dir), "4");
        assert_eq!(
            r.finish(),
            "2m pages: pool had 0 free; reserved 4 for the run, restored to 0"
        );
        assert_eq!(nr(&dir), "0");
    }

    #[test]
    fn a_missing_pool_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = ensure(dir.path(), "1g", 1 << 30, 1, false).err().unwrap();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("no 1 GiB hugepage pool"), "{e}");
    }
}
