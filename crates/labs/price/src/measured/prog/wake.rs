//! A sleeper woken on a CPU that had halted. In a VM the idle loop halts the vCPU once its
//! polling ends; a wake-up then costs the waker an interrupt sent there (`pages::ipi_sent`)
//! and the wakee its switch back in on a CPU just re-entered (its tick restarted: more exits).
//! The idle loop marks this CPU's state when it enters an idle state past polling (the raw
//! `cpu_idle` tracepoint); sched_switch reads and clears the mark, and a tracked task switched
//! in from the idle task while it was marked, back from a wait inside a call, is counted in
//! `HALT_IN` and in that call's work.
//!
//! The kernel charges the wakee from its wake-up on: the idle loop's way out of the halt (the
//! tick restarted, the scheduler entered) runs before sched_switch names the wakee, but is in
//! its CPU usage. The idle loop's exit from a halt is timed, and such a wakee's stretch on CPU
//! starts there, in the call it slept in; otherwise that time is in no class (here 2-4 us a
//! wake-up, most of what a pipe's two ends left unmeasured).
//!
//! It charges from earlier still: from the wake-up itself. A wake-up onto an idle CPU skips
//! the clock update of the switch that follows, so the wakee's run starts at the clock its
//! run queue read when the wake-up put it there: the rest of the interrupt that woke it (a
//! timer's, on its own CPU), the idle loop's exit and the switch are its CPU time. Measured
//! here with bpftrace, a sleeper's `se.sum_exec_runtime` grew 9.9 us a wake-up more than its
//! stretches between sched_switches when prev was the idle task (994 wake-ups, a 100 us
//! nanosleep loop), and 1.2 us less when prev was another task; the wake-up came 11.1 us
//! before the switch. So the clock at which a task was put on a run queue is kept (`woken`:
//! its wake-up, or a move of it to another CPU's queue, as an idle CPU's balancing pulls a
//! woken task that waited behind another), and a task switched in from the idle task runs
//! from it (`from_wake`), in the call it slept in (a new task: in the clone it returns from).

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R4, R6, R7, R8, R9};

use super::pages::WORK_HALT;
use super::{count, epilogue, pid_at, state, switched_out, Maps, HALT_IN, ST_HALTED, ST_SINCE};

/// Where a switched-out task's value in the hash keeps the low 32 bits of the clock at its
/// last wake-up (0: none since it left; its switch out and its fork write 0 there).
pub const TASK_WOKE: i16 = 28;
/// A wake-up further back than this (100 us) is not taken: the kernel charges a wakee by its
/// run queue's clock, which leaves out the time the host did not run the vCPU (steal), and
/// an idle CPU that takes that long to switch to its wakee was mostly not running (here 8-16
/// us was usual, 2 in 994 above 32 us). Past it the stretch starts at the switch, and what the
/// kernel did charge is left unmeasured: an error that way is said, one the other way is not.
const WAKE_MAX: i32 = 100_000;

/// raw sched_wakeup, sched_wakeup_new and sched_migrate_task (p, ...), as p is put on a run
/// queue or moved to another CPU's: a task in the switched-out hash keeps the low 32 bits of
/// the clock (never 0) at `TASK_WOKE`.
pub fn woken(m: &Maps, pid_offset: i32) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, costlab_bpf::Reg(1));
    a.call(Helper::KtimeGetNs);
    a.mov(R7, R0)
        .note("r7 = now, first: the run queue's clock was read just before");
    pid_at(&mut a, 0, "p", pid_offset);
    switched_out(&mut a, m, "not a tracked task that left a CPU");
    a.mov32(R7, R7);
    a.jne_imm(R7, 0, "keep");
    a.mov_imm(R7, 1).note("0 means none: one ns later");
    a.label("keep");
    a.stx_w(R0, TASK_WOKE, R7)
        .note("when it was woken, low 32 bits");
    epilogue(&mut a);
    a
}

/// sched_switch, next tracked (r0 = its value in the hash, r7 = now, r8 = prev's thread id):
/// where prev was the idle task and next was woken since it left (or, new, since its fork),
/// at most `WAKE_MAX` ago, r7 moves back to that wake-up, where the kernel began charging
/// next. r2-r4 clobbered; r0 and r1 kept.
pub fn from_wake(a: &mut Asm) {
    let keep = a.fresh("keep_switch_clock");
    let take = a.fresh("from_wake");
    a.ldx_w(R3, R0, TASK_WOKE);
    a.st_w(R0, TASK_WOKE, 0)
        .note("taken: a switch out not seen leaves no stale wake-up");
    a.jne_imm(R8, 0, &keep).note("prev was not the idle task");
    a.jeq_imm(R3, 0, &keep).note("not woken since it left");
    a.mov32(R4, R7)
        .sub(R4, R3)
        .mov32(R4, R4)
        .note("r4 = now - the wake-up, mod 2^32");
    a.jgt_imm(R4, WAKE_MAX, &keep)
        .note("too far back: not this stretch's wake-up");
    a.ldx_dw(R2, R0, 8).note("r2 = when it left");
    a.jeq_imm(R2, 0, &take).note("new: woken since its fork");
    a.mov(R3, R7).sub(R3, R2);
    a.jlt(R3, R4, &keep)
        .note("before it left: not this stretch's wake-up");
    a.label(&take);
    a.sub(R7, R4).note("next's stretch starts at its wake-up");
    a.label(&keep);
}

/// An idle state's index above this is PWR_EVENT_EXIT ((u32)-1): the CPU leaves idle.
const STATE_MAX: i32 = 64;

/// The state's word @48: when the idle loop last left a halt (ns), 1 inside a halt, 0 after a
/// poll.
const ST_HALT_EXIT: i16 = 48;
/// sched_switch's copy of it, on its stack.
const FP_HALT_EXIT: i16 = -80;

/// raw cpu_idle (state, cpu_id), in the idle task: an idle state past 0 (polling) entered
/// marks this CPU halted until its next switch; leaving it, the time is kept.
pub fn idle(m: &Maps) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, costlab_bpf::Reg(1));
    state(&mut a, m);
    a.ldx_dw(R1, R6, 0)
        .note("r1 = args[0], the idle state's index");
    a.jgt_imm(R1, STATE_MAX, "leave")
        .note("PWR_EVENT_EXIT: idle ends");
    a.jeq_imm(R1, 0, "poll")
        .note("polling: a wake-up needs no interrupt");
    a.st_w(R9, ST_HALTED, 1);
    a.st_dw(R9, ST_HALT_EXIT, 1).note("in a halt");
    a.ja("out");
    a.label("poll");
    a.st_dw(R9, ST_HALT_EXIT, 0).note("no halt to leave");
    a.ja("out");
    a.label("leave");
    a.ldx_dw(R1, R9, ST_HALT_EXIT);
    a.jne_imm(R1, 1, "out").note("not leaving a halt");
    a.call(Helper::KtimeGetNs);
    a.stx_dw(R9, ST_HALT_EXIT, R0);
    epilogue(&mut a);
    a
}

/// sched_switch (r9 = this CPU's state): the halt mark and the halt's exit time, read into
/// the stack (`halted_at`, `FP_HALT_EXIT`) and cleared for the next switch.
pub fn take_halt(a: &mut Asm, halted_at: i16) {
    a.ldx_w(R1, R9, ST_HALTED).stx_w(FP, halted_at, R1);
    a.st_w(R9, ST_HALTED, 0)
        .note("halted since the last switch: read, and cleared for the next");
    a.ldx_dw(R1, R9, ST_HALT_EXIT).stx_dw(FP, FP_HALT_EXIT, R1);
    a.st_dw(R9, ST_HALT_EXIT, 0);
}

/// sched_switch, next tracked and back from a wait (r2 = when it left, r7 = now): where prev
/// was the idle task (r8 = 0) and this CPU left a halt after next went to sleep, next's
/// stretch starts at that exit (r7 and `since` moved back to it). r3 clobbered.
pub fn from_halt_exit(a: &mut Asm) {
    let keep = a.fresh("keep_now");
    let take = a.fresh("from_halt_exit");
    a.jne_imm(R8, 0, &keep).note("prev was not the idle task");
    a.ldx_dw(R3, FP, FP_HALT_EXIT);
    a.jlt(R2, R3, &take)
        .note("the halt ended after next left (0 or 1: none)");
    a.ja(&keep);
    a.label(&take);
    a.jlt(R7, R3, &keep)
        .note("after this switch's clock: not a time");
    a.mov(R7, R3);
    a.stx_dw(R9, ST_SINCE, R7)
        .note("next's stretch starts where the halt ended");
    a.label(&keep);
}

/// Inside sched_switch, next tracked and back from a wait in the class at `class_at`: where
/// prev was the idle task (r8 = 0) and the CPU halted (the u32 at `halted_at`), count it in
/// `HALT_IN` and in the work of the class's slot (r0-r5 clobbered).
pub fn halted_in(a: &mut Asm, m: &Maps, halted_at: i16, class_at: i16) {
    let done = a.fresh("halted_done");
    a.jne_imm(R8, 0, &done).note("prev was not the idle task");
    a.ldx_w(R1, FP, halted_at);
    a.jeq_imm(R1, 0, &done).note("the CPU only polled");
    a.mov_imm(R1, HALT_IN as i32);
    count(a, m, R1);
    a.ldx_w(R1, FP, class_at).stx_w(FP, -12, R1);
    a.mov(R2, FP).add_imm(R2, -12);
    a.ld_map(R1, m.work);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, &done);
    a.ldx_dw(R1, R0, WORK_HALT)
        .add_imm(R1, 1)
        .stx_dw(R0, WORK_HALT, R1);
    a.label(&done);
}
