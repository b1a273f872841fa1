//! The counters lab's command line: `costlab counters --pid PID [--duration D]`.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone)]
pub struct CountersArgs {
    /// The running process to count (every thread it has, and those they start)
    #[arg(long, value_name = "PID", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<u32, 1, 4194304>)]
    pub pid: u32,
    /// How long to count it (2s, 500ms); --samples intervals of it give each rate's spread
    /// [default: 2s; 1s with --quick]
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
