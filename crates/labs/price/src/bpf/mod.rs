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

use anyhow::{bail, Result};

use costlab_bpf::{attach, AttachError, Attached, Hook, Map};
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

pub mod tp;

pub use costlab_bpf::cgroup_id;
use costlab_bpf::{Asm, Helper, Insn, Reg, FP, R0, R1, R2, R3, R6, R7};

/// Where `di` (a syscall's first argument) sits in x86-64's struct pt_regs.
pub const PT_REGS_DI: i32 = 112;

/// The read/write family whose calls are also counted by fd (x86-64 numbers): read, write,
/// pread64, pwrite64, readv, writev. What an fd points at decides what its calls cost.
pub const FD_CALLS: [u32; 6] = [0, 1, 17, 18, 19, 20];
/// `FD_CALLS` past read and write are one run of numbers (pread64..writev, 17..=20): the
/// programs map such a call to its place in `FD_CALLS` by one subtraction, of this.
const FD_RUN_LESS: u32 = FD_CALLS[2] - 2;
/// Fds counted one by one; a call on a higher fd is counted in the last slot.
pub const FDS: u32 = 64;
/// Processes told apart by fd: the low bits of the tgid (fd 0 is a pipe in a compressor and
/// /dev/null in the archiver that feeds it: one fd number, two kinds). With 8, one archive
/// run in ten here had the two share a key (tar's pid and gzip's 8 apart: other tasks took
/// the pids between), and its compressor's pipe reads were priced as a device's; with 32,
/// two processes share one in 32, and `FdKinds` keeps a shared key's calls under the plain
/// name.
pub const PROCS: u32 = 32;
/// Slots of the by-fd array: the call's place in `FD_CALLS` x tgid's low bits x fd.
pub const FD_SLOTS: u32 = FD_CALLS.len() as u32 * PROCS * FDS;

/// The by-fd key of fd `fd` in process `pid`, as the counting programs make it (the tgid's
/// low bits, then the fd): what `read_by_fd` returns beside the syscall number.
pub fn fd_key(pid: u32, fd: u32) -> u32 {
    (pid & (PROCS - 1)) * FDS + fd.min(FDS - 1)
}
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
/// SAMPLE of the read/write family goes on, with r1 = its by-fd slot: (its place in FD_CALLS
/// times PROCS, plus the tgid's low bits) times FDS, plus the fd (`fd_key` beside the place);
/// every other call leaves by the label `out` (r0-r5 clobbered; r6 = the tracepoint's args).
pub(crate) fn fd_sample_key(a: &mut Asm, number: Reg, out: &str) {
    a.and_imm(R1, (SAMPLE - 1) as i32);
    a.jne_imm(R1, 0, out).note("not this call's turn");
    // Only read, write (0, 1) and pread64..writev (17..=20) go on.
    a.jgt_imm(number, FD_CALLS[5] as i32, out);
    a.jge_imm(number, FD_CALLS[2] as i32, "by_fd");
    a.jgt_imm(number, FD_CALLS[1] as i32, out);
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
    a.stx_dw(FP, -24, R1);
    a.call(Helper::GetCurrentPidTgid);
    a.rsh_imm(R0, 32).note("r0 = the tgid");
    a.and_imm(R0, (PROCS - 1) as i32).note("its low bits");
    a.mov(R2, number);
    a.jle_imm(R2, FD_CALLS[1] as i32, "fd_call");
    a.add_imm(R2, -(FD_RUN_LESS as i32))
        .note("pread64..writev (17..=20) are FD_CALLS' 2..=5");
    a.label("fd_call");
    a.lsh_imm(R2, PROCS.trailing_zeros() as i32);
    a.add(R2, R0)
        .note("r2 = place * PROCS + the tgid's low bits");
    a.lsh_imm(R2, FDS.trailing_zeros() as i32)
        .note("r2 = (place * PROCS + tgid bits) * FDS");
    a.ldx_dw(R1, FP, -24).note("r1 = the fd");
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

fn fail(what: &str, e: impl std::fmt::Display) -> anyhow::Error {
    usage(format!(
        "cannot count in the kernel: {what} failed ({e}); costlab price needs root and a kernel with BPF raw tracepoints (4.17 or later, CONFIG_BPF_SYSCALL)"
    ))
}

/// A per-CPU array of `slots` u64 counters.
fn array(slots: u32) -> Result<Map> {
    Map::percpu_array(8, slots).map_err(|e| fail("creating a BPF array", e))
}

/// Load `insns` as a raw tracepoint program and attach it to `tracepoint`.
fn load_and_attach(insns: &[Insn], tracepoint: &str) -> Result<Attached> {
    attach(insns, &Hook::raw_tracepoint(tracepoint)).map_err(|e| match e {
        AttachError::Refused(_, r) => usage(format!(
            "cannot count in the kernel: the verifier refused the counting program for {tracepoint} ({r}); costlab price needs root and BPF raw tracepoints"
        )),
        AttachError::Attach(_, e) => fail(&format!("attaching to the {tracepoint} raw tracepoint"), e),
    })
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
    map: Map,
    _prog: Attached,
}

impl EventCounter {
    pub fn attach(whose: Whose, tracepoint: &str) -> Result<EventCounter> {
        let map = array(1)?;
        let prog = load_and_attach(&event_program(whose, map.fd()), tracepoint)?;
        Ok(EventCounter { map, _prog: prog })
    }

    /// Hits so far, summed over CPUs.
    pub fn read(&self) -> Result<u64> {
        read_slot(&self.map, 0)
    }
}

/// The syscall counter while attached; detached when dropped.
pub struct SyscallCounter {
    map: Map,
    by_fd: Option<Map>,
    _prog: Attached,
}

impl SyscallCounter {
    /// Create the array, load the program and attach it to `sys_enter`.
    pub fn attach(whose: Whose) -> Result<SyscallCounter> {
        if let Some(why) = lacks_atomics(&costlab_bpf::kernel_release()) {
            bail!(usage(why));
        }
        let map = array(SLOTS)?;
        // The by-fd counts read the first argument from pt_regs, whose layout is x86-64's.
        let by_fd = if cfg!(target_arch = "x86_64") {
            Some(array(FD_SLOTS)?)
        } else {
            None
        };
        let insns = program(whose, map.fd(), by_fd.as_ref().map(Map::fd));
        let prog = load_and_attach(&insns, "sys_enter")?;
        Ok(SyscallCounter {
            map,
            by_fd,
            _prog: prog,
        })
    }

    /// Counts so far by syscall number (the slots summed over CPUs), zeros left out.
    pub fn read(&self) -> Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for id in 0..SLOTS {
            let n = read_slot(&self.map, id)?;
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
            Some(map) => read_by_fd(map),
            None => Ok(BTreeMap::new()),
        }
    }
}

/// A by-fd array's counts (`FD_SLOTS` per-CPU u64, summed over CPUs) by (syscall number,
/// fd), zeros left out: the counting program's, or the measured split's.
pub(crate) fn read_by_fd(map: &Map) -> Result<BTreeMap<(u32, u32), u64>> {
    let mut out = BTreeMap::new();
    for (place, id) in FD_CALLS.into_iter().enumerate() {
        for key in 0..PROCS * FDS {
            let n = read_slot(map, place as u32 * PROCS * FDS + key)?;
            if n > 0 {
                out.insert((id, key), n);
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

/// Slot `key` of the per-CPU u64 array `map`, summed over CPUs.
fn read_slot(map: &Map, key: u32) -> Result<u64> {
    map.sum_u64(key)
        .map_err(|e| anyhow::anyhow!("reading a BPF counter: {e}"))
}

pub use costlab_bpf::kernel_version;

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_bpf::insn;

    /// `fd_sample_key` turns a call's number into its row by arithmetic (read and write stay,
    /// the run from `FD_CALLS[2]` to `FD_CALLS[5]` less `FD_RUN_LESS`); `read_by_fd` reads the
    /// rows in `FD_CALLS`' order: the two agree, which needs the run to have no gap.
    #[test]
    fn the_programs_by_fd_rows_are_fd_calls_places() {
        for (place, n) in FD_CALLS.into_iter().enumerate() {
            let row = if n <= FD_CALLS[1] {
                n
            } else {
                assert!((FD_CALLS[2]..=FD_CALLS[5]).contains(&n), "syscall {n}");
                n - FD_RUN_LESS
            };
            assert_eq!(row, place as u32, "syscall {n}");
        }
    }

    #[test]
    fn every_exit_jump_lands_on_the_return() {
        for whose in [Whose::Cgroup(0x1_0000_002a), Whose::Process(4242)] {
            for by_fd in [None, Some(8)] {
                let p = program(whose, 7, by_fd);
                let exit = p.len() - 2;
                assert_eq!(p[exit], insn::mov_imm(R0, 0));
                assert!(p[exit + 1].is_exit());
                // Jumps (not a call or an exit) all land inside.
                let jumps: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_jump()).collect();
                assert!(jumps.len() >= 3);
                for j in &jumps {
                    let to = p[*j].target(*j).unwrap();
                    assert!(
                        to <= exit,
                        "jump at {j} lands at {to}, past the exit {exit}"
                    );
                }
                // To the exit: the cgroup/process test, the number's bound, each lookup's
                // NULL test and, by fd, the sample test, the two range tests and the failed read.
                let to_exit = jumps
                    .iter()
                    .filter(|&&j| p[j].target(j) == Some(exit))
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
            .position(|i| i.is_call(Helper::ProbeReadKernel))
            .unwrap();
        assert_eq!(p[read - 1], insn::add_imm(R3, PT_REGS_DI));
        assert!(p.iter().any(|i| *i == insn::lsh_imm(R2, 6)), "x64 by shift");
        let maps: Vec<i32> = p.iter().filter_map(Insn::map_fd).collect();
        assert_eq!(maps, vec![7, 8]);
    }

    #[test]
    fn wide_immediates_are_split_in_two_halves() {
        let p = program(Whose::Cgroup(0x1234_5678_9abc_def0), 9, None);
        assert!(p[2].is_ld_imm64());
        assert_eq!(p[2].imm as u32, 0x9abc_def0);
        assert_eq!(p[3].imm as u32, 0x1234_5678);
        let maps: Vec<i32> = p.iter().filter_map(Insn::map_fd).collect();
        assert_eq!(maps, vec![9]);
    }

    #[test]
    fn the_event_program_filters_then_counts_in_slot_zero() {
        let p = event_program(Whose::Process(7), 3);
        assert!(p[0].is_call(Helper::GetCurrentPidTgid));
        assert!(p.contains(&insn::mov_imm(R1, 0)));
        let exit = p.len() - 2;
        for (j, i) in p.iter().enumerate() {
            if i.is_jump() {
                assert_eq!(i.target(j), Some(exit));
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
}
