//! The store kernels of `--shared` bandwidth cases: every thread of the team writes the same
//! region at once, so each store is an 8-byte relaxed atomic one (defined behaviour in Rust,
//! where plain or SIMD stores racing on the same bytes are not).
//!
//! # The contract
//!
//! With `--shared` one region serves every worker, and the write and copy cases make several
//! threads store to the same bytes concurrently. Rust (like C11) calls two unsynchronised
//! accesses to one location, at least one a non-atomic write, a data race, and a data race is
//! undefined behaviour however benign the values; volatile accesses do not change that. So
//! every store these kernels make goes through [`AtomicU64::store`] with `Relaxed` ordering
//! (on x86-64 and AArch64 a plain 8-byte store: no fence, no lock), and:
//!
//! - the stores' values are never read as data, so relaxed ordering suffices;
//! - the loads a shared copy makes come from the source half, which no thread writes while a
//!   case runs, so they may stay plain (non-atomic) loads: they race with nothing;
//! - a read case only loads, so it keeps the SIMD kernels of [`super::kernels`];
//! - between cases the team is joined, which orders each case's stores before the next
//!   case's plain loads, so mixing atomic and plain accesses across cases is not a race;
//! - the C library's memcpy and memset are not run with `--shared` (their stores would race
//!   the same way, inside C).
//!
//! The single-owner kernels in `kernels.rs` are untouched: they still use the widest SIMD
//! stores and streaming stores, since only their own thread touches their region.

use std::sync::atomic::{AtomicU64, Ordering};

use super::kernels::Lanes;

/// The `isa` and `store` case keys of a shared kernel that stores.
pub const ISA_KEY: &str = "scalar";
pub const STORE_KEY: &str = "atomic-relaxed";

/// Store `v` into the 8 words of the line at `p`, atomically per word.
///
/// # Safety
/// `p` is 64-byte aligned and the line `p..p+64` lies in a live mapping that every thread
/// touching it accesses only atomically while this runs (the module's contract).
#[inline(always)]
unsafe fn store_line(p: *mut u8, v: u64) {
    let q = p.cast::<u64>();
    for j in 0..8 {
        // SAFETY: q+j is 8-byte aligned and inside the line (our caller's promise), and no
        // thread accesses it non-atomically while the team runs, as AtomicU64::from_ptr
        // requires.
        unsafe { AtomicU64::from_ptr(q.add(j)) }.store(v, Ordering::Relaxed);
    }
}

/// Copy the line at `s` to the line at `d`: plain loads, atomic stores.
///
/// # Safety
/// As `store_line` for `d`; `s..s+64` is a readable, 64-byte aligned line that no thread
/// writes while this runs.
#[inline(always)]
unsafe fn copy_line(d: *mut u8, s: *const u8) {
    let (dq, sq) = (d.cast::<u64>(), s.cast::<u64>());
    for j in 0..8 {
        // SAFETY: sq+j is aligned, readable and written by no one during the case; dq+j is
        // aligned and only ever stored to atomically during the case (our caller's promise).
        unsafe { AtomicU64::from_ptr(dq.add(j)).store(sq.add(j).read(), Ordering::Relaxed) };
    }
}

/// Write `value` to every byte of `p..p+len`.
///
/// # Safety
/// `p` 64-byte aligned, `len` a multiple of 64, `p..p+len` inside a live mapping that, while
/// this runs, every thread accesses only through these kernels (the module's contract).
pub unsafe fn write_seq(p: *mut u8, len: usize, value: u8) {
    let v = u64::from_ne_bytes([value; 8]);
    let mut off = 0;
    while off < len {
        // SAFETY: off + 64 <= len, so the line is inside the range our caller vouched for.
        unsafe { store_line(p.add(off), v) };
        off += 64;
    }
}

/// Copy `len` bytes from `s` to `d` (the ranges do not overlap).
///
/// # Safety
/// As `write_seq` for `d`; `s..s+len` (64-byte aligned) readable and written by no thread
/// while this runs.
pub unsafe fn copy_seq(d: *mut u8, s: *const u8, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: off + 64 <= len: both lines lie in the ranges our caller vouched for.
        unsafe { copy_line(d.add(off), s.add(off)) };
        off += 64;
    }
}

/// Write `count` random whole lines of the `lines` lines at `p` (the same draws as
/// `kernels::write_rand`).
///
/// # Safety
/// As `write_seq` for `p..p+lines*64`; `count` a multiple of 8.
pub unsafe fn write_rand(p: *mut u8, lines: usize, count: usize, rng: &mut Lanes, value: u8) {
    let v = u64::from_ne_bytes([value; 8]);
    let mut done = 0;
    while done < count {
        for i in rng.next8(lines) {
            // SAFETY: i < lines, so the line lies in the range our caller vouched for.
            unsafe { store_line(p.add(i * 64), v) };
        }
        done += 8;
    }
}

/// Copy `count` random lines of `s` to random lines of `d` (both `lines` lines long).
///
/// # Safety
/// As `copy_seq` for `d..d+lines*64` and `s..s+lines*64`; `count` a multiple of 8.
pub unsafe fn copy_rand(d: *mut u8, s: *const u8, lines: usize, count: usize, rng: &mut Lanes) {
    let mut done = 0;
    while done < count {
        let from = rng.next8(lines);
        let to = rng.next8(lines);
        for k in 0..8 {
            // SAFETY: from[k], to[k] < lines: both lines lie in the ranges vouched for.
            unsafe { copy_line(d.add(to[k] * 64), s.add(from[k] * 64)) };
        }
        done += 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::measure::region::{PageKind, Region};

    #[test]
    fn shared_kernels_write_and_copy_every_byte_from_several_threads() {
        let r = Region::new(64 << 10, PageKind::Small).unwrap();
        let half = r.len() / 2;
        let base = r.raw() as usize;
        std::thread::scope(|s| {
            for t in 0..3u64 {
                s.spawn(move || {
                    let p = base as *mut u8;
                    // SAFETY: the region is live for the scope, aligned, and these threads
                    // touch its first half only through write_seq's atomic stores.
                    unsafe { write_seq(p, half, 0x5a) };
                    let mut rng = Lanes::new(t + 1);
                    // SAFETY: as above; write_rand draws lines inside the first half.
                    unsafe { write_rand(p, half / 64, 64, &mut rng, 0x5a) };
                });
            }
        });
        assert!(r.as_slice()[..half].iter().all(|&b| b == 0x5a));
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(move || {
                    let p = base as *mut u8;
                    // SAFETY: the source half is only read, the destination half only
                    // stored to atomically, for the scope's length.
                    unsafe { copy_seq(p.add(half), p, half) };
                });
            }
        });
        assert!(r.as_slice()[half..].iter().all(|&b| b == 0x5a));
    }
}
