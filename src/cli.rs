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
    /// What a syscall costs (s), what send/recv cost in the kernel (w), what io_uring costs per op at batch n (t)
    Syscall(SyscallArgs),
}

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct SyscallArgs {
    /// io_uring batches to measure (ops per enter), a comma list from 1 to 4096
    #[arg(long, value_name = "LIST")]
    pub batches: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
