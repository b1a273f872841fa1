//! The echo lab end to end: the servers echo byte-exact under concurrency, partial writes and
//! misbehaving clients; the loader counts what it sees and never hangs; exit codes; the
//! experiment's JSON; serve and load across two network namespaces. No timing is asserted.

use crate::common::{costlab, skip};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use costlab_echo::load::{self, fill_request, ClientKind, LoadSpec};
use costlab_echo::stats::ServerStats;

const BIN: &str = env!("CARGO_BIN_EXE_costlab");
const ENGINES: [&str; 3] = ["epoll", "uring", "uring-basic"];
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A server process; killed on drop.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    addr: SocketAddr,
}

impl Server {
    fn start(engine: &str) -> Server {
        Server::start_with(Command::new(BIN), engine, "127.0.0.1:0")
    }

    /// The uring server with `--features`.
    fn start_features(features: &str) -> Server {
        Server::start_extra(
            Command::new(BIN),
            "uring",
            "127.0.0.1:0",
            &["--features", features],
        )
    }

    fn start_with(cmd: Command, engine: &str, addr: &str) -> Server {
        Server::start_extra(cmd, engine, addr, &[])
    }

    fn start_extra(mut cmd: Command, engine: &str, addr: &str, extra: &[&str]) -> Server {
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
    fn stop(mut self) -> ServerStats {
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

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Send `data` from one thread while reading its echo on another; the echo must be exact.
fn echo_exact(addr: SocketAddr, data: Vec<u8>) {
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

fn pattern(conn: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_request(conn, 1, &mut v);
    v
}

fn faults_against(engine: &str) {
    faults_against_with(engine, &[]);
}

fn faults_against_with(engine: &str, extra: &[&str]) {
    let mut server = Server::start_extra(Command::new(BIN), engine, "127.0.0.1:0", extra);
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
    let out = Command::new(BIN)
        .args(["echo", "--conns", "2", "--attribute"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("perf") && err.contains("linux-perf"), "{err}");
}

// ---------------------------------------------------------------- two network namespaces

/// Two namespaces joined by a veth pair; deleted on drop (deleting a namespace deletes its
/// end of the veth, and with it the pair).
struct NetPair {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip` ({e}); install iproute2"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetPair {
    /// Names unique to this process; addresses from 10.213.0.0/16, which exist only
    /// inside the two namespaces.
    fn create() -> Result<NetPair, String> {
        if !crate::common::is_root() {
            return Err("network namespaces need root; run this test as root".into());
        }
        let tag = std::process::id() % 100_000;
        let pair = NetPair {
            a: format!("costlab-a{tag}"),
            b: format!("costlab-b{tag}"),
        };
        let (va, vb) = (format!("cla{tag}"), format!("clb{tag}"));
        let third = (tag % 250) + 1;
        let addr_a = format!("10.213.{third}.1/30");
        let addr_b = format!("10.213.{third}.2/30");
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", &pair.a])?;
        ip(&["link", "set", &vb, "netns", &pair.b])?;
        for (ns, dev, addr) in [(&pair.a, &va, &addr_a), (&pair.b, &vb, &addr_b)] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    fn server_ip(&self) -> String {
        let tag = std::process::id() % 100_000;
        format!("10.213.{}.1", (tag % 250) + 1)
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
        // If setup stopped before the veth moved into the namespaces, it is still here.
        let tag = std::process::id() % 100_000;
        let _ = ip(&["link", "del", &format!("cla{tag}")]);
    }
}

/// Run a command, killing it past `limit`.
fn run_bounded(mut cmd: Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    while matches!(child.try_wait(), Ok(None)) {
        if t0.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn serve_and_load_work_across_two_network_namespaces() {
    let pair = match NetPair::create() {
        Ok(p) => p,
        Err(why) => panic!("cannot set up two network namespaces joined by a veth pair: {why}"),
    };
    for engine in ENGINES {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &pair.a, BIN]);
        let server = Server::start_with(cmd, engine, &format!("{}:0", pair.server_ip()));
        assert_eq!(server.addr.ip().to_string(), pair.server_ip());
        let mut load = Command::new("ip");
        load.args(["netns", "exec", &pair.b, BIN, "echo", "load"])
            .args(["--target", &server.addr.to_string()])
            .args([
                "--conns",
                "4",
                "--depth",
                "2",
                "--duration",
                "300ms",
                "--json",
                "-",
            ]);
        let out = run_bounded(load, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{engine}: load across namespaces failed: {err}"
        );
        let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
        let rows = doc["results"].as_array().unwrap();
        let metric = |m: &str| {
            rows.iter()
                .find(|r| r["metric"] == m)
                .and_then(|r| r["summary"]["median"].as_f64())
                .unwrap_or(-1.0)
        };
        assert!(metric("throughput") > 0.0, "{engine}: {doc}");
        assert_eq!(metric("errors"), 0.0, "{engine}: {err}");
        let stats = server.stop();
        assert!(
            stats.requests > 0 && stats.accepted == 4,
            "{engine}: {stats:?}"
        );
    }
    drop(pair);
}

#[test]
fn uring_recovers_when_its_buffer_ring_runs_dry() {
    // 48 clients each send 200 KB before reading anything: together they want more buffers
    // than the ring holds, so recvs end with ENOBUFS and must be re-armed as sends complete.
    let server = Server::start("uring");
    let addr = server.addr;
    let clients: Vec<_> = (0..48u64)
        .map(|c| {
            thread::spawn(move || {
                let s = connect(addr);
                let data = pattern(2000 + c, 200_000);
                let mut w = s.try_clone().unwrap();
                let sent = data.clone();
                let writer = thread::spawn(move || w.write_all(&sent).is_ok());
                thread::sleep(Duration::from_millis(300));
                let mut got = vec![0u8; data.len()];
                let mut r = s;
                r.read_exact(&mut got).expect("read the echo");
                assert!(writer.join().unwrap());
                assert!(got == data, "client {c}: echo differs");
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client saw a wrong echo");
    }
    let stats = server.stop();
    eprintln!("uring under buffer pressure: enobufs {}", stats.enobufs);
    assert_eq!(stats.bytes, 48 * 200_000);
}

// ---------------------------------------------------------------- sizes, features, restarts

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
    let server = Server::start_extra(Command::new(BIN), "uring", "127.0.0.1:0", extra);
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
            let next = Server::start_with(Command::new(BIN), engine, &addr);
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
