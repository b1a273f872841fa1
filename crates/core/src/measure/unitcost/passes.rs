//! The create-pass term: what a create on ext4 without a journal pays for each recently
//! deleted inode it passes over to find a free one.

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::fsops::{fs_of, os_err, timed, Scratch};
use crate::measure::{cancel, SampleSpec};

/// Files made and deleted before each timed batch of the create-pass term.
pub const PASS_DELETED: usize = 500;
/// Creates timed in each batch.
const PASS_TIMED: usize = 32;

/// Whether `dir` is on ext4 without a journal, whose inode allocator passes over the inodes
/// deleted in the last seconds (fs/ext4/ialloc.c, `recently_deleted`): sysfs names the
/// journal's thread of each ext4 file system, `<none>` where it has none.
pub fn passes_deleted_inodes(dir: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    if fs_of(dir)? != "ext4" {
        return Ok(false);
    }
    let dev = std::fs::metadata(dir)
        .with_context(|| format!("stat {}", dir.display()))?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
        .with_context(|| {
            format!(
                "{}: no block device {major}:{minor} in sysfs",
                dir.display()
            )
        })?;
    let name = uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .with_context(|| format!("block device {major}:{minor}: sysfs names no device"))?;
    let journal = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task"))
        .with_context(|| format!("reading /sys/fs/ext4/{name}/journal_task"))?;
    Ok(journal.trim() == "<none>")
}

/// CPU ns a create spends on each recently deleted inode it passes over, on ext4 without a
/// journal. A sample is two batches in a fresh scratch directory at the file system's root
/// (`Scratch::fresh`: a group of its own, so its deletions are the only ones passed): each makes and deletes
/// `PASS_DELETED` files, waits 1.1 s (an inode is passed over from the second after its
/// deletion: its dtime is in whole seconds) and times `PASS_TIMED` creates, each alone. The
/// second batch's creates pass over `PASS_DELETED` more inodes than the first's (both pass
/// whatever was deleted before, on this file system too): the difference of their medians,
/// per inode. About 2.5 s a sample; three samples at most.
pub fn create_pass(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    if !passes_deleted_inodes(dir)? {
        bail!(
            "{} is not on ext4 without a journal: its creates pass over no deleted inodes",
            dir.display()
        );
    }
    let mut k = 0usize;
    // Two batches in `s`: the second's creates pass over `PASS_DELETED` more inodes.
    let mut batch = |s: &Scratch| -> Result<f64> {
        k += 1;
        let names: Vec<CString> = (0..PASS_DELETED)
            .map(|i| s.c(&format!("d{k}-{i}")))
            .collect();
        for p in &names {
            // SAFETY: NUL-terminated paths in this scratch directory.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
            if fd < 0 {
                return Err(os_err("create"));
            }
            // SAFETY: fd was just opened here.
            unsafe { libc::close(fd) };
        }
        for p in &names {
            // SAFETY: as above.
            if unsafe { libc::unlink(p.as_ptr()) } != 0 {
                return Err(os_err("unlink"));
            }
        }
        let until = Instant::now() + Duration::from_millis(1100);
        while Instant::now() < until {
            cancel::check()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut ns = Vec::with_capacity(PASS_TIMED);
        for i in 0..PASS_TIMED {
            let p = s.c(&format!("t{k}-{i}"));
            let mut fd = -1;
            ns.push(timed(|| {
                // SAFETY: as above.
                fd = unsafe { libc::open(p.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
                if fd < 0 {
                    return Err(os_err("create"));
                }
                Ok(())
            })?);
            // SAFETY: fd was opened above.
            unsafe { libc::close(fd) };
        }
        Ok(crate::measure::stats::median(&ns))
    };
    let mut out = Vec::new();
    for _ in 0..spec.samples.clamp(1, 3) {
        // Each sample in a group of its own: an earlier sample's deletions, once their
        // inode-table block is written back, stop being passed over 5 s after them.
        let s = Scratch::fresh(dir)?;
        let first = batch(&s)?;
        let second = batch(&s)?;
        out.push(((second - first) / PASS_DELETED as f64).max(0.0));
    }
    Ok(out)
}
