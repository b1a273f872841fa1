//! What a syscall costs when the program's own work came first.
//!
//! Every other term times its call in a loop of the same call: the kernel's code, its data
//! for the task, the file and the mapping, and the TLB entries that reach them are all in
//! the CPU's caches. A program that computes between its calls finds them pushed out. On
//! this project's 2-vCPU EPYC guest, each of getppid, a stat, an open and close, an mmap and
//! munmap and a 4 KiB pread cost 1.5-2.3x as much after a sweep of twice the private cache
//! (30 us of work) as in a loop; after a quarter of that sweep, 1.1-1.6x.
//!
//! A first touch of a fresh page (a page fault) costs 1.85x after the same sweep.
//!
//! The term is that factor, measured: the extra CPU time of the basket's calls (and a fault)
//! after a sweep
//! of twice the largest private cache, per ns of the same calls in a loop (`per_ns`), and the
//! time the sweep took (`latency`): the user work after which the price counts a call cold.
//! A call after less work is priced part way, by the share of that time it had.

use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::faults::{Mapping, Sweep};
use super::fsops::Scratch;
use super::SampleSpec;

/// Calls of each kind in a sample, hot and cold alike.
const CALLS: usize = 256;

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

/// (the extra ns a cold call costs per ns of the same call hot, the sweep's ns), one pair a
/// sample. Each sample times `CALLS` calls of each kind of the basket one at a time, hot
/// (after the same call) and cold (after a sweep of twice the private cache), the clock's own
/// cost taken out of both; the sample is the cold total over the hot one, less one.
pub fn cold_call(spec: &SampleSpec) -> Result<(Vec<f64>, Vec<f64>)> {
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
    let mut area = Sweep::of_len(2 * private_cache() as usize)?;
    let clock = clock_cost();
    let (mut ratios, mut sweeps) = (Vec::new(), Vec::new());
    let warm_until = Instant::now() + spec.warmup;
    while Instant::now() < warm_until {
        b.fresh()?;
        for k in 0..Basket::KINDS {
            b.call(k);
        }
        area.run(1);
    }
    for s in 0..spec.samples {
        let (mut hot, mut cold, mut swept) = (0.0, 0.0, 0.0);
        for k in 0..Basket::KINDS {
            b.fresh()?;
            b.call(k);
            for _ in 0..CALLS {
                let t = Instant::now();
                b.call(k);
                hot += t.elapsed().as_nanos() as f64 - clock;
            }
            for i in 0..CALLS {
                let t = Instant::now();
                area.run((s + i) as u8 | 1);
                swept += t.elapsed().as_nanos() as f64 - clock;
                let t = Instant::now();
                b.call(k);
                cold += t.elapsed().as_nanos() as f64 - clock;
            }
        }
        if hot <= 0.0 {
            bail!("the basket's calls took no time: the clock is too coarse here");
        }
        ratios.push((cold / hot - 1.0).max(0.0));
        sweeps.push(swept / (CALLS * Basket::KINDS) as f64);
    }
    Ok((ratios, sweeps))
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
