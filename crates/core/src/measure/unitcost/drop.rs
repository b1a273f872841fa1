//! The page-drop term: what taking a file's cached folios out of the page cache costs, as a
//! program's unlink or truncate of a file written a while before finds them.

use std::ffi::CString;
use std::path::Path;

use anyhow::{Context, Result};

use super::faults::{write_scattered, Sweep};
use super::fsops::{cpu_samples, os_err, synced_file, timed, Scratch};
use crate::measure::SampleSpec;

/// Pages in the page-drop term's file: 1 MiB.
pub const DROP_PAGES: usize = 256;

/// CPU ns per folio of removing a file whose pages are cached and on disk: the unlink of a
/// `DROP_PAGES`-page file less the unlink of an empty one beside it, per folio. As the last
/// link goes, the folios leave the page cache and the file system frees their blocks (what an
/// unlink of a full file, or a truncate, adds to the unlink term). Each round writes the file
/// a page a call (each page a folio of its own, as a program's small writes make them), in a
/// scrambled order with memory taken between its pages (`faults::write_scattered`: its pages
/// lie apart, as those of a file written over a program's run do), syncs both files, and
/// sweeps memory before each unlink (not timed): a program removes a file it wrote a while
/// before, its folios' descriptors out of the CPU's caches. Revision 1 timed the unlink of a
/// file just written a page at a time in order, hot: 312 ns a folio on the day this
/// replaced it, where a database import's unlink of its old file (5653 folios) read 0.45x.
pub fn page_drop(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    let (full, empty) = (s.c("full"), s.c("empty"));
    let unlink = |p: &CString| {
        // SAFETY: a NUL-terminated path in this scratch directory.
        if unsafe { libc::unlink(p.as_ptr()) } != 0 {
            return Err(os_err("unlink"));
        }
        Ok(())
    };
    let mut sweep = Sweep::new()?;
    let mut salt = 0u8;
    cpu_samples(spec, || {
        let f = s.new_file("full")?;
        write_scattered(&f, DROP_PAGES)?;
        f.sync_all().context("syncing")?;
        drop(f);
        drop(synced_file(&s, "empty", 0)?);
        salt = salt.wrapping_add(2);
        sweep.run(salt);
        let without = timed(|| unlink(&empty))?;
        sweep.run(salt.wrapping_add(1));
        let with_pages = timed(|| unlink(&full))?;
        Ok(((with_pages - without).max(0.0), DROP_PAGES as f64))
    })
}
