//! perf_event_open(2) for a software event on each online CPU, with a BPF program run at the
//! end of each sample period: the typed attribute block and the two ioctls.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use crate::prog::Program;
use crate::uapi::perf::*;

/// struct perf_event_attr as far as PERF_ATTR_SIZE_VER6 (the fields past `read_format` zero).
#[repr(C)]
#[derive(Debug, Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    _reserved_2: u16,
    aux_sample_size: u32,
    _reserved_3: u32,
}

/// One software event (`config`, a PERF_COUNT_SW_*) per online CPU, for every task, running
/// `prog` (a perf-event program) at the end of each `period` events. Period 1 without
/// PERF_SAMPLE_PERIOD is never throttled (perf_swevent_overflow's first overflow passes
/// throttle = 0), so no occurrence of a counted event is lost to the sample rate limit.
/// Detached when the fds are closed.
pub fn software_on_each_cpu(
    config: u64,
    period: u64,
    prog: &Program,
) -> std::io::Result<Vec<OwnedFd>> {
    let online = crate::cpus::online().map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut fds = Vec::new();
    for cpu in online {
        let fd = open_software(config, period, cpu)?;
        ioctl(
            &fd,
            PERF_EVENT_IOC_SET_BPF,
            prog.as_fd().as_raw_fd() as libc::c_ulong,
        )?;
        ioctl(&fd, PERF_EVENT_IOC_ENABLE, 0)?;
        fds.push(fd);
    }
    Ok(fds)
}

/// A software event on `cpu` for every task, disabled (until `enable`), sampling every
/// `period` events.
pub fn open_software(config: u64, period: u64, cpu: usize) -> std::io::Result<OwnedFd> {
    let attr = Attr {
        kind: PERF_TYPE_SOFTWARE,
        size: PERF_ATTR_SIZE_VER6,
        config,
        sample_period: period,
        flags: ATTR_DISABLED,
        ..Attr::default()
    };
    // SAFETY: attr is a perf_event_attr of the size it declares; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            -1 as libc::c_int,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: perf_event_open returned this fd just now and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Start counting (and running its program) on an event `open_software` opened.
pub fn enable(fd: &OwnedFd) -> std::io::Result<()> {
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, arg: libc::c_ulong) -> std::io::Result<()> {
    // SAFETY: an ioctl on a perf event fd we own, with an integer argument.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_perf_event_attr_at_its_sixth_size() {
        assert_eq!(std::mem::size_of::<Attr>(), PERF_ATTR_SIZE_VER6 as usize);
        assert_eq!(std::mem::offset_of!(Attr, flags), 40);
        assert_eq!(std::mem::offset_of!(Attr, sample_regs_intr), 96);
    }
}
