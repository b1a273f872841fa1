//! The kernel's numbers, named as include/uapi/linux/bpf_common.h and bpf.h name them: the
//! parts of an opcode (class, size, mode, source, operation), the bpf(2) commands, and the map,
//! program and attach types this crate uses. Nothing outside this file spells one as a number.

#![allow(clippy::upper_case_acronyms)]

// Instruction classes (the opcode's low three bits).
pub const BPF_LD: u8 = 0x00;
pub const BPF_LDX: u8 = 0x01;
pub const BPF_ST: u8 = 0x02;
pub const BPF_STX: u8 = 0x03;
pub const BPF_ALU: u8 = 0x04;
pub const BPF_JMP: u8 = 0x05;
pub const BPF_JMP32: u8 = 0x06;
pub const BPF_ALU64: u8 = 0x07;

// Sizes of a load or store.
pub const BPF_W: u8 = 0x00;
pub const BPF_H: u8 = 0x08;
pub const BPF_B: u8 = 0x10;
pub const BPF_DW: u8 = 0x18;

// Modes of a load or store.
pub const BPF_IMM: u8 = 0x00;
pub const BPF_MEM: u8 = 0x60;
pub const BPF_ATOMIC: u8 = 0xc0;

// Source of an ALU or jump operand: the immediate or the src register.
pub const BPF_K: u8 = 0x00;
pub const BPF_X: u8 = 0x08;

// ALU operations.
pub const BPF_ADD: u8 = 0x00;
pub const BPF_SUB: u8 = 0x10;
pub const BPF_MUL: u8 = 0x20;
pub const BPF_DIV: u8 = 0x30;
pub const BPF_OR: u8 = 0x40;
pub const BPF_AND: u8 = 0x50;
pub const BPF_LSH: u8 = 0x60;
pub const BPF_RSH: u8 = 0x70;
pub const BPF_NEG: u8 = 0x80;
pub const BPF_MOD: u8 = 0x90;
pub const BPF_XOR: u8 = 0xa0;
pub const BPF_MOV: u8 = 0xb0;
pub const BPF_ARSH: u8 = 0xc0;

// Jump operations.
pub const BPF_JA: u8 = 0x00;
pub const BPF_JEQ: u8 = 0x10;
pub const BPF_JGT: u8 = 0x20;
pub const BPF_JGE: u8 = 0x30;
pub const BPF_JSET: u8 = 0x40;
pub const BPF_JNE: u8 = 0x50;
pub const BPF_JSGT: u8 = 0x60;
pub const BPF_JSGE: u8 = 0x70;
pub const BPF_CALL: u8 = 0x80;
pub const BPF_EXIT: u8 = 0x90;
pub const BPF_JLT: u8 = 0xa0;
pub const BPF_JLE: u8 = 0xb0;
pub const BPF_JSLT: u8 = 0xc0;
pub const BPF_JSLE: u8 = 0xd0;

/// An atomic operation's immediate: fetch the old value into src.
pub const BPF_FETCH: i32 = 0x01;
/// ld_imm64's src register when its immediate is a map's fd.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;

/// BPF_CLASS(code).
pub const fn class(code: u8) -> u8 {
    code & 0x07
}
/// BPF_OP(code).
pub const fn op(code: u8) -> u8 {
    code & 0xf0
}

/// The bpf(2) commands this crate issues (enum bpf_cmd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Cmd {
    MapCreate = 0,
    MapLookupElem = 1,
    MapUpdateElem = 2,
    ProgLoad = 5,
    ObjGetInfoByFd = 15,
    RawTracepointOpen = 17,
    LinkCreate = 28,
    EnableStats = 32,
}

/// Map types (enum bpf_map_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    Hash = 1,
    Array = 2,
    PercpuHash = 5,
    PercpuArray = 6,
}

impl MapType {
    /// A per-CPU map: each key holds one value per possible CPU.
    pub fn per_cpu(self) -> bool {
        matches!(self, MapType::PercpuHash | MapType::PercpuArray)
    }
}

/// Program types (enum bpf_prog_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ProgType {
    Kprobe = 2,
    /// A tracepoint through perf: its context is the event's record, as tracefs's format
    /// file lays it out.
    Tracepoint = 5,
    PerfEvent = 7,
    RawTracepoint = 17,
    /// tp_btf, fentry, fexit: loaded with an expected attach type and a BTF id.
    Tracing = 26,
}

/// Attach types (enum bpf_attach_type), for a tracing program's load and BPF_LINK_CREATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AttachType {
    /// tp_btf: a raw tracepoint with its BTF-typed arguments.
    TraceRawTp = 23,
    TraceFentry = 24,
    TraceFexit = 25,
    PerfEvent = 41,
}

/// BPF_ENABLE_STATS's type: the run time and count of every program (enum bpf_stats_type).
pub const BPF_STATS_RUN_TIME: u32 = 0;

/// perf_event_open(2)'s numbers (include/uapi/linux/perf_event.h).
pub mod perf {
    pub const PERF_TYPE_SOFTWARE: u32 = 1;
    pub const PERF_TYPE_TRACEPOINT: u32 = 2;
    /// perf_event_attr's size at PERF_ATTR_SIZE_VER6, the struct `perf::Attr` writes.
    pub const PERF_ATTR_SIZE_VER6: u32 = 120;
    pub const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    /// perf_event_open's pid is a cgroup directory's fd.
    pub const PERF_FLAG_PID_CGROUP: libc::c_ulong = 4;
    /// perf_event_attr's flag bit: sample_period holds a frequency (Hz).
    pub const ATTR_FREQ: u64 = 1 << 10;
    /// sample_type bits: what `perf record -g` asks of each sample.
    pub const PERF_SAMPLE_IP: u64 = 1;
    pub const PERF_SAMPLE_TID: u64 = 1 << 1;
    pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
    pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
    pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
    pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
    /// perf_event_attr's flag bit `disabled`.
    pub const ATTR_DISABLED: u64 = 1;
    /// perf_event_attr's side-band flag bits, as `perf record`'s tracking event sets them:
    /// mmap, comm, task, sample_id_all, mmap2, comm_exec.
    pub const ATTR_TRACKING: u64 =
        (1 << 8) | (1 << 9) | (1 << 13) | (1 << 18) | (1 << 23) | (1 << 24);
    /// The dummy software event, which counts nothing (a carrier for side-band records).
    pub const PERF_COUNT_SW_DUMMY: u64 = 9;
    /// _IO('$', 0).
    pub const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    /// _IOW('$', 8, __u32).
    pub const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    // Software events (enum perf_sw_ids).
    pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
    pub const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
    pub const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers, checked against include/uapi/linux/bpf.h and perf_event.h (kernel 6.18).
    #[test]
    fn the_numbers_are_the_kernels() {
        assert_eq!(
            [
                Cmd::MapCreate as i32,
                Cmd::MapLookupElem as i32,
                Cmd::MapUpdateElem as i32,
                Cmd::ProgLoad as i32,
                Cmd::ObjGetInfoByFd as i32,
                Cmd::RawTracepointOpen as i32,
                Cmd::LinkCreate as i32,
                Cmd::EnableStats as i32
            ],
            [0, 1, 2, 5, 15, 17, 28, 32]
        );
        assert_eq!(
            [
                MapType::Hash as u32,
                MapType::Array as u32,
                MapType::PercpuHash as u32,
                MapType::PercpuArray as u32
            ],
            [1, 2, 5, 6]
        );
        assert_eq!(
            [
                ProgType::Kprobe as u32,
                ProgType::Tracepoint as u32,
                ProgType::PerfEvent as u32,
                ProgType::RawTracepoint as u32,
                ProgType::Tracing as u32
            ],
            [2, 5, 7, 17, 26]
        );
        assert_eq!(
            [
                AttachType::TraceRawTp as u32,
                AttachType::TraceFentry as u32,
                AttachType::TraceFexit as u32,
                AttachType::PerfEvent as u32
            ],
            [23, 24, 25, 41]
        );
        assert!(MapType::PercpuArray.per_cpu() && !MapType::Hash.per_cpu());
        assert_eq!((class(0xbf), op(0xbf)), (BPF_ALU64, BPF_MOV));
    }
}
