//! Process terms by the pages they handle: an exec (of a one-page static program, and its
//! exit), a process's exit by the pages it unmaps, a fork by the parent's mapped pages.
//!
//! Each is CPU time on the task that does the work: a child's from the rusage wait4 returns
//! (its whole life, precise to the microsecond) less what it read from its own CPU clock
//! before the part timed; a fork's from the parent's thread clock around the call. Parent and
//! child share one CPU, so the parent's wait returns only after the child's last switch out.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::fsops::{cpu_samples, Scratch};
use crate::measure::cpus::Pinned;
use crate::measure::cputime::thread_cpu_ns;
use crate::measure::SampleSpec;

/// The sizes the per-page terms are measured at (bytes touched): one page, and 16 MiB.
pub const PAGE_SIZES: [u64; 2] = [4096, 16 << 20];

/// A static x86-64 ELF of one page that calls exit_group(0) at once: the smallest program an
/// exec can load (no interpreter, no libraries).
pub fn tiny_elf() -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    const CODE_AT: u64 = 64 + 56;
    // mov eax, 231 (exit_group); xor edi, edi; syscall
    let code = [0xb8, 0xe7, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05];
    let size = CODE_AT + code.len() as u64;
    let mut e = Vec::with_capacity(size as usize);
    e.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&(BASE + CODE_AT).to_le_bytes()); // entry
    e.extend_from_slice(&64u64.to_le_bytes()); // program headers
    e.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    e.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 0, 0] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    e.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    e.extend_from_slice(&5u32.to_le_bytes()); // R+X
    e.extend_from_slice(&0u64.to_le_bytes());
    e.extend_from_slice(&BASE.to_le_bytes());
    e.extend_from_slice(&BASE.to_le_bytes());
    e.extend_from_slice(&size.to_le_bytes());
    e.extend_from_slice(&size.to_le_bytes());
    e.extend_from_slice(&4096u64.to_le_bytes());
    e.extend_from_slice(&code);
    e
}

/// Wait for `pid`; its whole CPU time (user + system), ns, and its exit status.
fn reap(pid: i32) -> Result<(f64, i32)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid out buffer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out pointers.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if rc != pid {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    Ok((us(ru.ru_utime) + us(ru.ru_stime), status))
}

/// CPU ns of an exec of a one-page static program and its exit, per exec: the child's whole
/// life from a vfork-style spawn (its spawn's few calls included).
pub fn exec(spec: &SampleSpec, dir: &Path) -> Result<Vec<f64>> {
    if !cfg!(target_arch = "x86_64") {
        bail!("the exec term's program is x86-64 code; this machine is not");
    }
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new(dir)?;
    let path = s.path().join("tiny");
    std::fs::write(&path, tiny_elf()).context("writing the one-page program")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    let _pin = Pinned::last_allowed();
    cpu_samples(spec, || {
        let child = std::process::Command::new(&path)
            .spawn()
            .with_context(|| format!("exec of {} (a noexec mount?)", path.display()))?;
        let (ns, status) = reap(child.id() as i32)?;
        if status != 0 {
            bail!("the one-page program exited with status {status}");
        }
        Ok((ns, 1.0))
    })
}

/// A shared anonymous page the child writes its CPU clock into.
struct SharedWord(*mut u64);

impl SharedWord {
    fn new() -> Result<SharedWord> {
        // SAFETY: a fresh shared anonymous page chosen by the kernel.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!("mmap: {}", std::io::Error::last_os_error());
        }
        Ok(SharedWord(p.cast()))
    }
}

impl Drop for SharedWord {
    fn drop(&mut self) {
        // SAFETY: unmapping the page this owns.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

/// CPU ns of a process's exit after it mapped and touched `bytes` of anonymous memory: the
/// child's whole CPU time less its own clock read just before `_exit`.
pub fn exit(spec: &SampleSpec, bytes: usize) -> Result<Vec<f64>> {
    exit_after(spec, bytes, Mapped::Anon)
}

/// CPU ns of a process's exit after it read `bytes` of a file through a shared mapping, every
/// page cached, each its own folio, the pages scattered over memory (a program's libraries
/// and binaries, `faults::scattered_file`): unmapping a page-cache page drops a reference,
/// where an anonymous page is freed. The mapping starts one page past a 2 MiB
/// boundary, as the fault-file term's, so its pages are mapped 16 at a time as a program's
/// are, never a 2 MiB folio whole.
pub fn exit_file(spec: &SampleSpec, bytes: usize) -> Result<Vec<f64>> {
    let f = super::faults::scattered_file(bytes).context("creating a file for the exit term")?;
    exit_after(
        spec,
        bytes,
        Mapped::File(std::os::fd::AsRawFd::as_raw_fd(&f)),
    )
}

/// CPU ns of a forked child's exit right after the fork, its parent having `bytes` of
/// anonymous memory touched: the child unmaps pages it shares with its parent since the fork
/// (their references dropped, none freed), as a forked child that execs tears down its copy
/// inside execve. The per-byte part is that unmap's cost a byte; the fixed part carries the
/// measuring process's own copy, the same at both sizes.
pub fn exit_shared(spec: &SampleSpec, bytes: usize) -> Result<Vec<f64>> {
    let _mem = touched_anon(bytes)?;
    exit_after(spec, bytes, Mapped::Nothing)
}

/// A fresh private anonymous mapping of `bytes` in 4 KiB pages (no THP), each page written
/// once; unmapped when dropped.
fn touched_anon(bytes: usize) -> Result<super::faults::Mapping> {
    let m = super::faults::Mapping::anon(bytes)?;
    // SAFETY: advice and writes inside the mapping just made, which this owns.
    unsafe {
        libc::madvise(m.addr.cast(), bytes, libc::MADV_NOHUGEPAGE);
        for off in (0..bytes).step_by(4096) {
            std::ptr::write_volatile(m.addr.add(off), 1);
        }
    }
    Ok(m)
}

/// The mappings of one page each the VMA terms add (every other one read-only after its
/// page is touched, so that neighbours never merge back into one).
pub const VMAS: usize = 1024;

/// What the exit term's child maps.
#[derive(Clone, Copy, PartialEq)]
enum Mapped {
    /// Anonymous memory, written: one mapping.
    Anon,
    /// As `Anon`, then split into a mapping a page (`split_pages`).
    SplitAnon,
    /// A cached file through a shared mapping, read.
    File(i32),
    /// Nothing of its own: the child exits with what the fork gave it.
    Nothing,
}

/// Make every other page of the `pages` at `p` read-only: `pages` mappings where there was
/// one, none of them mergeable with its neighbours.
///
/// # Safety
/// `p` is the start of a private mapping of at least `pages` pages this process owns.
unsafe fn split_pages(p: *mut libc::c_void, pages: usize) -> bool {
    (1..pages)
        .step_by(2)
        .all(|i| libc::mprotect(p.cast::<u8>().add(i * 4096).cast(), 4096, libc::PROT_READ) == 0)
}

/// CPU ns an exit spends on each mapping it tears down, beyond its pages: a child with
/// `VMAS` pages touched in one mapping beside one with them in a mapping a page, per mapping
/// added. A program's libraries make a hundred mappings or more.
pub fn exit_vma(spec: &SampleSpec) -> Result<Vec<f64>> {
    let one = exit_after(spec, VMAS * 4096, Mapped::Anon)?;
    let split = exit_after(spec, VMAS * 4096, Mapped::SplitAnon)?;
    Ok(per_vma(&one, &split))
}

/// CPU ns a fork spends on each mapping it copies, beyond its pages: as `exit_vma`, in the
/// parent's fork.
pub fn fork_vma(spec: &SampleSpec) -> Result<Vec<f64>> {
    let one = fork_with(spec, VMAS * 4096, false)?;
    let split = fork_with(spec, VMAS * 4096, true)?;
    Ok(per_vma(&one.ns, &split.ns))
}

/// Each sample pair's difference over the mappings added.
fn per_vma(one: &[f64], split: &[f64]) -> Vec<f64> {
    one.iter()
        .zip(split)
        .map(|(a, b)| ((b - a) / (VMAS - 1) as f64).max(0.0))
        .collect()
}

/// A pipe's two ends, closed on drop.
struct Pipe([i32; 2]);

impl Pipe {
    fn new() -> Result<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("pipe2: {}", std::io::Error::last_os_error());
        }
        Ok(Pipe(fds))
    }

    /// Write one byte; false where it could not.
    fn signal(&self) -> bool {
        // SAFETY: a one-byte write from a stack byte to this pipe's write end.
        unsafe { libc::write(self.0[1], [1u8].as_ptr().cast(), 1) == 1 }
    }

    /// Wait for one byte; false at end of file (the writer gone) or an error.
    fn wait(&self) -> bool {
        let mut b = 0u8;
        // SAFETY: a one-byte read into a stack byte from this pipe's read end.
        unsafe { libc::read(self.0[0], (&mut b as *mut u8).cast(), 1) == 1 }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: closing the fds this owns.
        unsafe {
            libc::close(self.0[0]);
            libc::close(self.0[1]);
        }
    }
}

/// The exit terms: the child maps `bytes` as `what` says (a file's, read; else anonymous,
/// written, and split into a mapping a page for `SplitAnon`), touches every page and waits;
/// the parent, on the same CPU, sweeps four times the largest cache meanwhile; the child then
/// reads its clock and exits. An exit comes after the program's own work: the pages, page
/// tables and mappings it tears down are no longer in the caches (here an exit that unmapped
/// a compiler's 8140 file pages took 1.0-1.3 ms with them hot, 1.5-1.6 ms after a sweep).
/// `Mapped::Nothing`'s child (a fork's copy, let go at once) exits with no wait and no sweep.
fn exit_after(spec: &SampleSpec, bytes: usize, what: Mapped) -> Result<Vec<f64>> {
    const HUGE: usize = 2 << 20;
    let word = SharedWord::new()?;
    let (ready, go) = (Pipe::new()?, Pipe::new()?);
    let mut sweep = match what {
        Mapped::Nothing => None,
        _ => Some(super::faults::Sweep::new()?),
    };
    let sweep_on = sweep.is_some();
    let mut round = 0u8;
    let _pin = Pinned::last_allowed();
    cpu_samples(spec, || {
        // SAFETY: the child calls only async-signal-safe functions (mmap, madvise, read,
        // write, clock_gettime, _exit) and writes only its own fresh mapping and the shared page.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // A child that fails says it is ready first, so that the parent never waits on it.
            let fail = || -> ! {
                if sweep_on {
                    ready.signal();
                }
                // SAFETY: ends this forked child at once.
                unsafe { libc::_exit(1) }
            };
            // SAFETY: as above; in the child, anything failing ends it with status 1.
            unsafe {
                if what == Mapped::Nothing {
                    std::ptr::write_volatile(word.0, thread_cpu_ns());
                    libc::_exit(0);
                }
                let p = match what {
                    Mapped::Anon | Mapped::SplitAnon => {
                        let p = libc::mmap(
                            std::ptr::null_mut(),
                            bytes,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        if p != libc::MAP_FAILED {
                            libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE);
                        }
                        p
                    }
                    Mapped::File(fd) => {
                        let room = libc::mmap(
                            std::ptr::null_mut(),
                            bytes + 2 * HUGE,
                            libc::PROT_NONE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        if room == libc::MAP_FAILED {
                            fail();
                        }
                        let at = (room as usize).div_ceil(HUGE) * HUGE + 4096;
                        libc::mmap(
                            at as *mut libc::c_void,
                            bytes,
                            libc::PROT_READ,
                            libc::MAP_SHARED | libc::MAP_FIXED,
                            fd,
                            0,
                        )
                    }
                    Mapped::Nothing => libc::_exit(0),
                };
                if p == libc::MAP_FAILED {
                    fail();
                }
                let mut sum = 0u8;
                let file = matches!(what, Mapped::File(_));
                for off in (0..bytes).step_by(4096) {
                    if file {
                        sum = sum.wrapping_add(std::ptr::read_volatile(p.cast::<u8>().add(off)));
                    } else {
                        std::ptr::write_volatile(p.cast::<u8>().add(off), 1);
                    }
                }
                std::hint::black_box(sum);
                if what == Mapped::SplitAnon && !split_pages(p, bytes / 4096) {
                    fail();
                }
                if !ready.signal() || !go.wait() {
                    libc::_exit(1);
                }
                std::ptr::write_volatile(word.0, thread_cpu_ns());
                libc::_exit(0);
            }
        }
        if let Some(sweep) = sweep.as_mut() {
            // The child's byte (one that failed sends it too, and its reap says so).
            if ready.wait() {
                round = round.wrapping_add(1);
                sweep.run(round);
                go.signal();
            }
        }
        let (total, status) = reap(pid)?;
        if status != 0 {
            bail!("the child that maps {bytes} bytes failed");
        }
        // SAFETY: the shared page is mapped; the child that wrote it is gone.
        let before = unsafe { std::ptr::read_volatile(word.0) } as f64;
        Ok(((total - before).max(0.0), 1.0))
    })
}

/// CPU ns of a fork on the parent, which has `bytes` of anonymous memory mapped and touched
/// (their page tables copied, the pages marked copy-on-write), the child exiting at once; and
/// what each fork copied, on average: the child's resident pages and mappings as it starts,
/// which are the measuring process's own as well as the `bytes` (costlab's own made the
/// fixed part 300 µs here, where a fork of one page in no mapping is under 10).
pub fn fork(spec: &SampleSpec, bytes: usize) -> Result<Forks> {
    fork_with(spec, bytes, false)
}

/// What `fork` measured: CPU ns a fork in each sample, and what each fork copied on average,
/// by the child as it started: the bytes of its resident pages and its mappings.
pub struct Forks {
    pub ns: Vec<f64>,
    pub copied: f64,
    pub vmas: f64,
}

/// As `fork`; with `split`, the `bytes` are a mapping a page (`split_pages`).
fn fork_with(spec: &SampleSpec, bytes: usize, split: bool) -> Result<Forks> {
    let mem = touched_anon(bytes)?;
    // SAFETY: mem is a private mapping of `bytes` this process owns.
    if split && !unsafe { split_pages(mem.addr.cast(), bytes / 4096) } {
        bail!("mprotect: {}", std::io::Error::last_os_error());
    }
    let word = SharedWord::new()?;
    let (mut copied, mut vmas, mut forks) = (0.0, 0.0, 0.0);
    let _pin = Pinned::last_allowed();
    let out = cpu_samples(spec, || {
        let t0 = thread_cpu_ns();
        // SAFETY: the child calls only async-signal-safe functions (open, read, close,
        // _exit) and writes only the shared page (its first two words).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                std::ptr::write_volatile(word.0, own_resident_pages());
                std::ptr::write_volatile(word.0.add(1), own_mappings());
                libc::_exit(0);
            }
        }
        let ns = thread_cpu_ns().saturating_sub(t0) as f64;
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        reap(pid)?;
        // SAFETY: the shared page is mapped; the child that wrote it is gone.
        copied += unsafe { std::ptr::read_volatile(word.0) } as f64 * 4096.0;
        // SAFETY: as above.
        vmas += unsafe { std::ptr::read_volatile(word.0.add(1)) } as f64;
        forks += 1.0;
        Ok((ns, 1.0))
    });
    drop(mem);
    let forks = f64::max(forks, 1.0);
    Ok(Forks {
        ns: out?,
        copied: copied / forks,
        vmas: vmas / forks,
    })
}

/// In a forked child, its resident pages (the second field of /proc/self/statm): what the
/// fork copied the page tables of. Async-signal-safe calls only; 0 where it cannot be read.
///
/// # Safety
/// Only the calls named; safe in a child of a multithreaded process.
unsafe fn own_resident_pages() -> u64 {
    let fd = libc::open(c"/proc/self/statm".as_ptr(), libc::O_RDONLY);
    if fd < 0 {
        return 0;
    }
    let mut buf = [0u8; 128];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    if n <= 0 {
        return 0;
    }
    statm_resident(&buf[..n as usize]).unwrap_or(0)
}

/// In a forked child, its mappings: the lines of /proc/self/maps. Async-signal-safe calls
/// only; 0 where it cannot be read.
///
/// # Safety
/// As `own_resident_pages`.
unsafe fn own_mappings() -> u64 {
    let fd = libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY);
    if fd < 0 {
        return 0;
    }
    let mut buf = [0u8; 4096];
    let mut lines = 0;
    loop {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        if n <= 0 {
            break;
        }
        lines += buf[..n as usize].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    libc::close(fd);
    lines
}

/// The resident pages in a /proc/PID/statm line: its second field.
fn statm_resident(line: &[u8]) -> Option<u64> {
    let field = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(1)?;
    let mut v: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_one_page_program_runs_and_exits_0() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new(&std::env::temp_dir()).unwrap();
        let p = s.path().join("tiny");
        std::fs::write(&p, tiny_elf()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let st = std::process::Command::new(&p).status().unwrap();
        assert_eq!(st.code(), Some(0));
        assert!(tiny_elf().len() < 4096);
    }

    #[test]
    fn statm_gives_its_resident_field() {
        assert_eq!(statm_resident(b"6140 1483 1101 264 0 196 0\n"), Some(1483));
        assert_eq!(statm_resident(b"6140"), None);
        assert_eq!(statm_resident(b"6140 14x3 0"), None);
        assert_eq!(statm_resident(b""), None);
    }

    #[test]
    fn a_fork_copies_at_least_what_its_parent_touched() {
        let spec = SampleSpec::tiny();
        let f = fork(&spec, 4 << 20).unwrap();
        assert_eq!(f.ns.len(), spec.samples);
        // The 1024 pages touched, and the test process's own; its libraries' mappings.
        assert!(f.copied >= (4 << 20) as f64, "{}", f.copied);
        assert!(f.vmas >= 5.0, "{}", f.vmas);
        let split = fork_with(&spec, 64 * 4096, true).unwrap();
        assert!(split.vmas >= f.vmas + 60.0, "{} vs {}", split.vmas, f.vmas);
    }
}
