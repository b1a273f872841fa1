//! What the clients share: the request pattern every echoed byte is checked against, the
//! per-connection request stream of the event-driven clients (epoll and io_uring), and
//! connecting, pinning and merging the loader's threads.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::spec::{LoadReport, LoadSpec};
use costlab_core::error::usage;
use costlab_core::measure::cpus;
use costlab_core::measure::cputime::{thread_cpu_ns, thread_sleeps};

/// Fill `out` with the bytes of request `seq` on connection `conn`. Every 8-byte word
/// depends on (conn, seq, word), so an echo from the wrong request or connection, a
/// dropped or repeated byte, all show up as a mismatch.
///
/// Word `w` is a random table's word `w` (the table repeats every 64 KiB, each repeat mixed
/// with its round) xor a key drawn from (conn, seq). The loader fills every request it
/// sends and every echo it expects, so this is on its hot path: a splitmix per word cost
/// it 40-60% of its CPU at 64 KiB (perf, `echo load --sizes 65536`), an xor per word a few
/// percent.
pub fn fill_request(conn: u64, seq: u64, out: &mut [u8]) {
    let mut seed =
        conn.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    let key = costlab_core::measure::cycle::splitmix(&mut seed);
    let table = pattern_table();
    for (round, block) in out.chunks_mut(PATTERN_WORDS * 8).enumerate() {
        let k = key ^ (round as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
        let whole = block.len() / 8;
        let mut words = block.chunks_exact_mut(8);
        for (chunk, t) in (&mut words).zip(table.iter()) {
            chunk.copy_from_slice(&(t ^ k).to_le_bytes());
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let t = table[whole] ^ k;
            tail.copy_from_slice(&t.to_le_bytes()[..tail.len()]);
        }
    }
}

/// Words in the request pattern's table (64 KiB).
const PATTERN_WORDS: usize = 8192;

fn pattern_table() -> &'static [u64] {
    static TABLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut state = 0x00C0_57AB_EC40_u64;
        (0..PATTERN_WORDS)
            .map(|_| costlab_core::measure::cycle::splitmix(&mut state))
            .collect()
    })
}

pub(super) fn loader_cpus(spec: &LoadSpec) -> usize {
    spec.cpus
        .as_ref()
        .map_or_else(|| cpus::allowed_cpus().len(), Vec::len)
}

pub(super) fn connect(target: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&target, Duration::from_secs(5))?;
    // Best effort: a socket the server already reset says so on its first read or write.
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// The end of every client: no connection at all is an error naming the first cause;
/// otherwise the report's window is the measured part of the run (after warm-up).
pub(super) fn finish(
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

pub(super) fn no_connection(spec: &LoadSpec, first: Option<String>) -> anyhow::Error {
    usage(format!(
        "cannot connect to {}: {}; start a server (costlab echo serve) or fix --target",
        spec.target,
        first.unwrap_or_else(|| "no connection succeeded".into())
    ))
}

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
                    let slept0 = thread_sleeps();
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
                    report.sleeps = Some(thread_sleeps().saturating_sub(slept0));
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

/// A connection the server accepted and reset at once is a reset, not a failure to connect.
pub(super) fn count_connect_error(
    report: &mut LoadReport,
    e: &std::io::Error,
    first: &Mutex<Option<String>>,
) {
    if e.kind() == ErrorKind::ConnectionReset {
        report.errors.reset += 1;
        return;
    }
    report.errors.connect += 1;
    if let Ok(mut f) = first.lock() {
        f.get_or_insert_with(|| e.to_string());
    }
}

pub(super) fn count_io_error(report: &mut LoadReport, e: &std::io::Error) {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => report.errors.timeout += 1,
        _ => report.errors.reset += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Past the table's 64 KiB the words go on differing: a second round is not a copy
        // of the first, and a prefix is the shorter request.
        let mut long = vec![0u8; 2 * PATTERN_WORDS * 8 + 5];
        fill_request(1, 2, &mut long);
        let half = PATTERN_WORDS * 8;
        assert_ne!(long[..half], long[half..2 * half]);
        assert_eq!(long[..37], a[..]);
        let words: std::collections::HashSet<&[u8]> = long.chunks(8).collect();
        assert_eq!(words.len(), long.len().div_ceil(8), "a word repeats");
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
}
