//! The time since the last call of the same kind on the same CPU, by bucket: how much other
//! work (the program's own computing, its other calls, other tasks) came between two calls of
//! a kind there, which decides how much of the kernel's code and data for that call a call
//! finds still in the CPU's caches. Each syscall number and each minor fault kind has its own
//! last time in its slot, on each CPU (`SLOT_LAST`); a first call of a kind on a CPU counts
//! from the split's start there (`ST_START` of the state). The `cold-call` cost term measures
//! what a call costs after a sweep of each of a few sizes, and the time each sweep takes; the
//! price reads each bucket's mean gap on that curve. A gap is the CPU's busy time: the time its
//! idle task ran between the two calls is left out (a task that waits on a pipe with its CPU
//! halted, as tar does on gzip, finds its calls' code still cached: tar's close cost 0.43 us a
//! call, its openat about 1 us, with a few hundred us between two of them, nearly all idle).
//!
//! Why not the user time before the call, as before 2026-12-07: on a 2-vCPU Xeon guest, a
//! JVM's mprotect cost 0.56 us where the last mprotect on its CPU was under 4 us before, and
//! 3.4 us where it was 256 us or more before; by the user time before it, 1.0 us and 4.6 us,
//! and 80% of its calls came within 4 us of user work (bpftrace on the raw syscall
//! tracepoints, `java -version`): most calls follow a little user work and other calls, which
//! push the call's own code out as user work does.

use costlab_bpf::{Asm, R0, R1, R2, R3, R4, R7, R8, R9};

use super::ST_START;

/// Where the state keeps when this CPU last switched tasks, and how long its idle task has run
/// since the split started (ns).
pub const ST_SWITCHED: i16 = 80;
pub const ST_IDLE: i16 = 88;

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
/// Where a slot keeps, on each CPU, the busy clock (`count_gap`) when a call of its kind last
/// came there (after the buckets).
pub const SLOT_LAST: i16 = SLOT_GAPS + GAPS_SIZE as i16;

/// At a switch (r7 = now, r8 = prev's thread id, r9 = this CPU's state): where prev is the
/// idle task, it ran since the CPU's last switch, and that time is added to the CPU's idle
/// time; the last switch becomes now. r1-r3 clobbered.
pub fn idle_edges(a: &mut Asm) {
    let done = a.fresh("idle_counted");
    a.ldx_dw(R1, R9, ST_SWITCHED)
        .note("r1 = this CPU's last switch");
    a.stx_dw(R9, ST_SWITCHED, R7);
    a.jne_imm(R8, 0, &done).note("prev is not the idle task");
    a.jeq_imm(R1, 0, &done)
        .note("no switch seen here yet: its idle time unknown");
    a.jlt(R7, R1, &done);
    a.mov(R2, R7).sub(R2, R1).note("r2 = the idle task's run");
    a.ldx_dw(R3, R9, ST_IDLE)
        .add(R3, R2)
        .stx_dw(R9, ST_IDLE, R3);
    a.label(&done);
}

/// r0 = a call's slot, r7 = now, r9 = this CPU's state: the CPU's busy time (its idle task's
/// time left out) since the last call of the slot's kind on this CPU (since the split's start
/// there for the first) counted in its bucket and added to that bucket's sum; the slot keeps
/// the busy clock now. A sampled split times one call in 2^`shift` of each kind on each CPU:
/// the time between two timed calls is shifted down by as much (the calls between them came as
/// often). r2-r4 clobbered.
pub fn count_gap(a: &mut Asm, shift: u32) {
    let found = a.fresh("bucket");
    let known = a.fresh("known");
    let ahead = a.fresh("ahead");
    let behind = a.fresh("behind");
    a.ldx_dw(R4, R9, ST_IDLE);
    a.mov(R3, R7)
        .sub(R3, R4)
        .note("r3 = this CPU's busy clock: now less its idle time");
    a.ldx_dw(R2, R0, SLOT_LAST)
        .note("r2 = the busy clock at the last call of this kind here");
    a.stx_dw(R0, SLOT_LAST, R3);
    a.jne_imm(R2, 0, &known);
    a.ldx_dw(R2, R9, ST_START)
        .note("the first here: since the split's start");
    a.label(&known);
    a.jlt(R3, R2, &behind);
    a.sub(R3, R2).mov(R2, R3);
    a.ja(&ahead);
    a.label(&behind);
    a.mov_imm(R2, 0).note("a clock read out of order: no gap");
    a.label(&ahead);
    if shift > 0 {
        a.rsh_imm(R2, shift as i32)
            .note("one timed call in 2^shift: the gap of one");
    }
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
