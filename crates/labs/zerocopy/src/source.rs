//! The file the zerocopy file methods send from: written once, synced, unlinked, kept
//! mapped read-only, so each sample reads it from the page cache.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;

use anyhow::{bail, Context, Result};

/// The file the file methods send from: written once, in the page cache, unlinked.
pub struct SourceFile {
    pub(super) file: File,
    map: *const u8,
    pub len: usize,
}

// SAFETY: the mapping is read-only and lives as long as the SourceFile; sharing a pointer to
// read-only memory between threads is sound.
unsafe impl Sync for SourceFile {}
// SAFETY: as above.
unsafe impl Send for SourceFile {}

impl SourceFile {
    pub fn create(dir: &std::path::Path, len: usize) -> Result<SourceFile> {
        let path = dir.join(format!("costlab-zerocopy-{}.dat", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("creating the source file {}", path.display()))?;
        let _ = std::fs::remove_file(&path);
        let mut block = vec![0u8; 1 << 20];
        let mut state = 0x5eed_u64;
        for b in block.chunks_mut(8) {
            let v = costlab_core::measure::cycle::splitmix(&mut state).to_le_bytes();
            b.copy_from_slice(&v[..b.len()]);
        }
        let mut left = len;
        while left > 0 {
            let n = left.min(block.len());
            file.write_all(&block[..n])
                .with_context(|| format!("writing the source file in {}", dir.display()))?;
            left -= n;
        }
        // Written back now, so no writeback runs while the samples are taken.
        file.sync_all()?;
        // SAFETY: a fresh shared read-only mapping of a file we hold open, of its length.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            bail!(
                "mmap of the source file: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(SourceFile {
            file,
            map: map as *const u8,
            len,
        })
    }
}

impl SourceFile {
    /// The file's bytes, through its mapping.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `map` is a read-only mapping of `len` bytes made in `create` and unmapped
        // only in drop, so it outlives the borrow of self; the file is unlinked and only we
        // hold it, and it is written before it is mapped, so nothing changes the bytes.
        unsafe { std::slice::from_raw_parts(self.map, self.len) }
    }
}

impl Drop for SourceFile {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `create`, once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}
