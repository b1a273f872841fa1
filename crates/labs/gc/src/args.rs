//! The gc lab's command line: `costlab gc` (the headroom sweep), `gc tax` and `gc build`.

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

/// `costlab gc`: the headroom sweep, or `tax` / `build`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GcArgs {
    #[command(subcommand)]
    pub what: Option<GcWhat>,
    /// Headrooms h to sweep: free memory as a multiple of the live heap
    #[arg(
        long,
        value_name = "LIST",
        default_value = "0.25,0.5,1,2,3,4",
        allow_hyphen_values = true
    )]
    pub headroom: String,
    /// How h is given: gogc (GOGC = 100 h), memlimit (GOGC=off, GOMEMLIMIT = live x (1 + h))
    #[arg(long, value_name = "LIST", default_value = "gogc")]
    pub mode: String,
    /// Runtimes to sweep: go, java-g1, java-parallel, java-zgc, java-shenandoah (Java:
    /// -Xms = -Xmx = live x (1 + h), one fresh JVM per point; skipped where no JDK)
    #[arg(long, value_name = "LIST", default_value = "go")]
    pub runtime: String,
    /// Live heap of vnode-like objects (default 640M, less when memory is short)
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub live: Option<String>,
    /// Old spelling of --samples (fresh processes per point; default 3, 2 with --quick)
    #[arg(long, value_name = "N", hide = true, allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub reps: Option<usize>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once
pub enum GcWhat {
    /// The language taxes: CPU profile attribution (cross-checked by a -B build), and the
    /// ratio of two builds or variants from one run
    #[command(
        long_about = "The language taxes: CPU profile attribution (cross-checked by a -B build), and the ratio of two builds or variants from one run.\n\nAttribution classes each CPU sample by the instruction it hit: gc, prologue, write-barrier,\nsafety (a check's own compare-and-branch), memory (a check's compare that reads program data,\nand the jump after it: the wait of the load it folds in, never charged to the check), kernel\n(samples in kernel mode) and other; shares are given of all CPU and of user-mode CPU (of=user).\nEach round runs the workload as the plain build, the -gcflags=-B build and the layout-shifted\ntwin, interleaved: the -B build's saving (A/B) is set beside the attributed safety share with\nthe twin's (A/A) noise, and the output says whether they agree.",
        after_help = "Examples:\n  costlab gc tax\n  costlab gc tax --method attribution --workload server --procs 3\n  costlab gc tax --method ab,aa --kind write-barrier --live 512M --samples 7"
    )]
    Tax(GcTaxArgs),
    /// Build the Go program (both builds) into the cache and print where; nothing is fetched
    #[command(
        after_help = "Examples:\n  costlab gc build\n  COSTLAB_GCBENCH_CACHE=/tmp/gc costlab gc build"
    )]
    Build,
}

#[derive(Args, Debug)]
pub struct GcTaxArgs {
    /// How: attribution (CPU profile samples classified by instruction, the headline, with
    /// its -B cross-check), ab (two builds or variants side by side), aa (the same code
    /// moved: ab's noise floor); the --kind benchmarks run only for ab and aa
    #[arg(long, value_name = "LIST", default_value = "attribution,ab,aa")]
    pub method: String,
    /// Attribution workloads: heap (the vnode heap builder), server (requests over loopback)
    #[arg(long, value_name = "LIST", default_value = "heap,server")]
    pub workload: String,
    /// Attribution: seconds each profiled process is sampled (default 5; 2 with --quick)
    #[arg(long, value_name = "S", allow_hyphen_values = true, value_parser = costlab_lab::args::positive)]
    pub seconds: Option<f64>,
    /// Attribution: rounds per workload, each a plain, a -B and a layout-shifted process
    /// (default 3; 1 with --quick)
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub procs: Option<usize>,
    /// Which A/B and A/A taxes: bounds, prologue, write-barrier
    #[arg(
        long,
        value_name = "LIST",
        default_value = "bounds,prologue,write-barrier"
    )]
    pub kind: String,
    /// Old spelling of --samples (paired samples per tax; default 5)
    #[arg(long, value_name = "N", hide = true, allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub reps: Option<usize>,
    /// Live heap the write-barrier kernel's GC cycles mark (default 256M)
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub live: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
