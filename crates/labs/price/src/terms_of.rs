//! Which measured term prices each counted event: a syscall by name (and by the kind of fd,
//! for the read/write family), and the other events (faults by kind, switches, spawns, the
//! tick, getdents64's entries).

/// The read family's syscalls.
pub const READS: [&str; 5] = ["read", "pread64", "readv", "preadv", "preadv2"];

/// The write family's syscalls.
pub const WRITES: [&str; 5] = ["write", "pwrite64", "writev", "pwritev", "pwritev2"];

/// How one counted event is priced: the unit's name, a factor, and a word on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    pub unit: &'static str,
    pub factor: f64,
    pub how: &'static str,
}

/// A syscall's name without the kind of fd its calls went to (`read:dev` is a `read`).
pub fn base_name(name: &str) -> &str {
    name.split_once(':').map_or(name, |(b, _)| b)
}

pub(crate) fn by(unit: &'static str, factor: f64, how: &'static str) -> Option<Pricing> {
    Some(Pricing { unit, factor, how })
}

/// Calls whose work is the entry and exit and a few loads and stores: priced at s, the null
/// call's round trip. Any other call with no term of its own has no price ("no term").
pub const LIGHT: [&str; 44] = [
    "getpid",
    "getppid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getpgrp",
    "getpgid",
    "getsid",
    "getresuid",
    "getresgid",
    "getgroups",
    "getcwd",
    "uname",
    "umask",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "set_tid_address",
    "set_robust_list",
    "get_robust_list",
    "rseq",
    "arch_prctl",
    "prctl",
    "prlimit64",
    "getrlimit",
    "setrlimit",
    "sched_getaffinity",
    "sched_yield",
    "getrandom",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "lseek",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "capget",
    "getpriority",
    "sysinfo",
];

/// Whether a syscall line (`fcntl`, `lseek:file`) is a light call's: its cost is the entry
/// and exit, which a split finds inside user time and prices there, at s.
pub fn is_light(event: &str) -> bool {
    let base = event.split(':').next().unwrap_or(event);
    LIGHT.contains(&base)
}

/// A light call's pricing without a split: its entry and exit, at s.
pub const LIGHT_HOW: &str = "a light call: at s, the null call's round trip";

/// The term a syscall is priced at: its own term where costlab measures one (by operation,
/// the file system's for a file-system call), s for a light call, none otherwise ("no term":
/// 0 in the priced total, said on its line). The read/write family's calls counted by the
/// kind of fd they went to (`read:dev`, `write:pipe`) are priced at that kind's term.
pub fn syscall_pricing(name: &str) -> Option<Pricing> {
    if let Some((base, kind)) = name.split_once(':') {
        let read = READS.contains(&base);
        return match kind {
            "file" if read => by(
                "file-read",
                1.0,
                "a cached file's read: its fixed part (a pread); its bytes are priced apart",
            ),
            "file" => by(
                "file-write",
                1.0,
                "a write to a file: priced as one that extends it on this file system (the file-write term's fixed part: new page-cache pages and their blocks reserved; an overwrite costs less); its bytes are priced apart",
            ),
            "pipe" => by(
                "pipe-rw",
                0.5,
                "on a pipe: half a pipe write+read pair's fixed part; its bytes are priced apart",
            ),
            "dev" if read => by(
                "read-devzero",
                1.0,
                "on a character device: priced at a 1-byte read of /dev/zero (the syscall lab's); what another device does is not measured here",
            ),
            "dev" => by(
                "write-devnull",
                1.0,
                "on a character device: priced at a write to /dev/null (the syscall lab's); what another device does is not measured here",
            ),
            "socket" => syscall_pricing(if read { "recvfrom" } else { "sendto" }),
            "failed" if base == "execve" => by(
                "stat",
                1.0,
                "an execve that failed (a PATH search): priced as the path lookup it made, a stat",
            ),
            "create" => by(
                "create",
                1.0,
                "an openat with O_CREAT: priced as a create of a new name on this file system",
            ),
            "fd" if base == "newfstatat" => by(
                "fstat",
                1.0,
                "a newfstatat on an open file (an empty path, AT_EMPTY_PATH: glibc's fstat): priced as a stat by fd, no path walked",
            ),
            _ => syscall_pricing(base),
        };
    }
    match name {
        "futex" => by(
            "futex-wake",
            1.0,
            "a futex call that does not sleep (a sleep is priced as a switch)",
        ),
        "open" | "openat" | "openat2" => by(
            "open",
            1.0,
            "an open of an existing file on this file system (a create costs more: see the reading)",
        ),
        "creat" => by("create", 1.0, "a create of a new name on this file system"),
        "close" => by("close", 1.0, "a close of a file just opened"),
        "mkdir" | "mkdirat" => by("mkdir", 1.0, "a mkdir on this file system"),
        "rmdir" => by("rmdir", 1.0, "an rmdir of an empty directory on this file system"),
        "unlink" | "unlinkat" => by("unlink", 1.0, "an unlink of an empty file on this file system"),
        "rename" | "renameat" | "renameat2" => by("rename", 1.0, "a rename in one directory on this file system"),
        "fsync" => by("fsync", 1.0, "an fsync after a small write (one page written back)"),
        "fdatasync" => by("fdatasync", 1.0, "an fdatasync after a small write (one page written back)"),
        "getdents64" | "getdents" => by(
            "getdents64",
            1.0,
            "a call reading a 2-entry directory through on this file system, 128 such directories each read once (where the entries returned are counted, its own part; they are priced on bytes dirents)",
        ),
        "stat" | "lstat" | "newfstatat" | "statx" => by("stat", 1.0, "a path lookup and stat"),
        "readlink" | "readlinkat" | "access" | "faccessat" | "faccessat2" => by(
            "stat",
            1.0,
            "a path lookup, priced at a stat's (readlink copies the link's few bytes where a stat copies its record; access checks the permissions it finds)",
        ),
        "getxattr" | "lgetxattr" | "fgetxattr" | "listxattr" | "llistxattr" | "flistxattr" => by(
            "getxattr",
            1.0,
            "an lgetxattr of a file's ACL by its path on this file system (the by-fd calls skip the path lookup: priced a little high)",
        ),
        "read" | "pread64" | "readv" | "preadv" | "preadv2" => by(
            "file-read",
            1.0,
            "a read's fixed part (a cached file's pread); its bytes are priced apart",
        ),
        "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => by(
            "pipe-rw",
            0.5,
            "half a pipe write+read pair's fixed part; its bytes are priced apart",
        ),
        "sendto" | "sendmsg" | "send" => by(
            "tcp-send",
            1.0,
            "a loopback TCP send of 16 B (the syscall lab's), its delivery to the peer included",
        ),
        "recvfrom" | "recvmsg" | "recv" => by(
            "tcp-recv",
            1.0,
            "a TCP recv of 16 B that finds data (the syscall lab's); one that finds none costs less",
        ),
        "clone" | "clone3" | "fork" | "vfork" => by(
            "none",
            0.0,
            "the call only: the thread or process it starts is priced in class spawn",
        ),
        "execve" | "execveat" => by(
            "exec",
            1.0,
            "an exec of a one-page static program and that program's exit (the old address space's pages and mappings are priced apart where the split counted them: bytes and vmas unmapped at exec)",
        ),
        "exit_group" | "exit" => by(
            "none",
            0.0,
            "its fixed part is in the exec term; the pages it unmaps and its mappings are priced apart (bytes unmapped, vmas unmapped at exit)",
        ),
        "mmap" | "mprotect" | "brk" | "mremap" => by(
            "mmap",
            1.0,
            "an mmap of 16 untouched pages: a VMA made or changed",
        ),
        "mmap:file" => by(
            "mmap-file",
            1.0,
            "an mmap of a file (no MAP_ANONYMOUS: a loader's library segment, a mapped data file): the mmap-file term, 16 pages of a shared library mapped read-only",
        ),
        "munmap" => by(
            "munmap",
            1.0,
            "a munmap of 16 touched pages, no other CPU to flush",
        ),
        n if LIGHT.contains(&n) => by("s", 1.0, LIGHT_HOW),
        _ => None,
    }
}

/// The term an event of another class is priced at; None where no term prices it.
pub fn event_pricing(class: &str, event: &str) -> Option<Pricing> {
    match (class, event) {
        ("fault", "minor") => by(
            "fault-4k",
            1.0,
            "an anonymous 4 KiB first touch (where the split told file-backed and COW faults apart, they are on lines of their own)",
        ),
        ("fault", "minor:file") => by(
            "fault-file",
            1.0,
            "a page-cache page mapped (fault-around maps up to 16 at once)",
        ),
        ("fault", "minor:cow") => by(
            "fault-cow",
            1.0,
            "a page copied on write (a private file page, or a page shared since a fork)",
        ),
        ("fault", "major") => by(
            "fault-major",
            1.0,
            "a read fault on a file page not cached, its readahead included",
        ),
        ("wakeup", "on a halted cpu") => by(
            "halt-in",
            1.0,
            "a sleeper switched back in on a CPU woken from a halt (in a VM the vCPU re-entered, its tick restarted): the wake-halted term less the switch each wait is priced at already",
        ),
        ("switch", _) => by(
            "switch",
            1.0,
            "a same-CPU hand-off minus its futex wake and wait",
        ),
        ("spawn", "thread") => by("thread-spawn", 1.0, "a thread created and joined"),
        ("spawn", "process") => by(
            "fork",
            1.0,
            "a fork of a process of one page in no mapping (the fork term's fixed part, the measuring process's own pages and mappings taken out); what a fork copies is priced apart where the split counted it (bytes and vmas copied at fork); the child's exit is on exit_group",
        ),
        ("irq", "local_timer") => by("tick", 1.0, "the local timer's interrupt, per tick"),
        ("pages", "read in") => by(
            "page-in",
            1.0,
            "a page the page cache took in for a read (a cold read, its readahead included): a cold read's CPU per page less a cached read's (its bytes and calls are priced apart)",
        ),
        ("pages", "read from small files") => by(
            "read-small",
            1.0,
            "a page a read took from a cached file of at most 32 KiB, beyond the same bytes of a large file (small files are cached in folios of a page or a few, and each file's page-cache structures are met apart): the read-small term (the read calls and bytes are priced apart)",
        ),
        ("pages", "mapped by file faults") => by(
            "fault-file/page",
            1.0,
            "pages the read faults' fault-around mapped from the page cache (1 to 16 a fault): the fault-file term's per-page part (its 16-page fault less a one-page mapping's fault, over 15), raised as the file faults that mapped them are for the work between them",
        ),
        ("pages", "made by writes") => by(
            "none",
            0.0,
            "pages a write made: priced with the bytes written (the file-write term's per-byte part makes them)",
        ),
        ("pages", "faulted in") => by(
            "none",
            0.0,
            "pages read in for a fault: priced with the major faults (the fault-major term's readahead)",
        ),
        ("inodes", "passed over") => by(
            "create-pass",
            1.0,
            "an inode deleted in the last seconds that a create (or mkdir) on ext4 without a journal passed over to find a free one: the create-pass term (the split counts them from the buffer touches inside each allocation)",
        ),
        ("folios", "dropped") => by(
            "page-drop",
            1.0,
            "a folio (a page, or a run of pages the cache holds as one) leaving the page cache (a full file's last unlink, a truncate, a DONTNEED): the page-drop term, its blocks freed",
        ),
        ("bytes", "written back") => by(
            "writeback/byte",
            1.0,
            "bytes the program itself sent to the disk (its fsync's writeback, a direct write) at the writeback term's per-byte part (appended pages: their blocks allocated then); the flusher threads' writeback is not its time",
        ),
        ("ipi", "sent") => by(
            "wake-ipi",
            1.0,
            "an interrupt sent to another CPU inside a syscall (most are wake-ups of a task asleep on an idle CPU): the wake-ipi term, the waker's side of a cross-CPU wake-up (in a VM, an exit to the host)",
        ),
        ("ipi", "in a fault") => by(
            "fault-shootdown",
            1.0,
            "an interrupt sent to another CPU inside a user fault (most are a copy on write's TLB shootdown of a CPU running another thread of the process, which the fault waits on): the fault-shootdown term",
        ),
        ("stats", "first touches") => by(
            "stat-first",
            1.0,
            "the stats by path that found an inode no stat of the run had found before (the split reads each one's inode number from its result): each at the stat-distinct term (a stat of each of 5000 files once a pass, each out of the CPU's caches) less a stat of one file again, the part the caches the stat missed cost",
        ),
        ("file faults", "first touches") => by(
            "fault-file-first",
            1.0,
            "the read faults whose 64 KiB of the file no earlier fault of the run had mapped (the split keeps each window it saw): each at the fault-file-cold term (a 16-page fault after a sweep of memory) less the fault-file term (the same fault, the file's pages and page tables in the CPU's caches), the part the caches the fault missed cost; a window another program mapped moments before is warmer than that, one the program's own large run pushed out is as cold",
        ),
        ("pages", "faulted in syscalls") => by(
            "fault-4k",
            1.0,
            "page faults the kernel took on the program's memory inside its syscalls (a read into a buffer it had not touched yet): each at the fault-4k term, an anonymous page's first touch (a fault on a mapped file's page inside a call costs less than that, a copy on write more)",
        ),
        ("path", "components") => by(
            "path-component",
            1.0,
            "the components of the paths the stat family's calls walked (a stat by fd walks none): the path-component term, a directory entry looked up and walked into; the calls are priced at a stat less the term's own path's components",
        ),
        ("bytes", "dirents") => by(
            "getdents64/entry",
            1.0 / costlab_core::measure::unitcost::fsops::DIRENT_RECLEN as f64,
            "the directory entries getdents64 returned, by their bytes: one entry per 48 bytes (the term's own entries; a shorter name makes an entry shorter)",
        ),
        _ => address_space_pricing(class, event),
    }
}

/// The term an address space's pages and mappings are priced at, where a fork copied them or
/// an exit, an exec or a munmap took them out; None for any other event.
fn address_space_pricing(class: &str, event: &str) -> Option<Pricing> {
    match (class, event) {
        ("bytes", "unmapped") => by(
            "exit/byte",
            1.0,
            "the anonymous pages each process still mapped as its last thread exited (its resident count), freed at exit: the exit term's per-byte part",
        ),
        ("bytes", "copied at fork") => by(
            "fork/byte",
            1.0,
            "the pages each fork copied the page-table entries of (the child's resident pages as it starts: a large process forks slowly): the fork term's per-byte part",
        ),
        ("vmas", "copied at fork") => by(
            "fork-vma",
            1.0,
            "the mappings each fork copied (each child's as it starts: a program's libraries make a hundred or more): the fork-vma term, a mapping's copy beyond its pages",
        ),
        ("bytes", "unmapped at exec") => by(
            "exit-shared/byte",
            1.0,
            "the pages of the address space an exec left, where the caller was its one user (a forked child's copy, its pages shared with the parent): let go at the exit-shared term's per-byte cost, a forked child's exit with its parent's pages",
        ),
        ("vmas", "unmapped at exec") => by(
            "exit-vma",
            1.0,
            "the mappings of the address space an exec left (a forked child's copy of its parent's): the exit-vma term, a mapping's teardown beyond its pages",
        ),
        ("bytes", "unmapped by munmap") => by(
            "exit/byte",
            1.0,
            "the anonymous pages munmap calls took out of their address spaces (the resident count as each entered less as it left), freed: the exit term's per-byte part, an exit's unmap of the same pages",
        ),
        ("bytes", "unmapped by munmap:file") => by(
            "exit-file/byte",
            1.0,
            "the page-cache pages munmap calls took out of their address spaces, let go (not freed): the exit-file term's per-byte part",
        ),
        ("vmas", "unmapped by munmap") => by(
            "exit-vma",
            1.0,
            "the mappings munmap calls took out (map_count as each entered less as it left): the exit-vma term, a mapping's teardown beyond its pages",
        ),
        ("vmas", "unmapped at exit") => by(
            "exit-vma",
            1.0,
            "the mappings each process still had as its last thread exited: the exit-vma term, a mapping's teardown beyond its pages",
        ),
        ("bytes", "unmapped:file") => by(
            "exit-file/byte",
            1.0,
            "the page-cache pages each process still mapped as its last thread exited (its resident count), let go at exit: the exit-file term's per-byte part",
        ),
        _ => None,
    }
}

/// The local timer's interrupts the split counted on the program's CPUs, by whose they
/// were. Every hrtimer expires in that interrupt on this kernel, so beside the kernel's tick
/// it holds the tracers' own: the sampler's (one a sample) and the split's cpu-clock (one
/// every `tick_period_ns` of the program's CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerParts {
    pub all: u64,
    pub sampler: u64,
    pub split: u64,
    /// The kernel's tick: the rest, the only ones priced.
    pub ticks: u64,
}

/// `sampled`: the sampler's samples of the program (one interrupt each).
pub fn timer_parts(split: &crate::measured::Split, sampled: u64) -> TimerParts {
    let all = split.line("irq", "local_timer").map_or(0, |l| l.count);
    let mine = (split.usage_ns / split.tick_period()).min(all);
    let sampler = sampled.min(all - mine);
    TimerParts {
        all,
        sampler,
        split: mine,
        ticks: all - mine - sampler,
    }
}
