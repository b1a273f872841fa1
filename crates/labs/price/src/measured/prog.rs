//! The split's BPF programs, written with costlab-bpf's named-instruction assembler.
//!
//! One idea runs through all of them: each CPU keeps, for the tracked task running on it, the
//! class its time is going to now (user, a syscall's number, a fault, an irq...) and when that
//! began. At every transition the time since then is added to the class it leaves, and the
//! class changes. A task switched out leaves its class with the switch (in a hash by thread
//! id); switched back in, it takes it up again, and the time it was away is that class's wait
//! (a syscall's or a fault's: time off CPU inside the call). So every nanosecond a tracked task
//! is on a CPU between two of its transitions lands in exactly one class, and the classes add
//! up to the time its cgroup's cpu.stat counts.
//!
//! What it costs a syscall (examples/stepcost.rs, a getppid loop with one program on raw
//! sys_exit, interleaved with the bare loop; a busy 2-vCPU VM, kernel 6.18, 2026-11-26): an
//! empty program +24 ns (the syscall slow path and the tracepoint's dispatch), bpf_ktime_get_ns
//! +24 ns more (rdtsc alone ~19 ns on this VM), sys_exit's whole tracked path +51 ns; a
//! per-CPU array lookup (inlined by the JIT) and get_current_pid_tgid add nothing measurable.
//! So a syscall pays ~100 ns for the two transitions, nearly all of it the two dispatches and
//! the two clock reads; cutting lookups or helpers saves a few ns at most (tried: reading the
//! tracked task from the state alone, without get_current_pid_tgid: no difference on dd).
//!
//! Registers, in every program: r6 the context, r7 now (ns), r8 the current thread id, r9 this
//! CPU's state.

mod calls;
mod exit;
mod faults;
mod fork;
pub mod gaps;
pub mod inodes;
mod irq;
pub mod join;
pub mod pages;
pub mod paths;
pub mod wake;

pub use calls::{MMAP_FILE, NR_MMAP};
pub use exit::{task_exit, RssAt, MUNMAP_ANON_PAGES, MUNMAP_FILE_PAGES, MUNMAP_VMAS};
pub use faults::{fault_around, fault_begin, fault_end, fault_from_page_cache, FAULT_FILE_FIRST};
pub use fork::sched_process_fork;
pub use irq::{irq_enter, irq_exit, IrqSlot};
pub use paths::NEWFSTATAT_FD;

use costlab_bpf::insn::BPF_ANY;
use costlab_bpf::{Asm, Helper, Reg, FP, R0, R1, R2, R3, R4, R6, R7, R8, R9};

/// Slots of the per-CPU accounting array, one per class and event.
pub const SYS_OTHER: u32 = 511; // syscall numbers from here up share a slot
pub const USER: u32 = 512;
pub const FAULT_MINOR: u32 = 513;
pub const FAULT_MAJOR: u32 = 514;
/// A user fault begun whose end (handle_mm_fault's return) was not seen yet.
pub const FAULT_OPEN: u32 = 515;
pub const SOFTIRQ_BASE: u32 = 516;
pub const SOFTIRQS: u32 = 16;
/// x86's system vectors that do not pass through irq_handler_entry.
pub const VEC_BASE: u32 = 532;
pub const VECTORS: [&str; 5] = [
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
];
pub const IRQ_BASE: u32 = 540;
pub const IRQS: u32 = 256;
/// cpu-clock ticks that found a tracked task in its user class, in kernel mode (the entry and
/// exit paths, signal delivery, the return from a preemption: kernel work no transition
/// names) and in user mode: they share out the user class's time.
pub const USER_TICK_KERNEL: u32 = IRQ_BASE + IRQS;
pub const USER_TICK_USER: u32 = USER_TICK_KERNEL + 1;
/// Differences of two clock reads that went below zero (a program that an interrupt's
/// program nested inside moved `since` past the `now` it had read): dropped, counted here.
pub const DROPPED: u32 = USER_TICK_USER + 1;
/// Syscalls entered by tasks outside the cgroup while the split ran (they all take the
/// traced slow path): counted, to say what the tracing cost the rest of the machine.
pub const OTHERS: u32 = DROPPED + 1;
/// openat calls with O_CREAT in their flags: a new name made (or an existing file opened
/// with the flag), which on a journalled file system costs several times an open. Their
/// count and time go here instead of openat's slot, to be priced at the create term.
pub const OPEN_CREATE: u32 = OTHERS + 1;
/// The bytes of directory entries getdents64 returned to tracked tasks (in the count word):
/// priced per entry at the getdents64 term's entry size.
pub const DIRENT_BYTES: u32 = OPEN_CREATE + 1;
/// execve calls that failed (a shell's search of PATH tries each folder): their count and,
/// every call timed, their time, apart from the execs that loaded a program.
pub const EXEC_FAILED: u32 = DIRENT_BYTES + 1;
/// A user fault begun, by what it is so far (the class it holds until its end, which a
/// switch keeps with the task): `FAULT_OPEN` a read of a page not present (anonymous until a
/// file's page cache shows up in it), `FAULT_OPEN_WRITE` a write of one (the same),
/// `FAULT_OPEN_FILE` a read the page cache served (fault-around or filemap_fault),
/// `FAULT_OPEN_COW` a write to a present page, or a write the page cache served (a private
/// file page copied). Unfinished, all four are "fault unfinished".
pub const FAULT_OPEN_WRITE: u32 = EXEC_FAILED + 1;
pub const FAULT_OPEN_FILE: u32 = FAULT_OPEN_WRITE + 1;
pub const FAULT_OPEN_COW: u32 = FAULT_OPEN_FILE + 1;
/// Minor faults finished, by kind, beside `FAULT_MINOR` (anonymous): a page-cache page
/// mapped, and a page copied on write.
pub const FAULT_FILE: u32 = FAULT_OPEN_COW + 1;
pub const FAULT_COW: u32 = FAULT_FILE + 1;
/// Pages the page cache took in for a tracked task (counts only, by the folio's order): in
/// a syscall that is not a write (a cold read: readahead included), in a write (pages the
/// write made, priced with its bytes), and elsewhere (a fault: a major fault's readahead,
/// priced with it). See `pages`.
pub const PAGES_READ: u32 = FAULT_COW + 1;
pub const PAGES_WRITE: u32 = PAGES_READ + 1;
pub const PAGES_OTHER: u32 = PAGES_WRITE + 1;
/// Folios a tracked task took out of the page cache (a file's last unlink, a truncate, a
/// DONTNEED), and the bytes it sent to a disk to be written (its own fsync's writeback, a
/// direct write: the flusher threads' writeback is not its).
pub const PAGES_DROPPED: u32 = PAGES_OTHER + 1;
pub const WRITEBACK_BYTES: u32 = PAGES_DROPPED + 1;
/// Interrupts a tracked task sent to another CPU inside a syscall (ipi_send_cpu: in a VM each
/// is an exit, paid in the sender's call), counted (see `pages::ipi_sent`).
pub const IPI_SENT: u32 = WRITEBACK_BYTES + 1;
/// Tracked tasks switched back in from the idle task on a CPU that had halted (not just
/// polled) while they slept inside a call: in a VM the vCPU re-entered, its tick restarted,
/// all in the wakee's time (see `wake`).
pub const HALT_IN: u32 = IPI_SENT + 1;
/// Interrupts a tracked task sent to another CPU inside one of its user faults (a copy on
/// write's TLB shootdown of a CPU that runs another thread of the process, mostly), counted;
/// each also in the work of the fault's slot (see `pages::ipi_sent`).
pub const IPI_FAULT: u32 = HALT_IN + 1;
/// The pages a tracked process's address space still maps when its last thread exits, file
/// and anonymous: what its exit unmaps (see `exit::task_exit`).
pub const EXIT_FILE_PAGES: u32 = IPI_FAULT + 1;
pub const EXIT_ANON_PAGES: u32 = EXIT_FILE_PAGES + 1;
/// The pages a tracked task's forks copied the page tables of (the child's resident pages as
/// it starts, where it has an address space of its own; see `exit::fork_pages`).
pub const FORK_PAGES: u32 = EXIT_ANON_PAGES + 1;
/// The mappings (VMAs) a tracked process still had as its last thread exited, and those its
/// forks copied (`mm_struct.map_count`): an exit and a fork do work for each.
pub const EXIT_VMAS: u32 = FORK_PAGES + 1;
pub const FORK_VMAS: u32 = EXIT_VMAS + 1;
/// The pages and mappings of the address spaces tracked tasks' execs left, where the exec
/// tore them down (the caller alone used them: a forked child's copy, not a vfork's borrowed
/// one; see `exit::exec_old_mm`).
pub const EXEC_PAGES: u32 = FORK_VMAS + 1;
pub const EXEC_VMAS: u32 = EXEC_PAGES + 1;
/// The pages tracked tasks' read faults mapped from the page cache by fault-around
/// (mm_filemap_map_pages' range: up to 16 a fault, fewer at a mapping's end or a hole).
pub const FAULT_FILE_PAGES: u32 = EXEC_VMAS + 1;
/// Tracked tasks found running on a CPU whose switch into them no sched_switch showed (a
/// task switched out while tracked, joined again at its next event here: see `join::late`),
/// counted. Their time on that CPU until then is in no class.
pub const LATE_JOINS: u32 = faults::SLOTS_END;
/// Run time the kernel charged tracked tasks for before the split's first sight of each
/// (`join::first_charge`), ns.
pub const JOINED_BEFORE: u32 = calls::MMAP_FILE + 1;
pub const SLOTS: u32 = JOINED_BEFORE + 1;
/// The bits of x86's page-fault error code: the page was present (a protection fault), and
/// the access was a write.
pub const PF_PRESENT: i32 = 1;
pub const PF_WRITE: i32 = 2;
/// A task's state in its last switch (include/linux/sched.h): a dead task's entry in the
/// tasks hash is deleted there, or a task that later gets its thread id (ids are reused, 32768
/// of them by default) would be taken for it and charged to the program.
pub const TASK_DEAD: i32 = 0x80;
/// x86-64's execve.
pub const NR_EXECVE: i32 = 59;
/// x86-64's getdents64.
pub const NR_GETDENTS64: i32 = 217;
/// x86-64's openat, and the O_CREAT bit of its flags.
pub const NR_OPENAT: i32 = 257;
pub const O_CREAT: i32 = 0o100;
/// Where `dx` (a syscall's third argument: openat's flags) sits in x86-64's struct pt_regs.
pub const PT_REGS_DX: i32 = 96;
/// The cpu-clock period of those ticks at most, ns (`split::tick_period_for` picks a shorter
/// one for a short program). Each tick is a timer interrupt: on this VM every 1 ms took +2.3% of
/// a busy CPU's time, every 4 ms +0.5% (examples/stepcost.rs, 2026-11-26).
pub const USER_TICK_PERIOD_NS: u64 = 4_000_000;
/// Where `cs` sits in x86-64's struct pt_regs (its low two bits: the privilege level).
pub const PT_REGS_CS: i16 = 136;
// The classes' slot ranges follow each other without overlapping.
const _: () = assert!(SYS_OTHER < USER && FAULT_OPEN < SOFTIRQ_BASE);
const _: () = assert!(SOFTIRQ_BASE + SOFTIRQS <= VEC_BASE);
const _: () = assert!(VEC_BASE + VECTORS.len() as u32 <= IRQ_BASE);

/// One slot's value (u64s): count, cpu ns, wait ns, waits, for a sampled split the sum of the
/// squares of the timed calls' last on-CPU stretch (ns², @32) and the timed calls (@40), and
/// a syscall's or minor fault's time since the last of its kind on its CPU by bucket (@48,
/// `gaps`), and when that last came (@160, this CPU's own: not summed).
pub const SLOT_SIZE: u32 = gaps::SLOT_LAST as u32 + 8;
pub const SLOT_SQUARES: i16 = 32;
pub const SLOT_TIMED: i16 = 40;
/// One CPU's state: tid u32 @0, class u32 @4, since u64 @8, class under a hardirq u32 @16,
/// class under a softirq u32 @20, the current syscall is untimed (sampled split) u32 @24, the
/// current syscall's slot u32 @28 (set by every sys_enter of a tracked task, timed or not), the
/// open user fault's time so far u64 @32 (charged to `FAULT_OPEN` as it goes, moved to the
/// fault's own slot at its end: an interrupt or a preemption inside a fault splits its time),
/// the CPU halted since its last switch u32 @40 (set in the idle loop by `wake::idle`), inside
/// an inode allocation u32 @44 (`inodes`), when the idle loop left its last halt u64 @48, the
/// by-fd slot of the sampled read or write the tracked task is in, plus one (0: none) u32 @56,
/// when the split started on this CPU u64 @64 (`gaps`: a first call's gap counts from it), when the
/// split first saw the tracked task here, until the kernel's next charge of it, u64 @72 (0:
/// none; `join::first_charge`), when this CPU last switched tasks u64 @80 and the time its idle
/// task has run since the split started u64 @88 (`gaps::idle_edges`: a call's gap counts
/// the CPU's busy time only), where a stat by path will leave its inode number u64 @96 and the
/// stating task's id u32 @104 (`paths::first_stat`), the user fault's address u64 @112.
pub const STATE_SIZE: u32 = 120;
/// A switched-out task's value: class u32 @0, the syscall slot it was in u32 @4, when it
/// left u64 @8 (0: nothing to wait on), its open fault's time so far u64 @16, the by-fd slot
/// of the sampled call it is in, plus one, u32 @24 (and four bytes of padding).
pub const TASK_SIZE: u32 = 32;

const ST_TID: i16 = 0;
const ST_CLASS: i16 = 4;
const ST_SINCE: i16 = 8;
const ST_UNDER_IRQ: i16 = 16;
const ST_UNDER_SOFTIRQ: i16 = 20;
const ST_SKIP: i16 = 24;
const ST_NR: i16 = 28;
const ST_OPEN: i16 = 32;
const ST_HALTED: i16 = 40;
const ST_FD: i16 = 56;
/// When the split started on this CPU (every CPU's state is written with it before the
/// programs attach): where the first call of a kind there counts its gap from (`gaps`).
pub(crate) const ST_START: i16 = 64;
/// Where the programs build a task's value on the stack (`TASK_SIZE` bytes).
const FP_TASK: i16 = -40;
/// Stack slots past the keys' and values': the delta charged, the call's number, its count before.
pub(crate) const FP_DELTA: i16 = -48;
const FP_NR: i16 = -56;
const FP_BEFORE: i16 = -64;
/// sched_switch's: the CPU halted before this switch, and the class next takes up again.
const FP_HALTED: i16 = -72;
const FP_CLASS_IN: i16 = -68;

/// The maps every program uses, by fd.
#[derive(Debug, Clone, Copy)]
pub struct Maps {
    /// Per-CPU array of `SLOTS` slots.
    pub slots: i32,
    /// Per-CPU array of one state.
    pub state: i32,
    /// Hash: thread id -> the class it left with.
    pub tasks: i32,
    /// Per-CPU array of `SLOTS` `pages::WORK_SIZE` values: the page cache's work inside each
    /// syscall's slot (`pages`).
    pub work: i32,
    /// The read/write family's sample by (number, fd), one call in `bpf::SAMPLE` (x86-64
    /// only: the fd is read from its pt_regs).
    pub by_fd: Option<ByFd>,
    /// Hash: the inodes the tracked tasks' stats by path found so far (`paths::first_stat`).
    pub seen: i32,
}

/// The by-fd sample's two per-CPU arrays of `bpf::FD_SLOTS` u64, by fd: their slots are
/// `bpf::fd_sample_key`'s.
#[derive(Debug, Clone, Copy)]
pub struct ByFd {
    /// The sampled calls.
    pub calls: i32,
    /// The bytes they returned (a read's bytes read, a write's written; errors add nothing):
    /// what shares out the run's rchar and wchar by the fds' kinds, which the kernel keeps
    /// only per task.
    pub bytes: i32,
}

/// Whose tasks the split tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Every task of this cgroup (by its id).
    Cgroup(u64),
    /// Every thread of this process (by its tgid), and the tasks they start.
    Process(u32),
}

/// The tracked thread: whose tasks (for the first event a task shows there) and where `pid`
/// sits in `struct task_struct` (to read the next task's at a switch).
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Whose tasks are tracked (from the first event each shows on a CPU).
    pub who: Who,
    pub pid_offset: i32,
    /// Time one syscall in `period` of each number on each CPU (a power of two; 1: every
    /// call). Every call is counted either way.
    pub period: u32,
    /// The cpu-clock period of the ticks that share the user class, ns.
    pub tick_ns: u64,
    /// Where an mm's counters are (from BTF), for the exec, fork and exit programs.
    pub rss: Option<RssAt>,
}

impl Target {
    fn sampled(&self) -> bool {
        self.period > 1
    }
}

/// How the prologue treats a task it does not track yet.
#[derive(Clone, Copy)]
enum Join {
    /// Leave it (to `out`).
    No,
    /// A task of these seen for the first time on this CPU starts being tracked here.
    Of(Who),
    /// As `Of`, and a task outside them is counted in `OTHERS` (sys_enter).
    OfCountingOthers(Who),
}

/// r6 = ctx, r8 = tid, r9 = state, and with `clock` r7 = now. Untracked: to `out`, or per
/// `join`. A task joined has its clock read (r7) whether `clock` or not.
fn prologue(a: &mut Asm, m: &Maps, join: Join, clock: bool) {
    a.mov(R6, Reg(1)).note("r6 = the context");
    a.call(Helper::GetCurrentPidTgid);
    a.mov32(R8, R0).note("r8 = the thread id");
    a.jeq_imm(R8, 0, "out")
        .note("an idle CPU: nobody to charge");
    state(a, m);
    a.ldx_w(R1, R9, ST_TID);
    a.jeq(R1, R8, "tracked")
        .note("this CPU runs a tracked task");
    match join {
        Join::Of(who) | Join::OfCountingOthers(who) => {
            match who {
                Who::Cgroup(cg) => {
                    a.call(Helper::GetCurrentCgroupId);
                    a.ld_imm64(R1, cg);
                    a.jeq(R0, R1, "joins").note("the program's cgroup");
                }
                Who::Process(tgid) => {
                    a.call(Helper::GetCurrentPidTgid);
                    a.rsh_imm(R0, 32);
                    a.jeq_imm(R0, tgid as i32, "joins")
                        .note("the process's thread");
                }
            }
            if let Join::OfCountingOthers(_) = join {
                a.mov_imm(R1, OTHERS as i32)
                    .note("a syscall of a task outside it: counted");
                count(a, m, R1);
            }
            a.ja("out");
            a.label("joins");
            a.call(Helper::KtimeGetNs);
            a.mov(R7, R0);
            a.stx_w(R9, ST_TID, R8)
                .note("first sight of this task here: track it");
            a.st_w(R9, ST_CLASS, USER as i32);
            a.stx_dw(R9, ST_SINCE, R7);
            a.stx_dw(R9, join::ST_JOINED, R7);
            a.st_w(R9, ST_UNDER_IRQ, USER as i32);
            a.st_w(R9, ST_UNDER_SOFTIRQ, USER as i32);
            join::late(a, m);
            a.ja("timed");
        }
        Join::No => {
            a.ja("out");
        }
    }
    a.label("tracked");
    if clock {
        a.call(Helper::KtimeGetNs);
        a.mov(R7, R0).note("r7 = now");
    }
    a.label("timed");
}

/// r9 = this CPU's state (to `out` if the lookup fails, which the verifier asks to test).
fn state(a: &mut Asm, m: &Maps) {
    a.st_w(FP, -4, 0);
    a.mov(R2, FP).add_imm(R2, -4);
    a.ld_map(R1, m.state);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "out");
    a.mov(R9, R0).note("r9 = this CPU's state");
}

/// The thread id of the task args[`arg`] points to (r6 = the context), read into the key slot
/// at FP-8 (to `out` where it cannot be read or is 0, the idle task). r0-r5 clobbered.
fn pid_at(a: &mut Asm, arg: i16, who: &str, pid_offset: i32) {
    a.mov(R1, FP).add_imm(R1, -8);
    a.mov_imm(R2, 4);
    a.ldx_dw(R3, R6, arg * 8)
        .note(&format!("r3 = args[{arg}], {who}"));
    a.add_imm(R3, pid_offset).note(&format!("&{who}->pid"));
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, "out");
    a.ldx_w(R1, FP, -8);
    a.jeq_imm(R1, 0, "out");
}

/// r0 = the switched-out hash's value of the task whose thread id is at FP-8, or to `out`
/// (noted `why`).
fn switched_out(a: &mut Asm, m: &Maps, why: &str) {
    a.ld_map(R1, m.tasks);
    a.mov(R2, FP).add_imm(R2, -8);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "out").note(why);
}

/// r0 = the slot whose number `key` holds, or to `none` (a number out of range).
fn slot(a: &mut Asm, m: &Maps, key: Reg, none: &str) {
    a.stx_w(FP, -8, key);
    a.mov(R2, FP).add_imm(R2, -8);
    a.ld_map(R1, m.slots);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, none);
}

/// Add now - since to the current class's cpu time; since = now. A difference below zero
/// (an interrupt's program, nested inside this one after its clock read, moved `since` past
/// that read) is dropped and counted in `DROPPED`, and `since` stays. With `squares`, the
/// square of the difference is added at `SLOT_SQUARES` too (the sampled split's interval).
fn charge(a: &mut Asm, m: &Maps, squares: bool) {
    let done = a.fresh("charged");
    let dropped = a.fresh("dropped");
    a.ldx_dw(R1, R9, ST_SINCE);
    a.mov(R2, R7).sub(R2, R1).note("r2 = now - since");
    a.jslt_imm(R2, 0, &dropped)
        .note("below zero: not a time, dropped");
    a.stx_dw(FP, FP_DELTA, R2);
    a.stx_dw(R9, ST_SINCE, R7);
    a.ldx_w(R1, R9, ST_CLASS)
        .note("charge the class being left");
    let open = a.fresh("open");
    let closed = a.fresh("closed");
    a.jeq_imm(R1, FAULT_OPEN as i32, &open);
    a.jlt_imm(R1, FAULT_OPEN_WRITE as i32, &closed);
    a.jgt_imm(R1, FAULT_OPEN_COW as i32, &closed);
    a.label(&open);
    a.ldx_dw(R3, R9, ST_OPEN)
        .add(R3, R2)
        .stx_dw(R9, ST_OPEN, R3)
        .note("an open fault's time: kept to move at its end");
    a.mov_imm(R1, FAULT_OPEN as i32);
    a.label(&closed);
    slot(a, m, R1, &done);
    a.ldx_dw(R2, FP, FP_DELTA);
    a.ldx_dw(R3, R0, 8).add(R3, R2).stx_dw(R0, 8, R3);
    if squares {
        a.mul(R2, R2);
        a.ldx_dw(R3, R0, SLOT_SQUARES)
            .add(R3, R2)
            .stx_dw(R0, SLOT_SQUARES, R3);
    }
    a.ja(&done);
    a.label(&dropped);
    a.mov_imm(R1, DROPPED as i32);
    count(a, m, R1);
    a.label(&done);
}

/// Count one event in the slot `key` holds.
fn count(a: &mut Asm, m: &Maps, key: Reg) {
    let done = a.fresh("counted");
    slot(a, m, key, &done);
    a.ldx_dw(R1, R0, 0).add_imm(R1, 1).stx_dw(R0, 0, R1);
    a.label(&done);
}

fn epilogue(a: &mut Asm) {
    a.label("out");
    a.mov_imm(R0, 0);
    a.exit();
}

/// raw sys_enter: the class becomes the syscall's number, counted (these counts are the
/// run's syscall counts: no other counter is attached beside the split). Sampled (`period` >
/// 1), only one call in `period` of each number on each CPU (the first included) is timed:
/// the others are counted, read no clock, and leave the class as it is (their time stays in
/// the class they interrupt, user, until the split's reader takes the estimate out). With
/// `by_fd`, one call in `SAMPLE` of the read/write family (of each number, on each CPU, the
/// first included) is also counted by (number, fd), as `bpf::program_asm` does. A syscall of
/// a task outside the cgroup is counted in `OTHERS`.
pub fn sys_enter(m: &Maps, t: &Target) -> Asm {
    let mut a = Asm::new();
    let sampled = t.sampled();
    prologue(&mut a, m, Join::OfCountingOthers(t.who), !sampled);
    a.st_dw(FP, FP_DELTA, 0).note("no user time yet");
    if !sampled {
        charge(&mut a, m, false);
    }
    a.ldx_dw(R1, R6, 8).note("r1 = args[1], the syscall number");
    a.jlt_imm(R1, SYS_OTHER as i32, "numbered");
    a.mov_imm(R1, SYS_OTHER as i32)
        .note("past the slots (or -1): the shared slot");
    a.label("numbered");
    calls::open_create(&mut a);
    calls::mmap_file(&mut a);
    a.stx_w(FP, FP_NR, R1);
    paths::stat_path(&mut a, m);
    a.stx_w(R9, ST_NR, R1)
        .note("the call's slot, for its exit (getdents64's bytes)");
    a.st_w(R9, ST_FD, 0)
        .note("no sampled call open (by_fd_sample sets it)");
    if !sampled {
        a.stx_w(R9, ST_CLASS, R1);
    }
    if let Some(r) = t.rss {
        exit::exec_old_mm(&mut a, m, r, false);
        a.ldx_w(R1, FP, FP_NR);
        exit::munmap_mm(&mut a, m, r, false);
        a.ldx_w(R1, FP, FP_NR).note("r1 = the call's slot again");
    }
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 0)
        .note("r1 = the number's count before this call");
    a.mov(R2, R1).add_imm(R2, 1).stx_dw(R0, 0, R2);
    a.stx_dw(FP, FP_BEFORE, R1);
    if sampled {
        a.and_imm(R1, (t.period - 1) as i32);
        a.jeq_imm(R1, 0, "timed_call")
            .note("this number's turn to be timed");
        a.st_w(R9, ST_SKIP, 1)
            .note("untimed: its exit reads no clock");
        a.ja("after_timing");
        a.label("timed_call");
        a.st_w(R9, ST_SKIP, 0);
        a.call(Helper::KtimeGetNs);
        a.mov(R7, R0).note("r7 = now");
        charge(&mut a, m, false);
        a.ldx_w(R1, FP, FP_NR).stx_w(R9, ST_CLASS, R1);
        slot(&mut a, m, R1, "out");
        a.ldx_dw(R1, R0, SLOT_TIMED)
            .add_imm(R1, 1)
            .stx_dw(R0, SLOT_TIMED, R1)
            .note("one more timed call");
        gaps::count_gap(&mut a, t.period.trailing_zeros());
        a.label("after_timing");
    } else {
        gaps::count_gap(&mut a, 0);
    }
    if let Some(by_fd) = m.by_fd {
        a.ldx_dw(R1, FP, FP_BEFORE);
        by_fd_sample(&mut a, by_fd.calls);
    }
    epilogue(&mut a);
    a
}

/// Jump to `skip` unless the current task is the one this CPU's state tracks (r9 = the
/// state; r0-r5 clobbered): for a syscall's exit, whose state its entry left.
fn unless_tracked(a: &mut Asm, skip: &str) {
    a.call(Helper::GetCurrentPidTgid);
    a.mov32(R0, R0);
    a.ldx_w(R1, R9, ST_TID);
    a.jne(R0, R1, skip).note("not the tracked task's call");
}

/// At a syscall's exit, with r6 = the context and r9 = this CPU's state: a getdents64 of the
/// tracked task on this CPU adds the bytes it returned (args[1], when above 0) to
/// `DIRENT_BYTES`. Any other call passes with one load and one compare.
fn dirent_bytes(a: &mut Asm, m: &Maps) {
    a.ldx_w(R1, R9, ST_NR);
    a.jne_imm(R1, NR_GETDENTS64, "dirents_done");
    a.st_w(R9, ST_NR, SYS_OTHER as i32)
        .note("counted once, whatever exits next");
    unless_tracked(a, "dirents_done");
    a.ldx_dw(R1, R6, 8).note("r1 = args[1], the bytes returned");
    a.jslt_imm(R1, 1, "dirents_done")
        .note("the end of the directory, or an error");
    a.stx_dw(FP, FP_DELTA, R1);
    a.mov_imm(R1, DIRENT_BYTES as i32);
    slot(a, m, R1, "dirents_done");
    a.ldx_dw(R2, FP, FP_DELTA);
    a.ldx_dw(R1, R0, 0).add(R1, R2).stx_dw(R0, 0, R1);
    a.label("dirents_done");
}

/// At a syscall's exit, with r6 = the context and r9 = this CPU's state: a sampled read or
/// write of the tracked task on this CPU (its slot + 1 in the state, kept across switches in
/// the task's value) adds the bytes it returned (args[1], when above 0) to its by-fd slot in
/// `bytes`. Any other call passes with one load and one compare.
fn fd_bytes(a: &mut Asm, bytes: i32) {
    a.ldx_w(R1, R9, ST_FD);
    a.jeq_imm(R1, 0, "fd_bytes_done");
    a.st_w(R9, ST_FD, 0).note("added once, whatever exits next");
    a.stx_w(FP, FP_NR, R1);
    unless_tracked(a, "fd_bytes_done");
    a.ldx_dw(R1, R6, 8).note("r1 = args[1], the bytes returned");
    a.jslt_imm(R1, 1, "fd_bytes_done")
        .note("nothing moved, or an error");
    a.stx_dw(FP, FP_DELTA, R1);
    a.ldx_w(R1, FP, FP_NR).add_imm(R1, -1);
    a.stx_w(FP, -4, R1).note("the key: the call's by-fd slot");
    a.mov(R2, FP).add_imm(R2, -4);
    a.ld_map(R1, bytes);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "fd_bytes_done");
    a.ldx_dw(R2, FP, FP_DELTA);
    a.ldx_dw(R1, R0, 0).add(R1, R2).stx_dw(R0, 0, R1);
    a.label("fd_bytes_done");
}

/// Every call timed, at a syscall's exit (r6 = the context, r9 = this CPU's state): an
/// execve of the tracked task that failed (args[1] below 0) leaves execve's count for
/// `EXEC_FAILED`'s, and its time is charged there (the class becomes that slot).
fn exec_failed(a: &mut Asm, m: &Maps) {
    unless_failed_exec(a, "exec_done");
    a.ldx_w(R1, R9, ST_CLASS);
    a.jne_imm(R1, NR_EXECVE, "exec_done")
        .note("its time is not open on execve's slot");
    a.mov_imm(R1, NR_EXECVE);
    slot(a, m, R1, "exec_done");
    a.ldx_dw(R1, R0, 0)
        .add_imm(R1, -1)
        .stx_dw(R0, 0, R1)
        .note("one execve fewer");
    a.mov_imm(R1, EXEC_FAILED as i32);
    count(a, m, R1);
    a.st_w(R9, ST_CLASS, EXEC_FAILED as i32)
        .note("and its time goes to the failed ones");
    a.label("exec_done");
}

/// At a syscall's exit (r6 = the context, r9 = this CPU's state): on to `skip` unless the
/// call is an execve of the tracked task that failed (r1 clobbered).
fn unless_failed_exec(a: &mut Asm, skip: &str) {
    a.ldx_w(R1, R9, ST_NR);
    a.jne_imm(R1, NR_EXECVE, skip);
    a.ldx_dw(R1, R6, 8)
        .note("r1 = args[1], what execve returned");
    a.rsh_imm(R1, 63).note("its sign bit: an error");
    a.jeq_imm(R1, 0, skip);
    unless_tracked(a, skip);
}

/// The by-fd sample, with r1 = the number's count before this call and the number at
/// `FP_NR`: a sampled call is counted by its slot, which the state keeps (plus one) for its
/// exit to add the bytes it returns (`fd_bytes`).
fn by_fd_sample(a: &mut Asm, by_fd: i32) {
    a.ldx_w(R8, FP, FP_NR)
        .note("r8 = the number (the thread id is not needed past here)");
    crate::bpf::fd_sample_key(a, R8, "out");
    a.mov(R2, R1).add_imm(R2, 1);
    a.stx_w(R9, ST_FD, R2)
        .note("the sampled call's slot + 1, for its exit");
    a.stx_w(FP, -4, R1).note("the key");
    a.mov(R2, FP).add_imm(R2, -4);
    a.ld_map(R1, by_fd);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "out");
    a.ldx_dw(R1, R0, 0).add_imm(R1, 1).stx_dw(R0, 0, R1);
}

/// raw sys_exit: back to user. Sampled, an untimed call's exit only clears the mark (no
/// clock read), and a timed one adds its last stretch's square for the interval.
pub fn sys_exit(m: &Maps, t: &Target) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, Reg(1));
    state(&mut a, m);
    dirent_bytes(&mut a, m);
    paths::first_stat(&mut a, m);
    if let Some(by_fd) = m.by_fd {
        fd_bytes(&mut a, by_fd.bytes);
    }
    if let Some(r) = t.rss {
        exit::exec_failed_old_mm(&mut a, m, r);
        exit::munmap_exit(&mut a, m, r);
    }
    if !t.sampled() {
        exec_failed(&mut a, m);
    }
    if t.sampled() {
        a.ldx_w(R1, R9, ST_SKIP);
        a.jeq_imm(R1, 0, "timed_exit");
        a.st_w(R9, ST_SKIP, 0)
            .note("an untimed call ends: nothing to charge");
        a.ja("out");
        a.label("timed_exit");
    }
    a.mov(Reg(1), R6)
        .note("the context again, for the prologue");
    prologue(&mut a, m, Join::Of(t.who), true);
    charge(&mut a, m, t.sampled());
    a.st_w(R9, ST_CLASS, USER as i32);
    epilogue(&mut a);
    a
}

/// raw sched_switch (current = prev): a tracked prev leaves its class in the hash; a next
/// found there takes its class up again, and the time it was away is that class's wait.
pub fn sched_switch(m: &Maps, t: &Target) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, Reg(1));
    a.call(Helper::GetCurrentPidTgid);
    a.mov32(R8, R0).note("r8 = prev's thread id");
    state(&mut a, m);
    a.call(Helper::KtimeGetNs);
    a.mov(R7, R0);
    gaps::idle_edges(&mut a);
    a.jeq_imm(R8, 0, "next").note("prev is the idle task");
    a.ldx_w(R1, R9, ST_TID);
    a.jne(R1, R8, "next").note("prev is not tracked");
    charge(&mut a, m, false);
    a.stx_w(FP, -8, R8).note("tasks[prev] = {class, now}");
    a.ldx_dw(R1, R6, 24).note("r1 = args[3], prev's state");
    a.jset_imm(R1, TASK_DEAD, "dead")
        .note("prev's last switch: it is gone");
    a.ldx_w(R1, R9, ST_CLASS).stx_w(FP, FP_TASK, R1);
    a.ldx_w(R1, R9, ST_NR)
        .stx_w(FP, FP_TASK + 4, R1)
        .note("and the syscall it is in, for its exit");
    a.stx_dw(FP, FP_TASK + 8, R7);
    a.ldx_dw(R1, R9, ST_OPEN)
        .stx_dw(FP, FP_TASK + 16, R1)
        .note("and an open fault's time so far");
    a.ldx_w(R1, R9, ST_FD)
        .stx_w(FP, FP_TASK + 24, R1)
        .note("and the sampled call it is in");
    a.st_w(FP, FP_TASK + wake::TASK_WOKE, 0)
        .note("not woken yet");
    a.ld_map(R1, m.tasks);
    a.mov(R2, FP).add_imm(R2, -8);
    a.mov(R3, FP).add_imm(R3, FP_TASK.into());
    a.mov_imm(R4, BPF_ANY).note("BPF_ANY");
    a.call(Helper::MapUpdateElem);
    a.ja("next");
    a.label("dead");
    a.ld_map(R1, m.tasks)
        .note("forget it: its thread id will be another task's");
    a.mov(R2, FP).add_imm(R2, -8);
    a.call(Helper::MapDeleteElem);
    a.label("next");
    wake::take_halt(&mut a, FP_HALTED);
    a.st_w(R9, ST_TID, 0)
        .note("nobody tracked here until next is found");
    a.st_w(R9, ST_SKIP, 0)
        .note("no untimed syscall is open on this CPU");
    a.st_w(R9, ST_NR, SYS_OTHER as i32);
    a.st_dw(R9, ST_OPEN, 0);
    a.st_w(R9, ST_FD, 0);
    pid_at(&mut a, 2, "next", t.pid_offset);
    switched_out(&mut a, m, "next is not tracked");
    a.ldx_w(R1, FP, -8).stx_w(R9, ST_TID, R1);
    join::take_up(&mut a);
    wake::from_wake(&mut a);
    a.stx_dw(R9, ST_SINCE, R7);
    a.st_w(R9, ST_UNDER_IRQ, USER as i32);
    a.st_w(R9, ST_UNDER_SOFTIRQ, USER as i32);
    a.ldx_dw(R2, R0, 8);
    a.jeq_imm(R2, 0, "out").note("a new task: nothing waited");
    a.jeq_imm(R1, USER as i32, "out")
        .note("preempted in user mode: not a wait inside an event");
    wake::from_halt_exit(&mut a);
    a.mov(R3, R7).sub(R3, R2).note("the time away");
    a.jslt_imm(R3, 0, "wait_dropped")
        .note("below zero: not a time, dropped");
    a.stx_dw(FP, -40, R3);
    a.stx_w(FP, FP_CLASS_IN, R1);
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 16)
        .ldx_dw(R2, FP, -40)
        .add(R1, R2)
        .stx_dw(R0, 16, R1);
    a.ldx_dw(R1, R0, 24).add_imm(R1, 1).stx_dw(R0, 24, R1);
    wake::halted_in(&mut a, m, FP_HALTED, FP_CLASS_IN);
    a.ja("out");
    a.label("wait_dropped");
    a.mov_imm(R1, DROPPED as i32);
    count(&mut a, m, R1);
    epilogue(&mut a);
    a
}

/// A cpu-clock tick (a software perf event, in the local timer's interrupt): where the class
/// under the interrupt is user, count the tick as kernel or user mode by the interrupted
/// registers' privilege level (x86-64).
pub fn user_tick(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    a.ldx_w(R1, R9, ST_CLASS);
    a.jne_imm(R1, VEC_BASE as i32, "out")
        .note("not inside the local timer's interrupt");
    a.ldx_w(R1, R9, ST_UNDER_IRQ);
    a.jne_imm(R1, USER as i32, "out")
        .note("the class under it is not user");
    a.ldx_dw(R1, R6, PT_REGS_CS)
        .note("r1 = the interrupted regs->cs");
    a.and_imm(R1, 3);
    a.mov_imm(R2, USER_TICK_KERNEL as i32);
    a.jeq_imm(R1, 0, "ticked").note("ring 0: kernel mode");
    a.mov_imm(R2, USER_TICK_USER as i32);
    a.label("ticked");
    count(&mut a, m, R2);
    epilogue(&mut a);
    a
}

#[cfg(test)]
#[path = "prog_tests.rs"]
mod tests;
