//! What a load run is asked to do (`LoadSpec`, `ClientKind`) and what it measured
//! (`LoadReport`, `Errors`): the types every client and the lab share.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

use costlab_core::error::usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    Event,
    Blocking,
    Uring,
}

impl ClientKind {
    /// The loader `costlab echo` uses unless told: the cheapest per request. Measured side
    /// by side against the epoll server at 128 connections on a 2-CPU VM (4 runs, 3 to 5
    /// samples each), the io_uring client spent 11-26% less CPU per request than the epoll
    /// one and served 8-35% more requests, in every paired sample. Both still kept their
    /// CPU saturated: about 97% of a loader's time is the kernel's TCP work, which on
    /// loopback includes the server side's receive processing. Where io_uring is
    /// unavailable the sweep falls back to `FALLBACK` and says so.
    pub const DEFAULT: ClientKind = ClientKind::Uring;
    pub const FALLBACK: ClientKind = ClientKind::Event;

    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Event => "event",
            ClientKind::Blocking => "blocking",
            ClientKind::Uring => "uring",
        }
    }

    pub fn parse(text: &str) -> Result<ClientKind> {
        match text.trim() {
            "event" => Ok(ClientKind::Event),
            "blocking" => Ok(ClientKind::Blocking),
            "uring" => Ok(ClientKind::Uring),
            _ => Err(usage(format!(
                "unknown client '{text}': use event, uring or blocking"
            ))),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub target: SocketAddr,
    pub conns: usize,
    pub size: usize,
    pub duration: Duration,
    /// Requests in flight per connection (closed loop).
    pub depth: usize,
    /// Event client threads (each owns conns / threads connections).
    pub threads: usize,
    /// Open loop: total requests per second, on a fixed schedule.
    pub rate: Option<f64>,
    pub client: ClientKind,
    /// Keep the loader's threads on these CPUs (off the server's).
    pub cpus: Option<Vec<usize>>,
}

impl LoadSpec {
    /// Check the spec; every problem is a usage error.
    pub fn check(&self) -> Result<()> {
        if self.conns == 0 {
            return Err(usage("--conns 0: a run needs at least one connection"));
        }
        if self.size == 0 || self.size > 64 << 20 {
            return Err(usage(format!(
                "--size {}: use a message size from 1 byte to 64M",
                self.size
            )));
        }
        crate::check_depth(self.depth)?;
        if self.threads == 0 {
            return Err(usage("--threads 0: the loader needs at least one thread"));
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err(usage("--duration: use more than 0 s and at most 1 h"));
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(usage(format!(
                    "--rate {r}: use a positive request rate per second"
                )));
            }
        }
        if self.client == ClientKind::Blocking && self.depth > 1 {
            return Err(usage(
                "--client blocking sends one request at a time per connection; drop --depth",
            ));
        }
        if self.client == ClientKind::Uring && self.rate.is_some() {
            return Err(usage(
                "--client uring runs closed loop only; drop --rate or use --client event",
            ));
        }
        Ok(())
    }

    /// Time allowed after the deadline for answers to requests already sent. With 1000
    /// connections on a busy machine a round trip can take 100+ ms (Little's law), so this
    /// is generous; a healthy run ends as soon as the last answer is in.
    pub(crate) fn grace(&self) -> Duration {
        (self.duration / 2).clamp(Duration::from_millis(500), Duration::from_secs(5))
    }

    /// Untimed running at the start (connections warm, caches filled).
    pub(crate) fn warmup(&self) -> Duration {
        (self.duration / 10).min(Duration::from_millis(200))
    }
}

/// Errors seen by the loader.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Errors {
    /// An echoed byte differed from what was sent.
    pub mismatch: u64,
    /// The connection was reset or closed while requests were outstanding.
    pub reset: u64,
    /// Requests not answered by the deadline plus the grace period.
    pub timeout: u64,
    /// Connections that could not be made.
    pub connect: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.mismatch + self.reset + self.timeout + self.connect
    }

    pub fn add(&mut self, o: &Errors) {
        self.mismatch += o.mismatch;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.connect += o.connect;
    }
}

/// What a load run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Requests completed inside the measuring window.
    pub requests: u64,
    /// Requests answered in full and byte-exact, over the whole run.
    pub answered: u64,
    pub window: Duration,
    /// Latency of each answered request (ns), from its (intended) send time.
    pub latency: Histogram<u64>,
    pub errors: Errors,
    /// CPU time of the loader's threads, ns.
    pub cpu_ns: u64,
    /// CPUs the loader's threads could use.
    pub cpus: usize,
    /// Times the loader's threads slept (voluntary context switches), each one a wakeup some
    /// send of the server's paid for; None where not counted (loaders on other hosts).
    pub sleeps: Option<u64>,
    /// The first mismatch of each connection that had one (a connection is dropped at its
    /// first): where in its byte stream, what was expected and what came.
    pub first_mismatches: Vec<String>,
}

/// Connections whose first mismatch is kept in full; the count goes on past it.
const MISMATCHES_KEPT: usize = 256;

/// One line for a mismatch on connection `conn`: `expected` and `got` are the bytes from
/// the point they were compared at, `stream_off` that point's offset in the stream.
pub fn describe_mismatch(conn: u64, stream_off: u64, expected: &[u8], got: &[u8]) -> String {
    let at = expected
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    let hex = |b: &[u8]| {
        let shown: Vec<String> = b.iter().take(8).map(|x| format!("{x:02x}")).collect();
        if shown.is_empty() {
            "nothing".to_string()
        } else {
            shown.join(" ")
        }
    };
    format!(
        "conn {conn} byte {}: expected {}, received {}",
        stream_off + at as u64,
        hex(expected.get(at..).unwrap_or(&[])),
        hex(got.get(at..).unwrap_or(&[]))
    )
}

impl LoadReport {
    pub fn throughput(&self) -> f64 {
        self.requests as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Latency quantile in us (q in 0..=1); None without answers.
    pub fn latency_us(&self, q: f64) -> Option<f64> {
        (!self.latency.is_empty()).then(|| self.latency.value_at_quantile(q) as f64 / 1e3)
    }

    pub fn max_us(&self) -> Option<f64> {
        (!self.latency.is_empty()).then(|| self.latency.max() as f64 / 1e3)
    }

    /// Share of the loader's CPUs its threads kept busy over the window (0..1+).
    pub fn busy(&self) -> f64 {
        self.cpu_ns as f64 / (self.window.as_nanos() as f64 * self.cpus.max(1) as f64)
    }

    /// Whether the loader was busy enough to be the bottleneck itself.
    pub fn loader_bound(&self) -> bool {
        self.busy() > 0.9
    }

    /// A warning when the loader itself was the bottleneck.
    pub fn bottleneck_note(&self) -> Option<String> {
        self.loader_bound()
            .then(|| loader_bound_note(self.cpus, &format!("{:.0}%", self.busy() * 100.0), ""))
    }

    pub(crate) fn empty(cpus: usize) -> LoadReport {
        LoadReport {
            requests: 0,
            answered: 0,
            window: Duration::ZERO,
            latency: new_histogram(),
            errors: Errors::default(),
            cpu_ns: 0,
            cpus,
            sleeps: Some(0),
            first_mismatches: Vec::new(),
        }
    }

    /// Count a mismatch and keep its description (the connection's first: it is dropped).
    pub(crate) fn mismatch(&mut self, conn: u64, stream_off: u64, expected: &[u8], got: &[u8]) {
        self.errors.mismatch += 1;
        if self.first_mismatches.len() < MISMATCHES_KEPT {
            self.first_mismatches
                .push(describe_mismatch(conn, stream_off, expected, got));
        }
    }

    pub(crate) fn merge(&mut self, o: &LoadReport) {
        self.requests += o.requests;
        self.answered += o.answered;
        let _ = self.latency.add(&o.latency);
        self.errors.add(&o.errors);
        self.cpu_ns += o.cpu_ns;
        self.sleeps = self.sleeps.zip(o.sleeps).map(|(a, b)| a + b);
        let room = MISMATCHES_KEPT.saturating_sub(self.first_mismatches.len());
        self.first_mismatches
            .extend(o.first_mismatches.iter().take(room).cloned());
    }
}

/// The bottleneck warning: `busy` says how busy ("105%", or "103–111%" over repetitions) and
/// `runs` in which runs ("" for one, " over 5 runs").
pub fn loader_bound_note(cpus: usize, busy: &str, runs: &str) -> String {
    format!(
        "the loader kept its {cpus} CPU(s) {busy} busy{runs}: the client may be the bottleneck, not the server"
    )
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns .. 1 h at 3 significant digits; values past it are clamped when recorded.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds")
}
