//! The mem lab's command line: `costlab mem` (the grid) and its bandwidth, latency and
//! loaded subcommands.

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

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
            Some(MemCommand::Loaded(a)) => &a.common,
            Some(MemCommand::Stride(a)) => &a.common,
            None => &self.grid.common,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum MemCommand {
    /// Bandwidth (GB/s) by op, pattern, block, threads and page kind
    #[command(
        after_help = "Examples:\n  costlab mem bandwidth --sizes 16K,4M,1G\n  costlab mem bandwidth --case read,copy --threads 1,2 --pages 4k,thp"
    )]
    Bandwidth(MemBandwidthArgs),
    /// Latency (ns) of dependent loads over one random cycle, by region size and page kind
    #[command(
        after_help = "Examples:\n  costlab mem latency\n  costlab mem latency --sizes 1G --pages 4k,thp,2m --reserve-hugepages"
    )]
    Latency(MemLatencyArgs),
    /// Loaded latency: the chase on one CPU while the others stream memory at increasing rates
    #[command(
        after_help = "Examples:\n  costlab mem loaded\n  costlab mem loaded --traffic read --delays 1000,100,0"
    )]
    Loaded(MemLoadedArgs),
    /// Stride: touch one int in every N over a block; ns per touched int and per line (lines, not bytes)
    #[command(
        after_help = "Examples:\n  costlab mem stride\n  costlab mem stride --case 1,16,64 --sizes 16K,256M --samples 9"
    )]
    Stride(MemStrideArgs),
}

#[derive(Args, Debug, Clone)]
pub struct MemStrideArgs {
    /// Strides, in ints of 4 bytes between touches (16 ints = one 64-byte line)
    #[arg(
        long = "case",
        default_value = "1,2,4,8,16,32,64",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub strides: String,
    /// Blocks to touch (default: one inside L1, one twice the last-level cache, 64 MiB to
    /// 1 GiB; 256 MiB at most with --quick)
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct MemLoadedArgs {
    /// The load's traffic: read, read-write (each line read and written back), or both
    #[arg(long, default_value = "read,read-write", value_name = "LIST")]
    pub traffic: String,
    /// Loop steps (about a cycle each) each load thread waits after every line, heaviest load
    /// last; the idle point (no load) always comes first [default: 2000,500,100,20,0;
    /// 300,50,0 with --quick]
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub delays: Option<String>,
    /// The chase's region, one size (make it larger than the last-level cache)
    #[arg(
        long = "sizes",
        default_value = "256M",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub size: String,
    /// Each load thread's region
    #[arg(long, default_value = "256M", value_name = "SIZE")]
    pub load_size: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct MemBandwidthArgs {
    /// Cases: the ops, a comma list: read, write, write-nt (streaming stores), copy (regular stores),
    /// copy-nt (streaming stores); memcpy, memset (the C library's own, the reference). Copies
    /// count read + write
    #[arg(
        long = "case",
        default_value = "read,write,copy,copy-nt,memcpy,memset",
        value_name = "LIST"
    )]
    pub op: String,
    /// Access patterns: seq, rand (whole random 64-byte lines, 8 in flight)
    #[arg(long, default_value = "seq")]
    pub pattern: String,
    /// Block sizes: the buffer each thread sweeps (binary sizes: 16K,4M,1G)
    #[arg(
        long = "sizes",
        default_value = "1G",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub block: String,
    /// Thread counts, comma list
    #[arg(
        long,
        default_value = "1",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
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
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
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
