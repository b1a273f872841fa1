//! Command-line definitions (clap). Nothing here measures or prints.

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "costlab",
    version,
    about = "What does this machine charge? Measures the cost of each layer (memory, syscalls, io_uring, shared cache lines, GC) and explains each figure with a model.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Options with the same meaning in every lab that measures.
#[derive(Args, Debug, Clone, Default)]
pub struct Common {
    /// Write results as JSON (costlab/1 schema) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Timed samples per figure
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
    /// A smaller plan: fewer sizes, shorter samples
    #[arg(long)]
    pub quick: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// What this machine is: CPU, caches, NUMA, pages, mitigations, io_uring, perf
    Machine(MachineArgs),
    // --- labs: one variant each ---
    /// Local vs remote memory: node x node latency and bandwidth, bind vs interleave vs first-touch
    Numa(NumaArgs),
    /// Where a process's memory lives, node by node (from /proc/PID/numa_maps)
    NumaMaps(NumaMapsArgs),
}

#[derive(Args, Debug)]
pub struct NumaArgs {
    #[command(flatten)]
    pub common: Common,
    /// Only these NUMA nodes (two or more), like 0,1 or 0-3
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,
    /// Threads of the bandwidth runs (per node for the matrix, in all for the placements)
    #[arg(long, value_name = "N")]
    pub threads: Option<String>,
    /// Working set of the latency chase, like 256M or 1G
    #[arg(long, value_name = "SIZE")]
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
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}
