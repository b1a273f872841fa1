//! Running the priced program: resolving it on PATH, its stdio, joining the cgroup just before
//! exec, and its times, exit status and bytes read and written once it ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};

use super::host::{is_executable, which};
use costlab_core::error::{usage, CannotRun, ProgramEnd};

/// A program's times, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Times {
    pub user_ns: f64,
    pub sys_ns: f64,
    pub wall_ns: f64,
}

impl Times {
    /// Wall time the program spent off every CPU: wall - user - sys, for a single-threaded
    /// tree; None where threads ran side by side (CPU time above wall time).
    pub fn off_cpu_ns(&self) -> Option<f64> {
        let off = self.wall_ns - self.user_ns - self.sys_ns;
        (off >= 0.0).then_some(off)
    }
}

/// The resolved program of `argv`, or one line: nothing to run or bad input (exit 2), no such
/// program (`CannotRun`, 127 beside a program's status), or one found that cannot be executed
/// (126).
pub fn program(argv: &[String]) -> Result<PathBuf> {
    let name = argv.first().ok_or_else(|| {
        usage("no command to price: give one after --, like costlab price -- ls -l")
    })?;
    if let Some(p) = which(name).filter(|p| is_executable(p)) {
        return Ok(p);
    }
    let path = Path::new(name);
    if name.contains('/') && path.exists() {
        let what = if path.is_dir() {
            "a directory"
        } else {
            "not executable"
        };
        return Err(anyhow::Error::new(CannotRun {
            msg: format!(
                "'{name}' is {what}: give an executable program (chmod +x it, or name its interpreter: costlab price -- sh {name})"
            ),
            found: true,
        }));
    }
    Err(anyhow::Error::new(CannotRun {
        msg: format!("no such command '{name}': give a program on PATH or a path to an executable"),
        found: false,
    }))
}

/// How a run's stdio is set: passed through, quiet (untraced re-runs), or quiet with a Go
/// runtime's GC trace asked for and its stderr kept at `gctrace_path()`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stdio3 {
    Inherit,
    Null,
    GcTrace,
}

/// Where a `Stdio3::GcTrace` run's stderr goes (the caller reads and removes it).
pub fn gctrace_path() -> PathBuf {
    std::env::temp_dir().join(format!("costlab-gctrace-{}", std::process::id()))
}

/// Run `argv` (its program resolved to `path`) to its end, in `cgroup` when given (joined
/// just before exec, so only the execve itself is counted of what happens before the
/// program); its times from wait4's rusage and its bytes from /proc/PID/io.
pub fn run_program(
    path: &Path,
    argv: &[String],
    cgroup: Option<&Path>,
    stdio: Stdio3,
) -> Result<(Times, ProgramEnd, u64, u64)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(path);
    cmd.args(&argv[1..]).arg0(&argv[0]);
    match stdio {
        Stdio3::Inherit => {}
        Stdio3::Null => {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
        Stdio3::GcTrace => {
            let err =
                std::fs::File::create(gctrace_path()).context("creating the GC trace file")?;
            let godebug = match std::env::var("GODEBUG") {
                Ok(v) if !v.is_empty() => format!("{v},gctrace=1"),
                _ => "gctrace=1".to_string(),
            };
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err)
                .env("GODEBUG", godebug);
        }
    }
    let procs = match cgroup {
        Some(dir) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .with_context(|| format!("opening {}/cgroup.procs", dir.display()))?,
        ),
        None => None,
    };
    if let Some(f) = &procs {
        let fd = f.as_raw_fd();
        // SAFETY: the hook runs in the forked child before exec and only calls write(2),
        // which is async-signal-safe; the fd is open (O_CLOEXEC: it closes at the exec).
        unsafe {
            cmd.pre_exec(move || {
                // "0" moves the writing process itself.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(|e| {
        usage(format!(
            "cannot start '{}': {e}; give a program this user may run",
            argv[0]
        ))
    })?;
    drop(procs);
    let pid = child.id() as i32;
    // Wait without reaping, to read the tree's I/O counts while they are still there.
    // SAFETY: an all-zero siginfo is a valid out buffer; waiting for our own child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        while libc::waitid(
            libc::P_PID,
            pid as u32,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        ) != 0
        {
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    }
    let wall = t0.elapsed();
    let (rchar, wchar) = proc_io(pid as u32);
    let (exit, ru) = reap(pid);
    // The child is reaped: std must not wait for it again.
    std::mem::forget(child);
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    Ok((
        Times {
            user_ns: tv(ru.ru_utime),
            sys_ns: tv(ru.ru_stime),
            wall_ns: wall.as_nanos() as f64,
        },
        exit,
        rchar,
        wchar,
    ))
}

/// rchar and wchar of a process (its exited threads and reaped children included).
fn proc_io(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("rchar:"), field("wchar:"))
}

/// Reap our own child `pid` (retrying on EINTR): how it ended (its exit status, or the signal
/// that killed it) and the rusage of it and its reaped descendants.
pub fn reap(pid: i32) -> (ProgramEnd, libc::rusage) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid out buffer; reaping our own child.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        while libc::wait4(pid, &mut status, 0, &mut ru) < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        ru
    };
    (ProgramEnd::from_wait_status(status), ru)
}
