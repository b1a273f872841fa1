//! Where a program attaches, and attaching it: a raw tracepoint by name
//! (BPF_RAW_TRACEPOINT_OPEN), a software perf event on each online CPU, and BPF_LINK_CREATE
//! for what comes next (a tp_btf or fentry program, loaded as `ProgType::Tracing` with its
//! attach type and target BTF id, is attached by `link_create` with no target fd: add a
//! `Hook` for it beside these two).

use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use crate::insn::Insn;
use crate::prog::{Load, Program, Refused};
use crate::sys;
use crate::uapi::{AttachType, ProgType};

/// Where a program attaches.
#[derive(Debug, Clone, PartialEq)]
pub enum Hook {
    /// A raw tracepoint by its event name (sys_enter, sched_switch, ...).
    RawTracepoint(String),
    /// A software perf event (its PERF_COUNT_SW_* config, its sample period and a name),
    /// on every online CPU, each period's end running the program.
    PerfSoftware {
        config: u64,
        period: u64,
        name: String,
    },
    /// A tracepoint by category and name (filemap, mm_filemap_add_to_page_cache), through
    /// perf: the program reads the event's record (its fields where tracefs's format puts
    /// them), which a raw tracepoint does not have.
    Tracepoint { category: String, name: String },
}

impl Hook {
    pub fn raw_tracepoint(name: &str) -> Hook {
        Hook::RawTracepoint(name.to_string())
    }

    /// "raw tracepoint sys_enter", "software event cpu-clock".
    pub fn name(&self) -> String {
        match self {
            Hook::RawTracepoint(n) => format!("raw tracepoint {n}"),
            Hook::PerfSoftware { name, .. } => format!("software event {name}"),
            Hook::Tracepoint { category, name } => format!("tracepoint {category}:{name}"),
        }
    }

    /// The program type this hook runs.
    pub fn prog_type(&self) -> ProgType {
        match self {
            Hook::RawTracepoint(_) => ProgType::RawTracepoint,
            Hook::PerfSoftware { .. } => ProgType::PerfEvent,
            Hook::Tracepoint { .. } => ProgType::Tracepoint,
        }
    }

    /// The bpftool name of a program on it (the event's name, cut to 15 bytes).
    fn prog_name(&self) -> &str {
        match self {
            Hook::RawTracepoint(n) => n,
            Hook::PerfSoftware { name, .. } => name,
            Hook::Tracepoint { name, .. } => name,
        }
    }
}

impl Hook {
    pub fn tracepoint(category: &str, name: &str) -> Hook {
        Hook::Tracepoint {
            category: category.to_string(),
            name: name.to_string(),
        }
    }
}

/// A program loaded and attached; detached when dropped.
#[derive(Debug)]
pub struct Attached {
    prog: Program,
    _links: Vec<OwnedFd>,
}

impl Attached {
    pub fn program(&self) -> &Program {
        &self.prog
    }
}

/// Why a program is not attached: the kernel refused it, or the attachment failed.
#[derive(Debug)]
pub enum AttachError {
    Refused(String, Refused),
    Attach(String, std::io::Error),
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::Refused(hook, r) => {
                write!(f, "the kernel refused the program for {hook} ({r})")
            }
            AttachError::Attach(hook, e) => write!(f, "attaching to the {hook} failed ({e})"),
        }
    }
}

impl std::error::Error for AttachError {}

/// Load `insns` for `hook` and attach it.
pub fn attach(insns: &[Insn], hook: &Hook) -> Result<Attached, AttachError> {
    let load = Load {
        name: hook.prog_name(),
        ..Load::new(hook.prog_type(), insns)
    };
    let prog = Program::load_with(&load).map_err(|r| AttachError::Refused(hook.name(), r))?;
    let links = match hook {
        Hook::RawTracepoint(n) => CString::new(n.as_str())
            .map_err(std::io::Error::other)
            .and_then(|name| sys::raw_tracepoint_open(Some(&name), prog.as_fd()))
            .map(|l| vec![l]),
        Hook::PerfSoftware { config, period, .. } => {
            crate::perf::software_on_each_cpu(*config, *period, &prog)
        }
        Hook::Tracepoint { category, name } => crate::perf::tracepoint_id(category, name)
            .and_then(|id| crate::perf::tracepoint(id, &prog))
            .map(|l| vec![l]),
    }
    .map_err(|e| AttachError::Attach(hook.name(), e))?;
    Ok(Attached {
        prog,
        _links: links,
    })
}

/// BPF_LINK_CREATE for `prog`: a tracing program loaded with its target (tp_btf, fentry;
/// `target` None), or a perf event's (`target` its fd, `AttachType::PerfEvent`).
pub fn link_create(
    prog: &Program,
    attach_type: AttachType,
    target: Option<std::os::fd::BorrowedFd>,
) -> std::io::Result<OwnedFd> {
    let mut l = sys::LinkCreate::new(prog.as_fd(), attach_type);
    if let Some(t) = target {
        l = l.target_fd(t);
    }
    l.call()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_name_themselves_and_their_program_type() {
        let t = Hook::raw_tracepoint("sys_enter");
        assert_eq!(t.name(), "raw tracepoint sys_enter");
        assert_eq!(t.prog_type(), ProgType::RawTracepoint);
        let p = Hook::PerfSoftware {
            config: 0,
            period: 1,
            name: "cpu-clock".into(),
        };
        assert_eq!(p.name(), "software event cpu-clock");
        assert_eq!(p.prog_type(), ProgType::PerfEvent);
        let e = AttachError::Attach(t.name(), std::io::Error::from_raw_os_error(libc::ENOENT));
        assert!(e
            .to_string()
            .starts_with("attaching to the raw tracepoint sys_enter failed ("));
    }
}
