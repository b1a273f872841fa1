//! The cpu lab's command line: `costlab cpu` (both tests), `cpu branch`, `cpu loop-order`.

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

/// `costlab cpu`: with no subcommand, both tests at their default sizes.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CpuArgs {
    #[command(subcommand)]
    pub what: Option<CpuWhat>,
    #[command(flatten)]
    pub common: Common,
}

impl CpuArgs {
    /// The common options of whichever command was given.
    pub fn common(&self) -> &Common {
        match &self.what {
            Some(CpuWhat::Branch(a)) => &a.common,
            Some(CpuWhat::LoopOrder(a)) => &a.common,
            None => &self.common,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum CpuWhat {
    /// Sorted vs shuffled bytes through a data-dependent branch, and a branchless variant
    #[command(
        after_help = "Examples:\n  costlab cpu branch\n  costlab cpu branch --sizes 4M --case branchy --counters"
    )]
    Branch(TestArgs),
    /// Row-major vs column-major sum over a matrix larger than L2
    #[command(
        name = "loop-order",
        after_help = "Examples:\n  costlab cpu loop-order\n  costlab cpu loop-order --sizes 16M,64M --counters"
    )]
    LoopOrder(TestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct TestArgs {
    /// Data sizes in bytes (binary sizes: 1M,16M); branch: bytes of data (one byte per element,
    /// default 1M); loop-order: the matrix of 8-byte ints (default 4 x L2, at least 32M)
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// Variants (comma list): branch: branchy, branchless; loop-order: row-major, column-major
    /// [default: both]
    #[arg(long, value_name = "LIST")]
    pub case: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
