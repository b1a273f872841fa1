//! The load generator. The event client runs T threads, each owning its share of the
//! connections on its own epoll, with D requests in flight per connection (closed loop) or
//! requests sent on a fixed schedule (`--rate`, open loop: latency counts from the intended
//! send time, so a stalled server cannot hide its stall). The blocking client is one thread
//! per connection, for comparison. Both check every echoed byte against the request's
//! pattern (which carries the connection and the request's sequence number), and every loop
//! ends by a hard deadline whatever the server does.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;
use serde::Serialize;

use super::stats::thread_cpu_ns;
use crate::error::usage;
use crate::measure::cpus;

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
        if self.depth == 0 || self.depth > 4096 {
            return Err(usage(
                "--depth: use 1 to 4096 requests in flight per connection",
            ));
        }
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
    pub(super) fn grace(&self) -> Duration {
        (self.duration / 2).clamp(Duration::from_millis(500), Duration::from_secs(5))
    }

    /// Untimed running at the start (connections warm, caches filled).
    pub(super) fn warmup(&self) -> Duration {
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

    pub(super) fn empty(cpus: usize) -> LoadReport {
        LoadReport {
            requests: 0,
            answered: 0,
            window: Duration::ZERO,
            latency: new_histogram(),
            errors: Errors::default(),
            cpu_ns: 0,
            cpus,
            first_mismatches: Vec::new(),
        }
    }

    /// Count a mismatch and keep its description (the connection's first: it is dropped).
    pub(super) fn mismatch(&mut self, conn: u64, stream_off: u64, expected: &[u8], got: &[u8]) {
        self.errors.mismatch += 1;
        if self.first_mismatches.len() < MISMATCHES_KEPT {
            self.first_mismatches
                .push(describe_mismatch(conn, stream_off, expected, got));
        }
    }

    pub(super) fn merge(&mut self, o: &LoadReport) {
        self.requests += o.requests;
        self.answered += o.answered;
        let _ = self.latency.add(&o.latency);
        self.errors.add(&o.errors);
        self.cpu_ns += o.cpu_ns;
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

/// Fill `out` with the bytes of request `seq` on connection `conn`. Every 8-byte word
/// depends on (conn, seq, word), so an echo from the wrong request or connection, a
/// dropped or repeated byte, all show up as a mismatch.
pub fn fill_request(conn: u64, seq: u64, out: &mut [u8]) {
    let key = conn.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for (w, chunk) in out.chunks_mut(8).enumerate() {
        let mut state = key ^ (w as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
        let word = crate::measure::cycle::splitmix(&mut state);
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
}

/// Run the load and return what it measured.
pub fn run(spec: &LoadSpec) -> Result<LoadReport> {
    spec.check()?;
    let need = spec.conns as u64 + 64;
    super::server::raise_nofile(need)?;
    match spec.client {
        ClientKind::Event => run_event(spec),
        ClientKind::Blocking => run_blocking(spec),
        ClientKind::Uring => super::load_uring::run(spec),
    }
}

fn loader_cpus(spec: &LoadSpec) -> usize {
    spec.cpus
        .as_ref()
        .map_or_else(|| cpus::allowed_cpus().len(), Vec::len)
}

fn connect(target: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&target, Duration::from_secs(5))?;
    // Best effort: a socket the server already reset says so on its first read or write.
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// The end of every client: no connection at all is an error naming the first cause;
/// otherwise the report's window is the measured part of the run (after warm-up).
fn finish(
    spec: &LoadSpec,
    mut total: LoadReport,
    first_error: &Mutex<Option<String>>,
) -> Result<LoadReport> {
    if total.errors.connect == spec.conns as u64 {
        return Err(no_connection(
            spec,
            first_error.lock().ok().and_then(|e| e.clone()),
        ));
    }
    total.window = spec.duration.saturating_sub(spec.warmup());
    Ok(total)
}

fn no_connection(spec: &LoadSpec, first: Option<String>) -> anyhow::Error {
    usage(format!(
        "cannot connect to {}: {}; start a server (costlab echo serve) or fix --target",
        spec.target,
        first.unwrap_or_else(|| "no connection succeeded".into())
    ))
}

// ---------------------------------------------------------------- shared by the event clients

/// Nanoseconds since a loader thread's epoch.
pub(super) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(super) fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    pub(super) fn ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// The request stream of one connection as the event-driven clients (epoll and io_uring)
/// keep it: what was sent when, and what the next echoed bytes must be.
pub(super) struct Stream {
    pub(super) id: u64,
    next_seq: u64,
    recv_seq: u64,
    recv_off: usize,
    expect: Vec<u8>,
    /// Send time (ns since the thread's epoch) of each request in flight, oldest first.
    pub(super) sent_at: VecDeque<u64>,
}

/// An echoed byte differed from what was sent, or came when nothing was asked.
pub(super) struct Mismatch;

impl Stream {
    pub(super) fn new(id: u64, size: usize) -> Stream {
        let mut expect = vec![0u8; size];
        fill_request(id, 0, &mut expect);
        Stream {
            id,
            next_seq: 0,
            recv_seq: 0,
            recv_off: 0,
            expect,
            sent_at: VecDeque::new(),
        }
    }

    /// Append the next request's bytes to `out`; it counts as sent at `at`.
    pub(super) fn queue(&mut self, out: &mut Vec<u8>, size: usize, at: u64) {
        let start = out.len();
        out.resize(start + size, 0);
        fill_request(self.id, self.next_seq, &mut out[start..]);
        self.next_seq += 1;
        self.sent_at.push_back(at);
    }

    /// Check echoed bytes (any piece of the stream: a request may come back split) and
    /// account every request they complete, seen at `now`. Returns how many completed
    /// before the deadline (each one a request to send again, closed loop); on a mismatch
    /// it is counted and the connection must be dropped.
    pub(super) fn absorb(
        &mut self,
        mut data: &[u8],
        now: u64,
        measure_from: u64,
        deadline: u64,
        report: &mut LoadReport,
    ) -> std::result::Result<usize, Mismatch> {
        let size = self.expect.len();
        let mut again = 0;
        while !data.is_empty() {
            let off = self.recv_seq * size as u64 + self.recv_off as u64;
            if self.sent_at.is_empty() {
                // Bytes nobody asked for.
                report.mismatch(self.id, off, &[], data);
                return Err(Mismatch);
            }
            let take = (size - self.recv_off).min(data.len());
            let want = &self.expect[self.recv_off..self.recv_off + take];
            if data[..take] != *want {
                report.mismatch(self.id, off, want, &data[..take]);
                return Err(Mismatch);
            }
            data = &data[take..];
            self.recv_off += take;
            if self.recv_off == size {
                let sent = self.sent_at.pop_front().unwrap_or(now);
                report.answered += 1;
                if sent >= measure_from {
                    let _ = report.latency.record(now.saturating_sub(sent).max(1));
                }
                if now >= measure_from && now <= deadline {
                    report.requests += 1;
                }
                self.recv_seq += 1;
                self.recv_off = 0;
                fill_request(self.id, self.recv_seq, &mut self.expect);
                if now < deadline {
                    again += 1;
                }
            }
        }
        Ok(again)
    }
}

/// Run `drive` on `spec.threads` pinned threads, each with its share of the connections
/// (made before anyone sends, `nonblocking` as asked), and merge what they measured.
pub(super) fn run_threads<F>(spec: &LoadSpec, nonblocking: bool, drive: F) -> Result<LoadReport>
where
    F: Fn(usize, usize, Vec<(u64, TcpStream)>, &mut LoadReport) -> Result<()> + Sync,
{
    let threads = spec.threads.min(spec.conns);
    let barrier = Arc::new(Barrier::new(threads));
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let mut total = LoadReport::empty(loader_cpus(spec));
    let drive = &drive;
    let results: Vec<Result<LoadReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ids: Vec<u64> = (0..spec.conns as u64)
                    .filter(|i| (*i as usize) % threads == t)
                    .collect();
                let barrier = Arc::clone(&barrier);
                let first_error = &first_error;
                scope.spawn(move || {
                    let cpu0 = thread_cpu_ns();
                    if let Some(c) = &spec.cpus {
                        let _ = cpus::pin_current_to(c);
                    }
                    let mut report = LoadReport::empty(0);
                    let socks = connect_all(spec, ids, nonblocking, &mut report, first_error);
                    // Everyone connected before anyone sends, so the window measures
                    // serving only.
                    barrier.wait();
                    let result = drive(t, threads, socks, &mut report);
                    report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
                    result.map(|_| report)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a loader thread panicked")))
            })
            .collect()
    });
    for r in results {
        total.merge(&r?);
    }
    finish(spec, total, &first_error)
}

fn connect_all(
    spec: &LoadSpec,
    ids: Vec<u64>,
    nonblocking: bool,
    report: &mut LoadReport,
    first_error: &Mutex<Option<String>>,
) -> Vec<(u64, TcpStream)> {
    let mut socks = Vec::with_capacity(ids.len());
    // Connecting is bounded too: a server that stops accepting cannot hold us for
    // conns x the connect timeout.
    let give_up = Instant::now() + Duration::from_secs(10);
    for id in ids {
        if Instant::now() >= give_up {
            report.errors.connect += 1;
            continue;
        }
        match connect(spec.target).and_then(|s| s.set_nonblocking(nonblocking).map(|_| s)) {
            Ok(sock) => socks.push((id, sock)),
            Err(e) => count_connect_error(report, &e, first_error),
        }
    }
    socks
}

// ---------------------------------------------------------------- event client

struct EConn {
    sock: TcpStream,
    stream: Stream,
    alive: bool,
    out: Vec<u8>,
    out_off: usize,
    want_out: bool,
}

fn run_event(spec: &LoadSpec) -> Result<LoadReport> {
    run_threads(spec, true, |index, threads, socks, report| {
        let mut conns: Vec<EConn> = socks
            .into_iter()
            .map(|(id, sock)| EConn {
                sock,
                stream: Stream::new(id, spec.size),
                alive: true,
                out: Vec::new(),
                out_off: 0,
                want_out: false,
            })
            .collect();
        drive(spec, index, threads, &mut conns, report)
    })
}

fn drive(
    spec: &LoadSpec,
    index: usize,
    threads: usize,
    conns: &mut [EConn],
    report: &mut LoadReport,
) -> Result<()> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).context("loader epoll_create")?;
    for (i, c) in conns.iter().enumerate() {
        epoll::add(
            &ep,
            c.sock.as_fd(),
            EventData::new_u64(i as u64),
            EventFlags::IN,
        )
        .context("loader epoll_ctl")?;
    }
    let clock = Clock::start();
    let measure_from = spec.warmup().as_nanos() as u64;
    let deadline = spec.duration.as_nanos() as u64;
    let hard_end = deadline + spec.grace().as_nanos() as u64;
    // Open loop: this thread's share of the rate, one request every `interval` ns, round
    // robin over its connections.
    let interval = spec
        .rate
        .map(|r| (1e9 * threads as f64 / r).max(1.0) as u64);
    let mut next_due = (index as u64 * interval.unwrap_or(0)) / threads.max(1) as u64;
    let mut rr = 0usize;
    let mut turns = 0u64;
    if interval.is_none() {
        for (i, c) in conns.iter_mut().enumerate() {
            for _ in 0..spec.depth {
                queue_request(c, spec.size, clock.ns());
            }
            flush(&ep, c, i, report);
        }
    }
    let mut buf = vec![0u8; 256 * 1024];
    let mut events: Vec<epoll::Event> = Vec::with_capacity(1024);
    loop {
        let now = clock.ns();
        turns += 1;
        // Scanning every connection is O(conns): do it after the deadline (to stop once all
        // is answered) and now and then before it (to stop if every connection died).
        if now >= hard_end {
            break;
        }
        if now >= deadline || turns.is_multiple_of(256) {
            let mut alive = false;
            let mut in_flight = 0;
            for c in conns.iter().filter(|c| c.alive) {
                alive = true;
                in_flight += c.stream.sent_at.len();
            }
            if !alive || (now >= deadline && in_flight == 0) {
                break;
            }
        }
        if let Some(iv) = interval {
            while next_due <= now && next_due < deadline {
                let Some(i) = next_alive(conns, &mut rr) else {
                    break;
                };
                queue_request(&mut conns[i], spec.size, next_due);
                flush(&ep, &mut conns[i], i, report);
                next_due += iv;
            }
        }
        let mut wait_ns = hard_end.saturating_sub(now).min(50_000_000);
        if interval.is_some() && next_due < deadline {
            wait_ns = wait_ns.min(next_due.saturating_sub(now));
        }
        let ts = rustix::time::Timespec {
            tv_sec: (wait_ns / 1_000_000_000) as i64,
            tv_nsec: (wait_ns % 1_000_000_000) as i64,
        };
        events.clear();
        match epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e).context("loader epoll_wait"),
        }
        for ev in &events {
            let i = ev.data.u64() as usize;
            let flags = ev.flags;
            if !conns[i].alive {
                continue;
            }
            if flags.contains(EventFlags::OUT) {
                flush(&ep, &mut conns[i], i, report);
            }
            if conns[i].alive
                && flags.intersects(EventFlags::IN | EventFlags::HUP | EventFlags::ERR)
            {
                let closed_loop = interval.is_none();
                read_echoes(
                    &ep,
                    &mut conns[i],
                    i,
                    &mut buf,
                    spec,
                    &clock,
                    measure_from,
                    deadline,
                    closed_loop,
                    report,
                );
            }
        }
    }
    for c in conns.iter().filter(|c| c.alive) {
        report.errors.timeout += c.stream.sent_at.len() as u64;
    }
    Ok(())
}

/// The next live connection in round-robin order, if any is left.
fn next_alive(conns: &[EConn], rr: &mut usize) -> Option<usize> {
    for _ in 0..conns.len() {
        let i = *rr % conns.len();
        *rr += 1;
        if conns[i].alive {
            return Some(i);
        }
    }
    None
}

fn queue_request(c: &mut EConn, size: usize, at: u64) {
    c.stream.queue(&mut c.out, size, at);
}

fn kill(ep: &impl AsFd, c: &mut EConn) {
    c.alive = false;
    let _ = epoll::delete(ep, c.sock.as_fd());
    let _ = c.sock.shutdown(std::net::Shutdown::Both);
}

/// Write what is queued until the socket is full; ask for EPOLLOUT only while some is left.
fn flush(ep: &impl AsFd, c: &mut EConn, i: usize, report: &mut LoadReport) {
    while c.out_off < c.out.len() {
        match c.sock.write(&c.out[c.out_off..]) {
            Ok(0) => break,
            Ok(k) => c.out_off += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                report.errors.reset += 1;
                kill(ep, c);
                return;
            }
        }
    }
    if c.out_off == c.out.len() {
        c.out.clear();
        c.out_off = 0;
    }
    let want = c.out_off < c.out.len();
    if want != c.want_out {
        let flags = if want {
            EventFlags::IN | EventFlags::OUT
        } else {
            EventFlags::IN
        };
        let _ = epoll::modify(ep, c.sock.as_fd(), EventData::new_u64(i as u64), flags);
        c.want_out = want;
    }
}

#[allow(clippy::too_many_arguments)]
fn read_echoes(
    ep: &impl AsFd,
    c: &mut EConn,
    i: usize,
    buf: &mut [u8],
    spec: &LoadSpec,
    clock: &Clock,
    measure_from: u64,
    deadline: u64,
    closed_loop: bool,
    report: &mut LoadReport,
) {
    loop {
        let n = match c.sock.read(buf) {
            Ok(0) => {
                // The server closed: an error only if it owed us answers or did so early.
                if !c.stream.sent_at.is_empty() || clock.ns() < deadline {
                    report.errors.reset += 1;
                }
                kill(ep, c);
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                report.errors.reset += 1;
                kill(ep, c);
                return;
            }
        };
        // Level-triggered: a short read means the socket is drained for now, and epoll
        // will say when more comes; reading on to EAGAIN would cost a syscall per request.
        let drained = n < buf.len();
        let now = clock.ns();
        let resend = match c
            .stream
            .absorb(&buf[..n], now, measure_from, deadline, report)
        {
            Ok(again) if closed_loop => again,
            Ok(_) => 0,
            Err(Mismatch) => {
                kill(ep, c);
                return;
            }
        };
        if resend > 0 {
            let now = clock.ns();
            for _ in 0..resend {
                queue_request(c, spec.size, now);
            }
            flush(ep, c, i, report);
            if !c.alive {
                return;
            }
        }
        if drained {
            return;
        }
    }
}

// ---------------------------------------------------------------- blocking client

fn run_blocking(spec: &LoadSpec) -> Result<LoadReport> {
    let start_gate = Arc::new(Barrier::new(spec.conns + 1));
    let first_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut handles = Vec::with_capacity(spec.conns);
    for id in 0..spec.conns as u64 {
        let spec2 = spec.clone();
        let gate = Arc::clone(&start_gate);
        let first = Arc::clone(&first_error);
        let h = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || blocking_conn(&spec2, id, &gate, &first));
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                // Release the threads already waiting, then say why.
                for _ in handles.len()..spec.conns {
                    let g = Arc::clone(&start_gate);
                    std::thread::spawn(move || g.wait());
                }
                start_gate.wait();
                for h in handles {
                    let _ = h.join();
                }
                return Err(usage(format!(
                    "cannot start thread {} of the blocking client ({e}); use fewer --conns or --client event",
                    id + 1
                )));
            }
        }
    }
    start_gate.wait();
    let mut total = LoadReport::empty(loader_cpus(spec));
    for h in handles {
        match h.join() {
            Ok(r) => total.merge(&r),
            Err(_) => anyhow::bail!("a blocking client thread panicked"),
        }
    }
    finish(spec, total, &first_error)
}

fn blocking_conn(
    spec: &LoadSpec,
    id: u64,
    gate: &Barrier,
    first_error: &Mutex<Option<String>>,
) -> LoadReport {
    let cpu0 = thread_cpu_ns();
    if let Some(c) = &spec.cpus {
        let _ = cpus::pin_current_to(c);
    }
    let mut report = LoadReport::empty(0);
    let sock = connect(spec.target);
    gate.wait();
    let mut sock = match sock {
        Ok(s) => s,
        Err(e) => {
            count_connect_error(&mut report, &e, first_error);
            report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
            return report;
        }
    };
    let epoch = Instant::now();
    let measure_from = spec.warmup();
    let deadline = spec.duration;
    let hard_end = spec.duration + spec.grace();
    // Open loop per connection: this connection's share of the rate.
    let interval = spec
        .rate
        .map(|r| Duration::from_secs_f64(spec.conns as f64 / r));
    let mut due = interval.map(|iv| iv.mul_f64(id as f64 / spec.conns as f64));
    let mut req = vec![0u8; spec.size];
    let mut got = vec![0u8; spec.size];
    let mut seq = 0u64;
    loop {
        let now = epoch.elapsed();
        if now >= deadline {
            break;
        }
        let sent = match (due, interval) {
            (Some(d), Some(iv)) => {
                if d > now {
                    std::thread::sleep(d - now);
                }
                due = Some(d + iv);
                d
            }
            _ => now,
        };
        if sent >= deadline {
            break;
        }
        fill_request(id, seq, &mut req);
        seq += 1;
        let left = hard_end
            .saturating_sub(epoch.elapsed())
            .max(Duration::from_millis(1));
        let _ = sock.set_read_timeout(Some(left));
        let _ = sock.set_write_timeout(Some(left));
        if let Err(e) = sock.write_all(&req) {
            count_io_error(&mut report, &e);
            break;
        }
        if let Err(e) = sock.read_exact(&mut got) {
            count_io_error(&mut report, &e);
            break;
        }
        if got != req {
            report.mismatch(id, (seq - 1) * req.len() as u64, &req, &got);
            break;
        }
        let done = epoch.elapsed();
        report.answered += 1;
        if sent >= measure_from {
            let _ = report
                .latency
                .record(done.saturating_sub(sent).as_nanos().max(1) as u64);
        }
        if done >= measure_from && done <= deadline {
            report.requests += 1;
        }
    }
    let _ = sock.shutdown(std::net::Shutdown::Both);
    report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    report
}

/// A connection the server accepted and reset at once is a reset, not a failure to connect.
fn count_connect_error(report: &mut LoadReport, e: &std::io::Error, first: &Mutex<Option<String>>) {
    if e.kind() == ErrorKind::ConnectionReset {
        report.errors.reset += 1;
        return;
    }
    report.errors.connect += 1;
    if let Ok(mut f) = first.lock() {
        f.get_or_insert_with(|| e.to_string());
    }
}

fn count_io_error(report: &mut LoadReport, e: &std::io::Error) {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => report.errors.timeout += 1,
        _ => report.errors.reset += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    fn spec() -> LoadSpec {
        LoadSpec {
            target: "127.0.0.1:1".parse().unwrap(),
            conns: 1,
            size: 16,
            duration: Duration::from_millis(100),
            depth: 1,
            threads: 1,
            rate: None,
            client: ClientKind::Event,
            cpus: None,
        }
    }

    #[test]
    fn requests_differ_by_connection_sequence_and_position() {
        let mut a = vec![0u8; 37];
        let mut b = vec![0u8; 37];
        fill_request(1, 2, &mut a);
        fill_request(1, 2, &mut b);
        assert_eq!(a, b);
        fill_request(1, 3, &mut b);
        assert_ne!(a, b);
        fill_request(2, 2, &mut b);
        assert_ne!(a, b);
        // A shifted echo (one byte lost) does not look like the original.
        assert_ne!(a[1..], b[..36]);
        let mut c = vec![0u8; 16];
        fill_request(1, 2, &mut c);
        assert_eq!(c[..], a[..16]);
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        let mut s = spec();
        assert!(s.check().is_ok());
        s.conns = 0;
        assert_eq!(exit_code(&s.check().unwrap_err()), 2);
        let mut s = spec();
        s.rate = Some(-1.0);
        assert_eq!(exit_code(&s.check().unwrap_err()), 2);
        let mut s = spec();
        s.client = ClientKind::Blocking;
        s.depth = 4;
        assert_eq!(exit_code(&s.check().unwrap_err()), 2);
        assert_eq!(exit_code(&ClientKind::parse("fast").unwrap_err()), 2);
        let mut s = spec();
        s.client = ClientKind::Uring;
        s.rate = Some(1000.0);
        assert_eq!(exit_code(&s.check().unwrap_err()), 2);
        assert_eq!(ClientKind::parse("uring").unwrap().name(), "uring");
    }

    #[test]
    fn a_closed_port_is_a_usage_error_not_a_hang() {
        // Port 1 on loopback: nobody listens there.
        for client in [ClientKind::Event, ClientKind::Blocking, ClientKind::Uring] {
            let mut s = spec();
            s.client = client;
            let t0 = Instant::now();
            let e = run(&s).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{e}");
            assert!(e.to_string().contains("cannot connect"));
            assert!(t0.elapsed() < Duration::from_secs(10));
        }
    }

    #[test]
    fn a_stream_checks_echoes_that_come_in_any_pieces() {
        let mut st = Stream::new(7, 16);
        let mut out = Vec::new();
        for _ in 0..3 {
            st.queue(&mut out, 16, 100);
        }
        assert_eq!(out.len(), 48);
        let mut r = LoadReport::empty(1);
        // Pieces that straddle request boundaries: 5, 20, 1, 22 bytes.
        let mut again = 0;
        for piece in [&out[..5], &out[5..25], &out[25..26], &out[26..]] {
            again += st.absorb(piece, 1_000, 0, 10_000, &mut r).ok().unwrap();
        }
        assert_eq!((again, r.answered, r.requests), (3, 3, 3));
        assert_eq!(r.latency.len(), 3);
        assert!(st.sent_at.is_empty());
        // Past the deadline an answer is counted but not sent again, nor in the window.
        st.queue(&mut out, 16, 100);
        let next = out[48..].to_vec();
        assert_eq!(st.absorb(&next, 20_000, 0, 10_000, &mut r).ok(), Some(0));
        assert_eq!((r.answered, r.requests), (4, 3));
        // One flipped bit, and bytes nobody asked for, are mismatches.
        st.queue(&mut out, 16, 100);
        let mut bad = out[64..].to_vec();
        bad[9] ^= 1;
        assert!(st.absorb(&bad, 1_000, 0, 10_000, &mut r).is_err());
        let mut idle = Stream::new(8, 16);
        assert!(idle.absorb(&[0u8; 4], 1_000, 0, 10_000, &mut r).is_err());
        assert_eq!(r.errors.mismatch, 2);
        assert_eq!(r.first_mismatches.len(), 2, "{:?}", r.first_mismatches);
        // Where (request 4 starts at byte 64, the flip is at 9 into it) and which bytes.
        let want = format!("conn 7 byte 73: expected {:02x} {:02x}", out[73], out[74]);
        assert!(
            r.first_mismatches[0].starts_with(&want),
            "{:?}",
            r.first_mismatches
        );
        assert!(r.first_mismatches[0].contains(&format!(
            "received {:02x} {:02x}",
            out[73] ^ 1,
            out[74]
        )));
        assert_eq!(
            r.first_mismatches[1],
            "conn 8 byte 0: expected nothing, received 00 00 00 00"
        );
    }

    #[test]
    fn report_arithmetic() {
        let mut r = LoadReport::empty(2);
        r.requests = 1000;
        r.window = Duration::from_millis(500);
        r.cpu_ns = 950_000_000;
        assert_eq!(r.throughput(), 2000.0);
        assert!((r.busy() - 0.95).abs() < 1e-9);
        assert!(r.bottleneck_note().is_some());
        assert_eq!(r.latency_us(0.5), None);
        for v in [1_000u64, 2_000, 3_000, 4_000] {
            r.latency.record(v).unwrap();
        }
        assert_eq!(r.latency_us(0.5), Some(2.0));
        // HdrHistogram keeps 3 significant digits.
        assert!((r.max_us().unwrap() - 4.0).abs() < 0.01);
        let mut e = Errors::default();
        e.add(&Errors {
            mismatch: 1,
            reset: 2,
            timeout: 3,
            connect: 4,
        });
        assert_eq!(e.total(), 10);
    }
}
