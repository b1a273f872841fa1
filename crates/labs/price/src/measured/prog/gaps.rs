//! The user time before each syscall, by bucket: how much of its own work a program did since
//! it last entered the kernel, which decides how much of the kernel's code and data a call
//! finds still in the CPU's caches. A call after 30 us of user work that swept 2 MiB here cost
//! 1.5-2.3x the same call in a tight loop (getppid, stat, open and close, mmap and munmap, a
//! 4 KiB pread; /tmp probe of 2026-12-06); the `cold-call` cost term measures that factor and
//! the work that brings it, and the price applies it to the calls this histogram finds after
//! enough user time.

use costlab_bpf::{Asm, FP, R0, R2, R3, R4};

use super::FP_DELTA;

/// The buckets' bounds, ns: a gap below `BOUNDS[0]` is bucket 0, one in
/// [`BOUNDS[i-1]`, `BOUNDS[i]`) bucket i, one at or above the last the last bucket.
pub const BOUNDS: [u32; 6] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20];
/// Buckets: one more than the bounds.
pub const BUCKETS: usize = BOUNDS.len() + 1;
/// Where a slot's buckets start (after the six words every slot has): each a count and the
/// sum of its gaps, ns.
pub const SLOT_GAPS: i16 = 48;
/// Bytes of the buckets in a slot.
pub const GAPS_SIZE: u32 = (BUCKETS * 16) as u32;

/// r0 = a syscall's slot: the user time its task ran before it (at `FP_DELTA`, which the
/// entry's charge left; 0 where it charged nothing) counted in its bucket and added to that
/// bucket's sum. r2-r4 clobbered.
pub fn count_gap(a: &mut Asm) {
    let found = a.fresh("bucket");
    a.ldx_dw(R2, FP, FP_DELTA)
        .note("r2 = the user time before this call");
    a.mov_imm(R3, 0).note("r3 = its bucket");
    for b in BOUNDS {
        a.jlt_imm(R2, b as i32, &found);
        a.add_imm(R3, 1);
    }
    a.label(&found);
    a.lsh_imm(R3, 4)
        .add(R3, R0)
        .note("r3 = the bucket's count word");
    a.ldx_dw(R4, R3, SLOT_GAPS)
        .add_imm(R4, 1)
        .stx_dw(R3, SLOT_GAPS, R4);
    a.ldx_dw(R4, R3, SLOT_GAPS + 8)
        .add(R4, R2)
        .stx_dw(R3, SLOT_GAPS + 8, R4);
}
