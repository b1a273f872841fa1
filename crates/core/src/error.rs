//! Errors that reach the user. A `UsageError` is bad input or a missing prerequisite the
//! user can fix: it exits 2 with one line. Anything else is a failure of the run (exit 1).
//! `Interrupted` is Ctrl-C: what finished is kept, the exit status is 130.

use thiserror::Error;

/// Bad input or a missing prerequisite. The message names the cause and the fix, in one line.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The user pressed Ctrl-C; the run stops at the next sample boundary.
#[derive(Debug, Error)]
#[error("interrupted")]
pub struct Interrupted;

/// `--strict`: some figures were not ok. Each line names one figure and why; exit status 3.
#[derive(Debug, Error)]
#[error("{} figures are not ok (--strict)", .0.len())]
pub struct NotOk(pub Vec<String>);

/// `compare --fail-on` (or `check --strict`): the comparison called a change, or the check
/// found a warning. Each line names one; the exit status is the one given (4 for a change, 3
/// for a warning), so a CI job can gate on it.
#[derive(Debug, Error)]
#[error("{} found ({})", .lines.len(), .what)]
pub struct Gate {
    pub what: &'static str,
    pub lines: Vec<String>,
    pub status: u8,
}

/// A program costlab ran for the user (`costlab price -- CMD`) exited with this status, and so
/// does costlab, once the run is stored and shown: nothing more is printed.
#[derive(Debug, Error)]
#[error("the program exited with status {0}")]
pub struct ProgramExit(pub u8);

/// Build a `UsageError` wrapped in `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Exit status for an error: 2 for bad input, 130 for Ctrl-C, 3 for `--strict`, a gate's own
/// (4 for `compare --fail-on`), 1 for everything else.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else if err.chain().any(|e| e.is::<Interrupted>()) {
        130
    } else if err.chain().any(|e| e.is::<NotOk>()) {
        3
    } else if let Some(g) = err.chain().find_map(|e| e.downcast_ref::<Gate>()) {
        g.status
    } else if let Some(p) = err.chain().find_map(|e| e.downcast_ref::<ProgramExit>()) {
        p.0
    } else {
        1
    }
}

/// The one line printed for an error: for a usage error just its message, otherwise the
/// whole context chain joined with ": ".
pub fn one_line(err: &anyhow::Error) -> String {
    if let Some(u) = err.chain().find_map(|e| e.downcast_ref::<UsageError>()) {
        return u.0.clone();
    }
    err.chain()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
        .replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_even_under_context() {
        let e = usage("bad size '0': a size must be above zero").context("reading --block");
        assert_eq!(exit_code(&e), 2);
        assert_eq!(one_line(&e), "bad size '0': a size must be above zero");
    }

    #[test]
    fn other_errors_exit_1_and_interrupt_130() {
        let e = anyhow::anyhow!("mmap failed").context("mem lab");
        assert_eq!(exit_code(&e), 1);
        assert_eq!(one_line(&e), "mem lab: mmap failed");
        assert_eq!(exit_code(&anyhow::Error::new(Interrupted)), 130);
    }
}
