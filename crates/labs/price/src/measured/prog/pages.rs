//! The page cache as a tracked task uses it, counted from three tracepoints read through
//! perf (their records hold what a raw tracepoint's arguments do not: a folio's order, a
//! bio's size and direction): pages taken in (`filemap:mm_filemap_add_to_page_cache`), pages
//! taken out (`filemap:mm_filemap_delete_from_page_cache`) and bytes sent to a disk to be
//! written (`block:block_bio_queue`, whose 'W' marks a write). Each runs in the task that
//! caused it: a read's readahead, an unlink's truncation, an fsync's writeback. The records'
//! layout comes from tracefs's format files at attach time. Counts only: no clock is read.

use costlab_bpf::{Asm, Reg, FP, R0, R1, R2, R3, R6, R7, R9};

use costlab_bpf::Helper;

use super::{
    epilogue, prologue, slot, Join, Maps, EXEC_FAILED, FAULT_COW, FAULT_FILE, FAULT_FILE_PAGES,
    FAULT_MINOR, FAULT_OPEN, FAULT_OPEN_COW, FAULT_OPEN_FILE, FAULT_OPEN_WRITE, FP_DELTA,
    IPI_FAULT, IPI_SENT, OPEN_CREATE, PAGES_DROPPED, PAGES_OTHER, PAGES_READ, PAGES_WRITE,
    ST_CLASS, ST_NR, ST_SKIP, SYS_OTHER, USER, WRITEBACK_BYTES,
};

/// A work map's value: pages taken in (not by a write) @0, folios taken out @8, bytes sent to
/// be written @16, interrupts sent to another CPU @24, inside the syscall of the value's slot;
/// switches back in from a wait in it on a CPU that had halted @32 (`wake`); buffers touched
/// inside ext4's inode allocations @40 and those allocations @48 (`inodes`); pages read from
/// small files @56 and page-cache lookups @64 (`small_read`); the components of the paths a
/// stat walked @72 (`paths`); page faults on user memory the kernel took inside the call @80
/// (`kernel_fault`).
pub const WORK_SIZE: u32 = 88;
const WORK_IN: i16 = 0;
const WORK_DROPPED: i16 = 8;
const WORK_WRITTEN: i16 = 16;
const WORK_IPI: i16 = 24;
pub(super) const WORK_HALT: i16 = 32;
pub(super) const WORK_TOUCHES: i16 = 40;
pub(super) const WORK_WINDOWS: i16 = 48;
const WORK_SMALL: i16 = 56;
const WORK_LOOKUPS: i16 = 64;
/// The components of the paths a stat family call walked (`paths`).
pub(super) const WORK_COMPONENTS: i16 = 72;
const WORK_KERNEL_FAULTS: i16 = 80;
/// Pages a tracked task read from small files (`small_read`).
pub const PAGES_SMALL: u32 = FAULT_FILE_PAGES + 1;
/// Stack slot of the syscall's slot, for the work map's key.
const FP_CALL: i16 = -40;
/// Stack slot of the count slot `ipi_sent` adds to (kept across the work map's lookup).
const FP_KIND: i16 = -80;

/// r1 = the slot of the syscall the tracked task is in (its class, every call timed or a
/// timed call; the state's number where an untimed call is open), also kept at `FP_CALL`;
/// outside a syscall (a fault's class, an interrupt's, user time), to `none`.
pub(super) fn in_call(a: &mut Asm, none: &str) {
    let have = a.fresh("in_call");
    a.ldx_w(R1, R9, ST_CLASS);
    a.jle_imm(R1, SYS_OTHER as i32, &have)
        .note("the class is a syscall's slot");
    a.jeq_imm(R1, OPEN_CREATE as i32, &have);
    a.jeq_imm(R1, EXEC_FAILED as i32, &have);
    a.jeq_imm(R1, super::NEWFSTATAT_FD as i32, &have);
    a.jeq_imm(R1, super::MMAP_FILE as i32, &have);
    a.jne_imm(R1, USER as i32, none)
        .note("a fault's class (or an interrupt's)");
    a.ldx_w(R2, R9, ST_SKIP);
    a.jeq_imm(R2, 0, none).note("no untimed call is open");
    a.ldx_w(R1, R9, ST_NR).note("the untimed call's number");
    a.label(&have);
    a.stx_w(FP, FP_CALL, R1);
}

/// Add the value at `FP_DELTA` to word `at` of the work map's value for the syscall slot at
/// `FP_CALL` (r0-r5 clobbered).
fn add_work(a: &mut Asm, m: &Maps, at: i16) {
    let done = a.fresh("worked");
    a.mov(R2, FP).add_imm(R2, FP_CALL as i32);
    a.ld_map(R1, m.work);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, &done);
    a.ldx_dw(R2, FP, FP_DELTA);
    a.ldx_dw(R1, R0, at).add(R1, R2).stx_dw(R0, at, R1);
    a.label(&done);
}

/// x86-64's calls whose new page-cache pages are the written bytes' own (priced with them):
/// write, pwrite64, writev, pwritev, pwritev2 and copy_file_range.
pub const WRITE_NRS: [i32; 6] = [1, 18, 20, 296, 328, 326];

/// What a page-cache tracepoint's record holds where.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// The folio's order (u8): its pages are 1 << order.
    pub order: i16,
}

/// What block_bio_queue's record holds where.
#[derive(Debug, Clone, Copy)]
pub struct BioFields {
    /// The bio's sectors (u32) and the first letter of its rwbs string.
    pub sectors: i16,
    pub rwbs: i16,
}

/// Add r2 (kept at `FP_DELTA`) to the count word of the slot `key` holds.
fn add_to(a: &mut Asm, m: &Maps, key: Reg) {
    slot(a, m, key, "out");
    a.ldx_dw(R2, FP, FP_DELTA);
    a.ldx_dw(R1, R0, 0).add(R1, R2).stx_dw(R0, 0, R1);
}

/// r2 = the folio's pages, kept at `FP_DELTA`.
fn folio_pages(a: &mut Asm, f: Fields) {
    a.ldx_b(R1, R6, f.order).note("r1 = the folio's order");
    a.mov_imm(R2, 1).lsh(R2, R1).note("r2 = its pages");
    a.stx_dw(FP, FP_DELTA, R2);
}

/// mm_filemap_add_to_page_cache: the folio's pages go to `PAGES_WRITE` inside a write,
/// `PAGES_READ` inside any other syscall (and to that syscall's work), `PAGES_OTHER` outside
/// one (a fault).
pub fn added(m: &Maps, f: Fields) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    folio_pages(&mut a, f);
    in_call(&mut a, "outside");
    a.mov_imm(R3, PAGES_WRITE as i32);
    for nr in WRITE_NRS {
        a.jeq_imm(R1, nr, "add");
    }
    add_work(&mut a, m, WORK_IN);
    a.mov_imm(R3, PAGES_READ as i32);
    a.ja("add");
    a.label("outside");
    a.mov_imm(R3, PAGES_OTHER as i32);
    a.label("add");
    add_to(&mut a, m, R3);
    epilogue(&mut a);
    a
}

/// The value at `FP_DELTA` added to word `at` of the syscall's work (inside one) and to the
/// run's `slot`; the program's end.
pub(super) fn counted(a: &mut Asm, m: &Maps, at: i16, slot: u32) {
    in_call(a, "count");
    add_work(a, m, at);
    a.label("count");
    a.mov_imm(R3, slot as i32);
    add_to(a, m, R3);
    epilogue(a);
}

/// mm_filemap_delete_from_page_cache: one folio more in `PAGES_DROPPED` (what taking it out
/// costs goes by folios: a large folio of readahead goes out at about the cost of a page).
pub fn dropped(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.mov_imm(R2, 1);
    a.stx_dw(FP, FP_DELTA, R2);
    counted(&mut a, m, WORK_DROPPED, PAGES_DROPPED);
    a
}

/// block_bio_queue: a write's bytes (its sectors × 512) go to `WRITEBACK_BYTES`.
pub fn bio_queued(m: &Maps, f: BioFields) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.ldx_b(R1, R6, f.rwbs).note("r1 = rwbs[0]");
    a.jne_imm(R1, b'W' as i32, "out").note("not a write");
    a.ldx_w(R2, R6, f.sectors).note("r2 = the bio's sectors");
    a.lsh_imm(R2, 9).note("its bytes");
    a.stx_dw(FP, FP_DELTA, R2);
    counted(&mut a, m, WORK_WRITTEN, WRITEBACK_BYTES);
    a
}

/// raw ipi_send_cpu (cpu, callsite, callback), in the sender: one interrupt more sent to
/// one other CPU. Inside a syscall (a wake-up of a task asleep on an idle CPU, a reschedule,
/// a function to run there) in `IPI_SENT` and in the syscall's work; inside a user fault (a
/// copy on write's TLB shootdown, mostly) in `IPI_FAULT` and in the work of the slot its
/// fault will most likely end in (a fault of a page-cache page `FAULT_FILE`, a write to a
/// present page `FAULT_COW`, else `FAULT_MINOR`). One sent from an interrupt is left.
pub fn ipi_sent(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    in_call(&mut a, "fault");
    a.mov_imm(R3, IPI_SENT as i32);
    a.ja("count");
    a.label("fault");
    a.ldx_w(R1, R9, ST_CLASS);
    a.mov_imm(R2, FAULT_MINOR as i32);
    a.jeq_imm(R1, FAULT_OPEN as i32, "in_fault");
    a.jeq_imm(R1, FAULT_OPEN_WRITE as i32, "in_fault");
    a.mov_imm(R2, FAULT_FILE as i32);
    a.jeq_imm(R1, FAULT_OPEN_FILE as i32, "in_fault");
    a.mov_imm(R2, FAULT_COW as i32);
    a.jeq_imm(R1, FAULT_OPEN_COW as i32, "in_fault");
    a.ja("out").note("an interrupt's, or user time's");
    a.label("in_fault");
    a.stx_w(FP, FP_CALL, R2)
        .note("the work map's key: the fault's slot");
    a.mov_imm(R3, IPI_FAULT as i32);
    a.label("count");
    a.stx_w(FP, FP_KIND, R3);
    a.mov_imm(R2, 1);
    a.stx_dw(FP, FP_DELTA, R2);
    add_work(&mut a, m, WORK_IPI);
    a.ldx_w(R3, FP, FP_KIND);
    add_to(&mut a, m, R3);
    epilogue(&mut a);
    a
}

/// Where `struct address_space` holds its inode and `struct inode` its size (BTF).
#[derive(Debug, Clone, Copy)]
pub struct SmallFields {
    pub host: i32,
    pub i_size: i32,
}

/// Stack slot of a pointer or size read from the kernel.
const FP_READ: i16 = -88;

/// r1 = the u64 at r3 + `off` in kernel memory, read through `FP_READ`; on to `fail` when
/// it cannot be read (r0-r5 clobbered).
fn read_kernel(a: &mut Asm, off: i32, fail: &str) {
    a.add_imm(R3, off);
    a.mov(R1, FP).add_imm(R1, FP_READ as i32);
    a.mov_imm(R2, 8);
    a.call(Helper::ProbeReadKernel);
    a.jne_imm(R0, 0, fail);
    a.ldx_dw(R1, FP, FP_READ);
}

/// raw mm_filemap_get_pages (mapping, index, last_index), at the end of a read's page-cache
/// lookup: where the file is at most `small` bytes, the pages this read takes from it (to
/// its last page or the file's, whichever is first) go to `PAGES_SMALL` and to the work of
/// the syscall it is in (a read, a copy_file_range, a sendfile; an exec's own reads of a
/// small program). A read at or past the end does not get here; a small file's read is one
/// lookup. Every lookup, of any file, is one more in the syscall's work: the program's own
/// cost is paid on each, and taken out (`verify::overhead`'s lookup loop).
pub fn small_read(m: &Maps, f: SmallFields, small: u64) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.mov_imm(R2, 1);
    a.stx_dw(FP, FP_DELTA, R2);
    in_call(&mut a, "sized");
    add_work(&mut a, m, WORK_LOOKUPS);
    a.label("sized");
    a.ldx_dw(R3, R6, 0).note("r3 = the mapping");
    read_kernel(&mut a, f.host, "out");
    a.mov(R3, R1).note("r3 = its inode");
    read_kernel(&mut a, f.i_size, "out");
    a.jeq_imm(R1, 0, "out").note("an empty file");
    a.jgt_imm(R1, small as i32, "out").note("not a small file");
    a.add_imm(R1, -1)
        .rsh_imm(R1, 12)
        .note("r1 = the file's last page");
    a.ldx_dw(R2, R6, 16).note("r2 = the read's last page");
    a.jlt(R2, R1, "last").note("the read ends first");
    a.mov(R2, R1);
    a.label("last");
    a.ldx_dw(R7, R6, 8).note("r7 = the read's first page");
    a.jlt(R2, R7, "out");
    a.sub(R2, R7).add_imm(R2, 1).note("r2 = the pages it takes");
    a.stx_dw(FP, FP_DELTA, R2);
    counted(&mut a, m, WORK_SMALL, PAGES_SMALL);
    a
}

/// Bits of a user address on x86-64 (4-level paging: below 1 << 47).
const USER_BITS: i32 = 47;

/// raw page_fault_kernel (address, regs, error_code): a page fault the kernel took on user
/// memory inside a tracked task's syscall (a read into a buffer the program has not touched
/// yet, a write from a mapped page not yet mapped) is one more in that call's work. Its time
/// stays on the call's line; the count prices it. A fault on a kernel address, or outside a
/// call, is not counted.
pub fn kernel_fault(m: &Maps) -> Asm {
    let mut a = Asm::new();
    prologue(&mut a, m, Join::No, false);
    a.ldx_dw(R1, R6, 0)
        .note("r1 = args[0], the faulting address");
    a.rsh_imm(R1, USER_BITS);
    a.jne_imm(R1, 0, "out").note("a kernel address");
    a.mov_imm(R2, 1);
    a.stx_dw(FP, FP_DELTA, R2);
    in_call(&mut a, "out");
    add_work(&mut a, m, WORK_KERNEL_FAULTS);
    epilogue(&mut a);
    a
}
