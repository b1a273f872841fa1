//! File-system terms, measured in a scratch directory on the file system they price: each
//! name operation (open of an existing file, create, close, mkdir, rmdir, rename, unlink),
//! fsync and fdatasync by the bytes they write back, a directory read per call and per
//! entry, a path component's lookup, a cold read per page.
//!
//! Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not the wall: a price sets
//! them against time on CPU, and an fsync or a cold read spends most of its wall waiting for
//! the disk. Each operation is timed over a batch of names, so the clock's own call (a real
//! syscall, not vDSO) is a small part of it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::measure::cputime::thread_cpu_ns;
use crate::measure::{cancel, SampleSpec};

/// Names per batch: enough that the clock reads are noise, few enough for a 10 ms sample.
const NAMES: usize = 128;

/// A directory of costlab's own inside `parent`, removed with all it holds on drop.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(parent: &Path) -> Result<Scratch> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!(".costlab-scratch-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| {
            format!(
                "creating a scratch directory {}: give a writable directory on the file system to measure",
                dir.display()
            )
        })?;
        Ok(Scratch { dir })
    }
    /// A scratch directory at the root of `dir`'s file system (where the root is not
    /// writable, in `dir`). On ext4 a new top-level directory goes to a group of its own
    /// (the Orlov allocator spreads them), away from the inodes other programs deleted near
    /// `dir` in the last seconds, which a create on ext4 without a journal passes over
    /// (`passes`).
    pub fn fresh(dir: &Path) -> Result<Scratch> {
        mount_point(dir)
            .and_then(|root| Scratch::new(&root))
            .or_else(|_| Scratch::new(dir))
    }

    /// The cleanest of `CANDIDATES` `fresh` directories, made while the others are held (so
    /// each goes to another group): the one whose 16 probe creates took the least CPU. Orlov
    /// sends a top-level directory to the group with the fewest directories, which on a
    /// file system with few of them is the same few groups again and again: where another
    /// top-level directory was deleted there in the last minutes (costlab's own scratch of a
    /// minute before), its creates pass over those inodes. Here, 2 of 5 rounds of the bench
    /// measured a create 6.8 times the clean one in a single such directory. A create or
    /// mkdir measured in the one chosen is the clean one.
    pub fn fresh_clean(dir: &Path) -> Result<Scratch> {
        const CANDIDATES: usize = 4;
        let mut held: Vec<(f64, Scratch)> = Vec::with_capacity(CANDIDATES);
        for _ in 0..CANDIDATES {
            let s = Scratch::fresh(dir)?;
            let mut ns = Vec::with_capacity(16);
            for i in 0..16 {
                let p = s.c(&format!("probe-{i}"));
                ns.push(timed(|| {
                    // SAFETY: a NUL-terminated path in this scratch directory.
                    let fd =
                        unsafe { libc::open(p.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
                    if fd < 0 {
                        return Err(os_err("create"));
                    }
                    // SAFETY: fd was just opened.
                    unsafe { libc::close(fd) };
                    Ok(())
                })?);
            }
            held.push((crate::measure::stats::median(&ns), s));
        }
        held.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(held.swap_remove(0).1)
    }
    pub fn path(&self) -> &Path {
        &self.dir
    }
    /// A new, empty file `name` in the scratch directory, open for writing.
    pub fn new_file(&self, name: &str) -> Result<std::fs::File> {
        let p = self.dir.join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .with_context(|| format!("creating {}", p.display()))
    }
    /// `rel` under the scratch directory, as a C path.
    pub fn c(&self, rel: &str) -> CString {
        CString::new(self.dir.join(rel).as_os_str().as_bytes())
            .expect("costlab's names hold no NUL")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(super) fn os_err(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::last_os_error())
}

/// `spec.samples` samples after one warm-up, each as many rounds of `round` as fill
/// `spec.min_sample` of wall; `round` returns (CPU ns of the timed part, events in it), a
/// sample is CPU ns per event.
pub(super) fn cpu_samples(
    spec: &SampleSpec,
    mut round: impl FnMut() -> Result<(f64, f64)>,
) -> Result<Vec<f64>> {
    round()?;
    let mut out = Vec::with_capacity(spec.samples);
    for _ in 0..spec.samples {
        cancel::check()?;
        let t0 = Instant::now();
        let (mut ns, mut events) = (0.0, 0.0);
        while events == 0.0 || t0.elapsed() < spec.min_sample {
            let (n, e) = round()?;
            ns += n;
            events += e;
            if t0.elapsed() > spec.min_sample.max(Duration::from_millis(10)) * 50 {
                break;
            }
        }
        if events <= 0.0 {
            bail!("no event was timed");
        }
        out.push(ns / events);
    }
    Ok(out)
}

/// CPU ns of `f` on this thread.
pub(super) fn timed(f: impl FnOnce() -> Result<()>) -> Result<f64> {
    let t0 = thread_cpu_ns();
    f()?;
    Ok(thread_cpu_ns().saturating_sub(t0) as f64)
}

/// The name operations, each timed over a batch of `NAMES` in one round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NameOp {
    Open,
    Close,
    /// A close of a second descriptor of a file that stays open (dup'ed by
    /// `F_DUPFD_CLOEXEC`): the descriptor freed, the file's count dropped, no release.
    CloseDup,
    Create,
    Rename,
    Unlink,
    Mkdir,
    Rmdir,
}

/// CPU ns per `op`: a round creates `NAMES` files (O_CREAT|O_EXCL), closes them, opens them
/// again, dups each and closes the dups, closes them, renames them, unlinks them, then makes and removes as many
/// directories; only `op`'s batch is timed.
pub fn name_op(spec: &SampleSpec, dir: &Path, op: NameOp) -> Result<Vec<f64>> {
    if matches!(op, NameOp::Create | NameOp::Mkdir) {
        return new_names(spec, dir, op);
    }
    let s = Scratch::new(dir)?;
    let a: Vec<CString> = (0..NAMES).map(|i| s.c(&format!("file-{i:04}"))).collect();
    let b: Vec<CString> = (0..NAMES).map(|i| s.c(&format!("moved-{i:04}"))).collect();
    let d: Vec<CString> = (0..NAMES).map(|i| s.c(&format!("dir-{i:04}"))).collect();
    let mut fds = vec![-1i32; NAMES];
    let opens = |fds: &mut [i32], flags: i32, what: &str| -> Result<()> {
        for (fd, p) in fds.iter_mut().zip(&a) {
            // SAFETY: a NUL-terminated path; the fd is kept in `fds` and closed by `closes`.
            *fd = unsafe { libc::open(p.as_ptr(), flags, 0o644) };
            if *fd < 0 {
                return Err(os_err(what));
            }
        }
        Ok(())
    };
    let closes = |fds: &mut [i32]| -> Result<()> {
        for fd in fds.iter_mut() {
            // SAFETY: an fd `opens` returned, closed once and forgotten.
            unsafe { libc::close(*fd) };
            *fd = -1;
        }
        Ok(())
    };
    let each = |names: &[CString], f: &dyn Fn(&CString, usize) -> i32, what: &str| {
        for (i, p) in names.iter().enumerate() {
            if f(p, i) != 0 {
                return Err(os_err(what));
            }
        }
        Ok(())
    };
    let mut round = || -> Result<(f64, f64)> {
        let at = |o: NameOp, ns: f64, acc: &mut f64| {
            if o == op {
                *acc += ns;
            }
        };
        let mut ns = 0.0;
        let create = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
        at(
            NameOp::Create,
            timed(|| opens(&mut fds, create, "create"))?,
            &mut ns,
        );
        at(NameOp::Close, timed(|| closes(&mut fds))?, &mut ns);
        let open = libc::O_RDONLY | libc::O_CLOEXEC;
        at(
            NameOp::Open,
            timed(|| opens(&mut fds, open, "open"))?,
            &mut ns,
        );
        let mut dups = vec![-1i32; NAMES];
        for (d, fd) in dups.iter_mut().zip(&fds) {
            // SAFETY: an fd `opens` returned; the dup is closed by `closes` below.
            *d = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if *d < 0 {
                return Err(os_err("dup"));
            }
        }
        at(NameOp::CloseDup, timed(|| closes(&mut dups))?, &mut ns);
        at(NameOp::Close, timed(|| closes(&mut fds))?, &mut ns);
        // SAFETY: NUL-terminated paths of this scratch directory.
        let rename = |p: &CString, i: usize| unsafe { libc::rename(p.as_ptr(), b[i].as_ptr()) };
        at(
            NameOp::Rename,
            timed(|| each(&a, &rename, "rename"))?,
            &mut ns,
        );
        // SAFETY: NUL-terminated paths of this scratch directory.
        let unlink = |p: &CString, _: usize| unsafe { libc::unlink(p.as_ptr()) };
        at(
            NameOp::Unlink,
            timed(|| each(&b, &unlink, "unlink"))?,
            &mut ns,
        );
        // SAFETY: NUL-terminated paths of this scratch directory.
        let mkdir = |p: &CString, _: usize| unsafe { libc::mkdir(p.as_ptr(), 0o755) };
        at(NameOp::Mkdir, timed(|| each(&d, &mkdir, "mkdir"))?, &mut ns);
        // SAFETY: NUL-terminated paths of this scratch directory.
        let rmdir = |p: &CString, _: usize| unsafe { libc::rmdir(p.as_ptr()) };
        at(NameOp::Rmdir, timed(|| each(&d, &rmdir, "rmdir"))?, &mut ns);
        let per_round = if op == NameOp::Close { 2 } else { 1 };
        Ok((ns, (NAMES * per_round) as f64))
    };
    cpu_samples(spec, &mut round)
}

/// CPU ns per create (O_CREAT|O_EXCL; the close apart) or mkdir of a new name: each round makes
/// `NAMES` new names in a directory of its own, and nothing is removed before the end. Not a
/// create-unlink cycle: ext4 without a journal passes over inodes freed in the last seconds
/// when it looks for a free one (`recently_deleted`), so a cycle's creates scanned farther
/// round after round past the last rounds' (11.6 us, 421 us and 134 us a create in three runs
/// here); a new name on a file system with no fresh deletions is what this term is.
fn new_names(spec: &SampleSpec, dir: &Path, op: NameOp) -> Result<Vec<f64>> {
    let s = Scratch::fresh_clean(dir)?;
    let mut round_no = 0usize;
    let create = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
    cpu_samples(spec, || {
        round_no += 1;
        let sub = format!("r{round_no}");
        std::fs::create_dir(s.path().join(&sub)).context("mkdir in the scratch directory")?;
        let names: Vec<CString> = (0..NAMES)
            .map(|i| s.c(&format!("{sub}/n-{i:04}")))
            .collect();
        let mut fds = Vec::with_capacity(NAMES);
        let ns = timed(|| {
            for p in &names {
                if op == NameOp::Mkdir {
                    // SAFETY: a NUL-terminated path of this scratch directory.
                    if unsafe { libc::mkdir(p.as_ptr(), 0o755) } != 0 {
                        return Err(os_err("mkdir"));
                    }
                    continue;
                }
                // SAFETY: a NUL-terminated path; the fd is closed below.
                let fd = unsafe { libc::open(p.as_ptr(), create, 0o644) };
                if fd < 0 {
                    return Err(os_err("create"));
                }
                fds.push(fd);
            }
            Ok(())
        });
        for fd in fds {
            // SAFETY: an fd this round opened, closed once.
            unsafe { libc::close(fd) };
        }
        Ok((ns?, NAMES as f64))
    })
}

/// A file of `len` bytes in the scratch directory, written and synced (so its pages are clean
/// and can be dropped), open read-write.
pub(super) fn synced_file(s: &Scratch, name: &str, len: usize) -> Result<std::fs::File> {
    use std::io::Write;
    let p = s.path().join(name);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)
        .with_context(|| format!("creating {}", p.display()))?;
    f.write_all(&vec![5u8; len])
        .context("writing the scratch file")?;
    f.sync_all().context("syncing the scratch file")?;
    Ok(f)
}

/// CPU ns of an fsync (or fdatasync, `data_only`) after a write of `size` bytes at offset 0
/// over already allocated blocks: the write-back of the pages it dirtied and, for fsync, the
/// inode's times. The write is not timed.
pub fn sync(spec: &SampleSpec, dir: &Path, size: usize, data_only: bool) -> Result<Vec<f64>> {
    use std::os::fd::AsRawFd;
    let s = Scratch::new(dir)?;
    let f = synced_file(&s, "sync", size.max(4096))?;
    let buf = vec![9u8; size];
    let fd = f.as_raw_fd();
    cpu_samples(spec, || {
        let n = rustix::io::pwrite(&f, &buf, 0).context("pwrite")?;
        if n != size {
            bail!("pwrite wrote {n} of {size} bytes");
        }
        let ns = timed(|| {
            // SAFETY: fd is the open scratch file.
            let rc = unsafe {
                if data_only {
                    libc::fdatasync(fd)
                } else {
                    libc::fsync(fd)
                }
            };
            if rc != 0 {
                return Err(os_err("fsync"));
            }
            Ok(())
        })?;
        Ok((ns, 1.0))
    })
}

/// How far the appended file grows before it is cut back to nothing (untimed): 8 MiB, so the
/// pages the writes make stay a small share of memory and no writeback starts mid-round.
const APPEND_SPAN: u64 = 8 << 20;

/// CPU ns of a write of `size` bytes that extends a file: new page-cache pages (allocated,
/// filled, charged to the cgroup) and the file system's reservation of blocks for them (ext4's
/// delayed allocation), as a program writing its output does. The file is cut back every
/// `APPEND_SPAN` bytes, untimed.
pub fn file_write(spec: &SampleSpec, dir: &Path, size: usize) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    let f = s.new_file("append")?;
    let buf = vec![6u8; size];
    let mut at = 0u64;
    cpu_samples(spec, || {
        if at + size as u64 > APPEND_SPAN {
            f.set_len(0).context("cutting the appended file back")?;
            at = 0;
        }
        let ns = timed(|| {
            let n = rustix::io::pwrite(&f, &buf, at).context("pwrite")?;
            if n != size {
                bail!("pwrite wrote {n} of {size} bytes");
            }
            Ok(())
        })?;
        at += size as u64;
        Ok((ns, 1.0))
    })
}

/// The directory sizes getdents64 is measured at: a small directory, and a larger one whose
/// difference gives the cost per entry. Both fit a block (ext4 reads them as a list, not a
/// hashed tree), as most of a program's directories do: a walk of /usr here reads 8 entries a
/// call. (Before, 64 and 1024: the large one a hashed tree, 25% dearer an entry, whose slope
/// left the call's own part below zero, priced at nothing: du's getdents64 line read 0.52x.)
pub const DIR_ENTRIES: [usize; 2] = [2, 64];
/// Directories of each size, each read once a pass: a program reads each of its directories
/// once, not one directory again and again.
pub const DIRS: usize = 128;

/// The name each measured entry has, and the bytes getdents64 gives it (its d_reclen: 19
/// bytes of header, the name and its NUL, rounded up to 8), by which a program's entries
/// are counted from the bytes it was returned.
pub fn entry_name(i: usize) -> String {
    format!("entry-{i:05}-of-a-directory")
}
pub const DIRENT_RECLEN: usize = (19 + 26 + 1usize).div_ceil(8) * 8;

/// Read a whole directory with getdents64 into a 32 KiB buffer (glibc's readdir size):
/// (CPU ns, calls made including the one that returns 0, entries).
fn read_dir(path: &CString, buf: &mut [u8]) -> Result<(f64, u64, u64)> {
    // SAFETY: a NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    if fd < 0 {
        return Err(os_err("open of the directory"));
    }
    let (mut calls, mut entries) = (0u64, 0u64);
    let t0 = thread_cpu_ns();
    loop {
        // SAFETY: buf is writable for its length; fd is the open directory.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        calls += 1;
        if n < 0 {
            // SAFETY: closing the fd opened above.
            unsafe { libc::close(fd) };
            return Err(os_err("getdents64"));
        }
        if n == 0 {
            break;
        }
        let mut off = 0usize;
        while off < n as usize {
            entries += 1;
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            off += reclen.max(1);
        }
    }
    let ns = thread_cpu_ns().saturating_sub(t0) as f64;
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    Ok((ns, calls, entries))
}

/// (per call reading a `DIR_ENTRIES[0]`-entry directory through, per entry from the difference
/// between the two sizes), CPU ns, sample by sample. Each pass reads `DIRS` directories of
/// each size once, in turn.
pub fn getdents(spec: &SampleSpec, dir: &Path) -> Result<(Vec<f64>, Vec<f64>)> {
    let s = Scratch::new(dir)?;
    let mut dirs: [Vec<CString>; 2] = [Vec::new(), Vec::new()];
    for (set, n) in DIR_ENTRIES.iter().enumerate() {
        for k in 0..DIRS {
            let d = format!("d{n}-{k}");
            std::fs::create_dir(s.path().join(&d)).context("mkdir in the scratch directory")?;
            for i in 0..*n {
                std::fs::write(s.path().join(&d).join(entry_name(i)), b"")
                    .context("creating directory entries")?;
            }
            dirs[set].push(s.c(&d));
        }
    }
    let mut buf = vec![0u8; 32 << 10];
    let mut per_call = Vec::with_capacity(spec.samples);
    let mut per_entry = Vec::with_capacity(spec.samples);
    for d in dirs.iter().flatten() {
        read_dir(d, &mut buf)?;
    }
    for _ in 0..spec.samples {
        cancel::check()?;
        let t0 = Instant::now();
        let (mut small, mut large, mut calls, mut passes) = (0.0, 0.0, 0u64, 0u64);
        let (mut e_small, mut e_large) = (0u64, 0u64);
        while passes == 0 || t0.elapsed() < spec.min_sample {
            for (a, b) in dirs[0].iter().zip(&dirs[1]) {
                let (ns, c, e) = read_dir(a, &mut buf)?;
                small += ns;
                calls += c;
                e_small += e;
                let (ns, _, e) = read_dir(b, &mut buf)?;
                large += ns;
                e_large += e;
            }
            passes += 1;
        }
        per_call.push(small / calls as f64);
        let extra = e_large.saturating_sub(e_small).max(1) as f64;
        per_entry.push(((large - small) / extra).max(0.0));
    }
    Ok((per_call, per_entry))
}

/// Components between the shallow and the deep path of `path_component`.
const DEPTH: usize = 8;

/// CPU ns per path component a lookup walks: a stat of a file `DEPTH` directories down less a
/// stat of one at the top, over `DEPTH`, in batches.
pub fn path_component(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    let deep_rel: String = (0..DEPTH).map(|i| format!("c{i}/")).collect();
    std::fs::create_dir_all(s.path().join(&deep_rel))
        .context("mkdir -p in the scratch directory")?;
    std::fs::write(s.path().join(&deep_rel).join("x"), b"x").context("writing a file")?;
    std::fs::write(s.path().join("x"), b"x").context("writing a file")?;
    let (deep, top) = (s.c(&format!("{deep_rel}x")), s.c("x"));
    // SAFETY: an all-zero stat is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let mut batch = |p: &CString| {
        timed(|| {
            for _ in 0..NAMES {
                // SAFETY: a NUL-terminated path and a valid out buffer.
                if unsafe { libc::stat(p.as_ptr(), &mut st) } != 0 {
                    return Err(os_err("stat"));
                }
            }
            Ok(())
        })
    };
    cpu_samples(spec, || {
        let d = batch(&deep)?;
        let t = batch(&top)?;
        Ok(((d - t).max(0.0), (NAMES * DEPTH) as f64))
    })
}

/// The extended attribute `ls -l` asks of every file (its ACL), and the errors that mean the
/// file has none or the file system keeps none: the lookup was made all the same.
const XATTR: &std::ffi::CStr = c"system.posix_acl_access";

/// CPU ns per lgetxattr of a file's ACL by its path (a path lookup and the attribute's
/// lookup; `ls -l` makes two a file), on a scratch file that has none.
pub fn getxattr(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    std::fs::write(s.path().join("x"), b"x").context("writing a file")?;
    let p = s.c("x");
    let mut buf = [0u8; 256];
    cpu_samples(spec, || {
        let ns = timed(|| {
            for _ in 0..NAMES {
                // SAFETY: NUL-terminated path and name, and a buffer of the length given.
                let rc = unsafe {
                    libc::lgetxattr(
                        p.as_ptr(),
                        XATTR.as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                if rc < 0 {
                    let e = std::io::Error::last_os_error();
                    if !matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)) {
                        bail!("lgetxattr: {e}");
                    }
                }
            }
            Ok(())
        })?;
        Ok((ns, NAMES as f64))
    })
}

/// Pages of the file a cold read goes through.
const COLD_PAGES: usize = 1024;

/// CPU ns per page of a read whose pages are not cached: the scratch file's pages dropped with
/// posix_fadvise(DONTNEED) (that file's only, never the machine's cache), then read through in
/// 64 KiB preads (readahead as the kernel does it).
pub fn read_cold(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    use std::os::fd::AsRawFd;
    let s = Scratch::new(dir)?;
    let len = COLD_PAGES * 4096;
    let f = synced_file(&s, "cold", len)?;
    let mut buf = vec![0u8; 64 << 10];
    cpu_samples(spec, || {
        drop_pages(f.as_raw_fd(), len)?;
        let ns = timed(|| {
            let mut off = 0;
            while off < len {
                let n = rustix::io::pread(&f, &mut buf, off as u64).context("pread")?;
                if n == 0 {
                    bail!("the scratch file ended early");
                }
                off += n;
            }
            Ok(())
        })?;
        Ok((ns, COLD_PAGES as f64))
    })
}

/// CPU ns of an fdatasync after `size` bytes appended to a file a page a call (each page a
/// folio of its own, as a program's small writes make them; writeback goes by folios, so a
/// large write's large folios cost less a byte): the pages written back and, with delayed
/// allocation (ext4, xfs), their blocks allocated then, as a program's own sync of the data
/// it just wrote does. The file is cut back every `APPEND_SPAN` bytes, untimed.
pub fn writeback(spec: &SampleSpec, dir: &Path, size: usize) -> Result<Vec<f64>> {
    let s = Scratch::new(dir)?;
    let f = s.new_file("appended")?;
    let page = [4u8; 4096];
    let mut at = 0u64;
    cpu_samples(spec, || {
        if at + size as u64 > APPEND_SPAN {
            f.set_len(0).context("cutting the file back")?;
            f.sync_all().context("syncing")?;
            at = 0;
        }
        for _ in 0..size.div_ceil(4096) {
            let n = rustix::io::pwrite(&f, &page, at).context("pwrite")?;
            if n != page.len() {
                bail!("pwrite wrote {n} of {} bytes", page.len());
            }
            at += n as u64;
        }
        let ns = timed(|| f.sync_data().context("fdatasync"))?;
        Ok((ns, 1.0))
    })
}

/// Drop `fd`'s cached pages (it is synced, so they are clean).
pub(super) fn drop_pages(fd: i32, len: usize) -> Result<()> {
    // SAFETY: advice on an open fd's range; it changes nothing but the page cache.
    let rc = unsafe { libc::posix_fadvise(fd, 0, len as i64, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        bail!("posix_fadvise(DONTNEED): error {rc}");
    }
    Ok(())
}

/// A synced scratch file of `pages` pages for the major-fault term (in `faults`).
pub(super) fn cold_file(s: &Scratch, pages: usize) -> Result<std::fs::File> {
    synced_file(s, "major", pages * 4096)
}

/// The file-system type of the mount that holds `dir` (ext4, xfs, tmpfs ...), from
/// /proc/self/mountinfo: the longest mount point that is a prefix of its canonical path.
pub fn fs_of(dir: &Path) -> Result<String> {
    let canon = dir
        .canonicalize()
        .with_context(|| format!("{}: no such directory", dir.display()))?;
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    fs_in_mountinfo(&text, &canon).ok_or_else(|| {
        anyhow::anyhow!("no mount in /proc/self/mountinfo holds {}", canon.display())
    })
}

/// The mount point of the mount that holds `dir`.
pub fn mount_point(dir: &Path) -> Result<PathBuf> {
    let canon = dir
        .canonicalize()
        .with_context(|| format!("{}: no such directory", dir.display()))?;
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    mount_in_mountinfo(&text, &canon)
        .map(|(mp, _)| PathBuf::from(mp))
        .ok_or_else(|| {
            anyhow::anyhow!("no mount in /proc/self/mountinfo holds {}", canon.display())
        })
}

/// The type of the mount holding `path` in a mountinfo text (the last one mounted wins a tie).
pub fn fs_in_mountinfo(text: &str, path: &Path) -> Option<String> {
    mount_in_mountinfo(text, path).map(|(_, t)| t)
}

/// Each mount of a mountinfo text: (mount point, type), in the order mounted.
fn mounts_in_mountinfo(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    text.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let mp = fields.get(4)?;
        let dash = fields.iter().position(|f| *f == "-")?;
        let fstype = fields.get(dash + 1)?;
        Some((mp.replace("\\040", " "), fstype.to_string()))
    })
}

/// The mount points of this system's mounts of type `fs` (ext4, xfs ...), in the order mounted.
pub fn mount_points_of(fs: &str) -> Result<Vec<PathBuf>> {
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(mounts_in_mountinfo(&text)
        .filter(|(_, t)| t == fs)
        .map(|(mp, _)| PathBuf::from(mp))
        .collect())
}

/// The mount point and type of the mount holding `path` in a mountinfo text.
fn mount_in_mountinfo(text: &str, path: &Path) -> Option<(String, String)> {
    let mut best: Option<(String, String)> = None;
    for (mp, fstype) in mounts_in_mountinfo(text) {
        if path.starts_with(&mp) && best.as_ref().is_none_or(|(l, _)| mp.len() >= l.len()) {
            best = Some((mp, fstype));
        }
    }
    best
}

#[cfg(test)]
mod tests {

    /// The entries the getdents64 term reads are DIRENT_RECLEN bytes each, as the kernel
    /// gives them: the size by which a program's entries are counted from its bytes.
    #[test]
    fn the_terms_entries_have_the_record_length_prices_count_by() {
        let d = tempfile::tempdir().unwrap();
        for i in [0, 7, 99_999] {
            assert_eq!(entry_name(i).len(), 26);
            std::fs::write(d.path().join(entry_name(i)), b"").unwrap();
        }
        let dir = std::fs::File::open(d.path()).unwrap();
        let mut buf = vec![0u8; 4096];
        // SAFETY: buf is writable for its length; the fd is the open directory.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        assert!(n > 0);
        let mut off = 0;
        let mut ours = 0;
        while off < n as usize {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if buf[off + 19..off + 19 + 6] == *b"entry-" {
                assert_eq!(reclen, DIRENT_RECLEN);
                ours += 1;
            }
            off += reclen;
        }
        assert_eq!(ours, 3);
    }

    use super::*;

    #[test]
    fn the_longest_mount_holding_a_path_names_its_file_system() {
        let text = "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
                    30 22 0:27 / /tmp rw - tmpfs tmpfs rw\n\
                    31 22 0:28 / /tmpx rw - xfs /dev/vdb rw\n";
        assert_eq!(
            fs_in_mountinfo(text, Path::new("/tmp/a/b")).as_deref(),
            Some("tmpfs")
        );
        assert_eq!(
            fs_in_mountinfo(text, Path::new("/tmpx")).as_deref(),
            Some("xfs")
        );
        assert_eq!(
            fs_in_mountinfo(text, Path::new("/home")).as_deref(),
            Some("ext4")
        );
        assert_eq!(fs_in_mountinfo("", Path::new("/")), None);
        assert_eq!(
            mount_in_mountinfo(text, Path::new("/tmp/a")),
            Some(("/tmp".into(), "tmpfs".into()))
        );
        let ext4: Vec<String> = mounts_in_mountinfo(text)
            .filter(|(_, t)| t == "ext4")
            .map(|(mp, _)| mp)
            .collect();
        assert_eq!(ext4, vec!["/".to_string()]);
    }

    #[test]
    fn a_scratch_directory_is_gone_after_use() {
        let p = {
            let s = Scratch::new(&std::env::temp_dir()).unwrap();
            std::fs::write(s.path().join("f"), b"x").unwrap();
            s.path().to_path_buf()
        };
        assert!(!p.exists());
    }
}
