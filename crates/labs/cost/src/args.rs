//! `costlab cost`'s arguments.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct CostArgs {
    /// Terms to measure, a comma list (fault-4k, fault-thp, switch-same-cpu, ...); all by default
    #[arg(long, value_name = "LIST")]
    pub terms: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
