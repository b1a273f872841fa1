//! Command-line definitions (clap). Nothing here measures or prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  costlab check\n  costlab check --json -\n  costlab check --strict && costlab run    measure only on a quiet machine (exit 3 on a WARN)\n  costlab check --tune -- costlab mem latency --sizes 1G --pages 4k,thp"
)]
pub struct CheckArgs {
    /// Write the findings as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Exit 3 when any finding is a WARN (one line each on stderr): gate a benchmark job on a
    /// quiet machine
    #[arg(long)]
    pub strict: bool,
    /// Apply the safe settings (governor performance, boost off, numa_balancing off) for the
    /// length of the command given after `--`, then restore them (needs root)
    #[arg(long)]
    pub tune: bool,
    /// The command to run tuned, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Memory the planned run needs, to compare with what is available [default: 4G]
    #[arg(long, value_name = "SIZE")]
    pub need: Option<String>,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Each lab's quick plan (the default; all labs in about 60 s on 2 cores)
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Each lab's full plan (minutes)
    #[arg(long)]
    pub full: bool,
    /// Only these labs, a comma list (mem,syscall,cost,echo,mitigations,share,cpu,gc,numa,zerocopy,pin: registry order)
    #[arg(long, value_name = "LIST")]
    pub labs: Option<String>,
    /// Write index.html and results.json in this directory [default:
    /// ./costlab-report/<run-id>/]
    #[arg(long = "out-dir", value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Let labs reserve a hugepage pool for the run (restored afterwards; needs root)
    #[arg(long)]
    pub reserve_hugepages: bool,
    /// Also write the results as JSON (costlab/1) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Exit 3 if any figure is not ok (disturbed or noisy), one line per figure: for CI
    #[arg(long)]
    pub strict: bool,
    /// Seconds the run may spend re-measuring disturbed or noisy cases (each case at most
    /// 3 times; 0 = never re-measure)
    #[arg(
        long,
        value_name = "SECS",
        env = "COSTLAB_RETRY_BUDGET",
        default_value_t = 60,
        allow_hyphen_values = true,
        value_parser = costlab_lab::args::whole::<u64, 0, {u64::MAX}>
    )]
    pub retry_budget: u64,
    /// Apply `costlab check`'s safe settings (governor performance, boost off, numa_balancing
    /// off) for the run, and restore them after
    #[arg(long)]
    pub tune: bool,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
    /// Also write the run in Prometheus's text format to FILE (written beside it, then renamed
    /// over it), for node_exporter's textfile collector: e.g.
    /// /var/lib/prometheus/node-exporter/costlab.prom
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write costlab.1 and a page for every command (costlab-mem.1, ...) in DIR instead of
    /// costlab.1 on stdout
    #[arg(long = "out-dir", value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Write the runs as JSON to FILE, or "-" for stdout (a list of {id, started, machine_id,
    /// machine, command, figures, complete})
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The run before: an id, a unique prefix of one, or "last"
    pub a: String,
    /// The run after: an id, a unique prefix of one, or "last"
    pub b: String,
    /// Smallest change, in percent of the median, that is called a change
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 5.0,
        allow_hyphen_values = true
    )]
    pub min_effect: f64,
    /// Write the comparison as JSON to FILE, or "-" for stdout (then the table goes to stderr):
    /// each figure's A, B, change, p, BH-adjusted p, verdict, and both runs' quality
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Exit 4 when the comparison calls a change of this kind: a regression (a figure got
    /// worse) or any change. For CI
    #[arg(long, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
}

/// What `compare --fail-on` gates on.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// A called change that made a figure worse (a cost up, a rate down)
    Regression,
    /// Any called change, better or worse
    Change,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// results.json files written by `--json` or `costlab export`
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The history to copy into: a postgres:// URL (or another SQLite file)
    #[arg(long, value_name = "URL|PATH")]
    pub to: PathBuf,
    /// Runs to copy (ids, unique prefixes, "last") [default: every run]
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct MachinesArgs {
    /// Write the grid as JSON to FILE, or "-" for stdout (each machine's latest headline
    /// figures with their verdicts)
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug)]
pub struct TrendArgs {
    /// The figure, as `compare` names it (a unique part of the name is enough) [default:
    /// every figure with a change]
    pub figure: Option<String>,
    /// Only runs of this machine (an id or a unique part of one, as `costlab machines` shows)
    #[arg(long, value_name = "M")]
    pub machine: Option<String>,
    /// Write the trends and their changes as JSON to FILE ("-" for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write an HTML page with a chart per figure to FILE
    #[arg(long = "out", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run: an id, a unique prefix of one, or "last"
    pub run: String,
    /// What to write: the run as JSON (costlab/1), CSV (one row per figure), a Markdown table,
    /// or Prometheus's text format (node_exporter's textfile collector; README, "a fleet")
    #[arg(long, default_value = "json", value_parser = clap::builder::PossibleValuesParser::new(costlab_history::report::export::names()))]
    pub format: String,
    /// Write to FILE instead of stdout
    #[arg(long = "out", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// CSV: one row per sample instead of one per figure
    #[arg(long = "raw-samples")]
    pub samples: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run in the history (id, unique prefix or "last"), or a results.json file
    #[arg(required_unless_present = "machines")]
    pub source: Option<String>,
    /// Instead of one run: machines side by side (comma list of machine ids or unique parts
    /// of them, as `costlab machines` shows; "all" for every one)
    #[arg(long, value_name = "LIST", conflicts_with = "source")]
    pub machines: Option<String>,
    /// Write index.html and results.json in this directory [default:
    /// ./costlab-report/<run-id>/]
    #[arg(long = "out-dir", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Overlay a second run (id, unique prefix, "last" or a results.json) in every chart,
    /// dashed and lighter, and ring the figures that changed significantly
    #[arg(long, value_name = "RUN", conflicts_with = "machines")]
    pub against: Option<String>,
    /// With --against: the smallest change of a median, in percent, that is called a change
    #[arg(long, value_name = "PCT", default_value_t = costlab_history::analysis::compare::MIN_EFFECT_PCT, requires = "against")]
    pub min_effect: f64,
}

/// An old spelling of a flag: on the command `path` (words after `costlab`), `--old` still
/// parses as the argument `id` (whose long name is the new spelling), hidden from `--help`,
/// and warns once per process (`old_spelling_warning`).
pub struct OldSpelling {
    pub path: &'static str,
    pub id: &'static str,
    pub old: &'static str,
    /// The new spelling, where the old one is a hidden argument of its own (gc's `--reps`,
    /// read beside `--samples`) rather than an alias.
    pub own: Option<&'static str>,
}

const fn old(path: &'static str, id: &'static str, old: &'static str) -> OldSpelling {
    OldSpelling {
        path,
        id,
        old,
        own: None,
    }
}

const fn own(path: &'static str, old: &'static str, new: &'static str) -> OldSpelling {
    OldSpelling {
        path,
        id: old,
        old,
        own: Some(new),
    }
}

/// Every old spelling, in one place: `command()` adds each as a hidden alias of its argument,
/// `old_spelling_warning` names the new spelling. One meaning, one visible spelling: sizes
/// `--sizes`, threads `--threads`, the case selector `--case`, a count of samples `--samples`,
/// an output file `--out`, an output directory `--out-dir`.
pub const OLD_SPELLINGS: &[OldSpelling] = &[
    old("mem bandwidth", "block", "block"),
    old("mem bandwidth", "op", "op"),
    old("mem loaded", "size", "size"),
    old("echo", "engine", "engine"),
    old("echo", "sizes", "size"),
    old("echo", "threads", "threads"),
    old("echo serve", "engine", "engine"),
    old("echo serve", "size", "size"),
    old("echo serve", "cpu", "cpu"),
    old("echo load", "size", "size"),
    old("echo load", "threads", "threads"),
    old("numa", "size", "size"),
    old("zerocopy", "methods", "methods"),
    old("pin", "workload", "workload"),
    own("gc", "reps", "samples"),
    own("gc tax", "reps", "samples"),
    old("run", "report", "out"),
    old("run", "report", "report"),
    old("report", "out", "out"),
    old("export", "output", "output"),
    old("export", "samples", "samples"),
    old("trend", "html", "html"),
    old("price", "terms", "terms"),
];

/// Add the old spellings that belong to `cmd` (whose path is `path`) and its subcommands.
fn add_old_spellings(mut cmd: clap::Command, path: &str) -> clap::Command {
    for o in OLD_SPELLINGS
        .iter()
        .filter(|o| o.path == path && o.own.is_none())
    {
        cmd = cmd.mut_arg(o.id, |a| a.alias(o.old));
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in subs {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |c| add_old_spellings(c, &sub_path));
    }
    cmd
}

/// The one warning line for the old spellings `argv` used (`None`: none), naming each new
/// spelling: "costlab: --engine is now --case; the old spelling will go". Only the words
/// before a `--` are flags; a value that merely looks like an old flag is not one.
pub fn old_spelling_warning<I, T>(argv: I) -> Option<String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let cmd = command();
    let matches = cmd.clone().try_get_matches_from(&argv).ok()?;
    // The command path that ran, and its clap command (to name each new spelling).
    let mut path = Vec::new();
    let mut at = &cmd;
    let mut m = &matches;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_string());
        at = at.find_subcommand(name)?;
        m = sub;
    }
    let path = path.join(" ");
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|w| w.to_string_lossy().into_owned())
        .take_while(|w| w != "--")
        .collect();
    let mut said = Vec::new();
    for o in OLD_SPELLINGS.iter().filter(|o| o.path == path) {
        let flag = format!("--{}", o.old);
        let used = words
            .iter()
            .any(|w| *w == flag || w.starts_with(&format!("{flag}=")));
        let new = match o.own {
            Some(new) => new,
            None => at
                .get_arguments()
                .find(|a| a.get_id() == o.id)
                .and_then(|a| a.get_long())?,
        };
        if used && new != o.old {
            said.push(format!("{flag} is now --{new}"));
        }
    }
    if said.is_empty() {
        return None;
    }
    let spelling = if said.len() == 1 {
        "the old spelling will go"
    } else {
        "the old spellings will go"
    };
    Some(format!("costlab: {}; {spelling}", said.join(", ")))
}

/// The one line for a value costlab's own parser refused: "--samples -3: use a whole number
/// from 1 to 1000", the flag and the value as typed.
fn bad_number_line(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    use std::error::Error as _;
    let why = e.source()?.downcast_ref::<costlab_lab::args::BadNumber>()?;
    let arg = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    let value = match e.get(ContextKind::InvalidValue)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    let flag = arg.split(' ').next().unwrap_or(&arg);
    Some(format!("costlab: {flag} {value}: {why}\n"))
}

/// The text of a parse error as the user sees it: clap's whole message (the cause, the right
/// spelling or the possible values, the subcommand's usage line), "costlab:" in place of
/// "error:".
pub fn clap_message(e: &clap::Error) -> String {
    if let Some(line) = bad_number_line(e) {
        return line;
    }
    let text = e.render().to_string();
    match text.strip_prefix("error: ") {
        Some(rest) => format!("costlab: {rest}"),
        None => text,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(args: &[&str]) -> String {
        let mut argv = vec!["costlab"];
        argv.extend_from_slice(args);
        let Err(e) = parse_from(argv) else {
            panic!("should not parse: {args:?}")
        };
        clap_message(&e)
    }

    #[test]
    fn a_missing_argument_is_named_with_the_usage_line() {
        let m = err(&["echo", "load", "--duration", "1s"]);
        assert!(m.contains("--target <HOST:PORT>"), "{m}");
        assert!(m.contains("Usage: costlab echo load"), "{m}");
        assert!(m.starts_with("costlab: "), "{m}");
    }

    #[test]
    fn a_misspelling_gets_the_right_spelling() {
        let m = err(&["mem", "latency", "--size", "4K"]);
        assert!(m.contains("--sizes"), "{m}");
        assert!(m.contains("Usage: costlab mem latency"), "{m}");
    }

    #[test]
    fn a_bad_choice_lists_the_possible_values() {
        let m = err(&["export", "last", "--format", "xml"]);
        assert!(
            m.contains("[possible values: json, csv, markdown, prometheus]"),
            "{m}"
        );
    }

    #[test]
    fn a_negative_size_reaches_the_size_parser() {
        // '-1' is a value of --sizes (was --block), not an unknown flag: the lab's size
        // parser then says what is wrong with it.
        use costlab_mem::args::{MemArgs, MemCommand};
        let Ok(Parsed::Lab { matches, .. }) =
            parse_from(["costlab", "mem", "bandwidth", "--block", "-1"])
        else {
            panic!()
        };
        let m: MemArgs = costlab_lab::args::parsed(&matches).unwrap();
        let Some(MemCommand::Bandwidth(b)) = &m.what else {
            panic!()
        };
        assert_eq!(b.block, "-1");
        let e = costlab_core::measure::sizes::parse_size_list(&b.block).unwrap_err();
        assert!(e.to_string().contains("above zero"), "{e}");
    }

    #[test]
    fn old_spellings_still_parse_and_stay_out_of_help() {
        for argv in [
            &["costlab", "mem", "bandwidth", "--block", "4M"][..],
            &["costlab", "echo", "--threads", "2"],
            &[
                "costlab",
                "echo",
                "load",
                "--target",
                "x:1",
                "--threads",
                "2",
            ],
            &["costlab", "echo", "serve", "--cpu", "0"],
            &["costlab", "gc", "--reps", "2"],
            &["costlab", "gc", "tax", "--reps", "2"],
            &["costlab", "run", "--report", "d"],
            &["costlab", "export", "last", "--output", "f"],
            &["costlab", "export", "last", "-o", "f"],
            &["costlab", "export", "last", "--samples"],
            &["costlab", "mem", "bandwidth", "--op", "read"],
            &["costlab", "mem", "loaded", "--size", "64M"],
            &["costlab", "echo", "--engine", "epoll", "--size", "16"],
            &[
                "costlab", "echo", "serve", "--engine", "epoll", "--size", "16",
            ],
            &["costlab", "echo", "load", "--target", "x:1", "--size", "16"],
            &["costlab", "numa", "--size", "64M"],
            &["costlab", "zerocopy", "--methods", "send"],
            &["costlab", "pin", "--workload", "memory"],
            &["costlab", "run", "--out", "d"],
            &["costlab", "report", "last", "--out", "d"],
            &["costlab", "trend", "--html", "t.html"],
        ] {
            if let Err(e) = parse_from(argv) {
                panic!("{argv:?}: {e}");
            }
        }
        let mut cmd = command();
        let help = cmd
            .find_subcommand_mut("mem")
            .unwrap()
            .find_subcommand_mut("bandwidth")
            .unwrap()
            .render_help()
            .to_string();
        assert!(
            help.contains("--sizes") && !help.contains("--block "),
            "{help}"
        );
    }

    #[test]
    fn an_old_spelling_warns_once_naming_the_new_one() {
        let w = |args: &[&str]| {
            let mut argv = vec!["costlab"];
            argv.extend_from_slice(args);
            old_spelling_warning(argv)
        };
        assert_eq!(
            w(&["echo", "--engine", "epoll"]).as_deref(),
            Some("costlab: --engine is now --case; the old spelling will go")
        );
        let two = w(&["echo", "--engine=epoll", "--size", "16"]).unwrap();
        assert_eq!(two.lines().count(), 1, "{two}");
        assert!(
            two.contains("--engine is now --case") && two.contains("--size is now --sizes"),
            "{two}"
        );
        assert_eq!(w(&["echo", "--case", "epoll"]), None);
        assert_eq!(w(&["export", "last", "--raw-samples"]), None);
        assert!(w(&["export", "last", "--samples"])
            .unwrap()
            .contains("--samples is now --raw-samples"));
        // After `--` the words are a program's, not costlab's.
        assert_eq!(w(&["check", "--", "prog", "--engine"]), None);
    }

    #[test]
    fn every_old_spelling_names_an_argument_of_its_command() {
        // mut_arg panics on an unknown id: building the tree checks the table.
        let mut cmd = command();
        cmd.build();
        for o in OLD_SPELLINGS {
            let mut at = &cmd;
            for word in o.path.split(' ') {
                at = at
                    .find_subcommand(word)
                    .unwrap_or_else(|| panic!("{}", o.path));
            }
            let arg = at.get_arguments().find(|a| a.get_id() == o.id).unwrap();
            if o.own.is_some() {
                assert!(
                    arg.is_hide_set() && arg.get_long() == Some(o.old),
                    "{}",
                    o.old
                );
                continue;
            }
            assert!(
                arg.get_all_aliases().unwrap_or_default().contains(&o.old),
                "{} --{}",
                o.path,
                o.old
            );
            assert!(
                arg.get_visible_aliases().unwrap_or_default().is_empty(),
                "{} --{}",
                o.path,
                o.old
            );
        }
    }

    #[test]
    fn a_negative_count_gets_costlab_s_own_line() {
        assert_eq!(
            err(&["syscall", "--samples", "-3"]),
            "costlab: --samples -3: use a whole number from 1 to 1000\n"
        );
        let m = err(&["echo", "load", "--target", "x:1", "--conns", "-2"]);
        assert_eq!(m, "costlab: --conns -2: use a whole number from 0 up\n");
        assert!(err(&["gc", "tax", "--seconds", "-1"]).starts_with("costlab: --seconds -1: "));
    }

    #[test]
    fn every_command_has_examples_and_run_takes_counters() {
        let cmd = command();
        let nested = cmd.get_subcommands().flat_map(|c| c.get_subcommands());
        for sub in cmd.get_subcommands().chain(nested) {
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                after.starts_with("Examples:") && after.lines().count() >= 3,
                "{}: {after}",
                sub.get_name()
            );
        }
        assert!(parse_from(["costlab", "run", "--counters"]).is_ok());
    }

    #[test]
    fn the_labs_are_listed_after_run_in_the_registry_s_order() {
        let mut cmd = command();
        cmd.build();
        let mut subs: Vec<_> = cmd
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .map(|c| (c.get_display_order(), c.get_name().to_string()))
            .collect();
        subs.sort();
        let names: Vec<String> = subs.into_iter().map(|(_, n)| n).collect();
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        assert_eq!(at("machine"), 0);
        assert_eq!(at("run"), 1);
        assert_eq!(at("mem"), 2);
        assert!(at("pin") < at("history"), "{names:?}");
        // A lab's commands are listed together: the numa lab's three, one after another.
        let mut numa = [at("numa"), at("numa-knobs"), at("numa-maps")];
        numa.sort();
        assert!(numa[2] - numa[0] == 2, "{names:?}");
    }

    #[test]
    fn numa_maps_refuses_what_it_would_ignore() {
        for flag in ["--samples", "--quick", "--counters"] {
            let mut argv = vec!["costlab", "numa-maps", "--self", flag];
            if flag == "--samples" {
                argv.push("3");
            }
            assert!(parse_from(argv).is_err(), "{flag}");
        }
    }

    #[test]
    fn db_is_read_before_or_after_a_lab_s_command() {
        for argv in [
            &["costlab", "--db", "x.db", "syscall"][..],
            &["costlab", "syscall", "--db", "x.db"],
        ] {
            let Ok(Parsed::Lab { db, name, .. }) = parse_from(argv) else {
                panic!("{argv:?}")
            };
            assert_eq!(name, "syscall");
            assert_eq!(db, Some(PathBuf::from("x.db")), "{argv:?}");
        }
    }
}
