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
    /// What sharing a written cache line costs: shared Arcs, atomics, false sharing, a mutex;
    /// how far each scales (USL fit); `share c2c` for core-to-core latency
    Share(ShareArgs),
}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

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
    #[arg(long, value_name = "LIST")]
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
    C2c(C2cArgs),
}

#[derive(Args, Debug)]
pub struct C2cArgs {
    /// CPUs whose pairs to measure (kernel list, e.g. 0-3,8) [default: all this process may use]
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
