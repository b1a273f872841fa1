//! `costlab check` as the command line gives it: a tuned command run and restored, or the
//! machine watched and its findings printed (and written as JSON), failing under --strict.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::inspect::inspect;
use super::render::render;
use super::tune::tune;
use super::{Level, Root};
use crate::cli::CheckArgs;
use costlab_core::error::usage;
use costlab_core::machine::restore;

/// `costlab check [--json FILE] [--tune -- COMMAND...]`.
pub fn command(args: &CheckArgs) -> Result<()> {
    let need = match &args.need {
        Some(t) => costlab_core::measure::sizes::parse_size(t)?,
        None => 4 << 30,
    };
    if args.tune {
        if args.command.is_empty() {
            return Err(usage(
                "--tune needs a command after `--`, e.g. costlab check --tune -- costlab mem latency; or use costlab run --tune",
            ));
        }
        let (guards, notes) = tune()?;
        for n in &notes {
            eprintln!("costlab check: {n}");
        }
        let status = std::process::Command::new(&args.command[0])
            .args(&args.command[1..])
            .status();
        drop(guards);
        for n in restore::restored_notes() {
            eprintln!("costlab check: {n}");
        }
        let status = status.map_err(|e| {
            usage(format!(
                "cannot run '{}': {e}; give a command on PATH after `--`",
                args.command[0]
            ))
        })?;
        if !status.success() {
            anyhow::bail!("the tuned command exited with {status}");
        }
        return Ok(());
    }
    let report = inspect(&Root(PathBuf::from("/")), Duration::from_millis(1000), need);
    let text = render(&report);
    match args.json.as_deref() {
        Some("-") => {
            eprint!("{text}");
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
                .map_err(|e| usage(format!("cannot write --json {path}: {e}")))?;
            print!("{text}");
        }
        None => print!("{text}"),
    }
    let warns: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| {
            if f.fix.is_empty() {
                format!("{}: {}", f.item, f.value)
            } else {
                format!("{}: {} (fix: {})", f.item, f.value, f.fix)
            }
        })
        .collect();
    if args.strict && !warns.is_empty() {
        for w in &warns {
            eprintln!("costlab: strict: WARN {w}");
        }
        return Err(anyhow::Error::new(costlab_core::error::Gate {
            what: "WARN findings (--strict)",
            lines: warns,
            status: 3,
        }));
    }
    Ok(())
}
