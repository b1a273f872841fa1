//! The uring echo server's own counts (issue 43): under ping-pong clients whose every echo is
//! checked byte for byte, the counts of what its turns met add up, on the hot path (64 KiB)
//! and on the ring path (512 B), with `spin` on and off. No timing is asserted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use costlab_echo::stats::ServerStats;

const BIN: &str = env!("CARGO_BIN_EXE_costlab");
const CONNS: usize = 6;
const REQUESTS: usize = 40;

/// Serve with the uring engine and `features` for as long as it takes `CONNS` ping-pong
/// clients to echo `REQUESTS` messages of `size` bytes each (each echo checked), then read
/// the counts the server prints when it stops (its `--duration`).
fn serve_and_count(size: usize, features: &str) -> ServerStats {
    let mut child = Command::new(BIN)
        .args(["echo", "serve", "--case", "uring", "--addr", "127.0.0.1:0"])
        .args(["--sizes", &size.to_string(), "--duration", "4s"])
        .args(["--features", features])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first)
        .expect("the server prints its address");
    let addr: SocketAddr = first.trim().parse().expect("first line is the address");
    let clients: Vec<_> = (0..CONNS)
        .map(|c| thread::spawn(move || ping_pong(addr, c, size)))
        .collect();
    for c in clients {
        c.join().expect("a client failed");
    }
    let status = child.wait().expect("the server ends at its --duration");
    assert!(status.success(), "server exit status {status}");
    let mut last = String::new();
    for line in out.lines().map_while(Result::ok) {
        last = line;
    }
    serde_json::from_str(&last).unwrap_or_else(|e| panic!("counts line {last:?}: {e}"))
}

/// One client: REQUESTS messages of `size` bytes, each written whole, then read back whole
/// and compared; every message differs from the one before.
fn ping_pong(addr: SocketAddr, client: usize, size: usize) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut back = vec![0u8; size];
    for r in 0..REQUESTS {
        let msg: Vec<u8> = (0..size)
            .map(|i| (i * 7 + r * 13 + client * 29) as u8)
            .collect();
        s.write_all(&msg).expect("send a request");
        s.read_exact(&mut back).expect("read its echo");
        assert!(back == msg, "client {client} request {r}: the echo differs");
    }
}

/// What every run's counts must say, whatever the path.
fn check_common(s: &ServerStats, size: usize) {
    let n = (CONNS * REQUESTS) as u64;
    assert_eq!(s.bytes, n * size as u64, "every byte echoed once");
    assert_eq!(s.requests, n);
    assert_eq!(
        (s.accepted, s.closed, s.errors),
        (CONNS as u64, CONNS as u64, 0)
    );
    let r = &s.ring;
    // Ping-pong: one message in flight per connection, so exactly one recv ends each message
    // and every other recv ended inside one.
    assert_eq!(r.recvs - r.partial_recvs, n, "{r:?}");
    assert!(r.sends >= n, "a send per echo at least: {r:?}");
    // Each reaping enter lands in one bucket; an enter made only to free the submission queue
    // reaps nothing and is in none.
    let bucketed: u64 = r.cqes_per_enter.iter().sum();
    assert!(
        bucketed > 0 && bucketed <= s.enters,
        "{bucketed} vs {}",
        s.enters
    );
    assert!(s.completions >= r.recvs + r.sends, "{s:?}");
}

#[test]
fn the_hot_path_counts_polls_recvs_and_sends_that_add_up() {
    let s = serve_and_count(65536, "all");
    check_common(&s, 65536);
    let r = &s.ring;
    assert!(
        s.features.contains("hot>=") && s.features.contains("spin"),
        "{}",
        s.features
    );
    // Each recv is started by a poll that said readable; a poll whose data an earlier recv
    // took starts an empty one.
    assert!(r.polls >= r.recvs, "{r:?}");
    assert!(r.empty_recvs <= r.polls, "{r:?}");
    assert_eq!(s.enobufs, 0, "the hot path has no buffer ring");
}

#[test]
fn the_ring_path_counts_the_same_and_spin_can_be_switched_off() {
    let s = serve_and_count(512, "-spin");
    check_common(&s, 512);
    let r = &s.ring;
    assert_eq!(r.polls, 0, "the ring path has no polls: {r:?}");
    assert!(!s.features.contains("spin"), "{}", s.features);
    assert_eq!((r.spin_hits, r.spin_misses), (0, 0));
    // A multishot recv is armed once per connection and again only when it ended.
    assert!(r.rearms <= s.enobufs + r.recvs, "{r:?}");
}
