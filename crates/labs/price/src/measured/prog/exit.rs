//! A task's exit. A thread killed by its process's exit_group (a Go or JVM worker running user
//! code, a thread asleep in a futex) tears itself down inside the kernel, and the last thread
//! to leave the address space unmaps it all (exit_mm: for a 256 MiB Go heap, tens of ms).
//! None of that is inside a syscall of its own: without this, it stayed in the class the
//! thread was killed in, user time's (found only by the user-time ticks) or a futex's.

use costlab_bpf::{Asm, Helper, FP, R0, R1, R2, R3, R6, R9};

use super::{
    charge, epilogue, prologue, slot, unless_failed_exec, unless_tracked, Join, Maps, EXEC_PAGES,
    EXEC_VMAS, EXIT_ANON_PAGES, EXIT_FILE_PAGES, EXIT_VMAS, FORK_PAGES, FORK_VMAS, NR_EXECVE,
    ST_CLASS, ST_NR, ST_SKIP, SYS_OTHER, USER,
};

/// Where the exiting task's resident pages are, from the kernel's BTF: `task_struct.mm`,
/// `mm_struct.rss_stat` (an array of `struct percpu_counter`, one per MM_* counter, `stride`
/// bytes each) and `percpu_counter.count`.
#[derive(Debug, Clone, Copy)]
pub struct RssAt {
    pub mm: i32,
    pub rss_stat: i32,
    pub count: i32,
    pub stride: i32,
    /// `mm_struct.map_count` (an int): the mappings (VMAs), where BTF has it.
    pub map_count: Option<i32>,
    /// `mm_struct.mm_users` (an atomic_t): the tasks using the address space, where BTF has
    /// it. An exec tears down the old one only where the caller was its one user.
    pub users: Option<i32>,
}

impl RssAt {
    /// Where an mm's counters are, from the kernel's BTF; None where a member is not found
    /// (an exit's pages are then reckoned from the faults).
    pub fn of(btf: &crate::measured::btf::Btf) -> Option<RssAt> {
        Some(RssAt {
            mm: btf.member_offset("task_struct", "mm")? as i32,
            rss_stat: btf.member_offset("mm_struct", "rss_stat")? as i32,
            count: btf.member_offset("percpu_counter", "count")? as i32,
            stride: btf.struct_size("percpu_counter")? as i32,
            map_count: btf
                .member_offset("mm_struct", "map_count")
                .map(|o| o as i32),
            users: btf.member_offset("mm_struct", "mm_users").map(|o| o as i32),
        })
    }
}

/// The kernel's MM_FILEPAGES and MM_ANONPAGES (include/linux/mm_types_task.h).
const MM_FILEPAGES: i32 = 0;
const MM_ANONPAGES: i32 = 1;
/// Stack slots: the mm pointer, a counter read, and the parent's mm at a fork.
const FP_MM: i16 = -88;
const FP_PAGES: i16 = -96;
const FP_PARENT_MM: i16 = -104;

/// x86-64's exit and exit_group.
const NR_EXIT: i32 = 60;
pub const NR_EXIT_GROUP: i32 = 231;

/// raw sched_process_exit (task, group_dead), in the exiting task before it leaves its
/// address space (kernel 6.16 on; before, after it, and this finds less): a tracked task not
/// already in exit or exit_group has its time so far charged to its class, and its teardown
/// from here on goes to exit_group's slot, the process's exit, where its price is (the exit
/// term, the unmapped pages). With `rss`, the last thread of a process (group_dead) adds the
/// pages its address space still maps, file and anonymous (`EXIT_FILE_PAGES`,
/// `EXIT_ANON_PAGES`: the counters' folded part, off by at most 32 pages a CPU), which its
/// exit unmaps, and its mappings (`EXIT_VMAS`), which it tears down.
pub fn task_exit(m: &Maps, rss: Option<RssAt>) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    a.ldx_w(R1, R9, ST_CLASS);
    a.jeq_imm(R1, NR_EXIT, "pages")
        .note("its own exit: already there");
    a.jeq_imm(R1, NR_EXIT_GROUP, "pages");
    a.jgt_imm(R1, USER as i32, "pages")
        .note("not a syscall's class nor user time's");
    charge(&mut a, m, false);
    a.st_w(R9, ST_CLASS, NR_EXIT_GROUP);
    a.st_w(R9, ST_SKIP, 0)
        .note("an untimed call it was in never ends");
    a.label("pages");
    if let Some(r) = rss {
        a.ldx_dw(R1, R6, 8).note("r1 = args[1], group_dead");
        a.jeq_imm(R1, 0, "out")
            .note("not the process's last thread");
        a.mov(R1, FP).add_imm(R1, FP_MM as i32);
        a.mov_imm(R2, 8);
        a.ldx_dw(R3, R6, 0).note("r3 = args[0], the task");
        a.add_imm(R3, r.mm).note("&task->mm");
        a.call(Helper::ProbeReadKernel);
        a.jne_imm(R0, 0, "out");
        a.ldx_dw(R1, FP, FP_MM);
        a.jeq_imm(R1, 0, "out")
            .note("no address space (a kernel thread)");
        mm_counts(
            &mut a,
            m,
            r,
            [EXIT_FILE_PAGES, EXIT_ANON_PAGES, EXIT_VMAS],
            "out",
            false,
        );
    }
    epilogue(&mut a);
    a
}

/// In sched_process_fork (r6 = the context: args[0] the parent, args[1] the child), after a
/// tracked parent's child is registered: where the child has an address space of its own (a
/// fork, not a thread nor a vfork sharing the parent's), add its resident pages, file and
/// anonymous, to `FORK_PAGES`, and its mappings to `FORK_VMAS`. Just made, its counters hold
/// exactly the page-table entries the fork copied (the folded part of each: off by at most 32
/// pages a CPU), the work that makes a fork of a large process slow.
pub fn fork_pages(a: &mut Asm, m: &Maps, r: RssAt) {
    for (arg, into) in [(0, FP_PARENT_MM), (8, FP_MM)] {
        a.mov(R1, FP).add_imm(R1, into as i32);
        a.mov_imm(R2, 8);
        a.ldx_dw(R3, R6, arg)
            .note("r3 = the parent, then the child");
        a.add_imm(R3, r.mm).note("&task->mm");
        a.call(Helper::ProbeReadKernel);
        a.jne_imm(R0, 0, "out");
    }
    a.ldx_dw(R1, FP, FP_MM);
    a.jeq_imm(R1, 0, "out").note("no address space");
    a.ldx_dw(R2, FP, FP_PARENT_MM);
    a.jeq(R1, R2, "out")
        .note("the parent's own (a thread, a vfork): nothing copied");
    mm_counts(a, m, r, [FORK_PAGES, FORK_PAGES, FORK_VMAS], "out", false);
}

/// In sys_enter, with r1 = the call's slot (clobbered, as r0-r5): an execve of a task that
/// is its address space's one user (a forked child, not a vfork's child borrowing its
/// parent's, not a thread) adds that address space's pages and mappings to `EXEC_PAGES` and
/// `EXEC_VMAS`: the exec tears it down, inside the call. With `undo`, in sys_exit of an
/// execve that failed, the same reading is taken back: a failed exec (a shell's PATH search,
/// ENOENT before the point of no return) tore nothing down and still has the address space
/// it counted. Without `users` in BTF nothing is counted.
pub fn exec_old_mm(a: &mut Asm, m: &Maps, r: RssAt, undo: bool) {
    let Some(users) = r.users else {
        return;
    };
    let done = "exec_mm_done";
    a.jne_imm(R1, NR_EXECVE, done);
    current_mm(a, r, done);
    read_mm(a, users, 4, done);
    a.ldx_dw(R1, FP, FP_PAGES);
    a.jne_imm(R1, 1, done)
        .note("shared (a vfork's parent, threads): the exec leaves it be");
    mm_counts(a, m, r, [EXEC_PAGES, EXEC_PAGES, EXEC_VMAS], done, undo);
    a.label(done);
}

/// x86-64's munmap.
pub const NR_MUNMAP: i32 = 11;
/// The pages, file and anonymous, and the mappings tracked tasks' munmap calls took out of
/// their address spaces: each call adds its process's counts as it enters and takes them off
/// as it leaves (`munmap_mm`), so the slots hold the sums of what the calls removed.
pub const MUNMAP_FILE_PAGES: u32 = super::LATE_JOINS + 1;
pub const MUNMAP_ANON_PAGES: u32 = MUNMAP_FILE_PAGES + 1;
pub const MUNMAP_VMAS: u32 = MUNMAP_ANON_PAGES + 1;

/// With r1 = the call's slot (clobbered, as r0-r5): a munmap of a tracked task adds its
/// address space's file and anonymous resident pages and mappings to the `MUNMAP_*` slots in
/// sys_enter and, with `take`, takes them off in sys_exit: the difference is what the call
/// unmapped (a page freed or let go, a mapping torn down: an exit's work, one range at a
/// time). The counters are their folded part (off by at most 32 pages a CPU), and another
/// thread's faults during the call are taken off with it: a large unmap reads right, a
/// small one may read a little under.
pub fn munmap_mm(a: &mut Asm, m: &Maps, r: RssAt, take: bool) {
    let done = "munmap_mm_done";
    a.jne_imm(R1, NR_MUNMAP, done);
    current_mm(a, r, done);
    mm_counts(
        a,
        m,
        r,
        [MUNMAP_FILE_PAGES, MUNMAP_ANON_PAGES, MUNMAP_VMAS],
        done,
        take,
    );
    a.label(done);
}

/// At a syscall's exit (r6 = the context, r9 = this CPU's state): a munmap of the tracked
/// task on this CPU takes its address space's counts off again (`munmap_mm`), once (r0-r5
/// clobbered).
pub fn munmap_exit(a: &mut Asm, m: &Maps, r: RssAt) {
    let done = "munmap_exit_done";
    a.ldx_w(R1, R9, ST_NR);
    a.jne_imm(R1, NR_MUNMAP, done);
    a.st_w(R9, ST_NR, SYS_OTHER as i32)
        .note("taken off once, whatever exits next");
    unless_tracked(a, done);
    a.mov_imm(R1, NR_MUNMAP);
    munmap_mm(a, m, r, true);
    a.label(done);
}

/// In either mode, at a syscall's exit (r6 = the context, r9 = this CPU's state): an execve
/// of the tracked task that failed takes back the old address space sys_enter counted for it
/// (r0-r5 clobbered).
pub fn exec_failed_old_mm(a: &mut Asm, m: &Maps, r: RssAt) {
    unless_failed_exec(a, "exec_undo_done");
    a.mov_imm(R1, NR_EXECVE);
    exec_old_mm(a, m, r, true);
    a.label("exec_undo_done");
}

/// FP_MM = the current task's mm_struct; on to `done` where it cannot be read or the task has
/// none (r0-r3 clobbered).
fn current_mm(a: &mut Asm, r: RssAt, done: &str) {
    a.call(Helper::GetCurrentTask);
    a.mov(R3, R0).add_imm(R3, r.mm).note("&current->mm");
    a.mov(R1, FP).add_imm(R1, FP_MM as i32);
    a.mov_imm(R2, 8);
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, done);
    a.ldx_dw(R1, FP, FP_MM);
    a.jeq_imm(R1, 0, done).note("no address space");
}

/// With FP_MM holding an mm_struct's address: add its file and anonymous resident pages and,
/// where BTF has it, its mappings (`map_count`) to the slots `into` names, in that order (the
/// pages may share one), or with `take` take them off. A read that fails jumps to `fail`.
fn mm_counts(a: &mut Asm, m: &Maps, r: RssAt, into: [u32; 3], fail: &str, take: bool) {
    let fields = [
        (r.rss_stat + MM_FILEPAGES * r.stride + r.count, 8, into[0]),
        (r.rss_stat + MM_ANONPAGES * r.stride + r.count, 8, into[1]),
    ];
    let vmas = r.map_count.map(|at| (at, 4, into[2]));
    for (at, width, into) in fields.into_iter().chain(vmas) {
        read_mm(a, at, width, fail);
        a.mov_imm(R1, into as i32);
        slot(a, m, R1, fail);
        a.ldx_dw(R2, FP, FP_PAGES);
        let skip = a.fresh("none");
        a.jslt_imm(R2, 1, &skip)
            .note("none, or an approximate counter a little below zero");
        a.ldx_dw(R1, R0, 0);
        if take {
            a.sub(R1, R2);
        } else {
            a.add(R1, R2);
        }
        a.stx_dw(R0, 0, R1);
        a.label(&skip);
    }
}

/// With FP_MM holding an mm_struct's address: its field at offset `at`, `width` bytes (8, or
/// 4 for an int, which fills the low half), into FP_PAGES; to `fail` if it cannot be read.
fn read_mm(a: &mut Asm, at: i32, width: i32, fail: &str) {
    a.st_dw(FP, FP_PAGES, 0);
    a.mov(R1, FP).add_imm(R1, FP_PAGES as i32);
    a.mov_imm(R2, width);
    a.ldx_dw(R3, FP, FP_MM);
    a.add_imm(R3, at)
        .note("&mm->rss_stat[counter].count, &mm->map_count or &mm->mm_users");
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, fail);
}
