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
pub struct NumaKnobsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Knobs (comma list): zone-reclaim, numa-balancing [default: both]
    #[arg(long = "case", value_name = "LIST")]
    pub knobs: Option<String>,
    /// The allocation (zone-reclaim) and the remote-start buffer (numa-balancing), one size
    /// [default: 256M; 64M with --quick]
    #[arg(long = "sizes", value_name = "LIST", allow_hyphen_values = true)]
    pub size: Option<String>,
    /// Page cache written to fill the local node [default: its free memory less half the
    /// allocation, at most 8G]
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub fill: Option<String>,
    /// Directory of the page-cache file (on a disk: tmpfs pages are not page cache)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<String>,
    /// Set each knob to 0 and then 1 (root), through the restore journal; without it the
    /// current settings alone are measured
    #[arg(long)]
    pub change_knobs: bool,
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
