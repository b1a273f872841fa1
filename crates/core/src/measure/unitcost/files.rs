//! File and pipe terms: a pipe write+read pair, a pread of a cached file, open+close, stat,
//! and a stat by fd.

use std::hint::black_box;

use anyhow::{bail, Context, Result};

use crate::measure::{sample_fn, SampleSpec};

/// A file in the temporary directory that is gone from it already (unlinked once open).
pub(super) fn scratch_file() -> Result<std::fs::File> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("costlab-unitcost-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    Ok(f)
}

/// A scratch file of `bytes` written a page a call, so that its page cache holds single
/// pages (a write's folio is as large as the write), as a system's long-cached binaries and
/// libraries mostly are: cc1's here were 72% single pages, scattered. Mapping and unmapping a
/// page of a single-page folio costs several times one of a large folio, whose pages go in
/// and out of a mapping in batches (here a fault-around took 218 ns a page against 119, an
/// exit's unmap 108 ns against 14-39).
pub(super) fn scratch_file_of_pages(bytes: usize) -> Result<std::fs::File> {
    let f = scratch_file()?;
    let page = [7u8; 4096];
    let mut at = 0;
    while at < bytes {
        let n = page.len().min(bytes - at);
        let wrote = rustix::io::pwrite(&f, &page[..n], at as u64).context("writing the file")?;
        if wrote == 0 {
            bail!("writing the file: no room");
        }
        at += wrote;
    }
    Ok(f)
}

/// Time `op` per call; the first failure ends the sampling with its error.
fn per_call(spec: &SampleSpec, mut op: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let mut failed = None;
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            if failed.is_some() {
                return std::thread::sleep(spec.min_sample);
            }
            if let Err(e) = black_box(op()) {
                failed = Some(e);
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(samples.iter().map(|s| s.ns_per_iter()).collect()),
    }
}

/// A write of `size` bytes into a pipe and the read that takes them out, per pair.
pub fn pipe_rw(spec: &SampleSpec, size: usize) -> Result<Vec<f64>> {
    let (r, w) = rustix::pipe::pipe().context("pipe")?;
    // A pipe holds 64 KiB by default; make room for the largest size in one write.
    let _ = rustix::pipe::fcntl_setpipe_size(&w, size.max(4096) * 2);
    let out = vec![1u8; size];
    let mut inn = vec![0u8; size];
    per_call(spec, || {
        let n = rustix::io::write(&w, &out).context("pipe write")?;
        let mut got = 0;
        while got < n {
            got += rustix::io::read(&r, &mut inn[got..n]).context("pipe read")?;
        }
        Ok(())
    })
}

/// The span a read term walks: four times the largest CPU cache (at least 64 MiB, at most
/// 512 MiB), so the pages it reads come from memory, as a program's file reads mostly do
/// (another process, a disk's DMA or an hour ago put them in the page cache, not this CPU).
pub fn read_span() -> u64 {
    let largest = cpu0_caches().iter().map(|(size, _)| *size).max();
    (4 * largest.unwrap_or(0)).clamp(64 << 20, 512 << 20)
}

/// cpu0's caches from sysfs: (size in bytes, the CPUs that share it as sysfs lists them).
pub(super) fn cpu0_caches() -> Vec<(u64, String)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let size = std::fs::read_to_string(e.path().join("size")).ok()?;
            let size = crate::measure::cpus::parse_sysfs_size(&size)?;
            let shared =
                std::fs::read_to_string(e.path().join("shared_cpu_list")).unwrap_or_default();
            Some((size, shared.trim().to_string()))
        })
        .collect()
}

/// A pread of `size` bytes of a cached file, each call at the next page-aligned offset of a
/// file of `read_span()` bytes (every page of it cached, few in a CPU cache): a read of
/// page-cache data the CPU has not touched lately. A read of under a page is a page's first
/// bytes, a page a call.
pub fn file_read(spec: &SampleSpec, size: usize) -> Result<Vec<f64>> {
    use std::io::Write;
    let span = read_span();
    let mut f = scratch_file()?;
    let chunk = vec![3u8; 1 << 20];
    for _ in 0..span / chunk.len() as u64 {
        f.write_all(&chunk).context("writing the file")?;
    }
    let stride = (size as u64).div_ceil(4096) * 4096;
    let mut buf = vec![0u8; size];
    let mut at = 0u64;
    per_call(spec, || {
        if at + stride > span {
            at = 0;
        }
        let n = rustix::io::pread(&f, &mut buf, at).context("pread")?;
        if n != size {
            bail!("pread returned {n} of {size} bytes");
        }
        at += stride;
        Ok(())
    })
}

/// The path the open and stat terms open and stat: a file in the temp folder.
pub fn term_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("costlab-unitcost-{}.path", std::process::id()))
}

/// The components of `term_path` (the temp folder's, and its file's name): a stat of a path
/// of other length is the stat term less these at the path-component term, and its own
/// components at it.
pub fn stat_path_components() -> usize {
    term_path()
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count()
}

/// A file that stays for the length of a measurement (open and stat need a path).
struct NamedScratch(std::path::PathBuf);

impl NamedScratch {
    fn new() -> Result<NamedScratch> {
        let p = term_path();
        std::fs::write(&p, b"x").with_context(|| format!("creating {}", p.display()))?;
        Ok(NamedScratch(p))
    }
    fn c_path(&self) -> std::ffi::CString {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::CString::new(self.0.as_os_str().as_bytes()).expect("a temp path has no NUL")
    }
}

impl Drop for NamedScratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// openat then close of an existing file.
pub fn openat_close(spec: &SampleSpec) -> Result<Vec<f64>> {
    let file = NamedScratch::new()?;
    let path = file.c_path();
    per_call(spec, || {
        // SAFETY: a NUL-terminated path; the fd returned is closed at once.
        let fd = unsafe { libc::openat(libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY) };
        if fd < 0 {
            bail!("openat: {}", std::io::Error::last_os_error());
        }
        // SAFETY: closing the fd just opened, owned by nothing else.
        unsafe { libc::close(fd) };
        Ok(())
    })
}

/// newfstatat of an existing file's path (what glibc's stat calls).
pub fn stat(spec: &SampleSpec) -> Result<Vec<f64>> {
    let file = NamedScratch::new()?;
    let path = file.c_path();
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    per_call(spec, || {
        // SAFETY: a NUL-terminated path and a valid out buffer.
        let rc = unsafe { libc::fstatat(libc::AT_FDCWD, path.as_ptr(), &mut st, 0) };
        if rc != 0 {
            bail!("stat: {}", std::io::Error::last_os_error());
        }
        Ok(())
    })
}

/// newfstatat of an open file by its fd (an empty path with AT_EMPTY_PATH: what glibc's fstat
/// calls): the stat with no path walked.
pub fn fstat(spec: &SampleSpec) -> Result<Vec<f64>> {
    let file = NamedScratch::new()?;
    let f =
        std::fs::File::open(&file.0).with_context(|| format!("opening {}", file.0.display()))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    per_call(spec, || {
        // SAFETY: an open fd, an empty NUL-terminated path and a valid out buffer; the raw
        // call, so the measured syscall is newfstatat whatever the C library's fstat does.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_newfstatat,
                fd,
                c"".as_ptr(),
                &mut st as *mut libc::stat,
                libc::AT_EMPTY_PATH,
            )
        };
        if rc != 0 {
            bail!("fstat: {}", std::io::Error::last_os_error());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_read_span_is_at_least_64_mib() {
        assert!(super::read_span() >= 64 << 20);
    }
}
