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

use costlab_core::error::usage;

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

pub mod asm;
pub mod tp;

pub use asm::Insn;
use asm::{Asm, Helper, Reg, FP, R0, R1, R2, R3, R6, R7};

// bpf(2) commands, map and program types (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_LOOKUP_ELEM: i64 = 1;
const BPF_PROG_LOAD: i64 = 5;
const BPF_RAW_TRACEPOINT_OPEN: i64 = 17;
const MAP_PERCPU_ARRAY: u32 = 6;
const PROG_RAW_TRACEPOINT: u32 = 17;
/// Where `di` (a syscall's first argument) sits in x86-64's struct pt_regs.
pub const PT_REGS_DI: i32 = 112;

/// The read/write family whose calls are also counted by fd (x86-64 numbers): read, write,
/// pread64, pwrite64, readv, writev. What an fd points at decides what its calls cost.
pub const FD_CALLS: [u32; 6] = [0, 1, 17, 18, 19, 20];
/// Fds counted one by one; a call on a higher fd is counted in the last slot.
pub const FDS: u32 = 64;
/// Slots of the by-fd array: (syscall number 0..=20) x fd.
pub const FD_SLOTS: u32 = 21 * FDS;
/// One call in this many (of each syscall number, on each CPU, the first included) is
/// counted by fd: the by-fd counts are a sample that shares out the exact totals.
pub const SAMPLE: u32 = 16;

/// The counting program for `whose`, with the arrays' fds in its lookups: `map_fd` counts by
/// syscall number; `fd_map_fd`, where given (x86-64: its pt_regs layout is known here), also
/// counts the read/write family by (number, fd).
pub fn program(whose: Whose, map_fd: i32, fd_map_fd: Option<i32>) -> Vec<Insn> {
    program_asm(whose, map_fd, fd_map_fd)
        .finish()
        .expect("the counting program's labels are all placed")
}

/// The counting program, as named instructions (its `listing()` is what a reviewer reads).
pub fn program_asm(whose: Whose, map_fd: i32, fd_map_fd: Option<i32>) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, R1).note("r6 = the tracepoint's arguments");
    filter(&mut a, whose);
    a.ldx_dw(R1, R6, 8).note("r1 = args[1], the syscall number");
    a.jge_imm(R1, SLOTS as i32, "exit")
        .note("past the slots (or -1)");
    a.mov(R7, R1).note("r7 = the number, kept across calls");
    add_one(&mut a, map_fd);
    if let Some(fd_map) = fd_map_fd {
        // One call in SAMPLE of each number on each CPU goes on (r1 holds the count before
        // this call): reading the fd costs a helper call, which every call would pay.
        fd_sample_key(&mut a, R7, "exit");
        add_one(&mut a, fd_map);
    }
    a.label("exit");
    a.mov_imm(R0, 0);
    a.exit();
    a
}

/// The by-fd sample's key, for the counter here and the measured split's sys_enter: with r1 =
/// this syscall number's count before this call and `number` holding the number, one call in
/// SAMPLE of the read/write family goes on, with r1 = its by-fd slot (number * FDS + fd);
/// every other call leaves by the label `out` (r0-r5 clobbered; r6 = the tracepoint's args).
pub(crate) fn fd_sample_key(a: &mut Asm, number: Reg, out: &str) {
    a.and_imm(R1, (SAMPLE - 1) as i32);
    a.jne_imm(R1, 0, out).note("not this call's turn");
    // Only read, write (0, 1) and pread64..writev (17..=20) go on.
    a.jgt_imm(number, 20, out);
    a.jge_imm(number, 17, "by_fd");
    a.jgt_imm(number, 1, out);
    a.label("by_fd");
    a.mov(R1, FP)
        .add_imm(R1, -16)
        .note("r1 = where the fd goes");
    a.mov_imm(R2, 8);
    a.ldx_dw(R3, R6, 0).note("r3 = args[0], the task's pt_regs");
    a.add_imm(R3, PT_REGS_DI)
        .note("&regs->di, the first argument");
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, out);
    a.ldx_dw(R1, FP, -16).note("r1 = the fd");
    a.jle_imm(R1, (FDS - 2) as i32, "fd_slot");
    a.mov_imm(R1, (FDS - 1) as i32)
        .note("the last slot holds every fd from there up");
    a.label("fd_slot");
    a.mov(R2, number);
    a.lsh_imm(R2, FDS.trailing_zeros() as i32)
        .note("r2 = number * FDS");
    a.add(R1, R2);
}

/// Jump to the exit unless the current task is `whose`'s (r0-r5 clobbered).
fn filter(a: &mut Asm, whose: Whose) {
    match whose {
        Whose::Cgroup(id) => {
            a.call(Helper::GetCurrentCgroupId);
            a.ld_imm64(R1, id);
            a.jne(R0, R1, "exit").note("not the counted cgroup");
        }
        Whose::Process(tgid) => {
            a.call(Helper::GetCurrentPidTgid);
            a.rsh_imm(R0, 32).note("r0 = the tgid");
            a.jne_imm(R0, tgid as i32, "exit")
                .note("not the counted process");
        }
    }
}

/// Add one to slot r1 of the array `map_fd` (this CPU's copy); r1 is then the count before.
fn add_one(a: &mut Asm, map_fd: i32) {
    a.stx_w(FP, -4, R1).note("the key");
    a.mov(R2, FP).add_imm(R2, -4);
    a.ld_map(R1, map_fd);
    a.call(Helper::MapLookupElem).note("r0 = this CPU's slot");
    a.jeq_imm(R0, 0, "exit");
    a.mov_imm(R1, 1);
    // Atomic, as a syscall tracepoint may be preempted (kernel 5.12 and later).
    a.atomic_fetch_add_dw(R0, 0, R1)
        .note("r1 = the count before; slot += 1");
}

/// The bpf(2) attribute block: 128 zeroed bytes with fields written at their offsets.
pub(crate) struct Attr(pub(crate) [u8; 128]);

impl Attr {
    pub(crate) fn new() -> Attr {
        Attr([0; 128])
    }
    pub(crate) fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn call(&mut self, cmd: i64) -> std::io::Result<i32> {
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

pub(crate) fn owned(fd: i32) -> OwnedFd {
    // SAFETY: bpf(2) returned this fd just now and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// CPUs the kernel may ever bring up, from a `0-15` / `0,2-3` list; None for a list that
/// does not parse (a per-CPU value sized from a guess could be too small for the kernel's copy).
pub fn possible_cpus(list: &str) -> Option<usize> {
    let mut n = 0;
    for r in list.trim().split(',').filter(|r| !r.is_empty()) {
        n += match r.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().ok()?;
                let b: usize = b.trim().parse().ok()?;
                b.checked_sub(a)? + 1
            }
            None => {
                r.trim().parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

fn fail(what: &str, e: std::io::Error) -> anyhow::Error {
    usage(format!(
        "cannot count in the kernel: {what} failed ({e}); costlab price needs root and a kernel with BPF raw tracepoints (4.17 or later, CONFIG_BPF_SYSCALL)"
    ))
}

/// A per-CPU array of `slots` u64 counters.
fn array(slots: u32) -> Result<OwnedFd> {
    Attr::new()
        .u32(0, MAP_PERCPU_ARRAY)
        .u32(4, 4)
        .u32(8, 8)
        .u32(12, slots)
        .call(BPF_MAP_CREATE)
        .map(owned)
        .map_err(|e| fail("creating a BPF array", e))
}

/// Load `insns` as a raw tracepoint program and attach it to `tracepoint`: (program, link).
fn load_and_attach(insns: &[Insn], tracepoint: &str) -> Result<(OwnedFd, OwnedFd)> {
    let code: Vec<u8> = insns.iter().flat_map(|i| i.bytes()).collect();
    let license = b"GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let prog = Attr::new()
        .u32(0, PROG_RAW_TRACEPOINT)
        .u32(4, insns.len() as u32)
        .u64(8, code.as_ptr() as u64)
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
                "cannot count in the kernel: the verifier refused the counting program for {tracepoint} ({e}: {last}); costlab price needs root and BPF raw tracepoints"
            )));
        }
    };
    let name = std::ffi::CString::new(tracepoint).expect("no NUL in a tracepoint name");
    let link = Attr::new()
        .u64(0, name.as_ptr() as u64)
        .u32(8, prog.as_raw_fd() as u32)
        .call(BPF_RAW_TRACEPOINT_OPEN)
        .map_err(|e| fail(&format!("attaching to the {tracepoint} raw tracepoint"), e))?;
    Ok((prog, owned(link)))
}

/// The program that counts a tracepoint's hits by `whose` in slot 0 of `map_fd`.
pub fn event_program(whose: Whose, map_fd: i32) -> Vec<Insn> {
    let mut a = Asm::new();
    filter(&mut a, whose);
    a.mov_imm(R1, 0).note("slot 0");
    add_one(&mut a, map_fd);
    a.label("exit");
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
        .expect("the event program's labels are all placed")
}

/// Hits of one raw tracepoint by the counted tasks, while attached (io_uring submissions:
/// a counter here costs a fraction of the bpftrace probe each submission would pay).
pub struct EventCounter {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    cpus: usize,
}

impl EventCounter {
    pub fn attach(whose: Whose, tracepoint: &str) -> Result<EventCounter> {
        let map = array(1)?;
        let (prog, link) = load_and_attach(&event_program(whose, map.as_raw_fd()), tracepoint)?;
        Ok(EventCounter {
            map,
            _prog: prog,
            _link: link,
            cpus: machine_cpus()?,
        })
    }

    /// Hits so far, summed over CPUs.
    pub fn read(&self) -> Result<u64> {
        read_slot(&self.map, 0, self.cpus)
    }
}

/// The syscall counter while attached; detached when dropped.
pub struct SyscallCounter {
    map: OwnedFd,
    by_fd: Option<OwnedFd>,
    _prog: OwnedFd,
    _link: OwnedFd,
    cpus: usize,
}

impl SyscallCounter {
    /// Create the array, load the program and attach it to `sys_enter`.
    pub fn attach(whose: Whose) -> Result<SyscallCounter> {
        let release = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        if let Some(why) = lacks_atomics(&release) {
            bail!(usage(why));
        }
        let cpus = machine_cpus()?;
        let map = array(SLOTS)?;
        // The by-fd counts read the first argument from pt_regs, whose layout is x86-64's.
        let by_fd = if cfg!(target_arch = "x86_64") {
            Some(array(FD_SLOTS)?)
        } else {
            None
        };
        let insns = program(
            whose,
            map.as_raw_fd(),
            by_fd.as_ref().map(|m| m.as_raw_fd()),
        );
        let (prog, link) = load_and_attach(&insns, "sys_enter")?;
        Ok(SyscallCounter {
            map,
            by_fd,
            _prog: prog,
            _link: link,
            cpus,
        })
    }

    /// Counts so far by syscall number (the slots summed over CPUs), zeros left out.
    pub fn read(&self) -> Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for id in 0..SLOTS {
            let n = self.slot(&self.map, id)?;
            if n > 0 {
                out.insert(id, n);
            }
        }
        Ok(out)
    }

    /// The read/write family's sampled counts (one call in `SAMPLE`) by (syscall number, fd),
    /// zeros left out; fd `FDS - 1` holds every fd from there up. Empty where the by-fd
    /// counts are not kept.
    pub fn read_by_fd(&self) -> Result<BTreeMap<(u32, u32), u64>> {
        match &self.by_fd {
            Some(map) => read_by_fd(map, self.cpus),
            None => Ok(BTreeMap::new()),
        }
    }

    fn slot(&self, map: &OwnedFd, key: u32) -> Result<u64> {
        read_slot(map, key, self.cpus)
    }
}

/// A by-fd array's counts (`FD_SLOTS` per-CPU u64, summed over `cpus` CPUs) by (syscall
/// number, fd), zeros left out: the counting program's, or the measured split's.
pub(crate) fn read_by_fd(map: &OwnedFd, cpus: usize) -> Result<BTreeMap<(u32, u32), u64>> {
    let mut out = BTreeMap::new();
    for id in FD_CALLS {
        for fd in 0..FDS {
            let n = read_slot(map, id * FDS + fd, cpus)?;
            if n > 0 {
                out.insert((id, fd), n);
            }
        }
    }
    Ok(out)
}

/// The counting program adds with BPF's atomic fetch-add: one line naming the kernel that lacks
/// it and the version that has it, None where it is there.
pub fn lacks_atomics(release: &str) -> Option<String> {
    match kernel_version(release) {
        Some(v) if v < (5, 12) => Some(format!(
            "kernel {release} lacks BPF atomic fetch-add, which costlab price's syscall counter uses (5.12 or later)"
        )),
        _ => None,
    }
}

/// The CPUs this machine may ever have (a per-CPU array holds one value for each), from
/// /sys/devices/system/cpu/possible; an error, never a guess, where it cannot be read.
pub(crate) fn machine_cpus() -> Result<usize> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!(
            "cannot read {path} ({e}): per-CPU BPF arrays are sized from it; mount sysfs"
        ))
    })?;
    possible_cpus(&text).ok_or_else(|| {
        usage(format!(
            "cannot parse {path} ({:?}): per-CPU BPF arrays are sized from it",
            text.trim()
        ))
    })
}

/// Slot `key` of the per-CPU array `map` (`cpus` values), summed over CPUs.
fn read_slot(map: &OwnedFd, key: u32, cpus: usize) -> Result<u64> {
    let mut values = vec![0u64; cpus];
    Attr::new()
        .u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, values.as_mut_ptr() as u64)
        .call(BPF_MAP_LOOKUP_ELEM)
        .map_err(|e| anyhow::anyhow!("reading a BPF counter: {e}"))?;
    Ok(values.iter().sum())
}

/// A cgroup v2 directory's id as the kernel's `bpf_get_current_cgroup_id` gives it: the
/// directory's inode number (a kernfs node id, on a 64-bit kernel).
pub fn cgroup_id(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir)
        .map_err(|e| anyhow::anyhow!("reading the cgroup {}: {e}", dir.display()))?
        .ino())
}

/// The running kernel's (major, minor), from a release like `6.18.44-fc-v769`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exit_jump_lands_on_the_return() {
        for whose in [Whose::Cgroup(0x1_0000_002a), Whose::Process(4242)] {
            for by_fd in [None, Some(8)] {
                let p = program(whose, 7, by_fd);
                let exit = p.len() - 2;
                assert_eq!(p[exit], Insn::new(0xb7, 0, 0, 0, 0));
                assert_eq!(p[exit + 1].code, 0x95);
                // Conditional jumps (class JMP, not a call or an exit) all land inside.
                let jumps: Vec<usize> = (0..p.len())
                    .filter(|&i| p[i].code & 0x07 == 0x05 && !matches!(p[i].code, 0x85 | 0x95))
                    .collect();
                assert!(jumps.len() >= 3);
                for j in &jumps {
                    let to = j + 1 + p[*j].off as usize;
                    assert!(
                        to <= exit,
                        "jump at {j} lands at {to}, past the exit {exit}"
                    );
                }
                // To the exit: the cgroup/process test, the number's bound, each lookup's
                // NULL test and, by fd, the sample test, the two range tests and the failed read.
                let to_exit = jumps
                    .iter()
                    .filter(|&&j| j + 1 + p[j].off as usize == exit)
                    .count();
                assert_eq!(to_exit, if by_fd.is_some() { 8 } else { 3 });
            }
        }
    }

    #[test]
    fn the_by_fd_part_reads_the_first_argument_and_indexes_by_number_and_fd() {
        let p = program(Whose::Process(1), 7, Some(8));
        let read = p
            .iter()
            .position(|i| i.code == 0x85 && i.imm == Helper::ProbeReadKernel as i32)
            .unwrap();
        assert_eq!(p[read - 1], Insn::new(0x07, 3, 0, 0, PT_REGS_DI));
        assert!(
            p.iter().any(|i| *i == Insn::new(0x67, 2, 0, 0, 6)),
            "x64 by shift"
        );
        let maps: Vec<i32> = p
            .iter()
            .filter(|i| i.code == 0x18 && i.src == 1)
            .map(|i| i.imm)
            .collect();
        assert_eq!(maps, vec![7, 8]);
    }

    #[test]
    fn wide_immediates_are_split_in_two_halves() {
        let p = program(Whose::Cgroup(0x1234_5678_9abc_def0), 9, None);
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
    fn the_event_program_filters_then_counts_in_slot_zero() {
        let p = event_program(Whose::Process(7), 3);
        assert_eq!(p[0].imm, Helper::GetCurrentPidTgid as i32);
        assert!(p.contains(&Insn::new(0xb7, 1, 0, 0, 0)));
        let exit = p.len() - 2;
        for (j, i) in p.iter().enumerate() {
            if matches!(i.code, 0x55 | 0x15) {
                assert_eq!(j + 1 + i.off as usize, exit);
            }
        }
    }

    #[test]
    fn a_kernel_without_atomics_is_named_in_one_line() {
        assert_eq!(lacks_atomics("6.18.44-fc-v769"), None);
        let why = lacks_atomics("5.10.0-30-amd64").unwrap();
        assert!(
            why.contains("5.12 or later") && why.contains("5.10.0-30-amd64") && !why.contains('\n')
        );
    }

    #[test]
    fn possible_cpu_lists() {
        assert_eq!(possible_cpus("0-15\n"), Some(16));
        assert_eq!(possible_cpus("0\n"), Some(1));
        assert_eq!(possible_cpus("0,2-3"), Some(3));
        assert_eq!(possible_cpus(""), None);
        assert_eq!(possible_cpus("0-x"), None);
        assert_eq!(possible_cpus("3-1"), None);
    }
}
