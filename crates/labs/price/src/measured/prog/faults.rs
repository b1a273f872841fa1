//! User page faults: a fault begins at the exceptions tracepoint, the page cache may say it
//! served it (a file page, or a private file page copied), and it ends at the software event
//! handle_mm_fault raises as it returns. Its time until then is held open (`FAULT_OPEN` and
//! the state's open time) and goes to its kind's slot at its end.

use costlab_bpf::{Asm, FP, R0, R1, R2, R3, R6, R9};

use super::{
    charge, epilogue, prologue, slot, Join, Maps, Target, FAULT_COW, FAULT_FILE, FAULT_FILE_PAGES,
    FAULT_MINOR, FAULT_OPEN, FAULT_OPEN_COW, FAULT_OPEN_FILE, FAULT_OPEN_WRITE, FP_DELTA, FP_NR,
    PF_PRESENT, PF_WRITE, ST_CLASS, ST_OPEN, USER,
};

/// Read faults' fault-arounds that mapped a range of a file no earlier fault of the run
/// mapped (the count word): each window of 16 pages of a file (64 KiB, aligned in the file)
/// goes into the `seen` set at the first fault on a page of it, the faulting page's window
/// keyed by the file's `address_space` (its pointer) and the window's number. A fault that
/// finds its window there found the file's page-cache entries and page descriptors where an
/// earlier fault of the run left them; a first one finds them as the program's last run, or
/// another program's, left them (out of the CPU's caches, where a large program ran since:
/// the fault-file-cold term).
pub const FAULT_FILE_FIRST: u32 = super::paths::SLOTS_END;
/// The slots' end: `prog::SLOTS`.
pub const SLOTS_END: u32 = FAULT_FILE_FIRST + 1;
/// The CPU state's word (u64): the address of the open user fault (`fault_begin`).
pub const ST_FAULT_ADDR: i16 = 112;

/// raw page_fault_user (address, regs, error_code): a user fault begins, its class by its
/// error code (`FAULT_OPEN`, `FAULT_OPEN_WRITE` or, a write to a present page,
/// `FAULT_OPEN_COW`). A tracked task this CPU's state does not name joins here, as at a
/// syscall: a program that only touches memory makes no syscall, and once it ran untracked
/// on a CPU it stayed so to its exit (9 of 121 prices of 30000 page touches lost 4-52% of the
/// usage, up to 17000 faults unseen until exit_group joined: each time it had come back on
/// the CPU without a traced switch, `join::late`; with this join 0 of 40).
pub fn fault_begin(m: &Maps, t: &Target) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::Of(t.who), true);
    a.st_dw(FP, FP_DELTA, 0).note("no user time yet");
    charge(&mut a, m, false);
    a.ldx_dw(R1, R6, 0)
        .note("r1 = args[0], the faulting address");
    a.stx_dw(R9, ST_FAULT_ADDR, R1);
    a.ldx_dw(R1, R6, 16).note("r1 = args[2], the error code");
    a.mov_imm(R2, FAULT_OPEN as i32);
    a.jset_imm(R1, PF_WRITE, "write");
    a.ja("begun");
    a.label("write");
    a.mov_imm(R2, FAULT_OPEN_WRITE as i32);
    a.jset_imm(R1, PF_PRESENT, "cow");
    a.ja("begun");
    a.label("cow");
    a.mov_imm(R2, FAULT_OPEN_COW as i32)
        .note("a write to a present page: copied on write");
    a.label("begun");
    a.stx_w(R9, ST_CLASS, R2);
    a.st_dw(R9, ST_OPEN, 0)
        .note("a fault left open before stays unfinished");
    epilogue(&mut a);
    a
}

/// raw mm_filemap_fault: the page cache serves the tracked task's open user fault, which
/// becomes a file fault (a read) or a copy on write (a write: a private file page copied).
/// Anything else (a fault inside a syscall, readahead) is left.
pub fn fault_from_page_cache(m: &Maps) -> Asm {
    page_cache_fault(m, false)
}

/// raw mm_filemap_map_pages(mapping, index, last_index): as `fault_from_page_cache`, and a
/// read fault's fault-around adds the pages of its range to `FAULT_FILE_PAGES` (a file
/// fault's cost grows with the pages it maps: 1 to 16) and, where its window is new to the
/// run, one to `FAULT_FILE_FIRST` (`first_window`).
pub fn fault_around(m: &Maps) -> Asm {
    page_cache_fault(m, true)
}

fn page_cache_fault(m: &Maps, count_pages: bool) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.ldx_w(R1, R9, ST_CLASS);
    a.jeq_imm(R1, FAULT_OPEN as i32, "read");
    a.jeq_imm(R1, FAULT_OPEN_WRITE as i32, "write");
    a.ja("out");
    a.label("read");
    a.st_w(R9, ST_CLASS, FAULT_OPEN_FILE as i32);
    if count_pages {
        a.ldx_dw(R2, R6, 16).note("r2 = last_index");
        a.ldx_dw(R1, R6, 8).note("r1 = index");
        a.sub(R2, R1)
            .add_imm(R2, 1)
            .note("r2 = the pages of the range");
        a.jgt_imm(R2, 512, "out").note("not a fault-around's range");
        a.stx_dw(FP, FP_DELTA, R2);
        a.mov_imm(R1, FAULT_FILE_PAGES as i32);
        slot(&mut a, m, R1, "out");
        a.ldx_dw(R2, FP, FP_DELTA);
        a.ldx_dw(R1, R0, 0).add(R1, R2).stx_dw(R0, 0, R1);
        first_window(&mut a, m);
    }
    a.ja("out");
    a.label("write");
    a.st_w(R9, ST_CLASS, FAULT_OPEN_COW as i32);
    epilogue(&mut a);
    a
}

/// With r6 = the fault-around's context and r9 = this CPU's state: the faulting page's index
/// (the range's first plus the address's page within its 64 KiB, as the kernel aligns a
/// fault-around that the mapping does not clip; the range's first where that falls past its
/// end), its window of 16 pages, and the key (the `address_space` pointer, whose top 16 bits
/// are all ones in a kernel address, shifted out, and the window's low 16 bits: a stat's keys,
/// inode numbers, stay below 2^63 and these above). A key the `seen` set lacks goes in, and
/// counts in `FAULT_FILE_FIRST`; a full set counts each window it cannot hold as first.
fn first_window(a: &mut Asm, m: &Maps) {
    a.ldx_dw(R1, R9, ST_FAULT_ADDR);
    a.rsh_imm(R1, 12).and_imm(R1, 15);
    a.ldx_dw(R2, R6, 8).note("r2 = index");
    a.add(R1, R2);
    a.ldx_dw(R3, R6, 16).note("r3 = last_index");
    a.jlt(R3, R1, "window_clipped");
    a.ja("window");
    a.label("window_clipped");
    a.mov(R1, R2);
    a.label("window");
    a.rsh_imm(R1, 4).and_imm(R1, 0xffff);
    a.ldx_dw(R2, R6, 0).note("r2 = the mapping");
    a.lsh_imm(R2, 16).add(R1, R2);
    a.stx_dw(FP, super::paths::FP_KEY, R1);
    super::paths::first_in_set(a, m, FAULT_FILE_FIRST, "out");
}

/// A page fault's end (the software event page-faults-min or -maj, which handle_mm_fault
/// raises as it returns a completed fault): the open user fault's time (its parts before interruptions too) goes to `ends_in`
/// (FAULT_MAJOR; for FAULT_MINOR, the slot of its kind: FAULT_MINOR for an anonymous page,
/// FAULT_FILE, FAULT_COW), counted; a fault taken inside a syscall stays the syscall's.
pub fn fault_end(m: &Maps, ends_in: u32) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, true);
    a.ldx_w(R1, R9, ST_CLASS);
    a.mov_imm(R2, ends_in as i32);
    a.jeq_imm(R1, FAULT_OPEN as i32, "ends");
    a.jeq_imm(R1, FAULT_OPEN_WRITE as i32, "ends");
    if ends_in == FAULT_MINOR {
        a.mov_imm(R2, FAULT_FILE as i32);
        a.jeq_imm(R1, FAULT_OPEN_FILE as i32, "ends");
        a.mov_imm(R2, FAULT_COW as i32);
        a.jeq_imm(R1, FAULT_OPEN_COW as i32, "ends");
    } else {
        a.jeq_imm(R1, FAULT_OPEN_FILE as i32, "ends");
        a.jeq_imm(R1, FAULT_OPEN_COW as i32, "ends");
    }
    a.ja("out").note("a fault inside a syscall: the syscall's");
    a.label("ends");
    a.stx_w(R9, ST_CLASS, R2);
    a.stx_w(FP, FP_NR, R2).note("kept for the count");
    charge(&mut a, m, false);
    a.st_w(R9, ST_CLASS, USER as i32).note("back to user");
    a.ldx_w(R1, FP, FP_NR);
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 0).add_imm(R1, 1).stx_dw(R0, 0, R1);
    if ends_in == FAULT_MINOR {
        super::gaps::count_gap(&mut a, 0);
    }
    a.ldx_dw(R1, R9, ST_OPEN);
    a.jeq_imm(R1, 0, "out")
        .note("no part of it charged before an interruption");
    a.stx_dw(FP, FP_DELTA, R1);
    a.st_dw(R9, ST_OPEN, 0);
    a.ldx_w(R1, FP, FP_NR);
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 8)
        .ldx_dw(R2, FP, FP_DELTA)
        .add(R1, R2)
        .stx_dw(R0, 8, R1)
        .note("its parts before interruptions, to its own slot");
    a.mov_imm(R1, FAULT_OPEN as i32);
    slot(&mut a, m, R1, "out");
    a.ldx_dw(R1, R0, 8)
        .ldx_dw(R2, FP, FP_DELTA)
        .sub(R1, R2)
        .stx_dw(R0, 8, R1)
        .note("out of the open ones (this CPU's word may go below zero: only the sum counts)");
    epilogue(&mut a);
    a
}
