//! A task's exit. A thread killed by its process's exit_group (a Go or JVM worker running user
//! code, a thread asleep in a futex) tears itself down inside the kernel, and the last thread
//! to leave the address space unmaps it all (exit_mm: for a 256 MiB Go heap, tens of ms).
//! None of that is inside a syscall of its own: without this, it stayed in the class the
//! thread was killed in, user time's (found only by the user-time ticks) or a futex's.

use costlab_bpf::{Asm, R1, R9};

use super::{charge, epilogue, prologue, Join, Maps, ST_CLASS, ST_SKIP, USER};

/// x86-64's exit and exit_group.
const NR_EXIT: i32 = 60;
pub const NR_EXIT_GROUP: i32 = 231;

/// raw sched_process_exit (task, group_dead), in the exiting task before it leaves its
/// address space (kernel 6.16 on; before, after it, and this finds less): a tracked task not
/// already in exit or exit_group has its time so far charged to its class, and its teardown
/// from here on goes to exit_group's slot, the process's exit, where its price is (the exit
/// term, the unmapped pages).
pub fn task_exit(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    a.ldx_w(R1, R9, ST_CLASS);
    a.jeq_imm(R1, NR_EXIT, "out")
        .note("its own exit: already there");
    a.jeq_imm(R1, NR_EXIT_GROUP, "out");
    a.jgt_imm(R1, USER as i32, "out")
        .note("not a syscall's class nor user time's");
    charge(&mut a, m, false);
    a.st_w(R9, ST_CLASS, NR_EXIT_GROUP);
    a.st_w(R9, ST_SKIP, 0)
        .note("an untimed call it was in never ends");
    epilogue(&mut a);
    a
}
