//! bpf(2), one typed attribute block per command. Each block is the kernel's own layout of its
//! part of `union bpf_attr` (include/uapi/linux/bpf.h; the tests check each field's offset
//! against the header's), filled through named setters. A block that carries a pointer borrows
//! what it points at, so the kernel never reads a buffer that is gone.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::insn::INSN_SIZE;
use crate::uapi::{AttachType, Cmd, MapType, ProgType};

/// The longest object name the kernel keeps (BPF_OBJ_NAME_LEN, the NUL included).
pub const OBJ_NAME_LEN: usize = 16;

/// bpf(cmd, attr, size).
///
/// # Safety
/// `attr` points at `size` readable and writable bytes laid out as `cmd`'s part of
/// `union bpf_attr`, and every pointer in it points at a live buffer of the size the same
/// block declares for it.
unsafe fn bpf<T>(cmd: Cmd, attr: &mut T) -> std::io::Result<i32> {
    let r = libc::syscall(
        libc::SYS_bpf,
        cmd as libc::c_int,
        attr as *mut T,
        std::mem::size_of::<T>() as libc::c_uint,
    );
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: bpf(2) returned this fd just now and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// An object name as the kernel takes it: at most 15 bytes of [A-Za-z0-9_.], NUL-padded;
/// other bytes become '_'.
fn obj_name(name: &str) -> [u8; OBJ_NAME_LEN] {
    let mut out = [0u8; OBJ_NAME_LEN];
    for (o, b) in out.iter_mut().zip(name.bytes().take(OBJ_NAME_LEN - 1)) {
        *o = if b.is_ascii_alphanumeric() || b == b'.' {
            b
        } else {
            b'_'
        };
    }
    out
}

/// BPF_MAP_CREATE's block.
#[repr(C)]
#[derive(Debug, Default)]
pub struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; OBJ_NAME_LEN],
}

impl MapCreate {
    pub fn new(kind: MapType, key_size: u32, value_size: u32, max_entries: u32) -> MapCreate {
        MapCreate {
            map_type: kind as u32,
            key_size,
            value_size,
            max_entries,
            ..MapCreate::default()
        }
    }
    pub fn name(mut self, name: &str) -> MapCreate {
        self.map_name = obj_name(name);
        self
    }
    pub fn call(mut self) -> std::io::Result<OwnedFd> {
        // SAFETY: the block is MapCreate's layout and holds no pointer.
        unsafe { bpf(Cmd::MapCreate, &mut self) }.map(owned)
    }
}

/// BPF_MAP_LOOKUP_ELEM's and BPF_MAP_UPDATE_ELEM's block.
#[repr(C)]
#[derive(Debug, Default)]
struct MapElem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Copy the value of `key` in `map` into `value` (the kernel writes the map's whole value:
/// value_size for a plain map, value_size rounded up to 8 times the possible CPUs for a
/// per-CPU one).
///
/// # Safety
/// `key` holds the map's key size and `value` at least what the kernel writes for this map.
pub(crate) unsafe fn lookup(map: BorrowedFd, key: &[u8], value: &mut [u8]) -> std::io::Result<()> {
    let mut a = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..MapElem::default()
    };
    // SAFETY: the caller sizes key and value for this map; both outlive the call.
    bpf(Cmd::MapLookupElem, &mut a).map(|_| ())
}

/// Set `key`'s value in `map` (flags: BPF_ANY, BPF_NOEXIST, BPF_EXIST).
///
/// # Safety
/// `key` holds the map's key size and `value` what the kernel reads for this map (as
/// `lookup`'s).
pub(crate) unsafe fn update(
    map: BorrowedFd,
    key: &[u8],
    value: &[u8],
    flags: u64,
) -> std::io::Result<()> {
    let mut a = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags,
        ..MapElem::default()
    };
    // SAFETY: the caller sizes key and value for this map; both outlive the call.
    bpf(Cmd::MapUpdateElem, &mut a).map(|_| ())
}

/// BPF_PROG_LOAD's block, up to the fields a tracing program (tp_btf, fentry) needs.
#[repr(C)]
#[derive(Debug, Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; OBJ_NAME_LEN],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    core_relo_cnt: u32,
}

/// BPF_PROG_LOAD, its instructions, license and verifier log borrowed for the call.
pub struct ProgLoad<'a> {
    attr: ProgLoadAttr,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> ProgLoad<'a> {
    /// `code`: the instructions' bytes (`Insn::bytes`, one after another).
    pub fn new(kind: ProgType, code: &'a [u8], license: &'a CStr) -> ProgLoad<'a> {
        ProgLoad {
            attr: ProgLoadAttr {
                prog_type: kind as u32,
                insn_cnt: (code.len() / INSN_SIZE) as u32,
                insns: code.as_ptr() as u64,
                license: license.as_ptr() as u64,
                ..ProgLoadAttr::default()
            },
            _borrows: PhantomData,
        }
    }
    /// The verifier writes its log into `buf` (level 1: what it refused and why).
    pub fn log(mut self, buf: &'a mut [u8]) -> ProgLoad<'a> {
        self.attr.log_level = 1;
        self.attr.log_size = buf.len() as u32;
        self.attr.log_buf = buf.as_mut_ptr() as u64;
        self
    }
    pub fn name(mut self, name: &str) -> ProgLoad<'a> {
        self.attr.prog_name = obj_name(name);
        self
    }
    /// A tracing program's attach type (tp_btf: TraceRawTp; fentry: TraceFentry).
    pub fn expected_attach_type(mut self, t: AttachType) -> ProgLoad<'a> {
        self.attr.expected_attach_type = t as u32;
        self
    }
    /// A tracing program's target: the vmlinux BTF id of the function or `btf_trace_<tp>`.
    pub fn attach_btf_id(mut self, id: u32) -> ProgLoad<'a> {
        self.attr.attach_btf_id = id;
        self
    }
    pub fn call(mut self) -> std::io::Result<OwnedFd> {
        // SAFETY: the block is ProgLoad's layout; its pointers (instructions, license, log)
        // are borrowed for 'a, which outlives this call, with the sizes the block declares.
        unsafe { bpf(Cmd::ProgLoad, &mut self.attr) }.map(owned)
    }
}

/// BPF_RAW_TRACEPOINT_OPEN's block.
#[repr(C)]
#[derive(Debug, Default)]
struct RawTracepointOpen {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

/// Attach `prog` (a raw tracepoint program) to the raw tracepoint `name`; None for a tracing
/// program loaded with its target (tp_btf, fentry). Detached when the fd is closed.
pub fn raw_tracepoint_open(name: Option<&CStr>, prog: BorrowedFd) -> std::io::Result<OwnedFd> {
    let mut a = RawTracepointOpen {
        name: name.map_or(0, |n| n.as_ptr() as u64),
        prog_fd: prog.as_raw_fd() as u32,
        _pad: 0,
    };
    // SAFETY: the block is RawTracepointOpen's layout; the name is a live NUL-ended string.
    unsafe { bpf(Cmd::RawTracepointOpen, &mut a) }.map(owned)
}

/// BPF_LINK_CREATE's block (its common part and a tracing program's target BTF id).
#[repr(C)]
#[derive(Debug, Default)]
pub struct LinkCreate {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    target_btf_id: u32,
    _pad: u32,
}

impl LinkCreate {
    pub fn new(prog: BorrowedFd, attach_type: AttachType) -> LinkCreate {
        LinkCreate {
            prog_fd: prog.as_raw_fd() as u32,
            attach_type: attach_type as u32,
            ..LinkCreate::default()
        }
    }
    /// What the link attaches to: a perf event's fd, a cgroup's ...; none for tp_btf/fentry.
    pub fn target_fd(mut self, fd: BorrowedFd) -> LinkCreate {
        self.target_fd = fd.as_raw_fd() as u32;
        self
    }
    pub fn target_btf_id(mut self, id: u32) -> LinkCreate {
        self.target_btf_id = id;
        self
    }
    pub fn call(mut self) -> std::io::Result<OwnedFd> {
        // SAFETY: the block is LinkCreate's layout and holds no pointer.
        unsafe { bpf(Cmd::LinkCreate, &mut self) }.map(owned)
    }
}

/// BPF_ENABLE_STATS's block.
#[repr(C)]
#[derive(Debug, Default)]
struct EnableStats {
    stats_type: u32,
}

/// Turn on the kernel's run time and count of every BPF program (BPF_STATS_RUN_TIME) for as
/// long as the returned fd is open.
pub fn enable_stats(stats_type: u32) -> std::io::Result<OwnedFd> {
    let mut a = EnableStats { stats_type };
    // SAFETY: the block is EnableStats's layout and holds no pointer.
    unsafe { bpf(Cmd::EnableStats, &mut a) }.map(owned)
}

/// BPF_OBJ_GET_INFO_BY_FD's block.
#[repr(C)]
#[derive(Debug, Default)]
struct ObjInfo {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// struct bpf_prog_info: what the kernel says of a loaded program. The pointer fields stay
/// zero (nothing is copied out through them).
#[repr(C)]
#[derive(Debug, Default, Clone)]
pub struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    pub tag: [u8; 8],
    pub jited_prog_len: u32,
    pub xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    pub load_time: u64,
    pub created_by_uid: u32,
    pub nr_map_ids: u32,
    map_ids: u64,
    pub name: [u8; OBJ_NAME_LEN],
    pub ifindex: u32,
    pub gpl_compatible: u32,
    pub netns_dev: u64,
    pub netns_ino: u64,
    nr_jited_ksyms: u32,
    nr_jited_func_lens: u32,
    jited_ksyms: u64,
    jited_func_lens: u64,
    pub btf_id: u32,
    func_info_rec_size: u32,
    func_info: u64,
    nr_func_info: u32,
    nr_line_info: u32,
    line_info: u64,
    jited_line_info: u64,
    nr_jited_line_info: u32,
    line_info_rec_size: u32,
    jited_line_info_rec_size: u32,
    nr_prog_tags: u32,
    prog_tags: u64,
    /// Time spent in the program while stats were on (BPF_ENABLE_STATS), ns.
    pub run_time_ns: u64,
    /// Its runs while stats were on.
    pub run_cnt: u64,
    pub recursion_misses: u64,
    pub verified_insns: u32,
    pub attach_btf_obj_id: u32,
    pub attach_btf_id: u32,
    _pad: u32,
}

/// What the kernel says of the program `prog`.
pub fn prog_info(prog: BorrowedFd) -> std::io::Result<ProgInfo> {
    let mut info = ProgInfo::default();
    let mut a = ObjInfo {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfo>() as u32,
        info: &mut info as *mut ProgInfo as u64,
    };
    // SAFETY: the block is ObjInfo's layout; `info` is a live bpf_prog_info of the length
    // declared, with every pointer field zero, so the kernel copies nothing through them.
    unsafe { bpf(Cmd::ObjGetInfoByFd, &mut a) }?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Each block against the offsets of include/uapi/linux/bpf.h (kernel 6.18's, as
    /// offsetof() gives them).
    #[test]
    fn every_block_has_the_kernels_layout() {
        assert_eq!(offset_of!(MapCreate, max_entries), 12);
        assert_eq!(offset_of!(MapCreate, map_name), 28);
        assert_eq!(
            (
                offset_of!(MapElem, key),
                offset_of!(MapElem, value),
                offset_of!(MapElem, flags)
            ),
            (8, 16, 24)
        );
        assert_eq!(offset_of!(ProgLoadAttr, insns), 8);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, kern_version), 40);
        assert_eq!(offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(offset_of!(ProgLoadAttr, attach_btf_id), 108);
        assert_eq!(offset_of!(ProgLoadAttr, attach_prog_fd), 112);
        assert_eq!(size_of::<ProgLoadAttr>(), 120);
        assert_eq!(offset_of!(RawTracepointOpen, prog_fd), 8);
        assert_eq!(offset_of!(LinkCreate, attach_type), 8);
        assert_eq!(offset_of!(LinkCreate, flags), 12);
        assert_eq!(offset_of!(LinkCreate, target_btf_id), 16);
        assert_eq!(
            (offset_of!(ObjInfo, info_len), offset_of!(ObjInfo, info)),
            (4, 8)
        );
        assert_eq!(offset_of!(ProgInfo, name), 64);
        assert_eq!(offset_of!(ProgInfo, run_time_ns), 192);
        assert_eq!(offset_of!(ProgInfo, run_cnt), 200);
        assert_eq!(offset_of!(ProgInfo, recursion_misses), 208);
        assert_eq!(size_of::<ProgInfo>(), 232);
    }

    #[test]
    fn names_are_cut_to_fifteen_bytes_of_the_kernels_alphabet() {
        assert_eq!(&obj_name("costlab.sys")[..12], b"costlab.sys\0");
        let long = obj_name("sched_switch-counter-long");
        assert_eq!(&long[..15], b"sched_switch_co");
        assert_eq!(long[15], 0);
    }
}
