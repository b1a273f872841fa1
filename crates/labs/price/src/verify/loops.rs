//! The tracer's calibration loops (`overhead`): each one kind of event, made by a forked
//! child that makes only raw syscalls and plain stores (no allocation: costlab has threads,
//! and a forked child of a threaded process may touch no lock).

use anyhow::{Context, Result};

/// Rounds of the spin loop (about 100 ms here).
pub const SPINS: u64 = 100_000_000;
/// getppid calls in the syscall loop.
pub const SYSCALLS: u64 = 200_000;
/// Pages first read in the fault loop: `FAULT_ROUNDS` maps of `FAULT_PAGES` 4 KiB pages.
/// Written instead (a page allocated and zeroed each), the untraced loop took 52-61 ms a run
/// here against 16-17.5 ms read, and the fault's cost read -30 to 153 ns a round (medians 56
/// and 120 in two calibrations) against 112-337 (medians 149 and 142): the programs' own run
/// time, from the kernel's statistics, is about 180 ns a fault.
pub const FAULT_PAGES: usize = 8192;
pub const FAULT_ROUNDS: usize = 4;
/// Round trips of one byte each way in the switch loop.
pub const PING_PONGS: u64 = 5_000;
/// One-byte preads of a cached file in the lookup loop.
pub const LOOKUPS: u64 = 100_000;
/// Stats of one file of the inode loop's folder in the path loop (its path read by the split).
pub const PATHS: u64 = 50_000;
/// The file fault loop: `FILE_FAULT_ROUNDS` shared mappings of a cached file of
/// `FILE_FAULT_BYTES`, a byte read from each page (fault-around maps 16 pages a fault: 1024
/// file faults a round, 20480 in all). At 16 MiB and 80 rounds (the same faults) the cost
/// beyond a fault's read 222 ns here once, at 64 MiB 364 ns, and a program mapping a 64 MiB
/// file 20 times still used about 230 ns a fault more traced than untraced than the latter
/// took out: the larger file, as a program's, is the nearer.
pub const FILE_FAULT_BYTES: usize = 64 << 20;
pub const FILE_FAULT_ROUNDS: usize = 20;
/// Mappings of a cached file's page (each unmapped again) in the mmap loop.
pub const MMAPS: u64 = 20_000;
/// Children forked, each exec'ing `true` and reaped, in the exec loop.
pub const EXECS: u64 = 200;
/// Files of the inode loop, each stat'ed once a run: each stat's inode is one the run's set
/// has not held, so each is an insert.
pub const INODES: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Work in user mode and no events: the tick's cost alone.
    Spin,
    Syscalls,
    Faults,
    /// A pipe ping-pong of two processes on two CPUs: each wait a switch to the idle task
    /// (out of the loop's cgroup) and, the CPU halted, back.
    Switches,
    /// The same ping-pong on one CPU: each wait a switch to the other process, inside the
    /// loop's cgroup (the sampler's events neither stop nor start).
    LocalSwitches,
    /// One-byte preads of a cached file: a syscall and a page-cache lookup each.
    Lookups,
    /// Stats of a path: a syscall and a path read each.
    Paths,
    /// Mappings of a cached file's page, each unmapped again: two syscalls and an mmap.
    Mmaps,
    /// Stats of distinct files, each once: a syscall, a path read and an inode found first.
    Inodes,
    /// Reads of a cached file's pages through a shared mapping: user faults served by the
    /// page cache, each running the split's page-cache fault programs beside the fault's own.
    FileFaults,
    /// Children forked, each exec'ing `true` (a dynamically linked program: its loader's
    /// calls, mappings and faults are the split's counted events) and reaped: a fork and an
    /// exec beyond their counted events.
    Execs,
}

impl Kind {
    /// The event of `EVENTS` whose cost the loop measures.
    pub fn event(self) -> &'static str {
        match self {
            Kind::Spin => "tick",
            Kind::Syscalls => "syscall",
            Kind::Faults => "fault",
            Kind::Switches => "switch",
            Kind::LocalSwitches => "switch_local",
            Kind::Lookups => "lookup",
            Kind::Paths => "path",
            Kind::Mmaps => "mmap",
            Kind::Inodes => "inode",
            Kind::FileFaults => "file_fault",
            Kind::Execs => "exec",
        }
    }

    /// Its name in errors: its event's, but "spin" for the tick's loop.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Spin => "spin",
            k => k.event(),
        }
    }
}

/// The lookup loop's file: a page in the temp folder, cached by its write, open for reading
/// (its name already removed).
pub fn cached_page() -> Result<std::fs::File> {
    cached("lookups", 1)
}

/// The file fault loop's file: `FILE_FAULT_BYTES` in the temp folder, cached by its writes,
/// open for reading (its name already removed). It is written a page a write, so that the
/// page cache holds it a page a folio, as a program's binaries and libraries are held: a
/// file written at once is cached in 2 MiB folios here, and a fault maps 2 MiB of it whole
/// (8 faults a round where there are 256).
pub fn cached_file() -> Result<std::fs::File> {
    cached("filefaults", FILE_FAULT_BYTES / 4096)
}

/// A file of `pages` pages in the temp folder named for `what`, written a page a write (so
/// cached), open for reading, its name already removed.
fn cached(what: &str, pages: usize) -> Result<std::fs::File> {
    use std::io::Write;
    let path = std::env::temp_dir().join(format!("costlab-{what}-{}", std::process::id()));
    let mut f =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    for _ in 0..pages {
        f.write_all(&[7u8; 4096])
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(f);
    let file = std::fs::File::open(&path);
    let _ = std::fs::remove_file(&path);
    file.with_context(|| format!("opening {}", path.display()))
}

/// The exec loop's program: `true`, from coreutils, where it is.
pub fn true_program() -> Result<std::ffi::CString> {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .map(|p| std::ffi::CString::new(p).expect("no NUL"))
        .context(
            "no /usr/bin/true or /bin/true for the tracer's exec loop (apt-get install coreutils)",
        )
}

/// The forked child: join the cgroup (the fd of its cgroup.procs), run the loop, exit.
/// `program`: what the exec loop execs.
///
/// # Safety
/// Call only in a child just forked; it never returns.
pub unsafe fn child_loop(
    procs: i32,
    kind: Kind,
    cpus: &[libc::cpu_set_t; 2],
    file: i32,
    paths: &[std::ffi::CString],
    program: &std::ffi::CStr,
) -> ! {
    if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 {
        libc::_exit(3);
    }
    // The exec loop on one CPU: each child runs where its parent waits, and no wake-up of
    // another CPU from a halt (6-7 us here) comes or goes from one round to the next (spread
    // over both CPUs, the loop's cost beyond its events read -81 to 96 us an exec over seven
    // rounds; on one, 53 to 86).
    if kind == Kind::Execs
        && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpus[0]) != 0
    {
        libc::_exit(22);
    }
    match kind {
        Kind::Spin => {
            let x = std::cell::UnsafeCell::new(0u64);
            for i in 0..SPINS {
                std::ptr::write_volatile(x.get(), std::ptr::read_volatile(x.get()) ^ i);
            }
        }
        Kind::Syscalls => {
            for _ in 0..SYSCALLS {
                libc::syscall(libc::SYS_getppid);
            }
        }
        Kind::Paths => {
            // One file again and again: after the first, each stat's inode is found in the
            // run's set (a lookup, as a program's stat of a file it stat'ed before).
            let mut st: libc::stat = std::mem::zeroed();
            for _ in 0..PATHS {
                if libc::fstatat(libc::AT_FDCWD, paths[0].as_ptr(), &mut st, 0) != 0 {
                    libc::_exit(12);
                }
            }
        }
        Kind::Inodes => {
            let mut st: libc::stat = std::mem::zeroed();
            for p in paths {
                if libc::fstatat(libc::AT_FDCWD, p.as_ptr(), &mut st, 0) != 0 {
                    libc::_exit(13);
                }
            }
        }
        Kind::Mmaps => {
            for _ in 0..MMAPS {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file,
                    0,
                );
                if p == libc::MAP_FAILED {
                    libc::_exit(11);
                }
                libc::munmap(p, 4096);
            }
        }
        Kind::Lookups => {
            let mut b = [0u8; 1];
            for _ in 0..LOOKUPS {
                if libc::pread(file, b.as_mut_ptr().cast(), 1, 0) != 1 {
                    libc::_exit(10);
                }
            }
        }
        Kind::FileFaults => {
            for _ in 0..FILE_FAULT_ROUNDS {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    FILE_FAULT_BYTES,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file,
                    0,
                );
                if p == libc::MAP_FAILED {
                    libc::_exit(14);
                }
                let base = p as *const u8;
                for i in (0..FILE_FAULT_BYTES).step_by(4096) {
                    std::ptr::read_volatile(base.add(i));
                }
                libc::munmap(p, FILE_FAULT_BYTES);
            }
        }
        Kind::Execs => execs(program),
        Kind::Faults => {
            let len = FAULT_PAGES * 4096;
            for _ in 0..FAULT_ROUNDS {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED {
                    libc::_exit(4);
                }
                // 4 KiB faults whatever the THP mode.
                libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
                // Read faults: each maps the zero page, and runs the split's fault programs
                // as a first write does, without a page to allocate and zero (whose time
                // moved by several ms from one round to the next on this guest's host).
                let base = p as *const u8;
                for i in 0..FAULT_PAGES {
                    std::ptr::read_volatile(base.add(i * 4096));
                }
                libc::munmap(p, len);
            }
        }
        Kind::Switches => switches(cpus),
        Kind::LocalSwitches => switches(&[cpus[0], cpus[0]]),
    }
    libc::_exit(0)
}

/// The exec loop: `EXECS` children forked, each exec'ing `program`, each reaped before the
/// next.
///
/// # Safety
/// Only in `child_loop`'s child: raw syscalls, no allocation.
unsafe fn execs(program: &std::ffi::CStr) {
    let argv = [program.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    for _ in 0..EXECS {
        let pid = libc::fork();
        if pid < 0 {
            libc::_exit(17);
        }
        if pid == 0 {
            libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(18);
        }
        let mut st = 0;
        if libc::waitpid(pid, &mut st, 0) != pid || st != 0 {
            libc::_exit(19);
        }
    }
}

/// The switch loop: two processes, each on a CPU of its own, a byte each way: every wait is
/// a switch to the idle task and back. Both on one CPU (`LocalSwitches`), each wait is a
/// switch to the other.
///
/// # Safety
/// Only in `child_loop`'s child: raw syscalls, no allocation.
unsafe fn switches(cpus: &[libc::cpu_set_t; 2]) {
    // Two processes, each on a CPU of its own, a byte each way: every wait is a
    // switch to the idle task and back.
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if libc::sched_setaffinity(0, size, &cpus[0]) != 0 {
        libc::_exit(5);
    }
    let mut there = [0i32; 2];
    let mut back = [0i32; 2];
    if libc::pipe(there.as_mut_ptr()) != 0 || libc::pipe(back.as_mut_ptr()) != 0 {
        libc::_exit(6);
    }
    let mut b = [0u8; 1];
    let other = libc::fork();
    if other < 0 {
        libc::_exit(7);
    }
    if other == 0 {
        if libc::sched_setaffinity(0, size, &cpus[1]) != 0 {
            libc::_exit(5);
        }
        for _ in 0..PING_PONGS {
            if libc::read(there[0], b.as_mut_ptr().cast(), 1) != 1 {
                libc::_exit(8);
            }
            libc::write(back[1], b.as_ptr().cast(), 1);
        }
        libc::_exit(0);
    }
    for _ in 0..PING_PONGS {
        libc::write(there[1], b.as_ptr().cast(), 1);
        if libc::read(back[0], b.as_mut_ptr().cast(), 1) != 1 {
            libc::_exit(9);
        }
    }
    let mut st = 0;
    libc::waitpid(other, &mut st, 0);
}
