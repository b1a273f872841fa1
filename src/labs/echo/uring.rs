//! The io_uring echo server, using what a modern kernel offers: one multishot accept, one
//! multishot recv per connection filling buffers from a registered provided-buffer ring,
//! sends that resume after a short write, SINGLE_ISSUER + DEFER_TASKRUN (falling back to
//! COOP_TASKRUN, then to a plain ring, where setup says EINVAL), and one io_uring_enter per
//! turn of the loop. SQPOLL only when asked.
//!
//! A received buffer goes back to the ring only after its send completes. Each connection
//! has at most one send in flight (sends queue behind it) so echoes keep their order even
//! when one goes async; a connection holding too many buffers has its recv cancelled until
//! its peer reads, so one client that sends without reading cannot starve the others.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::server::Stop;
use super::stats::ServerStats;
use crate::error::usage;

const SQ_ENTRIES: u32 = 4096;
const CQ_ENTRIES: u32 = 16384;
// The kernel takes buffers from the ring in FIFO order, so every buffer is cycled through:
// a small pool (2 MiB) keeps them in cache; ENOBUFS covers the rare moment it runs dry.
const BUF_COUNT: u16 = 1024;
const BUF_SIZE: usize = 2048;
const BGID: u16 = 7;
/// A connection holding this many buffers (sent to a peer that does not read) stops
/// receiving until it is down to half.
const MAX_HELD: usize = 32;

// user_data: kind in the top byte, a 24-bit generation, the 32-bit slot.
pub(super) const ACCEPT: u8 = 1;
pub(super) const RECV: u8 = 2;
pub(super) const SEND: u8 = 3;
pub(super) const CANCEL: u8 = 4;
pub(super) const CLOSE: u8 = 5;

pub(super) fn ud(kind: u8, slot: usize, gen: u32) -> u64 {
    (u64::from(kind) << 56) | (u64::from(gen & 0xff_ffff) << 32) | slot as u64
}

pub(super) fn ud_parts(ud: u64) -> (u8, usize, u32) {
    (
        (ud >> 56) as u8,
        (ud & 0xffff_ffff) as usize,
        ((ud >> 32) & 0xff_ffff) as u32,
    )
}

/// Build a ring, trying each setup in turn while the kernel answers EINVAL (flag unknown).
/// Returns the ring and the name of the setup that took.
pub(super) type Setup<'a> = (&'static str, &'a dyn Fn(&mut io_uring::Builder));

pub(super) fn build_ring(attempts: &[Setup]) -> Result<(IoUring, &'static str)> {
    let mut last = None;
    for (name, configure) in attempts {
        let mut b = IoUring::builder();
        configure(&mut b);
        b.setup_cqsize(CQ_ENTRIES);
        match b.build(SQ_ENTRIES) {
            Ok(ring) => return Ok((ring, name)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(unavailable(e)),
        }
    }
    Err(unavailable(last.unwrap_or_else(|| {
        std::io::Error::from_raw_os_error(libc::EINVAL)
    })))
}

fn unavailable(e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOSYS) => usage(format!(
            "io_uring is not available here ({e}); it may be disabled by sysctl kernel.io_uring_disabled or a seccomp profile; use --engine epoll"
        )),
        _ => anyhow::Error::new(e).context("setting up io_uring"),
    }
}

/// Push an SQE; when the submission queue is full, submit what is there first (an extra
/// enter, counted).
pub(super) fn push(ring: &mut IoUring, sqe: &squeue::Entry, stats: &mut ServerStats) -> Result<()> {
    let extra = push_sqe(ring, sqe)?;
    stats.enters += extra;
    stats.syscalls += extra;
    Ok(())
}

/// Push an SQE, submitting first while the submission queue is full. Returns how many
/// enters that took (0 almost always). Shared by the servers and the io_uring loader.
pub(super) fn push_sqe(ring: &mut IoUring, sqe: &squeue::Entry) -> Result<u64> {
    let mut extra = 0;
    loop {
        // SAFETY: every buffer an SQE points to lives until its completion is reaped: the
        // servers own theirs for the whole run and free a connection's only after its last
        // operation completed; the loader keeps its connections' buffers until every
        // operation is reaped (or leaks them).
        if unsafe { ring.submission().push(sqe) }.is_ok() {
            return Ok(extra);
        }
        extra += 1;
        match ring.submit() {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EINTR)) => {}
            Err(e) => return Err(e).context("io_uring_enter (submit)"),
        }
    }
}

/// One io_uring_enter: submit everything queued and wait for `want` completions, no longer
/// than `timeout`. A timeout, a signal or a full completion queue is not an error.
pub(super) fn submit_and_wait(ring: &mut IoUring, want: usize, timeout: Duration) -> Result<()> {
    let ts = types::Timespec::from(timeout);
    let args = types::SubmitArgs::new().timespec(&ts);
    match ring.submitter().submit_with_args(want, &args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e).context("io_uring_enter"),
    }
}

/// One turn's single enter: submit everything queued and wait for at least one completion,
/// no longer than the stop tick. Then copy the completions out.
pub(super) fn enter_and_reap(
    ring: &mut IoUring,
    stop: &Stop,
    want: usize,
    stats: &mut ServerStats,
    out: &mut Vec<(u64, i32, u32)>,
) -> Result<()> {
    stats.enters += 1;
    stats.syscalls += 1;
    submit_and_wait(ring, want, stop.tick())?;
    out.clear();
    out.extend(
        ring.completion()
            .map(|c| (c.user_data(), c.result(), c.flags())),
    );
    stats.completions += out.len() as u64;
    Ok(())
}

/// The ring setups the uring server and the io_uring loader try, best first:
/// SINGLE_ISSUER + DEFER_TASKRUN (completions run in our own enter, no IPI), else
/// COOP_TASKRUN, else a plain ring.
pub(super) fn build_modern_ring() -> Result<(IoUring, &'static str)> {
    build_ring(&[
        ("single_issuer+defer_taskrun", &|b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
        ("coop_taskrun", &|b| {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }),
        ("plain", &|_| {}),
    ])
}

/// The provided-buffer ring: BUF_COUNT buffers of BUF_SIZE bytes the kernel picks from for
/// each multishot recv.
struct BufRing {
    entries: *mut types::BufRingEntry,
    map_len: usize,
    bufs: Vec<u8>,
    tail: u16,
}

impl BufRing {
    fn new() -> Result<BufRing> {
        let map_len = BUF_COUNT as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it. The kernel
        // requires the ring to be page aligned, which mmap guarantees.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                map_len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .context("mapping the provided-buffer ring")?;
        let mut ring = BufRing {
            entries: ptr.cast(),
            map_len,
            bufs: vec![0u8; BUF_COUNT as usize * BUF_SIZE],
            tail: 0,
        };
        for bid in 0..BUF_COUNT {
            ring.give(bid);
        }
        ring.publish();
        Ok(ring)
    }

    fn register(&self, ring: &IoUring) -> Result<()> {
        // SAFETY: the entries mapping lives until BufRing is dropped, which happens after the
        // IoUring (declared later, dropped first) has gone and with it the registration.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.entries as u64,
                BUF_COUNT,
                BGID,
                0,
            )
        }
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => usage(
                "this kernel has no provided-buffer rings (Linux 5.19+); use --engine uring-basic or epoll",
            ),
            _ => anyhow::Error::new(e).context("registering the provided-buffer ring"),
        })
    }

    fn addr(&self, bid: u16) -> *const u8 {
        self.bufs[bid as usize * BUF_SIZE..].as_ptr()
    }

    /// Put buffer `bid` back at the tail (seen by the kernel after `publish`).
    fn give(&mut self, bid: u16) {
        let slot = self.tail & (BUF_COUNT - 1);
        // SAFETY: slot < BUF_COUNT, inside the mapping; the kernel reads only entries
        // between its head and the published tail, and this one is past the published tail.
        let e = unsafe { &mut *self.entries.add(slot as usize) };
        e.set_addr(self.addr(bid) as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field lies in entry 0 of our mapping (BufRingEntry::tail), u16
        // aligned; the kernel only reads it, so an atomic release store is the right access.
        let tail = unsafe { &*(types::BufRingEntry::tail(self.entries) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); nothing uses it after drop.
        let _ = unsafe { rustix::mm::munmap(self.entries.cast(), self.map_len) };
    }
}

struct Chunk {
    bid: u16,
    off: u32,
    len: u32,
}

#[derive(Default)]
struct Conn {
    fd: RawFd,
    gen: u32,
    live: bool,
    /// Received buffers not yet fully echoed; the front one is being sent.
    queue: VecDeque<Chunk>,
    sending: bool,
    recv_armed: bool,
    eof: bool,
    /// Recv cancelled because the connection holds too many buffers.
    paused: bool,
    /// Recv ended with ENOBUFS; re-armed once buffers come back.
    starved: bool,
    /// An error: close as soon as no operation is in flight.
    failed: bool,
}

struct Server {
    ring: IoUring,
    bufs: BufRing,
    conns: Vec<Conn>,
    free: Vec<usize>,
    starved: Vec<usize>,
    returned: bool,
    listener: RawFd,
    /// Sends queued this turn, and the connection of the last one.
    sends_this_turn: usize,
    last_send: usize,
}

pub fn run(listener: OwnedFd, stop: &Stop, size: u64, sqpoll: bool) -> Result<ServerStats> {
    let bufs = BufRing::new()?;
    let (ring, setup) = if sqpoll {
        build_ring(&[
            ("sqpoll+single_issuer", &|b| {
                b.setup_sqpoll(1000).setup_single_issuer();
            }),
            ("sqpoll", &|b| {
                b.setup_sqpoll(1000);
            }),
        ])?
    } else {
        build_modern_ring()?
    };
    let mut stats = ServerStats::new("uring", setup, size);
    // Saves the fd lookup on every enter; an older kernel without it is fine.
    let _ = ring.submitter().register_ring_fd();
    bufs.register(&ring)?;
    let mut s = Server {
        ring,
        bufs,
        conns: Vec::new(),
        free: Vec::new(),
        starved: Vec::new(),
        returned: false,
        listener: listener.as_raw_fd(),
        sends_this_turn: 0,
        last_send: 0,
    };
    s.arm_accept(&mut stats)?;
    let mut cqes = Vec::with_capacity(CQ_ENTRIES as usize);
    while !stop.now() {
        s.bufs.publish();
        let want = s.want();
        s.sends_this_turn = 0;
        enter_and_reap(&mut s.ring, stop, want, &mut stats, &mut cqes)?;
        for &(data, res, flags) in &cqes {
            s.complete(data, res, flags, &mut stats)?;
        }
        if s.returned && !s.starved.is_empty() {
            s.rearm_starved(&mut stats)?;
        }
        s.returned = false;
    }
    for c in s.conns.iter().filter(|c| c.live) {
        // The process exits next; closing here keeps the fds from outliving the ring's view.
        // SAFETY: fds of live connections were accepted by us and are closed only here.
        unsafe { libc::close(c.fd) };
    }
    drop(listener);
    Ok(stats)
}

impl Server {
    /// Completions to wait for. A lone send with nothing queued behind it completes inline
    /// (DEFER_TASKRUN posts it during the enter), so waiting for it alone would cost a second
    /// enter per request at one connection: wait for it and the next event together. Any
    /// other case waits for one, so no queued work is held back.
    fn want(&self) -> usize {
        let lone = self.sends_this_turn == 1
            && self
                .conns
                .get(self.last_send)
                .is_some_and(|c| c.live && c.queue.len() == 1);
        if lone {
            2
        } else {
            1
        }
    }

    fn arm_accept(&mut self, stats: &mut ServerStats) -> Result<()> {
        let sqe = opcode::AcceptMulti::new(types::Fd(self.listener))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ud(ACCEPT, 0, 0));
        push(&mut self.ring, &sqe, stats)
    }

    fn arm_recv(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        c.recv_armed = true;
        c.starved = false;
        c.paused = false;
        let sqe = opcode::RecvMulti::new(types::Fd(c.fd), BGID)
            .build()
            .user_data(ud(RECV, slot, c.gen));
        push(&mut self.ring, &sqe, stats)
    }

    fn send_front(&mut self, slot: usize, stats: &mut ServerStats) -> Result<()> {
        let c = &mut self.conns[slot];
        let Some(front) = c.queue.front() else {
            c.sending = false;
            return Ok(());
        };
        c.sending = true;
        self.sends_this_turn += 1;
        self.last_send = slot;
        // SAFETY (pointer arithmetic): off < len <= BUF_SIZE, inside buffer `bid`.
        let ptr = unsafe { self.bufs.addr(front.bid).add(front.off as usize) };
        let sqe = opcode::Send::new(types::Fd(c.fd), ptr, front.len - front.off)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(ud(SEND, slot, c.gen));
        push(&mut self.ring, &sqe, stats)
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

    fn give_back(&mut self, bid: u16) {
        self.bufs.give(bid);
        self.returned = true;
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
                    if let Some(bid) = cqueue::buffer_select(flags) {
                        self.give_back(bid);
                    }
                    return Ok(());
                }
                if kind == RECV {
                    self.on_recv(slot, res, flags, stats)?;
                } else {
                    self.on_send(slot, res, stats)?;
                }
                self.maybe_close(slot, stats)
            }
            _ => Ok(()), // CANCEL, CLOSE: their effect shows on the operation they end
        }
    }

    fn on_accept(&mut self, res: i32, flags: u32, stats: &mut ServerStats) -> Result<()> {
        if res >= 0 {
            stats.accepted += 1;
            // TCP_NODELAY below, as the epoll server does.
            stats.syscalls += 1;
            // SAFETY: res is a fresh fd from accept; borrowed only for the setsockopt.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(res) };
            let _ = rustix::net::sockopt::set_tcp_nodelay(fd, true);
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(Conn::default());
                self.conns.len() - 1
            });
            let c = &mut self.conns[slot];
            let gen = c.gen.wrapping_add(1);
            *c = Conn {
                fd: res,
                gen,
                live: true,
                ..Default::default()
            };
            self.arm_recv(slot, stats)?;
        }
        if !cqueue::more(flags) {
            self.arm_accept(stats)?;
        }
        Ok(())
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
                self.give_back(bid);
                return Ok(());
            }
            c.queue.push_back(Chunk {
                bid,
                off: 0,
                len: res as u32,
            });
            let held = c.queue.len();
            let (sending, paused) = (c.sending, c.paused);
            if !sending {
                self.send_front(slot, stats)?;
            }
            if held >= MAX_HELD && more && !paused {
                self.conns[slot].paused = true;
                let cancel = opcode::AsyncCancel::new(ud(RECV, slot, self.conns[slot].gen))
                    .build()
                    .user_data(ud(CANCEL, slot, 0));
                push(&mut self.ring, &cancel, stats)?;
            }
            if !more && !self.conns[slot].paused {
                self.arm_recv(slot, stats)?;
            }
            return Ok(());
        }
        if let Some(bid) = cqueue::buffer_select(flags) {
            self.give_back(bid);
        }
        let c = &mut self.conns[slot];
        match -res {
            0 => c.eof = true,
            libc::ENOBUFS => {
                stats.enobufs += 1;
                if !more {
                    c.starved = true;
                    self.starved.push(slot);
                }
            }
            libc::ECANCELED => c.paused = true,
            _ => {
                c.failed = true;
                stats.errors += 1;
            }
        }
        Ok(())
    }

    fn on_send(&mut self, slot: usize, res: i32, stats: &mut ServerStats) -> Result<()> {
        self.conns[slot].sending = false;
        if res <= 0 {
            let c = &mut self.conns[slot];
            if !c.failed {
                c.failed = true;
                stats.errors += 1;
            }
            return Ok(());
        }
        stats.bytes += res as u64;
        let c = &mut self.conns[slot];
        let mut done_bid = None;
        if let Some(front) = c.queue.front_mut() {
            front.off += res as u32;
            if front.off >= front.len {
                done_bid = Some(front.bid);
                c.queue.pop_front();
            }
        }
        if let Some(bid) = done_bid {
            self.give_back(bid);
        }
        let c = &self.conns[slot];
        if c.failed {
            return Ok(());
        }
        if !c.queue.is_empty() {
            self.send_front(slot, stats)?;
        }
        let c = &self.conns[slot];
        if c.paused && !c.recv_armed && c.queue.len() <= MAX_HELD / 2 && !c.eof {
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
                let cancel = opcode::AsyncCancel::new(ud(RECV, slot, c.gen))
                    .build()
                    .user_data(ud(CANCEL, slot, 0));
                push(&mut self.ring, &cancel, stats)?;
            }
            if c.eof && !c.failed {
                // EOF ends the multishot recv; it is not armed any more.
                c.recv_armed = false;
            } else {
                return Ok(());
            }
        }
        let c = &mut self.conns[slot];
        let fd = c.fd;
        let bids: Vec<u16> = c.queue.drain(..).map(|ch| ch.bid).collect();
        c.live = false;
        for bid in bids {
            self.give_back(bid);
        }
        self.free.push(slot);
        stats.closed += 1;
        let sqe = opcode::Close::new(types::Fd(fd))
            .build()
            .user_data(ud(CLOSE, slot, 0));
        push(&mut self.ring, &sqe, stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        let d = ud(SEND, 123_456, 0x1ff_ffff);
        assert_eq!(ud_parts(d), (SEND, 123_456, 0xff_ffff));
        assert_eq!(ud_parts(ud(ACCEPT, 0, 0)), (ACCEPT, 0, 0));
    }
}
