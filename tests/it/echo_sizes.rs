//! The echo servers on every size from 1 B to 1 MiB (each io_uring feature on and off),
//! against clients that never read, and restarted on one port. No timing is asserted.

use crate::echo::{connect, echo_exact, pattern, Server, ENGINES};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

/// Sizes from 1 B to 1 MiB, with some on each side of the 2 KiB and 32 KiB buffer sizes.
const SIZES: [usize; 15] = [
    1,
    16,
    512,
    2047,
    2048,
    2049,
    4096,
    16 * 1024,
    32 * 1024 - 1,
    32 * 1024,
    32 * 1024 + 1,
    64 * 1024,
    64 * 1024 + 7,
    300_000,
    1 << 20,
];

/// On one connection: each size in turn, each echoed before the next (so small messages
/// share partly filled buffers and large ones straddle buffers), then all of them written
/// back to back while reading.
fn echo_every_size(addr: SocketAddr, seed: u64) {
    let s = connect(addr);
    let mut w = s.try_clone().unwrap();
    let mut r = s;
    for (k, &len) in SIZES.iter().enumerate() {
        let data = pattern(seed * 100 + k as u64, len);
        let sent = data.clone();
        let writer = thread::spawn(move || {
            w.write_all(&sent).expect("write");
            w
        });
        let mut got = vec![0u8; len];
        r.read_exact(&mut got).expect("read the echo");
        w = writer.join().unwrap();
        assert!(got == data, "echo of {len} bytes differs");
    }
    let all: Vec<u8> = SIZES
        .iter()
        .enumerate()
        .flat_map(|(k, &len)| pattern(seed * 100 + 50 + k as u64, len))
        .collect();
    let sent = all.clone();
    let writer = thread::spawn(move || w.write_all(&sent).expect("write"));
    let mut got = vec![0u8; all.len()];
    r.read_exact(&mut got).expect("read the pipelined echo");
    writer.join().unwrap();
    assert!(got == all, "pipelined echo differs");
}

#[test]
fn uring_echoes_every_size_exactly_with_each_feature_on_and_off() {
    for features in [
        "all",
        "-big",
        "-bundle",
        "-inc",
        "-sendmsg",
        "-fixed",
        "-huge",
        "zc=1K",
        "none",
        "hot=1",
        "hot=1,-fixed",
    ] {
        let server = Server::start_features(features);
        let addr = server.addr;
        let clients: Vec<_> = (0..4u64)
            .map(|c| thread::spawn(move || echo_every_size(addr, 3000 + c)))
            .collect();
        for c in clients {
            c.join()
                .unwrap_or_else(|_| panic!("--features {features}: a client saw a wrong echo"));
        }
        let stats = server.stop();
        let per_client: usize = 2 * SIZES.iter().sum::<usize>();
        assert_eq!(
            stats.bytes as usize,
            4 * per_client,
            "--features {features}"
        );
        assert_eq!(stats.errors, 0, "--features {features}: {stats:?}");
        // 16-byte messages: the hot path only where its threshold is forced down.
        assert_eq!(
            stats.features.contains("hot>=1"),
            features.starts_with("hot=1"),
            "--features {features}: on {}",
            stats.features
        );
        eprintln!("--features {features}: on {}", stats.features);
    }
}

#[test]
fn every_engine_echoes_every_size_exactly() {
    for engine in ["epoll", "uring-basic"] {
        let server = Server::start(engine);
        let addr = server.addr;
        let clients: Vec<_> = (0..4u64)
            .map(|c| thread::spawn(move || echo_every_size(addr, 4000 + c)))
            .collect();
        for c in clients {
            c.join()
                .unwrap_or_else(|_| panic!("{engine}: a client saw a wrong echo"));
        }
        let _ = server.stop();
    }
}

#[test]
fn a_client_that_never_reads_does_not_grow_the_uring_server() {
    never_reading_clients_against(&[]);
}

#[test]
fn a_client_that_never_reads_does_not_grow_the_hot_path() {
    never_reading_clients_against(&["--features", "hot=1"]);
}

fn never_reading_clients_against(extra: &[&str]) {
    // Peers that send 32 MiB each and never read: the server stops reading them at its
    // per-connection bound, so its resident memory stays far below what they sent, and a
    // well-behaved client is still served.
    let server = Server::start_extra(crate::common::command(), "uring", "127.0.0.1:0", extra);
    let addr = server.addr;
    let rss = |pid: u32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let pid = server.child.id();
    let hogs: Vec<_> = (0..4u64)
        .map(|c| {
            thread::spawn(move || {
                let mut s = connect(addr);
                s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
                let chunk = pattern(5000 + c, 64 * 1024);
                let mut sent = 0usize;
                for _ in 0..512 {
                    match s.write_all(&chunk) {
                        Ok(()) => sent += chunk.len(),
                        Err(_) => break,
                    }
                }
                (s, sent)
            })
        })
        .collect();
    let hogs: Vec<(TcpStream, usize)> = hogs.into_iter().map(|h| h.join().unwrap()).collect();
    for (_, sent) in &hogs {
        assert!(
            *sent < 32 << 20,
            "a peer that never reads could send all 32 MiB"
        );
    }
    echo_exact(addr, pattern(5999, 200_000));
    let kib = rss(pid);
    // The buffer pool (32 MiB) is mapped lazily; the hogs may pin at most their bound each.
    assert!(
        kib < 64 * 1024,
        "server RSS {kib} KiB with 4 peers that never read"
    );
    drop(hogs);
    let stats = server.stop();
    assert!(stats.accepted >= 5, "{stats:?}");
}

#[test]
fn servers_restart_on_the_same_port_twenty_times() {
    for engine in ENGINES {
        let first = Server::start(engine);
        let addr = first.addr.to_string();
        // A client is connected when each server stops, as in a real restart.
        let mut held = connect(first.addr);
        held.write_all(b"hello").unwrap();
        let mut prev = first;
        for round in 0..20 {
            let _ = prev.stop();
            let next = Server::start_with(crate::common::command(), engine, &addr);
            assert_eq!(next.addr.to_string(), addr, "{engine} round {round}");
            held = connect(next.addr);
            held.write_all(b"again").unwrap();
            let mut got = [0u8; 5];
            held.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"again", "{engine} round {round}");
            prev = next;
        }
        let _ = prev.stop();
        drop(held);
    }
}
