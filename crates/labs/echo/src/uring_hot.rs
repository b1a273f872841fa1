//! The uring server's hot path, for large messages (`hot`, from 8 KiB by default): the same
//! modern ring (SINGLE_ISSUER + DEFER_TASKRUN, direct descriptors, one enter per turn), but
//! no provided-buffer ring. Each connection has one multishot poll; a connection that polls
//! readable gets one of a few shared 128 KiB buffers, a recv into it (MSG_DONTWAIT: it only
//! copies what is there, it never waits holding the buffer) and a send from it (MSG_DONTWAIT
//! too), after which the buffer is free for the next connection.
//!
//! Why: the provided-buffer ring is FIFO, so the kernel writes each message into the buffer
//! that has waited longest, and a busy ring cycles through megabytes, far more than the
//! cache holds. Measured with `echo --attribute` at 64 KiB, the recv copy into those cold
//! buffers cost the ring path 10-14 us a request against epoll's 3.5-4.5 us into its one
//! buffer. Here the kernel copies into the same eight buffers over and over.
//!
//! Bounded as the ring path is: a send that comes back short (a peer slow to read) has its
//! rest copied out into the connection's own overflow, at most one buffer's worth, and the
//! connection is not read again until that is sent. A client that never reads costs the
//! server at most 128 KiB and no hot buffer.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use io_uring::{cqueue, opcode, types, IoUring};

use super::features::Features;
use super::listen::Stop;
use super::ring::{
    arm_accept, build_server_ring, enter_spin_and_reap, on_accept, on_target, push, push_close,
    register_file_table, shut_down, take_slot, ud, ud_parts, Spin, Target, ACCEPT, CANCEL, POLL,
    RECV, SEND,
};
use super::stats::ServerStats;
use costlab_core::measure::aligned::AlignedBuf;

/// The shared buffers: few enough that what is written into them stays in cache (eight
/// 64 KiB messages fill 512 KiB, an L2), enough that a turn serving many readable
/// connections seldom waits for one. 128 KiB each, twice the largest message the sweep
/// sends, so a 64 KiB recv does not fill its buffer: a full buffer means the socket may
/// hold more, and costs a second recv that usually finds nothing (measured: 4.1 completions
/// a request with 64 KiB buffers, 3.2 with 128 KiB).
const HOT_BUFS: usize = 8;
const HOT_BUF: usize = 128 * 1024;

struct Conn {
    target: Target,
    gen: u32,
    live: bool,
    poll_armed: bool,
    /// A cancel of the poll is on its way (the connection is closing).
    cancelling: bool,
    /// Data may be waiting: the poll fired since the last recv began, or that recv filled
    /// its buffer (the socket may hold more, and no new wakeup would say so).
    ready: bool,
    /// The poll saw the peer's FIN (POLLRDHUP): read until recv says EOF, since no wakeup
    /// will come for it once the data before it is taken.
    rdhup: bool,
    /// In the queue for a hot buffer.
    waiting: bool,
    recv: bool,
    sending: bool,
    /// The hot buffer the recv or send in flight uses, and the bytes received into it.
    buf: Option<usize>,
    len: usize,
    /// What a short send left, copied out of the hot buffer; the next recv waits until it is
    /// sent. At most HOT_BUF bytes.
    out: Vec<u8>,
    out_at: usize,
    eof: bool,
    failed: bool,
    /// Bytes received so far: where a recv ends inside a message.
    received: u64,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            target: Target::Fd(-1),
            gen: 0,
            live: false,
            poll_armed: false,
            cancelling: false,
            ready: false,
            rdhup: false,
            waiting: false,
            recv: false,
            sending: false,
            buf: None,
            len: 0,
            out: Vec::new(),
            out_at: 0,
            eof: false,
            failed: false,
            received: 0,
        }
    }

    fn open(&mut self, target: Target) {
        let out = std::mem::take(&mut self.out);
        *self = Conn {
            target,
            gen: self.gen.wrapping_add(1),
            live: true,
            out,
            ..Conn::new()
        };
        self.out.clear();
    }

    /// Ready for a recv: data may be waiting and nothing of this connection is in flight or
    /// left to send.
    fn can_recv(&self) -> bool {
        self.live
            && self.ready
            && !self.recv
            && !self.sending
            && self.out.is_empty()
            && !self.eof
            && !self.failed
            && !self.cancelling
    }
}

/// The hot path's state. Field order matters as in the ring path's `Server`: `ring` is
/// dropped first, so no operation still points into `bufs` or a connection's `out`.
struct Server {
    ring: IoUring,
    bufs: AlignedBuf,
    free_bufs: Vec<usize>,
    /// Readable connections waiting for a hot buffer, with their generation.
    waitq: VecDeque<(usize, u32)>,
    conns: Vec<Conn>,
    free: Vec<usize>,
    fixed: bool,
    listener: RawFd,
}

pub fn run(
    listener: OwnedFd,
    stop: &Stop,
    size: u64,
    sqpoll: bool,
    asked: Features,
) -> Result<ServerStats> {
    let (ring, setup) = build_server_ring(sqpoll)?;
    let mut stats = ServerStats::new("uring", setup, size);
    let _ = ring.submitter().register_ring_fd();
    // The ring path's buffer techniques have nothing to act on here.
    let mut feats = Features {
        fixed: asked.fixed,
        hot: asked.hot,
        spin: asked.spin,
        ..Features::none()
    };
    let mut off = Vec::new();
    if asked.fixed {
        if let Some(why) = register_file_table(&ring) {
            feats.fixed = false;
            off.push(why);
        }
    }
    if asked.zc.is_some() {
        off.push(
            "zc: not on the hot path, whose sends copy from a buffer they free at once".into(),
        );
    }
    if feats.spin && (sqpoll || setup == "plain") {
        // With SQPOLL the server already polls (its kernel thread); a plain ring has no
        // flag that says work arrived, so there is nothing to watch.
        feats.spin = false;
        off.push(format!("spin: not on a {setup} ring (no IORING_SQ_TASKRUN to watch, or a kernel thread already polling)"));
    }
    stats.features = feats.on_list();
    stats.features_off = off;
    let mut s = Server {
        ring,
        // Page-aligned, as every engine's buffers; touched once here so the first requests
        // do not fault them in.
        bufs: AlignedBuf::zeroed(HOT_BUFS * HOT_BUF),
        free_bufs: (0..HOT_BUFS).rev().collect(),
        waitq: VecDeque::new(),
        conns: Vec::new(),
        free: Vec::new(),
        fixed: feats.fixed,
        listener: listener.as_raw_fd(),
    };
    s.bufs.fill(0);
    arm_accept(&mut s.ring, s.listener, s.fixed, &mut stats)?;
    let mut cqes = Vec::with_capacity(4096);
    let mut spin = feats.spin.then(Spin::default);
    while !stop.now() {
        enter_spin_and_reap(&mut s.ring, stop, 1, spin.as_mut(), &mut stats, &mut cqes)?;
        for &(data, res, flags) in &cqes {
            s.complete(data, res, flags, &mut stats)?;
        }
    }
    shut_down(
        &mut s.ring,
        s.conns.iter().filter(|c| c.live).map(|c| c.target),
        s.fixed,
    );
    let Server {
        ring, bufs, conns, ..
    } = s;
    // The ring first: after it, nothing of the kernel's refers to the buffers.
    drop(ring);
    drop(bufs);
    drop(conns);
    drop(listener);
    Ok(stats)
}

impl Server {
    fn buf_ptr(&mut self, b: usize) -> *mut u8 {
        self.bufs[b * HOT_BUF..].as_mut_ptr()
    }

    fn arm_poll(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        c.poll_armed = true;
        let mask = (libc::POLLIN | libc::POLLRDHUP) as u32;
        let sqe = on_target!(c.target, f => opcode::PollAdd::new(f, mask).multi(true).build());
        // SAFETY: a poll points to no memory of ours.
        unsafe { push(&mut self.ring, &sqe.user_data(ud(POLL, slot, c.gen)), stats) }
    }

    fn complete(&mut self, data: u64, res: i32, flags: u32, stats: &mut ServerStats) -> Result<()> {
        let (kind, slot, gen) = ud_parts(data);
        match kind {
            ACCEPT => return self.on_accept(res, flags, stats),
            POLL | RECV | SEND => {}
            _ => return Ok(()), // CANCEL, CLOSE: their effect shows on the operation they end
        }
        // A connection closes only once nothing of it is in flight, so every completion
        // names a live one; anything else is a bug to report, not to paper over.
        let current = self
            .conns
            .get(slot)
            .is_some_and(|c| c.live && c.gen & 0xff_ffff == gen);
        if !current {
            anyhow::bail!(
                "hot path: a completion (kind {kind}) for connection {slot}, which is closed"
            );
        }
        match kind {
            POLL => self.on_poll(slot, res, flags, stats)?,
            RECV => self.on_recv(slot, res, stats)?,
            _ => self.on_send(slot, res, stats)?,
        }
        self.maybe_close(slot, stats)
    }

    fn on_accept(&mut self, res: i32, flags: u32, stats: &mut ServerStats) -> Result<()> {
        let Some(target) = on_accept(&mut self.ring, self.listener, self.fixed, res, flags, stats)?
        else {
            return Ok(());
        };
        let slot = take_slot(&mut self.free, &mut self.conns, Conn::new);
        self.conns[slot].open(target);
        self.arm_poll(slot, stats)
    }

    fn on_poll(
        &mut self,
        slot: usize,
        res: i32,
        flags: u32,
        stats: &mut ServerStats,
    ) -> Result<()> {
        let more = cqueue::more(flags);
        stats.ring.polls += 1;
        let c = &mut self.conns[slot];
        if !more {
            c.poll_armed = false;
        }
        if res < 0 {
            if res != -libc::ECANCELED && !c.failed {
                c.failed = true;
                stats.errors += 1;
            }
            return Ok(());
        }
        c.ready = true;
        if res as u32 & (libc::POLLRDHUP | libc::POLLHUP) as u32 != 0 {
            c.rdhup = true;
        }
        if !more && !c.cancelling && !c.eof && !c.failed {
            // The multishot poll ended on its own (the completion queue overflowed, say).
            stats.ring.rearms += 1;
            self.arm_poll(slot, stats)?;
        }
        self.serve(slot, stats)
    }

    /// A connection that may have data gets a hot buffer and a recv, or waits for a buffer.
    fn serve(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &self.conns[slot];
        if !c.can_recv() || c.waiting {
            return Ok(());
        }
        match self.free_bufs.pop() {
            Some(b) => self.start_recv(slot, b, stats),
            None => {
                let c = &mut self.conns[slot];
                c.waiting = true;
                self.waitq.push_back((slot, c.gen));
                stats.hot_waits += 1;
                Ok(())
            }
        }
    }

    fn start_recv(&mut self, slot: usize, b: usize, stats: &mut ServerStats) -> Result<()> {
        let ptr = self.buf_ptr(b);
        let c = &mut self.conns[slot];
        c.buf = Some(b);
        c.recv = true;
        c.ready = false;
        let sqe = on_target!(c.target, f => opcode::Recv::new(f, ptr, HOT_BUF as u32)
            .flags(libc::MSG_DONTWAIT)
            .build());
        // SAFETY: the recv writes into hot buffer `b`, which this connection holds until the
        // recv and the send after it complete; `bufs` outlives the ring (field order, `run`).
        unsafe { push(&mut self.ring, &sqe.user_data(ud(RECV, slot, c.gen)), stats) }
    }

    fn on_recv(&mut self, slot: usize, res: i32, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        c.recv = false;
        let b = c
            .buf
            .context("hot path: a recv completed without its buffer")?;
        if res > 0 {
            let len = res as usize;
            stats.ring.received(c.received, len as u64, stats.size);
            c.received += len as u64;
            if len == HOT_BUF || c.rdhup {
                c.ready = true;
            }
            c.len = len;
            return self.send_hot(slot, b, stats);
        }
        c.buf = None;
        match -res {
            0 => c.eof = true,
            // The data the poll announced was taken by the recv before this one.
            libc::EAGAIN => stats.ring.empty_recvs += 1,
            _ => {
                c.failed = true;
                stats.errors += 1;
            }
        }
        self.release(b, stats)?;
        self.serve(slot, stats)
    }

    fn send_hot(&mut self, slot: usize, b: usize, stats: &mut ServerStats) -> Result<()> {
        let ptr = self.buf_ptr(b);
        let c = &mut self.conns[slot];
        c.sending = true;
        let sqe = on_target!(c.target, f => opcode::Send::new(f, ptr, c.len as u32)
            .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            .build());
        // SAFETY: the send reads hot buffer `b`, which this connection holds until the send
        // completes; `bufs` outlives the ring.
        unsafe { push(&mut self.ring, &sqe.user_data(ud(SEND, slot, c.gen)), stats) }
    }

    /// Send the rest a short send left; without MSG_DONTWAIT, so the ring waits for room.
    fn send_out(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        c.sending = true;
        let rest = &c.out[c.out_at..];
        let (ptr, len) = (rest.as_ptr(), rest.len() as u32);
        let sqe = on_target!(c.target, f => opcode::Send::new(f, ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build());
        // SAFETY: `out` is neither written nor reallocated while its send is in flight (the
        // connection takes no recv until it is empty, and `open` runs only on a closed slot,
        // which has nothing in flight); a closed slot's Vec lives in `conns`, dropped after
        // the ring.
        unsafe { push(&mut self.ring, &sqe.user_data(ud(SEND, slot, c.gen)), stats) }
    }

    fn on_send(&mut self, slot: usize, res: i32, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        c.sending = false;
        stats.ring.sends += 1;
        let Some(b) = c.buf else {
            // From the overflow.
            if res <= 0 {
                c.failed = true;
                stats.errors += 1;
                return Ok(());
            }
            stats.bytes += res as u64;
            c.out_at += res as usize;
            if c.out_at < c.out.len() {
                return self.send_out(slot, stats);
            }
            c.out.clear();
            c.out_at = 0;
            return self.serve(slot, stats);
        };
        c.buf = None;
        if res < 0 && res != -libc::EAGAIN {
            c.failed = true;
            stats.errors += 1;
            return self.release(b, stats);
        }
        let sent = res.max(0) as usize;
        stats.bytes += sent as u64;
        if sent < c.len {
            // The peer's socket is full: keep the rest, free the buffer.
            stats.short_sends += 1;
            let from = b * HOT_BUF;
            c.out.clear();
            c.out
                .extend_from_slice(&self.bufs[from + sent..from + c.len]);
            c.out_at = 0;
            self.release(b, stats)?;
            return self.send_out(slot, stats);
        }
        // Echoed: the buffer goes to the longest waiter, or straight back to this
        // connection's next recv.
        if self.waitq.is_empty() && self.conns[slot].can_recv() {
            return self.start_recv(slot, b, stats);
        }
        self.release(b, stats)?;
        self.serve(slot, stats)
    }

    /// A hot buffer is free: the first live waiter gets it, else the free list.
    fn release(&mut self, b: usize, stats: &mut ServerStats) -> Result<()> {
        while let Some((slot, gen)) = self.waitq.pop_front() {
            let c = &mut self.conns[slot];
            if c.gen != gen || !c.waiting {
                continue;
            }
            c.waiting = false;
            if c.can_recv() {
                return self.start_recv(slot, b, stats);
            }
        }
        self.free_bufs.push(b);
        Ok(())
    }

    /// Close once the peer is done (EOF, everything echoed) or the connection failed, and
    /// nothing of it is in flight; its poll is cancelled first.
    fn maybe_close(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        let finished = (c.eof && c.out.is_empty()) || c.failed;
        if !finished || c.recv || c.sending {
            return Ok(());
        }
        if c.poll_armed {
            if !c.cancelling {
                c.cancelling = true;
                let cancel = opcode::AsyncCancel::new(ud(POLL, slot, c.gen))
                    .build()
                    .user_data(ud(CANCEL, slot, 0));
                // SAFETY: an AsyncCancel points to no memory of ours.
                unsafe { push(&mut self.ring, &cancel, stats) }?;
            }
            return Ok(());
        }
        let target = c.target;
        c.live = false;
        c.waiting = false;
        c.out.clear();
        self.free.push(slot);
        push_close(&mut self.ring, target, slot, stats)
    }
}
