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

/// How a program costlab ran for the user (`costlab price -- CMD`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramEnd {
    /// It exited with this status.
    Exited(u8),
    /// A signal killed it (its number).
    Killed(i32),
}

/// A program that has not said otherwise ended well (exit status 0).
impl Default for ProgramEnd {
    fn default() -> Self {
        ProgramEnd::Exited(0)
    }
}

impl ProgramEnd {
    /// From a wait status as `waitpid` gives it.
    pub fn from_wait_status(status: i32) -> ProgramEnd {
        if libc::WIFSIGNALED(status) {
            ProgramEnd::Killed(libc::WTERMSIG(status))
        } else {
            ProgramEnd::Exited(libc::WEXITSTATUS(status) as u8)
        }
    }

    /// Whether the program failed: a status other than 0, or a signal.
    pub fn failed(self) -> bool {
        self != ProgramEnd::Exited(0)
    }

    /// The status a shell would give it: the exit status, or 128 + the signal's number.
    pub fn shell_status(self) -> u8 {
        match self {
            ProgramEnd::Exited(n) => n,
            ProgramEnd::Killed(s) => u8::try_from(128 + s.clamp(0, 127)).unwrap_or(255),
        }
    }

    /// The line that says how the program ended.
    pub fn line(self) -> String {
        match self {
            ProgramEnd::Exited(n) => format!("the program exited with status {n}"),
            ProgramEnd::Killed(s) => format!(
                "the program was killed by signal {s} ({}); exit status {}",
                signal_name(s),
                self.shell_status()
            ),
        }
    }
}

/// A signal's name (SIGKILL), or "signal N" for one without.
fn signal_name(s: i32) -> String {
    let name = match s {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {s}"),
    };
    name.to_string()
}

/// A program costlab ran for the user ended in failure (`ProgramEnd::failed`); costlab exits
/// with its status (`shell_status`), once the run is stored and shown, after one line saying
/// how it ended.
#[derive(Debug, Error)]
#[error("{}", .0.line())]
pub struct ProgramFailed(pub ProgramEnd);

/// The program costlab was asked to run cannot be run: not found (`found: false`), or found
/// and not executable. Bad input (exit 2), or 127 and 126 beside a program's status.
#[derive(Debug, Error)]
#[error("{msg}")]
pub struct CannotRun {
    pub msg: String,
    pub found: bool,
}

/// The exit statuses of a command that runs the user's program and exits with its status
/// (`costlab price -- CMD`). The program's status is passed through when it failed; costlab's
/// own statuses move out of its way, to the top of the range a program rarely uses (as
/// `timeout` and `env` keep 124-127 for theirs), so that the program's 2 or 3 is never read as
/// costlab's bad input or `--strict`.
pub mod beside_program {
    /// `--strict`: the program succeeded, and a figure is not ok or a what-if refuted.
    pub const STRICT: u8 = 124;
    /// costlab refused (bad input, a missing prerequisite) or failed (a run it could not store).
    pub const COSTLAB: u8 = 125;
    /// The program was found but cannot be executed.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// The program was not found.
    pub const NOT_FOUND: u8 = 127;
}

/// Build a `UsageError` wrapped in `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Exit status for an error: 2 for bad input, 130 for Ctrl-C, 3 for `--strict`, a gate's own
/// (4 for `compare --fail-on`), a failed program's own, 1 for everything else.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else if err.chain().any(|e| e.is::<Interrupted>()) {
        130
    } else if err.chain().any(|e| e.is::<NotOk>()) {
        3
    } else if let Some(g) = err.chain().find_map(|e| e.downcast_ref::<Gate>()) {
        g.status
    } else if let Some(p) = err.chain().find_map(|e| e.downcast_ref::<ProgramFailed>()) {
        p.0.shell_status()
    } else if err.chain().any(|e| e.is::<CannotRun>()) {
        2
    } else {
        1
    }
}

/// Exit status for an error of a command that runs the user's program (`beside_program`): the
/// program's own when it failed, 130 for Ctrl-C (the program had it too), costlab's own in
/// 124-127.
pub fn exit_code_beside_program(err: &anyhow::Error) -> u8 {
    use beside_program::*;
    if let Some(p) = err.chain().find_map(|e| e.downcast_ref::<ProgramFailed>()) {
        return p.0.shell_status();
    }
    if let Some(c) = err.chain().find_map(|e| e.downcast_ref::<CannotRun>()) {
        return if c.found { CANNOT_EXECUTE } else { NOT_FOUND };
    }
    match exit_code(err) {
        130 => 130,
        3 => STRICT,
        _ => COSTLAB,
    }
}

/// The one line printed for an error: for a usage error just its message, otherwise the
/// whole context chain joined with ": ".
pub fn one_line(err: &anyhow::Error) -> String {
    if let Some(u) = err.chain().find_map(|e| e.downcast_ref::<UsageError>()) {
        return u.0.clone();
    }
    if let Some(c) = err.chain().find_map(|e| e.downcast_ref::<CannotRun>()) {
        return c.msg.clone();
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

    #[test]
    fn a_program_s_status_never_reads_as_costlab_s_own() {
        let failed = |end| anyhow::Error::new(ProgramFailed(end));
        // Beside a program, costlab's own statuses are 124-127 and the program's pass through.
        for (e, want) in [
            (usage("--runs 0: ..."), beside_program::COSTLAB),
            (anyhow::anyhow!("cannot store"), beside_program::COSTLAB),
            (
                anyhow::Error::new(NotOk(vec!["x".into()])),
                beside_program::STRICT,
            ),
            (anyhow::Error::new(Interrupted), 130),
            (failed(ProgramEnd::Exited(2)), 2),
            (failed(ProgramEnd::Exited(3)), 3),
            (failed(ProgramEnd::Killed(libc::SIGKILL)), 137),
            (
                anyhow::Error::new(CannotRun {
                    msg: "not executable".into(),
                    found: true,
                }),
                beside_program::CANNOT_EXECUTE,
            ),
            (
                anyhow::Error::new(CannotRun {
                    msg: "no such command".into(),
                    found: false,
                }),
                beside_program::NOT_FOUND,
            ),
        ] {
            assert_eq!(exit_code_beside_program(&e), want, "{e}");
        }
        // Elsewhere a program that cannot run is bad input, as any.
        let e = anyhow::Error::new(CannotRun {
            msg: "no such command 'x'".into(),
            found: false,
        });
        assert_eq!(
            (exit_code(&e), one_line(&e).as_str()),
            (2, "no such command 'x'")
        );
        assert_eq!(
            ProgramEnd::Killed(libc::SIGSEGV).line(),
            "the program was killed by signal 11 (SIGSEGV); exit status 139"
        );
        assert_eq!(ProgramEnd::from_wait_status(2 << 8), ProgramEnd::Exited(2));
        assert_eq!(
            ProgramEnd::from_wait_status(libc::SIGKILL),
            ProgramEnd::Killed(9)
        );
        assert!(!ProgramEnd::Exited(0).failed());
    }
}
