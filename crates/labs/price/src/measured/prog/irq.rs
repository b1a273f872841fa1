//! Interrupts: the class a tracked task's CPU was in is kept under an interrupt (hard or soft)
//! and resumed at its end; the interrupt's own time is its line's.

use costlab_bpf::{Asm, R1, R6, R9};

use super::{
    charge, count, epilogue, prologue, Join, Maps, Target, IRQS, IRQ_BASE, SOFTIRQS, SOFTIRQ_BASE,
    ST_CLASS, ST_UNDER_IRQ, ST_UNDER_SOFTIRQ, VEC_BASE,
};

/// Which class an interrupt entry charges to.
#[derive(Debug, Clone, Copy)]
pub enum IrqSlot {
    /// irq_handler_entry: IRQ_BASE + args[0] (the irq number; the last slot from 255 up).
    Numbered,
    /// softirq_entry: SOFTIRQ_BASE + args[0] (the vector).
    Softirq,
    /// A system vector's entry: this slot.
    Fixed(u32),
}

/// An interrupt begins on a tracked task's CPU: the class under it is kept, the interrupt's
/// counted. A task of `t.who` the CPU does not name joins here (its switch in was not traced:
/// `join::late`), so that a program making no syscall and taking no fault is found again at
/// the next tick.
pub fn irq_enter(m: &Maps, t: &Target, which: IrqSlot) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::Of(t.who), true);
    charge(&mut a, m, false);
    let save = match which {
        IrqSlot::Softirq => ST_UNDER_SOFTIRQ,
        _ => ST_UNDER_IRQ,
    };
    a.ldx_w(R1, R9, ST_CLASS)
        .stx_w(R9, save, R1)
        .note("the class under it");
    match which {
        IrqSlot::Fixed(s) => {
            a.mov_imm(R1, s as i32);
        }
        IrqSlot::Numbered | IrqSlot::Softirq => {
            let (base, n) = match which {
                IrqSlot::Softirq => (SOFTIRQ_BASE, SOFTIRQS),
                _ => (IRQ_BASE, IRQS),
            };
            a.ldx_dw(R1, R6, 0).note("r1 = args[0]");
            a.jlt_imm(R1, n as i32, "inside");
            a.mov_imm(R1, n as i32 - 1);
            a.label("inside");
            a.add_imm(R1, base as i32);
        }
    }
    a.stx_w(R9, ST_CLASS, R1);
    count(&mut a, m, R1);
    epilogue(&mut a);
    a
}

/// An interrupt ends: its time charged, the class under it resumed (only if an interrupt of
/// this level is what runs: an exit whose entry came before the attach changes nothing).
pub fn irq_exit(m: &Maps, softirq: bool) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    let (lo, hi, save) = if softirq {
        (SOFTIRQ_BASE, SOFTIRQ_BASE + SOFTIRQS, ST_UNDER_SOFTIRQ)
    } else {
        (VEC_BASE, IRQ_BASE + IRQS, ST_UNDER_IRQ)
    };
    a.ldx_w(R1, R9, ST_CLASS);
    a.jlt_imm(R1, lo as i32, "out");
    a.jge_imm(R1, hi as i32, "out");
    charge(&mut a, m, false);
    a.ldx_w(R1, R9, save)
        .stx_w(R9, ST_CLASS, R1)
        .note("resume the class under it");
    epilogue(&mut a);
    a
}
