//! What an echo server counts while it runs, and the one JSON line it prints on exit.
//!
//! Requests are not framed on the wire: with a fixed message size B the server counts
//! requests as bytes echoed / B (`size` in the line says which B was used).

use serde::{Deserialize, Serialize};

use super::model::Observed;

/// A server's counts over its whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    pub engine: String,
    /// How the ring was set up ("single_issuer+defer_taskrun", ...); "epoll" for epoll.
    pub setup: String,
    /// The message size B used to count requests.
    pub size: u64,
    /// uring: the techniques in use ("big,bundle,inc,sendmsg,fixed,huge" on the ring path,
    /// "fixed,hot>=8192" on the hot path); empty for the others.
    #[serde(default)]
    pub features: String,
    /// uring: techniques asked for that this kernel refused, each with why.
    #[serde(default)]
    pub features_off: Vec<String>,
    /// Bytes echoed / size.
    pub requests: u64,
    /// Bytes echoed (sent back) in total.
    pub bytes: u64,
    /// Every syscall the serving loop made (epoll_wait, epoll_ctl, accept, recv, send, close;
    /// or io_uring_enter).
    pub syscalls: u64,
    /// io_uring: io_uring_enter calls.
    pub enters: u64,
    /// io_uring: completions reaped.
    pub completions: u64,
    /// epoll: epoll_wait calls and the events they returned.
    pub epoll_waits: u64,
    pub epoll_events: u64,
    pub accepted: u64,
    pub closed: u64,
    /// Connections dropped on an error (reset, broken pipe) rather than a clean EOF.
    pub errors: u64,
    /// io_uring: times the provided-buffer ring ran dry (ENOBUFS) and recv was re-armed later.
    pub enobufs: u64,
    /// io_uring hot path: times a readable connection waited for a free hot buffer.
    #[serde(default)]
    pub hot_waits: u64,
    /// io_uring: sends that came back short, the rest sent by another send (a peer slow to
    /// read). On the hot path the rest is copied out of the hot buffer first.
    #[serde(default)]
    pub short_sends: u64,
    /// io_uring: what the serving loop saw, to tell a slow mode from a fast one by counts.
    #[serde(default, flatten)]
    pub ring: RingCounts,
    /// The server's own CPU time (getrusage, whole process), ns.
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
    pub wall_ns: u64,
    /// Times the server went to sleep for want of work (voluntary context switches,
    /// getrusage): with a fixed load, a server that sleeps more per request waits more.
    #[serde(default)]
    pub sleeps: u64,
}

impl ServerStats {
    pub fn new(engine: &str, setup: &str, size: u64) -> Self {
        ServerStats {
            engine: engine.to_string(),
            setup: setup.to_string(),
            size: size.max(1),
            ..Default::default()
        }
    }

    /// Fill the derived figures: requests from bytes, CPU from getrusage minus `start`.
    pub fn finish(&mut self, start: Cpu, wall_ns: u64) {
        self.requests = self.bytes / self.size.max(1);
        let now = Cpu::now();
        self.cpu_user_ns = now.user_ns.saturating_sub(start.user_ns);
        self.cpu_sys_ns = now.sys_ns.saturating_sub(start.sys_ns);
        self.sleeps = now.sleeps.saturating_sub(start.sleeps);
        self.wall_ns = wall_ns;
    }

    pub fn cpu_ns(&self) -> u64 {
        self.cpu_user_ns + self.cpu_sys_ns
    }

    /// Server CPU per request, ns; None without requests.
    pub fn cpu_per_request_ns(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.cpu_ns() as f64 / self.requests as f64)
    }

    /// The batch achieved: completions per io_uring_enter, or for epoll events per epoll_wait.
    pub fn batch(&self) -> Option<f64> {
        if self.enters > 0 {
            Some(self.completions as f64 / self.enters as f64)
        } else if self.epoll_waits > 0 {
            Some(self.epoll_events as f64 / self.epoll_waits as f64)
        } else {
            None
        }
    }

    /// Add another run's counts (repetitions of one sweep point).
    pub fn add(&mut self, o: &ServerStats) {
        self.requests += o.requests;
        self.bytes += o.bytes;
        self.syscalls += o.syscalls;
        self.enters += o.enters;
        self.completions += o.completions;
        self.epoll_waits += o.epoll_waits;
        self.epoll_events += o.epoll_events;
        self.accepted += o.accepted;
        self.closed += o.closed;
        self.errors += o.errors;
        self.enobufs += o.enobufs;
        self.hot_waits += o.hot_waits;
        self.short_sends += o.short_sends;
        self.ring.add(&o.ring);
        self.cpu_user_ns += o.cpu_user_ns;
        self.cpu_sys_ns += o.cpu_sys_ns;
        self.wall_ns += o.wall_ns;
        self.sleeps += o.sleeps;
    }

    /// The counts the cost model reads, for one sweep point.
    pub fn observed(&self, conns: u32) -> Observed {
        Observed {
            engine: self.engine.clone(),
            conns,
            size: self.size,
            requests: self.requests,
            syscalls: self.syscalls,
            enters: self.enters,
            completions: self.completions,
            epoll_waits: self.epoll_waits,
            epoll_events: self.epoll_events,
            cpu_ns: self.cpu_ns(),
            loader_sleeps_per_req: None,
        }
    }
}

/// The io_uring servers' counts of what each turn of the loop met: how requests arrived
/// (whole or in pieces), what the kernel's wake-ups cost, how well enters batched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingCounts {
    /// Hot path: multishot poll completions (a connection became readable).
    #[serde(default)]
    pub polls: u64,
    /// Receive completions that brought bytes.
    #[serde(default)]
    pub recvs: u64,
    /// Of those, the ones that ended inside a message (the connection's bytes so far not a
    /// whole number of messages): a request that arrived in pieces.
    #[serde(default)]
    pub partial_recvs: u64,
    /// Hot path: receives that found nothing (EAGAIN): a wake-up whose data an earlier receive
    /// had already taken.
    #[serde(default)]
    pub empty_recvs: u64,
    /// Send completions (a zero-copy send's notification not counted apart).
    #[serde(default)]
    pub sends: u64,
    /// Multishot receives or polls armed again after they ended (ring dry, cap, overflow).
    #[serde(default)]
    pub rearms: u64,
    /// `spin`: times the server polled its ring before sleeping and found work (no sleep), and
    /// times it found none (and slept after all).
    #[serde(default)]
    pub spin_hits: u64,
    #[serde(default)]
    pub spin_misses: u64,
    /// Nanoseconds spent watching the ring (hits and misses): CPU time the server burned
    /// waiting rather than serving, to take off its CPU per request when the loader, not the
    /// server, sets the pace.
    #[serde(default)]
    pub spin_ns: u64,
    /// Enters by how many completions they reaped: 0, 1, 2-3, 4-7, 8-15, 16-31, 32 and more.
    #[serde(default)]
    pub cqes_per_enter: [u64; 7],
}

impl RingCounts {
    pub fn add(&mut self, o: &RingCounts) {
        self.polls += o.polls;
        self.recvs += o.recvs;
        self.partial_recvs += o.partial_recvs;
        self.empty_recvs += o.empty_recvs;
        self.sends += o.sends;
        self.rearms += o.rearms;
        self.spin_hits += o.spin_hits;
        self.spin_misses += o.spin_misses;
        self.spin_ns += o.spin_ns;
        for (a, b) in self.cqes_per_enter.iter_mut().zip(o.cqes_per_enter) {
            *a += b;
        }
    }

    /// Count one enter that reaped `n` completions.
    pub fn enter_reaped(&mut self, n: usize) {
        let bucket = match n {
            0 => 0,
            n => (usize::BITS - n.leading_zeros()).min(6) as usize,
        };
        self.cqes_per_enter[bucket] += 1;
    }

    /// Count a receive of `got` bytes on a connection that had received `before` bytes, with
    /// messages of `size` bytes.
    pub fn received(&mut self, before: u64, got: u64, size: u64) {
        self.recvs += 1;
        if !(before + got).is_multiple_of(size.max(1)) {
            self.partial_recvs += 1;
        }
    }
}

/// Process CPU time so far (getrusage RUSAGE_SELF), split user / sys.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Voluntary context switches.
    pub sleeps: u64,
}

impl Cpu {
    pub fn now() -> Cpu {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes one rusage into the pointer we pass, which points to a
        // zeroed rusage of the right size that lives across the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        if rc != 0 {
            return Cpu::default();
        }
        // SAFETY: zero-initialised and, on success, filled by the kernel.
        let ru = unsafe { ru.assume_init() };
        let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        Cpu {
            user_ns: ns(ru.ru_utime),
            sys_ns: ns(ru.ru_stime),
            sleeps: ru.ru_nvcsw.max(0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_bytes_over_size_and_batch_is_per_enter() {
        let mut s = ServerStats::new("uring", "plain", 16);
        s.bytes = 16 * 1000 + 7;
        s.enters = 250;
        s.completions = 2000;
        s.finish(Cpu::now(), 1);
        assert_eq!(s.requests, 1000);
        assert_eq!(s.batch(), Some(8.0));
        let mut e = ServerStats::new("epoll", "epoll", 16);
        e.epoll_waits = 10;
        e.epoll_events = 30;
        assert_eq!(e.batch(), Some(3.0));
        assert_eq!(e.cpu_per_request_ns(), None);
    }

    #[test]
    fn repetitions_add_up_into_one_observation() {
        let mut a = ServerStats::new("epoll", "epoll", 16);
        a.requests = 10;
        a.syscalls = 30;
        a.cpu_user_ns = 100;
        a.cpu_sys_ns = 200;
        let b = a.clone();
        a.add(&b);
        let o = a.observed(128);
        assert_eq!(
            (o.requests, o.syscalls, o.cpu_ns, o.conns),
            (20, 60, 600, 128)
        );
        assert_eq!(o.engine, "epoll");
        let text = serde_json::to_string(&a).unwrap();
        let back: ServerStats = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn ring_counts_bucket_enters_and_find_pieces() {
        let mut c = RingCounts::default();
        for n in [0, 1, 2, 3, 4, 7, 8, 31, 32, 5000] {
            c.enter_reaped(n);
        }
        assert_eq!(c.cqes_per_enter, [1, 1, 2, 2, 1, 1, 2]);
        // 64 KiB messages: a whole one, then one in two pieces.
        c.received(0, 65536, 65536);
        c.received(65536, 65483, 65536);
        c.received(65536 + 65483, 53, 65536);
        assert_eq!((c.recvs, c.partial_recvs), (3, 1));
        let mut s = ServerStats::new("uring", "plain", 65536);
        s.ring = c.clone();
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("\"partial_recvs\":1"), "{text}");
        let back: ServerStats = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ring, c);
        // A line from a server before these counts still reads, as zeros.
        let old = text.replace(",\"partial_recvs\":1", "");
        let back: ServerStats = serde_json::from_str(&old).unwrap();
        assert_eq!(back.ring.partial_recvs, 0);
        s.add(&back);
        assert_eq!(s.ring.recvs, 6);
    }

    #[test]
    fn cpu_clocks_move_forward() {
        let a = Cpu::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let b = Cpu::now();
        assert!(b.user_ns + b.sys_ns >= a.user_ns + a.sys_ns);
    }
}
