//! The pin lab's command line.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct PinArgs {
    /// Cases: the workloads (comma list): memory, sharing, echo [default: all]
    #[arg(long = "case", value_name = "LIST")]
    pub workload: Option<String>,
    /// Placements (comma list): pinned, free, stacked, irq-cpu, same-core, same-node,
    /// cross-node, per-core [default: all that this machine allows]
    #[arg(long, value_name = "LIST")]
    pub placement: Option<String>,
    /// Busy threads of the memory and sharing workloads, one count (echo is always a server
    /// and a client) [default: 2]
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub threads: Option<String>,
    /// For irq-cpu: move the network interface's queue interrupts (smp_affinity_list) onto
    /// the server's CPU for the run, through the restore journal (root)
    #[arg(long)]
    pub move_irqs: bool,
    /// Length of each run (1s, 500ms)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
