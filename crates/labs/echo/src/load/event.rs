//! The event client: T threads, each owning its share of the connections on its own
//! epoll, with D requests in flight per connection (closed loop) or requests sent on a
//! fixed schedule (`--rate`, open loop).

use costlab_core::measure::aligned::AlignedBuf;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;

use anyhow::{Context, Result};
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;

use super::spec::{LoadReport, LoadSpec};
use super::stream::{run_threads, Clock, Mismatch, Stream};

struct EConn {
    sock: TcpStream,
    stream: Stream,
    alive: bool,
    out: Vec<u8>,
    out_off: usize,
    want_out: bool,
}

pub(super) fn run(spec: &LoadSpec) -> Result<LoadReport> {
    run_threads(spec, true, |index, threads, socks, report| {
        let mut conns: Vec<EConn> = socks
            .into_iter()
            .map(|(id, sock)| EConn {
                sock,
                stream: Stream::new(id, spec.size),
                alive: true,
                out: Vec::new(),
                out_off: 0,
                want_out: false,
            })
            .collect();
        drive(spec, index, threads, &mut conns, report)
    })
}

fn drive(
    spec: &LoadSpec,
    index: usize,
    threads: usize,
    conns: &mut [EConn],
    report: &mut LoadReport,
) -> Result<()> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).context("loader epoll_create")?;
    for (i, c) in conns.iter().enumerate() {
        epoll::add(
            &ep,
            c.sock.as_fd(),
            EventData::new_u64(i as u64),
            EventFlags::IN,
        )
        .context("loader epoll_ctl")?;
    }
    let clock = Clock::start();
    let measure_from = spec.warmup().as_nanos() as u64;
    let deadline = spec.duration.as_nanos() as u64;
    let hard_end = deadline + spec.grace().as_nanos() as u64;
    // Open loop: this thread's share of the rate, one request every `interval` ns, round
    // robin over its connections.
    let interval = spec
        .rate
        .map(|r| (1e9 * threads as f64 / r).max(1.0) as u64);
    let mut next_due = (index as u64 * interval.unwrap_or(0)) / threads.max(1) as u64;
    let mut rr = 0usize;
    let mut turns = 0u64;
    if interval.is_none() {
        for (i, c) in conns.iter_mut().enumerate() {
            for _ in 0..spec.depth {
                queue_request(c, spec.size, clock.ns());
            }
            flush(&ep, c, i, report);
        }
    }
    let mut buf = AlignedBuf::zeroed(256 * 1024);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(1024);
    loop {
        let now = clock.ns();
        turns += 1;
        // Scanning every connection is O(conns): do it after the deadline (to stop once all
        // is answered) and now and then before it (to stop if every connection died).
        if now >= hard_end {
            break;
        }
        if now >= deadline || turns.is_multiple_of(256) {
            let mut alive = false;
            let mut in_flight = 0;
            for c in conns.iter().filter(|c| c.alive) {
                alive = true;
                in_flight += c.stream.sent_at.len();
            }
            if !alive || (now >= deadline && in_flight == 0) {
                break;
            }
        }
        if let Some(iv) = interval {
            while next_due <= now && next_due < deadline {
                let Some(i) = next_alive(conns, &mut rr) else {
                    break;
                };
                queue_request(&mut conns[i], spec.size, next_due);
                flush(&ep, &mut conns[i], i, report);
                next_due += iv;
            }
        }
        let mut wait_ns = hard_end.saturating_sub(now).min(50_000_000);
        if interval.is_some() && next_due < deadline {
            wait_ns = wait_ns.min(next_due.saturating_sub(now));
        }
        let ts = rustix::time::Timespec {
            tv_sec: (wait_ns / 1_000_000_000) as i64,
            tv_nsec: (wait_ns % 1_000_000_000) as i64,
        };
        events.clear();
        match epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e).context("loader epoll_wait"),
        }
        for ev in &events {
            let i = ev.data.u64() as usize;
            let flags = ev.flags;
            if !conns[i].alive {
                continue;
            }
            if flags.contains(EventFlags::OUT) {
                flush(&ep, &mut conns[i], i, report);
            }
            if conns[i].alive
                && flags.intersects(EventFlags::IN | EventFlags::HUP | EventFlags::ERR)
            {
                let closed_loop = interval.is_none();
                read_echoes(
                    &ep,
                    &mut conns[i],
                    i,
                    &mut buf,
                    spec,
                    &clock,
                    measure_from,
                    deadline,
                    closed_loop,
                    report,
                );
            }
        }
    }
    for c in conns.iter().filter(|c| c.alive) {
        report.errors.timeout += c.stream.sent_at.len() as u64;
    }
    Ok(())
}

/// The next live connection in round-robin order, if any is left.
fn next_alive(conns: &[EConn], rr: &mut usize) -> Option<usize> {
    for _ in 0..conns.len() {
        let i = *rr % conns.len();
        *rr += 1;
        if conns[i].alive {
            return Some(i);
        }
    }
    None
}

fn queue_request(c: &mut EConn, size: usize, at: u64) {
    c.stream.queue(&mut c.out, size, at);
}

fn kill(ep: &impl AsFd, c: &mut EConn) {
    c.alive = false;
    let _ = epoll::delete(ep, c.sock.as_fd());
    let _ = c.sock.shutdown(std::net::Shutdown::Both);
}

/// Write what is queued until the socket is full; ask for EPOLLOUT only while some is left.
fn flush(ep: &impl AsFd, c: &mut EConn, i: usize, report: &mut LoadReport) {
    while c.out_off < c.out.len() {
        match c.sock.write(&c.out[c.out_off..]) {
            Ok(0) => break,
            Ok(k) => c.out_off += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                report.errors.reset += 1;
                kill(ep, c);
                return;
            }
        }
    }
    if c.out_off == c.out.len() {
        c.out.clear();
        c.out_off = 0;
    }
    let want = c.out_off < c.out.len();
    if want != c.want_out {
        let flags = if want {
            EventFlags::IN | EventFlags::OUT
        } else {
            EventFlags::IN
        };
        let _ = epoll::modify(ep, c.sock.as_fd(), EventData::new_u64(i as u64), flags);
        c.want_out = want;
    }
}

#[allow(clippy::too_many_arguments)]
fn read_echoes(
    ep: &impl AsFd,
    c: &mut EConn,
    i: usize,
    buf: &mut [u8],
    spec: &LoadSpec,
    clock: &Clock,
    measure_from: u64,
    deadline: u64,
    closed_loop: bool,
    report: &mut LoadReport,
) {
    loop {
        let n = match c.sock.read(buf) {
            Ok(0) => {
                // The server closed: an error only if it owed us answers or did so early.
                if !c.stream.sent_at.is_empty() || clock.ns() < deadline {
                    report.errors.reset += 1;
                }
                kill(ep, c);
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                report.errors.reset += 1;
                kill(ep, c);
                return;
            }
        };
        // Level-triggered: a short read means the socket is drained for now, and epoll
        // will say when more comes; reading on to EAGAIN would cost a syscall per request.
        let drained = n < buf.len();
        let now = clock.ns();
        let resend = match c
            .stream
            .absorb(&buf[..n], now, measure_from, deadline, report)
        {
            Ok(again) if closed_loop => again,
            Ok(_) => 0,
            Err(Mismatch) => {
                kill(ep, c);
                return;
            }
        };
        if resend > 0 {
            let now = clock.ns();
            for _ in 0..resend {
                queue_request(c, spec.size, now);
            }
            flush(ep, c, i, report);
            if !c.alive {
                return;
            }
        }
        if drained {
            return;
        }
    }
}
