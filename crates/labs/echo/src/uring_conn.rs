//! A uring server connection's state (what it holds, what is in flight, why it stopped
//! receiving) and how its multishot recv is capped.

use std::collections::VecDeque;

use io_uring::squeue;

use super::ring::Target;
use super::uring_pool::Slice;

/// A connection holding this many bytes, or this many buffer slices, sent to a peer that does
/// not read, stops receiving until it is down to half: one client that sends without reading
/// cannot grow the server or starve the others (the epoll server's bound is the same 256 KiB).
pub(super) const MAX_HELD_BYTES: usize = 256 * 1024;
pub(super) const MAX_HELD_SLICES: usize = 64;
/// iovec entries in one sendmsg.
pub(super) const MAX_IOV: usize = 64;
/// The least a recv is armed to take, whatever the connection holds.
pub(super) const MIN_ALLOWANCE: usize = 16 * 1024;

/// How a multishot recv is told how much it may take. A bundle takes as many buffers as the
/// socket has data for, so without a cap one recv from a peer that sends without reading can
/// swallow megabytes (its socket's whole receive queue) before the cancel that enforces
/// MAX_HELD_BYTES lands, and a few such peers can pin every buffer in the pool, starving the
/// others. `Total` (6.17+, sqe->optlen with IORING_RECV_MULTISHOT) ends the multishot recv
/// itself once the connection's allowance is received; `PerCompletion` (sqe->len, 6.10+) caps
/// each completion; where the kernel refuses one (EINVAL) the server steps down to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecvCap {
    Total,
    PerCompletion,
    None,
}

impl RecvCap {
    pub(super) fn weaker(self) -> RecvCap {
        match self {
            RecvCap::Total => RecvCap::PerCompletion,
            _ => RecvCap::None,
        }
    }
}

/// Byte offsets, in the kernel's 64-byte `struct io_uring_sqe` (include/uapi/linux/io_uring.h),
/// of `len` (u32) and of `optlen` (u32, in a union with `file_index`, which a recv leaves 0).
const SQE_LEN_AT: usize = 24;
const SQE_OPTLEN_AT: usize = 44;

// The writes in cap_recv stay inside the Entry and are aligned: it is the 64-byte SQE, aligned
// to 8 (it holds u64s). Which fields the offsets name is checked against the crate's own
// setters in `sqe_layout_matches_the_crate` below.
const _: () = {
    assert!(std::mem::size_of::<squeue::Entry>() == 64);
    assert!(std::mem::align_of::<squeue::Entry>() >= 4);
    assert!(SQE_LEN_AT.is_multiple_of(4) && SQE_LEN_AT + 4 <= 64);
    assert!(SQE_OPTLEN_AT.is_multiple_of(4) && SQE_OPTLEN_AT + 4 <= 64);
};

/// Set the byte caps a multishot recv SQE carries for `cap`: sqe->len (each completion) and,
/// for `Total`, sqe->optlen (the whole multishot).
///
/// Why raw writes: io-uring 0.7's `RecvMultiBundle` builder has no setter for either field,
/// and the crate keeps the SQE's fields private, so there is no API to go through. `Entry` is
/// `#[repr(C)]` around the kernel's SQE, a struct of integers and unions of integers (every bit
/// pattern is valid), so writing a u32 at an in-bounds, 4-aligned offset is defined; that the
/// offsets are the fields meant is what the const assertion above and the test check.
pub(super) fn cap_recv(sqe: squeue::Entry, cap: RecvCap, bytes: u32) -> squeue::Entry {
    let mut sqe = sqe;
    let raw = (&mut sqe as *mut squeue::Entry).cast::<u8>();
    if cap != RecvCap::None {
        // SAFETY: byte SQE_LEN_AT..+4 lies inside the 64-byte Entry we own, 4-aligned (const
        // assertions above), and any u32 is a valid value there (see the doc comment).
        unsafe { raw.add(SQE_LEN_AT).cast::<u32>().write(bytes) };
    }
    if cap == RecvCap::Total {
        // SAFETY: as above, for byte SQE_OPTLEN_AT..+4.
        unsafe { raw.add(SQE_OPTLEN_AT).cast::<u32>().write(bytes) };
    }
    sqe
}

pub(super) struct Conn {
    pub(super) target: Target,
    pub(super) gen: u32,
    pub(super) live: bool,
    /// Received slices not yet echoed, in order; the send in flight covers the front ones.
    pub(super) queue: VecDeque<Slice>,
    /// Bytes in `queue`.
    pub(super) held: usize,
    pub(super) sending: bool,
    /// The send in flight is a zero-copy one: it ends with its notification.
    pub(super) zc: bool,
    pub(super) zc_res: Option<i32>,
    /// The sendmsg in flight's iovec and header (heap, so they stay put while Conn moves).
    pub(super) iov: Vec<libc::iovec>,
    pub(super) msg: Box<libc::msghdr>,
    pub(super) recv_armed: bool,
    pub(super) eof: bool,
    /// Recv cancelled because the connection holds too much.
    pub(super) paused: bool,
    /// Recv ended with ENOBUFS; re-armed once buffers come back.
    pub(super) starved: bool,
    /// An error: close as soon as no operation is in flight.
    pub(super) failed: bool,
    /// How the recv in flight was capped.
    pub(super) cap: RecvCap,
    /// Bytes received so far: where a recv ends inside a message.
    pub(super) received: u64,
    /// Bytes the send in flight asked to send: a send that sent fewer came back short.
    pub(super) asked: usize,
}

impl Conn {
    pub(super) fn new() -> Conn {
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
            received: 0,
            asked: 0,
        }
    }

    /// Reset for a new connection on this slot, keeping the allocations.
    pub(super) fn open(&mut self, target: Target) {
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
        self.received = 0;
        self.asked = 0;
    }

    pub(super) fn over_cap(&self) -> bool {
        self.held >= MAX_HELD_BYTES || self.queue.len() >= MAX_HELD_SLICES
    }

    pub(super) fn under_half(&self) -> bool {
        self.held <= MAX_HELD_BYTES / 2 && self.queue.len() <= MAX_HELD_SLICES / 2
    }
}

#[cfg(test)]
mod tests {
    use io_uring::{opcode, types};

    use super::*;
    use crate::uring_pool::BGID;

    fn bytes(e: &squeue::Entry) -> [u8; 64] {
        // SAFETY: Entry is 64 bytes (asserted beside cap_recv) of integers and unions of
        // integers, so any copy of it is a valid [u8; 64].
        unsafe { std::mem::transmute_copy(e) }
    }

    /// The offsets cap_recv writes are the ones the crate's own setters write: `len` through
    /// the non-bundle multishot recv's `len`, `optlen` through SetSockOpt's `optlen`.
    #[test]
    fn sqe_layout_matches_the_crate() {
        let with_len = bytes(
            &opcode::RecvMulti::new(types::Fd(3), BGID)
                .len(0xa1b2_c3d4)
                .build(),
        );
        let u32_at =
            |b: &[u8; 64], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
        assert_eq!(u32_at(&with_len, SQE_LEN_AT), 0xa1b2_c3d4);
        let opt = bytes(
            &opcode::SetSockOpt::new(types::Fd(3), 1, 2, std::ptr::null(), 0x5566_7788).build(),
        );
        assert_eq!(u32_at(&opt, SQE_OPTLEN_AT), 0x5566_7788);
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
}
