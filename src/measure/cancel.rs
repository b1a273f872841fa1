//! Ctrl-C: the first press asks the run to stop at the next sample boundary (what finished is
//! kept); the second restores system state and exits at once.

use std::sync::atomic::{AtomicUsize, Ordering};

static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// Install the handler once, at start-up.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
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
