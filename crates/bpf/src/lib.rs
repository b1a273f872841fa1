//! costlab's BPF layer: everything a lab needs to write, load, attach and read a BPF program
//! without a compiler or a BPF library, written once.
//!
//! - `uapi`: the kernel's numbers by their uapi names (opcode parts, commands, types);
//! - `insn`: one instruction, registers, helpers, each instruction's constructor;
//! - `asm`: the named-instruction assembler with labels and a readable `listing()`;
//! - `sys`: bpf(2), one typed attribute block per command;
//! - `map`, `prog`, `link`, `perf`: maps, loading (the verifier's log, run statistics),
//!   attaching (raw tracepoints, software perf events, BPF_LINK_CREATE);
//! - `cpus`: the possible CPUs (per-CPU map values) and the online ones (perf events).
//!
//! A lab keeps its programs (what they count, in which slot); this crate knows how they are
//! encoded and handed to the kernel.

pub mod asm;
pub mod cpus;
pub mod insn;
pub mod link;
pub mod map;
pub mod perf;
pub mod prog;
pub mod sys;
pub mod uapi;

use std::path::Path;

pub use asm::Asm;
pub use insn::{Helper, Insn, Reg, FP, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9};
pub use link::{attach, AttachError, Attached, Hook};
pub use map::Map;
pub use prog::{Program, Refused, RunStats, Runs};

/// A cgroup v2 directory's id as the kernel's `bpf_get_current_cgroup_id` gives it: the
/// directory's inode number (a kernfs node id, on a 64-bit kernel).
pub fn cgroup_id(dir: &Path) -> anyhow::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir)
        .map_err(|e| anyhow::anyhow!("reading the cgroup {}: {e}", dir.display()))?
        .ino())
}

/// The running kernel's (major, minor), from a release like `6.18.44-fc-v769`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The running kernel's release (uname -r).
pub fn kernel_release() -> String {
    let mut u: libc::utsname =
        // SAFETY: an all-zero utsname is a valid out buffer.
        unsafe { std::mem::zeroed() };
    // SAFETY: uname writes the struct given.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: uname NUL-terminates each field.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uapi::{AttachType, ProgType};
    use std::os::fd::AsFd;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v769"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
        assert_eq!(kernel_version("x"), None);
        assert!(kernel_version(&kernel_release()).is_some());
    }

    fn root() -> bool {
        // SAFETY: geteuid takes nothing and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            eprintln!("skipped: loading BPF needs root");
        }
        root
    }

    /// A program counting this process's syscalls: r1 = the map's slot 0, += 1.
    fn counter(map: &Map) -> Vec<Insn> {
        let mut a = Asm::new();
        a.call(Helper::GetCurrentPidTgid);
        a.rsh_imm(R0, 32);
        a.jne_imm(R0, std::process::id() as i32, "out");
        a.st_w(FP, -4, 0);
        a.mov(R2, FP).add_imm(R2, -4);
        a.ld_map(R1, map.fd());
        a.call(Helper::MapLookupElem);
        a.jeq_imm(R0, 0, "out");
        a.mov_imm(R1, 1);
        a.atomic_fetch_add_dw(R0, 0, R1);
        a.label("out").mov_imm(R0, 0).exit();
        a.finish().unwrap()
    }

    /// The whole path on this kernel: a per-CPU array, a program on raw sys_enter counting
    /// this process's calls, the kernel's run statistics of it, and a refused program's reason.
    #[test]
    fn a_program_loads_attaches_counts_and_is_timed_by_the_kernel() {
        if !root() {
            return;
        }
        let stats = RunStats::enable().expect("BPF_ENABLE_STATS");
        let map = Map::percpu_array(8, 1).unwrap();
        assert_eq!(map.cpus(), cpus::possible().unwrap());
        let on = attach(&counter(&map), &Hook::raw_tracepoint("sys_enter")).unwrap();
        for _ in 0..1000 {
            // SAFETY: getppid takes no arguments and cannot fail.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        let runs = on.program().run_stats().unwrap();
        drop(on);
        drop(stats);
        let n = map.sum_u64(0).unwrap();
        assert!(n >= 1000, "{n} calls counted");
        assert!(runs.count >= 1000 && runs.time_ns > 0, "{runs:?}");
        let name = on_name(&map);
        assert_eq!(name, "sys_enter");
        // No exit: the verifier refuses, and says why in its last line.
        let mut bad = Asm::new();
        bad.mov_imm(R0, 0);
        let e = Program::load(ProgType::RawTracepoint, &bad.finish().unwrap()).unwrap_err();
        assert!(!e.reason().is_empty(), "{e}");
    }

    /// The program name a hook gives, read back from the kernel.
    fn on_name(map: &Map) -> String {
        let on = attach(&counter(map), &Hook::raw_tracepoint("sys_enter")).unwrap();
        let info = on.program().info().unwrap();
        let end = info.name.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&info.name[..end]).into_owned()
    }

    /// BPF_LINK_CREATE attaches a perf-event program to a software event's fd.
    #[test]
    fn a_link_is_created_on_a_perf_event() {
        if !root() {
            return;
        }
        let map = Map::array(8, 1).unwrap();
        assert_eq!(map.cpus(), 1);
        let prog = Program::load(ProgType::PerfEvent, &counter(&map)).unwrap();
        let cpu = cpus::online().unwrap()[0];
        let ev = perf::open_software(uapi::perf::PERF_COUNT_SW_CPU_CLOCK, 1_000_000, cpu).unwrap();
        let link = link::link_create(&prog, AttachType::PerfEvent, Some(ev.as_fd()));
        assert!(link.is_ok(), "{link:?}");
        perf::enable(&ev).unwrap();
        map.update(&0u32.to_ne_bytes(), &5u64.to_ne_bytes())
            .unwrap();
        assert!(map.sum_u64(0).unwrap() >= 5);
    }
}
