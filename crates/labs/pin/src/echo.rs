//! The echo workload: `costlab echo serve` in a child process, placed, and a ping-pong
//! client over a few connections, placed beside it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::observe::{gettid, pin_to, where_now, Run};
use costlab_core::measure::counters::Scheduling;

/// Start `costlab echo serve` (epoll), pinned to `cpu` if given; returns it and its address.
fn start_server(cpu: Option<usize>, len: Duration) -> Result<(Child, String)> {
    let exe = std::env::current_exe().context("finding the costlab binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(["echo", "serve", "--case", "epoll", "--addr", "127.0.0.1:0"])
        .args([
            "--duration",
            &format!("{}ms", (len + Duration::from_secs(5)).as_millis()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(c) = cpu {
        cmd.args(["--cpu", &c.to_string()]);
    }
    let mut child = cmd.spawn().context("starting costlab echo serve")?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let addr = line.trim().to_string();
    if addr.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(anyhow!("the echo server printed no address"));
    }
    Ok((child, addr))
}

fn stop_server(child: &mut Child) {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

/// Connections the echo client keeps in flight (a request each, ping-pong).
const ECHO_CONNS: usize = 8;
const ECHO_MSG: usize = 16;

/// One echo run: thread 0's set places the server, thread 1's the client.
pub fn run_echo(sets: &[Vec<usize>], allowed: &[usize], len: Duration) -> Result<Run> {
    let mut sched = Scheduling::start();
    let (m0, s0) = sched.read();
    let server_cpu = sets[0].first().copied();
    let (mut child, addr) = start_server(server_cpu, len)?;
    let mut seen = BTreeMap::new();
    let result = (|| -> Result<(u64, f64)> {
        let mut conns: Vec<TcpStream> = (0..ECHO_CONNS)
            .map(|_| TcpStream::connect(&addr))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("connecting to the echo server at {addr}"))?;
        for c in &conns {
            c.set_nodelay(true)?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
        }
        let pid = child.id();
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let count = std::thread::scope(|scope| -> Result<u64> {
            let stop = &stop;
            let client_set = sets.get(1).cloned().unwrap_or_default();
            let conns = &mut conns;
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let h = scope.spawn(move || -> Result<u64> {
                pin_to(&client_set, allowed)?;
                let _ = tid_tx.send(gettid());
                let msg = [7u8; ECHO_MSG];
                let mut back = [0u8; ECHO_MSG];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for c in conns.iter_mut() {
                        c.write_all(&msg)?;
                    }
                    for c in conns.iter_mut() {
                        c.read_exact(&mut back)?;
                        if back != msg {
                            return Err(anyhow!("the echo server sent back other bytes"));
                        }
                    }
                    n += ECHO_CONNS as u64;
                }
                Ok(n)
            });
            let mut tasks = Vec::new();
            if let Ok(tid) = tid_rx.recv_timeout(Duration::from_secs(1)) {
                tasks.push(("client".to_string(), format!("/proc/self/task/{tid}/stat")));
            }
            if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                let mut tids: Vec<u64> = rd
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                tids.sort_unstable();
                // By position, so runs (a fresh server each) add up: thread 0 is its main one.
                for (i, tid) in tids.iter().enumerate() {
                    tasks.push((
                        format!("server thread {i}"),
                        format!("/proc/{pid}/task/{tid}/stat"),
                    ));
                }
            }
            while t0.elapsed() < len {
                std::thread::sleep(Duration::from_millis(5));
                where_now(&tasks, &mut seen);
            }
            // One look after the run, whatever its length: each task is seen at least once.
            where_now(&tasks, &mut seen);
            stop.store(true, Ordering::Relaxed);
            h.join().map_err(|_| anyhow!("the echo client panicked"))?
        })?;
        Ok((count, t0.elapsed().as_secs_f64()))
    })();
    stop_server(&mut child);
    let (count, secs) = result?;
    // The server has exited and been waited for, so its counts are in the inherited totals.
    let (m1, s1) = sched.read();
    Ok(Run {
        per_s: count as f64 / secs,
        migrations_per_s: m0.zip(m1).map(|(a, b)| (b - a) as f64 / secs),
        switches_per_s: s0.zip(s1).map(|(a, b)| (b - a) as f64 / secs),
        seen,
        why_no_counters: sched.why.take(),
    })
}
