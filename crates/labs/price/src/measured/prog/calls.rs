//! Calls told apart by their arguments at their entry, each moved to a line of its own: an
//! openat with O_CREAT (`OPEN_CREATE`: a new name made, priced at the create term), an mmap of
//! a file (`MMAP_FILE`: its flags without MAP_ANONYMOUS, priced at the mmap-file term; an
//! anonymous mapping stays mmap's).

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R6};

use super::{NR_OPENAT, OPEN_CREATE, O_CREAT, PT_REGS_DX};

/// mmap calls of a file: their count and time go here instead of mmap's slot.
pub const MMAP_FILE: u32 = super::exit::MUNMAP_VMAS + 1;
/// x86-64's mmap, where its flags are in struct pt_regs (r10, the fourth argument), and
/// the flag that makes a mapping anonymous.
pub const NR_MMAP: i32 = 9;
const PT_REGS_R10: i32 = 56;
const MAP_ANONYMOUS: i32 = 0x20;

/// With r1 = the syscall's slot: an openat whose flags hold O_CREAT goes to `OPEN_CREATE`
/// (r0, r2-r5 clobbered; r1 stays the slot). Flags that cannot be read leave it openat's.
pub(super) fn open_create(a: &mut Asm) {
    by_flag(a, NR_OPENAT, PT_REGS_DX, O_CREAT, true, OPEN_CREATE);
}

/// With r1 = the syscall's slot: an mmap whose flags lack MAP_ANONYMOUS (a file's mapping)
/// goes to `MMAP_FILE` (r0, r2-r5 clobbered; r1 stays the slot). Flags that cannot be read
/// leave it mmap's.
pub(super) fn mmap_file(a: &mut Asm) {
    by_flag(a, NR_MMAP, PT_REGS_R10, MAP_ANONYMOUS, false, MMAP_FILE);
}

/// With r1 = the syscall's slot: a call `nr` whose flags (the argument register at `flags_at`
/// in struct pt_regs) hold `bit` (`set`) or lack it (not `set`) goes to slot `to`; any other,
/// and one whose flags cannot be read, keeps its slot (r0, r2-r5 clobbered).
fn by_flag(a: &mut Asm, nr: i32, flags_at: i32, bit: i32, set: bool, to: u32) {
    let done = a.fresh("classed");
    a.jne_imm(R1, nr, &done);
    a.mov(R1, FP)
        .add_imm(R1, -16)
        .note("r1 = where the flags go");
    a.mov_imm(R2, 8);
    a.ldx_dw(R3, R6, 0).note("r3 = args[0], the task's pt_regs");
    a.add_imm(R3, flags_at).note("&regs->(the flags' register)");
    a.call(Helper::ProbeReadKernel);
    a.mov_imm(R1, nr);
    a.jne_imm(R0, 0, &done);
    a.ldx_dw(R2, FP, -16);
    a.and_imm(R2, bit);
    if set {
        a.jeq_imm(R2, 0, &done)
            .note("the bit clear: the call's own line");
    } else {
        a.jne_imm(R2, 0, &done)
            .note("the bit set: the call's own line");
    }
    a.mov_imm(R1, to as i32);
    a.label(&done);
}
