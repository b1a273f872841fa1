//! Command-line definitions (clap). Nothing here measures or prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "costlab",
    version,
    about = "What does this machine charge? Measures the cost of each layer (memory, syscalls, io_uring, shared cache lines, GC) and explains each figure with a model.",
    propagate_version = true
)]
pub struct Cli {
    /// History database [default: $COSTLAB_DB, else the user's data directory, e.g.
    /// ~/.local/share/costlab/history.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Options with the same meaning in every lab that measures.
#[derive(Args, Debug, Clone, Default)]
pub struct Common {
    /// Write results as JSON (costlab/1 schema) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Timed samples per figure
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
    /// A smaller plan: fewer sizes, shorter samples
    #[arg(long)]
    pub quick: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// What this machine is: CPU, caches, NUMA, pages, mitigations, io_uring, perf
    Machine(MachineArgs),
    // --- labs: one variant each ---
    /// Every lab in one go: the machine's cost sheet, an HTML report, and a run in the history
    Run(RunArgs),
    /// The runs in the history: id, date, machine, command, complete or not
    History(HistoryArgs),
    /// Compare two runs figure by figure: the change and whether it is significant
    Compare(CompareArgs),
    /// Export a run from the history as JSON, CSV or Markdown
    Export(ExportArgs),
    /// Write the HTML report of a stored run or of a results.json
    Report(ReportArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Each lab's quick plan (the default; all labs in about 90 s on 2 cores)
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Each lab's full plan (minutes)
    #[arg(long)]
    pub full: bool,
    /// Only these labs, a comma list (mem,syscall,echo,share,gc,numa)
    #[arg(long, value_name = "LIST")]
    pub labs: Option<String>,
    /// Write index.html and results.json here [default: ./costlab-report/<run-id>/]
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Let labs reserve a hugepage pool for the run (restored afterwards; needs root)
    #[arg(long)]
    pub reserve_hugepages: bool,
    /// Also write the results as JSON (costlab/1) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The run before: an id, a unique prefix of one, or "last"
    pub a: String,
    /// The run after: an id, a unique prefix of one, or "last"
    pub b: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Json,
    Csv,
    Markdown,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run: an id, a unique prefix of one, or "last"
    pub run: String,
    #[arg(long, value_enum, default_value = "json")]
    pub format: ExportFormat,
    /// Write to FILE instead of stdout
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run in the history (id, unique prefix or "last"), or a results.json file
    pub source: String,
    /// Directory for index.html and results.json [default: ./costlab-report/<run-id>/]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}
