//! Moving bytes to a TCP socket by one method, and timing it: a receiver thread (in a network
//! namespace for veth) reads every byte and acknowledges each sample; the sender, on its own
//! CPU, sends the sample's bytes in payload-sized calls and waits for the acknowledgement.
//!
//! CPU time: the receiver reads its own thread's clock around each sample; the sender's is
//! the process's CPU time over the sample minus the receiver's, so io_uring's kernel workers
//! (threads of this process) count as the sender's.
//!
//! source.rs holds the source file, sender.rs each method's payload; this file runs the
//! receiver and the samples.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::model::Method;
use super::sender::{errno, Sender, STALL};
pub use super::source::SourceFile;
use costlab_core::measure::{cancel, cpus, cputime, SampleSpec};

/// What one case measured, one entry per timed sample.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    pub throughput_gbps: Vec<f64>,
    pub sender_ms_per_gb: Vec<f64>,
    pub receiver_ms_per_gb: Vec<f64>,
    pub calls_per_gb: Vec<f64>,
    /// Methods that report it: the share of sends the kernel did not copy.
    pub zerocopy_fraction: Vec<f64>,
}

/// One sample's raw figures.
struct Raw {
    bytes: u64,
    wall_ns: u64,
    process_cpu_ns: u64,
    calls: u64,
    completed: u64,
    copied: u64,
}

fn one_sample(s: &mut Sender, stream: &mut TcpStream, bytes: u64) -> Result<Raw> {
    stream.write_all(&bytes.to_le_bytes())?;
    let (calls0, done0, copied0) = (s.calls, s.tally.completed, s.tally.copied);
    let c0 = cputime::process_cpu_ns();
    let t0 = Instant::now();
    for _ in 0..bytes / s.size as u64 {
        s.payload()?;
    }
    s.drain()?;
    let mut ack = [0u8; 1];
    stream
        .read_exact(&mut ack)
        .context("waiting for the receiver's acknowledgement")?;
    let wall_ns = t0.elapsed().as_nanos() as u64;
    let c1 = cputime::process_cpu_ns();
    Ok(Raw {
        bytes,
        wall_ns,
        process_cpu_ns: c1 - c0,
        calls: s.calls - calls0,
        completed: s.tally.completed - done0,
        copied: s.tally.copied - copied0,
    })
}

/// Where the receiver listens: a network namespace (veth) or this one (loopback).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub netns: Option<String>,
    pub ip: IpAddr,
}

fn enter_netns(name: &str) -> Result<()> {
    let f = File::open(format!("/run/netns/{name}"))
        .with_context(|| format!("opening network namespace {name}"))?;
    // SAFETY: setns on an fd we just opened; CLONE_NEWNET moves only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns into {name}: {}", errno());
    }
    Ok(())
}

/// The receiver: accept one connection, then per sample read an 8-byte length, that many
/// bytes, and acknowledge with one byte. Returns its CPU ns per sample.
fn receive(listener: TcpListener) -> Result<Vec<u64>> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, STALL.as_millis() as i32) };
    if ready <= 0 {
        bail!("the sender never connected");
    }
    let (mut s, _) = listener.accept()?;
    s.set_read_timeout(Some(STALL))?;
    let mut buf = vec![0u8; 256 << 10];
    let mut cpu = Vec::new();
    loop {
        let mut hdr = [0u8; 8];
        if s.read_exact(&mut hdr).is_err() {
            break;
        }
        let n = u64::from_le_bytes(hdr);
        if n == 0 {
            break;
        }
        let c0 = cputime::thread_cpu_ns();
        let mut left = n;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let k = s.read(&mut buf[..want])?;
            if k == 0 {
                bail!("the sender closed mid-sample");
            }
            left -= k as u64;
        }
        cpu.push(cputime::thread_cpu_ns() - c0);
        s.write_all(&[1])?;
    }
    Ok(cpu)
}

/// Measure one (method, size) case between `sender_cpu` and `receiver_cpu`.
pub fn measure(
    method: Method,
    size: usize,
    at: &Endpoint,
    file: Option<&SourceFile>,
    sender_cpu: usize,
    receiver_cpu: usize,
    spec: &SampleSpec,
) -> Result<Measured> {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Result<SocketAddr>>();
    std::thread::scope(|scope| -> Result<Measured> {
        let at2 = at.clone();
        let recv = scope.spawn(move || -> Result<Vec<u64>> {
            let bound = (|| -> Result<TcpListener> {
                cpus::pin_current(receiver_cpu)?;
                if let Some(ns) = &at2.netns {
                    enter_netns(ns)?;
                }
                Ok(TcpListener::bind(SocketAddr::new(at2.ip, 0))?)
            })();
            match bound {
                Ok(l) => {
                    let _ = addr_tx.send(Ok(l.local_addr()?));
                    receive(l)
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    let _ = addr_tx.send(Err(e));
                    Err(anyhow!(msg))
                }
            }
        });
        let addr = addr_rx
            .recv()
            .map_err(|_| anyhow!("the receiver thread ended early"))??;
        let sent = scope
            .spawn(move || -> Result<Vec<Raw>> {
                cpus::pin_current(sender_cpu)?;
                let mut stream = TcpStream::connect(addr)
                    .with_context(|| format!("connecting to the receiver at {addr}"))?;
                let r = send_samples(method, size, file, &mut stream, spec);
                // The end marker, also after an error, so the receiver stops.
                let _ = stream.write_all(&0u64.to_le_bytes());
                let _ = stream.shutdown(std::net::Shutdown::Write);
                r
            })
            .join()
            .map_err(|_| anyhow!("the sender thread panicked"))?;
        let recv_cpu = recv
            .join()
            .map_err(|_| anyhow!("the receiver thread panicked"))?;
        let raws = sent?;
        let recv_cpu = recv_cpu?;
        summarise(&raws, &recv_cpu, method, spec.samples)
    })
}

fn send_samples(
    method: Method,
    size: usize,
    file: Option<&SourceFile>,
    stream: &mut TcpStream,
    spec: &SampleSpec,
) -> Result<Vec<Raw>> {
    let mut s = Sender::new(method, size, stream.as_raw_fd(), file)?;
    // Calibrate: grow the sample until it lasts long enough for the clock.
    let mut per = ((4usize << 20).max(size * 4) / size).max(1) as u64;
    let max_per = ((1u64 << 30) / size as u64).max(1);
    let mut raws = Vec::new();
    let started = Instant::now();
    loop {
        cancel::check()?;
        let r = one_sample(&mut s, stream, per * size as u64)?;
        let took = Duration::from_nanos(r.wall_ns);
        raws.push(r);
        if took >= spec.min_sample || per >= max_per {
            break;
        }
        let factor =
            (spec.min_sample.as_secs_f64() * 1.2 / took.as_secs_f64().max(1e-6)).clamp(2.0, 16.0);
        per = ((per as f64 * factor) as u64).min(max_per);
    }
    while started.elapsed() < spec.warmup {
        raws.push(one_sample(&mut s, stream, per * size as u64)?);
    }
    for _ in 0..spec.samples {
        cancel::check()?;
        raws.push(one_sample(&mut s, stream, per * size as u64)?);
    }
    Ok(raws)
}

fn summarise(raws: &[Raw], recv_cpu: &[u64], method: Method, samples: usize) -> Result<Measured> {
    if recv_cpu.len() != raws.len() {
        bail!(
            "the receiver saw {} samples, the sender sent {}",
            recv_cpu.len(),
            raws.len()
        );
    }
    let from = raws.len().saturating_sub(samples);
    let mut m = Measured::default();
    for (r, &rc) in raws[from..].iter().zip(&recv_cpu[from..]) {
        let gb = r.bytes as f64 / 1e9;
        m.throughput_gbps.push(gb / (r.wall_ns as f64 / 1e9));
        m.sender_ms_per_gb
            .push(r.process_cpu_ns.saturating_sub(rc) as f64 / 1e6 / gb);
        m.receiver_ms_per_gb.push(rc as f64 / 1e6 / gb);
        m.calls_per_gb.push(r.calls as f64 / gb);
        if method.reports_zerocopy() && r.completed > 0 {
            m.zerocopy_fraction
                .push(1.0 - r.copied as f64 / r.completed as f64);
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> SampleSpec {
        SampleSpec {
            samples: 2,
            min_sample: Duration::from_millis(1),
            warmup: Duration::from_millis(1),
        }
    }

    fn loopback() -> Endpoint {
        Endpoint {
            netns: None,
            ip: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        }
    }

    /// The kernel's own completions, parsed: on loopback every zero-copy send is copied into
    /// the local receiver and the completion says so, so the fraction is exactly 0.
    #[test]
    fn loopback_zero_copy_completions_say_copied() {
        let cpu = cpus::allowed_cpus()[0];
        for m in [Method::MsgZerocopy, Method::UringSendZc] {
            match measure(m, 64 << 10, &loopback(), None, cpu, cpu, &tiny()) {
                Ok(r) => {
                    assert_eq!(r.zerocopy_fraction.len(), 2, "{}", m.name());
                    assert!(r.zerocopy_fraction.iter().all(|&f| f == 0.0), "{r:?}");
                    assert!(r.calls_per_gb.iter().all(|&c| c > 0.0));
                }
                // Old kernels, io_uring off: the reason is the row's text, not a failure.
                Err(e) => eprintln!("{}: unavailable here: {e:#}", m.name()),
            }
        }
    }

    #[test]
    fn every_file_method_moves_the_bytes() {
        let cpu = cpus::allowed_cpus()[0];
        let f = SourceFile::create(&std::env::temp_dir(), 1 << 20).unwrap();
        for m in [
            Method::ReadWrite,
            Method::MmapWrite,
            Method::Sendfile,
            Method::Splice,
            Method::Send,
        ] {
            let r = measure(m, 16 << 10, &loopback(), Some(&f), cpu, cpu, &tiny()).unwrap();
            assert_eq!(r.throughput_gbps.len(), 2, "{}", m.name());
            assert!(r.zerocopy_fraction.is_empty());
        }
    }
}
