//! What a cached read of a small file costs beyond the same bytes of a large one.
//!
//! The file-read term reads a file written 1 MiB a call, so the page cache holds it in large
//! folios. A small file read in through readahead is held in folios of one to a few pages
//! (order 0 for 44% of /usr/share/doc's pages after a tar of it here), and each of its
//! reads also meets its own mapping, xarray node and folio structs cold. A 64 KiB read of
//! single-page folios cost 211-339 ns a page here against 152-159 in 1 MiB folios
//! (bench/folio-read.c); a whole read of a 7.5 KiB file about twice the file-read term's
//! price. This term is that difference, per page, measured: the price counts the pages a
//! program read from files of at most `SMALL_FILE` bytes and prices each at it.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::faults::Sweep;
use super::fsops::{cpu_samples, drop_pages, timed, Scratch};
use super::SampleSpec;

/// The largest file the term reads, and so the largest the price counts as small: 8 pages.
pub const SMALL_FILE: u64 = 32 << 10;

/// The term's files' sizes, cycled: from part of a page to `SMALL_FILE` (mean 11 KiB, as a
/// tree of documentation or sources holds them).
const SIZES: [usize; 10] = [
    1 << 10,
    2 << 10,
    3 << 10,
    4 << 10,
    6 << 10,
    8 << 10,
    12 << 10,
    16 << 10,
    24 << 10,
    32 << 10,
];

/// Files the term reads: 384 (about 4 MiB, 1104 pages), held open through it.
const FILES: usize = 384;

/// CPU ns per page of a whole cached read of a small file, beyond the same read of a large
/// file. Each file is written, synced, dropped from the page cache (its own pages only) and
/// read once, so readahead caches it as it caches a program's small files. Each sample
/// reads every file whole (one pread from 0) and, as many calls of the same sizes, a file
/// written 1 MiB a call, each call at the next page (as file-read reads); each pass starts
/// after a sweep of four times the largest CPU cache, so neither finds its data in one. The
/// sample is the difference over the pages read.
pub fn read_small(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let s = Scratch::new(dir)?;
    let mut files = Vec::with_capacity(FILES);
    let mut pages = 0usize;
    for i in 0..FILES {
        let size = SIZES[i % SIZES.len()];
        let mut f = s.new_file(&format!("s{i}"))?;
        f.write_all(&vec![5u8; size])
            .context("writing a small file")?;
        files.push((f, size));
        pages += size.div_ceil(4096);
    }
    // SAFETY: syncfs on an open fd of the scratch file system.
    if unsafe { libc::syncfs(files[0].0.as_raw_fd()) } != 0 {
        bail!("syncfs: {}", std::io::Error::last_os_error());
    }
    let mut buf = vec![0u8; SMALL_FILE as usize];
    let mut read = Vec::with_capacity(FILES);
    for (i, (f, size)) in files.into_iter().enumerate() {
        drop_pages(f.as_raw_fd(), size)?;
        drop(f);
        let mut r =
            std::fs::File::open(s.path().join(format!("s{i}"))).context("opening a small file")?;
        let n = r.read(&mut buf).context("reading a small file in")?;
        if n != size {
            bail!("a small file read {n} of {size} bytes");
        }
        read.push((r, size));
    }
    let large = large_file(&s, (pages as u64 * 4096).next_multiple_of(1 << 20))?;
    let mut sweep = Sweep::new()?;
    let mut evict = |salt: u8| sweep.run(salt);
    let mut round = 0u8;
    cpu_samples(spec, || {
        round = round.wrapping_add(1);
        evict(round);
        let small = timed(|| {
            for (f, size) in &read {
                let n = rustix::io::pread(f, &mut buf[..*size], 0).context("pread")?;
                if n != *size {
                    bail!("pread returned {n} of {size} bytes");
                }
            }
            Ok(())
        })?;
        evict(round);
        let big = timed(|| {
            let mut at = 0u64;
            for (_, size) in &read {
                let n = rustix::io::pread(&large, &mut buf[..*size], at).context("pread")?;
                if n != *size {
                    bail!("pread returned {n} of {size} bytes");
                }
                at += size.next_multiple_of(4096) as u64;
            }
            Ok(())
        })?;
        Ok((small - big, pages as f64))
    })
}

/// A cached file of `len` bytes written 1 MiB a call (large folios, as file-read's).
fn large_file(s: &Scratch, len: u64) -> Result<std::fs::File> {
    use std::io::Write;
    let mut f = s.new_file("large")?;
    let chunk = vec![6u8; 1 << 20];
    for _ in 0..len / chunk.len() as u64 {
        f.write_all(&chunk).context("writing the large file")?;
    }
    drop(f);
    std::fs::File::open(s.path().join("large")).context("opening the large file")
}
