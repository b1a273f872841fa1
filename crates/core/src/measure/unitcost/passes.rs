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

/// Wait 1.1 s, so that the inodes just deleted are passed over: an inode is passed over from
/// the second after its deletion (its dtime is in whole seconds; one freed in this very
/// second is taken again at once). Ctrl-C ends the wait.
pub fn wait_past_deletions() -> Result<()> {
    let until = Instant::now() + Duration::from_millis(1100);
    while Instant::now() < until {
        cancel::check()?;
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// One batch of the create-pass term.
struct Batch {
    deleted: (u64, u64),
    made: (u64, u64),
    median: f64,
}

/// Create `p` (open with O_CREAT, then closed): its inode number.
fn create_ino(p: &CString) -> Result<u64> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(p.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
    if fd < 0 {
        return Err(os_err("create"));
    }
    // SAFETY: an all-zero stat is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd was just opened; st is a valid stat.
    let rc = unsafe { libc::fstat(fd, &mut st) };
    // SAFETY: fd was opened above, closed once.
    unsafe { libc::close(fd) };
    if rc != 0 {
        return Err(os_err("fstat"));
    }
    Ok(st.st_ino)
}

/// CPU ns a create spends on each recently deleted inode it passes over, on ext4 without a
/// journal. A sample is two batches in a fresh scratch directory at the file system's root
/// (`Scratch::fresh`: a group of its own, so its deletions are the only ones passed): each makes and deletes
/// `PASS_DELETED` files, waits 1.1 s (an inode is passed over from the second after its
/// deletion: its dtime is in whole seconds) and times `PASS_TIMED` creates, each alone. The
/// second batch's creates pass over `PASS_DELETED` more inodes than the first's (both pass
/// whatever was deleted before, on this file system too): the difference of their medians,
/// per inode. A sample whose creates did not take the inodes after the deleted ones (in
/// order: deleted, made, deleted, made) is taken again in a new directory. About 2.5 s a
/// sample; three samples at most.
pub fn create_pass(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    if !passes_deleted_inodes(dir)? {
        bail!(
            "{} is not on ext4 without a journal: its creates pass over no deleted inodes",
            dir.display()
        );
    }
    let mut k = 0usize;
    // One batch in `s`: its deleted inodes' lowest and highest numbers, the timed creates'
    // lowest and highest, and the median create.
    let mut batch = |s: &Scratch| -> Result<Batch> {
        k += 1;
        let mut deleted = (u64::MAX, 0);
        for i in 0..PASS_DELETED {
            let ino = create_ino(&s.c(&format!("d{k}-{i}")))?;
            deleted = (deleted.0.min(ino), deleted.1.max(ino));
        }
        for i in 0..PASS_DELETED {
            let p = s.c(&format!("d{k}-{i}"));
            // SAFETY: a NUL-terminated path in this scratch directory.
            if unsafe { libc::unlink(p.as_ptr()) } != 0 {
                return Err(os_err("unlink"));
            }
        }
        wait_past_deletions()?;
        let mut ns = Vec::with_capacity(PASS_TIMED);
        let mut made = (u64::MAX, 0);
        for i in 0..PASS_TIMED {
            let p = s.c(&format!("t{k}-{i}"));
            let mut ino = 0;
            ns.push(timed(|| {
                ino = create_ino(&p)?;
                Ok(())
            })?);
            made = (made.0.min(ino), made.1.max(ino));
        }
        Ok(Batch {
            deleted,
            made,
            median: crate::measure::stats::median(&ns),
        })
    };
    let mut out = Vec::new();
    for _ in 0..spec.samples.clamp(1, 3) {
        let mut tries = 0;
        loop {
            // Each sample in a group of its own: an earlier sample's deletions, once their
            // inode-table block is written back, stop being passed over 5 s after them.
            let s = Scratch::fresh(dir)?;
            let (first, second) = (batch(&s)?, batch(&s)?);
            // In order, each run of inodes after the last: the first batch's creates passed
            // its deletions, the second's passed both (whatever else was deleted in the
            // group before is passed by both alike).
            let in_order = first.deleted.1 < first.made.0
                && first.made.1 < second.deleted.0
                && second.deleted.1 < second.made.0;
            if in_order {
                out.push(((second.median - first.median) / PASS_DELETED as f64).max(0.0));
                break;
            }
            tries += 1;
            if tries == 3 {
                bail!("in 3 fresh directories the creates did not take the inodes after the ones deleted (another program allocating inodes in the same group?)");
            }
        }
    }
    Ok(out)
}
