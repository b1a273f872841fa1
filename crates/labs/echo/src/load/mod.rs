//! The load generator. The event client runs T threads, each owning its share of the
//! connections on its own epoll, with D requests in flight per connection (closed loop) or
//! requests sent on a fixed schedule (`--rate`, open loop: latency counts from the intended
//! send time, so a stalled server cannot hide its stall). The blocking client is one thread
//! per connection, for comparison. Both check every echoed byte against the request's
//! pattern (which carries the connection and the request's sequence number), and every loop
//! ends by a hard deadline whatever the server does.
//!
//! Files: `spec` (what to run, what it measured), `stream` (what the clients share: the
//! request pattern, the per-connection stream, connecting and merging threads), one file
//! per client (`event`, `blocking`, `uring`); this one only dispatches.

use anyhow::Result;

mod blocking;
mod event;
mod spec;
mod stream;
mod uring;

pub use spec::{describe_mismatch, loader_bound_note, ClientKind, Errors, LoadReport, LoadSpec};
pub use stream::fill_request;
pub use uring::unavailable as uring_unavailable;

/// Run the load and return what it measured.
pub fn run(spec: &LoadSpec) -> Result<LoadReport> {
    spec.check()?;
    let need = spec.conns as u64 + 64;
    super::listen::raise_nofile(need)?;
    match spec.client {
        ClientKind::Event => event::run(spec),
        ClientKind::Blocking => blocking::run(spec),
        ClientKind::Uring => uring::run(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;
    use std::time::{Duration, Instant};

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
