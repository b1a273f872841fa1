//! Page-aligned, zeroed byte buffers for data that the kernel copies to or from.
//!
//! Where a buffer starts matters more than it should: on the AMD EPYC (Zen) this was
//! measured on, the kernel's copy into a user buffer (`_copy_to_iter`, a `rep movsb`) ran about
//! five times slower when the destination sat 8 or 16 bytes past a 64-byte boundary than at 0,
//! 32, 48 or 64 (the io_uring echo server at 64 KiB messages: 51-52% of its CPU in that copy
//! against 10-14%). A `Vec<u8>` from malloc starts 16 bytes into its chunk, so two servers
//! that differ only in which allocation a buffer came from would differ by that much. Every
//! buffer a server or a loader hands to the kernel starts on a page, so none of them pays it
//! by chance and engines compare on their design alone.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment every buffer gets: a page, which is also a cache line and a vector width.
pub const ALIGN: usize = 4096;
/// A transparent huge page on x86-64.
pub const HUGE: usize = 2 << 20;

/// A zeroed buffer of `len` bytes starting on a page boundary.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access gives only &[u8], like a Box<[u8]>.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least one byte is allocated). Large buffers come
    /// from mmap through the allocator, so their pages become resident only when touched.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let layout = Self::layout(len, ALIGN);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf {
            ptr,
            len,
            align: ALIGN,
        }
    }

    /// A zeroed buffer of `len` bytes on a 2 MiB boundary, asked to be backed by transparent
    /// huge pages (MADV_HUGEPAGE, which THP's "madvise" mode needs). Returns the buffer and
    /// whether the kernel took the advice (it does not where THP is "never" or absent); the
    /// pages themselves come at first touch, huge where the kernel has them free.
    pub fn zeroed_huge(len: usize) -> (AlignedBuf, bool) {
        let len = len.max(1).div_ceil(HUGE) * HUGE;
        let layout = Layout::from_size_align(len, HUGE).expect("buffer size overflows a Layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: advice on memory we own; it changes how pages are backed, not their content.
        let advised = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) } == 0;
        (
            AlignedBuf {
                ptr,
                len,
                align: HUGE,
            },
            advised,
        )
    }

    fn layout(len: usize, align: usize) -> Layout {
        Layout::from_size_align(len.max(1), align).expect("buffer size overflows a Layout")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for AlignedBuf {
    /// An empty buffer, to be replaced by a real one when needed.
    fn default() -> AlignedBuf {
        AlignedBuf::zeroed(0)
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` or `zeroed_huge` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len, self.align)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes at {:p})", self.len, self.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_buffers_start_on_2_mib_and_round_up_to_it() {
        for len in [1, HUGE - 1, HUGE + 1] {
            let (mut b, _advised) = AlignedBuf::zeroed_huge(len);
            assert_eq!(b.as_ptr() as usize % HUGE, 0, "{len}");
            assert_eq!(b.len(), len.div_ceil(HUGE) * HUGE);
            assert!(b.iter().all(|&x| x == 0));
            b[len - 1] = 7;
            assert_eq!(b[len - 1], 7);
        }
    }

    #[test]
    fn starts_on_a_page_is_zeroed_and_writable() {
        for len in [0, 1, 16, 4095, 4096, 65536 + 7, 1 << 20] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0, "{len}");
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            for (i, x) in b.iter_mut().enumerate() {
                *x = i as u8;
            }
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u8));
        }
    }
}
