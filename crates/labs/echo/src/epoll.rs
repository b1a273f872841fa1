//! The epoll echo server: non-blocking sockets, level-triggered epoll, read until EAGAIN,
//! echo at once, and keep what the socket would not take. EPOLLOUT is asked for only while a
//! connection has unsent bytes, so the common case costs epoll_wait + recv + send + the recv
//! that finds EAGAIN, and no epoll_ctl.

use costlab_core::measure::aligned::AlignedBuf;
use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::{Context, Result};
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags, SocketFlags};

use super::listen::Stop;
use super::stats::ServerStats;

const LISTENER: u64 = u64::MAX;
const MAX_EVENTS: usize = 1024;
const READ_CHUNK: usize = 64 * 1024;
/// Past this many unsent bytes a connection is not read until its peer drains some: one
/// client that sends without reading must not make the server buffer without bound.
const PENDING_CAP: usize = 256 * 1024;

struct Conn {
    fd: OwnedFd,
    /// Bytes received but not yet echoed; `out[sent..]` is still to send.
    out: Vec<u8>,
    sent: usize,
    interest: EventFlags,
    eof: bool,
}

impl Conn {
    fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// What epoll should report for this connection now.
    fn wanted(&self) -> EventFlags {
        let mut f = EventFlags::empty();
        if self.pending() > 0 {
            f |= EventFlags::OUT;
        }
        if !self.eof && self.pending() < PENDING_CAP {
            f |= EventFlags::IN;
        }
        f
    }
}

enum Next {
    Keep,
    Close { error: bool },
}

pub fn run(listener: OwnedFd, stop: &Stop, stats: &mut ServerStats) -> Result<()> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
    epoll::add(&ep, &listener, EventData::new_u64(LISTENER), EventFlags::IN)
        .context("adding the listener to epoll")?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    // Page-aligned, as every engine's buffers (measure::aligned says why).
    let mut buf = AlignedBuf::zeroed(READ_CHUNK);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(MAX_EVENTS);
    let tick = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: stop.tick().as_nanos() as i64,
    };
    while !stop.now() {
        events.clear();
        stats.syscalls += 1;
        stats.epoll_waits += 1;
        match epoll::wait(
            &ep,
            rustix::buffer::spare_capacity(&mut events),
            Some(&tick),
        ) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e).context("epoll_wait"),
        }
        stats.epoll_events += events.len() as u64;
        for ev in &events {
            let key = ev.data.u64();
            if key == LISTENER {
                accept_all(&listener, &ep, &mut conns, stats);
                continue;
            }
            let slot = key as usize;
            let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let flags = ev.flags;
            let mut next = Next::Keep;
            if flags.contains(EventFlags::OUT) || conn.pending() > 0 {
                next = flush(conn, stats);
            }
            if matches!(next, Next::Keep)
                && flags.intersects(EventFlags::IN | EventFlags::HUP | EventFlags::ERR)
            {
                next = read_and_echo(conn, &mut buf, stats);
            }
            if matches!(next, Next::Keep) && conn.eof && conn.pending() == 0 {
                next = Next::Close { error: false };
            }
            match next {
                Next::Close { error } => {
                    stats.syscalls += 1; // close
                    stats.closed += 1;
                    stats.errors += u64::from(error);
                    conns[slot] = None;
                }
                Next::Keep => {
                    let want = conn.wanted();
                    if want != conn.interest {
                        stats.syscalls += 1;
                        if epoll::modify(&ep, &conn.fd, EventData::new_u64(key), want).is_err() {
                            stats.syscalls += 1;
                            stats.closed += 1;
                            stats.errors += 1;
                            conns[slot] = None;
                            continue;
                        }
                        conn.interest = want;
                    }
                }
            }
        }
    }
    Ok(())
}

fn accept_all(
    listener: &OwnedFd,
    ep: &OwnedFd,
    conns: &mut Vec<Option<Conn>>,
    stats: &mut ServerStats,
) {
    loop {
        stats.syscalls += 1;
        let fd = match rustix::net::accept_with(
            listener,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        ) {
            Ok(fd) => fd,
            Err(Errno::INTR) | Err(Errno::CONNABORTED) => continue,
            // EAGAIN: all taken. EMFILE and the like: leave the rest in the backlog.
            Err(_) => return,
        };
        stats.syscalls += 2; // TCP_NODELAY, epoll_ctl ADD
        let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, true);
        let slot = fd.as_raw_fd() as usize;
        if epoll::add(ep, &fd, EventData::new_u64(slot as u64), EventFlags::IN).is_err() {
            continue;
        }
        if conns.len() <= slot {
            conns.resize_with(slot + 1, || None);
        }
        stats.accepted += 1;
        conns[slot] = Some(Conn {
            fd,
            out: Vec::new(),
            sent: 0,
            interest: EventFlags::IN,
            eof: false,
        });
    }
}

/// Read until EAGAIN (or until the connection has too much unsent), echoing each chunk.
fn read_and_echo(conn: &mut Conn, buf: &mut [u8], stats: &mut ServerStats) -> Next {
    while !conn.eof && conn.pending() < PENDING_CAP {
        stats.syscalls += 1;
        let n = match rustix::net::recv(&conn.fd, &mut *buf, RecvFlags::empty()) {
            Ok((n, _)) => n,
            Err(Errno::AGAIN) => return Next::Keep,
            Err(Errno::INTR) => continue,
            Err(_) => return Next::Close { error: true },
        };
        if n == 0 {
            conn.eof = true;
            break;
        }
        let mut data = &buf[..n];
        if conn.pending() == 0 {
            conn.out.clear();
            conn.sent = 0;
            match send_some(conn, data, stats) {
                Ok(k) => data = &data[k..],
                Err(()) => return Next::Close { error: true },
            }
        }
        conn.out.extend_from_slice(data);
    }
    Next::Keep
}

/// Send what is pending until the socket is full.
fn flush(conn: &mut Conn, stats: &mut ServerStats) -> Next {
    while conn.pending() > 0 {
        stats.syscalls += 1;
        match rustix::net::send(&conn.fd, &conn.out[conn.sent..], SendFlags::NOSIGNAL) {
            Ok(k) => {
                conn.sent += k;
                stats.bytes += k as u64;
            }
            Err(Errno::AGAIN) => break,
            Err(Errno::INTR) => {}
            Err(_) => return Next::Close { error: true },
        }
    }
    if conn.pending() == 0 {
        conn.out.clear();
        conn.sent = 0;
    }
    Next::Keep
}

/// Send from `data` directly (nothing is pending); returns how much the socket took.
fn send_some(conn: &Conn, data: &[u8], stats: &mut ServerStats) -> Result<usize, ()> {
    let mut done = 0;
    while done < data.len() {
        stats.syscalls += 1;
        match rustix::net::send(&conn.fd, &data[done..], SendFlags::NOSIGNAL) {
            Ok(k) => {
                done += k;
                stats.bytes += k as u64;
            }
            Err(Errno::AGAIN) => break,
            Err(Errno::INTR) => {}
            Err(_) => return Err(()),
        }
    }
    Ok(done)
}
