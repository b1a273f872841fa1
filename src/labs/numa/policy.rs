//! Memory policy at the edge: an anonymous region, mbind(2) to place it, move_pages(2) to
//! check where its pages really landed. The only unsafe code of the lab lives here.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};

/// How a region's pages are placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// All pages on one node (MPOL_BIND).
    Bind(usize),
    /// Pages round-robin over these nodes (MPOL_INTERLEAVE).
    Interleave(Vec<usize>),
    /// The default policy: each page on the node of the CPU that first touches it.
    FirstTouch,
}

const MPOL_BIND: libc::c_ulong = 2;
const MPOL_INTERLEAVE: libc::c_ulong = 3;

/// An anonymous private mapping, unmapped on drop.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a Region owns its mapping outright; moving it to another thread moves that ownership.
// Shared use across threads goes through `slice` / `slice_mut` under the caller's borrow rules.
unsafe impl Send for Region {}
// SAFETY: `&Region` only hands out shared slices; mutation needs `&mut Region`.
unsafe impl Sync for Region {}

impl Region {
    /// Map `len` bytes (not yet touched: no page is placed until written).
    pub fn map(len: usize) -> Result<Region> {
        if len == 0 {
            return Err(anyhow!("a region needs at least one byte"));
        }
        // SAFETY: a fresh anonymous mapping at an address the kernel chooses aliases nothing.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .map_err(|e| anyhow!("mapping {len} bytes: {e}"))?;
        Ok(Region {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Ask for transparent huge pages (where THP is in madvise or always mode), so that a
    /// latency figure is the memory's and page walks weigh little in it.
    pub fn want_huge_pages(&self) {
        // SAFETY: advice on our own mapping changes how it is backed, never its contents.
        let _ = unsafe {
            rustix::mm::madvise(self.ptr.cast(), self.len, rustix::mm::Advice::LinuxHugepage)
        };
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Place the region's (untouched) pages.
    pub fn place(&self, placement: &Placement) -> Result<()> {
        self.place_range(0, self.len, placement)
    }

    /// Place `len` bytes from `offset` (both page aligned) before they are touched.
    pub fn place_range(&self, offset: usize, len: usize, placement: &Placement) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(anyhow!(
                "range {offset}+{len} is outside the {}-byte region",
                self.len
            ));
        }
        let (mode, nodes): (libc::c_ulong, Vec<usize>) = match placement {
            Placement::Bind(n) => (MPOL_BIND, vec![*n]),
            Placement::Interleave(ns) => (MPOL_INTERLEAVE, ns.clone()),
            Placement::FirstTouch => return Ok(()),
        };
        let mask = node_mask(&nodes);
        let maxnode = (mask.len() * 64 + 1) as libc::c_ulong;
        // SAFETY: the range is our own mapping; the mask outlives the call and holds
        // maxnode - 1 bits, which is what the kernel reads.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr.wrapping_add(offset) as *mut libc::c_void,
                len as libc::c_ulong,
                mode,
                mask.as_ptr(),
                maxnode,
                0 as libc::c_ulong,
            )
        };
        if rc != 0 {
            return Err(anyhow!(
                "mbind to node(s) {nodes:?}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    pub fn as_slice_u64(&self) -> &[u64] {
        // SAFETY: the mapping is len bytes, page aligned (so u64 aligned), readable, and
        // lives as long as self; anonymous memory reads as zeros before it is written.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u64>(), self.len / 8) }
    }

    pub fn as_mut_slice_u64(&mut self) -> &mut [u64] {
        // SAFETY: as above, and `&mut self` makes this the only view of the memory.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), self.len / 8) }
    }

    /// Nodes the region's pages are on, from up to `samples` pages spread over it:
    /// node -> pages seen. Pages not yet present are left out.
    pub fn nodes(&self, samples: usize) -> Result<BTreeMap<usize, usize>> {
        let page = rustix::param::page_size();
        let pages = self.len.div_ceil(page);
        let step = (pages / samples.max(1)).max(1);
        let addrs: Vec<*mut libc::c_void> = (0..pages)
            .step_by(step)
            .map(|i| self.ptr.wrapping_add(i * page).cast())
            .collect();
        let mut status = vec![0 as libc::c_int; addrs.len()];
        // SAFETY: with a null nodes argument move_pages only reports each page's node into
        // `status`, which has one slot per address; the addresses lie in our mapping.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0 as libc::c_int,
                addrs.len() as libc::c_ulong,
                addrs.as_ptr(),
                std::ptr::null::<libc::c_int>(),
                status.as_mut_ptr(),
                0 as libc::c_int,
            )
        };
        if rc < 0 {
            return Err(anyhow!(
                "move_pages (query): {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut seen = BTreeMap::new();
        for s in status {
            if let Ok(n) = usize::try_from(s) {
                *seen.entry(n).or_insert(0) += 1;
            }
        }
        Ok(seen)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and no slice of it outlives self.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// A kernel nodemask: bit n set for each node n, in 64-bit words.
pub fn node_mask(nodes: &[usize]) -> Vec<libc::c_ulong> {
    let top = nodes.iter().copied().max().unwrap_or(0);
    let mut mask = vec![0 as libc::c_ulong; top / 64 + 1];
    for &n in nodes {
        mask[n / 64] |= 1 << (n % 64);
    }
    mask
}

/// The node most of `seen` is on.
pub fn majority(seen: &BTreeMap<usize, usize>) -> Option<usize> {
    seen.iter().max_by_key(|(_, c)| **c).map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(node_mask(&[0]), vec![1]);
        assert_eq!(node_mask(&[1, 3]), vec![0b1010]);
        assert_eq!(node_mask(&[65]), vec![0, 2]);
        assert_eq!(majority(&BTreeMap::from([(0, 3), (1, 9)])), Some(1));
    }

    #[test]
    fn bound_pages_land_on_node_zero() {
        let mut r = Region::map(1 << 20).unwrap();
        r.place(&Placement::Bind(0)).unwrap();
        r.as_mut_slice_u64().fill(1);
        let seen = r.nodes(16).unwrap();
        assert_eq!(seen.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(r.as_slice_u64().iter().sum::<u64>(), (1 << 20) / 8);
    }

    #[test]
    fn binding_to_a_missing_node_is_an_error() {
        let r = Region::map(1 << 16).unwrap();
        assert!(r.place(&Placement::Bind(1000)).is_err());
    }
}
