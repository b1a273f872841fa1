//! Page faults timed at first touch: anonymous 4 KiB and THP, and file-backed on cached pages.
//! Each sample maps a fresh region, touches it, and divides the time by the minor faults the
//! kernel counted for this thread, so fault-around and THP fallbacks are not guessed.

use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::measure::{cancel, SampleSpec};

const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// Minor faults this thread has taken so far.
fn minflt() -> i64 {
    // SAFETY: getrusage writes the whole struct we hand it and reads nothing else.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru.ru_minflt
    }
}

/// A mapping, unmapped on drop.
pub(super) struct Mapping {
    pub(super) addr: *mut u8,
    len: usize,
}

impl Mapping {
    /// `len` bytes of private anonymous memory, readable and writable, not yet touched.
    pub(super) fn anon(len: usize) -> Result<Mapping> {
        Mapping::new(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )
    }

    pub(super) fn new(len: usize, prot: i32, flags: i32, fd: i32) -> Result<Mapping> {
        Mapping::new_at(len, prot, flags, fd, 0)
    }

    /// A mapping of `len` bytes of `fd` from `offset`.
    pub(super) fn new_at(
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        offset: i64,
    ) -> Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel; nothing else refers to it.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            bail!("mmap of {len} bytes: {}", std::io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: p.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this owns.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// A buffer of four times the largest CPU cache (`files::read_span`) that forked children do not
/// inherit, swept to push what a measurement touched last out of the caches of the CPU it
/// runs on (a small file's cached pages; a waiting child's pages, page tables and mappings).
pub(super) struct Sweep(Mapping, usize);

impl Sweep {
    pub(super) fn new() -> Result<Sweep> {
        Sweep::of_len(super::files::read_span() as usize)
    }

    /// A sweep over `len` bytes (`cold-call`'s largest; `run_over` sweeps less of it).
    pub(super) fn of_len(len: usize) -> Result<Sweep> {
        let m = Mapping::anon(len)?;
        // SAFETY: advice on the mapping just made, which this owns.
        if unsafe { libc::madvise(m.addr.cast(), len, libc::MADV_DONTFORK) } != 0 {
            bail!(
                "madvise(MADV_DONTFORK): {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(Sweep(m, len))
    }

    /// Write one byte of every cache line (each pass a new value, so none is skipped).
    pub(super) fn run(&mut self, salt: u8) {
        self.run_over(self.1, salt)
    }

    /// `run` over the first `len` bytes only (at most the whole).
    pub(super) fn run_over(&mut self, len: usize, salt: u8) {
        for off in (0..len.min(self.1)).step_by(64) {
            // SAFETY: inside the mapping this owns.
            unsafe {
                let b = self.0.addr.add(off);
                std::ptr::write_volatile(b, std::ptr::read_volatile(b).wrapping_add(salt));
            }
        }
    }
}

/// Touch every `step` bytes of `len` from `base` (a write, or a read for a shared file
/// mapping); (ns, minor faults taken).
fn touch(base: *mut u8, len: usize, step: usize, write: bool) -> (f64, i64) {
    let f0 = minflt();
    let t0 = Instant::now();
    let mut sum = 0u8;
    for off in (0..len).step_by(step) {
        // SAFETY: off < len and base..base+len is mapped readable (and writable when write).
        unsafe {
            if write {
                std::ptr::write_volatile(base.add(off), 1);
            } else {
                sum = sum.wrapping_add(std::ptr::read_volatile(base.add(off)));
            }
        }
    }
    std::hint::black_box(sum);
    (t0.elapsed().as_nanos() as f64, minflt() - f0)
}

/// Take a warm-up round then `spec.samples` rounds of `round`, each (ns, faults); ns per fault.
fn rounds(spec: &SampleSpec, mut round: impl FnMut() -> Result<(f64, i64)>) -> Result<Vec<f64>> {
    round()?;
    let mut out = Vec::with_capacity(spec.samples);
    for _ in 0..spec.samples {
        cancel::check()?;
        let (ns, faults) = round()?;
        if faults <= 0 {
            bail!("the kernel counted no faults for a first touch");
        }
        out.push(ns / faults as f64);
    }
    Ok(out)
}

/// Anonymous first-touch faults: 4 KiB pages (THP refused with MADV_NOHUGEPAGE), or 2 MiB
/// THP faults (MADV_HUGEPAGE on an aligned region); an error when THP faults fell back.
pub fn anon(spec: &SampleSpec, thp: bool) -> Result<Vec<f64>> {
    let len = if thp { 64 << 20 } else { 16 << 20 };
    let step = if thp { HUGE } else { PAGE };
    rounds(spec, || {
        let m = Mapping::anon(len + HUGE)?;
        let base = ((m.addr as usize).div_ceil(HUGE) * HUGE) as *mut u8;
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advice on a range inside the mapping this owns.
        if unsafe { libc::madvise(base.cast(), len, advice) } != 0 {
            bail!("madvise: {}", std::io::Error::last_os_error());
        }
        let (ns, faults) = touch(base, len, step, true);
        let wanted = (len / step) as i64;
        if thp && faults > 2 * wanted {
            bail!("THP faults fell back to 4 KiB pages ({faults} faults for {wanted} huge pages): THP is off or no huge page was free");
        }
        Ok((ns, faults))
    })
}

/// Read faults on a shared mapping of a file whose pages are all in the page cache, each one
/// a fault-around of `FAULT_AROUND` pages: what a program's faults on its libraries and mapped
/// files are.
///
/// The mapping starts one page past a 2 MiB boundary. Mapped where the kernel chose (aligned to
/// the file, as it aligns a large file's mapping), a file whose page cache holds 2 MiB folios
/// is mapped a whole 2 MiB per fault: measured here, 8 faults for 16 MiB at 4.5-5.2 us each,
/// where a fault-around of 16 pages took 1.5-1.6 us. That is a different event, and one
/// programs seldom take (it needs a 2 MiB-aligned mapping of a large cached file); priced as
/// this term it read 3.2x the file faults of a python start.
pub fn file(spec: &SampleSpec) -> Result<Vec<f64>> {
    // Every page cached, each its own folio, as a program's binaries and libraries are.
    let f = super::files::scratch_file_of_pages(FILE_FAULT_BYTES)
        .context("creating a temporary file for file faults")?;
    file_with(spec, &f, None)
}

/// The file the file-fault terms map.
const FILE_FAULT_BYTES: usize = 16 << 20;

/// Anonymous pages touched after each of the cold term's file pages as the file is written
/// (let go once it is made): the file's pages lie one in 16 of the memory given out while it
/// was made, as a binary's pages, cached a fault at a time between the system's other
/// allocations, lie across memory.
const SCATTER: usize = 15;

/// A file of `bytes` cached a page a folio, its pages written in a scrambled order with
/// `SCATTER` anonymous pages touched after each: no two pages side by side in the file lie
/// side by side in memory. A binary's pages mostly do not either (cc1's 8140 cached pages
/// here: 21% next to the one before, the median gap between two 558000 pages; libjvm's 11%).
/// A file written at once takes pages side by side (89% of a 4 KiB-at-a-time copy of cc1),
/// whose descriptors a CPU's prefetcher fetches ahead. After a 512 MiB sweep, a 16-page fault
/// took 4.3-5.0 us on cc1, 4.3-6.6 on libjvm, 2.7-6.0 on six files written in a scrambled
/// order, each its own figure (as the pages it was given lay), and 6.0-6.6 on a file written
/// as this one is. Written side by side or only scrambled, this term read 2.2-6.2 us from run
/// to run; made this way, 5.8-6.3 in eleven runs.
pub(super) fn scattered_file(bytes: usize) -> Result<std::fs::File> {
    let f = super::files::scratch_file().context("creating a temporary file for file faults")?;
    write_scattered(&f, bytes / PAGE)?;
    Ok(f)
}

/// Write `pages` pages into `f` as `scattered_file` does: a page a call, in a scrambled order,
/// `SCATTER` anonymous pages touched after each (let go at the end).
pub(super) fn write_scattered(f: &std::fs::File, pages: usize) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let spacer = Mapping::anon(pages * SCATTER * PAGE)?;
    let page = [7u8; PAGE];
    for i in 0..pages {
        // 1021 is prime, so i * 1021 mod pages visits every page once (pages not a multiple).
        let at = (i * 1021) % pages;
        f.write_all_at(&page, (at * PAGE) as u64)
            .context("writing the file")?;
        for k in 0..SCATTER {
            // SAFETY: inside the spacer mapping, which this owns.
            unsafe { std::ptr::write_volatile(spacer.addr.add((i * SCATTER + k) * PAGE), 1) };
        }
    }
    Ok(())
}

/// As `file`, on a file whose pages are scattered (`scattered_file`), each round after a
/// sweep of memory (`Sweep`, not timed) that puts the file's page-cache entries and page
/// descriptors, and the page tables, out of the CPU's caches: a program's first fault on a
/// range of a file it has not mapped since its last run. On the 2-vCPU guest here the first
/// mapping of cc1 (33 MB) in a process took 4.5 us a 16-page fault, a second mapping of it in
/// the same process 1.5-1.9 us, and every mapping after a 256 MiB sweep 4.1-4.4 us (`gcc`'s
/// own cc1 took 4.0 us a fault in a price: its windows are seldom as cold as this).
pub fn file_cold(spec: &SampleSpec) -> Result<Vec<f64>> {
    let f = scattered_file(FILE_FAULT_BYTES)?;
    let mut sweep = Sweep::new()?;
    file_with(spec, &f, Some(&mut sweep))
}

fn file_with(
    spec: &SampleSpec,
    f: &std::fs::File,
    mut sweep: Option<&mut Sweep>,
) -> Result<Vec<f64>> {
    use std::os::fd::AsRawFd;
    let len = FILE_FAULT_BYTES;
    let mut salt = 0u8;
    rounds(spec, || {
        let room = Mapping::new(
            len + 2 * HUGE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )?;
        let at = (room.addr as usize).div_ceil(HUGE) * HUGE + PAGE;
        // SAFETY: at..at+len lies inside `room`, which this owns and unmaps (the file's
        // mapping with it) on drop; MAP_FIXED replaces only that reserved range.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!("mmap of the file: {}", std::io::Error::last_os_error());
        }
        if let Some(s) = sweep.as_deref_mut() {
            salt = salt.wrapping_add(1);
            s.run(salt);
        }
        let (ns, faults) = touch(p.cast(), len, PAGE, false);
        let most = (len / PAGE / FAULT_AROUND) as i64;
        if faults < most / 2 {
            bail!("{faults} faults mapped {len} bytes of a file (a fault-around of {FAULT_AROUND} pages would take {most}): the kernel mapped more per fault than this term prices");
        }
        Ok((ns, faults))
    })
}

/// First touch of a mapped page-cache page in a mapping of that one page, per fault: a
/// fault that maps one page (fault-around stops at the mapping's end), the fixed part of a
/// file fault, which `file`'s 16-page faults less this, over 15, gives a page's part of. The
/// file is cached a page a folio, as `file`'s; every mapping is of every other page, so that
/// no two merge into one.
pub fn file_single(spec: &SampleSpec) -> Result<Vec<f64>> {
    use std::os::fd::AsRawFd;
    const MAPS: usize = 512;
    let f = super::files::scratch_file_of_pages(2 * MAPS * PAGE)
        .context("creating a temporary file for one-page file faults")?;
    rounds(spec, || {
        let mut maps = Vec::with_capacity(MAPS);
        for i in 0..MAPS {
            let m = Mapping::new_at(
                PAGE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                (2 * i * PAGE) as i64,
            )?;
            maps.push(m);
        }
        let f0 = minflt();
        let t0 = Instant::now();
        let mut sum = 0u8;
        for m in &maps {
            // SAFETY: each mapping is one readable page of the file.
            sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(m.addr) });
        }
        let ns = t0.elapsed().as_nanos() as f64;
        std::hint::black_box(sum);
        Ok((ns, minflt() - f0))
    })
}

/// Pages a file read fault maps around the faulting one (the kernel's fault_around_bytes,
/// 64 KiB, by default).
pub const FAULT_AROUND: usize = 16;

/// Pages each `munmap` term unmaps, touched first so each has a TLB entry to flush.
pub const MUNMAP_PAGES: usize = 16;

/// munmap of `MUNMAP_PAGES` touched pages, per call; with `shootdown`, while a thread of this
/// process spins on another CPU, so the kernel must flush that CPU's TLB by IPI too.
pub fn munmap(spec: &SampleSpec, shootdown: bool) -> Result<Vec<f64>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let cpus = crate::measure::cpus::allowed_cpus();
    let (mine, theirs) = match cpus.as_slice() {
        [] => bail!("no CPU allowed"),
        [.., a, b] => (*b, Some(*a)),
        [only] if !shootdown => (*only, None),
        _ => bail!("a TLB shootdown needs a second CPU; this process may use one"),
    };
    let _pin = crate::measure::cpus::Pinned::to(mine)?;
    let stop = Arc::new(AtomicBool::new(false));
    let partner = match (shootdown, theirs) {
        (true, Some(cpu)) => {
            let stop = stop.clone();
            Some(std::thread::spawn(move || {
                let _ = crate::measure::cpus::Pinned::to(cpu);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }))
        }
        _ => None,
    };
    let len = MUNMAP_PAGES * PAGE;
    let calls = 200;
    let round = || -> Result<f64> {
        let mut ns = 0.0;
        for _ in 0..calls {
            let m = Mapping::anon(len)?;
            touch(m.addr, len, PAGE, true);
            let t0 = Instant::now();
            drop(m);
            ns += t0.elapsed().as_nanos() as f64;
        }
        Ok(ns / calls as f64)
    };
    let result = (|| {
        round()?;
        let mut out = Vec::with_capacity(spec.samples);
        for _ in 0..spec.samples {
            cancel::check()?;
            out.push(round()?);
        }
        Ok(out)
    })();
    stop.store(true, Ordering::Relaxed);
    if let Some(p) = partner {
        let _ = p.join();
    }
    result
}

/// Major faults this thread has taken so far.
fn majflt() -> i64 {
    // SAFETY: getrusage writes the whole struct we hand it and reads nothing else.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru.ru_majflt
    }
}

/// Copy-on-write faults: writes to a private mapping of a file whose pages are all cached, so
/// each fault copies a page-cache page into a new anonymous one.
pub fn cow(spec: &SampleSpec) -> Result<Vec<f64>> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let len = 16 << 20;
    let mut f = super::files::scratch_file().context("creating a temporary file for COW faults")?;
    f.write_all(&vec![7u8; len]).context("writing the file")?;
    let mut sink = Vec::with_capacity(len);
    std::io::Seek::rewind(&mut f)?;
    f.read_to_end(&mut sink)?;
    rounds(spec, || {
        let m = Mapping::new(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
        )?;
        Ok(touch(m.addr, len, PAGE, true))
    })
}

/// Pages of the file the major-fault term maps.
const MAJOR_PAGES: usize = 1024;

/// Major faults, CPU ns each: a shared read mapping of a synced scratch file on the file system
/// in `dir` whose pages were dropped (posix_fadvise DONTNEED, that file only), read through.
/// A major fault reads ahead, so the pass also takes minor faults on pages already read; each
/// is taken out at the cost of a minor fault on the cached file measured in the same round.
pub fn major(spec: &SampleSpec, dir: &std::path::Path) -> Result<Vec<f64>> {
    use crate::measure::cputime::thread_cpu_ns;
    use std::os::fd::AsRawFd;
    let s = super::fsops::Scratch::new(dir)?;
    let f = super::fsops::cold_file(&s, MAJOR_PAGES)?;
    let len = MAJOR_PAGES * PAGE;
    let pass = || -> Result<(f64, i64, i64)> {
        let m = Mapping::new(len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd())?;
        let (maj0, t0) = (majflt(), thread_cpu_ns());
        let (_, minor) = touch(m.addr, len, PAGE, false);
        Ok((
            thread_cpu_ns().saturating_sub(t0) as f64,
            majflt() - maj0,
            minor,
        ))
    };
    super::fsops::cpu_samples(spec, || {
        super::fsops::drop_pages(f.as_raw_fd(), len)?;
        let (cold, major, minor_cold) = pass()?;
        let (warm, _, minor_warm) = pass()?;
        if major <= 0 {
            bail!("the kernel counted no major fault after the file's pages were dropped");
        }
        // The kernel counts a fault as major or minor, never both.
        let minors = minor_cold.max(0) as f64;
        let per_minor = warm / minor_warm.max(1) as f64;
        Ok(((cold - minors * per_minor).max(0.0), major as f64))
    })
}

/// mmap of 16 anonymous pages (a new VMA, nothing touched), per call; the munmaps untimed.
pub fn mmap(spec: &SampleSpec) -> Result<Vec<f64>> {
    mmaps(spec, || Mapping::anon(MUNMAP_PAGES * PAGE))
}

/// ns per call of `map`, 200 calls a round one after another, their mappings kept until the
/// round's end and unmapped untimed.
fn mmaps(spec: &SampleSpec, mut map: impl FnMut() -> Result<Mapping>) -> Result<Vec<f64>> {
    let calls = 200;
    let mut maps = Vec::with_capacity(calls);
    rounds_ns(spec, || {
        let t0 = Instant::now();
        for _ in 0..calls {
            maps.push(map()?);
        }
        let ns = t0.elapsed().as_nanos() as f64;
        maps.clear();
        Ok(ns / calls as f64)
    })
}

/// mmap of 16 pages of a shared library, read-only and private, as a loader maps a
/// library's segments (nothing touched), per call; the munmaps untimed. The library is this
/// process's libc (else its own executable): mapped by most processes on the machine, so
/// each new mapping goes into a tree of theirs, as a program's own libraries' do. The calls
/// follow each other, their structures in the CPU's caches, as the anonymous mmap term's
/// do. A program maps its files as it loads, between its faults and reads, and pays more: an
/// mmap of libc cost 0.55 us again and again here, 1.9 us after a sweep of 4 MiB, 5.5 us
/// after 16 MiB, 6.7 us after 64 MiB, and 19 us measured as this term after a sweep of four
/// times the largest cache (a JVM's file mmaps took 3.7-4.7 us, a python start's 7.6-10.5 us,
/// by bpftrace). Which sweep a program's loader meets is not known here, so none is taken.
pub fn mmap_file(spec: &SampleSpec) -> Result<Vec<f64>> {
    let path = shared_library().unwrap_or_else(|| "/proc/self/exe".into());
    let f = std::fs::File::open(&path)
        .with_context(|| format!("opening {} for the mmap-file term", path.display()))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    mmaps(spec, || {
        Mapping::new(MUNMAP_PAGES * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, fd)
    })
}

/// The file of this process's libc mapping, from /proc/self/maps.
fn shared_library() -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(std::path::PathBuf::from)
}

/// A warm-up round then `spec.samples` rounds of `round`, each its own ns per event.
fn rounds_ns(spec: &SampleSpec, mut round: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    round()?;
    let mut out = Vec::with_capacity(spec.samples);
    for _ in 0..spec.samples {
        cancel::check()?;
        out.push(round()?);
    }
    Ok(out)
}
