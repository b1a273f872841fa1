//! The arguments of costlab's own commands (the labs' are in their crates).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use costlab_lab::args::Common;

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
    /// Each lab's full plan (minutes) [default: each lab's quick plan, all labs in about 60 s
    /// on 2 cores]
    #[arg(long, conflicts_with = "quick")]
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
    /// Apply `costlab check`'s safe settings (governor performance, boost off, numa_balancing
    /// off) for the run, and restore them after
    #[arg(long)]
    pub tune: bool,
    /// Also write the run in Prometheus's text format to FILE (written beside it, then renamed
    /// over it), for node_exporter's textfile collector: e.g.
    /// /var/lib/prometheus/node-exporter/costlab.prom
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
    /// The options every lab's command has (`--json`, `--samples`, `--cpus`, `--counters`,
    /// `--quick`, `--strict`, `--retry-budget`), with the same meaning for the whole run
    #[command(flatten)]
    pub common: Common,
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
        allow_hyphen_values = true,
        value_parser = costlab_lab::args::percent
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
    #[arg(long, value_name = "PCT", default_value_t = costlab_history::analysis::compare::MIN_EFFECT_PCT, requires = "against", allow_hyphen_values = true, value_parser = costlab_lab::args::percent)]
    pub min_effect: f64,
}
