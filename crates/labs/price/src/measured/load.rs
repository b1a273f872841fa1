//! Loading the split's programs with bpf(2): its maps, each program (a raw tracepoint's, or a
//! BPF program on a software perf event), its attachment, and the per-CPU slots read back.
//! Every failure comes back as an error naming the program and the kernel's reason (the
//! verifier's last line for a refused program): none is dropped.

use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::Result;

use crate::bpf::{kernel_version, owned, Attr, Insn};

const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_LOOKUP_ELEM: i64 = 1;
const BPF_PROG_LOAD: i64 = 5;
const BPF_RAW_TRACEPOINT_OPEN: i64 = 17;
pub const MAP_HASH: u32 = 1;
pub const MAP_PERCPU_ARRAY: u32 = 6;
const PROG_RAW_TRACEPOINT: u32 = 17;
const PROG_PERF_EVENT: u32 = 7;

/// A map of `entries` values of `value` bytes (keys are u32).
pub fn map(kind: u32, value: u32, entries: u32) -> Result<OwnedFd> {
    Attr::new()
        .u32(0, kind)
        .u32(4, 4)
        .u32(8, value)
        .u32(12, entries)
        .call(BPF_MAP_CREATE)
        .map(owned)
        .map_err(|e| anyhow::anyhow!("creating a BPF map ({e})"))
}

/// Where a program attaches.
#[derive(Debug, Clone)]
pub enum Hook {
    /// A raw tracepoint by its event name (sys_enter, sched_switch, ...).
    RawTracepoint(String),
    /// A software perf event (its config number, its sample period and name), on every
    /// online CPU, each period's end running the program.
    PerfSoftware(u64, u64, String),
}

impl Hook {
    pub fn name(&self) -> String {
        match self {
            Hook::RawTracepoint(n) => format!("raw tracepoint {n}"),
            Hook::PerfSoftware(_, _, n) => format!("software event {n}"),
        }
    }
}

/// A loaded and attached program; detached when dropped.
pub struct Attached {
    _prog: OwnedFd,
    _links: Vec<OwnedFd>,
}

/// Load `insns` for `hook` and attach it.
pub fn attach(insns: &[Insn], hook: &Hook) -> Result<Attached> {
    let code: Vec<u8> = insns.iter().flat_map(|i| i.bytes()).collect();
    let license = b"GPL\0";
    let mut log = vec![0u8; 256 * 1024];
    let mut attr = Attr::new();
    attr.u32(4, insns.len() as u32)
        .u64(8, code.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64);
    match hook {
        Hook::RawTracepoint(_) => {
            attr.u32(0, PROG_RAW_TRACEPOINT);
        }
        Hook::PerfSoftware(..) => {
            attr.u32(0, PROG_PERF_EVENT);
        }
    }
    let prog = attr.call(BPF_PROG_LOAD).map(owned).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        let last = text
            .trim_end_matches('\0')
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        anyhow::anyhow!(
            "the kernel refused the program for {} ({e}: {last})",
            hook.name()
        )
    })?;
    if let Hook::PerfSoftware(config, period, _) = hook {
        let links = perf_software(*config, *period, &prog)
            .map_err(|e| anyhow::anyhow!("attaching to the {} failed ({e})", hook.name()))?;
        return Ok(Attached {
            _prog: prog,
            _links: links,
        });
    }
    let name = match hook {
        Hook::RawTracepoint(n) => Some(std::ffi::CString::new(n.as_str())?),
        _ => None,
    };
    let link = Attr::new()
        .u64(0, name.as_ref().map_or(0, |n| n.as_ptr() as u64))
        .u32(8, prog.as_raw_fd() as u32)
        .call(BPF_RAW_TRACEPOINT_OPEN)
        .map(owned)
        .map_err(|e| anyhow::anyhow!("attaching to the {} failed ({e})", hook.name()))?;
    Ok(Attached {
        _prog: prog,
        _links: vec![link],
    })
}

/// The CPUs online now, from /sys/devices/system/cpu/online.
fn online_cpus() -> std::io::Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    let bad = || std::io::Error::other(format!("cannot parse the online CPUs {:?}", text.trim()));
    let mut out = Vec::new();
    for r in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        out.extend(a..=b);
    }
    Ok(out)
}

/// One software event per online CPU, for every task, running `prog` at the end of each
/// `period`. Period 1 without PERF_SAMPLE_PERIOD is never throttled (perf_swevent_overflow's
/// first overflow passes throttle = 0), so no occurrence of a counted event is lost to the
/// sample rate limit.
fn perf_software(config: u64, period: u64, prog: &OwnedFd) -> std::io::Result<Vec<OwnedFd>> {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    const IOC_ENABLE: libc::c_ulong = 0x2400;
    const IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    let mut fds = Vec::new();
    for cpu in online_cpus()? {
        let mut attr = [0u8; 120];
        attr[0..4].copy_from_slice(&PERF_TYPE_SOFTWARE.to_le_bytes());
        attr[4..8].copy_from_slice(&120u32.to_le_bytes());
        attr[8..16].copy_from_slice(&config.to_le_bytes());
        attr[16..24].copy_from_slice(&period.to_le_bytes()); // sample_period
        attr[40..48].copy_from_slice(&1u64.to_le_bytes()); // disabled, until the program is set
                                                           // SAFETY: attr is a zeroed perf_event_attr of the size it declares; the kernel reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                -1 as libc::c_int,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = owned(fd as i32);
        for (req, arg) in [
            (IOC_SET_BPF, prog.as_raw_fd() as libc::c_ulong),
            (IOC_ENABLE, 0),
        ] {
            // SAFETY: an ioctl on the perf event fd just opened, with an integer argument.
            if unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        fds.push(fd);
    }
    Ok(fds)
}

/// Every CPU's copy of per-CPU array slot `key` (`value` bytes each, padded to 8 as the kernel
/// copies them), for `cpus` possible CPUs.
pub fn read_percpu(map: &OwnedFd, key: u32, value: u32, cpus: usize) -> Result<Vec<Vec<u8>>> {
    let stride = value.div_ceil(8) as usize * 8;
    let mut buf = vec![0u8; stride * cpus];
    Attr::new()
        .u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, buf.as_mut_ptr() as u64)
        .call(BPF_MAP_LOOKUP_ELEM)
        .map_err(|e| anyhow::anyhow!("reading a BPF map ({e})"))?;
    Ok(buf.chunks(stride).map(|c| c.to_vec()).collect())
}

/// What the split needs that a kernel may lack: None, or one line naming it and the version
/// that has it.
pub fn missing(release: &str, btf: bool) -> Option<String> {
    match kernel_version(release) {
        Some(v) if v < (5, 5) => Some(format!(
            "kernel {release} lacks bpf_probe_read_kernel and BTF for its own types, which the measured split needs (5.5 or later); use --count-only"
        )),
        None => Some(format!(
            "cannot tell the kernel's version from '{release}': the measured split needs 5.5 or later; use --count-only"
        )),
        _ if !btf => Some(format!(
            "kernel {release} has no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF, 5.5 or later with the option), which the measured split needs; use --count-only"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v769"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
        assert_eq!(kernel_version("x"), None);
    }

    #[test]
    fn what_is_missing_is_one_line_with_the_version_that_has_it() {
        assert_eq!(missing("6.18.44", true), None);
        let old = missing("5.4.0-100-generic", true).unwrap();
        assert!(old.contains("5.5 or later") && !old.contains('\n'));
        let nobtf = missing("6.1.0", false).unwrap();
        assert!(nobtf.contains("CONFIG_DEBUG_INFO_BTF") && !nobtf.contains('\n'));
        assert!(missing("junk", true).unwrap().contains("version"));
    }
}
