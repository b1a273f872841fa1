//! Running the priced program: resolving it on PATH, and `Spawn`, the one way it is started
//! (by the counting, the split and `--verify`): its stdio and environment, joining a cgroup,
//! pinning and a memory policy just before exec, and its times, exit status, faults and bytes
//! read and written once it ends.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
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

/// How a run's stdio is set: passed through, or quiet (untraced re-runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stdio3 {
    Inherit,
    Null,
}

/// A file with no name in the temporary directory, where a run's output is kept to be read
/// back (`read_back`): it is gone when closed, so nothing is left behind, even when costlab is
/// killed.
pub fn unnamed_file() -> Result<std::fs::File> {
    tempfile::tempfile().with_context(|| {
        format!(
            "creating a file in {} for the program's output: set TMPDIR to a writable directory",
            std::env::temp_dir().display()
        )
    })
}

/// All that was written to `f`, from its start (a lossy UTF-8 text; empty if unreadable).
pub fn read_back(f: &mut std::fs::File) -> String {
    use std::io::{Read, Seek};
    let mut bytes = Vec::new();
    if f.rewind().is_ok() {
        let _ = f.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Run `argv` (its program resolved to `path`) to its end, in `cgroup` when given, with
/// `stdio`: its times, exit status and bytes read and written (`Spawn::run`).
pub fn run_program(
    path: &Path,
    argv: &[String],
    cgroup: Option<&Path>,
    stdio: Stdio3,
) -> Result<(Times, ProgramEnd, u64, u64)> {
    let mut spawn = Spawn::new(path, argv).stdio(stdio)?;
    if let Some(dir) = cgroup {
        spawn = spawn.in_cgroup(dir);
    }
    let e = spawn.run()?;
    Ok((e.times, e.end, e.rchar, e.wchar))
}

/// How to start the priced program, the one way every run of it starts (the counting, the
/// split and `--verify`'s trials): its stdio and environment, and what the child does between
/// fork and exec, in this order: join the cgroup (so that only the execve itself is counted of
/// what happens before the program), pin to CPUs, set an interleaved memory policy.
pub struct Spawn<'a> {
    cmd: Command,
    argv0: &'a str,
    cgroup: Option<&'a Path>,
    cpus: Vec<usize>,
    interleave: u64,
}

/// What a started program did once it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ended {
    /// Its exit status as a shell gives it (128 + the signal for a killed one).
    pub status: i32,
    /// How it ended: its exit status, or the signal that killed it.
    pub end: ProgramEnd,
    /// Its tree's user and system time (wait4's rusage) and its wall time, from the spawn to
    /// its exit.
    pub times: Times,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// The largest resident set of the tree, bytes.
    pub max_rss: u64,
    /// Voluntary and involuntary context switches of the tree.
    pub switches: u64,
    /// Bytes read and written (/proc/PID/io, its exited threads and reaped children
    /// included).
    pub rchar: u64,
    pub wchar: u64,
}

impl<'a> Spawn<'a> {
    /// `argv` with its program resolved to `path`; stdio inherited, not in a cgroup.
    pub fn new(path: &Path, argv: &'a [String]) -> Spawn<'a> {
        let mut cmd = Command::new(path);
        cmd.args(&argv[1..]).arg0(&argv[0]);
        Spawn {
            cmd,
            argv0: &argv[0],
            cgroup: None,
            cpus: Vec::new(),
            interleave: 0,
        }
    }

    /// Join the cgroup v2 `dir` just before exec.
    pub fn in_cgroup(mut self, dir: &'a Path) -> Spawn<'a> {
        self.cgroup = Some(dir);
        self
    }

    pub fn stdio(mut self, stdio: Stdio3) -> Result<Spawn<'a>> {
        match stdio {
            Stdio3::Inherit => {}
            Stdio3::Null => {
                self.cmd
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
            }
        }
        Ok(self)
    }

    /// No input or output; its errors into this file.
    pub fn errors_to(mut self, err: std::fs::File) -> Spawn<'a> {
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        self
    }

    /// No input; its output and errors into these files.
    pub fn output_to(mut self, out: std::fs::File, err: std::fs::File) -> Spawn<'a> {
        self.cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Spawn<'a> {
        self.cmd.env(key, value);
        self
    }

    /// Ask a Go runtime for its GC trace (GODEBUG gctrace=1, beside what GODEBUG holds here).
    pub fn gctrace(mut self) -> Spawn<'a> {
        let godebug = match std::env::var("GODEBUG") {
            Ok(v) if !v.is_empty() => format!("{v},gctrace=1"),
            _ => "gctrace=1".to_string(),
        };
        self.cmd.env("GODEBUG", godebug);
        self
    }

    /// Pin it to these CPUs (sched_setaffinity before exec); none: free.
    pub fn pin(mut self, cpus: &[usize]) -> Spawn<'a> {
        self.cpus = cpus.to_vec();
        self
    }

    /// Interleave its memory over the nodes of this mask (set_mempolicy before exec); 0: the
    /// kernel's default (local).
    pub fn interleave(mut self, nodes: u64) -> Spawn<'a> {
        self.interleave = nodes;
        self
    }

    /// Start it and wait for its end: its status, times, faults, switches and bytes.
    pub fn run(mut self) -> Result<Ended> {
        let procs = match self.cgroup {
            Some(dir) => Some(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
                    .with_context(|| format!("opening {}/cgroup.procs", dir.display()))?,
            ),
            None => None,
        };
        before_exec(
            &mut self.cmd,
            procs.as_ref().map(|f| f.as_raw_fd()),
            &self.cpus,
            self.interleave,
        );
        let t0 = Instant::now();
        let child = self.cmd.spawn().map_err(|e| {
            usage(format!(
                "cannot start '{}': {e}; give a program this user may run",
                self.argv0
            ))
        })?;
        drop(procs);
        let pid = child.id() as i32;
        wait_exited(pid);
        let wall = t0.elapsed();
        let (rchar, wchar) = proc_io(pid as u32);
        let (end, ru) = reap(pid);
        // The child is reaped: std must not wait for it again.
        std::mem::forget(child);
        let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
        Ok(Ended {
            status: i32::from(end.shell_status()),
            end,
            times: Times {
                user_ns: tv(ru.ru_utime),
                sys_ns: tv(ru.ru_stime),
                wall_ns: wall.as_nanos() as f64,
            },
            minor_faults: ru.ru_minflt as u64,
            major_faults: ru.ru_majflt as u64,
            max_rss: ru.ru_maxrss as u64 * 1024,
            switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
            rchar,
            wchar,
        })
    }
}

/// The child's steps between fork and exec: write "0" (itself) to the cgroup's `procs` fd,
/// pin to `cpus`, interleave over `interleave`'s nodes; each only where asked.
fn before_exec(cmd: &mut Command, procs: Option<i32>, cpus: &[usize], interleave: u64) {
    if procs.is_none() && cpus.is_empty() && interleave == 0 {
        return;
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: `set` is a valid cpu_set_t; CPU_SET ignores CPUs beyond its size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let pin = !cpus.is_empty();
    // SAFETY: the hook runs in the forked child before exec and makes only raw syscalls
    // (write, sched_setaffinity, set_mempolicy), which are async-signal-safe; every buffer it
    // reads was made before the fork, and the cgroup.procs fd is open (O_CLOEXEC: it closes
    // at the exec).
    unsafe {
        cmd.pre_exec(move || {
            // "0" moves the writing process itself.
            if let Some(fd) = procs {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if pin && libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if interleave != 0 {
                let mask: u64 = interleave;
                const MPOL_INTERLEAVE: libc::c_long = 3;
                if libc::syscall(
                    libc::SYS_set_mempolicy,
                    MPOL_INTERLEAVE,
                    &mask as *const u64,
                    64 as libc::c_ulong,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Wait for our child `pid` to exit without reaping it, so that its I/O counts are still
/// there to read.
fn wait_exited(pid: i32) {
    watch_ctrl_c(pid);
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
}

/// How long a program may run on after Ctrl-C before costlab passes the signal on itself.
const CTRL_C_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Until `pid` exits, watch for Ctrl-C: a terminal's Ctrl-C reaches the program with costlab
/// (same process group), but a program started in the moment between costlab's last check
/// and the signal's arrival (the handler runs on its own thread) never got it, and would
/// hold the stop for its whole run. Still running `CTRL_C_GRACE` after the request, it gets
/// one SIGINT from costlab. The wait wakes at the exit itself (a pidfd), so the program's
/// wall time is not rounded to a polling period.
fn watch_ctrl_c(pid: i32) {
    use costlab_core::measure::cancel;
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let Some(child) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    let Ok(fd) = rustix::process::pidfd_open(child, rustix::process::PidfdFlags::empty()) else {
        return;
    };
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    let mut asked: Option<Instant> = None;
    loop {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            // It exited (or the fd cannot be watched: the blocking wait takes over).
            _ => return,
        }
        if !cancel::requested() {
            continue;
        }
        let since = *asked.get_or_insert_with(Instant::now);
        if since.elapsed() >= CTRL_C_GRACE {
            // Our own child, not yet reaped: its pid is still its.
            let _ = rustix::process::kill_process(child, rustix::process::Signal::INT);
            return;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    fn run<'a>(argv: &'a [String], out: &Path, f: impl FnOnce(Spawn<'a>) -> Spawn<'a>) -> Ended {
        let path = program(argv).unwrap();
        let o = std::fs::File::create(out).unwrap();
        let e = std::fs::File::create(out.with_extension("err")).unwrap();
        f(Spawn::new(&path, argv).output_to(o, e)).run().unwrap()
    }

    #[test]
    fn a_spawned_program_has_its_status_env_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let e = run(&sh("printf %s \"$COSTLAB_T\"; exit 3"), &out, |s| {
            s.env("COSTLAB_T", "seven")
        });
        assert_eq!(e.status, 3);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "seven");
        assert!(e.wchar >= 5 && e.times.wall_ns > 0.0, "{e:?}");
        let killed = run(&sh("kill -9 $$"), &out, |s| s);
        assert_eq!(killed.status, 128 + 9);
        // Bad input is one line before anything runs.
        let err = program(&["costlab-no-such-program".into()]).unwrap_err();
        assert!(err
            .to_string()
            .contains("no such command 'costlab-no-such-program'"));
    }

    /// The child is in the cgroup and on the CPUs asked for from its exec on (root: a cgroup).
    #[test]
    fn a_spawned_program_runs_in_its_cgroup_on_its_cpus() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: a cgroup needs root");
            return;
        }
        let cg = match super::super::Cgroup::create() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let cpu = *costlab_core::measure::cpus::allowed_cpus().last().unwrap();
        let e = run(
            &sh("cat /proc/self/cgroup; grep Cpus_allowed_list /proc/self/status"),
            &out,
            |s| s.in_cgroup(&cg.dir).pin(&[cpu]),
        );
        assert_eq!(e.status, 0);
        let text = std::fs::read_to_string(&out).unwrap();
        let name = cg.dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(text.contains(&format!("/{name}\n")), "{text}");
        assert!(
            text.contains(&format!("Cpus_allowed_list:\t{cpu}\n")),
            "{text}"
        );
    }
}
