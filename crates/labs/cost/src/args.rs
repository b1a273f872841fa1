//! `costlab cost`'s arguments.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct CostArgs {
    /// Terms to measure, a comma list (fault-4k, fault-thp, switch-same-cpu, ...); all by default
    #[arg(long, value_name = "LIST")]
    pub terms: Option<String>,
    /// Where the file-system terms (open, create, fsync, read-cold ...) are measured: a scratch
    /// directory is made inside DIR and removed after; their figures name DIR's file system
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Rounds: every term is measured once per round, the rounds one after the other, and
    /// each figure is the round nearest the rounds' median (ok figures first), so that a few
    /// slow seconds of the machine move one round, not the figure [default: 3; 1 with --quick]
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 1, 9>)]
    pub rounds: Option<usize>,
    #[command(flatten)]
    pub common: Common,
}
