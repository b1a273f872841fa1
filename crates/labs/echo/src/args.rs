//! The echo lab's command line: `costlab echo` (the experiment), `echo serve` and `echo load`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

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
        after_help = "Examples:\n  costlab echo serve --case epoll\n  costlab echo serve --case uring --addr 127.0.0.1:9000 --cpus 1 --duration 30s"
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
    /// Cases: the engines to compare (epoll, uring, uring-basic)
    #[arg(
        long = "case",
        default_value = "epoll,uring,uring-basic",
        value_name = "LIST"
    )]
    pub engine: String,
    /// Connection counts to sweep
    #[arg(long, default_value = "1,16,128,1000", value_name = "LIST")]
    pub conns: String,
    /// Message sizes to sweep (16,512,4K,16K,64K; up to 64M)
    #[arg(
        long = "sizes",
        default_value = "16",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub sizes: String,
    /// uring techniques: all, or switch some off (-bundle,-inc; names: big, bundle, inc,
    /// sendmsg, fixed, huge, zc, hot, spin; zc=64K sends zero-copy from 64 KiB; hot=SIZE moves
    /// the hot path's threshold, 8K by default, and -hot keeps the buffer ring at every size;
    /// -spin sleeps at once when idle instead of watching the ring for 20 us first)
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
    #[arg(long, default_value_t = 1, value_name = "D", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub depth: usize,
    /// Loader threads [default: one per loader CPU]
    #[arg(long = "loader-threads", value_name = "T", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
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
    /// The case: the engine to serve with, epoll, uring or uring-basic (one)
    #[arg(long = "case", default_value = "uring", value_name = "LIST")]
    pub engine: String,
    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0", value_name = "HOST:PORT")]
    pub addr: String,
    /// Pin the server to this CPU (one: the server is single-threaded)
    #[arg(long = "cpus", value_name = "CPU", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub cpu: Option<usize>,
    /// Stop after this long (otherwise at SIGTERM or SIGINT)
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// The fixed message size B (one): requests are counted as bytes echoed / B, and the
    /// uring server takes its hot path when B is at least the `hot` threshold (8K by default)
    #[arg(
        long = "sizes",
        default_value = "16",
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub size: String,
    /// io_uring: poll the submission queue from a kernel thread (SQPOLL)
    #[arg(long)]
    pub sqpoll: bool,
    /// uring techniques: all, or switch some off (-bundle,-inc; names: big, bundle, inc,
    /// sendmsg, fixed, huge, zc, hot, spin; zc=64K sends zero-copy from 64 KiB; hot=SIZE moves
    /// the hot path's threshold, 8K by default, and -hot keeps the buffer ring at every size;
    /// -spin sleeps at once when idle instead of watching the ring for 20 us first)
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
    #[arg(long, default_value_t = 1, value_name = "N", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub conns: usize,
    /// Message size (one: 16, 1K, ...)
    #[arg(
        long = "sizes",
        default_value = "16",
        value_name = "LIST",
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
    #[arg(long, default_value_t = 1, value_name = "D", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
    pub depth: usize,
    /// Loader threads, each owning its share of the connections [default: one per CPU]
    #[arg(long = "loader-threads", value_name = "T", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 0, {u64::MAX}>)]
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
