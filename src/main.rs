//! Parse, dispatch, print. No measuring happens here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use costlab::cli::{Command, Common, Parsed};
use costlab::{commands, runner};
use costlab_core::error::ProgramExit;
use costlab_core::error::{exit_code, one_line};
use costlab_core::machine::{restore, Machine};
use costlab_core::measure::{cancel, SampleSpec};
use costlab_history::report::{json, time, Doc, Outcome, RunInfo};
use costlab_history::store;
use costlab_lab::args::Measure;
use costlab_lab::{Ctx, Invocation, Lab};

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
        // The priced program said what it had to say; its status is all costlab adds.
        Err(e) if e.is::<ProgramExit>() => ExitCode::from(exit_code(&e)),
        Err(e) => {
            eprintln!("costlab: {}", one_line(&e));
            ExitCode::from(exit_code(&e))
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

/// The lab's context, after checking what can be checked before measuring: `--samples`
/// in range, `--json` writable, `--cpus` allowed (the process then runs on those CPUs only).
fn ctx_for(common: &Common, db: Option<&Path>) -> Result<Ctx> {
    check_common(common)?;
    let base = if common.quick {
        SampleSpec::quick()
    } else {
        SampleSpec::default()
    };
    costlab_core::measure::conditions::set_retry_budget(std::time::Duration::from_secs(
        common.retry_budget,
    ));
    Ok(Ctx {
        machine: Machine::probe(),
        spec: base.with_samples(common.samples),
        counters: common.counters,
        quick: common.quick,
        reserve_hugepages: false,
        history: db.map(Path::to_path_buf),
        program_exit: Default::default(),
    })
}

fn check_common(common: &Common) -> Result<()> {
    use costlab::cli::MAX_SAMPLES;
    use costlab_core::error::usage;
    match common.samples {
        Some(0) => {
            return Err(usage(
                "--samples 0: take at least 1 sample (2 or more for a spread)",
            ))
        }
        Some(n) if n > MAX_SAMPLES => {
            return Err(usage(format!(
                "--samples {n}: at most {MAX_SAMPLES} per figure (each sample lasts 10 ms or more)"
            )))
        }
        _ => {}
    }
    if let Some(dest) = &common.json {
        costlab_history::report::dest::check_file("--json", dest)?;
    }
    if let Some(list) = &common.cpus {
        costlab_core::measure::cpus::restrict_process(list)?;
    }
    Ok(())
}

/// What a measuring command needs before it measures: the common options checked, the
/// machine probed, and the history opened. The history is opened here, not after the run:
/// an unreachable server, an unknown `scheme://` or an unwritable path is bad input (exit 2,
/// one line, password masked), found before minutes of measuring and before any file exists.
fn measuring(common: &Common, db: Option<&Path>) -> Result<(store::Store, Ctx)> {
    let ctx = ctx_for(common, db)?;
    let history = store::open_for_run(db)?;
    // Cases an earlier lab in this process finished are not this run's.
    cancel::take_finished();
    Ok((history, ctx))
}

/// A lab's outcome, and whether Ctrl-C cut it short. Interrupted, the lab's error unwound its
/// loops; the cases that finished before it are in the cancel ledger.
fn outcome_or_finished(r: Result<Outcome>) -> Result<(Outcome, bool)> {
    match r {
        // A lab that stops its loop on Ctrl-C and returns what it has is partial too.
        Ok(o) => Ok((o, cancel::requested())),
        Err(e) if cancel::is_interrupt(&e) => Ok((cancel::take_finished(), true)),
        Err(e) => Err(e),
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
    let (history, ctx) = measuring(&common, db)?;
    let (outcome, interrupted) = outcome_or_finished(run(&ctx))?;
    let done = Measured {
        outcome,
        interrupted,
        to_stderr: stdout_is_the_programs,
    };
    let to = Stored {
        history: &history,
        db,
    };
    match render {
        Some(render) => emit(render, done, &common, &ctx.machine, to),
        None => emit(|o| lab.render(o), done, &common, &ctx.machine, to),
    }?;
    // A priced program's status is costlab's, once its run is stored and shown.
    match ctx.program_exit.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Ok(()),
        code => Err(anyhow::Error::new(ProgramExit(
            u8::try_from(code).unwrap_or(1),
        ))),
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
    interrupted: bool,
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
        interrupted,
        to_stderr,
    } = done;
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
        complete: !interrupted,
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

/// `--strict`: every figure that is not ok is an error, one line each, exit 3.
fn strict_check(strict: bool, rows: &[costlab_history::report::ResultRow]) -> Result<()> {
    let mut lines = costlab_history::report::verdict::not_ok_lines(rows);
    // A what-if its trial refuted (price --verify) fails --strict like a figure not ok.
    lines.extend(costlab_price::verify::rows::refuted_lines(rows));
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
