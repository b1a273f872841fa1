//! What a syscall costs when other work came between it and the last call of its kind.
//!
//! Every other term times its call in a loop of the same call: the kernel's code, its data
//! for the task, the file and the mapping, and the TLB entries that reach them are all in
//! the CPU's caches. In a program, other work comes between two calls of a kind (its own
//! computing, its other calls, other tasks on the CPU) and pushes them out. On this project's
//! 2-vCPU EPYC guest, each of getppid, a stat, an open and close, an mmap and munmap and a
//! 4 KiB pread cost 1.5-2.3x as much after a sweep of twice the private cache (30 us of work)
//! as in a loop; after a quarter of that sweep, 1.1-1.6x. On a 2-vCPU Xeon guest (2 MiB of
//! private cache), the same basket cost 1.2-1.3x after a sweep of 1 MiB (17 us), 3-5x after
//! 4 MiB (145 us), 7-8x after 16 MiB and 10-11x after 64 MiB (2.5 ms): the cost goes on
//! climbing well past the private cache (/tmp probe of 2026-12-07).
//!
//! The term is that curve, measured at `SWEEPS` sizes: at each, the extra CPU time of the
//! basket's syscalls just after a sweep of that many bytes over the same calls in a loop, per
//! syscall (`extra_ns`), the same of a fault per ns of it in a loop (`per_ns_fault`), and the
//! time the sweep took (`latency`). The price reads a call's gap (the time since the last
//! call of its kind on its CPU) on that curve.

use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::faults::{Mapping, Sweep};
use super::fsops::Scratch;
use super::SampleSpec;

/// Calls of each kind in a sample at a sweep of the private cache or less, hot and cold alike;
/// fewer at the larger sweeps (`calls_at`), at least `MIN_CALLS`.
const CALLS: usize = 256;
const MIN_CALLS: usize = 16;

/// The sweeps, in quarters of the private cache: a quarter of it, it, twice it (the term's
/// point before 2026-12-07), 8 and 32 times it. Each at most `MAX_SWEEP`.
pub const SWEEPS: [u64; 5] = [1, 4, 8, 32, 128];
/// The largest sweep, bytes: 256 MiB (a machine whose "private" cache is an L3).
const MAX_SWEEP: u64 = 256 << 20;

/// The sweeps' sizes here, bytes: `SWEEPS` of the private cache, in order, none twice.
pub fn sweep_sizes() -> Vec<u64> {
    let own = private_cache();
    let mut v: Vec<u64> = SWEEPS
        .iter()
        .map(|q| (own * q / 4).clamp(64 << 10, MAX_SWEEP) / 64 * 64)
        .collect();
    v.dedup();
    v
}

/// Cold calls of each kind a sample makes at a sweep of `size` bytes: `CALLS` up to the
/// private cache, then fewer in proportion (a sample's time stays about the same at each).
fn calls_at(size: u64, own: u64) -> usize {
    let n = (CALLS as u64 * own.max(1) / size.max(1)) as usize;
    n.clamp(MIN_CALLS, CALLS)
}

/// The size of the largest cache that serves cpu0 alone (its L2 on most x86 parts; the
/// largest cache where no level is private), from sysfs; 1 MiB where none is listed.
pub fn private_cache() -> u64 {
    let caches = super::files::cpu0_caches();
    let own = caches
        .iter()
        .filter(|(_, cpus)| cpus == "0")
        .map(|(s, _)| *s)
        .max();
    own.or_else(|| caches.iter().map(|(s, _)| *s).max())
        .unwrap_or(1 << 20)
}

/// The basket: the calls whose hot and cold times the term compares.
struct Basket {
    path: std::ffi::CString,
    file: std::fs::File,
    buf: Vec<u8>,
    /// Fresh anonymous pages for the faults (`fresh`), and the next one to touch.
    pages: Option<Mapping>,
    next: usize,
}

impl Basket {
    const KINDS: usize = 6;
    /// The kind that is a fault (the others are syscalls).
    const FAULT: usize = 5;
    /// The syscalls one call of each other kind makes (open and close, mmap and munmap: two
    /// each), and the faults of the fault's.
    const SYSCALLS: usize = 7;
    const FAULTS: usize = 1;
    /// The pages a kind's run of faults needs: one to warm, `CALLS` hot, `CALLS` cold.
    const PAGES: usize = 2 * CALLS + 1;

    /// A new mapping of `PAGES` untouched 4 KiB pages (THP refused) for the faults; the last
    /// one is unmapped.
    fn fresh(&mut self) -> Result<()> {
        self.pages = None;
        let len = Self::PAGES << 12;
        let m = Mapping::anon(len)?;
        // SAFETY: advice on the mapping just made, which the basket owns.
        unsafe { libc::madvise(m.addr.cast(), len, libc::MADV_NOHUGEPAGE) };
        self.pages = Some(m);
        self.next = 0;
        Ok(())
    }

    fn call(&mut self, kind: usize) {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscalls on this basket's own path, file, buffer and a fresh mapping
        // unmapped at once.
        unsafe {
            match kind {
                0 => {
                    libc::getppid();
                }
                1 => {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::stat(self.path.as_ptr(), &mut st);
                }
                2 => {
                    let fd = libc::open(self.path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                    if fd >= 0 {
                        libc::close(fd);
                    }
                }
                3 => {
                    let len = 16 << 12;
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p != libc::MAP_FAILED {
                        libc::munmap(p, len);
                    }
                }
                4 => {
                    libc::pread(
                        self.file.as_raw_fd(),
                        self.buf.as_mut_ptr().cast(),
                        self.buf.len(),
                        0,
                    );
                }
                _ => {
                    if let Some(m) = self.pages.as_ref().filter(|_| self.next < Self::PAGES) {
                        std::ptr::write_volatile(m.addr.add(self.next << 12), 1);
                        self.next += 1;
                    }
                }
            }
        }
    }
}

/// One point of the curve: the sweep's size, bytes; the extra ns a cold syscall of the basket
/// costs over the same call hot, per syscall (a call's extra is the kernel's code and data it
/// reads again, much the same whatever the call's hot cost: after a 4 MiB sweep here, +2.1 us
/// for getppid, +5.3 for a stat, +5 for a pread, +4-5 a call for open and close and for mmap
/// and munmap, where their ratios ran from 7x to 27x); the extra of its fault per ns of the
/// same fault hot, apart (a fault's cost is mostly the page it zeroes, which no cache holds
/// either way: 1.1x after 512 KiB, 2.5x after 2 MiB, 5x after 4 MiB); and the sweep's ns. One
/// of each a sample.
pub struct Point {
    pub size: u64,
    pub extra_ns: Vec<f64>,
    pub extra_fault: Vec<f64>,
    pub sweep: Vec<f64>,
    /// The extra of the basket's syscalls just after as long as the sweep took spent in the
    /// basket's other syscalls instead (`after_calls`), per syscall.
    pub after_calls: Vec<f64>,
}

/// The curve, a `Point` for each of `sweep_sizes()`. Each sample times, at each size, the
/// calls of each kind of the basket one at a time, hot (after the same call, `CALLS` of them)
/// and cold (after a sweep of that size, `calls_at` of them), the clock's own cost taken out
/// of both; the syscalls' sample is the cold mean less the hot one, per syscall, the fault's
/// the cold mean over the hot one, less one.
pub fn cold_call(spec: &SampleSpec) -> Result<Vec<Point>> {
    use std::io::Write;
    let scratch = Scratch::new(&std::env::temp_dir())?;
    let path = scratch.path().join("f");
    scratch
        .new_file("f")?
        .write_all(&[9u8; 4096])
        .context("writing the file")?;
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut b = Basket {
        path: std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .context("a temporary path with a NUL")?,
        file,
        buf: vec![0u8; 4096],
        pages: None,
        next: 0,
    };
    let own = private_cache();
    let sizes = sweep_sizes();
    let mut area = Sweep::of_len(*sizes.last().unwrap_or(&(2 * own)) as usize)?;
    let clock = clock_cost();
    let mut points: Vec<Point> = sizes
        .iter()
        .map(|&size| Point {
            size,
            extra_ns: Vec::new(),
            extra_fault: Vec::new(),
            sweep: Vec::new(),
            after_calls: Vec::new(),
        })
        .collect();
    let warm_until = Instant::now() + spec.warmup;
    while Instant::now() < warm_until {
        b.fresh()?;
        for k in 0..Basket::KINDS {
            b.call(k);
        }
        area.run_over(sizes[0] as usize, 1);
    }
    for s in 0..spec.samples {
        for p in points.iter_mut() {
            let cold_calls = calls_at(p.size, own);
            // [hot, cold] ns of the syscalls (kinds 0-4) and of the fault (the last kind).
            let (mut calls, mut fault, mut swept) = ([0.0; 2], [0.0; 2], 0.0);
            for k in 0..Basket::KINDS {
                let sums = if k == Basket::FAULT {
                    &mut fault
                } else {
                    &mut calls
                };
                b.fresh()?;
                b.call(k);
                for _ in 0..CALLS {
                    let t = Instant::now();
                    b.call(k);
                    sums[0] += t.elapsed().as_nanos() as f64 - clock;
                }
                for i in 0..cold_calls {
                    let t = Instant::now();
                    area.run_over(p.size as usize, (s + i) as u8 | 1);
                    swept += t.elapsed().as_nanos() as f64 - clock;
                    let t = Instant::now();
                    b.call(k);
                    sums[1] += t.elapsed().as_nanos() as f64 - clock;
                }
            }
            if calls[0] <= 0.0 || fault[0] <= 0.0 {
                bail!("the basket's calls took no time: the clock is too coarse here");
            }
            let (calls, fault) = (
                calls.map(|x| x / Basket::SYSCALLS as f64),
                fault.map(|x| x / Basket::FAULTS as f64),
            );
            p.extra_ns
                .push((calls[1] / cold_calls as f64 - calls[0] / CALLS as f64).max(0.0));
            p.extra_fault
                .push(((fault[1] / cold_calls as f64) / (fault[0] / CALLS as f64) - 1.0).max(0.0));
            let sweep = swept / (cold_calls * Basket::KINDS) as f64;
            p.sweep.push(sweep);
            let after = after_calls(&mut b, cold_calls, sweep, clock)? / Basket::SYSCALLS as f64;
            p.after_calls
                .push((after / cold_calls as f64 - calls[0] / CALLS as f64).max(0.0));
        }
    }
    Ok(points)
}

/// The basket's syscalls (its kinds but the fault), each timed `cold_calls` times just after
/// `work` ns spent in the basket's other syscalls, round in turn: their ns summed, the clock's
/// `clock` taken out of each. Other calls share much of a call's code and data (the entry and
/// exit, the file and path lookup, the task's mm), and push out less of it than a sweep of
/// new memory as long: in a C walker on the 2-vCPU EPYC guest an openat cost 0.31 us more
/// after a directory's getdents64, fstatat and close calls (10-20 us) than in a loop, and
/// 1.5 us more after a 2 MiB sweep of user memory (22 us).
fn after_calls(b: &mut Basket, cold_calls: usize, work: f64, clock: f64) -> Result<f64> {
    let mut sum = 0.0;
    for k in 0..Basket::FAULT {
        b.fresh()?;
        b.call(k);
        let mut other = 0;
        for _ in 0..cold_calls {
            let t = Instant::now();
            while (t.elapsed().as_nanos() as f64) < work {
                other = (other + 1) % Basket::FAULT;
                if other == k {
                    continue;
                }
                b.call(other);
            }
            let t = Instant::now();
            b.call(k);
            sum += t.elapsed().as_nanos() as f64 - clock;
        }
    }
    Ok(sum)
}

/// The median ns between two reads of the clock, back to back.
fn clock_cost() -> f64 {
    let mut v: Vec<f64> = (0..1001)
        .map(|_| {
            let t = Instant::now();
            t.elapsed().as_nanos() as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
