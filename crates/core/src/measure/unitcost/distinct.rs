//! The stat-distinct term: a stat of a file whose dentry and inode are cached but out of the
//! CPU's caches, as a walker's first stat of each file it lists finds them.

use std::ffi::CString;
use std::path::Path;

use anyhow::{Context, Result};

use super::faults::Sweep;
use super::fsops::{cpu_samples, entry_name, os_err, timed, Scratch};
use crate::measure::SampleSpec;

/// The stat-distinct term's tree: this many directories of `DISTINCT_FILES` files each (5000
/// files). Before each pass a sweep of `read_span` bytes of memory puts every file's dentry
/// and inode out of the CPU's caches, as a program's first stat of a file finds them. A pass
/// over a tree that fits the caches would find them there from the pass before: on the 2-vCPU
/// guest here (`bench/stat-distinct.sh`, nine passes each, no sweep) a stat of each of
/// 1000-10000 files once cost 385 ns (medians 336-436), of 20000 files 507-882 ns from pass to
/// pass (a tree about the caches' size), of 50000 871, 100000 888 (884-900) and 200000 895: a
/// step, not a slope. A tree past the step costs its making: 100000 files took 5-20 s to
/// create on this ext4 (its inode allocator passes over the inodes freed in the last minutes).
pub const DISTINCT_DIRS: usize = 10;
pub const DISTINCT_FILES: usize = 500;

/// CPU ns per stat of a file among many: each file of a tree of `DISTINCT_DIRS` directories
/// of `DISTINCT_FILES` empty files stated once a round, by its directory's fd and its name
/// (fstatat with AT_SYMLINK_NOFOLLOW, as du stats what it listed), in the order the
/// directory lists them, after a sweep of memory that takes them out of the CPU's caches (not
/// timed).
pub fn stat_distinct(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    let mut sweep = Sweep::new()?;
    let mut round = 0u8;
    let mut dirs: Vec<(std::os::fd::OwnedFd, Vec<CString>)> = Vec::new();
    for d in 0..DISTINCT_DIRS {
        let rel = format!("s{d}");
        let path = s.path().join(&rel);
        std::fs::create_dir(&path).context("mkdir in the scratch directory")?;
        for i in 0..DISTINCT_FILES {
            std::fs::write(path.join(entry_name(i)), b"").context("creating files to stat")?;
        }
        let names = std::fs::read_dir(&path)
            .context("listing the scratch directory")?
            .map(|e| {
                let e = e.context("listing the scratch directory")?;
                CString::new(e.file_name().as_encoded_bytes()).context("a name with a NUL")
            })
            .collect::<Result<Vec<_>>>()?;
        let fd = std::fs::File::open(&path).context("opening a scratch directory")?;
        dirs.push((fd.into(), names));
    }
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let files = (DISTINCT_DIRS * DISTINCT_FILES) as f64;
    cpu_samples(spec, || {
        round = round.wrapping_add(1);
        sweep.run(round);
        let ns = timed(|| {
            for (fd, names) in &dirs {
                for n in names {
                    // SAFETY: an open directory fd, a NUL-terminated name, a valid out buffer.
                    let rc = unsafe {
                        libc::fstatat(
                            std::os::fd::AsRawFd::as_raw_fd(fd),
                            n.as_ptr(),
                            &mut st,
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    };
                    if rc != 0 {
                        return Err(os_err("fstatat"));
                    }
                }
            }
            Ok(())
        })?;
        Ok((ns, files))
    })
}
