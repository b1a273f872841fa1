//! The per-request cost model of an echo server: the article's epoll = s + w and
//! io_uring = (t + s) / n, refined where it misses. Pure arithmetic over measured terms.

use crate::measure::Summary;

/// The cost terms, measured by the syscall lab (`measure::syscost::measure_terms`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostTerms {
    /// s: a null syscall round trip (raw getppid), ns.
    pub s_ns: Summary,
    /// Kernel work of a 16-byte send on loopback TCP beyond s, ns.
    pub w_send_ns: Summary,
    /// Kernel work of a 16-byte recv on loopback TCP beyond s, ns.
    pub w_recv_ns: Summary,
    /// io_uring NOP cost per op at batch n: (n, ns per op).
    pub t_nop_ns: Vec<(u32, Summary)>,
    /// io_uring send+recv cost per op at batch n: (n, ns per op).
    pub uring_sendrecv_ns: Vec<(u32, Summary)>,
}

/// What an echo server reported for one sweep point (per request figures are totals / requests).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    /// "epoll", "uring" or "uring-basic".
    pub engine: String,
    pub conns: u32,
    pub requests: u64,
    /// Syscalls the server made (epoll_wait + recv + send, or io_uring_enter).
    pub syscalls: u64,
    /// io_uring: io_uring_enter calls; 0 for epoll.
    pub enters: u64,
    /// io_uring: completions reaped; 0 for epoll.
    pub completions: u64,
    /// epoll: epoll_wait calls and events they returned; 0 for io_uring.
    pub epoll_waits: u64,
    pub epoll_events: u64,
    /// The server's own CPU time (user + sys) over the point, ns.
    pub cpu_ns: u64,
}
