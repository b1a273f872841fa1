//! Command-line definitions (clap). Nothing here measures or prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "costlab",
    version,
    about = "What does this machine charge? Measures the cost of each layer (memory, syscalls, io_uring, shared cache lines, GC) and explains each figure with a model.",
    propagate_version = true,
    after_help = "Examples:\n  costlab run                       every lab's quick plan, a report and a stored run\n  costlab mem latency --sizes 1G    one lab, one figure\n  costlab compare <run-a> last      what changed between two runs"
)]
pub struct Cli {
    /// History: a SQLite file, or a shared PostgreSQL database as postgres://USER@HOST/DB
    /// (password from PGPASSWORD or ~/.pgpass; PG* variables and sslmode as libpq)
    /// [default: $COSTLAB_DB, else the user's data directory, e.g.
    /// ~/.local/share/costlab/history.db]
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Options with the same meaning in every lab that measures.
#[derive(Args, Debug, Clone, Default)]
pub struct Common {
    /// Write results as JSON (costlab/1 schema) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Timed samples per figure (1 to 1000)
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Run on these CPUs only (kernel list: 0-3,6); threads and child processes stay inside
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
    /// A smaller plan: fewer sizes, shorter samples
    #[arg(long)]
    pub quick: bool,
    /// Exit 3 if any figure is not ok (disturbed or noisy), one line per figure: for CI
    #[arg(long)]
    pub strict: bool,
    /// Seconds the command may spend re-measuring disturbed or noisy cases (each case is
    /// measured at most 3 times; 0 = never re-measure)
    #[arg(long, value_name = "SECS", env = "COSTLAB_RETRY_BUDGET", default_value_t = crate::measure::conditions::DEFAULT_RETRY_BUDGET_S)]
    pub retry_budget: u64,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once; boxing would only add noise
pub enum Command {
    /// What this machine is: CPU, caches, NUMA, pages, mitigations, io_uring, perf
    #[command(after_help = "Examples:\n  costlab machine\n  costlab machine --json machine.json")]
    Machine(MachineArgs),
    /// Every lab in one go: the machine's cost sheet, an HTML report, and a run in the history
    #[command(
        after_help = "Examples:\n  costlab run                          quick plans, about 60 s on 2 cores\n  costlab run --labs mem,share --full  two labs, their full plans\n  costlab run --counters --out rep/    with perf counters, the report in rep/"
    )]
    Run(RunArgs),
    // --- labs: one variant each ---
    /// Memory: bandwidth and latency by block, threads and page size; what a TLB miss costs
    #[command(
        after_help = "Examples:\n  costlab mem                                     the study's grid\n  costlab mem bandwidth --sizes 16K,4M,1G --threads 1,2\n  costlab mem latency --sizes 1G --pages 4k,thp,2m"
    )]
    Mem(Box<MemArgs>),
    /// What a syscall costs (s), what send/recv cost in the kernel (w), what io_uring costs per op at batch n (t)
    #[command(
        after_help = "Examples:\n  costlab syscall\n  costlab syscall --batches 1,16,256 --samples 15\n  costlab syscall --cpus 1 --counters"
    )]
    Syscall(SyscallArgs),
    /// Is io_uring faster than epoll here? Echo servers, a load generator and the experiment
    #[command(
        after_help = "Examples:\n  costlab echo --conns 1,128 --duration 1s\n  costlab echo --loaders lg1,lg2 --addr 10.0.0.5 --conns 128,1000\n                 the load from two hosts over ssh, the servers here on 10.0.0.5\n  costlab echo --loaders me@lg1 --addr 10.0.0.5 --ssh \"ssh -F lab_ssh_config\" --loader-costlab /opt/costlab/bin/costlab\n  costlab echo serve --engine uring --addr 127.0.0.1:9000\n  costlab echo load --target 127.0.0.1:9000 --conns 64 --samples 3"
    )]
    Echo(EchoArgs),
    /// What sharing a written cache line costs: shared Arcs, atomics, false sharing, a mutex;
    /// how far each scales (USL fit); `share c2c` for core-to-core latency
    #[command(
        after_help = "Examples:\n  costlab share\n  costlab share --case arc-shared,arc-per-thread --threads 1,2,4\n  costlab share c2c --cpus 0-3"
    )]
    Share(ShareArgs),
    /// What a garbage collector costs: GC CPU share by heap headroom (GOGC / GOMEMLIMIT), and
    /// the language-safety taxes (bounds checks, stack-check prologues, write barriers)
    #[command(
        after_help = "Examples:\n  costlab gc --headroom 0.5,1,2 --samples 3\n  costlab gc tax --kind bounds,prologue\n  costlab gc build"
    )]
    Gc(Box<GcArgs>),
    /// Local vs remote memory: node x node latency and bandwidth, bind vs interleave vs first-touch
    #[command(
        after_help = "Examples:\n  costlab numa\n  costlab numa --nodes 0,1 --size 1G\n  costlab numa --threads 4 --quick"
    )]
    Numa(NumaArgs),
    /// Where a process's memory lives, node by node (from /proc/PID/numa_maps)
    #[command(
        after_help = "Examples:\n  costlab numa-maps $(pidof postgres)\n  costlab numa-maps --self\n  costlab numa-maps 1234 --json maps.json"
    )]
    NumaMaps(NumaMapsArgs),
    /// What moving bytes to a socket costs: read+write, mmap, sendfile, splice, send,
    /// MSG_ZEROCOPY, io_uring SEND and SEND_ZC, by payload size, over loopback and veth
    #[command(
        after_help = "Examples:\n  costlab zerocopy\n  costlab zerocopy --methods read-write,sendfile --sizes 64K,1M --link loopback"
    )]
    Zerocopy(ZerocopyArgs),
    /// Pinned vs free-running vs badly placed threads (two on one CPU, on the IRQ CPU)
    #[command(
        after_help = "Examples:\n  costlab pin\n  costlab pin --workload memory --placement pinned,free,stacked"
    )]
    Pin(PinArgs),
    /// The unit costs price multiplies by: page faults, switches, futex calls, thread and
    /// process starts, pipe and file reads, open, stat
    #[command(
        after_help = "Examples:\n  costlab cost\n  costlab cost --terms fault-4k,fault-thp --samples 15"
    )]
    Cost(crate::labs::cost::CostArgs),
    /// What a program costs here: its syscalls, faults and switches counted in the kernel,
    /// priced at the unit costs measured on this machine, checked against its system time
    #[command(
        after_help = "Examples:\n  costlab price -- tar czf /tmp/x.tgz /usr/share/doc\n  costlab price --runs 3 --json price.json -- dd if=/dev/zero of=/dev/null bs=512 count=2M\n  costlab price --pid 1234 --duration 5s"
    )]
    Price(crate::labs::price::PriceArgs),
    // --- the history ---
    /// The runs in the history: id, date, machine, command, complete or not
    #[command(after_help = "Examples:\n  costlab history\n  costlab --db team.db history")]
    History(HistoryArgs),
    /// Compare two runs figure by figure: the change and whether it is significant
    #[command(
        after_help = "Examples:\n  costlab compare 20261122T1000 last\n  costlab compare A B --min-effect 10"
    )]
    Compare(CompareArgs),
    /// Export a run from the history as JSON, CSV or Markdown
    #[command(
        after_help = "Examples:\n  costlab export last --format csv --out run.csv\n  costlab export last --format csv --samples    one row per sample\n  costlab export 20261122T1000 --format markdown"
    )]
    Export(ExportArgs),
    /// Write the HTML report of a stored run or of a results.json
    #[command(
        after_help = "Examples:\n  costlab report last\n  costlab report results.json --out rep/\n  costlab report 20261122T1000\n  costlab report last --against 20261122T1000   two runs in every chart"
    )]
    Report(ReportArgs),
    // --- the machine as a place to measure ---
    /// What on this machine will disturb figures (busy processes, steal, governor, THP, ...),
    /// each with its fix; `--tune` applies the safe fixes around a command and restores them
    Check(CheckArgs),
    /// Put back settings that a costlab killed mid-run left changed (every command does this
    /// first; this says what it did and what running costlab processes hold)
    #[command(
        after_help = "Examples:\n  costlab restore\n  COSTLAB_JOURNAL_DIR=/tmp/j costlab restore"
    )]
    Restore(RestoreArgs),
    /// Add results.json documents (from other machines, CI artefacts) to the history
    #[command(
        after_help = "Examples:\n  costlab import results.json\n  costlab --db postgres://me@db/costlab import ci/*/results.json"
    )]
    Import(ImportArgs),
    /// Copy runs from this history into another (a shared PostgreSQL one)
    #[command(
        after_help = "Examples:\n  costlab push --to postgres://me@db/costlab\n  costlab push --to postgres://me@db/costlab last"
    )]
    Push(PushArgs),
    /// Every machine in the history, its latest headline figures side by side
    #[command(
        after_help = "Examples:\n  costlab machines\n  costlab --db postgres://me@db/costlab machines"
    )]
    Machines(MachinesArgs),
    /// A figure across runs, with the changes in it found (E-divisive means)
    #[command(after_help = "Examples:\n  costlab trend\n  costlab trend getppid --json -")]
    Trend(TrendArgs),
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  costlab check\n  costlab check --json -\n  costlab check --tune -- costlab mem latency --sizes 1G --pages 4k,thp"
)]
pub struct CheckArgs {
    /// Write the findings as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Apply the safe settings (governor performance, boost off, numa_balancing off) for the
    /// length of the command given after `--`, then restore them (needs root)
    #[arg(long)]
    pub tune: bool,
    /// The command to run tuned, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Memory the planned run needs, to compare with what is available [default: 4G]
    #[arg(long, value_name = "SIZE")]
    pub need: Option<String>,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {}

/// `costlab echo`: the experiment; `costlab echo serve` and `costlab echo load` its parts.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EchoArgs {
    #[command(subcommand)]
    pub command: Option<EchoCommand>,
    #[command(flatten)]
    pub run: EchoRunArgs,
}

#[derive(Subcommand, Debug)]
pub enum EchoCommand {
    /// Run one echo server (single-threaded); prints its address first, its counts as JSON on exit
    #[command(
        after_help = "Examples:\n  costlab echo serve --engine epoll\n  costlab echo serve --engine uring --addr 127.0.0.1:9000 --cpus 1 --duration 30s"
    )]
    Serve(EchoServeArgs),
    /// Drive an echo server and report throughput, latency, errors and the loader's own CPU
    #[command(
        after_help = "Examples:\n  costlab echo load --target 127.0.0.1:9000\n  costlab echo load --target 127.0.0.1:9000 --conns 128 --samples 3\n  costlab echo load --target 127.0.0.1:9000 --rate 50000 --client event"
    )]
    Load(EchoLoadArgs),
}

/// The experiment: each engine in its own pinned process, the loader on the other CPUs.
#[derive(Args, Debug, Clone)]
pub struct EchoRunArgs {
    /// Engines to compare
    #[arg(long, default_value = "epoll,uring,uring-basic", value_name = "LIST")]
    pub engine: String,
    /// Connection counts to sweep
    #[arg(long, default_value = "1,16,128,1000", value_name = "LIST")]
    pub conns: String,
    /// Message sizes to sweep (16,512,4K,16K,64K; up to 64M)
    #[arg(
        long = "sizes",
        alias = "size",
        default_value = "16",
        value_name = "LIST"
    )]
    pub sizes: String,
    /// uring techniques: all, or switch some off (-bundle,-inc; names: big, bundle, inc,
    /// sendmsg, fixed, huge, zc, hot; zc=64K sends zero-copy from 64 KiB; hot=SIZE moves the
    /// hot path's threshold, 8K by default, and -hot keeps the buffer ring at every size)
    #[arg(
        long,
        default_value = "all",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub features: String,
    /// Also run uring with each technique switched off in turn, to show what each is worth
    #[arg(long)]
    pub ablate: bool,
    /// After the timed runs, one more run per point with perf sampling the server: where its
    /// CPU per request goes (recv copy, send copy, tcp/ip, io_uring, epoll, ...), in ns
    #[arg(long)]
    pub attribute: bool,
    /// Length of each run (2, 2s, 500ms)
    #[arg(
        long,
        default_value = "2s",
        value_name = "TIME",
        allow_hyphen_values = true
    )]
    pub duration: String,
    /// Loaders to use: uring (io_uring, the cheapest), event (epoll), blocking, or a list
    #[arg(long, default_value = "uring", value_name = "LIST")]
    pub client: String,
    /// Requests in flight per connection
    #[arg(long, default_value_t = 1, value_name = "D")]
    pub depth: usize,
    /// Loader threads (default: one per loader CPU) [was: --threads]
    #[arg(long = "loader-threads", alias = "threads", value_name = "T")]
    pub threads: Option<usize>,
    /// io_uring servers poll the submission queue from a kernel thread
    #[arg(long)]
    pub sqpoll: bool,
    /// Run the load generator on these hosts over ssh instead of here (HOST or USER@HOST as
    /// ssh takes them, comma-separated; each needs the same costlab version). Needs --addr.
    /// --conns is the total at the server, split over the hosts
    #[arg(long, value_name = "HOSTS")]
    pub loaders: Option<String>,
    /// Address the servers listen on: an IP of this machine (port chosen per run) or IP:PORT.
    /// With --loaders, one the loader hosts reach [default: 127.0.0.1]
    #[arg(long, value_name = "IP")]
    pub addr: Option<String>,
    /// The ssh command for --loaders, words split at spaces (your ssh config, keys and
    /// known_hosts apply; costlab adds only -o BatchMode=yes -T)
    #[arg(long, value_name = "CMD", env = "COSTLAB_SSH", default_value = "ssh")]
    pub ssh: String,
    /// costlab on the loader hosts: a name on their PATH or a full path
    #[arg(long, value_name = "PATH", default_value = "costlab")]
    pub loader_costlab: String,
    /// Keep each loader's raw report (counts, CPU, serialized HdrHistogram) in DIR, one JSON
    /// file per host and run
    #[arg(long, value_name = "DIR")]
    pub loader_reports: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct EchoServeArgs {
    /// epoll, uring or uring-basic
    #[arg(long, default_value = "uring", value_name = "ENGINE")]
    pub engine: String,
    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0", value_name = "HOST:PORT")]
    pub addr: String,
    /// Pin the server to this CPU (one: the server is single-threaded) [was: --cpu]
    #[arg(long = "cpus", alias = "cpu", value_name = "CPU")]
    pub cpu: Option<usize>,
    /// Stop after this long (otherwise at SIGTERM or SIGINT)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// The fixed message size B: requests are counted as bytes echoed / B, and the uring
    /// server takes its hot path when B is at least the `hot` threshold (8K by default)
    #[arg(long, default_value = "16", value_name = "SIZE")]
    pub size: String,
    /// io_uring: poll the submission queue from a kernel thread (SQPOLL)
    #[arg(long)]
    pub sqpoll: bool,
    /// uring techniques: all, or switch some off (-bundle,-inc; names: big, bundle, inc,
    /// sendmsg, fixed, huge, zc, hot; zc=64K sends zero-copy from 64 KiB; hot=SIZE moves the
    /// hot path's threshold, 8K by default, and -hot keeps the buffer ring at every size)
    #[arg(
        long,
        default_value = "all",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub features: String,
}

#[derive(Args, Debug, Clone)]
pub struct EchoLoadArgs {
    /// The server's address
    #[arg(long, value_name = "HOST:PORT")]
    pub target: String,
    /// Connections
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub conns: usize,
    /// Message size (16, 1K, ...)
    #[arg(
        long,
        default_value = "16",
        value_name = "SIZE",
        allow_hyphen_values = true
    )]
    pub size: String,
    /// How long to send, per sample (2, 2s, 500ms)
    #[arg(
        long,
        default_value = "2s",
        value_name = "TIME",
        allow_hyphen_values = true
    )]
    pub duration: String,
    /// Requests in flight per connection (closed loop)
    #[arg(long, default_value_t = 1, value_name = "D")]
    pub depth: usize,
    /// Loader threads, each owning its share of the connections (default: one per CPU)
    /// [was: --threads]
    #[arg(long = "loader-threads", alias = "threads", value_name = "T")]
    pub threads: Option<usize>,
    /// Open loop: send R requests per second in all, latency from the intended send time
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    pub rate: Option<f64>,
    /// uring (io_uring, closed loop only), event (epoll, no thread per connection) or
    /// blocking (a thread per connection) [default: uring, as in `costlab echo`; event with --rate]
    #[arg(long, value_name = "KIND")]
    pub client: Option<String>,
    /// Speak to a lead (`costlab echo --loaders` runs this over ssh): print "ready", wait for
    /// "go" on stdin, run once, print counts, CPU and the serialized latency histogram as
    /// one JSON line
    #[arg(long)]
    pub for_lead: bool,
    #[command(flatten)]
    pub common: Common,
}

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
    #[arg(long, value_name = "N", hide = true)]
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
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Attribution: rounds per workload, each a plain, a -B and a layout-shifted process
    /// (default 3; 1 with --quick)
    #[arg(long, value_name = "N")]
    pub procs: Option<usize>,
    /// Which A/B and A/A taxes: bounds, prologue, write-barrier
    #[arg(
        long,
        value_name = "LIST",
        default_value = "bounds,prologue,write-barrier"
    )]
    pub kind: String,
    /// Old spelling of --samples (paired samples per tax; default 5)
    #[arg(long, value_name = "N", hide = true)]
    pub reps: Option<usize>,
    /// Live heap the write-barrier kernel's GC cycles mark (default 256M)
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub live: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct NumaArgs {
    #[command(flatten)]
    pub common: Common,
    /// Only these NUMA nodes (two or more), like 0,1 or 0-3
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,
    /// Threads of the bandwidth runs (per node for the matrix, in all for the placements)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub threads: Option<String>,
    /// Working set of the latency chase, like 256M or 1G
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
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

#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Write the machine description as JSON to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct SyscallArgs {
    /// io_uring batches to measure (ops per enter), a comma list from 1 to 4096
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub batches: Option<String>,
    #[command(flatten)]
    pub common: Common,
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
            Some(MemCommand::Loaded(a)) => &a.common,
            None => &self.grid.common,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum MemCommand {
    /// Bandwidth (GB/s) by op, pattern, block, threads and page kind
    #[command(
        after_help = "Examples:\n  costlab mem bandwidth --sizes 16K,4M,1G\n  costlab mem bandwidth --op read,copy --threads 1,2 --pages 4k,thp"
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
}

#[derive(Args, Debug, Clone)]
pub struct MemLoadedArgs {
    /// The load's traffic: read, read-write (each line read and written back), or both
    #[arg(long, default_value = "read,read-write", value_name = "LIST")]
    pub traffic: String,
    /// Loop steps (about a cycle each) each load thread waits after every line, heaviest load
    /// last; the idle point (no load) always comes first [default: 2000,500,100,20,0;
    /// 300,50,0 with --quick]
    #[arg(long, value_name = "LIST")]
    pub delays: Option<String>,
    /// The chase's region (make it larger than the last-level cache)
    #[arg(long, default_value = "256M", value_name = "SIZE")]
    pub size: String,
    /// Each load thread's region
    #[arg(long, default_value = "256M", value_name = "SIZE")]
    pub load_size: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct MemBandwidthArgs {
    /// Ops, comma list: read, write, write-nt (streaming stores), copy (regular stores),
    /// copy-nt (streaming stores); memcpy, memset (the C library's own, the reference). Copies
    /// count read + write
    #[arg(long, default_value = "read,write,copy,copy-nt,memcpy,memset")]
    pub op: String,
    /// Access patterns: seq, rand (whole random 64-byte lines, 8 in flight)
    #[arg(long, default_value = "seq")]
    pub pattern: String,
    /// Block sizes: the buffer each thread sweeps (binary sizes: 16K,4M,1G) [was: --block]
    #[arg(
        long = "sizes",
        alias = "block",
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

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Each lab's quick plan (the default; all labs in about 60 s on 2 cores)
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Each lab's full plan (minutes)
    #[arg(long)]
    pub full: bool,
    /// Only these labs, a comma list (mem,syscall,echo,share,gc,numa,zerocopy,pin)
    #[arg(long, value_name = "LIST")]
    pub labs: Option<String>,
    /// Write index.html and results.json here [default: ./costlab-report/<run-id>/]
    /// [was: --report]
    #[arg(long = "out", alias = "report", value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Let labs reserve a hugepage pool for the run (restored afterwards; needs root)
    #[arg(long)]
    pub reserve_hugepages: bool,
    /// Also write the results as JSON (costlab/1) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Exit 3 if any figure is not ok (disturbed or noisy), one line per figure: for CI
    #[arg(long)]
    pub strict: bool,
    /// Seconds the run may spend re-measuring disturbed or noisy cases (each case at most
    /// 3 times; 0 = never re-measure)
    #[arg(
        long,
        value_name = "SECS",
        env = "COSTLAB_RETRY_BUDGET",
        default_value_t = 60
    )]
    pub retry_budget: u64,
    /// Apply `costlab check`'s safe settings (governor performance, boost off, numa_balancing
    /// off) for the run, and restore them after
    #[arg(long)]
    pub tune: bool,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The run before: an id, a unique prefix of one, or "last"
    pub a: String,
    /// The run after: an id, a unique prefix of one, or "last"
    pub b: String,
    /// Smallest change, in percent of the median, that is called a change (default 5)
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 5.0,
        allow_hyphen_values = true
    )]
    pub min_effect: f64,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// results.json files written by `--json` or `costlab export`
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The history to copy into: a postgres:// URL (or another SQLite file)
    #[arg(long, value_name = "URL|PATH")]
    pub to: PathBuf,
    /// Runs to copy (ids, unique prefixes, "last") [default: every run]
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct MachinesArgs {}

#[derive(Args, Debug)]
pub struct TrendArgs {
    /// The figure, as `compare` names it (a unique part of the name is enough) [default:
    /// every figure with a change]
    pub figure: Option<String>,
    /// Only runs of this machine (an id or a unique part of one, as `costlab machines` shows)
    #[arg(long, value_name = "M")]
    pub machine: Option<String>,
    /// Write the trends and their changes as JSON to FILE ("-" for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write an HTML page with a chart per figure to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Json,
    Csv,
    Markdown,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run: an id, a unique prefix of one, or "last"
    pub run: String,
    #[arg(long, value_enum, default_value = "json")]
    pub format: ExportFormat,
    /// Write to FILE instead of stdout [was: --output]
    #[arg(long = "out", short = 'o', alias = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// CSV: one row per sample instead of one per figure
    #[arg(long)]
    pub samples: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run in the history (id, unique prefix or "last"), or a results.json file
    #[arg(required_unless_present = "machines")]
    pub source: Option<String>,
    /// Instead of one run: machines side by side (comma list of machine ids or unique parts
    /// of them, as `costlab machines` shows; "all" for every one)
    #[arg(long, value_name = "LIST", conflicts_with = "source")]
    pub machines: Option<String>,
    /// Directory for index.html and results.json [default: ./costlab-report/<run-id>/]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Overlay a second run (id, unique prefix, "last" or a results.json) in every chart,
    /// dashed and lighter, and ring the figures that changed significantly
    #[arg(long, value_name = "RUN", conflicts_with = "machines")]
    pub against: Option<String>,
    /// With --against: the smallest change of a median, in percent, that is called a change
    #[arg(long, value_name = "PCT", default_value_t = crate::store::compare::MIN_EFFECT_PCT, requires = "against")]
    pub min_effect: f64,
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
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
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
    #[command(
        after_help = "Examples:\n  costlab share c2c                every pair of CPUs\n  costlab share c2c --quick        the first CPU against every other\n  costlab share c2c --cpus 0-3,8"
    )]
    C2c(C2cArgs),
}

#[derive(Args, Debug)]
pub struct C2cArgs {
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ZerocopyArgs {
    /// Methods (comma list): read-write, mmap-write, sendfile, splice, send, msg-zerocopy,
    /// uring-send, uring-send-zc [default: all]
    #[arg(long, value_name = "LIST")]
    pub methods: Option<String>,
    /// Payload sizes, one call's bytes [default: 4K,16K,64K,256K,1M,4M; 64K,1M with --quick]
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Links: loopback, veth (receiver in a network namespace; root) [default: both, veth
    /// where it can be made]
    #[arg(long, value_name = "LIST")]
    pub link: Option<String>,
    /// Directory for the file the file methods send from [default: the temp directory]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone, Default)]
pub struct PinArgs {
    /// Workloads (comma list): memory, sharing, echo [default: all]
    #[arg(long, value_name = "LIST")]
    pub workload: Option<String>,
    /// Placements (comma list): pinned, free, stacked, irq-cpu [default: all]
    #[arg(long, value_name = "LIST")]
    pub placement: Option<String>,
    /// Length of each run (1s, 500ms)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// The text of a parse error as the user sees it: clap's whole message (the cause, the right
/// spelling or the possible values, the subcommand's usage line), "costlab:" in place of
/// "error:".
pub fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    match text.strip_prefix("error: ") {
        Some(rest) => format!("costlab: {rest}"),
        None => text,
    }
}

/// The most samples one figure may take: beyond it a run would last hours, not minutes.
pub const MAX_SAMPLES: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn err(args: &[&str]) -> String {
        let mut argv = vec!["costlab"];
        argv.extend_from_slice(args);
        let e = Cli::try_parse_from(argv).expect_err("should not parse");
        clap_message(&e)
    }

    #[test]
    fn a_missing_argument_is_named_with_the_usage_line() {
        let m = err(&["echo", "load", "--duration", "1s"]);
        assert!(m.contains("--target <HOST:PORT>"), "{m}");
        assert!(m.contains("Usage: costlab echo load"), "{m}");
        assert!(m.starts_with("costlab: "), "{m}");
    }

    #[test]
    fn a_misspelling_gets_the_right_spelling() {
        let m = err(&["mem", "latency", "--size", "4K"]);
        assert!(m.contains("--sizes"), "{m}");
        assert!(m.contains("Usage: costlab mem latency"), "{m}");
    }

    #[test]
    fn a_bad_choice_lists_the_possible_values() {
        let m = err(&["export", "last", "--format", "xml"]);
        assert!(m.contains("[possible values: json, csv, markdown]"), "{m}");
    }

    #[test]
    fn a_negative_size_reaches_the_size_parser() {
        // '-1' is a value of --sizes (was --block), not an unknown flag: the lab's size
        // parser then says what is wrong with it.
        let cli = Cli::try_parse_from(["costlab", "mem", "bandwidth", "--block", "-1"]).unwrap();
        let Command::Mem(m) = cli.command else {
            panic!()
        };
        let Some(MemCommand::Bandwidth(b)) = &m.what else {
            panic!()
        };
        assert_eq!(b.block, "-1");
        let e = crate::measure::sizes::parse_size_list(&b.block).unwrap_err();
        assert!(e.to_string().contains("above zero"), "{e}");
    }

    #[test]
    fn old_spellings_still_parse_and_stay_out_of_help() {
        for argv in [
            &["costlab", "mem", "bandwidth", "--block", "4M"][..],
            &["costlab", "echo", "--threads", "2"],
            &[
                "costlab",
                "echo",
                "load",
                "--target",
                "x:1",
                "--threads",
                "2",
            ],
            &["costlab", "echo", "serve", "--cpu", "0"],
            &["costlab", "gc", "--reps", "2"],
            &["costlab", "gc", "tax", "--reps", "2"],
            &["costlab", "run", "--report", "d"],
            &["costlab", "export", "last", "--output", "f"],
            &["costlab", "export", "last", "-o", "f"],
        ] {
            Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("mem")
            .unwrap()
            .find_subcommand_mut("bandwidth")
            .unwrap()
            .render_help()
            .to_string();
        assert!(
            help.contains("--sizes") && !help.contains("--block "),
            "{help}"
        );
    }

    #[test]
    fn every_command_has_examples_and_run_takes_counters() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let nested = cmd.get_subcommands().flat_map(|c| c.get_subcommands());
        for sub in cmd.get_subcommands().chain(nested) {
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                after.starts_with("Examples:") && after.lines().count() >= 3,
                "{}: {after}",
                sub.get_name()
            );
        }
        Cli::try_parse_from(["costlab", "run", "--counters"]).unwrap();
    }

    #[test]
    fn numa_maps_refuses_what_it_would_ignore() {
        for flag in ["--samples", "--quick", "--counters"] {
            let mut argv = vec!["costlab", "numa-maps", "--self", flag];
            if flag == "--samples" {
                argv.push("3");
            }
            assert!(Cli::try_parse_from(argv).is_err(), "{flag}");
        }
    }
}
