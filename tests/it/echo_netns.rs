//! The echo servers and loader across two network namespaces joined by a veth pair, and an
//! io_uring server whose buffer ring runs dry. No timing is asserted.

use crate::common::BIN;
use crate::echo::{connect, pattern, Server, ENGINES};

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

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
