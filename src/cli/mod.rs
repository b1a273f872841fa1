//! Command-line definitions (clap): the command tree (`command`, the labs' commands from the
//! registry), parsing (`parse_from`), the checks of the common options before any work
//! (`check_common`), the old spellings (`spelling`) and what a parse error says (`message`).
//! Nothing here measures or prints.

mod args;
mod message;
mod spelling;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use args::*;
pub use message::clap_message;
use spelling::add_old_spellings;
pub use spelling::{old_spelling_warning, OldSpelling, OLD_SPELLINGS};

#[derive(Parser, Debug)]
#[command(
    name = "costlab",
    version,
    about = "What does this machine charge? Measures the cost of each layer (memory, syscalls, io_uring, shared cache lines, GC) and explains each figure with a model.",
    propagate_version = true,
    after_help = "Examples:\n  costlab run                       every lab's quick plan, a report and a stored run\n  costlab mem latency --sizes 1G    one lab, one figure\n  costlab compare <run-a> last      what changed between two runs"
)]
pub struct Cli {
    /// History: a SQLite file, or a shared PostgreSQL database as postgres://USER@HOST/DB
    /// (password from PGPASSWORD or ~/.pgpass; PG* variables and sslmode as libpq)
    /// [default: $COSTLAB_DB, else the user's data directory, e.g.
    /// ~/.local/share/costlab/history.db]
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

pub use costlab_lab::args::{Common, MAX_SAMPLES};

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once; boxing would only add noise
pub enum Command {
    /// What this machine is: CPU, caches, NUMA, pages, mitigations, io_uring, perf
    #[command(after_help = "Examples:\n  costlab machine\n  costlab machine --json machine.json")]
    Machine(MachineArgs),
    /// Every lab in one go: the machine's cost sheet, an HTML report, and a run in the history
    #[command(
        after_help = "Examples:\n  costlab run                          quick plans, about 60 s on 2 cores\n  costlab run --labs mem,share --full  two labs, their full plans\n  costlab run --counters --out-dir rep/  with perf counters, the report in rep/"
    )]
    Run(RunArgs),
    // --- the labs' commands come here, from the registry (`command()`) ---
    // --- the history ---
    /// The runs in the history: id, date, machine, command, complete or not
    #[command(
        after_help = "Examples:\n  costlab history\n  costlab --db team.db history\n  costlab history --json - | jq -r '.[] | select(.complete) | .id'"
    )]
    History(HistoryArgs),
    /// Compare two runs figure by figure: the change and whether it is significant
    #[command(
        after_help = "Examples:\n  costlab compare 20261122T1000 last\n  costlab compare A B --min-effect 10\n  costlab compare A last --json - --fail-on regression   for CI: JSON on stdout, exit 4 on a regression\n\nExit status: 0 compared (whatever changed, unless --fail-on); 4 --fail-on and a change\nof that kind was called; 2 bad input, or two runs with no figure in common."
    )]
    Compare(CompareArgs),
    /// Export a run from the history as JSON, CSV, Markdown or Prometheus's text format
    #[command(
        after_help = "Examples:\n  costlab export last --format csv --out run.csv\n  costlab export last --format csv --raw-samples    one row per sample\n  costlab export 20261122T1000 --format markdown\n  costlab export last --format prometheus --out /var/lib/prometheus/node-exporter/costlab.prom"
    )]
    Export(ExportArgs),
    /// Write the HTML report of a stored run or of a results.json
    #[command(
        after_help = "Examples:\n  costlab report last\n  costlab report results.json --out-dir rep/\n  costlab report 20261122T1000\n  costlab report last --against 20261122T1000   two runs in every chart"
    )]
    Report(ReportArgs),
    // --- the machine as a place to measure ---
    /// What on this machine will disturb figures (busy processes, steal, governor, THP, ...),
    /// each with its fix; `--tune` applies the safe fixes around a command and restores them
    Check(CheckArgs),
    /// Put back settings that a costlab killed mid-run left changed (every command does this
    /// first; this says what it did and what running costlab processes hold)
    #[command(
        after_help = "Examples:\n  costlab restore\n  COSTLAB_JOURNAL_DIR=/tmp/j costlab restore"
    )]
    Restore(RestoreArgs),
    /// Add results.json documents (from other machines, CI artefacts) to the history
    #[command(
        after_help = "Examples:\n  costlab import results.json\n  costlab --db postgres://me@db/costlab import ci/*/results.json"
    )]
    Import(ImportArgs),
    /// Copy runs from this history into another (a shared PostgreSQL one)
    #[command(
        after_help = "Examples:\n  costlab push --to postgres://me@db/costlab\n  costlab push --to postgres://me@db/costlab last"
    )]
    Push(PushArgs),
    /// Every machine in the history, its latest headline figures side by side
    #[command(
        after_help = "Examples:\n  costlab machines\n  costlab --db postgres://me@db/costlab machines\n  costlab machines --json machines.json"
    )]
    Machines(MachinesArgs),
    /// A figure across runs, with the changes in it found (E-divisive means)
    #[command(
        after_help = "Examples:\n  costlab trend\n  costlab trend getppid --json -\n  costlab trend --out trend.html"
    )]
    Trend(TrendArgs),
    // --- the tool itself ---
    /// Shell completions for bash, zsh or fish (and elvish, powershell), from costlab's own
    /// command-line definitions
    #[command(
        after_help = "Examples:\n  costlab completions bash > /etc/bash_completion.d/costlab\n  costlab completions zsh > \"${fpath[1]}/_costlab\"\n  costlab completions fish > ~/.config/fish/completions/costlab.fish"
    )]
    Completions(CompletionsArgs),
    /// The man page (roff), from costlab's own command-line definitions
    #[command(
        after_help = "Examples:\n  costlab man > costlab.1 && man -l costlab.1\n  costlab man --out-dir /usr/local/share/man/man1   a page for every command"
    )]
    Man(ManArgs),
}

/// The whole command line: `Cli`'s own commands and every registered lab's commands
/// (`Lab::commands`), the labs listed after `run` in the registry's order.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let own: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut lab_names = Vec::new();
    for lab in crate::registry::all() {
        for c in lab.commands() {
            lab_names.push(c.get_name().to_string());
            cmd = cmd.subcommand(c);
        }
    }
    // clap lists subcommands in the order they were added; the labs belong between the
    // commands that run them (machine, run) and those that read what they stored.
    let split = own
        .iter()
        .position(|n| n == "run")
        .map_or(own.len(), |i| i + 1);
    let order: Vec<&String> = own[..split]
        .iter()
        .chain(&lab_names)
        .chain(&own[split..])
        .collect();
    for (i, name) in order.into_iter().enumerate() {
        cmd = cmd.mut_subcommand(name, |c| c.display_order(i));
    }
    add_old_spellings(cmd, "")
}

/// A command line, parsed.
pub enum Parsed {
    /// One of `Cli`'s own commands (machine, run, the history, check, restore).
    Own(Cli),
    /// A lab's command, for the lab to turn into an `Invocation` (`Lab::invoke`).
    Lab {
        /// `--db`, wherever it was given.
        db: Option<PathBuf>,
        /// The lab that owns the command.
        lab: Box<dyn costlab_lab::Lab>,
        /// The command's name (`mem`, `numa-maps`, ...).
        name: String,
        /// The command's own matches.
        matches: clap::ArgMatches,
    },
}

/// Parse `argv` (the program's name first) against `command()`.
pub fn parse_from<I, T>(argv: I) -> Result<Parsed, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let matches = command().try_get_matches_from(argv)?;
    if let Some((name, sub)) = matches.subcommand() {
        if let Some(lab) = crate::registry::owner_of(name) {
            return Ok(Parsed::Lab {
                db: matches.get_one::<PathBuf>("db").cloned(),
                lab,
                name: name.to_string(),
                matches: sub.clone(),
            });
        }
    }
    Cli::from_arg_matches(&matches).map(Parsed::Own)
}

/// The top-level command `argv` names (`price` in `costlab --db h.db price -- ls`), read
/// without parsing, for a command line that does not parse: the first word that is not a
/// flag, `--db`'s value skipped.
pub fn command_name<T: AsRef<std::ffi::OsStr>>(argv: &[T]) -> Option<String> {
    let mut words = argv.iter().skip(1).map(|w| w.as_ref().to_string_lossy());
    while let Some(w) = words.next() {
        if w == "--db" {
            words.next();
        } else if w == "--" {
            return None;
        } else if !w.starts_with('-') {
            return Some(w.into_owned());
        }
    }
    None
}

/// What can be checked of the common options before any work: `--samples` in range,
/// `--json` writable, `--cpus` allowed (the process then runs on those CPUs only). Bad input
/// is a usage error (exit 2, one line).
pub fn check_common(common: &Common) -> Result<()> {
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

#[cfg(test)]
mod tests;
