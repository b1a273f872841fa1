//! The pin lab's command line.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct PinArgs {
    /// Cases: the workloads (comma list): memory, sharing, echo [default: all]
    #[arg(long = "case", value_name = "LIST")]
    pub workload: Option<String>,
    /// Placements (comma list): pinned, free, stacked, irq-cpu [default: all]
    #[arg(long, value_name = "LIST")]
    pub placement: Option<String>,
    /// Length of each run (1s, 500ms)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
