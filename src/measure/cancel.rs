//! Ctrl-C: the first press asks the run to stop at the next sample boundary (what finished is
//! kept); the second restores system state and exits at once.
//!
//! What finished is kept through one ledger rather than by every lab unwinding its own loops:
//! a lab reports each case's figures here as the case ends (`judged_case` does it for the
//! labs that measure through it), the `Interrupted` error unwinds the lab as any error does,
//! and the command that ran the lab takes the ledger (`take_finished`) to print and store
//! those figures as an incomplete run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::report::Outcome;

static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// A second SIGINT this soon after the first is the same request delivered twice, not a second
/// press: `timeout -s INT` signals its child and then its whole process group, and a shell
/// script's Ctrl-C can reach costlab both directly and through the script. No one presses
/// Ctrl-C twice within it on purpose.
const SAME_PRESS: Duration = Duration::from_millis(300);

/// Install the handler once, at start-up.
pub fn install() {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    // ctrlc runs this on its own thread, not in signal context: locks and clocks are fine.
    let _ = ctrlc::set_handler(|| {
        let first = *FIRST.get_or_init(Instant::now);
        if PRESSES.load(Ordering::SeqCst) >= 1 && first.elapsed() < SAME_PRESS {
            return;
        }
        if PRESSES.fetch_add(1, Ordering::SeqCst) >= 1 {
            crate::machine::restore::restore_all();
            eprintln!("costlab: interrupted twice; system state restored, exiting");
            std::process::exit(130);
        }
        eprintln!("costlab: interrupted; stopping after this sample (Ctrl-C again to quit now)");
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

/// A case has finished: keep its figures (and notes) in case the run is interrupted. Call it
/// once per case with the figures that case ends with, never with a sum of cases.
pub fn finished(case: &Outcome) {
    let mut l = ledger();
    l.results.extend(case.results.iter().cloned());
    l.notes.extend(case.notes.iter().cloned());
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
