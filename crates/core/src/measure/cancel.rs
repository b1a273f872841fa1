//! Ctrl-C: the first press asks the run to stop at the next sample boundary (what finished is
//! kept); the second restores system state and exits at once.
//!
//! What finished is kept through one ledger rather than by every lab unwinding its own loops:
//! a case's figures are entered here where they become final, which is in the two places every
//! lab closes a case through (`conditions::judged_case`, `Outcome::attach_conditions`); the
//! `Interrupted` error unwinds the lab as any error does, and the command that ran the lab
//! takes the ledger (`take_finished`) to print and store those figures as an incomplete run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::model::{Outcome, ResultRow};

static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// A second SIGINT this soon after the first is the same request delivered twice, not a second
/// press: `timeout -s INT` signals its child and then its whole process group, and a shell
/// script's Ctrl-C can reach costlab both directly and through the script. No one presses
/// Ctrl-C twice within it on purpose.
const SAME_PRESS: Duration = Duration::from_millis(300);

/// Install the handler once, at start-up. `on_quit` runs before a second Ctrl-C ends the
/// process (the binary passes the restore of changed system settings: measure sits below
/// machine and does not call it itself).
pub fn install(on_quit: fn()) {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    // ctrlc runs this on its own thread, not in signal context: locks and clocks are fine.
    let _ = ctrlc::set_handler(move || {
        let first = *FIRST.get_or_init(Instant::now);
        if PRESSES.load(Ordering::SeqCst) >= 1 && first.elapsed() < SAME_PRESS {
            return;
        }
        if PRESSES.fetch_add(1, Ordering::SeqCst) >= 1 {
            on_quit();
            eprintln!("costlab: interrupted twice; system state restored, exiting");
            std::process::exit(130);
        }
        wake_sleepers();
        match KERNEL_WAIT.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
            Some(what) => eprintln!(
                "costlab: interrupted; the kernel holds costlab until it has finished {what}, then it stops (Ctrl-C again to quit now)"
            ),
            None => eprintln!(
                "costlab: interrupted; stopping after this sample (Ctrl-C again to quit now)"
            ),
        }
    });
}

/// True once the user has asked to stop.
pub fn requested() -> bool {
    PRESSES.load(Ordering::Relaxed) > 0
}

/// Return `Err(Interrupted)` once the user has asked to stop; call between samples.
pub fn check() -> anyhow::Result<()> {
    if requested() {
        Err(anyhow::Error::new(crate::error::Interrupted))
    } else {
        Ok(())
    }
}

/// For tests: pretend Ctrl-C was (or was not) pressed.
pub fn simulate(pressed: bool) {
    PRESSES.store(usize::from(pressed), Ordering::SeqCst);
    wake_sleepers();
}

/// What a call the kernel may hold for long is doing now (one at a time: the main thread's).
static KERNEL_WAIT: Mutex<Option<String>> = Mutex::new(None);

/// Run `f`, a call the kernel may hold longer than Ctrl-C's second and that no signal cuts
/// short (a hugepage pool's compaction, an fsync): a Ctrl-C meanwhile says, in one line, what
/// costlab waits for.
pub fn in_kernel<T>(what: &str, f: impl FnOnce() -> T) -> T {
    *KERNEL_WAIT.lock().unwrap_or_else(|p| p.into_inner()) = Some(what.to_string());
    let out = f();
    *KERNEL_WAIT.lock().unwrap_or_else(|p| p.into_inner()) = None;
    out
}

/// Sleepers wait here; Ctrl-C wakes them all.
static SLEEP: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

fn wake_sleepers() {
    // Taken so that a sleeper between its check and its wait cannot miss the wake-up.
    let _g = SLEEP.0.lock().unwrap_or_else(|p| p.into_inner());
    SLEEP.1.notify_all();
}

/// Sleep for `d`, or until Ctrl-C: true when the whole time passed, false when the user asked
/// to stop (at once, not at the end of `d`). Every wait of a second or more that is not a
/// sample's own measured time goes through here, so Ctrl-C stops a command within a second.
pub fn sleep(d: Duration) -> bool {
    let deadline = Instant::now() + d;
    let mut g = SLEEP.0.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if requested() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        g = match SLEEP.1.wait_timeout(g, deadline - now) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
}

/// The figures of the cases that have finished since the last `take_finished`.
static FINISHED: Mutex<Outcome> = Mutex::new(Outcome {
    results: Vec::new(),
    models: Vec::new(),
    notes: Vec::new(),
});

fn ledger() -> std::sync::MutexGuard<'static, Outcome> {
    // A panic while holding it ends the process (the panic hook exits), so poison is moot.
    FINISHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A case has finished: keep its figures (and notes) in case the run is interrupted.
pub fn finished(case: &Outcome) {
    finished_rows(&case.results);
    ledger().notes.extend(case.notes.iter().cloned());
}

/// A case's rows are final. A case measured again (a disturbed attempt re-measured) enters
/// its figures again: the later replaces the earlier, so each figure is kept once.
pub fn finished_rows(rows: &[ResultRow]) {
    let mut l = ledger();
    for r in rows {
        let same = |k: &ResultRow| k.lab == r.lab && k.metric == r.metric && k.case == r.case;
        match l.results.iter_mut().find(|k| same(k)) {
            Some(kept) => *kept = r.clone(),
            None => l.results.push(r.clone()),
        }
    }
}

/// The figures of the cases finished since the last call, emptying the ledger. Called before a
/// lab starts (to forget an earlier lab's cases) and after it was interrupted.
pub fn take_finished() -> Outcome {
    std::mem::take(&mut *ledger())
}

/// Whether `err` (or the state it left) means the user pressed Ctrl-C. A lab can fail with
/// another error after Ctrl-C (a child program killed by the same SIGINT), so the flag counts.
pub fn is_interrupt(err: &anyhow::Error) -> bool {
    requested() || err.chain().any(|e| e.is::<crate::error::Interrupted>())
}
