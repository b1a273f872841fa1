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
    #[command(flatten)]
    pub common: Common,
}
