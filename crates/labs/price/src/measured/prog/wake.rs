//! A sleeper woken on a CPU that had halted. In a VM the idle loop halts the vCPU once its
//! polling ends; a wake-up then costs the waker an interrupt sent there (`pages::ipi_sent`)
//! and the wakee its switch back in on a CPU just re-entered (its tick restarted: more exits).
//! The idle loop marks this CPU's state when it enters an idle state past polling (the raw
//! `cpu_idle` tracepoint); sched_switch reads and clears the mark, and a tracked task switched
//! in from the idle task while it was marked, back from a wait inside a call, is counted in
//! `HALT_IN` and in that call's work.

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R6, R8, R9};

use super::pages::WORK_HALT;
use super::{count, epilogue, state, Maps, HALT_IN, ST_HALTED};

/// An idle state's index above this is PWR_EVENT_EXIT ((u32)-1): the CPU leaves idle.
const STATE_MAX: i32 = 64;

/// raw cpu_idle (state, cpu_id), in the idle task: an idle state past 0 (polling) entered
/// marks this CPU halted until its next switch.
pub fn idle(m: &Maps) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, costlab_bpf::Reg(1));
    a.ldx_dw(R1, R6, 0)
        .note("r1 = args[0], the idle state's index");
    a.jeq_imm(R1, 0, "out")
        .note("polling: a wake-up needs no interrupt");
    a.jgt_imm(R1, STATE_MAX, "out")
        .note("PWR_EVENT_EXIT: idle ends");
    state(&mut a, m);
    a.st_w(R9, ST_HALTED, 1);
    epilogue(&mut a);
    a
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
