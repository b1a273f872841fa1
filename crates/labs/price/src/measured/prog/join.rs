//! A tracked task found on a CPU whose switch into it no sched_switch showed.

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R8, R9};

use super::{count, Maps, LATE_JOINS, ST_CLASS, ST_FD, ST_NR, ST_OPEN};

/// A task just joined (r8) that the switched-out hash holds left a CPU tracked, and no
/// sched_switch showed it coming back: its switch in was not traced (in the KVM guest this
/// was found on, no switch out of the guest agent's threads ever fired the tracepoint:
/// bpftrace saw 29 switches into them in 10 s and none out; a task that followed one on a CPU
/// came back unseen). It is taken up as a switch in would (`take_up`) and counted in
/// `LATE_JOINS`; its time before this event is in no class (no wait is added: when it came
/// back is not known). r0-r5 clobbered.
pub fn late(a: &mut Asm, m: &Maps) {
    let done = a.fresh("joined");
    a.stx_w(FP, -8, R8);
    a.ld_map(R1, m.tasks);
    a.mov(R2, FP).add_imm(R2, -8);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, &done)
        .note("first sight: it starts in user");
    take_up(a);
    a.st_dw(R9, super::wake::ST_JOINED, 0)
        .note("seen before: not a first sight");
    a.mov_imm(R1, LATE_JOINS as i32);
    count(a, m, R1);
    a.label(&done);
}

/// r0 = a switched-out task's value in the hash: this CPU takes up the syscall it was in, the
/// sampled call's by-fd slot, its open fault's time so far and (left in r1) its class, as at
/// a switch in.
pub fn take_up(a: &mut Asm) {
    a.ldx_w(R3, R0, 4)
        .stx_w(R9, ST_NR, R3)
        .note("the syscall it was in");
    a.ldx_w(R3, R0, 24).stx_w(R9, ST_FD, R3);
    a.ldx_dw(R2, R0, 16).stx_dw(R9, ST_OPEN, R2);
    a.ldx_w(R1, R0, 0)
        .stx_w(R9, ST_CLASS, R1)
        .note("its class when it left");
}
