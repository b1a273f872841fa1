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
    open(&attr, -1, cpu as libc::c_int, 0)
}

/// perf_event_open(2) of `attr` for `pid` (or a cgroup's fd, with PERF_FLAG_PID_CGROUP in
/// `flags`) on `cpu`, close-on-exec.
fn open(
    attr: &Attr,
    pid: libc::c_int,
    cpu: libc::c_int,
    flags: libc::c_ulong,
) -> std::io::Result<OwnedFd> {
    // SAFETY: attr is a perf_event_attr of the size it declares; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const Attr,
            pid,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC | flags,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: perf_event_open returned this fd just now and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A tracepoint's event (`id`, from tracefs's `events/<category>/<name>/id`) running `prog`
/// (a tracepoint program) at each hit, on every CPU: a tracepoint's programs belong to the
/// event itself, so one perf event (on CPU 0, for every task) attaches it everywhere.
/// Detached when the fd is closed.
pub fn tracepoint(id: u64, prog: &Program) -> std::io::Result<OwnedFd> {
    let attr = Attr {
        kind: PERF_TYPE_TRACEPOINT,
        size: PERF_ATTR_SIZE_VER6,
        config: id,
        sample_period: 1,
        flags: ATTR_DISABLED,
        ..Attr::default()
    };
    let fd = open(&attr, -1, 0, 0)?;
    ioctl(
        &fd,
        PERF_EVENT_IOC_SET_BPF,
        prog.as_fd().as_raw_fd() as libc::c_ulong,
    )?;
    ioctl(&fd, PERF_EVENT_IOC_ENABLE, 0)?;
    Ok(fd)
}

/// Where tracefs may be: its mounts in /proc/self/mounts, then the two usual places.
fn tracefs_roots() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut roots: Vec<String> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"tracefs")).then(|| f.get(1).map(|p| p.to_string()))?
        })
        .collect();
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if !roots.iter().any(|r| r == p) {
            roots.push(p.to_string());
        }
    }
    roots
}

/// A tracepoint's id, from the first tracefs that has it (`category/name`, as
/// `events/filemap/mm_filemap_add_to_page_cache`).
pub fn tracepoint_id(category: &str, name: &str) -> std::io::Result<u64> {
    let text = event_file(category, name, "id")?;
    text.trim().parse().map_err(|_| {
        std::io::Error::other(format!(
            "{category}:{name}'s id holds no number: '{}'",
            text.trim()
        ))
    })
}

/// A file of a tracepoint's folder (`id`, `format`), from the first tracefs that has it.
fn event_file(category: &str, name: &str, file: &str) -> std::io::Result<String> {
    let mut last = std::io::Error::from_raw_os_error(libc::ENOENT);
    for root in tracefs_roots() {
        match std::fs::read_to_string(format!("{root}/events/{category}/{name}/{file}")) {
            Ok(t) => return Ok(t),
            Err(e) => last = e,
        }
    }
    Err(std::io::Error::new(
        last.kind(),
        format!("no tracefs names {category}:{name} ({last}; is tracefs mounted at /sys/kernel/tracing?)"),
    ))
}

/// Where a field of a tracepoint's record sits: (offset, size) in bytes, from tracefs's
/// format file, which is the only stable layout (the records change between kernels).
pub fn tracepoint_field(category: &str, name: &str, field: &str) -> std::io::Result<(u16, u16)> {
    field_in_format(&event_file(category, name, "format")?, field).ok_or_else(|| {
        std::io::Error::other(format!(
            "{category}:{name} has no field '{field}' on this kernel"
        ))
    })
}

/// `field`'s (offset, size) in a tracefs format text: its line
/// `field:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;`, where the name is the
/// declaration's last word before any array bounds.
pub fn field_in_format(text: &str, field: &str) -> Option<(u16, u16)> {
    text.lines().find_map(|line| {
        let mut parts = line.trim().split(';').map(str::trim);
        let decl = parts.next()?.strip_prefix("field:")?;
        let word = decl.split_whitespace().last()?;
        if word.split('[').next()? != field {
            return None;
        }
        let get = |key: &str| -> Option<u16> {
            parts
                .clone()
                .find_map(|p| p.strip_prefix(key)?.parse().ok())
        };
        Some((get("offset:")?, get("size:")?))
    })
}

/// What `perf record -e cpu-clock -F hz -a -g -G CGROUP` opens, without its ring buffer: a
/// cpu-clock event at `hz` on each online CPU for the tasks of one cgroup (`cgroup`: its
/// directory, open), each sample asking for its call chain. Its cost to the tasks is perf's:
/// each switch into or out of the cgroup stops or starts the events (their timers
/// reprogrammed), each sample is an interrupt that walks the stacks; with no buffer the
/// samples are then dropped. Beside them, as `perf record` opens, a dummy event on each CPU
/// for every task that asks for the side-band records (mmap, comm, task): with one open, every
/// mmap on the machine builds its record (the file's path among it), 1.8-2.0 us more a file
/// mapping here, 0.5 us an anonymous one. For measuring what a sampler costs beside a traced
/// run.
pub fn cgroup_sampler(cgroup: &std::fs::File, hz: u64) -> std::io::Result<Vec<OwnedFd>> {
    let online = crate::cpus::online().map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut fds = Vec::new();
    for cpu in online {
        let attr = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: PERF_ATTR_SIZE_VER6,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_period: hz,
            sample_type: PERF_SAMPLE_IP
                | PERF_SAMPLE_TID
                | PERF_SAMPLE_TIME
                | PERF_SAMPLE_CALLCHAIN
                | PERF_SAMPLE_CPU
                | PERF_SAMPLE_PERIOD,
            flags: ATTR_FREQ,
            ..Attr::default()
        };
        fds.push(open(
            &attr,
            cgroup.as_raw_fd(),
            cpu as libc::c_int,
            PERF_FLAG_PID_CGROUP,
        )?);
        let tracking = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: PERF_ATTR_SIZE_VER6,
            config: PERF_COUNT_SW_DUMMY,
            flags: ATTR_TRACKING,
            ..Attr::default()
        };
        fds.push(open(&tracking, -1, cpu as libc::c_int, 0)?);
    }
    Ok(fds)
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
    fn a_fields_place_is_read_from_the_format_text() {
        let text = "name: block_bio_queue\nID: 1234\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\tfield:char rwbs[10];\toffset:28;\tsize:10;\tsigned:0;\n\nprint fmt: \"%d\", REC->dev\n";
        assert_eq!(field_in_format(text, "nr_sector"), Some((24, 4)));
        assert_eq!(field_in_format(text, "rwbs"), Some((28, 10)));
        assert_eq!(field_in_format(text, "common_pid"), Some((4, 4)));
        assert_eq!(field_in_format(text, "sector"), None);
        assert_eq!(field_in_format(text, "order"), None);
    }

    #[test]
    fn the_block_is_perf_event_attr_at_its_sixth_size() {
        assert_eq!(std::mem::size_of::<Attr>(), PERF_ATTR_SIZE_VER6 as usize);
        assert_eq!(std::mem::offset_of!(Attr, flags), 40);
        assert_eq!(std::mem::offset_of!(Attr, sample_regs_intr), 96);
    }
}
