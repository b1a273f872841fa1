//! The share lab's command line: `costlab share` and `share c2c`.

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ShareArgs {
    #[command(subcommand)]
    pub what: Option<ShareWhat>,
    /// Cases to run (comma list): arc-shared, arc-per-thread, atomic-shared, atomic-padded,
    /// atomic-false-sharing, mutex-shared, read-only-shared [default: all]
    #[arg(long, value_name = "LIST")]
    pub case: Option<String>,
    /// Thread counts to sweep (comma list) [default: 1, 2, 4, ... up to the CPUs this process may use]
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub threads: Option<String>,
    /// Allow more threads than CPUs (the figures then include the scheduler's time slicing)
    #[arg(long)]
    pub oversubscribe: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Subcommand, Debug)]
pub enum ShareWhat {
    /// Core-to-core latency: two pinned threads bounce one cache line with compare-and-swap
    #[command(
        after_help = "Examples:\n  costlab share c2c                every pair of CPUs\n  costlab share c2c --quick        the first CPU against every other\n  costlab share c2c --cpus 0-3,8"
    )]
    C2c(C2cArgs),
}

#[derive(Args, Debug)]
pub struct C2cArgs {
    #[command(flatten)]
    pub common: Common,
}
