//! Which program a what-if judges: the one that ran, not the first file exec'd. A command that
//! starts through a script (a pyenv shim that execs python, a wrapper that execs the real
//! binary) runs another program than the one named. While the first run of `--verify` runs,
//! the processes of its cgroup are looked at every few milliseconds (`ExecWatch`: each one's
//! /proc/PID/exe): the program the command's own process ran last, the end of its exec chain,
//! is judged. A run too short to be seen falls back on the `#!` chain of the file named (its
//! interpreter, through `/usr/bin/env`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the cgroup's processes are looked at.
const EVERY: Duration = Duration::from_millis(2);

/// The programs seen running in a run: each executable and in how many looks it ran, and the
/// program the run's first process ran last (the end of its exec chain).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub programs: BTreeMap<PathBuf, u64>,
    /// The first process seen (the command's own: it joins the cgroup before its exec, its
    /// children after), and its executable at the last look that found it.
    pub root: Option<(u32, PathBuf)>,
    looks: u64,
}

impl Seen {
    /// Record one look: each listed process and its executable.
    fn record(&mut self, procs: &[(u32, PathBuf)]) {
        self.looks += 1;
        let mut here: Vec<&PathBuf> = procs.iter().map(|(_, exe)| exe).collect();
        here.sort();
        here.dedup();
        for exe in here {
            *self.programs.entry(exe.clone()).or_default() += 1;
        }
        match &mut self.root {
            Some((pid, exe)) => {
                if let Some((_, now)) = procs.iter().find(|(p, _)| p == pid) {
                    *exe = now.clone();
                }
            }
            None => self.root = procs.iter().min_by_key(|(p, _)| *p).cloned(),
        }
    }
}

/// A thread that looks at the processes listed in `procs` (a cgroup's cgroup.procs) until
/// stopped.
pub struct ExecWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Seen>,
}

impl ExecWatch {
    pub fn start(procs: PathBuf) -> ExecWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut seen = Seen::default();
            loop {
                look(&procs, &mut seen);
                if flag.load(Ordering::Relaxed) {
                    return seen;
                }
                std::thread::sleep(EVERY);
            }
        });
        ExecWatch { stop, thread }
    }

    /// Stop looking; what was seen.
    pub fn finish(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One look: each listed process's executable (a process gone meanwhile is skipped).
fn look(procs: &Path, seen: &mut Seen) {
    let Ok(text) = std::fs::read_to_string(procs) else {
        return;
    };
    let now: Vec<(u32, PathBuf)> = text
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, std::fs::read_link(format!("/proc/{pid}/exe")).ok()?)))
        .collect();
    if !now.is_empty() {
        seen.record(&now);
    }
}

/// The program to judge, and how it was found (for the note that names it): the program the
/// command's own process ran last (the end of its exec chain: a shim's python), else the one
/// seen in the most looks, else the end of `path`'s `#!` chain, else `path`.
pub fn judged(path: &Path, seen: &Seen) -> (PathBuf, String) {
    let named = |p: &Path| p == path || std::fs::canonicalize(path).is_ok_and(|c| c == p);
    let looks = |p: &Path| seen.programs.get(p).copied().unwrap_or(0);
    if let Some((_, p)) = &seen.root {
        let how = if named(p) {
            "the program named, which ran".to_string()
        } else {
            format!(
                "the program the command's process ran last, the end of its exec chain from {} (running in {} of {} looks at the run's processes)",
                path.display(),
                looks(p),
                seen.looks
            )
        };
        return (p.clone(), how);
    }
    match interpreter(path, 0) {
        Some(i) => (
            i,
            format!(
                "the interpreter of {}'s #! line (the run was too short to see what ran)",
                path.display()
            ),
        ),
        None => (path.to_path_buf(), "the program named".into()),
    }
}

/// The program a `#!` file runs, through `env` and nested scripts (at most 4 deep).
fn interpreter(path: &Path, depth: usize) -> Option<PathBuf> {
    let head = std::fs::read(path).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
    let line = std::str::from_utf8(&line[..end]).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    let prog = if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        crate::count::which(name)?
    } else {
        first
    };
    if depth < 4 {
        if let Some(deeper) = interpreter(&prog, depth + 1) {
            return Some(deeper);
        }
    }
    Some(prog)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// A shim that execs a dynamically linked program: the program judged is the one that
    /// ran (sleep), not the shell script, and it is a glibc program.
    #[test]
    fn a_script_that_execs_a_program_is_judged_by_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let sleep = crate::count::which("sleep").expect("sleep on PATH");
        let shim = script(
            dir.path(),
            "shim",
            &format!("#!/bin/sh\nexec {} 0.3\n", sleep.display()),
        );
        let mut child = std::process::Command::new(&shim).spawn().unwrap();
        let procs = dir.path().join("procs");
        std::fs::write(&procs, format!("{}\n", child.id())).unwrap();
        let watch = ExecWatch::start(procs);
        child.wait().unwrap();
        let seen = watch.finish();
        let (p, how) = judged(&shim, &seen);
        let real = std::fs::canonicalize(&sleep).unwrap();
        assert_eq!(p, real, "{seen:?}");
        assert!(how.contains("exec chain") && how.contains("shim"), "{how}");
        assert!(super::super::remedy::is_glibc_dynamic(&p) || !is_glibc_host());
        assert!(!super::super::remedy::is_glibc_dynamic(&shim));
    }

    /// Whether this machine's sleep is a glibc program (it is on Debian, the project's).
    fn is_glibc_host() -> bool {
        Path::new("/lib/x86_64-linux-gnu/libc.so.6").exists()
            || Path::new("/lib/aarch64-linux-gnu/libc.so.6").exists()
    }

    #[test]
    fn a_run_too_short_to_see_falls_back_on_the_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let inner = script(dir.path(), "inner", "#!/bin/sh\ntrue\n");
        let outer = script(dir.path(), "outer", &format!("#!{}\n", inner.display()));
        let via_env = script(dir.path(), "env", "#!/usr/bin/env -S sh -e\ntrue\n");
        let none = Seen::default();
        assert_eq!(judged(&outer, &none).0, PathBuf::from("/bin/sh"));
        assert!(judged(&outer, &none).1.contains("#! line"));
        assert_eq!(
            judged(&via_env, &none).0,
            crate::count::which("sh").unwrap()
        );
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"\x7fELF").unwrap();
        assert_eq!(
            judged(&plain, &none),
            (plain.clone(), "the program named".into())
        );
    }

    #[test]
    fn the_first_process_seen_is_the_commands_and_its_last_program_is_judged() {
        let (bash, pyenv, python) = (
            PathBuf::from("/usr/bin/bash"),
            PathBuf::from("/usr/bin/sed"),
            PathBuf::from("/usr/bin/python3.11"),
        );
        let mut s = Seen::default();
        s.record(&[(100, bash.clone())]);
        // The shim's subshells run beside it, and in more looks than the program it execs.
        for _ in 0..5 {
            s.record(&[
                (100, bash.clone()),
                (101, pyenv.clone()),
                (102, bash.clone()),
            ]);
        }
        s.record(&[(100, python.clone())]);
        s.record(&[(100, python.clone()), (103, bash.clone())]);
        assert_eq!(s.programs[&bash], 7);
        assert_eq!(s.programs[&python], 2);
        let (p, how) = judged(Path::new("/root/.pyenv/shims/python3"), &s);
        assert_eq!(p, python);
        assert!(
            how.contains("end of its exec chain from /root/.pyenv/shims/python3"),
            "{how}"
        );
        assert!(how.contains("2 of 8 looks"), "{how}");
    }
}
