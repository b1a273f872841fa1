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
    exit_after(spec, bytes, None)
}

/// CPU ns of a process's exit after it read `bytes` of a file through a shared mapping, every
/// page cached (a program's libraries and mapped files): unmapping a page-cache page drops a
/// reference, where an anonymous page is freed. The mapping starts one page past a 2 MiB
/// boundary, as the fault-file term's, so its pages are mapped 16 at a time as a program's
/// are, never a 2 MiB folio whole.
pub fn exit_file(spec: &SampleSpec, bytes: usize) -> Result<Vec<f64>> {
    use std::io::{Read, Write};
    let mut f = super::files::scratch_file().context("creating a file for the exit term")?;
    f.write_all(&vec![7u8; bytes]).context("writing the file")?;
    let mut sink = Vec::with_capacity(bytes);
    std::io::Seek::rewind(&mut f)?;
    f.read_to_end(&mut sink)?;
    exit_after(spec, bytes, Some(std::os::fd::AsRawFd::as_raw_fd(&f)))
}

/// The exit terms: the child maps `bytes` (of the file `file`, read; else anonymous, written),
/// touches every page, reads its clock and exits.
fn exit_after(spec: &SampleSpec, bytes: usize, file: Option<i32>) -> Result<Vec<f64>> {
    const HUGE: usize = 2 << 20;
    let word = SharedWord::new()?;
    let _pin = Pinned::last_allowed();
    cpu_samples(spec, || {
        // SAFETY: the child calls only async-signal-safe functions (mmap, madvise,
        // clock_gettime, _exit) and writes only its own fresh mapping and the shared page.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: as above; in the child, anything failing ends it with status 1.
            unsafe {
                let p = match file {
                    None => {
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
                    Some(fd) => {
                        let room = libc::mmap(
                            std::ptr::null_mut(),
                            bytes + 2 * HUGE,
                            libc::PROT_NONE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        if room == libc::MAP_FAILED {
                            libc::_exit(1);
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
                };
                if p == libc::MAP_FAILED {
                    libc::_exit(1);
                }
                let mut sum = 0u8;
                for off in (0..bytes).step_by(4096) {
                    if file.is_some() {
                        sum = sum.wrapping_add(std::ptr::read_volatile(p.cast::<u8>().add(off)));
                    } else {
                        std::ptr::write_volatile(p.cast::<u8>().add(off), 1);
                    }
                }
                std::hint::black_box(sum);
                std::ptr::write_volatile(word.0, thread_cpu_ns());
                libc::_exit(0);
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
/// (their page tables copied, the pages marked copy-on-write); the child exits at once.
pub fn fork(spec: &SampleSpec, bytes: usize) -> Result<Vec<f64>> {
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        bail!("mmap: {}", std::io::Error::last_os_error());
    }
    // SAFETY: advice and writes inside the mapping just made.
    unsafe {
        libc::madvise(p, bytes, libc::MADV_NOHUGEPAGE);
        for off in (0..bytes).step_by(4096) {
            std::ptr::write_volatile(p.cast::<u8>().add(off), 1);
        }
    }
    let _pin = Pinned::last_allowed();
    let out = cpu_samples(spec, || {
        let t0 = thread_cpu_ns();
        // SAFETY: the child calls only _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: ending the child at once.
            unsafe { libc::_exit(0) };
        }
        let ns = thread_cpu_ns().saturating_sub(t0) as f64;
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        reap(pid)?;
        Ok((ns, 1.0))
    });
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(p, bytes) };
    out
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
}
