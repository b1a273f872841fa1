//! `costlab price`'s arguments.

use std::path::PathBuf;

use clap::Args;

use costlab_lab::args::Common;

/// `costlab price [--pid PID --duration D | --from FILE | -- CMD ARGS...]`.
#[derive(Args, Debug, Clone, Default)]
pub struct PriceArgs {
    /// Count a running process (its threads, not its children) instead of a command
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,
    /// How long to count a --pid (1s, 500ms)
    #[arg(long, value_name = "D", default_value = "5s", requires = "pid")]
    pub duration: String,
    /// Untraced runs of the command whose system time the price is checked against (1 to 1000)
    #[arg(long, value_name = "N", default_value_t = 1, allow_hyphen_values = true, value_parser = runs)]
    pub runs: usize,
    /// Check against the traced run's own times instead of untraced runs (with --count-only
    /// or --pid, less the counter's cost per syscall, measured here now)
    #[arg(long)]
    pub once: bool,
    /// Take the unit costs from this stored run (an id, a unique prefix of one, or `last`)
    /// instead of the newest ok figures of this machine
    #[arg(long = "terms-run", value_name = "RUN")]
    pub terms: Option<String>,
    /// Write what was counted (the command, this machine, its times, every event and its
    /// count) to FILE, to price it later or elsewhere with --from
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub save_counts: Option<PathBuf>,
    /// Price the counts saved in FILE (by --save-counts) instead of running anything: no
    /// root, no tracer
    #[arg(long, value_name = "FILE", conflicts_with_all = ["command", "pid"])]
    pub from: Option<PathBuf>,
    /// Price the same counts with another machine's stored unit costs too (a machine id or a
    /// unique part of one, as `costlab machines` lists them) and show both side by side
    #[arg(long, value_name = "MACHINE")]
    pub on: Option<String>,
    /// Count only (syscalls, faults, switches), the cheapest run: no measured split of the
    /// CPU time at the kernel's transitions, no samples
    #[arg(long)]
    pub count_only: bool,
    /// Time one syscall in N of each kind in the measured split (a power of two, 1 to 1024;
    /// 1: every call timed). Every call is still counted; the syscall lines become estimates
    /// with a 95% interval
    #[arg(long, value_name = "N", default_value_t = 1, allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<u32, 1, 1024>)]
    pub time_one_in: u32,
    /// Try each what-if whose remedy can be set from outside the program (GOGC, GOMEMLIMIT,
    /// glibc's hugetlb tunable, the THP mode, pinning, NUMA interleave): --runs rounds of the
    /// program as it is and with each remedy, interleaved, and the saving measured beside the
    /// one predicted, with a verdict
    #[arg(long)]
    pub verify: bool,
    /// With --verify: a pattern for the program's own throughput in its output (a regular
    /// expression; its first group, or the whole match, is the number; the last match counts)
    #[arg(long, value_name = "REGEX")]
    pub rate: Option<String>,
    /// With --verify: a pattern for the work the program did, printed in its output (operations,
    /// requests; read as --rate is): each saving is then measured at equal work, the remedy's
    /// run scaled to the work of the run as it is (a program that runs for a fixed time turns
    /// CPU saved into more work)
    #[arg(long, value_name = "REGEX")]
    pub work: Option<String>,
    /// With --verify: reserve a 2 MiB hugetlb pool for glibc's hugetlb=2 trial (given back
    /// after, through the restore journal)
    #[arg(long)]
    pub reserve_hugepages: bool,
    /// Measure the tracer's own cost per event again (about 30-50 s), though the history holds
    /// one of this machine, kernel and costlab build from the last day
    #[arg(long)]
    pub recalibrate: bool,
    #[command(flatten)]
    pub common: Common,
    /// The command to count and price, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--runs N`: 1 to 1000 untraced runs, or 0 with `--once` (`argcheck::check_runs`); the
/// message names both, so that it says what parses.
fn runs(text: &str) -> Result<usize, costlab_lab::args::BadNumber> {
    costlab_lab::args::whole::<usize, 0, 1000>(text).map_err(|_| {
        costlab_lab::args::BadNumber(
            "use a whole number from 1 to 1000 (or 0 with --once), like --runs 5".into(),
        )
    })
}
