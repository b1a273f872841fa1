//! Loading a program, and what the verifier says when it refuses one; the kernel's run
//! statistics of a loaded program (BPF_ENABLE_STATS, then run_time_ns and run_cnt from
//! BPF_OBJ_GET_INFO_BY_FD).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::insn::Insn;
use crate::sys;
use crate::uapi::{AttachType, ProgType, BPF_STATS_RUN_TIME};

/// The verifier's log buffer: enough for the log of a refused program of a few hundred
/// instructions (the kernel keeps the tail where it is longer).
pub const LOG_SIZE: usize = 256 * 1024;

/// A loaded program while its fd is open (and while a link holds it).
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    kind: ProgType,
}

/// What to load: the type, the instructions and, for a tracing program (tp_btf, fentry),
/// the attach type and target BTF id.
#[derive(Debug, Clone)]
pub struct Load<'a> {
    pub kind: ProgType,
    pub insns: &'a [Insn],
    /// Shown by `bpftool prog` (at most 15 bytes kept).
    pub name: &'a str,
    pub expected_attach_type: Option<AttachType>,
    pub attach_btf_id: u32,
}

impl<'a> Load<'a> {
    pub fn new(kind: ProgType, insns: &'a [Insn]) -> Load<'a> {
        Load {
            kind,
            insns,
            name: "",
            expected_attach_type: None,
            attach_btf_id: 0,
        }
    }
}

/// A program the kernel refused: its error and the verifier's log.
#[derive(Debug)]
pub struct Refused {
    pub err: std::io::Error,
    pub log: String,
}

impl Refused {
    /// The log's last line that says something: the verifier's reason.
    pub fn reason(&self) -> &str {
        last_line(&self.log)
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.err, self.reason())
    }
}

impl std::error::Error for Refused {}

/// The last non-blank line of a verifier log.
pub fn last_line(log: &str) -> &str {
    log.trim_end_matches('\0')
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
}

/// The text of a log buffer, up to its first NUL.
fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Program {
    /// Load `insns` as a program of type `kind` (GPL, so every helper is allowed).
    pub fn load(kind: ProgType, insns: &[Insn]) -> Result<Program, Refused> {
        Program::load_with(&Load::new(kind, insns))
    }

    /// Load `l`. The verifier is asked for no log first: a log at level 1 formats a line for
    /// every instruction it walks, and the split's dozen programs were loaded some 20 times a
    /// price (its tracer calibration attaches them to each of its loops). Only a refused load is tried again
    /// with the log, for the reason it gives.
    pub fn load_with(l: &Load) -> Result<Program, Refused> {
        let code: Vec<u8> = l.insns.iter().flat_map(|i| i.bytes()).collect();
        match Program::try_load(l, &code, None) {
            Ok(p) => Ok(p),
            Err(_) => {
                let mut log = vec![0u8; LOG_SIZE];
                Program::try_load(l, &code, Some(&mut log))
            }
        }
    }

    /// One load of `code` as `l` says, with the verifier's log in `log` where given. The
    /// verifier gives up with EAGAIN when a signal is pending on the loading thread (a Ctrl-C
    /// arriving mid-load): the handler has run by the time the call returns, so the load is
    /// tried again, a few times, as libbpf does.
    fn try_load(l: &Load, code: &[u8], mut log: Option<&mut [u8]>) -> Result<Program, Refused> {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut load = sys::ProgLoad::new(l.kind, code, c"GPL")
                .name(l.name)
                .attach_btf_id(l.attach_btf_id);
            if let Some(t) = l.expected_attach_type {
                load = load.expected_attach_type(t);
            }
            let called = match log.as_deref_mut() {
                Some(buf) => {
                    buf.iter_mut().for_each(|b| *b = 0);
                    load.log(buf).call()
                }
                None => load.call(),
            };
            match called {
                Ok(fd) => return Ok(Program { fd, kind: l.kind }),
                Err(err) if err.raw_os_error() == Some(libc::EAGAIN) && tries < 5 => continue,
                Err(err) => {
                    return Err(Refused {
                        err,
                        log: log.as_deref().map(log_text).unwrap_or_default(),
                    })
                }
            }
        }
    }

    pub fn kind(&self) -> ProgType {
        self.kind
    }

    /// What the kernel says of it now (its id, name, run statistics ...).
    pub fn info(&self) -> std::io::Result<sys::ProgInfo> {
        sys::prog_info(self.fd.as_fd())
    }

    /// Its runs and the time spent in them so far, counted while `RunStats` were on.
    pub fn run_stats(&self) -> std::io::Result<Runs> {
        let i = self.info()?;
        Ok(Runs {
            count: i.run_cnt,
            time_ns: i.run_time_ns,
        })
    }
}

impl AsFd for Program {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A program's runs and their time, ns (the kernel's run statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runs {
    pub count: u64,
    pub time_ns: u64,
}

/// The kernel counting every program's runs and their time (two clock reads a run) while
/// this is held (BPF_ENABLE_STATS; kernel 5.8 and later).
#[derive(Debug)]
pub struct RunStats {
    _fd: OwnedFd,
}

impl RunStats {
    pub fn enable() -> std::io::Result<RunStats> {
        sys::enable_stats(BPF_STATS_RUN_TIME).map(|fd| RunStats { _fd: fd })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_the_logs_last_line_that_says_something() {
        let log = "0: (b7) r0 = 0\n1: (95) exit\nR0 !read_ok\nprocessed 2 insns\n\n\0\0";
        assert_eq!(last_line(log), "processed 2 insns");
        assert_eq!(last_line(""), "");
        assert_eq!(log_text(b"abc\0def"), "abc");
        let r = Refused {
            err: std::io::Error::from_raw_os_error(libc::EACCES),
            log: "back-edge from insn 3 to 1\n".into(),
        };
        assert!(r.to_string().ends_with(": back-edge from insn 3 to 1"));
    }
}
