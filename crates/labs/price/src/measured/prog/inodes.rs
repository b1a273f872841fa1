//! ext4's inode allocator passing over recently deleted inodes, counted for a tracked task.
//!
//! On ext4 without a journal a create takes the first free inode of its group that was not
//! deleted in the last seconds; each free inode before it is passed over, at the cost of a
//! buffer lookup of its inode-table block and a read of its dtime (fs/ext4/ialloc.c,
//! `recently_deleted`). No event names a pass. The buffer lookup fires
//! `block:block_touch_buffer` when the per-CPU buffer cache holds the block (15 passes in 16
//! at 16 inodes a block: the first of a block is found in the page cache, without it), so the
//! passes are counted as the touches inside an allocation: between `ext4:ext4_request_inode`
//! and `ext4:ext4_allocate_inode` of a tracked task (its thread id in the CPU's state), less the few
//! touches every allocation makes (its bitmap, the inode it takes), as calibrated beside the
//! run (`measured::inodes`). Counts only: no clock is read. Every touch on the machine runs
//! the touch program while it is attached; its cost is calibrated and taken out too.

use costlab_bpf::{Asm, R1, R2, R8, R9};

use super::pages::{counted, PAGES_SMALL, WORK_TOUCHES, WORK_WINDOWS};
use super::{epilogue, prologue, Join, Maps, FP_DELTA};

/// Buffers touched inside tracked tasks' inode allocations, and the allocations.
pub const INODE_TOUCHES: u32 = PAGES_SMALL + 1;
pub const INODE_WINDOWS: u32 = INODE_TOUCHES + 1;
/// The slots' end: `prog::SLOTS`.
pub const SLOTS_END: u32 = INODE_WINDOWS + 1;
/// The CPU state's word (u32): the thread id of the tracked task inside an allocation here.
pub const ST_SCAN: i16 = 44;

/// raw ext4_request_inode: a tracked task begins an allocation (the flag holds its thread
/// id: a task switched in while another was inside one on this CPU is not inside it).
pub fn request(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.stx_w(R9, ST_SCAN, R8)
        .note("this task is inside an allocation");
    epilogue(&mut a);
    a
}

/// r2 = 1 at `FP_DELTA`.
fn one(a: &mut Asm) {
    a.mov_imm(R2, 1);
    a.stx_dw(costlab_bpf::FP, FP_DELTA, R2);
}

/// raw ext4_allocate_inode: a tracked task's allocation ends (where it began on another
/// CPU, this one's flag is not its own and stays); one more in `INODE_WINDOWS` and its
/// call's work.
pub fn allocate(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.ldx_w(R1, R9, ST_SCAN);
    a.jne(R1, R8, "counted").note("not begun on this CPU");
    a.st_w(R9, ST_SCAN, 0);
    a.label("counted");
    one(&mut a);
    counted(&mut a, m, WORK_WINDOWS, INODE_WINDOWS);
    a
}

/// raw block_touch_buffer: a buffer found in the per-CPU buffer cache; inside the tracked
/// task's own allocation, one more in `INODE_TOUCHES` and its call's work.
pub fn touch(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.ldx_w(R1, R9, ST_SCAN);
    a.jne(R1, R8, "out").note("not inside its own allocation");
    one(&mut a);
    counted(&mut a, m, WORK_TOUCHES, INODE_TOUCHES);
    a
}
