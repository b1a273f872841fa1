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

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::features::Features;
use super::listen::Stop;
use super::stats::ServerStats;
use crate::error::usage;
use crate::measure::aligned::AlignedBuf;

const SQ_ENTRIES: u32 = 4096;
const CQ_ENTRIES: u32 = 16384;
// user_data: kind in the top byte, a 24-bit generation, the 32-bit slot.
pub(super) const ACCEPT: u8 = 1;
pub(super) const RECV: u8 = 2;
pub(super) const SEND: u8 = 3;
pub(super) const CANCEL: u8 = 4;
pub(super) const CLOSE: u8 = 5;
pub(super) const POLL: u8 = 6;

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
///
/// # Safety
///
/// As for [`push_sqe`]: whatever `sqe` points to must stay valid until its completion is reaped.
pub(super) unsafe fn push(
    ring: &mut IoUring,
    sqe: &squeue::Entry,
    stats: &mut ServerStats,
) -> Result<()> {
    // SAFETY: our caller upholds push_sqe's contract for `sqe`.
    let extra = unsafe { push_sqe(ring, sqe) }?;
    stats.enters += extra;
    stats.syscalls += extra;
    Ok(())
}

/// Push an SQE, submitting first while the submission queue is full. Returns how many
/// enters that took (0 almost always). Shared by the servers and the io_uring loader.
///
/// # Safety
///
/// The kernel reads and writes what `sqe` points to (a data buffer, an iovec and its msghdr)
/// after this returns, up to the operation's completion, or its last one for a multishot
/// operation. The caller must keep each of them valid, and not move or free them or hand
/// them to anyone else, until that completion is reaped or the ring is dropped.
pub(super) unsafe fn push_sqe(ring: &mut IoUring, sqe: &squeue::Entry) -> Result<u64> {
    let mut extra = 0;
    loop {
        // SAFETY: the buffers `sqe` points to stay valid until its completion, as our
        // caller promised.
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

/// How long an enter that asks for more than one completion waits for them before it settles
/// for one (IORING_FEAT_MIN_TIMEOUT, 6.12+): a guess that the next event is near must not
/// become a stall when it is not.
const MIN_WAIT_USEC: u32 = 50;

/// One io_uring_enter: submit everything queued and wait for `want` completions, no longer
/// than `timeout`; where the kernel has min-timeout, a wait for more than one settles for one
/// after MIN_WAIT_USEC. A timeout, a signal or a full completion queue is not an error.
pub(super) fn submit_and_wait(ring: &mut IoUring, want: usize, timeout: Duration) -> Result<()> {
    let ts = types::Timespec::from(timeout);
    let mut args = types::SubmitArgs::new().timespec(&ts);
    if want > 1 && ring.params().is_feature_min_timeout() {
        args = args.min_wait_usec(MIN_WAIT_USEC);
    }
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

/// Buffers in the pool, and entries in the kernel's provided-buffer ring (a power of two).
const BUF_COUNT: u16 = 1024;
/// Buffer sizes with and without the `big` feature. 32 KiB holds a 16 KiB message whole and
/// keeps a 64 KiB one to two buffers; with `inc`, small messages pack into one buffer.
const BIG_BUF: usize = 32 * 1024;
const SMALL_BUF: usize = 2048;
const BGID: u16 = 7;
/// Buffers kept in the kernel's ring at first; doubled each time a recv finds it dry. The rest
/// wait in a last-freed-first-used stack, so the buffers in use stay warm in cache (the ring
/// itself is FIFO and would cycle through the whole pool).
const RING_LOW: usize = 64;
/// A connection holding this many bytes, or this many buffer slices, sent to a peer that does
/// not read, stops receiving until it is down to half: one client that sends without reading
/// cannot grow the server or starve the others (the epoll server's bound is the same 256 KiB).
const MAX_HELD_BYTES: usize = 256 * 1024;
const MAX_HELD_SLICES: usize = 64;
/// iovec entries in one sendmsg.
const MAX_IOV: usize = 64;
/// The least a recv is armed to take, whatever the connection holds.
const MIN_ALLOWANCE: usize = 16 * 1024;

/// How a multishot recv is told how much it may take. A bundle takes as many buffers as the
/// socket has data for, so without a cap one recv from a peer that sends without reading can
/// swallow megabytes (its socket's whole receive queue) before the cancel that enforces
/// MAX_HELD_BYTES lands, and a few such peers can pin every buffer in the pool, starving the
/// others. `Total` (6.17+, sqe->optlen with IORING_RECV_MULTISHOT) ends the multishot recv
/// itself once the connection's allowance is received; `PerCompletion` (sqe->len, 6.10+) caps
/// each completion; where the kernel refuses one (EINVAL) the server steps down to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecvCap {
    Total,
    PerCompletion,
    None,
}

impl RecvCap {
    fn weaker(self) -> RecvCap {
        match self {
            RecvCap::Total => RecvCap::PerCompletion,
            _ => RecvCap::None,
        }
    }
}

/// Set the byte caps a multishot recv SQE carries for `cap`: sqe->len (each completion) and,
/// for `Total`, sqe->optlen (the whole multishot). The crate's bundle builder has no setter
/// for either.
fn cap_recv(sqe: squeue::Entry, cap: RecvCap, bytes: u32) -> squeue::Entry {
    const _: () = assert!(std::mem::size_of::<squeue::Entry>() == 64);
    let mut sqe = sqe;
    let raw = (&mut sqe as *mut squeue::Entry).cast::<u8>();
    if cap != RecvCap::None {
        // SAFETY: Entry is #[repr(C)] around the kernel's 64-byte io_uring_sqe, whose `len`
        // is the u32 at byte 24 and whose optlen (a union with file_index, 0 for a recv) is
        // the u32 at byte 44 (include/uapi/linux/io_uring.h).
        unsafe { raw.add(24).cast::<u32>().write_unaligned(bytes) };
    }
    if cap == RecvCap::Total {
        // SAFETY: as above.
        unsafe { raw.add(44).cast::<u32>().write_unaligned(bytes) };
    }
    sqe
}

/// The provided buffers: the ring the kernel takes from, and a mirror of it. The kernel does
/// not say which buffers a bundle filled beyond the first, nor where in an incrementally
/// consumed buffer a recv's bytes landed: both follow from its rules (buffers are taken from
/// the head in ring order; with IOU_PBUF_RING_INC a recv fills the head buffer from where the
/// last one stopped, and a buffer leaves the head only when full), which `take` replays.
struct BufPool {
    entries: *mut types::BufRingEntry,
    map_len: usize,
    bufs: AlignedBuf,
    size: usize,
    inc: bool,
    /// Ring slot -> buffer id, the kernel's head as we replay it, and our tail.
    slot_bid: Vec<u16>,
    head: u16,
    tail: u16,
    published: u16,
    /// Per buffer: bytes the kernel has written into it since it was given.
    filled: Vec<u32>,
    /// Per buffer: received slices not yet echoed.
    pinned: Vec<u32>,
    /// Per buffer: in the ring and not yet finished by the kernel.
    in_kernel: Vec<bool>,
    /// Free buffers not in the ring; the last freed is given first.
    spare: Vec<u16>,
    target: usize,
}

/// Bytes `start..end` of buffer `bid`, received and not yet echoed.
struct Slice {
    bid: u16,
    start: u32,
    end: u32,
}

impl BufPool {
    /// A pool of BUF_COUNT buffers of `size` bytes, on transparent huge pages if `huge` and
    /// the kernel takes the advice (the second value says whether it did).
    fn new(size: usize, huge: bool) -> Result<(BufPool, bool)> {
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
        let n = BUF_COUNT as usize;
        // Page-aligned at least: see measure::aligned for what an unaligned pool costs.
        let (bufs, huge) = if huge && thp_possible() {
            AlignedBuf::zeroed_huge(n * size)
        } else {
            (AlignedBuf::zeroed(n * size), false)
        };
        let mut pool = BufPool {
            entries: ptr.cast(),
            map_len,
            // Zeroed pages are mapped lazily: only the buffers used become resident.
            bufs,
            size,
            inc: false,
            slot_bid: vec![0; n],
            head: 0,
            tail: 0,
            published: 0,
            filled: vec![0; n],
            pinned: vec![0; n],
            in_kernel: vec![false; n],
            spare: (0..BUF_COUNT).rev().collect(),
            target: RING_LOW,
        };
        pool.top_up();
        pool.publish();
        Ok((pool, huge))
    }

    /// Register the ring, incremental if asked and the kernel has it (6.12+). Returns whether
    /// incremental consumption took, and why not where it was asked and refused.
    fn register(&mut self, ring: &IoUring, inc: bool) -> Result<Option<String>> {
        let attempt = |flags: u16| {
            // SAFETY: the entries mapping lives until BufPool is dropped, which happens after
            // the IoUring (dropped first in `run`) has gone and with it the registration.
            unsafe {
                ring.submitter().register_buf_ring_with_flags(
                    self.entries as u64,
                    BUF_COUNT,
                    BGID,
                    flags,
                )
            }
        };
        let mut refused = None;
        if inc {
            match attempt(types::IOU_PBUF_RING_INC as u16) {
                Ok(()) => {
                    self.inc = true;
                    return Ok(None);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    refused = Some(format!(
                        "inc: this kernel refused IOU_PBUF_RING_INC ({e}); whole buffers per recv"
                    ));
                }
                Err(e) => return Err(anyhow::Error::new(e).context("registering the buffer ring")),
            }
        }
        attempt(0).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => usage(
                "this kernel has no provided-buffer rings (Linux 5.19+); use --engine uring-basic or epoll",
            ),
            _ => anyhow::Error::new(e).context("registering the provided-buffer ring"),
        })?;
        self.inc = false;
        Ok(refused)
    }

    fn mask(&self) -> u16 {
        BUF_COUNT - 1
    }

    fn addr(&self, bid: u16) -> *const u8 {
        self.bufs[bid as usize * self.size..].as_ptr()
    }

    /// Buffers in the ring the kernel may still take or is filling.
    fn avail(&self) -> usize {
        self.tail.wrapping_sub(self.head) as usize
    }

    /// Give spare buffers to the ring until it holds `target` (seen after `publish`).
    fn top_up(&mut self) {
        while self.avail() < self.target.min(BUF_COUNT as usize) {
            let Some(bid) = self.spare.pop() else { break };
            let slot = self.tail & self.mask();
            // SAFETY: slot < BUF_COUNT, inside the mapping; the kernel reads only entries
            // between its head and the published tail, and this one is past the published tail.
            let e = unsafe { &mut *self.entries.add(slot as usize) };
            e.set_addr(self.addr(bid) as u64);
            e.set_len(self.size as u32);
            e.set_bid(bid);
            self.slot_bid[slot as usize] = bid;
            self.in_kernel[bid as usize] = true;
            self.filled[bid as usize] = 0;
            self.tail = self.tail.wrapping_add(1);
        }
    }

    fn publish(&mut self) {
        if self.published == self.tail {
            return;
        }
        // SAFETY: the tail field lies in entry 0 of our mapping (BufRingEntry::tail), u16
        // aligned; the kernel only reads it, so an atomic release store is the right access.
        let tail = unsafe { &*(types::BufRingEntry::tail(self.entries) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
        self.published = self.tail;
    }

    /// The ring ran dry: keep more buffers in it from now on.
    fn grow(&mut self) {
        self.target = (self.target * 2).min(BUF_COUNT as usize);
    }

    /// A recv put `res` bytes into buffers starting with `first`: replay the kernel's
    /// consumption, appending the slices (in order) to `out`.
    fn take(&mut self, first: u16, res: usize, out: &mut VecDeque<Slice>) -> Result<()> {
        let mut left = res;
        let mut at_first = true;
        while left > 0 {
            if self.head == self.tail {
                anyhow::bail!("provided buffers out of step: {res} bytes received, {left} beyond the buffers given");
            }
            let bid = self.slot_bid[(self.head & self.mask()) as usize];
            if at_first && bid != first {
                anyhow::bail!(
                    "provided buffers out of step: the kernel filled buffer {first}, the ring's head holds {bid}"
                );
            }
            at_first = false;
            let b = bid as usize;
            let start = self.filled[b] as usize;
            let room = self.size - start;
            let take = room.min(left);
            out.push_back(Slice {
                bid,
                start: start as u32,
                end: (start + take) as u32,
            });
            self.pinned[b] += 1;
            self.filled[b] += take as u32;
            left -= take;
            // Without INC a recv finishes every buffer it touches; with it, only a full one.
            if !self.inc || self.filled[b] as usize == self.size {
                self.in_kernel[b] = false;
                self.head = self.head.wrapping_add(1);
            }
        }
        Ok(())
    }

    /// A completion without data named buffer `bid`: without INC the kernel used it up.
    fn take_empty(&mut self, bid: u16) {
        if self.inc || self.head == self.tail {
            return;
        }
        if self.slot_bid[(self.head & self.mask()) as usize] == bid {
            self.in_kernel[bid as usize] = false;
            self.head = self.head.wrapping_add(1);
            self.free_if_unused(bid);
        }
    }

    /// A slice of `bid` was echoed (or dropped).
    fn release(&mut self, bid: u16) {
        let b = bid as usize;
        self.pinned[b] = self.pinned[b].saturating_sub(1);
        self.free_if_unused(bid);
    }

    fn free_if_unused(&mut self, bid: u16) {
        let b = bid as usize;
        if self.pinned[b] == 0 && !self.in_kernel[b] {
            self.filled[b] = 0;
            self.spare.push(bid);
        }
    }
}

/// Whether transparent huge pages can back an advised mapping here: THP compiled in (the
/// machine probe finds a mode) and not "never".
fn thp_possible() -> bool {
    let root = crate::machine::sysfs::Root::new(std::path::Path::new("/"));
    let (mode, _) = crate::machine::pages::read_thp(&root);
    !mode.is_empty() && mode != "never"
}

impl Drop for BufPool {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); nothing uses it after drop.
        let _ = unsafe { rustix::mm::munmap(self.entries.cast(), self.map_len) };
    }
}

/// A connection's socket: a plain fd, or a direct descriptor (an index into the ring's
/// registered file table).
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    Fd(RawFd),
    Fixed(u32),
}

/// Build an SQE against a connection's socket, fd or direct descriptor alike.
macro_rules! on_target {
    ($t:expr, $f:ident => $e:expr) => {
        match $t {
            Target::Fd(x) => {
                let $f = types::Fd(x);
                $e
            }
            Target::Fixed(i) => {
                let $f = types::Fixed(i);
                $e
            }
        }
    };
}
pub(super) use on_target;

struct Conn {
    target: Target,
    gen: u32,
    live: bool,
    /// Received slices not yet echoed, in order; the send in flight covers the front ones.
    queue: VecDeque<Slice>,
    /// Bytes in `queue`.
    held: usize,
    sending: bool,
    /// The send in flight is a zero-copy one: it ends with its notification.
    zc: bool,
    zc_res: Option<i32>,
    /// The sendmsg in flight's iovec and header (heap, so they stay put while Conn moves).
    iov: Vec<libc::iovec>,
    msg: Box<libc::msghdr>,
    recv_armed: bool,
    eof: bool,
    /// Recv cancelled because the connection holds too much.
    paused: bool,
    /// Recv ended with ENOBUFS; re-armed once buffers come back.
    starved: bool,
    /// An error: close as soon as no operation is in flight.
    failed: bool,
    /// How the recv in flight was capped.
    cap: RecvCap,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            target: Target::Fd(-1),
            gen: 0,
            live: false,
            queue: VecDeque::new(),
            held: 0,
            sending: false,
            zc: false,
            zc_res: None,
            iov: Vec::with_capacity(MAX_IOV),
            // SAFETY: msghdr is plain pointers and integers, for which all-zero is valid
            // (no name, no control, no iovec yet).
            msg: Box::new(unsafe { std::mem::zeroed() }),
            recv_armed: false,
            eof: false,
            paused: false,
            starved: false,
            failed: false,
            cap: RecvCap::None,
        }
    }

    /// Reset for a new connection on this slot, keeping the allocations.
    fn open(&mut self, target: Target) {
        self.target = target;
        self.gen = self.gen.wrapping_add(1);
        self.live = true;
        self.queue.clear();
        self.held = 0;
        self.sending = false;
        self.zc = false;
        self.zc_res = None;
        self.recv_armed = false;
        self.eof = false;
        self.paused = false;
        self.starved = false;
        self.failed = false;
    }

    fn over_cap(&self) -> bool {
        self.held >= MAX_HELD_BYTES || self.queue.len() >= MAX_HELD_SLICES
    }

    fn under_half(&self) -> bool {
        self.held <= MAX_HELD_BYTES / 2 && self.queue.len() <= MAX_HELD_SLICES / 2
    }
}

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

/// Register a sparse file table for direct descriptors, as large as the fd limit; where the
/// kernel refuses, why (plain descriptors are used instead).
pub(super) fn register_file_table(ring: &IoUring) -> Option<String> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(65536)
        .clamp(64, 65536) as u32;
    ring.submitter()
        .register_files_sparse(limit)
        .err()
        .map(|e| format!("fixed: registering a file table failed ({e}); plain descriptors"))
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
    while !stop.now() {
        s.pool.top_up();
        s.pool.publish();
        if !s.starved.is_empty() && s.pool.avail() > 0 {
            s.rearm_starved(&mut stats)?;
        }
        let want = s.want();
        s.sends_this_turn = 0;
        enter_and_reap(&mut s.ring, stop, want, &mut stats, &mut cqes)?;
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

/// Arm the listener's multishot accept; with `fixed`, accepted sockets become direct
/// descriptors in the ring's file table. Shared by the ring path and the hot path.
pub(super) fn arm_accept(
    ring: &mut IoUring,
    listener: RawFd,
    fixed: bool,
    stats: &mut ServerStats,
) -> Result<()> {
    // A direct descriptor is not in the fd table, so it takes no O_CLOEXEC (EINVAL).
    let flags = if fixed { 0 } else { libc::SOCK_CLOEXEC };
    let sqe = opcode::AcceptMulti::new(types::Fd(listener))
        .allocate_file_index(fixed)
        .flags(flags)
        .build()
        .user_data(ud(ACCEPT, 0, 0));
    // SAFETY: the accept passes no address buffer; direct descriptors go into the ring's own
    // file table.
    unsafe { push(ring, &sqe, stats) }
}

/// Read an accept completion: the new connection's socket, if one came. Counts it (or the
/// error) and re-arms the accept when the multishot one ended. An accept refused as built
/// (EINVAL) is an error: re-arming it would spin.
pub(super) fn on_accept(
    ring: &mut IoUring,
    listener: RawFd,
    fixed: bool,
    res: i32,
    flags: u32,
    stats: &mut ServerStats,
) -> Result<Option<Target>> {
    let mut target = None;
    if res >= 0 {
        stats.accepted += 1;
        target = Some(if fixed {
            Target::Fixed(res as u32)
        } else {
            Target::Fd(res)
        });
    } else if res == -libc::EINVAL {
        return Err(
            anyhow::Error::new(std::io::Error::from_raw_os_error(-res)).context("io_uring accept")
        );
    } else if res != -libc::ECANCELED {
        stats.errors += 1;
    }
    if !cqueue::more(flags) && res != -libc::ECANCELED {
        arm_accept(ring, listener, fixed, stats)?;
    }
    Ok(target)
}

/// A slot for a new connection: the last one freed, else a new one at the end.
pub(super) fn take_slot<C>(free: &mut Vec<usize>, conns: &mut Vec<C>, new: fn() -> C) -> usize {
    free.pop().unwrap_or_else(|| {
        conns.push(new());
        conns.len() - 1
    })
}

/// Close a finished connection's socket through the ring, counting it; the slot is the
/// caller's to free. The close's completion needs nothing done.
pub(super) fn push_close(
    ring: &mut IoUring,
    target: Target,
    slot: usize,
    stats: &mut ServerStats,
) -> Result<()> {
    stats.closed += 1;
    let sqe = on_target!(target, f => opcode::Close::new(f).build());
    // SAFETY: a close points to no memory of ours.
    unsafe { push(ring, &sqe.user_data(ud(CLOSE, slot, 0)), stats) }
}

/// At exit: stop accepting, close the live connections' plain descriptors (direct ones go
/// with the file table, unregistered here).
pub(super) fn shut_down(ring: &mut IoUring, live: impl Iterator<Item = Target>, fixed: bool) {
    cancel_accept(ring, ud(ACCEPT, 0, 0));
    for t in live {
        if let Target::Fd(fd) = t {
            // SAFETY: fds of live connections were accepted by us and are closed only here.
            unsafe { libc::close(fd) };
        }
    }
    if fixed {
        let _ = ring.submitter().unregister_files();
    }
}

/// The server's ring: with a kernel thread polling the submission queue where asked, else the
/// best of the modern setups.
pub(super) fn build_server_ring(sqpoll: bool) -> Result<(IoUring, &'static str)> {
    if sqpoll {
        build_ring(&[
            ("sqpoll+single_issuer", &|b| {
                b.setup_sqpoll(1000).setup_single_issuer();
            }),
            ("sqpoll", &|b| {
                b.setup_sqpoll(1000);
            }),
        ])
    } else {
        build_modern_ring()
    }
}

/// Cancel the pending accept (`accept_ud`) and wait, briefly, for it to end: an operation
/// still in flight holds the listening socket, and the ring is torn down asynchronously
/// after exit, so without this the port can stay taken for a moment after the server exits.
pub(super) fn cancel_accept(ring: &mut IoUring, accept_ud: u64) {
    let cancel = opcode::AsyncCancel::new(accept_ud)
        .build()
        .user_data(ud(CANCEL, 0, 0));
    // SAFETY: an AsyncCancel points to no memory of ours.
    if unsafe { push_sqe(ring, &cancel) }.is_err() {
        return;
    }
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        if submit_and_wait(ring, 1, Duration::from_millis(20)).is_err() {
            return;
        }
        let ended = ring
            .completion()
            .any(|c| c.user_data() == accept_ud && !cqueue::more(c.flags()));
        if ended {
            return;
        }
    }
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
            // SAFETY (pointer arithmetic): start < end <= buffer size, inside buffer `bid`.
            unsafe { pool.addr(s.bid).add(s.start as usize) }
        };
        let bytes: usize = c
            .queue
            .iter()
            .take(n)
            .map(|s| (s.end - s.start) as usize)
            .sum();
        let zc = feats.zc.is_some_and(|z| bytes >= z);
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
                }
            }
            libc::EINVAL if c.cap != RecvCap::None => {
                // This kernel refuses the cap: step down once (every connection armed with
                // it says the same) and arm again.
                if c.cap == self.recv_cap {
                    self.recv_cap = self.recv_cap.weaker();
                }
                if !more && !c.eof && !c.failed {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(e: &squeue::Entry) -> [u8; 64] {
        // SAFETY: Entry is 64 bytes of plain data (asserted in cap_recv).
        unsafe { std::mem::transmute_copy(e) }
    }

    #[test]
    fn recv_caps_land_where_the_kernel_reads_them() {
        // The crate's own len setter (on the non-bundle multishot recv) puts sqe->len where
        // cap_recv does.
        let by_crate = opcode::RecvMulti::new(types::Fd(3), BGID)
            .len(12345)
            .build();
        let plain = opcode::RecvMulti::new(types::Fd(3), BGID).build();
        let ours = cap_recv(plain.clone(), RecvCap::PerCompletion, 12345);
        assert_eq!(bytes(&ours), bytes(&by_crate));
        // Total adds optlen at byte 44 and changes nothing else.
        let total = bytes(&cap_recv(plain.clone(), RecvCap::Total, 777));
        assert_eq!(u32::from_ne_bytes(total[24..28].try_into().unwrap()), 777);
        assert_eq!(u32::from_ne_bytes(total[44..48].try_into().unwrap()), 777);
        let p = bytes(&plain);
        for (i, (a, b)) in total.iter().zip(p.iter()).enumerate() {
            if !(24..28).contains(&i) && !(44..48).contains(&i) {
                assert_eq!(a, b, "byte {i}");
            }
        }
        assert_eq!(bytes(&cap_recv(plain.clone(), RecvCap::None, 777)), p);
        assert_eq!(RecvCap::Total.weaker(), RecvCap::PerCompletion);
        assert_eq!(RecvCap::PerCompletion.weaker(), RecvCap::None);
    }

    #[test]
    fn user_data_round_trips() {
        let d = ud(SEND, 123_456, 0x1ff_ffff);
        assert_eq!(ud_parts(d), (SEND, 123_456, 0xff_ffff));
        assert_eq!(ud_parts(ud(ACCEPT, 0, 0)), (ACCEPT, 0, 0));
    }

    /// Replay what the kernel does with the head of the ring, for a pool of `size` buffers.
    fn pool(size: usize, inc: bool) -> BufPool {
        let (mut p, _) = BufPool::new(size, false).unwrap();
        p.inc = inc;
        p
    }

    fn spans(q: &VecDeque<Slice>) -> Vec<(u16, u32, u32)> {
        q.iter().map(|s| (s.bid, s.start, s.end)).collect()
    }

    #[test]
    fn bundles_take_whole_buffers_in_ring_order() {
        let mut p = pool(100, false);
        let mut q = VecDeque::new();
        // Spare buffers go out last-freed-first: 0, 1, 2, ... in ring order.
        p.take(0, 250, &mut q).unwrap();
        assert_eq!(spans(&q), vec![(0, 0, 100), (1, 0, 100), (2, 0, 50)]);
        assert_eq!(p.avail(), RING_LOW - 3);
        // The next recv starts at a fresh buffer even though buffer 2 has room.
        q.clear();
        p.take(3, 10, &mut q).unwrap();
        assert_eq!(spans(&q), vec![(3, 0, 10)]);
        // A buffer named out of turn is a bug to report, not to paper over.
        assert!(p.take(9, 10, &mut q).is_err());
        // Echoed buffers return to the spare stack and go back to the ring first.
        for bid in [0, 1, 2] {
            p.release(bid);
        }
        assert_eq!(p.spare.last(), Some(&2));
        // Four buffers left the ring (0..=3); the three freed go back first, then a fresh one.
        p.top_up();
        let back: Vec<u16> = (0..4)
            .map(|k| p.slot_bid[(p.tail.wrapping_sub(4 - k) & p.mask()) as usize])
            .collect();
        assert_eq!(back, vec![2, 1, 0, RING_LOW as u16]);
        assert_eq!(p.avail(), RING_LOW);
    }

    #[test]
    fn incremental_buffers_pack_recvs_and_leave_the_head_only_when_full() {
        let mut p = pool(100, true);
        let mut q = VecDeque::new();
        p.take(0, 30, &mut q).unwrap();
        p.take(0, 30, &mut q).unwrap();
        // 60 bytes in: 40 fit in buffer 0, the rest starts buffer 1 (a bundle).
        p.take(0, 60, &mut q).unwrap();
        assert_eq!(
            spans(&q),
            vec![(0, 0, 30), (0, 30, 60), (0, 60, 100), (1, 0, 20)]
        );
        assert_eq!(p.head, 1);
        // Buffer 0 is free once all three of its slices are echoed, not before.
        p.release(0);
        p.release(0);
        assert!(!p.spare.contains(&0));
        p.release(0);
        assert_eq!(p.spare.last(), Some(&0));
        // Buffer 1 is still being filled: echoing its slice does not free it.
        p.release(1);
        assert!(!p.spare.contains(&1));
        q.clear();
        p.take(1, 80, &mut q).unwrap();
        assert_eq!(spans(&q), vec![(1, 20, 100)]);
        p.release(1);
        assert_eq!(p.spare.last(), Some(&1));
    }
}
