//! The echo lab end to end: the servers echo byte-exact under concurrency, partial writes and
//! misbehaving clients; the loader counts what it sees and never hangs; exit codes; the
//! experiment's JSON and its attribution. Beside it: echo_netns.rs (serve and load across two
//! network namespaces, a buffer ring run dry) and echo_sizes.rs (every size, each feature,
//! clients that never read, restarts). No timing is asserted.

use crate::common::{costlab, skip};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use costlab_echo::load::{self, fill_request, ClientKind, LoadSpec};
use costlab_echo::stats::ServerStats;

pub(crate) const ENGINES: [&str; 3] = ["epoll", "uring", "uring-basic"];
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A server process; killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    lines: mpsc::Receiver<String>,
    pub(crate) addr: SocketAddr,
}

impl Server {
    pub(crate) fn start(engine: &str) -> Server {
        Server::start_with(crate::common::command(), engine, "127.0.0.1:0")
    }

    /// The uring server with `--features`.
    pub(crate) fn start_features(features: &str) -> Server {
        Server::start_extra(
            crate::common::command(),
            "uring",
            "127.0.0.1:0",
            &["--features", features],
        )
    }

    pub(crate) fn start_with(cmd: Command, engine: &str, addr: &str) -> Server {
        Server::start_extra(cmd, engine, addr, &[])
    }

    pub(crate) fn start_extra(
        mut cmd: Command,
        engine: &str,
        addr: &str,
        extra: &[&str],
    ) -> Server {
        cmd.args(["echo", "serve", "--case", engine, "--addr", addr])
            .args(["--duration", "60s", "--sizes", "16"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn the server");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{engine}: the server printed no address"));
        let addr = first.trim().parse().expect("first line is the address");
        Server {
            child,
            lines: rx,
            addr,
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then the counts from its last line; it must exit 0 within 10 s.
    pub(crate) fn stop(mut self) -> ServerStats {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < IO_TIMEOUT, "server ignored SIGTERM");
            thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "server exit status {status}");
        let mut last = None;
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            last = Some(l);
        }
        serde_json::from_str(&last.expect("a counts line")).expect("counts are JSON")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Send `data` from one thread while reading its echo on another; the echo must be exact.
pub(crate) fn echo_exact(addr: SocketAddr, data: Vec<u8>) {
    let s = connect(addr);
    let mut w = s.try_clone().unwrap();
    let len = data.len();
    let writer = thread::spawn(move || {
        w.write_all(&data).expect("write");
        data
    });
    let mut got = vec![0u8; len];
    let mut r = s;
    r.read_exact(&mut got).expect("read the whole echo");
    let sent = writer.join().unwrap();
    assert!(got == sent, "echo differs from what was sent ({len} bytes)");
}

/// Close with a RST instead of a FIN.
fn linger_zero(s: &TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(s, Some(Duration::ZERO));
}

pub(crate) fn pattern(conn: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_request(conn, 1, &mut v);
    v
}

fn faults_against(engine: &str) {
    faults_against_with(engine, &[]);
}

fn faults_against_with(engine: &str, extra: &[&str]) {
    let mut server = Server::start_extra(crate::common::command(), engine, "127.0.0.1:0", extra);
    let addr = server.addr;
    // A client that connects and never sends, held for the whole test.
    let idle = connect(addr);

    let mut workers = Vec::new();
    // Well-behaved clients, concurrently, with sizes that force short reads and writes.
    for c in 0..8u64 {
        workers.push(thread::spawn(move || {
            for (k, len) in [16usize, 1, 4096, 70_000, 16, 300_000]
                .into_iter()
                .enumerate()
            {
                echo_exact(addr, pattern(c * 100 + k as u64, len));
            }
        }));
    }
    // One byte at a time, each echoed before the next.
    workers.push(thread::spawn(move || {
        let mut s = connect(addr);
        s.set_nodelay(true).unwrap();
        let data = pattern(900, 200);
        for b in &data {
            s.write_all(&[*b]).unwrap();
            let mut got = [0u8; 1];
            s.read_exact(&mut got).unwrap();
            assert_eq!(got[0], *b);
        }
    }));
    // 1 MiB in one write.
    workers.push(thread::spawn(move || {
        echo_exact(addr, pattern(901, 1 << 20))
    }));
    // Half-close: everything sent before the FIN comes back, then EOF.
    workers.push(thread::spawn(move || {
        let mut s = connect(addr);
        let data = pattern(902, 100_000);
        s.write_all(&data).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .expect("read to EOF after half-close");
        assert!(got == data, "half-close echo differs ({} bytes)", got.len());
    }));
    // Disconnect mid-message, and a hard reset (SO_LINGER 0) with data unread.
    workers.push(thread::spawn(move || {
        for i in 0..20u64 {
            let mut s = connect(addr);
            s.write_all(&pattern(903 + i, 5000)[..2500]).unwrap();
            if i % 2 == 0 {
                linger_zero(&s);
            }
            drop(s);
        }
    }));
    // Sends 4 MiB and never reads: the server must not let it block the others.
    let hog = thread::spawn(move || {
        let mut s = connect(addr);
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let chunk = pattern(950, 64 * 1024);
        for _ in 0..64 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        s
    });
    for w in workers {
        w.join()
            .unwrap_or_else(|_| panic!("{engine}: a client saw a wrong echo"));
    }
    let hog = hog.join().unwrap();
    // After all that, a fresh client is still served exactly.
    echo_exact(addr, pattern(999, 100_000));
    assert!(server.alive(), "{engine}: the server died");
    drop(hog);
    drop(idle);
    let stats = server.stop();
    assert_eq!(stats.engine, engine);
    assert!(stats.accepted >= 8 * 6 + 20, "{engine}: {stats:?}");
    assert_eq!(stats.requests, stats.bytes / 16);
}

#[test]
fn epoll_survives_faults_and_echoes_exactly() {
    faults_against("epoll");
}

#[test]
fn uring_survives_faults_and_echoes_exactly() {
    faults_against("uring");
}

#[test]
fn uring_hot_path_survives_faults_and_echoes_exactly() {
    // hot=1: the hot path for every message, whatever its size.
    faults_against_with("uring", &["--features", "hot=1"]);
}

#[test]
fn uring_basic_survives_faults_and_echoes_exactly() {
    faults_against("uring-basic");
}

fn spec(target: SocketAddr, conns: usize, client: ClientKind) -> LoadSpec {
    LoadSpec {
        target,
        conns,
        size: 16,
        duration: Duration::from_millis(400),
        depth: 1,
        threads: 2,
        rate: None,
        client,
        cpus: None,
    }
}

#[test]
fn loader_and_server_agree_on_every_request() {
    for engine in ENGINES {
        for (client, depth) in [
            (ClientKind::Event, 4),
            (ClientKind::Blocking, 1),
            (ClientKind::Uring, 4),
        ] {
            let server = Server::start(engine);
            let mut s = spec(server.addr, 5, client);
            s.depth = depth;
            let r = load::run(&s).expect("load");
            let stats = server.stop();
            assert_eq!(r.errors.total(), 0, "{engine} {client:?}: {:?}", r.errors);
            assert!(r.answered > 0 && r.requests <= r.answered);
            // Every request the server echoed was answered, checked, counted by the loader.
            assert_eq!(stats.requests, r.answered, "{engine} {client:?}");
            assert_eq!(r.latency.len(), r.latency.len().min(r.answered));
            assert!(r.cpu_ns > 0);
        }
    }
}

#[test]
fn open_loop_load_is_counted_from_the_schedule() {
    let server = Server::start("uring");
    let mut s = spec(server.addr, 4, ClientKind::Event);
    s.rate = Some(2000.0);
    let r = load::run(&s).expect("load");
    let stats = server.stop();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(stats.requests, r.answered);
    // 2000/s for 0.4 s is 800 requests on the schedule; a loaded machine may send fewer
    // before the deadline but never more.
    assert!(r.answered <= 801 && r.answered > 0, "{}", r.answered);
}

/// A bad server on a thread: `mode` decides how it misbehaves.
fn bad_server(mode: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        let mut held = Vec::new();
        l.set_nonblocking(true).unwrap();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(8) {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    match mode {
                        "flip" => {
                            thread::spawn(move || {
                                let mut b = [0u8; 16];
                                while s.read_exact(&mut b).is_ok() {
                                    b[3] ^= 0x40;
                                    if s.write_all(&b).is_err() {
                                        break;
                                    }
                                }
                            });
                        }
                        "trickle" => {
                            // Echo one byte per write, each on its own segment, so a
                            // 16-byte answer comes back in pieces.
                            let _ = s.set_nodelay(true);
                            thread::spawn(move || {
                                let mut b = [0u8; 1];
                                while s.read_exact(&mut b).is_ok() {
                                    if s.write_all(&b).is_err() {
                                        break;
                                    }
                                    thread::sleep(Duration::from_micros(200));
                                }
                            });
                        }
                        "reset" => {
                            linger_zero(&s);
                            drop(s);
                        }
                        _ => held.push(s), // silent: accept, never answer
                    }
                }
                Err(_) => thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    addr
}

#[test]
fn loader_counts_mismatches_resets_and_timeouts_and_never_hangs() {
    for client in [ClientKind::Event, ClientKind::Blocking, ClientKind::Uring] {
        let t0 = Instant::now();
        let r = load::run(&spec(bad_server("flip"), 3, client)).unwrap();
        assert_eq!(r.errors.mismatch, 3, "{client:?} {:?}", r.errors);
        assert_eq!(r.answered, 0);

        let r = load::run(&spec(bad_server("reset"), 3, client)).unwrap();
        assert_eq!(r.errors.reset, 3, "{client:?} {:?}", r.errors);

        let r = load::run(&spec(bad_server("silent"), 3, client)).unwrap();
        assert_eq!(r.errors.timeout, 3, "{client:?} {:?}", r.errors);
        assert_eq!(r.answered, 0);
        // 0.4 s of load plus its grace period, with room for a loaded machine.
        assert!(t0.elapsed() < Duration::from_secs(20), "{client:?} hung");
    }
}

#[test]
fn uring_loader_reassembles_echoes_that_come_back_in_pieces() {
    for client in [ClientKind::Uring, ClientKind::Event] {
        let mut s = spec(bad_server("trickle"), 2, client);
        s.depth = 3;
        let r = load::run(&s).unwrap();
        assert_eq!(
            r.errors.mismatch + r.errors.reset,
            0,
            "{client:?} {:?}",
            r.errors
        );
        assert!(r.answered > 0, "{client:?}");
    }
}

#[test]
fn uring_loader_resumes_short_sends_of_large_requests() {
    // 2 MiB requests, four in flight: more than a loopback socket takes at once (its send
    // buffer grows to 4 MiB at most by default), so the kernel accepts each send in parts.
    for engine in ENGINES {
        let server = Server::start(engine);
        let mut s = spec(server.addr, 3, ClientKind::Uring);
        s.size = 2 << 20;
        s.depth = 4;
        let r = load::run(&s).expect("load");
        let _ = server.stop();
        assert_eq!(r.errors.total(), 0, "{engine}: {:?}", r.errors);
        assert!(r.answered > 0, "{engine}");
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["echo", "--conns", "0"],
        &["echo", "--conns", "1,,2"],
        &["echo", "--case", "kqueue"],
        &["echo", "--duration", "0s"],
        &["echo", "--sizes", "0"],
        &["echo", "--client", "fast"],
        &["echo", "serve", "--case", "select"],
        &["echo", "serve", "--addr", "nowhere"],
        &["echo", "serve", "--case", "epoll", "--sqpoll"],
        &["echo", "serve", "--cpus", "4096"],
        &[
            "echo",
            "load",
            "--target",
            "127.0.0.1:1",
            "--duration",
            "200ms",
        ],
        &[
            "echo",
            "load",
            "--target",
            "127.0.0.1:1",
            "--conns",
            "1000000",
        ],
        &[
            "echo",
            "load",
            "--target",
            "127.0.0.1:1",
            "--client",
            "blocking",
            "--depth",
            "4",
        ],
        &["echo", "load", "--target", "127.0.0.1:1", "--rate", "-5"],
        &[
            "echo",
            "load",
            "--target",
            "127.0.0.1:1",
            "--client",
            "uring",
            "--rate",
            "1000",
        ],
    ];
    for args in cases {
        let out = costlab(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn serve_prints_its_address_then_its_counts() {
    for engine in ENGINES {
        let out = costlab(&[
            "echo",
            "serve",
            "--case",
            engine,
            "--duration",
            "300ms",
            "--sizes",
            "8",
        ]);
        assert!(out.status.success(), "{engine}");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let addr: SocketAddr = lines[0].parse().unwrap();
        assert!(addr.ip().is_loopback(), "binds 127.0.0.1 by default");
        let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        for key in [
            "requests",
            "bytes",
            "syscalls",
            "enters",
            "completions",
            "epoll_waits",
            "epoll_events",
            "cpu_user_ns",
            "cpu_sys_ns",
            "size",
        ] {
            assert!(v.get(key).is_some(), "{engine}: no {key} in {v}");
        }
        assert_eq!(v["size"], 8);
    }
}

#[test]
fn the_experiment_writes_every_metric_for_every_point() {
    let out = costlab(&[
        "echo",
        "--conns",
        "2",
        "--duration",
        "200ms",
        "--samples",
        "1",
        "--json",
        "-",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
    assert_eq!(doc["schema"], "costlab/1");
    let results = doc["results"].as_array().unwrap();
    for engine in ENGINES {
        for metric in [
            "throughput",
            "p50",
            "p99",
            "p999",
            "server_cpu_per_req",
            "batch",
        ] {
            let row = results
                .iter()
                .find(|r| r["case"]["engine"] == engine && r["metric"] == metric)
                .unwrap_or_else(|| panic!("no {metric} for {engine}"));
            assert_eq!(row["lab"], "echo");
            // The default loader is the io_uring one (the cheapest per request).
            assert_eq!(row["case"]["client"], "uring");
            assert_eq!(row["case"]["conns"], 2);
            assert_eq!(row["case"]["size"], 16);
            assert!(row["summary"]["median"].as_f64().unwrap() > 0.0, "{row}");
        }
    }
    assert!(
        err.contains("uring÷epoll"),
        "the ratio table is printed: {err}"
    );
}

/// `--attribute`: every point gets every part once, each part at or above zero, their sum
/// above zero, and the table printed; without perf on PATH it is refused at once.
#[test]
fn attribution_splits_each_points_cpu_into_parts() {
    let perf_on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("perf").is_file()));
    if !perf_on_path {
        skip::skipped_unless_ci(
            "attribution_splits_each_points_cpu_into_parts",
            "no perf on PATH (apt-get install linux-perf)",
        );
        return;
    }
    let out = costlab(&[
        "echo",
        "--case",
        "epoll,uring",
        "--conns",
        "2",
        "--sizes",
        "4K",
        "--duration",
        "500ms",
        "--samples",
        "1",
        "--attribute",
        "--json",
        "-",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
    let parts: Vec<&serde_json::Value> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "server_cpu_part")
        .collect();
    for engine in ["epoll", "uring"] {
        let mine: Vec<&&serde_json::Value> = parts
            .iter()
            .filter(|r| r["case"]["engine"] == engine)
            .collect();
        let mut names: Vec<&str> = mine
            .iter()
            .map(|r| r["case"]["part"].as_str().unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            11,
            "{engine}: one row per part: {names:?}; {err}"
        );
        assert_eq!(mine.len(), 11, "{engine}: each part once");
        let mut sum = 0.0;
        for r in &mine {
            assert_eq!(r["unit"], "ns");
            assert_eq!(r["case"]["size"], 4096);
            let v = r["summary"]["median"].as_f64().unwrap();
            assert!(v.is_finite() && v >= 0.0, "{r}");
            sum += v;
        }
        assert!(
            sum > 0.0,
            "{engine}: the parts sum to the run's CPU per request"
        );
    }
    assert!(
        err.contains("where the server's CPU per request goes"),
        "{err}"
    );
    assert!(err.contains("recv copy"), "{err}");

    let empty = std::env::temp_dir();
    let out = crate::common::command()
        .args(["echo", "--conns", "2", "--attribute"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("perf") && err.contains("linux-perf"), "{err}");
}
