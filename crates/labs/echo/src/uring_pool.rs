//! The uring server's provided buffers: the ring the kernel takes receive buffers from, and
//! our mirror of it, which replays the kernel's rules to know which buffers a recv filled.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU16, Ordering};

use anyhow::{Context, Result};
use io_uring::{types, IoUring};

use costlab_core::error::usage;
use costlab_core::measure::aligned::AlignedBuf;

/// Buffers in the pool, and entries in the kernel's provided-buffer ring (a power of two).
pub(super) const BUF_COUNT: u16 = 1024;
/// Buffer sizes with and without the `big` feature. 32 KiB holds a 16 KiB message whole and
/// keeps a 64 KiB one to two buffers; with `inc`, small messages pack into one buffer.
pub(super) const BIG_BUF: usize = 32 * 1024;
pub(super) const SMALL_BUF: usize = 2048;
pub(super) const BGID: u16 = 7;
/// Buffers kept in the kernel's ring at first; doubled each time a recv finds it dry. The rest
/// wait in a last-freed-first-used stack, so the buffers in use stay warm in cache (the ring
/// itself is FIFO and would cycle through the whole pool).
pub(super) const RING_LOW: usize = 64;

/// The provided buffers: the ring the kernel takes from, and a mirror of it. The kernel does
/// not say which buffers a bundle filled beyond the first, nor where in an incrementally
/// consumed buffer a recv's bytes landed: both follow from its rules (buffers are taken from
/// the head in ring order; with IOU_PBUF_RING_INC a recv fills the head buffer from where the
/// last one stopped, and a buffer leaves the head only when full), which `take` replays.
pub(super) struct BufPool {
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
pub(super) struct Slice {
    pub(super) bid: u16,
    pub(super) start: u32,
    pub(super) end: u32,
}

impl BufPool {
    /// A pool of BUF_COUNT buffers of `size` bytes, on transparent huge pages if `huge` and
    /// the kernel takes the advice (the second value says whether it did).
    pub(super) fn new(size: usize, huge: bool) -> Result<(BufPool, bool)> {
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
    pub(super) fn register(&mut self, ring: &IoUring, inc: bool) -> Result<Option<String>> {
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
                "this kernel has no provided-buffer rings (Linux 5.19+); use --case uring-basic or epoll",
            ),
            _ => anyhow::Error::new(e).context("registering the provided-buffer ring"),
        })?;
        self.inc = false;
        Ok(refused)
    }

    fn mask(&self) -> u16 {
        BUF_COUNT - 1
    }

    pub(super) fn addr(&self, bid: u16) -> *const u8 {
        self.bufs[bid as usize * self.size..].as_ptr()
    }

    /// Buffers in the ring the kernel may still take or is filling.
    pub(super) fn avail(&self) -> usize {
        self.tail.wrapping_sub(self.head) as usize
    }

    /// Give spare buffers to the ring until it holds `target` (seen after `publish`).
    pub(super) fn top_up(&mut self) {
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

    pub(super) fn publish(&mut self) {
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
    pub(super) fn grow(&mut self) {
        self.target = (self.target * 2).min(BUF_COUNT as usize);
    }

    /// A recv put `res` bytes into buffers starting with `first`: replay the kernel's
    /// consumption, appending the slices (in order) to `out`.
    pub(super) fn take(&mut self, first: u16, res: usize, out: &mut VecDeque<Slice>) -> Result<()> {
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
    pub(super) fn take_empty(&mut self, bid: u16) {
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
    pub(super) fn release(&mut self, bid: u16) {
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
    let root = costlab_core::machine::sysfs::Root::new(std::path::Path::new("/"));
    let (mode, _) = costlab_core::machine::pages::read_thp(&root);
    !mode.is_empty() && mode != "never"
}

impl Drop for BufPool {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); nothing uses it after drop.
        let _ = unsafe { rustix::mm::munmap(self.entries.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
