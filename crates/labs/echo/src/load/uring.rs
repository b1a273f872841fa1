//! The io_uring load generator (`--client uring`): cheaper per request than the epoll
//! client, so that on a small machine the server, not the loader, sets the pace.
//!
//! Each loader thread owns one ring (SINGLE_ISSUER + DEFER_TASKRUN where the kernel has
//! them, as the uring server sets up) and its share of the connections, on blocking sockets
//! (io_uring waits for them by itself). Every connection keeps one send and one recv in
//! flight with `depth` requests outstanding; the sends and recvs of all connections made
//! ready in one turn go to the kernel in one io_uring_enter, which also waits for the next
//! completions, and those are reaped in bulk. A short send is resumed where it stopped; a
//! recv may bring a piece of a request or several: every byte is checked against the
//! request's pattern by the same code the epoll client uses. Closed loop only.

use costlab_core::measure::aligned::AlignedBuf;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Result;
use io_uring::{opcode, types, IoUring};

use super::spec::{LoadReport, LoadSpec};
use super::stream::{run_threads, Clock, Mismatch, Stream};
use crate::ring::{build_modern_ring, push_sqe, submit_and_wait, ud, ud_parts, RECV, SEND};

struct UConn {
    sock: TcpStream,
    stream: Stream,
    alive: bool,
    /// Bytes being sent (unchanged while a send is in flight) and how far the kernel got.
    out: Vec<u8>,
    out_off: usize,
    sending: bool,
    /// Requests made while a send was in flight; they go out when it completes.
    queued: Vec<u8>,
    buf: AlignedBuf,
    receiving: bool,
}

pub fn run(spec: &LoadSpec) -> Result<LoadReport> {
    run_threads(spec, false, |_index, _threads, socks, report| {
        // Room for the first burst of requests; large requests grow it as they come.
        let first = spec.size.saturating_mul(spec.depth).min(64 * 1024);
        let conns: Vec<UConn> = socks
            .into_iter()
            .map(|(id, sock)| UConn {
                sock,
                stream: Stream::new(id, spec.size),
                alive: true,
                out: Vec::with_capacity(first),
                out_off: 0,
                sending: false,
                queued: Vec::with_capacity(first),
                buf: AlignedBuf::zeroed(spec.size.saturating_mul(spec.depth).clamp(64, 256 * 1024)),
                receiving: false,
            })
            .collect();
        drive(spec, conns, report)
    })
}

/// Whether this process can set up an io_uring at all; why not when it cannot.
pub fn unavailable() -> Option<String> {
    match IoUring::new(2) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// One thread's ring and connections.
struct Loader<'a> {
    spec: &'a LoadSpec,
    ring: IoUring,
    conns: Vec<UConn>,
    /// Operations submitted and not yet reaped: their buffers must stay.
    in_flight: usize,
    /// Requests sent and not yet answered, over all live connections.
    outstanding: usize,
    alive: usize,
}

fn drive(spec: &LoadSpec, conns: Vec<UConn>, report: &mut LoadReport) -> Result<()> {
    if conns.is_empty() {
        return Ok(());
    }
    // Built here, on the thread that submits: SINGLE_ISSUER holds us to it.
    let (ring, _setup) = build_modern_ring()?;
    // Saves the fd lookup on every enter; an older kernel without it is fine.
    let _ = ring.submitter().register_ring_fd();
    let alive = conns.len();
    let mut l = Loader {
        spec,
        ring,
        conns,
        in_flight: 0,
        outstanding: 0,
        alive,
    };
    let result = l.run(report);
    l.finish(report);
    result
}

impl Loader<'_> {
    fn run(&mut self, report: &mut LoadReport) -> Result<()> {
        let clock = Clock::start();
        let measure_from = self.spec.warmup().as_nanos() as u64;
        let deadline = self.spec.duration.as_nanos() as u64;
        let hard_end = deadline + self.spec.grace().as_nanos() as u64;
        let now = clock.ns();
        for i in 0..self.conns.len() {
            let size = self.spec.size;
            let c = &mut self.conns[i];
            for _ in 0..self.spec.depth {
                c.stream.queue(&mut c.queued, size, now);
            }
            self.outstanding += self.spec.depth;
            self.send_queued(i)?;
            self.arm_recv(i)?;
        }
        let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(4096);
        loop {
            let now = clock.ns();
            if now >= hard_end || self.alive == 0 || (now >= deadline && self.outstanding == 0) {
                break;
            }
            let wait = Duration::from_nanos(hard_end.saturating_sub(now).min(50_000_000));
            submit_and_wait(&mut self.ring, 1, wait)?;
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            self.in_flight -= cqes.len();
            // One clock read per turn: every completion reaped here was there when the
            // enter returned.
            let now = clock.ns();
            for &(data, res) in &cqes {
                let (kind, i, _) = ud_parts(data);
                if !self.conns[i].alive {
                    continue;
                }
                if kind == SEND {
                    self.on_send(i, res, report)?;
                } else {
                    self.on_recv(i, res, now, measure_from, deadline, report)?;
                }
            }
        }
        Ok(())
    }

    /// # Safety
    ///
    /// As for `push_sqe`: what `sqe` points to stays valid until its completion is reaped.
    unsafe fn push(&mut self, sqe: &io_uring::squeue::Entry) -> Result<()> {
        // SAFETY: our caller upholds push_sqe's contract.
        unsafe { push_sqe(&mut self.ring, sqe) }?;
        self.in_flight += 1;
        Ok(())
    }

    /// Start sending what is queued, unless a send is already in flight.
    fn send_queued(&mut self, i: usize) -> Result<()> {
        let c = &mut self.conns[i];
        if c.sending || c.queued.is_empty() || !c.alive {
            return Ok(());
        }
        std::mem::swap(&mut c.out, &mut c.queued);
        c.out_off = 0;
        self.send_rest(i)
    }

    fn send_rest(&mut self, i: usize) -> Result<()> {
        let c = &mut self.conns[i];
        c.sending = true;
        let rest = &c.out[c.out_off..];
        let sqe = opcode::Send::new(
            types::Fd(c.sock.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(ud(SEND, i, 0));
        // SAFETY: `c.out` is not touched while `sending` (send_queued swaps only when no send
        // is in flight) and `finish` never frees a buffer an operation may still use.
        unsafe { self.push(&sqe) }
    }

    fn arm_recv(&mut self, i: usize) -> Result<()> {
        let c = &mut self.conns[i];
        c.receiving = true;
        let sqe = opcode::Recv::new(
            types::Fd(c.sock.as_raw_fd()),
            c.buf.as_mut_ptr(),
            c.buf.len() as u32,
        )
        .build()
        .user_data(ud(RECV, i, 0));
        // SAFETY: `c.buf` is allocated once per connection, not resized, and never freed while
        // a recv may be in flight (`finish` leaks it if one is).
        unsafe { self.push(&sqe) }
    }

    /// Drop a connection: its requests in flight are no longer counted (the error that
    /// killed it is), and shutting the socket ends its operations still in the kernel.
    fn kill(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.alive {
            return;
        }
        c.alive = false;
        self.alive -= 1;
        self.outstanding -= c.stream.sent_at.len();
        let _ = c.sock.shutdown(Shutdown::Both);
    }

    fn on_send(&mut self, i: usize, res: i32, report: &mut LoadReport) -> Result<()> {
        let c = &mut self.conns[i];
        c.sending = false;
        if res <= 0 {
            report.errors.reset += 1;
            self.kill(i);
            return Ok(());
        }
        c.out_off += res as usize;
        if c.out_off < c.out.len() {
            return self.send_rest(i);
        }
        c.out.clear();
        c.out_off = 0;
        self.send_queued(i)
    }

    fn on_recv(
        &mut self,
        i: usize,
        res: i32,
        now: u64,
        measure_from: u64,
        deadline: u64,
        report: &mut LoadReport,
    ) -> Result<()> {
        let size = self.spec.size;
        let c = &mut self.conns[i];
        c.receiving = false;
        if res <= 0 {
            // EOF: an error only if the server owed us answers or closed early.
            if res < 0 || !c.stream.sent_at.is_empty() || now < deadline {
                report.errors.reset += 1;
            }
            self.kill(i);
            return Ok(());
        }
        let before = c.stream.sent_at.len();
        let again =
            match c
                .stream
                .absorb(&c.buf[..res as usize], now, measure_from, deadline, report)
            {
                Ok(again) => again,
                Err(Mismatch) => {
                    self.kill(i);
                    return Ok(());
                }
            };
        self.outstanding -= before - c.stream.sent_at.len();
        for _ in 0..again {
            c.stream.queue(&mut c.queued, size, now);
        }
        self.outstanding += again;
        let expecting = !c.stream.sent_at.is_empty();
        self.send_queued(i)?;
        if expecting {
            self.arm_recv(i)?;
        }
        Ok(())
    }

    /// Count what was never answered, end every operation still in the kernel and reap it,
    /// so no buffer it points to is freed under it.
    fn finish(&mut self, report: &mut LoadReport) {
        for c in self.conns.iter_mut() {
            if c.alive {
                report.errors.timeout += c.stream.sent_at.len() as u64;
                c.alive = false;
            }
            let _ = c.sock.shutdown(Shutdown::Both);
        }
        let give_up = Instant::now() + Duration::from_secs(2);
        while self.in_flight > 0 && Instant::now() < give_up {
            if submit_and_wait(&mut self.ring, 1, Duration::from_millis(50)).is_err() {
                break;
            }
            let n = self.ring.completion().count();
            self.in_flight -= n;
        }
        if self.in_flight > 0 {
            // The kernel may still write into these buffers: never free them.
            std::mem::forget(std::mem::take(&mut self.conns));
        }
    }
}
