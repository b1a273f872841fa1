//! The unit costs `costlab price` multiplies counts by: what one page fault, context switch,
//! futex call, thread or process start, pipe or file read, open or stat costs on this machine,
//! each a set of samples in ns per event.
//!
//! They live here, below the labs, because two users need them: the `cost` lab measures and
//! stores them, and `price` measures the ones the history lacks before it prices a program.

mod coldcall;
mod distinct;
mod drop;
mod faults;
mod files;
pub mod fsops;
pub mod ipi;
pub mod passes;
mod pipecross;
pub mod procs;
mod sched;
pub mod smallfiles;
pub mod tick;

pub use faults::{FAULT_AROUND, MUNMAP_PAGES};
pub use files::{stat_path_components, term_path};

use std::path::Path;

use anyhow::Result;

use super::SampleSpec;

/// Every term, in the order they are measured and shown (the `term` case key's values).
pub const TERMS: [&str; 55] = [
    "fault-4k",
    "fault-thp",
    "fault-file",
    "fault-file-cold",
    "switch-same-cpu",
    "wake-cross-cpu",
    "wake-ipi",
    "wake-halted",
    "fault-shootdown",
    "futex-wake",
    "futex-wait-eagain",
    "thread-spawn",
    "fork-exit",
    "fork-exec",
    "munmap",
    "munmap-shootdown",
    "pipe-rw",
    "pipe-cross",
    "file-read",
    "openat-close",
    "stat",
    "fstat",
    "open",
    "close",
    "close-dup",
    "create",
    "rename",
    "unlink",
    "mkdir",
    "rmdir",
    "fsync",
    "fdatasync",
    "getdents64",
    "path-component",
    "read-cold",
    "read-small",
    "fault-cow",
    "fault-major",
    "mmap",
    "mmap-file",
    "exec",
    "exit",
    "exit-file",
    "exit-shared",
    "exit-vma",
    "fork",
    "fork-vma",
    "tick",
    "file-write",
    "page-drop",
    "writeback",
    "getxattr",
    "create-pass",
    "cold-call",
    "stat-distinct",
];

/// The terms measured in a scratch directory on a file system, whose figures carry the case
/// key `fs` (its type, as /proc/self/mountinfo names it): a price uses the figure of the file
/// system its program worked on.
pub const FS_TERMS: [&str; 22] = [
    "open",
    "close",
    "close-dup",
    "create",
    "rename",
    "unlink",
    "mkdir",
    "rmdir",
    "fsync",
    "fdatasync",
    "getdents64",
    "path-component",
    "read-cold",
    "read-small",
    "fault-major",
    "exec",
    "file-write",
    "page-drop",
    "writeback",
    "getxattr",
    "create-pass",
    "stat-distinct",
];

/// The sizes at which a term with a per-byte part is measured: the fixed part is read at the
/// smallest, the per-byte part from the line through both.
pub const SIZES: [u64; 2] = [64, 64 * 1024];

/// The sizes the read and write terms are measured at: the two of `SIZES` and a page
/// between them. A call's cost is not one line from 64 B to 64 KiB (a 4 KiB write that
/// extends a file makes a page each call, a 64 B one a page in 64, a 64 KiB one a large
/// folio), so a program's calls are priced on the segment their mean size falls in.
pub const RW_SIZES: [u64; 3] = [64, 4096, 64 * 1024];

/// The terms measured at `RW_SIZES`.
pub const RW_TERMS: [&str; 4] = ["file-read", "file-write", "pipe-rw", "pipe-cross"];

/// The sizes the writeback term is measured at: a page, and 256 of them.
pub const WRITEBACK_SIZES: [u64; 2] = [4096, 1 << 20];

/// The smallest size a sized term is measured at: its figure there is the term's fixed part.
pub fn base_size(term: &str) -> u64 {
    match term {
        "exit" | "exit-file" | "exit-shared" | "fork" => procs::PAGE_SIZES[0],
        "writeback" => WRITEBACK_SIZES[0],
        "wake-ipi" | "wake-halted" => ipi::IDLE_US[0],
        _ => SIZES[0],
    }
}

/// One figure of a term: ns per event (`latency`) at a size, or the fitted `per_byte` ns (and
/// getdents64's `per_entry`); `fs` for a term of `FS_TERMS`.
#[derive(Debug, Clone, PartialEq)]
pub struct TermFigure {
    pub term: &'static str,
    pub size: Option<u64>,
    pub metric: &'static str,
    pub samples: Vec<f64>,
    pub fs: Option<String>,
}

impl TermFigure {
    /// The unit of its samples: ns, or for a factor (`per_ns_fault`, the extra ns per ns) a
    /// ratio.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            "per_ns_fault" => "ratio",
            _ => "ns",
        }
    }

    /// The case the figure is stored under: its term, size, file system and, where the term's
    /// method was revised, the revision (`revision`).
    pub fn case(&self) -> crate::model::Case {
        let mut case = crate::case! {"term" => self.term};
        if let Some(size) = self.size {
            case.insert("size".into(), serde_json::json!(size));
        }
        if let Some(fs) = &self.fs {
            case.insert("fs".into(), serde_json::json!(fs));
        }
        if let Some(rev) = revision(self.term) {
            case.insert("rev".into(), serde_json::json!(rev));
        }
        case
    }
}

/// The revision of a term's method where it changed so that older figures are wrong: a figure
/// stored without it (or with another) does not price, and is measured again. fork 2: the
/// measuring process's own pages and mappings taken out of the fixed part (before, the fixed
/// part was costlab's own fork, 300 µs here, where a fork of one page in no mapping is 8).
/// file-read, file-write, pipe-rw 2: a page's figure beside 64 B and 64 KiB (the segment a
/// program's mean size falls in prices it), and file-read over pages not in a CPU cache
/// (before, one hot page: a third of what a program's 4 KiB read costs). fault-file, exit-file
/// 2: a file cached a page a folio, as binaries and libraries are (before, written at once
/// into large folios, mapped and unmapped in batches: 0.45x a JVM's file faults, 0.3x cc1's
/// exit). create, mkdir 2: in a directory at the file system's root, a group of its own (before,
/// beside the measured folder, where ext4 without a journal made each create pass over the
/// inodes deleted there in the last minutes: 139-437 us a create, not 10.6). getdents64 2:
/// 128 directories of 2 and of 64 entries, each read once a pass (before, one of 64 and one
/// of 1024 read again and again: the large one a hashed tree, its slope above a small
/// directory's, so the call's own part came out below zero). tick 2: the gaps at one phase of
/// the tick's period (before, as many of the shortest gaps as ticks: in a VM half of those
/// were the host's, and the term read 1.6-13.4 us from run to run). exit 2, exit-vma 2,
/// exit-file 3: the child's pages, page tables and mappings pushed out of the caches before
/// it exits, as an exit after a program's own work finds them (before, hot from the touch
/// just made: a compiler's exit_group priced at 0.54x, a JVM's at 0.61x). exit-file 4: its
/// file's pages scattered over memory as a binary's are (`faults::scattered_file`; before,
/// written side by side: 0.009-0.011 ns a byte unmapped here, against 0.035 scattered).
/// page-drop 2: pages written as that file's are, and a sweep before each unlink (before, a
/// file just written in order, hot: a database import's unlink of its old file read 0.45x).
/// wake-ipi 2, wake-halted 2: the median of the writes (reads) that sent (took) an interrupt,
/// the slowest as many as the other CPU took (before, of all of them, shared by the
/// interrupts: 129 ns once, when fewer than half the wake-ups found the CPU halted).
pub fn revision(term: &str) -> Option<u64> {
    match term {
        "fork" | "file-read" | "file-write" | "pipe-rw" | "fault-file" | "create" | "mkdir"
        | "getdents64" | "tick" | "exit" | "exit-vma" => Some(2),
        "exit-file" => Some(4),
        "page-drop" | "wake-ipi" | "wake-halted" => Some(2),
        // A curve of sweeps since 2026-12-07 (one sweep of twice the private cache before).
        // Its after_calls_ns rows came later, beside the same figures: a run without them
        // prices as before (the whole gap read on the sweeps).
        "cold-call" => Some(2),
        _ => None,
    }
}

/// What a term's figure means, for the table and the reading.
pub fn reading(term: &str) -> &'static str {
    match term {
        "fault-4k" => "first touch of an anonymous 4 KiB page (zeroing included), per fault",
        "fault-thp" => "first touch of an anonymous 2 MiB THP (zeroing 2 MiB included), per fault",
        "fault-file" => "first touch of a mapped page-cache page, per fault: a fault-around of up to 16 pages of a file cached a page a folio, as binaries and libraries are (a mapping placed so no fault maps a whole 2 MiB folio)",
        "fault-file-cold" => "as fault-file, each pass after a sweep of memory four times the largest CPU cache (64-512 MiB, not timed): the file's page-cache entries, page descriptors and page tables out of the CPU's caches, as a program's first fault on a range of a file finds them, per fault",
        "switch-same-cpu" => "a token handed between two threads on one CPU through a futex, per hand-off (the wake and wait calls included)",
        "wake-cross-cpu" => "a futex wake of a thread asleep on another CPU to it running, per hand-off (the calls included)",
        "wake-ipi" => "a one-byte pipe write that wakes a reader asleep on another CPU idle for `size` us, less a write nobody waits on, per interrupt sent to that CPU (the waker's side of a wake-up: in a VM, an exit to the host)",
        "wake-halted" => "the CPU time of a one-byte pipe read that slept `size` us on a CPU gone idle and was woken by another's write, less a plain read's, per interrupt that CPU took (the wakee's side: its switch back in on a CPU woken from a halt)",
        "fault-shootdown" => "a copy-on-write fault while a thread of the same process runs on another CPU, less one while it is parked, per TLB shootdown that CPU took (the faulting thread waits for the other CPU to flush: in a VM, exits on both sides)",
        "futex-wake" => "FUTEX_WAKE with no waiter",
        "futex-wait-eagain" => "FUTEX_WAIT that returns EAGAIN at once",
        "thread-spawn" => "a thread created and joined (its stack's mmap and munmap included)",
        "fork-exit" => "fork, the child's _exit, the parent's wait",
        "fork-exec" => "fork, exec of /bin/true, its run and exit, the parent's wait",
        "munmap" => "munmap of 16 touched 4 KiB pages, per call (this CPU's TLB flushed)",
        "munmap-shootdown" => "munmap of 16 touched pages while a thread of the process runs on another CPU: the flush there by IPI included, per call",
        "pipe-rw" => "a write then a read of `size` bytes through a pipe, per pair",
        "pipe-cross" => "a write of `size` bytes into a pipe on one CPU and their read out of it on another (each side's CPU time in its call; neither waits, so no wake-up or switch), per pair",
        "file-read" => "a pread of `size` bytes of a cached file, each call at the next page of a file four times the largest CPU cache (page-cache data not in a CPU cache, as a program's reads mostly find it)",
        "openat-close" => "open and close of a file",
        "stat" => "newfstatat of a file's path",
        "fstat" => "newfstatat of an open file by its fd (an empty path, AT_EMPTY_PATH: glibc's fstat), no path walked",
        "open" => "open of an existing file (its close apart), CPU time, per call",
        "close" => "close of a file just opened, CPU time, per call",
        "close-dup" => "close of a second descriptor of a file that stays open (a dup of it): the descriptor freed, no release of the file, CPU time, per call",
        "create" => "open with O_CREAT|O_EXCL of a new name in a new directory of 128 at the file system's root (on ext4 a group of its own, the cleanest of four by probe creates: no recently deleted inode to pass over, which create-pass prices), no name removed during it, CPU time, per call",
        "rename" => "rename of a file to a new name in the same directory, CPU time, per call",
        "unlink" => "unlink of an empty file, CPU time, per call",
        "mkdir" => "mkdir of a new directory in a new directory of 128 at the file system's root (as create), no name removed before, CPU time, per call",
        "rmdir" => "rmdir of an empty directory, CPU time, per call",
        "fsync" => "fsync after a write of `size` bytes over allocated blocks, CPU time (the disk's wait apart), per call",
        "fdatasync" => "fdatasync after a write of `size` bytes over allocated blocks, CPU time, per call",
        "getdents64" => "getdents64 reading a 2-entry directory through (the empty call at its end included), 128 such directories each read once, CPU time, per call; per_entry: each entry more, from 128 directories of 64 entries",
        "path-component" => "a path lookup's cost per directory component walked (stat 8 levels down less stat at the top, / 8)",
        "read-small" => "a whole cached read of a small file (1-32 KiB, read in through readahead, so the page cache holds it in folios of a page or a few) beyond the same bytes read from a file written 1 MiB a call, each pass after a sweep of four times the largest CPU cache, CPU time, per page",
        "read-cold" => "a read of a page not in the page cache (the scratch file's pages dropped), readahead as the kernel does it, CPU time, per page",
        "fault-cow" => "a write fault on a private file mapping: a cached page copied, per fault",
        "fault-major" => "a read fault on a file page not cached (its readahead included, the minor faults it spares apart), CPU time, per major fault",
        "mmap" => "mmap of 16 anonymous pages (a new VMA, nothing touched), per call",
        "mmap-file" => "mmap of 16 pages of a shared library (this process's libc: its mapping tree holds most processes' mappings of it), read-only and private as a loader maps a segment, nothing touched, per call (the calls one after another: a program's loader, between its faults and reads, meets colder caches)",
        "exec" => "exec of a one-page static program and its exit, CPU time of the child, per exec",
        "exit" => "a process's exit after it touched `size` bytes of anonymous memory, then waited while four times the largest CPU cache was swept on its CPU (an exit comes after the program's own work), CPU time, per exit; per_byte: each byte more unmapped",
        "exit-file" => "a process's exit after it read `size` bytes of a cached file through a shared mapping (16 pages mapped a fault; the file cached a page a folio, as binaries and libraries are), then waited while four times the largest CPU cache was swept on its CPU, CPU time, per exit; per_byte: each byte more unmapped",
        "exit-shared" => "a forked child's exit at once, its parent having `size` bytes of anonymous memory touched, CPU time, per exit; per_byte: each byte more of pages shared since the fork unmapped (let go, not freed), as a forked child's execve tears down its copy",
        "fork-vma" => "a fork's copy of one mapping (its VMA, anon_vma links), beyond its pages: a parent with 1024 touched pages in a mapping a page beside one mapping of them, per mapping",
        "exit-vma" => "an exit's teardown of one mapping, beyond its pages: a child with 1024 touched pages in a mapping a page beside one mapping of them, each exiting after a sweep of four times the largest CPU cache, per mapping",
        "fork" => "fork by a parent with `size` bytes touched (page tables copied, pages made copy-on-write), the parent's CPU time, per fork; the measuring process's own pages and mappings, which every fork it makes copies too, taken out at the per-byte and fork-vma rates (what a fork copied, by the child's resident pages and /proc/self/maps)",
        "tick" => "the local timer's interrupt as the task it interrupts loses it, per tick",
        "file-write" => "a write of `size` bytes that extends a file (new page-cache pages, the file system's block reservation), CPU time, per call",
        "page-drop" => "a folio of a file leaving the page cache as its last link goes (an unlink of a 256-page file written a page a call in a scrambled order, its pages apart in memory, on disk, less one of an empty file, each after a sweep of memory: a file written a while before), its blocks freed, CPU time, per folio",
        "create-pass" => "a create on ext4 without a journal passing over an inode deleted in the last seconds (freed before this second; within 5 s, or 305 s while its inode-table block is unwritten), per inode passed: a batch of creates after 500 more deletions less one after 500, over 500, CPU time",
        "stat-distinct" => "newfstatat of each file of a tree of 5000 (10 directories of 500 empty files) once a pass, after a sweep of memory four times the largest CPU cache (64-512 MiB, not timed), by its directory's fd and its name, in the order the directory lists them (a walker's stat of a file it has not touched since: its dentry and inode cached, not in a CPU cache), CPU time, per call",
        "getxattr" => "lgetxattr of a file's ACL (system.posix_acl_access) by its path, on a file that has none: a path lookup and the attribute's, CPU time, per call",
        "cold-call" => "the time of a sweep of `size` bytes (other work between two calls of a kind pushes the kernel's code and data for them out of the CPU's caches), per sweep, at a quarter of the largest private CPU cache up to 32 times it; extra_ns: the extra CPU time of getppid, a stat, an open and close, an mmap and munmap of 16 pages and a 4 KiB pread each just after such a sweep over the same in a loop, per syscall; per_ns_fault: a first write to a fresh anonymous page (a fault) just after such a sweep, its extra per ns of the same in a loop; after_calls_ns: the extra of the same syscalls just after as long as the sweep took spent in the basket's other syscalls instead, per syscall",
        "writeback" => "an fdatasync after `size` bytes appended to a file a page a call: their pages written back, their blocks allocated then (delayed allocation), CPU time, per call; per_byte: each byte more",
        _ => "",
    }
}

/// Measure one term. An Err is a term this machine cannot give (THP off, one CPU); the
/// caller reports it as unsupported with the reason.
pub fn measure(term: &str, spec: &SampleSpec) -> Result<Vec<TermFigure>> {
    measure_in(term, spec, &std::env::temp_dir())
}

/// Measure one term, a file-system term in a scratch directory made inside `dir` (and
/// removed after): its figures carry `dir`'s file-system type.
pub fn measure_in(term: &str, spec: &SampleSpec, dir: &Path) -> Result<Vec<TermFigure>> {
    trim_heap();
    let mut figs = measure_term(term, spec, dir)?;
    if FS_TERMS.contains(&term) {
        let fs = fsops::fs_of(dir)?;
        for f in &mut figs {
            f.fs = Some(fs.clone());
        }
    }
    Ok(figs)
}

/// Give the memory the allocator holds free back to the kernel, so that every term starts
/// from the same process: a fork copies the measuring process's page tables, and costlab's
/// heap holds some 15 MiB more, resident and free, after a round of the terms than before
/// it (fork+exit+wait read 318 us before a round and 923 us after).
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn measure_term(term: &str, spec: &SampleSpec, dir: &Path) -> Result<Vec<TermFigure>> {
    use fsops::NameOp;
    let t = TERMS
        .iter()
        .copied()
        .find(|t| *t == term)
        .ok_or_else(|| anyhow::anyhow!("no unit-cost term '{term}'"))?;
    let one = |samples: Vec<f64>| {
        vec![TermFigure {
            term: t,
            size: None,
            metric: "latency",
            samples,
            fs: None,
        }]
    };
    let by_page = |kernel: fn(&SampleSpec, usize) -> Result<Vec<f64>>| {
        sized(t, spec, &procs::PAGE_SIZES, kernel)
    };
    Ok(match t {
        "fault-4k" => one(faults::anon(spec, false)?),
        "fault-thp" => one(faults::anon(spec, true)?),
        "fault-file" => {
            // A fault of 16 pages and one of a page: a page's part between them.
            let many = faults::file(spec)?;
            let single = faults::file_single(spec)?;
            let per_page = many
                .iter()
                .zip(single.iter().cycle())
                .map(|(m, o)| ((m - o) / (faults::FAULT_AROUND - 1) as f64).max(0.0))
                .collect();
            let mut v = one(many);
            v.push(TermFigure {
                term: t,
                size: None,
                metric: "per_page",
                samples: per_page,
                fs: None,
            });
            v
        }
        "fault-file-cold" => one(faults::file_cold(spec)?),
        "switch-same-cpu" => one(sched::handoff(spec, true)?),
        "wake-cross-cpu" => one(sched::handoff(spec, false)?),
        "wake-ipi" => by_wait(t, spec, ipi::Side::Waker)?,
        "wake-halted" => by_wait(t, spec, ipi::Side::Wakee)?,
        "fault-shootdown" => one(ipi::fault_shootdown(spec)?),
        "futex-wake" => one(sched::futex_wake(spec)?),
        "futex-wait-eagain" => one(sched::futex_wait_eagain(spec)?),
        "thread-spawn" => one(sched::thread_spawn(spec)?),
        "fork-exit" => one(sched::fork_exit(spec)?),
        "fork-exec" => one(sched::fork_exec(spec)?),
        "munmap" => one(faults::munmap(spec, false)?),
        "cold-call" => {
            let mut v = Vec::new();
            for p in coldcall::cold_call(spec)? {
                v.push(TermFigure {
                    term: t,
                    size: Some(p.size),
                    metric: "latency",
                    samples: p.sweep,
                    fs: None,
                });
                v.push(TermFigure {
                    term: t,
                    size: Some(p.size),
                    metric: "extra_ns",
                    samples: p.extra_ns,
                    fs: None,
                });
                v.push(TermFigure {
                    term: t,
                    size: Some(p.size),
                    metric: "per_ns_fault",
                    samples: p.extra_fault,
                    fs: None,
                });
                v.push(TermFigure {
                    term: t,
                    size: Some(p.size),
                    metric: "after_calls_ns",
                    samples: p.after_calls,
                    fs: None,
                });
            }
            v
        }
        "munmap-shootdown" => one(faults::munmap(spec, true)?),
        "pipe-rw" => sized(t, spec, &RW_SIZES, files::pipe_rw)?,
        "pipe-cross" => sized(t, spec, &RW_SIZES, pipecross::pipe_cross)?,
        "file-read" => sized(t, spec, &RW_SIZES, files::file_read)?,
        "openat-close" => one(files::openat_close(spec)?),
        "stat" => one(files::stat(spec)?),
        "fstat" => one(files::fstat(spec)?),
        "open" => one(fsops::name_op(spec, dir, NameOp::Open)?),
        "close" => one(fsops::name_op(spec, dir, NameOp::Close)?),
        "close-dup" => one(fsops::name_op(spec, dir, NameOp::CloseDup)?),
        "create" => one(fsops::name_op(spec, dir, NameOp::Create)?),
        "rename" => one(fsops::name_op(spec, dir, NameOp::Rename)?),
        "unlink" => one(fsops::name_op(spec, dir, NameOp::Unlink)?),
        "mkdir" => one(fsops::name_op(spec, dir, NameOp::Mkdir)?),
        "rmdir" => one(fsops::name_op(spec, dir, NameOp::Rmdir)?),
        "fsync" | "fdatasync" => {
            let data_only = t == "fdatasync";
            let mut kernel =
                |spec: &SampleSpec, size: usize| fsops::sync(spec, dir, size, data_only);
            sized_with(t, spec, &SIZES, &mut kernel)?
        }
        "getdents64" => {
            let (per_call, per_entry) = fsops::getdents(spec, dir)?;
            let mut v = one(per_call);
            v.push(TermFigure {
                term: t,
                size: None,
                metric: "per_entry",
                samples: per_entry,
                fs: None,
            });
            v
        }
        "path-component" => one(fsops::path_component(spec, dir)?),
        "read-cold" => one(fsops::read_cold(spec, dir)?),
        "read-small" => one(smallfiles::read_small(spec, dir)?),
        "fault-cow" => one(faults::cow(spec)?),
        "fault-major" => one(faults::major(spec, dir)?),
        "mmap" => one(faults::mmap(spec)?),
        "mmap-file" => one(faults::mmap_file(spec)?),
        "exec" => one(procs::exec(spec, dir)?),
        "exit" => by_page(procs::exit)?,
        "exit-file" => by_page(procs::exit_file)?,
        "exit-shared" => by_page(procs::exit_shared)?,
        "fork" => fork_term(spec)?,
        "fork-vma" => one(procs::fork_vma(spec)?),
        "exit-vma" => one(procs::exit_vma(spec)?),
        "tick" => one(tick::tick(spec)?),
        "page-drop" => one(drop::page_drop(spec, dir)?),
        "getxattr" => one(fsops::getxattr(spec, dir)?),
        "create-pass" => one(passes::create_pass(spec, dir)?),
        "stat-distinct" => one(distinct::stat_distinct(spec, dir)?),
        "writeback" => {
            let mut kernel = |spec: &SampleSpec, size: usize| fsops::writeback(spec, dir, size);
            sized_with(t, spec, &WRITEBACK_SIZES, &mut kernel)?
        }
        "file-write" => {
            let mut kernel = |spec: &SampleSpec, size: usize| fsops::file_write(spec, dir, size);
            sized_with(t, spec, &RW_SIZES, &mut kernel)?
        }
        _ => unreachable!("every term in TERMS has a kernel"),
    })
}

/// The fork term at each of `procs::PAGE_SIZES` touched and its per-byte part. Every fork the
/// measuring process makes copies its own pages and mappings too (costlab's: thousands of
/// pages, a hundred mappings or more), so the per-byte part is each sample pair's slope over
/// the bytes the forks copied (the child's resident pages; the sizes' difference where those
/// were not read), and each size's figure has the bytes copied beyond `size` taken out at the
/// median rate and every mapping at the fork-vma rate, measured here too: a fork of a
/// process of `size` bytes in no mapping, to which a price adds the mappings it counted.
fn fork_term(spec: &SampleSpec) -> Result<Vec<TermFigure>> {
    let [lo, hi] = procs::PAGE_SIZES;
    let small = procs::fork(spec, lo as usize)?;
    let big = procs::fork(spec, hi as usize)?;
    let per_vma = super::stats::median(&procs::fork_vma(spec)?);
    let span = if big.copied > small.copied && small.copied >= lo as f64 {
        big.copied - small.copied
    } else {
        (hi - lo) as f64
    };
    let per_byte: Vec<f64> = small
        .ns
        .iter()
        .zip(&big.ns)
        .map(|(a, b)| ((b - a) / span).max(0.0))
        .collect();
    let rate = super::stats::median(&per_byte);
    let at = |f: procs::Forks, size: u64| TermFigure {
        term: "fork",
        size: Some(size),
        metric: "latency",
        samples: f
            .ns
            .iter()
            .map(|ns| (ns - rate * (f.copied - size as f64).max(0.0) - per_vma * f.vmas).max(0.0))
            .collect(),
        fs: None,
    };
    Ok(vec![
        at(small, lo),
        at(big, hi),
        TermFigure {
            term: "fork",
            size: Some(hi),
            metric: "per_byte",
            samples: per_byte,
            fs: None,
        },
    ])
}

/// The terms measured at each of `ipi::IDLE_US` (their `size`: the µs the sleeper's CPU sat
/// idle), which a price reads at the length of its own waits.
pub const WAIT_TERMS: [&str; 2] = ["wake-ipi", "wake-halted"];

/// A term's `size` in words: bytes, or for a wake-up term the µs its sleeper's CPU sat idle.
pub fn size_words(term: &str, size: u64) -> String {
    if WAIT_TERMS.contains(&term) {
        format!("{size} us idle")
    } else {
        crate::measure::sizes::format_size(size)
    }
}

/// A wake-up term at each idle time of `ipi::IDLE_US` (no per-byte part: a curve read between
/// its points).
fn by_wait(term: &'static str, spec: &SampleSpec, side: ipi::Side) -> Result<Vec<TermFigure>> {
    let mut out = Vec::new();
    for idle in ipi::IDLE_US {
        out.push(TermFigure {
            term,
            size: Some(idle),
            metric: "latency",
            samples: ipi::wake(spec, side, idle)?,
            fs: None,
        });
    }
    Ok(out)
}

/// A term at each of `sizes`, and its per-byte part: each sample pair's slope.
fn sized(
    term: &'static str,
    spec: &SampleSpec,
    sizes: &[u64],
    kernel: fn(&SampleSpec, usize) -> Result<Vec<f64>>,
) -> Result<Vec<TermFigure>> {
    sized_with(term, spec, sizes, &mut |s, n| kernel(s, n))
}

fn sized_with(
    term: &'static str,
    spec: &SampleSpec,
    sizes: &[u64],
    kernel: &mut dyn FnMut(&SampleSpec, usize) -> Result<Vec<f64>>,
) -> Result<Vec<TermFigure>> {
    let mut out = Vec::new();
    let mut by_size = Vec::new();
    for &size in sizes {
        let samples = kernel(spec, size as usize)?;
        by_size.push(samples.clone());
        out.push(TermFigure {
            term,
            size: Some(size),
            metric: "latency",
            samples,
            fs: None,
        });
    }
    let (lo, hi) = (sizes[0] as f64, sizes[sizes.len() - 1] as f64);
    let per_byte: Vec<f64> = by_size[0]
        .iter()
        .zip(&by_size[by_size.len() - 1])
        .map(|(a, b)| ((b - a) / (hi - lo)).max(0.0))
        .collect();
    out.push(TermFigure {
        term,
        size: Some(sizes[sizes.len() - 1]),
        metric: "per_byte",
        samples: per_byte,
        fs: None,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_term_runs_or_says_why_not() {
        let spec = SampleSpec::tiny();
        for t in TERMS {
            match measure(t, &spec) {
                Ok(figs) => {
                    assert!(!figs.is_empty(), "{t}");
                    for f in figs {
                        assert_eq!(f.samples.len(), 3, "{t}");
                        assert!(f.samples.iter().all(|x| x.is_finite() && *x >= 0.0), "{t}");
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty(), "{t}"),
            }
            assert!(!reading(t).is_empty(), "{t}");
        }
        assert!(measure("nope", &spec).is_err());
    }
}
