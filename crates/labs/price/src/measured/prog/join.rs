//! A task the split joins: one found on a CPU whose switch into it no sched_switch showed
//! (`late`), and the kernel's charge for a task's time before the split first saw it
//! (`first_charge`).

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R6, R7, R8, R9};

use super::{
    count, epilogue, slot, state, Maps, JOINED_BEFORE, LATE_JOINS, ST_CLASS, ST_FD, ST_NR, ST_OPEN,
    ST_TID,
};

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
    a.st_dw(R9, ST_JOINED, 0)
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

/// The state's word @72: when the split first saw the task this CPU runs, until the kernel's
/// next charge of it (0: none), set by the prologue's first sight.
pub(super) const ST_JOINED: i16 = 72;

/// raw sched_stat_runtime (p, runtime), where the kernel charges a task's run time (and its
/// cgroup's). Its first charge of a task after the split first saw it covers time from before
/// that sight: what it charges beyond the split's time since is added to `JOINED_BEFORE`. For
/// a price that is costlab's child moving itself into the cgroup: the kernel charges what ran
/// since a task's last update to the cgroup it is in at the next, and the split first sees
/// the child as its write to cgroup.procs returns (20-50 us here, the whole of `true`'s
/// unmeasured time). Only the task current on this CPU, where it was just seen, counts.
pub fn first_charge(m: &Maps) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, costlab_bpf::Reg(1));
    state(&mut a, m);
    a.ldx_dw(R7, R9, ST_JOINED);
    a.jeq_imm(R7, 0, "out")
        .note("no task first seen here since");
    a.call(Helper::GetCurrentTask);
    a.ldx_dw(R1, R6, 0).note("r1 = args[0], the task charged");
    a.jne(R0, R1, "out").note("not the task running here");
    a.call(Helper::GetCurrentPidTgid);
    a.mov32(R8, R0);
    a.ldx_w(R1, R9, ST_TID);
    a.jne(R1, R8, "out").note("not the task first seen");
    a.st_dw(R9, ST_JOINED, 0);
    a.call(Helper::KtimeGetNs);
    a.sub(R0, R7).note("r0 = the split's time of it since");
    a.ldx_dw(R3, R6, 8)
        .note("r3 = args[1], the run time charged");
    a.sub(R3, R0);
    a.jslt_imm(R3, 1, "out")
        .note("nothing from before the first sight");
    a.stx_dw(FP, -16, R3);
    a.mov_imm(R1, JOINED_BEFORE as i32);
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 0)
        .ldx_dw(R2, FP, -16)
        .add(R1, R2)
        .stx_dw(R0, 0, R1)
        .note("charged before the split saw it");
    epilogue(&mut a);
    a
}
