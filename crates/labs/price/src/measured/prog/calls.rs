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
    a.jne_imm(R1, NR_OPENAT, "classed");
    a.mov(R1, FP)
        .add_imm(R1, -16)
        .note("r1 = where the flags go");
    a.mov_imm(R2, 8);
    a.ldx_dw(R3, R6, 0).note("r3 = args[0], the task's pt_regs");
    a.add_imm(R3, PT_REGS_DX).note("&regs->dx, openat's flags");
    a.call(Helper::ProbeReadKernel);
    a.mov_imm(R1, NR_OPENAT);
    a.jne_imm(R0, 0, "classed");
    a.ldx_dw(R2, FP, -16);
    a.and_imm(R2, O_CREAT);
    a.jeq_imm(R2, 0, "classed").note("no O_CREAT: an open");
    a.mov_imm(R1, OPEN_CREATE as i32);
    a.label("classed");
}

/// With r1 = the syscall's slot: an mmap whose flags lack MAP_ANONYMOUS (a file's mapping)
/// goes to `MMAP_FILE` (r0, r2-r5 clobbered; r1 stays the slot). Flags that cannot be read
/// leave it mmap's.
pub(super) fn mmap_file(a: &mut Asm) {
    let done = a.fresh("mmap_classed");
    a.jne_imm(R1, NR_MMAP, &done);
    a.mov(R1, FP)
        .add_imm(R1, -16)
        .note("r1 = where the flags go");
    a.mov_imm(R2, 8);
    a.ldx_dw(R3, R6, 0).note("r3 = args[0], the task's pt_regs");
    a.add_imm(R3, PT_REGS_R10).note("&regs->r10, mmap's flags");
    a.call(Helper::ProbeReadKernel);
    a.mov_imm(R1, NR_MMAP);
    a.jne_imm(R0, 0, &done);
    a.ldx_dw(R2, FP, -16);
    a.and_imm(R2, MAP_ANONYMOUS);
    a.jne_imm(R2, 0, &done).note("anonymous: mmap's own line");
    a.mov_imm(R1, MMAP_FILE as i32);
    a.label(&done);
}
