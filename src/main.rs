//! Parse, dispatch, print. No measuring happens here.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use costlab::cli::{Cli, Command, Common, ShareWhat};
use costlab::error::{exit_code, one_line};
use costlab::labs::{self, Ctx};
use costlab::machine::{restore, Machine};
use costlab::measure::{cancel, SampleSpec};
use costlab::report::{json, time, Doc, Outcome, RunInfo};

fn main() -> ExitCode {
    install_panic_hook();
    cancel::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    let result = dispatch(cli);
    let restored = restore::restore_all();
    for note in restored {
        eprintln!("costlab: {note}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("costlab: {}", one_line(&e));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// Help and version print whole; a parse error prints its first line only, exit 2.
fn clap_exit(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                2
            } else {
                0
            },
        );
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("bad arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("costlab: {first} (see costlab --help)");
    ExitCode::from(2)
}

/// A bug must not show a backtrace: one line, state restored, exit 101.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        restore::restore_all();
        eprintln!("costlab: internal error: {msg}{at}; please report it");
        std::process::exit(101);
    }));
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("costlab {}", args.join(" "))
}

#[allow(dead_code)] // used by the lab commands
fn ctx_for(common: &Common) -> Ctx {
    let base = if common.quick {
        SampleSpec::quick()
    } else {
        SampleSpec::default()
    };
    Ctx {
        machine: Machine::probe(),
        spec: base.with_samples(common.samples),
        counters: common.counters,
        quick: common.quick,
    }
}

/// Print a lab's outcome and write its JSON. With `--json -` the tables go to stderr so
/// stdout stays parseable.
#[allow(dead_code)] // used by the lab commands
fn emit(rendered: String, outcome: Outcome, common: &Common, machine: &Machine) -> Result<()> {
    let to_stdout_json = common.json.as_deref() == Some("-");
    let mut text = rendered;
    for note in &outcome.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    if to_stdout_json {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(dest) = &common.json {
        let mut outcome = outcome;
        outcome.notes.extend(restore::restored_notes());
        let run = RunInfo {
            id: time::run_id(),
            started: time::now_rfc3339(),
            costlab: env!("CARGO_PKG_VERSION").to_string(),
            command: command_line(),
            complete: true,
        };
        let doc = Doc::new(run, serde_json::to_value(machine)?, outcome);
        json::write_doc(dest, &doc)?;
    }
    Ok(())
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Machine(args) => {
            let m = Machine::probe();
            match args.json.as_deref() {
                Some("-") => println!("{}", serde_json::to_string_pretty(&m)?),
                Some(path) => {
                    std::fs::write(path, serde_json::to_string_pretty(&m)? + "\n")?;
                    print!("{}", m.render());
                }
                None => print!("{}", m.render()),
            }
            Ok(())
        }
        Command::Share(args) => match &args.what {
            Some(ShareWhat::C2c(c2c)) => {
                let ctx = ctx_for(&c2c.common);
                let outcome = labs::share::run_c2c(c2c, &ctx)?;
                emit(
                    labs::share::render(&outcome),
                    outcome,
                    &c2c.common,
                    &ctx.machine,
                )
            }
            None => {
                let ctx = ctx_for(&args.common);
                let outcome = labs::share::run(&args, &ctx)?;
                emit(
                    labs::share::render(&outcome),
                    outcome,
                    &args.common,
                    &ctx.machine,
                )
            }
        },
    }
}
