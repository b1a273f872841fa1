//! Parse, dispatch, print. No measuring happens here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use costlab::cli::{Command, Common, Parsed};
use costlab::{commands, registry, runner};
use costlab_core::error::{exit_code, exit_code_beside_program, one_line, ProgramFailed};
use costlab_core::machine::{restore, Machine};
use costlab_core::measure::cancel;
use costlab_history::report::{json, time, Doc, Outcome, RunInfo};
use costlab_history::store;
use costlab_lab::args::Measure;
use costlab_lab::{Ctx, Invocation, Lab, Scope};

fn main() -> ExitCode {
    install_panic_hook();
    cancel::install(|| {
        restore::restore_all();
    });
    // A costlab killed mid-change (SIGKILL) left settings changed: put them back first, on
    // any invocation (`--version`, `--help`, `help` and a bad flag included).
    let recovered = restore::journal::recover_stale();
    let parsed = match costlab::cli::parse_from(std::env::args_os()) {
        Ok(p) => p,
        Err(e) => {
            recovered.iter().for_each(|n| eprintln!("costlab: {n}"));
            return clap_exit(e);
        }
    };
    // A command that runs the user's program exits with its status: costlab's own statuses
    // keep out of its way (`error::beside_program`).
    let beside_program =
        matches!(&parsed, Parsed::Lab { lab, name, .. } if lab.runs_a_program(name));
    // An old spelling (`--engine`, `--size`, ...) still works; one line says the new one.
    if let Some(w) = costlab::cli::old_spelling_warning(std::env::args_os()) {
        eprintln!("{w}");
    }
    // `--db`: the history every command stores into or reads, handed down explicitly.
    let db: Option<PathBuf> = match &parsed {
        Parsed::Own(cli) => cli.db.clone(),
        Parsed::Lab { db, .. } => db.clone(),
    };
    let explicit =
        matches!(&parsed, Parsed::Own(cli) if matches!(cli.command, Command::Restore(_)));
    if !explicit {
        for note in &recovered {
            eprintln!("costlab: {note}");
        }
    }
    let result = if explicit {
        restore_command(&recovered)
    } else {
        dispatch(parsed, db.as_deref())
    };
    let restored = restore::restore_all();
    for note in restored {
        eprintln!("costlab: {note}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `--strict` printed its lines; a failed program's one line is printed here.
        Err(e) => {
            if !e.is::<costlab_core::error::NotOk>() {
                eprintln!("costlab: {}", one_line(&e));
            }
            ExitCode::from(if beside_program {
                exit_code_beside_program(&e)
            } else {
                exit_code(&e)
            })
        }
    }
}

/// Help and version print whole. A parse error prints clap's whole message (the cause, the
/// right spelling or the possible values, the subcommand's usage line), exit 2.
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
    eprint!("{}", costlab::cli::clap_message(&e));
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let beside_program =
        costlab::cli::command_name(&argv).is_some_and(|n| registry::runs_a_program(&n));
    ExitCode::from(if beside_program {
        costlab_core::error::beside_program::COSTLAB
    } else {
        2
    })
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

/// `costlab restore`: what the journal recovery did, and what live costlab processes hold.
fn restore_command(recovered: &[String]) -> Result<()> {
    let mut out = String::new();
    if recovered.is_empty() {
        out.push_str("restore: no setting left changed by a costlab that no longer runs\n");
    }
    for n in recovered {
        out.push_str(&format!("restore: {n}\n"));
    }
    for j in restore::journal::live_others() {
        for c in &j.changes {
            out.push_str(&format!(
                "restore: {} is changed to {} by costlab pid {} (still running: `{}`); it will restore {} itself\n",
                c.what, c.new, j.pid, j.command, c.old
            ));
        }
    }
    out.push_str(&format!(
        "restore: journal directory {}\n",
        restore::journal::dir().display()
    ));
    print_out(&out)
}

fn command_line() -> String {
    // A database URL's password never reaches the stored run.
    let args: Vec<String> = std::env::args().skip(1).collect();
    store::redact(&format!("costlab {}", args.join(" ")))
}

/// What a measuring command needs before it measures: the common options checked, the
/// machine probed, and the history opened. The history is opened here, not after the run:
/// an unreachable server, an unknown `scheme://` or an unwritable path is bad input (exit 2,
/// one line, password masked), found before minutes of measuring and before any file exists.
fn measuring(common: &Common, db: Option<&Path>) -> Result<Ctx> {
    costlab::cli::check_common(common)?;
    let history = store::open_for_run(db)?;
    // Cases an earlier lab in this process finished are not this run's.
    cancel::take_finished();
    Ok(Ctx::new(Machine::probe(), common, Scope::Command).with_history(history))
}

/// How a lab's run ended.
enum Stop {
    Done,
    /// Ctrl-C cut it short.
    Interrupted,
    /// The lab failed after some cases finished: their figures are kept, then this error.
    Failed(anyhow::Error),
}

/// A lab's outcome, and how it ended. Interrupted, the lab's error unwound its loops; the
/// cases that finished before it are in the cancel ledger. A lab that fails after some cases
/// finished loses nothing either: those cases are kept (stored incomplete) before its error.
fn outcome_or_finished(r: Result<Outcome>) -> Result<(Outcome, Stop)> {
    match r {
        // A lab that stops its loop on Ctrl-C and returns what it has is partial too.
        Ok(o) if cancel::requested() => Ok((o, Stop::Interrupted)),
        Ok(o) => Ok((o, Stop::Done)),
        Err(e) if cancel::is_interrupt(&e) => Ok((cancel::take_finished(), Stop::Interrupted)),
        Err(e) => {
            let kept = cancel::take_finished();
            if kept.results.is_empty() {
                Err(e)
            } else {
                Ok((kept, Stop::Failed(e)))
            }
        }
    }
}

/// The one line of a lab that failed after measuring: its error, and the run that keeps
/// what it measured first (the same exit status as the error alone).
fn kept_after(e: anyhow::Error, figures: usize, id: &str) -> anyhow::Error {
    let line = format!(
        "{}; the {figures} figures measured before it are kept in run {id} (incomplete): costlab export {id}",
        one_line(&e)
    );
    if exit_code(&e) == 2 {
        costlab_core::error::usage(line)
    } else {
        anyhow::anyhow!(line)
    }
}

/// A lab's own command: check the common options, run, print the lab's tables (or those the
/// command draws itself), write its JSON.
fn lab_command(lab: &dyn Lab, m: Measure, db: Option<&Path>) -> Result<()> {
    let Measure {
        common,
        run,
        render,
        stdout_is_the_programs,
    } = m;
    let ctx = measuring(&common, db)?;
    let (outcome, stop) = outcome_or_finished(run(&ctx))?;
    let done = Measured {
        outcome,
        stop,
        to_stderr: stdout_is_the_programs,
    };
    let history = ctx.history()?;
    let to = Stored {
        history: &history,
        db,
    };
    let shown = match render {
        Some(render) => emit(render, done, &common, &ctx.machine, to),
        None => emit(|o| lab.render(o), done, &common, &ctx.machine, to),
    };
    // A program that failed gives the command its status once its run is stored and shown;
    // costlab's own failure, if any, keeps its line.
    match ctx.program_end().filter(|end| end.failed()) {
        Some(end) => {
            if let Err(e) = &shown {
                if !e.is::<costlab_core::error::NotOk>() {
                    eprintln!("costlab: {}", one_line(e));
                }
            }
            Err(anyhow::Error::new(ProgramFailed(end)))
        }
        None => shown,
    }
}

/// Where a lab's run is stored: the history opened before measuring, and `--db` to open it
/// afresh should it fail on the write (`store::record`).
#[derive(Clone, Copy)]
struct Stored<'a> {
    history: &'a store::Store,
    db: Option<&'a Path>,
}

/// A lab's figures, whole or (after Ctrl-C) those of the cases that finished.
struct Measured {
    outcome: Outcome,
    stop: Stop,
    /// The tables go to stderr (stdout is a priced program's).
    to_stderr: bool,
}

/// Store a lab's outcome, print it, write its JSON. With `--json -` the tables go to stderr so
/// stdout stays parseable. The run is stored before its tables are drawn, so nothing that
/// goes wrong in drawing a partial outcome can lose its figures; its id is printed only once
/// stored. Interrupted, the run is stored incomplete and the command exits 130.
fn emit(
    render: impl FnOnce(&Outcome) -> String,
    done: Measured,
    common: &Common,
    machine: &Machine,
    to: Stored,
) -> Result<()> {
    let Stored { history, db } = to;
    let Measured {
        mut outcome,
        stop,
        to_stderr,
    } = done;
    let interrupted = matches!(stop, Stop::Interrupted);
    let failed = match stop {
        Stop::Failed(e) => Some(e),
        _ => None,
    };
    if let Some(e) = &failed {
        outcome.notes.push(format!(
            "stopped by an error: {} figures from the cases that finished before it; the rest was not measured ({})",
            outcome.results.len(),
            one_line(e)
        ));
    }
    if interrupted && outcome.results.is_empty() {
        eprintln!("costlab: interrupted before any case finished: nothing to store");
        return Err(anyhow::Error::new(costlab_core::error::Interrupted));
    }
    if interrupted {
        outcome.notes.push(format!(
            "interrupted (Ctrl-C): {} figures from the cases that finished; the rest was not measured",
            outcome.results.len()
        ));
    }
    // Rows a lab measured without a Watch are still judged by their spread.
    costlab_core::measure::quality::judge_rows(&mut outcome.results);
    let shown = outcome.clone();
    outcome.notes.extend(restore::restored_notes());
    let run = RunInfo {
        id: time::run_id(),
        started: time::now_rfc3339(),
        costlab: env!("CARGO_PKG_VERSION").to_string(),
        command: command_line(),
        complete: !interrupted && failed.is_none(),
    };
    let doc = Doc::new(run, serde_json::to_value(machine)?, outcome);
    let stored = store::record(history, db, &doc, &costlab::registry::sheet_of(&doc));

    let mut text = render(&shown);
    text.push_str(&costlab_history::report::verdict::footnote(&shown.results));
    if let Some(t) = costlab_history::report::table::render_counters(&shown.results) {
        text.push_str(&t);
    }
    for note in &shown.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    let to_stdout_json = common.json.as_deref() == Some("-") || to_stderr;
    if to_stdout_json {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(dest) = &common.json {
        json::write_doc(dest, &doc)?;
    }
    stored?;
    // The id `compare`, `export` and `report` take; stderr, so stdout stays the tables.
    if let Some(e) = failed {
        return Err(kept_after(e, doc.results.len(), &doc.run.id));
    }
    if interrupted {
        eprintln!("costlab: run {} (incomplete: interrupted)", doc.run.id);
        return Err(anyhow::Error::new(costlab_core::error::Interrupted));
    }
    eprintln!("costlab: run {}", doc.run.id);
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("costlab: stored in the history at {}", history.describe());
    }
    strict_check(common.strict, &doc.results)
}

/// `--strict`: every figure that is not ok, and each lab's own line, is an error, one line
/// each, exit 3.
fn strict_check(strict: bool, rows: &[costlab_history::report::ResultRow]) -> Result<()> {
    // Each lab's own lines too: a what-if its trial refuted (price --verify).
    let lines = registry::strict_lines(rows);
    if !strict || lines.is_empty() {
        return Ok(());
    }
    for l in &lines {
        eprintln!("costlab: strict: {l}");
    }
    Err(anyhow::Error::new(costlab_core::error::NotOk(lines)))
}

/// Print to stdout; a reader that closed the pipe early (`| head`) is not an error.
fn print_out(text: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Run the command: a lab's through the registry (`Lab::invoke`), the others here.
fn dispatch(parsed: Parsed, db: Option<&Path>) -> Result<()> {
    let cli = match parsed {
        Parsed::Lab {
            lab, name, matches, ..
        } => {
            return match lab.invoke(&name, &matches)? {
                Invocation::Measure(m) => lab_command(lab.as_ref(), m, db),
                Invocation::Done => Ok(()),
            }
        }
        Parsed::Own(cli) => cli,
    };
    match cli.command {
        Command::Machine(args) => {
            let m = Machine::probe();
            match args.json.as_deref() {
                Some("-") => print_out(&(serde_json::to_string_pretty(&m)? + "\n")),
                Some(path) => {
                    std::fs::write(path, serde_json::to_string_pretty(&m)? + "\n").map_err(
                        |e| costlab_core::error::usage(format!("cannot write --json {path}: {e}")),
                    )?;
                    print_out(&costlab_history::report::machine::render(&m))
                }
                None => print_out(&costlab_history::report::machine::render(&m)),
            }
        }
        Command::Run(args) => runner::command(&args, db, command_line()),
        Command::History(args) => commands::history::history(db, &args),
        Command::Compare(args) => commands::history::compare(db, &args),
        Command::Export(args) => commands::history::export(db, &args),
        Command::Report(args) => commands::history::report(db, &args),
        Command::Restore(_) => Ok(()),
        Command::Check(args) => costlab::check::command(&args),
        Command::Import(args) => commands::fleet::import(db, &args),
        Command::Push(args) => commands::fleet::push(db, &args),
        Command::Machines(args) => commands::machines::machines(db, &args),
        Command::Trend(args) => commands::trend::command(db, &args),
        Command::Completions(args) => commands::shell::completions(&args),
        Command::Man(args) => commands::shell::man(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::case;

    /// A lab that fails after one case finished: that case's figures are stored (the run
    /// incomplete, with a note), and the one error line names the run that keeps them, with
    /// the error's own exit status.
    #[test]
    fn a_lab_that_fails_after_measuring_keeps_what_it_measured() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let m = Measure {
            common: Common::default(),
            run: Box::new(|_ctx: &Ctx| {
                let mut done = Outcome::default();
                done.push(
                    "example",
                    case! {"what" => "first"},
                    "latency",
                    "ns",
                    vec![7.0],
                );
                cancel::finished(&done);
                Err(anyhow::anyhow!(
                    "the second case's buffer could not be mapped"
                ))
            }),
            render: Some(Box::new(|_o: &Outcome| String::new())),
            stdout_is_the_programs: false,
        };
        // Any registered lab: the run and its drawing are the test's own.
        let lab = registry::all().remove(0);
        let e = lab_command(lab.as_ref(), m, Some(&db)).unwrap_err();
        assert_eq!(exit_code(&e), 1);
        let line = one_line(&e);
        assert!(
            line.starts_with("the second case's buffer could not be mapped; the 1 figures measured before it are kept in run "),
            "{line}"
        );
        let history = store::open_existing(Some(&db)).unwrap();
        let runs = history.runs().unwrap();
        assert_eq!(runs.len(), 1);
        let doc = history.load_doc(&history.resolve("last").unwrap()).unwrap();
        assert!(line.contains(&doc.run.id), "{line}");
        assert!(!doc.run.complete);
        assert_eq!(doc.results.len(), 1);
        assert_eq!(doc.results[0].summary.median, 7.0);
        assert!(
            doc.notes
                .iter()
                .any(|n| n.starts_with("stopped by an error: 1 figures")),
            "{:?}",
            doc.notes
        );

        // A lab that fails before any case finished stores nothing: its error alone.
        let m = Measure {
            common: Common::default(),
            run: Box::new(|_ctx: &Ctx| Err(costlab_core::error::usage("--x 0: give 1 or more"))),
            render: None,
            stdout_is_the_programs: false,
        };
        let e = lab_command(lab.as_ref(), m, Some(&db)).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert_eq!(one_line(&e), "--x 0: give 1 or more");
        assert_eq!(history.runs().unwrap().len(), 1);
    }
}
