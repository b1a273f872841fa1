//! bpftrace for the rarer events (faults, switches, migrations, task starts, wakeups, TLB
//! flushes): the script written for a filter, the tracer run until every probe is attached,
//! and the maps it prints at the end.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::host::which;
use costlab_core::error::usage;

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
        // bpftrace prints its maps and exits on SIGINT; one that has not exited 10 s after its
        // output ended is stuck (seen once under a loaded test suite): kill it rather than wait
        // for ever, and say its counts are lost.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    bail!(
                        "bpftrace did not stop within 10 s of SIGINT and was killed: the faults, switches and wake-ups it counted are lost; run again"
                    );
                }
            }
        }
        Ok(parse_maps(&text))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
