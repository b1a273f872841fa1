//! The numa lab's command lines: `costlab numa` and `costlab numa-maps`.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug)]
pub struct NumaArgs {
    #[command(flatten)]
    pub common: Common,
    /// Only these NUMA nodes (two or more), like 0,1 or 0-3
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,
    /// Threads of the bandwidth runs, one count (per node for the matrix, in all for the
    /// placements)
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub threads: Option<String>,
    /// Working set of the latency chase, one size like 256M or 1G
    #[arg(long = "sizes", value_name = "LIST", allow_hyphen_values = true)]
    pub size: Option<String>,
    /// Allow more threads than CPUs
    #[arg(long)]
    pub oversubscribe: bool,
}

#[derive(Args, Debug)]
pub struct NumaMapsArgs {
    /// Process ids to read
    #[arg(value_name = "PID")]
    pub pids: Vec<String>,
    /// Read this costlab process itself (a quick look; its VmRSS is reported beside)
    #[arg(long = "self")]
    pub this: bool,
    /// Write results as JSON (costlab/1 schema) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

impl NumaMapsArgs {
    /// numa-maps reads a file once: it takes no samples, no counters, no plan, so it offers
    /// only --json of the common options.
    pub fn common(&self) -> Common {
        Common {
            json: self.json.clone(),
            ..Common::default()
        }
    }
}
