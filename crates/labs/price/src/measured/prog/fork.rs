//! A fork: the child of a tracked task is tracked too.

use costlab_bpf::insn::BPF_ANY;
use costlab_bpf::{Asm, Helper, FP, R1, R2, R3, R4, R9};

use super::{epilogue, exit, pid_at, prologue, Join, Maps, Target, FP_TASK, ST_CLASS, ST_NR};

/// raw sched_process_fork (current = parent): a tracked parent's child is tracked from its
/// first switch in, in the parent's class (the clone it returns from). With `t.rss`, a child
/// with an address space of its own adds what the fork copied (`exit::fork_pages`).
pub fn sched_process_fork(m: &Maps, t: &Target) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    pid_at(&mut a, 1, "the child", t.pid_offset);
    a.ldx_w(R1, R9, ST_CLASS).stx_w(FP, FP_TASK, R1);
    a.ldx_w(R1, R9, ST_NR)
        .stx_w(FP, FP_TASK + 4, R1)
        .note("and the syscall it is in, for its exit");
    a.st_dw(FP, FP_TASK + 8, 0).note("no time away yet");
    a.st_dw(FP, FP_TASK + 16, 0).note("no fault open");
    a.st_dw(FP, FP_TASK + 24, 0)
        .note("no sampled call open, not woken yet");
    a.ld_map(R1, m.tasks);
    a.mov(R2, FP).add_imm(R2, -8);
    a.mov(R3, FP).add_imm(R3, FP_TASK.into());
    a.mov_imm(R4, BPF_ANY);
    a.call(Helper::MapUpdateElem);
    if let Some(r) = t.rss {
        exit::fork_pages(&mut a, m, r);
    }
    epilogue(&mut a);
    a
}
