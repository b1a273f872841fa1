//! The straightforward io_uring echo server, the form most first ports take: a plain ring
//! (no setup flags), one accept SQE re-armed after each connection, one recv SQE into the
//! connection's own buffer, a send of what came in (resumed after a short write), and only
//! then the next recv. Set beside `uring` it shows what multishot, provided buffers and
//! DEFER_TASKRUN are worth.

use costlab_core::measure::aligned::AlignedBuf;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::Result;
use io_uring::{opcode, types, IoUring};

use super::listen::Stop;
use super::ring::{build_ring, enter_and_reap, push, ud, ud_parts, ACCEPT, CLOSE, RECV, SEND};
use super::stats::ServerStats;

const BUF_SIZE: usize = 16 * 1024;

#[derive(Default)]
struct Conn {
    fd: RawFd,
    gen: u32,
    live: bool,
    buf: AlignedBuf,
    /// Bytes in `buf` from the last recv, and how many of them are sent.
    len: usize,
    sent: usize,
}

pub fn run(listener: OwnedFd, stop: &Stop, size: u64) -> Result<ServerStats> {
    // Declared before the ring so that, on an early return too, the ring (and with it every
    // operation that points into a connection's buffer) is dropped first.
    let mut conns: Vec<Conn> = Vec::new();
    let (mut ring, setup) = build_ring(&[("plain", &|_| {})])?;
    let mut stats = ServerStats::new("uring-basic", setup, size);
    let lfd = listener.as_raw_fd();
    let mut free: Vec<usize> = Vec::new();
    arm_accept(&mut ring, lfd, &mut stats)?;
    let mut cqes = Vec::with_capacity(4096);
    while !stop.now() {
        enter_and_reap(&mut ring, stop, 1, &mut stats, &mut cqes)?;
        for &(data, res, _flags) in &cqes {
            let (kind, slot, gen) = ud_parts(data);
            match kind {
                ACCEPT => {
                    if res >= 0 {
                        stats.accepted += 1;
                        // TCP_NODELAY below, as the other servers do.
                        stats.syscalls += 1;
                        // SAFETY: res is a fresh fd from accept, borrowed for the setsockopt.
                        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(res) };
                        let _ = rustix::net::sockopt::set_tcp_nodelay(fd, true);
                        let slot = free.pop().unwrap_or_else(|| {
                            conns.push(Conn::default());
                            conns.len() - 1
                        });
                        let c = &mut conns[slot];
                        c.gen = c.gen.wrapping_add(1);
                        c.fd = res;
                        c.live = true;
                        c.len = 0;
                        c.sent = 0;
                        if c.buf.is_empty() {
                            c.buf = AlignedBuf::zeroed(BUF_SIZE);
                        }
                        arm_recv(&mut ring, &mut conns[slot], slot, &mut stats)?;
                    }
                    arm_accept(&mut ring, lfd, &mut stats)?;
                }
                RECV | SEND => {
                    let Some(c) = conns
                        .get_mut(slot)
                        .filter(|c| c.live && c.gen & 0xff_ffff == gen)
                    else {
                        continue;
                    };
                    let close = if kind == RECV {
                        if res > 0 {
                            c.len = res as usize;
                            c.sent = 0;
                            arm_send(&mut ring, c, slot, &mut stats)?;
                            false
                        } else {
                            stats.errors += u64::from(res < 0);
                            true // 0: EOF, everything before it was echoed already
                        }
                    } else if res > 0 {
                        stats.bytes += res as u64;
                        c.sent += res as usize;
                        if c.sent < c.len {
                            arm_send(&mut ring, c, slot, &mut stats)?;
                        } else {
                            arm_recv(&mut ring, c, slot, &mut stats)?;
                        }
                        false
                    } else {
                        stats.errors += 1;
                        true
                    };
                    if close {
                        // Nothing of ours is in flight on it: recv and send alternate.
                        c.live = false;
                        free.push(slot);
                        stats.closed += 1;
                        let sqe = opcode::Close::new(types::Fd(c.fd))
                            .build()
                            .user_data(ud(CLOSE, slot, 0));
                        // SAFETY: a close points to no memory of ours.
                        unsafe { push(&mut ring, &sqe, &mut stats) }?;
                    }
                }
                _ => {}
            }
        }
    }
    super::ring::cancel_accept(&mut ring, ud(ACCEPT, 0, 0));
    for c in conns.iter().filter(|c| c.live) {
        // SAFETY: fds of live connections were accepted by us and are closed only here.
        unsafe { libc::close(c.fd) };
    }
    drop(ring);
    drop(listener);
    Ok(stats)
}

fn arm_accept(ring: &mut IoUring, lfd: RawFd, stats: &mut ServerStats) -> Result<()> {
    let sqe = opcode::Accept::new(types::Fd(lfd), std::ptr::null_mut(), std::ptr::null_mut())
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(ud(ACCEPT, 0, 0));
    // SAFETY: the accept passes no address buffer.
    unsafe { push(ring, &sqe, stats) }
}

fn arm_recv(ring: &mut IoUring, c: &mut Conn, slot: usize, stats: &mut ServerStats) -> Result<()> {
    let sqe = opcode::Recv::new(types::Fd(c.fd), c.buf.as_mut_ptr(), c.buf.len() as u32)
        .build()
        .user_data(ud(RECV, slot, c.gen));
    // SAFETY: `c.buf` is allocated once per slot and never freed or resized while the server
    // runs (`conns` may move the Conn, not its heap buffer); the ring is dropped before
    // `conns`, and a slot's recv and send alternate, so no other operation touches it.
    unsafe { push(ring, &sqe, stats) }
}

fn arm_send(ring: &mut IoUring, c: &mut Conn, slot: usize, stats: &mut ServerStats) -> Result<()> {
    let rest = &c.buf[c.sent..c.len];
    let sqe = opcode::Send::new(types::Fd(c.fd), rest.as_ptr(), rest.len() as u32)
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(ud(SEND, slot, c.gen));
    // SAFETY: as for the recv: `c.buf` outlives the ring and is not written until this send
    // completes (the next recv is armed only then).
    unsafe { push(ring, &sqe, stats) }
}
