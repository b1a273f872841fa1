//! The components of the paths a tracked task stats: a stat by path walks one directory entry
//! a component (`/usr/share/doc/x/copyright` five, `name` under a directory's fd one, the
//! empty path of `fstat`'s `newfstatat(fd, "", AT_EMPTY_PATH)` none), and the stat term walks
//! its own few. At a stat family call's entry (stat, lstat, newfstatat, statx) the path is
//! read from the task's memory (its first `PATH_BYTES` - 1 bytes) and its components counted
//! into `PATH_COMPONENTS`: a component begins at each byte that is neither `/` nor the end
//! and follows a `/` or the path's start (so `//` and a trailing `/` add none; `.` and `..`
//! are walked and count). A path longer than the read counts the components of its start.
//! They are added on the call's own line too (the work map's `WORK_COMPONENTS`, by its slot).
//! A newfstatat with an empty path (glibc's fstat) moves to `NEWFSTATAT_FD`, a line of its own.
//! A stat by path also leaves in the CPU's state where its result's inode number will be, for
//! its exit to count the inodes found first (`STAT_FIRST`, `first_stat`).

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R4, R5, R6, R9};

use super::pages::WORK_COMPONENTS;
use super::{count, slot, Maps, FP_DELTA, FP_NR, PT_REGS_DX, ST_TID};

/// The path's components, counted over the run (the count word), and the stat calls whose
/// path was read (the second word).
pub const PATH_COMPONENTS: u32 = super::inodes::SLOTS_END;
/// newfstatat calls with an empty path (AT_EMPTY_PATH: glibc's fstat, a stat of an open
/// file): their count and time go here instead of newfstatat's
/// slot, to be priced at the fstat term.
pub const NEWFSTATAT_FD: u32 = PATH_COMPONENTS + 1;
/// Stats by path that found an inode no stat of the run had found before (the count word).
pub const STAT_FIRST: u32 = NEWFSTATAT_FD + 1;
/// The inodes the `seen` set holds at most: a hash map, preallocated, 80 bytes an entry (its
/// fdinfo's memlock here: 20 MiB locked for each traced run).
pub const STATS_SEEN: u32 = 1 << 18;
/// Where a stat by path's result will hold its inode number, and the task's id, in the CPU's
/// state (`prog::STATE_SIZE`).
const ST_STAT_INO: i16 = 96;
const ST_STAT_TID: i16 = 104;
/// The slots' end: `prog::SLOTS`.
pub const SLOTS_END: u32 = STAT_FIRST + 1;

/// x86-64's stat family, and where each keeps its path: `di` (the first argument) for stat
/// and lstat, `si` (the second) for newfstatat and statx, in struct pt_regs.
pub const NR_STAT: i32 = 4;
pub const NR_LSTAT: i32 = 6;
pub const NR_NEWFSTATAT: i32 = 262;
pub const NR_STATX: i32 = 332;
const PT_REGS_R8: i32 = 72;
const PT_REGS_SI: i32 = 104;
const PT_REGS_DI: i32 = 112;
/// Where the inode number sits in the result: struct stat's `st_ino`, struct statx's `stx_ino`.
const STAT_INO: i32 = 8;
const STATX_INO: i32 = 32;

/// Bytes of a path read (its NUL included).
pub const PATH_BYTES: i16 = 128;
/// The stack: the path, the user pointer to it, the components counted.
const FP_PATH: i16 = -256;
const FP_PTR: i16 = -112;
const FP_COUNT: i16 = -120;
const _: () = assert!(FP_PATH + PATH_BYTES <= FP_COUNT);

/// With r1 = the syscall's slot (kept at `FP_NR`) and r6 = the raw sys_enter context: a stat
/// family call's path components added to `PATH_COMPONENTS`, and a newfstatat with an empty
/// path moved to `NEWFSTATAT_FD` (at `FP_NR`). r0-r5 clobbered; r1 is the slot (`FP_NR`)
/// again at the end.
pub fn stat_path(a: &mut Asm, m: &Maps) {
    let done = a.fresh("paths_done");
    let at_si = a.fresh("path_at_si");
    let read = a.fresh("path_read");
    let counted = a.fresh("path_counted");
    a.jeq_imm(R1, NR_NEWFSTATAT, &at_si);
    a.jeq_imm(R1, NR_STATX, &at_si);
    a.mov_imm(R3, PT_REGS_DI);
    a.jeq_imm(R1, NR_STAT, &read);
    a.jeq_imm(R1, NR_LSTAT, &read);
    a.ja(&done).note("not a stat");
    a.label(&at_si);
    a.mov_imm(R3, PT_REGS_SI);
    a.label(&read);
    a.ldx_dw(R4, R6, 0).note("r4 = args[0], the task's pt_regs");
    a.add(R3, R4)
        .note("r3 = &regs->di or &regs->si: the path's pointer");
    a.mov(R1, FP).add_imm(R1, FP_PTR as i32);
    a.mov_imm(R2, 8);
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, &done);
    a.mov(R1, FP).add_imm(R1, FP_PATH as i32);
    a.mov_imm(R2, PATH_BYTES as i32);
    a.ldx_dw(R3, FP, FP_PTR);
    a.call(Helper::ProbeReadUserStr)
        .note("r0 = the bytes read, its NUL included");
    a.jslt_imm(R0, 1, &done).note("unreadable: not counted");
    // Tested on the bytes read (already a known figure to the verifier), not on the count:
    // a branch on the count would make each of the loop's exits a state of its own.
    let walk = a.fresh("path_walk");
    a.jne_imm(R0, 1, &walk).note("more than its NUL: a path");
    a.ldx_w(R1, FP, FP_NR);
    a.jne_imm(R1, NR_NEWFSTATAT, &walk);
    a.st_w(FP, FP_NR, NEWFSTATAT_FD as i32)
        .note("an empty path: a stat by fd, a line of its own");
    a.label(&walk);
    a.mov_imm(R3, b'/' as i32)
        .note("r3 = the byte before: the start is after a /");
    a.mov_imm(R4, 0).note("r4 = the components");
    for i in 0..PATH_BYTES - 1 {
        let next = a.fresh("path_byte");
        a.ldx_b(R2, FP, FP_PATH + i);
        a.jeq_imm(R2, 0, &counted).note("the end");
        a.jeq_imm(R2, b'/' as i32, &next);
        a.jne_imm(R3, b'/' as i32, &next).note("inside a name");
        a.add_imm(R4, 1).note("a name begins");
        a.label(&next);
        a.mov(R3, R2);
    }
    a.label(&counted);
    a.stx_dw(FP, FP_COUNT, R4);
    a.mov_imm(R1, PATH_COMPONENTS as i32);
    slot(a, m, R1, &done);
    a.ldx_dw(R1, R0, 0);
    a.ldx_dw(R2, FP, FP_COUNT);
    a.add(R1, R2).stx_dw(R0, 0, R1);
    a.ldx_dw(R1, R0, 8).add_imm(R1, 1).stx_dw(R0, 8, R1);
    a.mov(R2, FP)
        .add_imm(R2, FP_NR as i32)
        .note("the call's slot: its line");
    a.ld_map(R1, m.work);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, &done);
    a.ldx_dw(R2, FP, FP_COUNT);
    a.ldx_dw(R1, R0, WORK_COMPONENTS)
        .add(R1, R2)
        .stx_dw(R0, WORK_COMPONENTS, R1);
    result_ino(a, &done);
    a.label(&done);
    a.ldx_w(R1, FP, FP_NR).note("r1 = the call's slot again");
}

/// A stat by path (its slot at `FP_NR`, r6 = the raw sys_enter context, r9 = the CPU's state):
/// where its result's inode number will be, and the task's id, kept in the state for its exit
/// (`ST_STAT_INO`, `ST_STAT_TID`). A stat by fd (moved to `NEWFSTATAT_FD`) leaves none. r0-r5
/// clobbered.
fn result_ino(a: &mut Asm, done: &str) {
    let at = a.fresh("ino_at");
    a.ldx_w(R1, FP, FP_NR);
    a.mov_imm(R3, PT_REGS_SI)
        .note("stat, lstat: the buffer is the second argument");
    a.mov_imm(R5, STAT_INO);
    a.jeq_imm(R1, NR_STAT, &at);
    a.jeq_imm(R1, NR_LSTAT, &at);
    a.mov_imm(R3, PT_REGS_DX).note("newfstatat: the third");
    a.jeq_imm(R1, NR_NEWFSTATAT, &at);
    a.mov_imm(R3, PT_REGS_R8).note("statx: the fifth");
    a.mov_imm(R5, STATX_INO);
    a.jne_imm(R1, NR_STATX, done).note("a stat by fd");
    a.label(&at);
    a.stx_dw(FP, FP_COUNT, R5)
        .note("the inode's offset in the buffer");
    a.ldx_dw(R4, R6, 0).note("r4 = args[0], the task's pt_regs");
    a.add(R3, R4);
    a.mov(R1, FP).add_imm(R1, FP_PTR as i32);
    a.mov_imm(R2, 8);
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, done);
    a.ldx_dw(R1, FP, FP_PTR).note("r1 = the buffer");
    a.jeq_imm(R1, 0, done).note("no buffer: the call fails");
    a.ldx_dw(R2, FP, FP_COUNT);
    a.add(R1, R2);
    a.stx_dw(R9, ST_STAT_INO, R1);
    a.ldx_w(R1, R9, ST_TID);
    a.stx_w(R9, ST_STAT_TID, R1);
}

/// At a syscall's exit, with r6 = the context and r9 = this CPU's state: a stat by path of the
/// tracked task (its entry left where the result's inode number goes, `paths::stat_path`) that
/// succeeded, of an inode no stat of the run found before, counts in `STAT_FIRST` and
/// puts the inode in the `seen` set. Any other call passes with one load and one compare. A
/// stat that was switched out and ends on another CPU is not looked at; a set that is full
/// counts each inode it cannot hold as found first.
pub(super) fn first_stat(a: &mut Asm, m: &Maps) {
    a.ldx_dw(R1, R9, ST_STAT_INO);
    a.jeq_imm(R1, 0, "first_stat_done");
    a.st_dw(R9, ST_STAT_INO, 0)
        .note("looked at once, whatever exits next");
    a.stx_dw(FP, FP_DELTA, R1);
    a.call(Helper::GetCurrentPidTgid);
    a.mov32(R0, R0);
    a.ldx_w(R1, R9, ST_STAT_TID);
    a.jne(R0, R1, "first_stat_done")
        .note("not the task whose stat it was");
    a.ldx_dw(R1, R6, 8)
        .note("r1 = args[1], what the stat returned");
    a.jne_imm(R1, 0, "first_stat_done")
        .note("an error: no inode");
    a.mov(R1, FP)
        .add_imm(R1, FP_KEY as i32)
        .note("r1 = where the inode goes");
    a.mov_imm(R2, 8);
    a.ldx_dw(R3, FP, FP_DELTA);
    a.call(Helper::ProbeReadUser);
    a.jne_imm(R0, 0, "first_stat_done");
    first_in_set(a, m, STAT_FIRST, "first_stat_done");
    a.label("first_stat_done");
}

/// The key at `FP_KEY` (u64): where the run's `seen` set lacks it, it goes in and `slot`'s
/// count word gains one; where the set holds it, on to `done`. A full set's insert fails and
/// the key still counts as first.
pub(super) fn first_in_set(a: &mut Asm, m: &Maps, slot: u32, done: &str) {
    a.mov(R2, FP).add_imm(R2, FP_KEY as i32);
    a.ld_map(R1, m.seen);
    a.call(Helper::MapLookupElem);
    a.jne_imm(R0, 0, done).note("in the set: found before");
    a.st_dw(FP, FP_KEY - 8, 1);
    a.mov(R2, FP).add_imm(R2, FP_KEY as i32);
    a.mov(R3, FP).add_imm(R3, (FP_KEY - 8) as i32);
    a.mov_imm(R4, costlab_bpf::insn::BPF_NOEXIST);
    a.ld_map(R1, m.seen);
    a.call(Helper::MapUpdateElem);
    a.mov_imm(R1, slot as i32);
    count(a, m, R1);
}

/// Where a key for the `seen` set is built on the stack (u64), and its value beside it.
pub(super) const FP_KEY: i16 = -16;
