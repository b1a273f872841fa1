//! The io_uring echo server, using what a modern kernel offers: one multishot accept, one
//! multishot recv per connection filling buffers from a registered provided-buffer ring,
//! sends that resume after a short write, SINGLE_ISSUER + DEFER_TASKRUN (falling back to
//! COOP_TASKRUN, then to a plain ring, where setup says EINVAL), and one io_uring_enter per
//! turn of the loop. SQPOLL only when asked.
//!
//! On top of that, the techniques `--features` can switch off one by one (features.rs):
//! 32 KiB buffers, receive bundles (one completion fills several buffers), incremental
//! buffer consumption (a recv takes only the bytes it needs, so small messages share a
//! buffer), one sendmsg with an iovec of everything a connection holds, direct descriptors
//! for accepted sockets, and SEND_ZC above a threshold (off by default). Each is probed at
//! start and falls back alone where the kernel lacks it; the counts line says which took.
//! For messages of at least the `hot` threshold (8 KiB by default) the server runs its hot
//! path instead (uring_hot.rs): a multishot poll per connection and a few shared buffers
//! that stay in cache, where this ring's FIFO of buffers would not.
//!
//! A received buffer goes back to the ring only after every slice of it is echoed. Each
//! connection has at most one send in flight (sends queue behind it) so echoes keep their
//! order even when one goes async; a connection holding too much has its recv cancelled
//! until its peer reads, so one client that sends without reading cannot starve the others
//! or grow the server.

//! This file is the server loop; ring.rs holds what it shares with the other io_uring code,
//! uring_pool.rs the provided buffers, uring_conn.rs a connection's state.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::Result;
use io_uring::{cqueue, opcode, types, IoUring};

use super::features::Features;
use super::listen::Stop;
use super::ring::{
    arm_accept, build_server_ring, enter_spin_and_reap, on_accept, on_target, push, push_close,
    register_file_table, shut_down, take_slot, ud, ud_parts, Spin, Target, ACCEPT, CANCEL,
    CQ_ENTRIES, RECV, SEND,
};
use super::stats::ServerStats;
use super::uring_conn::{cap_recv, Conn, RecvCap, MAX_HELD_BYTES, MAX_IOV, MIN_ALLOWANCE};
use super::uring_pool::{BufPool, Slice, BGID, BIG_BUF, SMALL_BUF};

/// The uring server's state.
///
/// Field order matters: Rust drops fields in declaration order, and `ring` must go before
/// `pool` and `conns`. The kernel may write into the pool's buffers and read its buffer ring
/// until the ring is torn down, and reads a connection's `iov`/`msg` until its sendmsg
/// completes, so `pool` and `conns` are dropped only after `ring`. `run` also drops them
/// explicitly in that order.
struct Server {
    ring: IoUring,
    pool: BufPool,
    feats: Features,
    conns: Vec<Conn>,
    free: Vec<usize>,
    starved: Vec<usize>,
    listener: RawFd,
    /// Sends queued this turn, and the connection of the last one.
    sends_this_turn: usize,
    last_send: usize,
    /// How recvs are capped: the strongest this kernel has taken so far.
    recv_cap: RecvCap,
}

/// What `run` set up: the features that took and why any asked for did not.
fn setup_features(
    ring: &IoUring,
    pool: &mut BufPool,
    asked: Features,
) -> Result<(Features, Vec<String>)> {
    let mut got = asked;
    let mut off = Vec::new();
    if asked.bundle && !ring.params().is_feature_recvsend_bundle() {
        got.bundle = false;
        off.push(
            "bundle: this kernel has no IORING_RECVSEND_BUNDLE (6.10+); one buffer per recv".into(),
        );
    }
    if let Some(why) = pool.register(ring, asked.inc)? {
        got.inc = false;
        off.push(why);
    }
    if asked.fixed {
        if let Some(why) = register_file_table(ring) {
            got.fixed = false;
            off.push(why);
        }
    }
    if asked.zc.is_some() {
        let mut probe = io_uring::Probe::new();
        let ok = ring.submitter().register_probe(&mut probe).is_ok()
            && probe.is_supported(opcode::SendZc::CODE)
            && probe.is_supported(opcode::SendMsgZc::CODE);
        if !ok {
            got.zc = None;
            off.push("zc: this kernel has no SEND_ZC (6.0+); copying sends".into());
        }
    }
    Ok((got, off))
}

pub fn run(
    listener: OwnedFd,
    stop: &Stop,
    size: u64,
    sqpoll: bool,
    asked: Features,
) -> Result<ServerStats> {
    if asked.hot_for(size) {
        return super::uring_hot::run(listener, stop, size, sqpoll, asked);
    }
    let (mut pool, huge) = BufPool::new(if asked.big { BIG_BUF } else { SMALL_BUF }, asked.huge)?;
    let (ring, setup) = build_server_ring(sqpoll)?;
    let mut stats = ServerStats::new("uring", setup, size);
    // Saves the fd lookup on every enter; an older kernel without it is fine.
    let _ = ring.submitter().register_ring_fd();
    let (mut feats, mut off) = setup_features(&ring, &mut pool, asked)?;
    if asked.huge && !huge {
        feats.huge = false;
        off.push("huge: transparent huge pages are off here (THP never, or madvise refused); 4 KiB pages".into());
    }
    // Not at this message size: the hot path is the other server.
    feats.hot = None;
    if feats.spin && (sqpoll || setup == "plain") {
        // With SQPOLL the server already polls (its kernel thread); a plain ring has no
        // flag that says work arrived, so there is nothing to watch.
        feats.spin = false;
        off.push(format!("spin: not on a {setup} ring (no IORING_SQ_TASKRUN to watch, or a kernel thread already polling)"));
    }
    stats.features = feats.on_list();
    stats.features_off = off;
    // Accepted sockets inherit TCP_NODELAY from the listener (set before listen, in
    // listen::listen): no setsockopt per connection, which a direct descriptor could not take.
    let mut s = Server {
        ring,
        pool,
        feats,
        conns: Vec::new(),
        free: Vec::new(),
        starved: Vec::new(),
        listener: listener.as_raw_fd(),
        sends_this_turn: 0,
        last_send: 0,
        recv_cap: RecvCap::Total,
    };
    arm_accept(&mut s.ring, s.listener, s.feats.fixed, &mut stats)?;
    let mut cqes = Vec::with_capacity(CQ_ENTRIES as usize);
    let mut spin = s.feats.spin.then(Spin::default);
    while !stop.now() {
        s.pool.top_up();
        s.pool.publish();
        if !s.starved.is_empty() && s.pool.avail() > 0 {
            s.rearm_starved(&mut stats)?;
        }
        let want = s.want();
        s.sends_this_turn = 0;
        enter_spin_and_reap(
            &mut s.ring,
            stop,
            want,
            spin.as_mut(),
            &mut stats,
            &mut cqes,
        )?;
        for &(data, res, flags) in &cqes {
            s.complete(data, res, flags, &mut stats)?;
        }
    }
    match s.recv_cap {
        RecvCap::Total => {}
        RecvCap::PerCompletion => stats.features_off.push(
            "recv cap: this kernel refused a multishot recv's total byte limit (6.17+); each completion capped instead".into(),
        ),
        RecvCap::None => stats.features_off.push(
            "recv cap: this kernel refused byte limits on multishot recvs; a peer that sends without reading can hold more than its bound until the cancel lands".into(),
        ),
    }
    shut_down(
        &mut s.ring,
        s.conns.iter().filter(|c| c.live).map(|c| c.target),
        s.feats.fixed,
    );
    let Server {
        ring, pool, conns, ..
    } = s;
    // The ring first: after it, nothing of the kernel's refers to the buffers or iovecs.
    drop(ring);
    drop(pool);
    drop(conns);
    drop(listener);
    Ok(stats)
}

impl Server {
    /// Completions to wait for. A lone send with nothing queued behind it completes inline
    /// (DEFER_TASKRUN posts it during the enter), so waiting for it alone would cost a second
    /// enter per request at one connection: wait for it and the next event together. Any
    /// other case waits for one, so no queued work is held back.
    ///
    /// A send that comes back short needs us before anything else can happen (the peer waits
    /// for the rest), so the second completion may never come: where the kernel has
    /// min-timeout the wait settles for one after MIN_WAIT_USEC; where it does not, only a
    /// send small enough that it practically never comes back short is waited on with its
    /// successor (at 64 KiB messages, waiting unconditionally stalled every turn for the
    /// whole 50 ms stop tick).
    fn want(&self) -> usize {
        let small_enough = |c: &Conn| {
            self.ring.params().is_feature_min_timeout()
                || c.queue.front().is_some_and(|s| s.end - s.start <= 4096)
        };
        let lone = self.sends_this_turn == 1
            && self
                .conns
                .get(self.last_send)
                .is_some_and(|c| c.live && !c.zc && c.queue.len() == 1 && small_enough(c));
        if lone {
            2
        } else {
            1
        }
    }

    fn arm_recv(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let bundle = self.feats.bundle;
        let cap = self.recv_cap;
        let c = &mut self.conns[slot];
        c.recv_armed = true;
        c.starved = false;
        c.paused = false;
        c.cap = cap;
        let sqe = if bundle {
            on_target!(c.target, f => opcode::RecvMultiBundle::new(f, BGID).build())
        } else {
            on_target!(c.target, f => opcode::RecvMulti::new(f, BGID).build())
        };
        // What this connection may still take before it holds its bound.
        let allowance = MAX_HELD_BYTES.saturating_sub(c.held).max(MIN_ALLOWANCE) as u32;
        let sqe = cap_recv(sqe, cap, allowance);
        // SAFETY: the recv writes only into provided buffers, which `self.pool` owns; the
        // pool outlives the ring (see `Server`'s field order), so they outlive every recv.
        unsafe { push(&mut self.ring, &sqe.user_data(ud(RECV, slot, c.gen)), stats) }
    }

    fn cancel_recv(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let cancel = opcode::AsyncCancel::new(ud(RECV, slot, self.conns[slot].gen))
            .build()
            .user_data(ud(CANCEL, slot, 0));
        // SAFETY: an AsyncCancel points to no memory of ours.
        unsafe { push(&mut self.ring, &cancel, stats) }
    }

    /// Send what the connection holds: one send for one slice, one sendmsg for several.
    fn send_queued(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let feats = self.feats;
        let pool = &self.pool;
        let c = &mut self.conns[slot];
        if c.queue.is_empty() {
            c.sending = false;
            return Ok(());
        }
        c.sending = true;
        self.sends_this_turn += 1;
        self.last_send = slot;
        let n = if feats.sendmsg {
            c.queue.len().min(MAX_IOV)
        } else {
            1
        };
        let ptr_of = |s: &Slice| {
            // SAFETY: start < end <= the buffer size, so the offset stays inside buffer `bid`
            // of the pool's one allocation.
            unsafe { pool.addr(s.bid).add(s.start as usize) }
        };
        let bytes: usize = c
            .queue
            .iter()
            .take(n)
            .map(|s| (s.end - s.start) as usize)
            .sum();
        let zc = feats.zc.is_some_and(|z| bytes >= z);
        c.asked = bytes;
        c.zc = zc;
        c.zc_res = None;
        let sqe = if n == 1 {
            let s = &c.queue[0];
            let (ptr, len) = (ptr_of(s), s.end - s.start);
            if zc {
                on_target!(c.target, f => opcode::SendZc::new(f, ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build())
            } else {
                on_target!(c.target, f => opcode::Send::new(f, ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build())
            }
        } else {
            c.iov.clear();
            for s in c.queue.iter().take(n) {
                c.iov.push(libc::iovec {
                    iov_base: ptr_of(s) as *mut libc::c_void,
                    iov_len: (s.end - s.start) as usize,
                });
            }
            c.msg.msg_iov = c.iov.as_mut_ptr();
            c.msg.msg_iovlen = n as _;
            let msg: *const libc::msghdr = &*c.msg;
            if zc {
                on_target!(c.target, f => opcode::SendMsgZc::new(f, msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build())
            } else {
                on_target!(c.target, f => opcode::SendMsg::new(f, msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build())
            }
        };
        let gen = c.gen;
        // SAFETY: the send reads slices of pool buffers that stay pinned (`pinned`, released
        // only in on_send or at close, both after this send's completion: a connection has
        // one send in flight and closes only when none is) and, for sendmsg, `c.iov` and
        // `c.msg`, heap blocks that move neither when `conns` grows nor before the completion
        // (the next send_queued on this slot rewrites them). The pool outlives the ring.
        unsafe { push(&mut self.ring, &sqe.user_data(ud(SEND, slot, gen)), stats) }
    }

    fn rearm_starved(&mut self, stats: &mut ServerStats) -> Result<()> {
        let starved = std::mem::take(&mut self.starved);
        for slot in starved {
            let c = &self.conns[slot];
            if c.live && c.starved && !c.recv_armed && !c.eof && !c.failed {
                self.arm_recv(slot, stats)?;
            }
        }
        Ok(())
    }

    fn complete(&mut self, data: u64, res: i32, flags: u32, stats: &mut ServerStats) -> Result<()> {
        let (kind, slot, gen) = ud_parts(data);
        match kind {
            ACCEPT => self.on_accept(res, flags, stats),
            RECV | SEND => {
                let current = self
                    .conns
                    .get(slot)
                    .is_some_and(|c| c.live && c.gen & 0xff_ffff == gen);
                if !current {
                    // Not ours any more, but the kernel used the buffers all the same.
                    if kind == RECV {
                        if let Some(bid) = cqueue::buffer_select(flags) {
                            self.drop_received(bid, res)?;
                        }
                    }
                    return Ok(());
                }
                if kind == RECV {
                    self.on_recv(slot, res, flags, stats)?;
                } else {
                    let c = &mut self.conns[slot];
                    if c.zc {
                        if cqueue::more(flags) && !cqueue::notif(flags) {
                            // The result: the bytes are sent (and counted now), but the
                            // buffers are the kernel's until the notification.
                            c.zc_res = Some(res);
                            stats.bytes += res.max(0) as u64;
                            return Ok(());
                        }
                        let (r, counted) = if cqueue::notif(flags) {
                            (c.zc_res.take().unwrap_or(-libc::EIO), true)
                        } else {
                            (res, false)
                        };
                        c.zc = false;
                        self.on_send(slot, r, counted, stats)?;
                    } else {
                        self.on_send(slot, res, false, stats)?;
                    }
                }
                self.maybe_close(slot, stats)
            }
            _ => Ok(()), // CANCEL, CLOSE: their effect shows on the operation they end
        }
    }

    /// Account for a recv whose data nobody will echo.
    fn drop_received(&mut self, bid: u16, res: i32) -> Result<()> {
        if res > 0 {
            let mut tmp = VecDeque::new();
            self.pool.take(bid, res as usize, &mut tmp)?;
            for s in tmp {
                self.pool.release(s.bid);
            }
        } else {
            self.pool.take_empty(bid);
        }
        Ok(())
    }

    fn on_accept(&mut self, res: i32, flags: u32, stats: &mut ServerStats) -> Result<()> {
        let Some(target) = on_accept(
            &mut self.ring,
            self.listener,
            self.feats.fixed,
            res,
            flags,
            stats,
        )?
        else {
            return Ok(());
        };
        let slot = take_slot(&mut self.free, &mut self.conns, Conn::new);
        self.conns[slot].open(target);
        self.arm_recv(slot, stats)
    }

    fn on_recv(
        &mut self,
        slot: usize,
        res: i32,
        flags: u32,
        stats: &mut ServerStats,
    ) -> Result<()> {
        let more = cqueue::more(flags);
        if !more {
            self.conns[slot].recv_armed = false;
        }
        if res > 0 {
            let Some(bid) = cqueue::buffer_select(flags) else {
                self.conns[slot].failed = true;
                return Ok(());
            };
            let c = &mut self.conns[slot];
            if c.failed {
                return self.drop_received(bid, res);
            }
            self.pool.take(bid, res as usize, &mut c.queue)?;
            c.held += res as usize;
            stats.ring.received(c.received, res as u64, stats.size);
            c.received += res as u64;
            let (sending, paused, over) = (c.sending, c.paused, c.over_cap());
            if !sending {
                self.send_queued(slot, stats)?;
            }
            if over && more && !paused {
                self.conns[slot].paused = true;
                self.cancel_recv(slot, stats)?;
            }
            if !more && !self.conns[slot].paused {
                if over {
                    self.conns[slot].paused = true;
                } else {
                    stats.ring.rearms += 1;
                    self.arm_recv(slot, stats)?;
                }
            }
            return Ok(());
        }
        if let Some(bid) = cqueue::buffer_select(flags) {
            self.pool.take_empty(bid);
        }
        let c = &mut self.conns[slot];
        match -res {
            0 => c.eof = true,
            libc::ENOBUFS => {
                stats.enobufs += 1;
                self.pool.grow();
                if !more {
                    c.starved = true;
                    self.starved.push(slot);
                    stats.ring.rearms += 1;
                }
            }
            libc::EINVAL if c.cap != RecvCap::None => {
                // This kernel refuses the cap: step down once (every connection armed with
                // it says the same) and arm again.
                if c.cap == self.recv_cap {
                    self.recv_cap = self.recv_cap.weaker();
                }
                if !more && !c.eof && !c.failed {
                    stats.ring.rearms += 1;
                    self.arm_recv(slot, stats)?;
                }
            }
            libc::ECANCELED => {
                c.paused = true;
                // Sends may have drained the connection while the cancel was on its way:
                // then no later send completion would re-arm it.
                if !c.recv_armed && c.under_half() && !c.eof && !c.failed {
                    self.arm_recv(slot, stats)?;
                }
            }
            _ => {
                c.failed = true;
                stats.errors += 1;
            }
        }
        Ok(())
    }

    /// A send ended having sent `res` bytes (`counted`: already in stats.bytes).
    fn on_send(
        &mut self,
        slot: usize,
        res: i32,
        counted: bool,
        stats: &mut ServerStats,
    ) -> Result<()> {
        self.conns[slot].sending = false;
        stats.ring.sends += 1;
        if res > 0 && (res as usize) < self.conns[slot].asked {
            stats.short_sends += 1;
        }
        if res <= 0 {
            let c = &mut self.conns[slot];
            if !c.failed {
                c.failed = true;
                stats.errors += 1;
            }
            return Ok(());
        }
        if !counted {
            stats.bytes += res as u64;
        }
        let c = &mut self.conns[slot];
        let mut left = res as usize;
        c.held = c.held.saturating_sub(left);
        while left > 0 {
            let Some(front) = c.queue.front_mut() else {
                break;
            };
            let len = (front.end - front.start) as usize;
            if left >= len {
                left -= len;
                let bid = front.bid;
                c.queue.pop_front();
                self.pool.release(bid);
            } else {
                front.start += left as u32;
                left = 0;
            }
        }
        let c = &self.conns[slot];
        if c.failed {
            return Ok(());
        }
        if !c.queue.is_empty() {
            self.send_queued(slot, stats)?;
        }
        let c = &self.conns[slot];
        if c.paused && !c.recv_armed && c.under_half() && !c.eof {
            self.arm_recv(slot, stats)?;
        }
        Ok(())
    }

    /// Close once the peer is done (EOF, everything echoed) or the connection failed, and no
    /// operation of ours still refers to it. A failed connection with a live recv has that
    /// recv cancelled first.
    fn maybe_close(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        let finished = (c.eof && c.queue.is_empty()) || c.failed;
        if !finished || c.sending {
            return Ok(());
        }
        if c.recv_armed {
            if c.failed && !c.paused {
                // Reuse `paused` as "a cancel is on its way" so it is sent once.
                c.paused = true;
                self.cancel_recv(slot, stats)?;
            }
            let c = &mut self.conns[slot];
            if c.eof && !c.failed {
                // EOF ends the multishot recv; it is not armed any more.
                c.recv_armed = false;
            } else {
                return Ok(());
            }
        }
        let c = &mut self.conns[slot];
        let target = c.target;
        c.live = false;
        c.held = 0;
        while let Some(s) = c.queue.pop_front() {
            self.pool.release(s.bid);
        }
        self.free.push(slot);
        push_close(&mut self.ring, target, slot, stats)
    }
}
