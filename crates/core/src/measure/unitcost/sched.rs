//! Scheduler and process terms: a token handed between two threads through a futex (on one
//! CPU: a context switch; across two: a wake-up of a sleeping thread), the futex calls that do
//! not sleep, a thread's and a process's life.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};

use crate::measure::cpus::{allowed_cpus, last_two, Pinned};
use crate::measure::{sample_fn, SampleSpec};

fn futex(word: &AtomicU32, op: i32, val: u32) -> i64 {
    // SAFETY: the futex word is a live, aligned u32 for the length of the call; no timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op | libc::FUTEX_PRIVATE_FLAG,
            val,
            std::ptr::null::<libc::timespec>(),
        )
    }
}

/// Sleep while `word` holds `val`.
fn wait_while(word: &AtomicU32, val: u32) {
    while word.load(Ordering::Acquire) == val {
        futex(word, libc::FUTEX_WAIT, val);
    }
}

fn set_and_wake(word: &AtomicU32, val: u32) {
    word.store(val, Ordering::Release);
    futex(word, libc::FUTEX_WAKE, 1);
}

/// ns per hand-off of a token between this thread and a partner, both on one CPU
/// (`same_cpu`) or on two.
pub fn handoff(spec: &SampleSpec, same_cpu: bool) -> Result<Vec<f64>> {
    let (mine, theirs) = if same_cpu {
        let last = *allowed_cpus()
            .last()
            .ok_or_else(|| anyhow::anyhow!("no CPU allowed"))?;
        (last, last)
    } else {
        last_two("a wake-up across CPUs needs two CPUs")?
    };
    let _pin = Pinned::to(mine)?;
    let word = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let partner = {
        let (word, stop) = (word.clone(), stop.clone());
        std::thread::spawn(move || {
            let _ = Pinned::to(theirs);
            loop {
                wait_while(&word, 0);
                if stop.load(Ordering::Acquire) {
                    return;
                }
                set_and_wake(&word, 0);
            }
        })
    };
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            set_and_wake(&word, 1);
            wait_while(&word, 1);
        }
    });
    stop.store(true, Ordering::Release);
    set_and_wake(&word, 1);
    let _ = partner.join();
    // Two hand-offs per round trip.
    Ok(samples?.iter().map(|s| s.ns_per_iter() / 2.0).collect())
}

/// FUTEX_WAKE on a word nobody waits on.
pub fn futex_wake(spec: &SampleSpec) -> Result<Vec<f64>> {
    let word = AtomicU32::new(0);
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            black_box(futex(&word, libc::FUTEX_WAKE, 1));
        }
    })?;
    Ok(samples.iter().map(|s| s.ns_per_iter()).collect())
}

/// FUTEX_WAIT for a value the word does not hold: EAGAIN at once.
pub fn futex_wait_eagain(spec: &SampleSpec) -> Result<Vec<f64>> {
    let word = AtomicU32::new(1);
    if futex(&word, libc::FUTEX_WAIT, 0) != -1 {
        bail!("FUTEX_WAIT on a changed word did not return EAGAIN");
    }
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            black_box(futex(&word, libc::FUTEX_WAIT, 0));
        }
    })?;
    Ok(samples.iter().map(|s| s.ns_per_iter()).collect())
}

/// A thread spawned and joined.
pub fn thread_spawn(spec: &SampleSpec) -> Result<Vec<f64>> {
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            let _ = std::thread::spawn(|| black_box(1)).join();
        }
    })?;
    Ok(samples.iter().map(|s| s.ns_per_iter()).collect())
}

/// Fork a child that runs `child` (which must not return) and wait for it.
fn fork_wait(child: &dyn Fn()) -> Result<()> {
    // SAFETY: the child only calls async-signal-safe functions (_exit, execve) before it ends.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        child();
        // SAFETY: the child ends here whatever `child` did; _exit is async-signal-safe.
        unsafe { libc::_exit(127) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child; status is a valid out pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("the child did not exit 0 (status {status:#x})");
    }
    Ok(())
}

fn sample_forks(spec: &SampleSpec, child: &dyn Fn()) -> Result<Vec<f64>> {
    let mut failed = None;
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            if failed.is_some() {
                return std::thread::sleep(spec.min_sample);
            }
            if let Err(e) = fork_wait(child) {
                failed = Some(e);
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(samples.iter().map(|s| s.ns_per_iter()).collect()),
    }
}

/// fork, the child's _exit(0), waitpid.
pub fn fork_exit(spec: &SampleSpec) -> Result<Vec<f64>> {
    // SAFETY: _exit is async-signal-safe and ends the child at once.
    sample_forks(spec, &|| unsafe { libc::_exit(0) })
}

/// fork, exec of /bin/true (its run and exit), waitpid.
pub fn fork_exec(spec: &SampleSpec) -> Result<Vec<f64>> {
    let path = c"/bin/true";
    if !std::path::Path::new("/bin/true").exists() {
        bail!("no /bin/true to exec");
    }
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    sample_forks(spec, &|| {
        // SAFETY: argv and envp are NULL-terminated arrays of C strings that outlive the call;
        // execve and _exit are async-signal-safe.
        unsafe {
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        }
    })
}
