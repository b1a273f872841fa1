//! The argument checks that `costlab price` makes before anything runs, each a usage error
//! (exit 2) naming the fix.

use std::path::Path;

use anyhow::Result;

use crate::args::PriceArgs;
use costlab_core::error::usage;

/// `--runs 0` leaves nothing to check the price against unless `--once` asks for the traced
/// run's own times.
pub fn check_runs(args: &PriceArgs) -> Result<()> {
    if args.runs == 0 && !args.once {
        return Err(usage(
            "--runs 0: give at least 1 untraced run, or --once to use the traced run's times",
        ));
    }
    Ok(())
}

/// `--duration` is read only with `--pid`, but a value that is not a time is refused whatever
/// else is given: accepted and ignored, it would read as used.
pub fn check_duration(args: &PriceArgs) -> Result<std::time::Duration> {
    costlab_core::measure::units::parse_duration(
        &args.duration,
        "--duration",
        std::time::Duration::ZERO,
        std::time::Duration::from_secs(3600),
    )
}

/// `--pid` names a process that runs a program: a zombie or a kernel thread has none to
/// count, and is refused before counting (`--from` reads no process).
pub fn check_pid(args: &PriceArgs) -> Result<()> {
    match (args.pid, &args.from) {
        (Some(pid), None) => costlab_core::measure::procstat::check_countable(pid),
        _ => Ok(()),
    }
}

/// `--time-one-in N` takes a power of two (the programs pick a call by masking its count),
/// and only where the split runs.
pub fn check_sampling(args: &PriceArgs) -> Result<()> {
    // 0 is a default-built PriceArgs (tests, callers): every call.
    let n = args.time_one_in.max(1);
    if !n.is_power_of_two() {
        return Err(usage(format!(
            "--time-one-in {n}: give a power of two (1, 2, 4 ... 1024), like --time-one-in 16"
        )));
    }
    if n > 1 && (args.count_only || args.from.is_some()) {
        let flag = if args.count_only {
            "--count-only"
        } else {
            "--from"
        };
        return Err(usage(format!(
            "--time-one-in with {flag}: nothing is timed there; drop one of them"
        )));
    }
    Ok(())
}

/// `--verify` runs the command it tries; `--rate`, `--work` and `--reserve-hugepages` serve it
/// only; `--recalibrate` needs a split to calibrate.
pub fn check_verify(args: &PriceArgs) -> Result<()> {
    if args.verify && (args.pid.is_some() || args.from.is_some()) {
        let flag = if args.pid.is_some() {
            "--pid"
        } else {
            "--from"
        };
        return Err(usage(format!(
            "--verify with {flag}: a trial runs the command itself; give it after --, like costlab price --verify -- ./prog"
        )));
    }
    if args.recalibrate {
        let without = [
            (
                args.count_only,
                "--count-only: it counts, with no split to calibrate",
            ),
            (
                args.pid.is_some(),
                "--pid: a running process's split is not calibrated",
            ),
            (
                args.from.is_some(),
                "--from: the saved counts carry their own run's calibration",
            ),
        ];
        if let Some((_, why)) = without.iter().find(|(set, _)| *set) {
            return Err(usage(format!(
                "--recalibrate with {why}; drop --recalibrate, or price a command with the split: costlab price --recalibrate -- ./prog"
            )));
        }
    }
    for (set, flag) in [
        (args.rate.is_some(), "--rate"),
        (args.work.is_some(), "--work"),
        (args.reserve_hugepages, "--reserve-hugepages"),
    ] {
        if set && !args.verify {
            return Err(usage(format!(
                "{flag} is for a trial: add --verify, like costlab price --verify {flag} ... -- ./prog"
            )));
        }
    }
    Ok(())
}

/// `--save-counts FILE` must be writable before counting starts: its folder exists and it is
/// not a folder itself.
pub fn check_writable(p: &Path) -> Result<()> {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(usage(format!(
            "--save-counts {}: no folder {}; give a path in an existing folder",
            p.display(),
            dir.display()
        )));
    }
    if p.is_dir() {
        return Err(usage(format!(
            "--save-counts {} is a folder; give a file path",
            p.display()
        )));
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    fn is_usage(e: &anyhow::Error) -> bool {
        e.downcast_ref::<costlab_core::error::UsageError>()
            .is_some()
    }

    #[test]
    fn no_untraced_run_needs_once() {
        let mut args = PriceArgs {
            runs: 0,
            ..Default::default()
        };
        let mut s = PriceArgs {
            time_one_in: 12,
            ..PriceArgs::default()
        };
        let e = check_sampling(&s).unwrap_err().to_string();
        assert!(e.contains("power of two") && !e.contains('\n'), "{e}");
        s.time_one_in = 16;
        assert!(check_sampling(&s).is_ok());
        s.count_only = true;
        assert!(check_sampling(&s)
            .unwrap_err()
            .to_string()
            .contains("--count-only"));
        let e = check_runs(&args).unwrap_err();
        assert!(is_usage(&e) && e.to_string().contains("--runs 0"), "{e}");
        args.once = true;
        assert!(check_runs(&args).is_ok());
        args = PriceArgs {
            runs: 3,
            ..Default::default()
        };
        assert!(check_runs(&args).is_ok());
    }

    #[test]
    fn verify_takes_a_command_and_its_flags_need_it() {
        let mut args = PriceArgs {
            verify: true,
            pid: Some(1),
            ..Default::default()
        };
        let e = check_verify(&args).unwrap_err();
        assert!(
            is_usage(&e) && e.to_string().starts_with("--verify with --pid"),
            "{e}"
        );
        args.pid = None;
        assert!(check_verify(&args).is_ok());
        args.verify = false;
        args.reserve_hugepages = true;
        let e = check_verify(&args).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--reserve-hugepages is for a trial"),
            "{e}"
        );
    }

    #[test]
    fn save_counts_needs_a_file_in_an_existing_folder() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_writable(&d.path().join("counts.json")).is_ok());
        let e = check_writable(d.path()).unwrap_err();
        assert!(is_usage(&e) && e.to_string().contains("is a folder"), "{e}");
        let e = check_writable(&d.path().join("no/such/counts.json")).unwrap_err();
        assert!(is_usage(&e) && e.to_string().contains("no folder"), "{e}");
        assert!(check_writable(Path::new("counts.json")).is_ok());
    }
}
