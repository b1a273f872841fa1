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
    /// Memory: bandwidth and latency by block, threads and page size; what a TLB miss costs
    Mem(Box<MemArgs>),
}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// `costlab mem`: with no subcommand, the study's grid (threads x block x seq/rand x pages).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MemArgs {
    #[command(subcommand)]
    pub what: Option<MemCommand>,
    #[command(flatten)]
    pub grid: MemGridArgs,
}

impl MemArgs {
    /// The common options of whichever command was given.
    pub fn common(&self) -> &Common {
        match &self.what {
            Some(MemCommand::Bandwidth(a)) => &a.common,
            Some(MemCommand::Latency(a)) => &a.common,
            None => &self.grid.common,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum MemCommand {
    /// Bandwidth (GB/s) by op, pattern, block, threads and page kind
    Bandwidth(MemBandwidthArgs),
    /// Latency (ns) of dependent loads over one random cycle, by region size and page kind
    Latency(MemLatencyArgs),
}

#[derive(Args, Debug, Clone)]
pub struct MemBandwidthArgs {
    /// Ops, comma list: read, write, write-nt (streaming stores), copy (counted read + write)
    #[arg(long, default_value = "read,write,copy")]
    pub op: String,
    /// Access patterns: seq, rand (whole random 64-byte lines, 8 in flight)
    #[arg(long, default_value = "seq")]
    pub pattern: String,
    /// Buffer each thread sweeps (binary sizes: 16K,4M,1G)
    #[arg(long, default_value = "1G")]
    pub block: String,
    /// Thread counts, comma list
    #[arg(long, default_value = "1")]
    pub threads: String,
    /// Page kinds: 4k, thp, 2m, 1g (2m/1g come from the hugetlb pools)
    #[arg(long, default_value = "4k")]
    pub pages: String,
    /// One region for all threads instead of one per thread
    #[arg(long)]
    pub shared: bool,
    /// Allow more threads than CPUs
    #[arg(long)]
    pub oversubscribe: bool,
    /// Raise the hugetlb pools for the run when short (root); restored on exit and Ctrl-C
    #[arg(long)]
    pub reserve_hugepages: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct MemLatencyArgs {
    /// Region sizes to chase over (default 4K to 1G, doubling)
    #[arg(long)]
    pub sizes: Option<String>,
    /// Page kinds: 4k, thp, 2m, 1g
    #[arg(long, default_value = "4k,thp")]
    pub pages: String,
    /// Raise the hugetlb pools for the run when short (root); restored on exit and Ctrl-C
    #[arg(long)]
    pub reserve_hugepages: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct MemGridArgs {
    /// Page kinds for the grid (default 4k,thp, and 2m when its pool has the pages)
    #[arg(long)]
    pub pages: Option<String>,
    /// Raise the hugetlb pools for the run when short (root); restored on exit and Ctrl-C
    #[arg(long)]
    pub reserve_hugepages: bool,
    #[command(flatten)]
    pub common: Common,
}
