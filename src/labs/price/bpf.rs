//! Counting every syscall by id in the kernel at the tracing floor's cost: a BPF program of
//! eighteen instructions, attached to the raw `sys_enter` tracepoint, adds one to a per-CPU
//! array slot indexed by the syscall number, for the tasks of one cgroup v2 (or one process).
//!
//! No compiler, no BPF library and no tracer process: the program is assembled here and loaded
//! with bpf(2). A raw tracepoint hands the program the tracepoint's own arguments (the
//! registers and the syscall number) with nothing copied into a trace buffer, and an array
//! slot is found by index, not by hashing; that is why this costs about what one perf counter
//! on `raw_syscalls:sys_enter` costs, where a bpftrace map keyed by id costs twice that.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use anyhow::{bail, Result};

use crate::error::usage;

/// Slots in the array: syscall numbers at or above this are not counted (x86-64 and arm64
/// number theirs below 500; x32's numbers, with bit 30 set, fall outside and are left out).
pub const SLOTS: u32 = 512;

/// Whom the program counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Whose {
    /// The tasks of the cgroup v2 whose id (its directory's inode number) this is.
    Cgroup(u64),
    /// The threads of this process (its tgid).
    Process(u32),
}

// bpf(2) commands, map and program types, helpers (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_LOOKUP_ELEM: i64 = 1;
const BPF_PROG_LOAD: i64 = 5;
const BPF_RAW_TRACEPOINT_OPEN: i64 = 17;
const MAP_PERCPU_ARRAY: u32 = 6;
const PROG_RAW_TRACEPOINT: u32 = 17;
const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_PID_TGID: i32 = 14;
const HELPER_CGROUP_ID: i32 = 80;

/// One BPF instruction: opcode, dst and src registers, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// The 8 bytes the kernel reads (little-endian: dst in the low nibble).
    pub fn bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

/// The counting program for `whose`, with the array map's fd in its lookup.
pub fn program(whose: Whose, map_fd: i32) -> Vec<Insn> {
    let mut p = vec![Insn::new(0xbf, 6, 1, 0, 0)]; // r6 = r1 (the tracepoint's arguments)
                                                   // `exit` is patched below into a jump to the last two instructions.
    let mut exits = Vec::new();
    match whose {
        Whose::Cgroup(id) => {
            p.push(Insn::new(0x85, 0, 0, 0, HELPER_CGROUP_ID)); // r0 = current cgroup id
            p.push(Insn::new(0x18, 1, 0, 0, id as u32 as i32)); // r1 = id (two halves)
            p.push(Insn::new(0x00, 0, 0, 0, (id >> 32) as u32 as i32));
            exits.push(p.len());
            p.push(Insn::new(0x5d, 0, 1, 0, 0)); // if r0 != r1 goto exit
        }
        Whose::Process(tgid) => {
            p.push(Insn::new(0x85, 0, 0, 0, HELPER_PID_TGID)); // r0 = tgid << 32 | pid
            p.push(Insn::new(0x77, 0, 0, 0, 32)); // r0 >>= 32
            exits.push(p.len());
            p.push(Insn::new(0x55, 0, 0, 0, tgid as i32)); // if r0 != tgid goto exit
        }
    }
    p.push(Insn::new(0x79, 1, 6, 8, 0)); // r1 = args[1], the syscall number
    exits.push(p.len());
    p.push(Insn::new(0x35, 1, 0, 0, SLOTS as i32)); // if r1 >= SLOTS goto exit (-1 too)
    p.push(Insn::new(0x63, 10, 1, -4, 0)); // *(u32 *)(fp - 4) = r1
    p.push(Insn::new(0xbf, 2, 10, 0, 0)); // r2 = fp
    p.push(Insn::new(0x07, 2, 0, 0, -4)); // r2 -= 4: the key's address
    p.push(Insn::new(0x18, 1, 1, 0, map_fd)); // r1 = the map (src 1: a map fd)
    p.push(Insn::new(0x00, 0, 0, 0, 0));
    p.push(Insn::new(0x85, 0, 0, 0, HELPER_MAP_LOOKUP)); // r0 = this CPU's slot
    exits.push(p.len());
    p.push(Insn::new(0x15, 0, 0, 0, 0)); // if r0 == NULL goto exit
    p.push(Insn::new(0xb7, 1, 0, 0, 1)); // r1 = 1
                                         // lock *(u64 *)(r0 + 0) += r1: atomic, as a syscall tracepoint may be preempted.
    p.push(Insn::new(0xdb, 0, 1, 0, 0));
    let exit = p.len();
    p.push(Insn::new(0xb7, 0, 0, 0, 0)); // exit: r0 = 0
    p.push(Insn::new(0x95, 0, 0, 0, 0)); // return
    for at in exits {
        p[at].off = (exit - at - 1) as i16;
    }
    p
}

/// The bpf(2) attribute block: 128 zeroed bytes with fields written at their offsets.
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn call(&mut self, cmd: i64) -> std::io::Result<i32> {
        // SAFETY: the attribute block is 128 readable and writable bytes, which the kernel
        // reads (and for lookups writes through the pointers set in it, which point at live
        // buffers of the sizes the map was created with).
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                self.0.as_mut_ptr(),
                self.0.len() as libc::c_uint,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r as i32)
        }
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: bpf(2) returned this fd just now and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// CPUs the kernel may ever bring up, from a `0-15` / `0,2-3` list.
pub fn possible_cpus(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().unwrap_or(0);
                let b: usize = b.trim().parse().unwrap_or(a);
                b.saturating_sub(a) + 1
            }
            None => 1,
        })
        .sum::<usize>()
        .max(1)
}

/// The syscall counter while attached; detached when dropped.
pub struct SyscallCounter {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    cpus: usize,
}

impl SyscallCounter {
    /// Create the array, load the program and attach it to `sys_enter`.
    pub fn attach(whose: Whose) -> Result<SyscallCounter> {
        let cpus = possible_cpus(
            &std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default(),
        );
        let fail = |what: &str, e: std::io::Error| {
            usage(format!(
                "cannot count syscalls in the kernel: {what} failed ({e}); costlab price needs root and a kernel with BPF raw tracepoints (4.17 or later, CONFIG_BPF_SYSCALL)"
            ))
        };
        let map = Attr::new()
            .u32(0, MAP_PERCPU_ARRAY)
            .u32(4, 4)
            .u32(8, 8)
            .u32(12, SLOTS)
            .call(BPF_MAP_CREATE)
            .map_err(|e| fail("creating the BPF array", e))?;
        let map = owned(map);
        let insns: Vec<u8> = program(whose, map.as_raw_fd())
            .iter()
            .flat_map(|i| i.bytes())
            .collect();
        let license = b"GPL\0";
        let mut log = vec![0u8; 64 * 1024];
        let prog = Attr::new()
            .u32(0, PROG_RAW_TRACEPOINT)
            .u32(4, (insns.len() / 8) as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .call(BPF_PROG_LOAD);
        let prog = match prog {
            Ok(fd) => owned(fd),
            Err(e) => {
                let text = String::from_utf8_lossy(&log);
                let last = text
                    .trim_end_matches('\0')
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                bail!(usage(format!(
                    "cannot count syscalls in the kernel: the verifier refused the counting program ({e}: {last}); costlab price needs root and BPF raw tracepoints"
                )));
            }
        };
        let name = b"sys_enter\0";
        let link = Attr::new()
            .u64(0, name.as_ptr() as u64)
            .u32(8, prog.as_raw_fd() as u32)
            .call(BPF_RAW_TRACEPOINT_OPEN)
            .map_err(|e| fail("attaching to the sys_enter raw tracepoint", e))?;
        Ok(SyscallCounter {
            map,
            _prog: prog,
            _link: owned(link),
            cpus,
        })
    }

    /// Counts so far by syscall number (the slots summed over CPUs), zeros left out.
    pub fn read(&self) -> Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        let mut values = vec![0u64; self.cpus];
        for id in 0..SLOTS {
            let key = id;
            Attr::new()
                .u32(0, self.map.as_raw_fd() as u32)
                .u64(8, &key as *const u32 as u64)
                .u64(16, values.as_mut_ptr() as u64)
                .call(BPF_MAP_LOOKUP_ELEM)
                .map_err(|e| anyhow::anyhow!("reading the syscall counts: {e}"))?;
            let n: u64 = values.iter().sum();
            if n > 0 {
                out.insert(id, n);
            }
        }
        Ok(out)
    }
}

/// A cgroup v2 directory's id as the kernel's `bpf_get_current_cgroup_id` gives it: the
/// directory's inode number (a kernfs node id, on a 64-bit kernel).
pub fn cgroup_id(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir)
        .map_err(|e| anyhow::anyhow!("reading the cgroup {}: {e}", dir.display()))?
        .ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exit_jump_lands_on_the_return() {
        for whose in [Whose::Cgroup(0x1_0000_002a), Whose::Process(4242)] {
            let p = program(whose, 7);
            let exit = p.len() - 2;
            assert_eq!(p[exit], Insn::new(0xb7, 0, 0, 0, 0));
            assert_eq!(p[exit + 1].code, 0x95);
            let jumps: Vec<usize> = (0..p.len())
                .filter(|&i| matches!(p[i].code, 0x5d | 0x55 | 0x35 | 0x15))
                .collect();
            assert_eq!(jumps.len(), 3);
            for j in jumps {
                assert_eq!(j + 1 + p[j].off as usize, exit, "jump at {j}");
            }
        }
    }

    #[test]
    fn wide_immediates_are_split_in_two_halves() {
        let p = program(Whose::Cgroup(0x1234_5678_9abc_def0), 9);
        assert_eq!(p[2].code, 0x18);
        assert_eq!(p[2].imm as u32, 0x9abc_def0);
        assert_eq!(p[3].imm as u32, 0x1234_5678);
        let map = p.iter().position(|i| i.code == 0x18 && i.src == 1).unwrap();
        assert_eq!(p[map].imm, 9);
        assert_eq!(
            Insn::new(0x79, 1, 6, 8, 0).bytes(),
            [0x79, 0x61, 8, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            Insn::new(0x07, 2, 0, 0, -4).bytes(),
            [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn possible_cpu_lists() {
        assert_eq!(possible_cpus("0-15\n"), 16);
        assert_eq!(possible_cpus("0\n"), 1);
        assert_eq!(possible_cpus("0,2-3"), 3);
        assert_eq!(possible_cpus(""), 1);
    }
}
