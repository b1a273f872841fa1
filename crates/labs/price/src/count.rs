//! Counting what a program does, in the kernel: every syscall by id, faults, context switches,
//! migrations, thread and process starts, io_uring submissions, for the program and everything
//! it starts, from its exec to its exit (or for a while, for a running PID).
//!
//! Syscalls are counted by costlab's own BPF program on the raw `sys_enter` tracepoint
//! (`bpf`: a per-CPU array indexed by syscall id, at about the cost of one perf counter), the
//! rarer events by Debian's `bpftrace` (software events and scheduler tracepoints added to a
//! map), each filtered to a cgroup v2 that the program joins just before it execs. Syscall
//! ids are named from the kernel headers.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::bpf::{self, SyscallCounter, Whose};
use costlab_core::error::usage;
use costlab_core::machine::restore::{self, SettingGuard};

/// What the tracer prints once every probe is attached.
const ATTACHED: &str = "costlab: attached";

/// How long bpftrace may take to compile and attach its probes.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the counting is narrowed to.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every task in this cgroup v2 directory (the program and all it starts).
    Cgroup(PathBuf),
    /// The threads of one process.
    Pid(u32),
}

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

/// Everything counted of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Syscalls by name (an id the headers do not name is `syscall_<id>`).
    pub syscalls: BTreeMap<String, u64>,
    /// Other events by (class, event): ("fault", "minor"), ("switch", "voluntary"), ...
    pub events: BTreeMap<(String, String), u64>,
    pub times: Times,
    /// Bytes read and written through syscalls (/proc/PID/io rchar, wchar of the tree).
    pub rchar: u64,
    pub wchar: u64,
    /// The program's exit status as a shell gives it (128 + signal when killed).
    pub exit_status: i32,
    pub notes: Vec<String>,
}

/// The mount point of a file system type in /proc/mounts text.
pub fn mount_point(mounts: &str, fstype: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == fstype).then(|| PathBuf::from(f[1]))
    })
}

fn mounts() -> String {
    std::fs::read_to_string("/proc/mounts").unwrap_or_default()
}

/// Syscall numbers to names for this architecture, read from the kernel's uapi header under
/// `root` ("/" on the machine, a fixture tree in tests). tracefs's `sys_enter_*` formats name
/// a `__syscall_nr` field but not its value, so the numbers come from the header.
pub fn syscall_names(root: &Path) -> BTreeMap<u32, String> {
    let candidates = [
        "usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "usr/include/asm/unistd_64.h",
        "usr/include/aarch64-linux-gnu/asm/unistd.h",
        "usr/include/asm-generic/unistd.h",
    ];
    for c in candidates {
        if let Ok(text) = std::fs::read_to_string(root.join(c)) {
            let names = parse_unistd(&text);
            if !names.is_empty() {
                return names;
            }
        }
    }
    BTreeMap::new()
}

/// `#define __NR_getppid 110` lines to {110: "getppid"}.
pub fn parse_unistd(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            if f.next()? != "#define" {
                return None;
            }
            let name = f.next()?.strip_prefix("__NR_")?;
            let nr: u32 = f.next()?.parse().ok()?;
            Some((nr, name.to_string()))
        })
        .collect()
}

/// The names of the syscalls this kernel can trace, from a tracefs tree's
/// `events/syscalls/sys_enter_*` directories.
pub fn traced_syscalls(tracefs: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(tracefs.join("events/syscalls"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("sys_enter_")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// The bpftrace program for `filter`, with the probes the tracefs tree at `tracefs` has.
pub fn script(filter: &Filter, tracefs: &Path) -> String {
    let pred = match filter {
        Filter::Cgroup(p) => format!("cgroup == cgroupid(\"{}\")", p.display()),
        Filter::Pid(pid) => format!("pid == {pid}"),
    };
    let has = |event: &str| tracefs.join("events").join(event).is_dir();
    let mut s = format!("BEGIN {{ printf(\"{ATTACHED}\\n\"); }}\n");
    // Syscalls are not counted here but by `bpf::SyscallCounter`, at a third of the cost.
    s += &format!("software:minor-faults:1 /{pred}/ {{ @ev[\"fault minor\"] = count(); }}\n");
    s += &format!("software:major-faults:1 /{pred}/ {{ @ev[\"fault major\"] = count(); }}\n");
    s += &format!(
        "software:cpu-migrations:1 /{pred}/ {{ @ev[\"migration migration\"] = count(); }}\n"
    );
    if has("sched/sched_switch") {
        // The switching-out task is current. A task that sleeps (a state in TASK_REPORT,
        // 0x7f) gives up the CPU: voluntary; preempted (0, or TASK_REPORT_MAX) it did not.
        s += &format!("tracepoint:sched:sched_switch /{pred}/ {{ if ((args->prev_state & 0x7f) != 0) {{ @ev[\"switch voluntary\"] = count(); }} else {{ @ev[\"switch involuntary\"] = count(); }} }}\n");
    }
    if has("task/task_newtask") {
        s += &format!("tracepoint:task:task_newtask /{pred}/ {{ if ((args->clone_flags & 0x10000) != 0) {{ @ev[\"spawn thread\"] = count(); }} else {{ @ev[\"spawn process\"] = count(); }} }}\n");
    }
    if has("sched/sched_wakeup") {
        s += &format!(
            "tracepoint:sched:sched_wakeup /{pred}/ {{ @ev[\"wakeup made\"] = count(); }}\n"
        );
    }
    if has("tlb/tlb_flush") {
        s += &format!(
            "tracepoint:tlb:tlb_flush /{pred}/ {{ @ev[\"tlb_flush flush\"] = count(); }}\n"
        );
    }
    // io_uring submissions are counted by `bpf::EventCounter` (`uring_counter`): a bpftrace
    // probe here would add about 1.8 us to each.
    s
}

/// A counter of io_uring submissions where the kernel has the tracepoint, None elsewhere.
fn uring_counter(tracefs: &Path, whose: Whose) -> Option<bpf::EventCounter> {
    if !tracefs.join("events/io_uring/io_uring_submit_req").is_dir() {
        return None;
    }
    bpf::EventCounter::attach(whose, "io_uring_submit_req").ok()
}

/// Add the submissions counted (if any) to `events`.
fn add_submissions(events: &mut BTreeMap<(String, String), u64>, c: Option<bpf::EventCounter>) {
    if let Some(n) = c.and_then(|c| c.read().ok()).filter(|n| *n > 0) {
        *events
            .entry(("uring_submit".into(), "submit".into()))
            .or_insert(0) += n;
    }
}

/// Events other than syscalls, by (class, event).
pub type Events = BTreeMap<(String, String), u64>;

/// Syscall counts by id, and other events by (class, event).
pub type Maps = (BTreeMap<u32, u64>, BTreeMap<(String, String), u64>);

/// The maps bpftrace printed (`-f json`): syscall counts by id, other events by name.
pub fn parse_maps(output: &str) -> Maps {
    let mut ids = BTreeMap::new();
    let mut events = BTreeMap::new();
    for line in output.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["type"] != "map" {
            continue;
        }
        let Some(data) = v["data"].as_object() else {
            continue;
        };
        for (map, entries) in data {
            let Some(entries) = entries.as_object() else {
                continue;
            };
            for (k, n) in entries {
                let n = n.as_u64().unwrap_or(0);
                match map.as_str() {
                    "@sc" => {
                        if let Ok(id) = k.parse::<u32>() {
                            *ids.entry(id).or_insert(0) += n;
                        }
                    }
                    "@ev" => {
                        let (class, event) = k.split_once(' ').unwrap_or((k.as_str(), ""));
                        *events
                            .entry((class.to_string(), event.to_string()))
                            .or_insert(0) += n;
                    }
                    _ => {}
                }
            }
        }
    }
    (ids, events)
}

/// Why counting cannot start here, as one line naming the fix; None when it can.
pub fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("costlab price counts in the kernel with BPF and needs root: run it with sudo (or as root)".into());
    }
    if which("bpftrace").is_none() {
        return Some(
            "costlab price needs bpftrace: install it (apt-get install bpftrace, or scripts/install-deps.sh)"
                .into(),
        );
    }
    if mount_point(&mounts(), "cgroup2").is_none() {
        return Some("costlab price needs a cgroup v2 hierarchy: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified)".into());
    }
    None
}

/// The first `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// tracefs, mounted for the run (through the restore journal) where it is not mounted.
pub fn tracefs() -> Result<(PathBuf, Option<SettingGuard>)> {
    let m = mounts();
    if let Some(p) = mount_point(&m, "tracefs") {
        return Ok((p, None));
    }
    let at = PathBuf::from("/sys/kernel/tracing");
    let guard = restore::mount_for_run(&at, "tracefs", "tracefs at /sys/kernel/tracing")
        .map_err(|e| {
            usage(format!(
                "cannot mount tracefs at /sys/kernel/tracing ({}): mount it (mount -t tracefs nodev /sys/kernel/tracing) and run costlab price again",
                costlab_core::error::one_line(&e)
            ))
        })?;
    Ok((at, Some(guard)))
}

/// A cgroup v2 directory for the program, under costlab's own cgroup; removed on drop.
pub struct Cgroup {
    pub dir: PathBuf,
}

impl Cgroup {
    pub fn create() -> Result<Cgroup> {
        let root = mount_point(&mounts(), "cgroup2")
            .ok_or_else(|| usage("no cgroup v2 hierarchy is mounted: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified)"))?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_string))
            .unwrap_or_else(|| "/".into());
        let dir = root
            .join(own.trim_start_matches('/'))
            .join(format!("costlab-price-{}", std::process::id()));
        sweep_stale(dir.parent().unwrap_or(&root));
        std::fs::create_dir(&dir).map_err(|e| {
            usage(format!(
                "cannot create the cgroup {} ({e}): costlab price needs root and a writable cgroup v2 tree",
                dir.display()
            ))
        })?;
        Ok(Cgroup { dir })
    }
}

/// Remove the empty cgroups of costlab processes that no longer run (killed with SIGKILL
/// before they could remove their own). One that still holds processes stays.
fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("costlab-price-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if restore::journal::start_time(pid).is_none() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Processes the program left running keep the cgroup; their count is said elsewhere.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A running bpftrace: its stdout lines arrive on a channel.
pub struct Tracer {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Tracer {
    /// Start bpftrace on `script` and wait until every probe is attached.
    pub fn start(script: &str) -> Result<Tracer> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(which("bpftrace").ok_or_else(|| {
            usage("costlab price needs bpftrace: install it (apt-get install bpftrace)")
        })?);
        // SAFETY: prctl and setpgid are async-signal-safe and touch only the child itself.
        unsafe {
            cmd.pre_exec(|| {
                // A costlab killed with SIGKILL must not leave its tracer running.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // Its own process group: a Ctrl-C at the terminal goes to the program, and the
                // tracer stops when costlab has waited for it, not before.
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let mut child = cmd
            .args(["-f", "json", "-e", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // bpftrace raises its own memlock limit and warns when it cannot; it need not.
            .env("BPFTRACE_STRLEN", "16")
            .spawn()
            .context("starting bpftrace")?;
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(err), &mut s);
            s
        });
        let mut t = Tracer {
            child,
            lines,
            stderr: Some(stderr),
        };
        let deadline = Instant::now() + ATTACH_TIMEOUT;
        loop {
            costlab_core::measure::cancel::check()?;
            match t.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) if l.contains(ATTACHED) => return Ok(t),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => {
                    let _ = t.child.kill();
                    let _ = t.child.wait();
                    let why = t
                        .stderr
                        .take()
                        .and_then(|h| h.join().ok())
                        .unwrap_or_default();
                    let why = why
                        .lines()
                        .find(|l| l.starts_with("ERROR") && !l.contains("RLIMIT_MEMLOCK"))
                        .or_else(|| why.lines().next())
                        .unwrap_or("it attached no probe in time")
                        .to_string();
                    bail!(usage(format!(
                        "bpftrace could not trace here: {why}; check that the kernel has BPF and tracepoints (CONFIG_BPF_EVENTS) and that costlab runs as root"
                    )));
                }
            }
        }
    }

    /// Stop tracing (SIGINT, as a user would) and read the maps it prints.
    pub fn finish(mut self) -> Result<Maps> {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        let mut text = String::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(30)) {
            text.push_str(&l);
            text.push('\n');
        }
        let _ = self.child.wait();
        Ok(parse_maps(&text))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The resolved program of `argv`, or exit 2 with one line.
pub fn program(argv: &[String]) -> Result<PathBuf> {
    let name = argv.first().ok_or_else(|| {
        usage("no command to price: give one after --, like costlab price -- ls -l")
    })?;
    which(name).filter(|p| is_executable(p)).ok_or_else(|| {
        usage(format!(
            "no such command '{name}': give a program on PATH or a path to an executable"
        ))
    })
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
) -> Result<(Times, i32, u64, u64)> {
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
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid out buffer; reaping our own child.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        ru
    };
    // The child is reaped: std must not wait for it again.
    std::mem::forget(child);
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
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

/// What an fd points at, from its /proc/PID/fd link and the file it opens: `file` (a
/// regular file), `pipe`, `socket`, `dev` (a character device: /dev/null, /dev/zero, a tty),
/// or `other` (an eventfd, an epoll, a directory...).
pub fn fd_kind(link: &str, file_type: Option<std::fs::FileType>) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if link.starts_with("pipe:") {
        return "pipe";
    }
    if link.starts_with("socket:") {
        return "socket";
    }
    match file_type {
        Some(t) if t.is_file() => "file",
        Some(t) if t.is_fifo() => "pipe",
        Some(t) if t.is_socket() => "socket",
        Some(t) if t.is_char_device() => "dev",
        _ => "other",
    }
}

/// The kinds each fd number was seen pointing at, in the program's processes, over the run.
#[derive(Debug, Default, Clone)]
pub struct FdKinds {
    seen: BTreeMap<u32, BTreeMap<&'static str, u32>>,
}

impl FdKinds {
    /// Look once at the fds below `bpf::FDS` of each process in `pids`.
    pub fn sample(&mut self, pids: &[u32]) {
        for pid in pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for e in dir.flatten() {
                let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if fd >= bpf::FDS - 1 {
                    continue;
                }
                let link = std::fs::read_link(e.path()).unwrap_or_default();
                let ty = std::fs::metadata(e.path()).ok().map(|m| m.file_type());
                self.note(fd, fd_kind(&link.to_string_lossy(), ty));
            }
        }
    }

    pub fn note(&mut self, fd: u32, kind: &'static str) {
        *self.seen.entry(fd).or_default().entry(kind).or_insert(0) += 1;
    }

    /// The kind fd `fd` was seen as most often; None if never seen.
    pub fn kind(&self, fd: u32) -> Option<&'static str> {
        let kinds = self.seen.get(&fd)?;
        kinds
            .iter()
            .max_by_key(|(k, n)| (**n, std::cmp::Reverse(**k)))
            .map(|(k, _)| *k)
    }
}

/// Split the read/write family's counts by what their fds pointed at: of the `read` calls,
/// the share whose sampled fds were seen as character devices becomes `read:dev`, and so on;
/// the share on fds never seen (or above the counted fds) keeps the plain name.
pub fn split_by_fd_kind(
    syscalls: &mut BTreeMap<String, u64>,
    by_fd: &BTreeMap<(u32, u32), u64>,
    kinds: &FdKinds,
    names: &BTreeMap<u32, String>,
) {
    let mut sampled: BTreeMap<u32, (u64, BTreeMap<&'static str, u64>)> = BTreeMap::new();
    for (&(id, fd), &n) in by_fd {
        let e = sampled.entry(id).or_default();
        e.0 += n;
        if let Some(kind) = kinds.kind(fd) {
            *e.1.entry(kind).or_insert(0) += n;
        }
    }
    for (id, (all, by_kind)) in sampled {
        let Some(name) = names.get(&id) else {
            continue;
        };
        let Some(&total) = syscalls.get(name) else {
            continue;
        };
        let mut left = total;
        for (kind, n) in by_kind {
            let share = ((total as f64) * n as f64 / all as f64).round() as u64;
            let share = share.min(left);
            left -= share;
            if share > 0 {
                *syscalls.entry(format!("{name}:{kind}")).or_insert(0) += share;
            }
        }
        if left == 0 {
            syscalls.remove(name);
        } else {
            syscalls.insert(name.clone(), left);
        }
    }
}

/// Watches the fds of a cgroup's (or a process's) processes every few milliseconds until
/// stopped; what it saw comes back from `stop`.
pub struct FdWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<FdKinds>,
}

impl FdWatch {
    pub fn start(procs: Procs) -> FdWatch {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut kinds = FdKinds::default();
            loop {
                let pids = match &procs {
                    Procs::Cgroup(dir) => std::fs::read_to_string(dir.join("cgroup.procs"))
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.trim().parse().ok())
                        .collect(),
                    Procs::One(pid) => vec![*pid],
                };
                kinds.sample(&pids);
                if flag.load(Ordering::Relaxed) {
                    return kinds;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        FdWatch { stop, handle }
    }

    pub fn stop(self) -> FdKinds {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Whose fds an `FdWatch` looks at.
pub enum Procs {
    Cgroup(PathBuf),
    One(u32),
}

/// Name syscall ids.
pub fn named(ids: &BTreeMap<u32, u64>, names: &BTreeMap<u32, String>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (id, n) in ids {
        let name = names
            .get(id)
            .cloned()
            .unwrap_or_else(|| format!("syscall_{id}"));
        *out.entry(name).or_insert(0) += n;
    }
    out
}

/// Every counter of one run, attached: bpftrace for the rarer events, the BPF syscall and
/// io_uring counters, the watch on the fds.
struct Counting {
    tracer: Tracer,
    syscalls: SyscallCounter,
    submissions: Option<bpf::EventCounter>,
    watch: FdWatch,
}

impl Counting {
    fn start(tracefs: &Path, filter: Filter, whose: Whose, procs: Procs) -> Result<Counting> {
        let tracer = Tracer::start(&script(&filter, tracefs))?;
        Ok(Counting {
            tracer,
            syscalls: SyscallCounter::attach(whose)?,
            submissions: uring_counter(tracefs, whose),
            watch: FdWatch::start(procs),
        })
    }

    /// Stop and read everything: syscalls by name (the read/write family split by fd kind),
    /// other events by (class, event).
    fn finish(self) -> Result<(BTreeMap<String, u64>, Events)> {
        let kinds = self.watch.stop();
        let ids = self.syscalls.read()?;
        let by_fd = self.syscalls.read_by_fd()?;
        drop(self.syscalls);
        let (_, mut events) = self.tracer.finish()?;
        add_submissions(&mut events, self.submissions);
        let names = syscall_names(Path::new("/"));
        let mut syscalls = named(&ids, &names);
        split_by_fd_kind(&mut syscalls, &by_fd, &kinds, &names);
        Ok((syscalls, events))
    }
}

/// Count `argv` from its exec to its exit.
pub fn count_command(argv: &[String]) -> Result<Counts> {
    let path = program(argv)?;
    if let Some(why) = unavailable() {
        bail!(usage(why));
    }
    let (tracefs, _mounted) = tracefs()?;
    let cg = Cgroup::create()?;
    let counting = Counting::start(
        &tracefs,
        Filter::Cgroup(cg.dir.clone()),
        Whose::Cgroup(bpf::cgroup_id(&cg.dir)?),
        Procs::Cgroup(cg.dir.clone()),
    )?;
    let run = run_program(&path, argv, Some(&cg.dir), Stdio3::Inherit);
    let (syscalls, events) = counting.finish()?;
    let (times, exit_status, rchar, wchar) = run?;
    let mut notes = vec![
        "counted from the program's execve (itself counted: the cgroup is joined just before it) to its exit, with every thread and child it started".to_string(),
    ];
    let left = std::fs::read_to_string(cg.dir.join("cgroup.procs")).unwrap_or_default();
    let left = left.lines().count();
    if left > 0 {
        notes.push(format!(
            "{left} processes the program started still ran when it exited: counted until then"
        ));
    }
    Ok(Counts {
        syscalls,
        events,
        times,
        rchar,
        wchar,
        exit_status,
        notes,
    })
}

/// Count a running process's threads for `duration`.
pub fn count_pid(pid: u32, duration: Duration) -> Result<Counts> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!(usage(format!(
            "no process {pid}: give the PID of a running process"
        )));
    }
    if let Some(why) = unavailable() {
        bail!(usage(why));
    }
    let (tracefs, _mounted) = tracefs()?;
    let counting = Counting::start(
        &tracefs,
        Filter::Pid(pid),
        Whose::Process(pid),
        Procs::One(pid),
    )?;
    let before = proc_times(pid);
    let t0 = Instant::now();
    let mut gone = false;
    while t0.elapsed() < duration {
        if costlab_core::measure::cancel::requested() {
            break;
        }
        if costlab_core::machine::restore::journal::start_time(pid).is_none() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = proc_times(pid);
    let wall = t0.elapsed();
    let (syscalls, events) = counting.finish()?;
    let mut notes = vec![format!(
        "counted the threads of process {pid} for {:.1} s (its children are not counted)",
        wall.as_secs_f64()
    )];
    if gone {
        notes.push(format!(
            "process {pid} exited during counting: counted until then"
        ));
    }
    let (u0, s0) = before.unwrap_or_default();
    let (u1, s1) = after.unwrap_or((u0, s0));
    Ok(Counts {
        syscalls,
        events,
        times: Times {
            user_ns: u1 - u0,
            sys_ns: s1 - s0,
            wall_ns: wall.as_nanos() as f64,
        },
        rchar: 0,
        wchar: 0,
        exit_status: 0,
        notes,
    })
}

/// (user, system) CPU ns of a process so far, from /proc/PID/stat.
fn proc_times(pid: u32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3; utime and stime are fields 14 and 15.
    let hz = costlab_core::measure::procstat::ticks_per_second().max(1) as f64;
    let tick = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .map(|t| t / hz * 1e9)
    };
    Some((tick(11)?, tick(12)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fds_are_told_apart_by_their_links_and_types() {
        let ty = |p: &str| std::fs::metadata(p).ok().map(|m| m.file_type());
        assert_eq!(fd_kind("pipe:[123]", None), "pipe");
        assert_eq!(fd_kind("socket:[9]", None), "socket");
        assert_eq!(fd_kind("/dev/null", ty("/dev/null")), "dev");
        assert_eq!(fd_kind("/proc/self/exe", ty("/proc/self/exe")), "file");
        assert_eq!(fd_kind("anon_inode:[eventfd]", None), "other");
        assert_eq!(fd_kind("/", ty("/")), "other");
    }

    #[test]
    fn sampled_fds_share_out_the_exact_totals() {
        let names: BTreeMap<u32, String> = [(0, "read".into()), (1, "write".into())].into();
        let mut kinds = FdKinds::default();
        kinds.note(0, "dev");
        kinds.note(1, "pipe");
        kinds.note(1, "pipe");
        kinds.note(1, "file"); // seen once as a file, twice as a pipe: a pipe
        let mut syscalls: BTreeMap<String, u64> = [
            ("read".into(), 1000),
            ("write".into(), 999),
            ("openat".into(), 3),
        ]
        .into();
        // Samples: reads 3 on fd 0 (dev), 1 on fd 7 (never seen); writes 4 on fd 1.
        let by_fd: BTreeMap<(u32, u32), u64> = [((0, 0), 3), ((0, 7), 1), ((1, 1), 4)].into();
        split_by_fd_kind(&mut syscalls, &by_fd, &kinds, &names);
        assert_eq!(syscalls.get("read:dev"), Some(&750));
        assert_eq!(syscalls.get("read"), Some(&250));
        assert_eq!(syscalls.get("write:pipe"), Some(&999));
        assert_eq!(syscalls.get("write"), None);
        assert_eq!(syscalls.get("openat"), Some(&3));
        let total: u64 = syscalls.values().sum();
        assert_eq!(total, 2002, "no call is lost or made up");
    }
}
