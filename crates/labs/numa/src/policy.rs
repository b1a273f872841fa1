//! Memory policy at the edge: mbind(2) to place an untouched region (`measure::region`),
//! move_pages(2) to check where its pages really landed. The only unsafe code of the lab
//! lives here.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};

pub use costlab_core::measure::region::Region;

/// How a region's pages are placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// All pages on one node (MPOL_BIND).
    Bind(usize),
    /// Pages round-robin over these nodes (MPOL_INTERLEAVE).
    Interleave(Vec<usize>),
    /// The default policy: each page on the node of the CPU that first touches it.
    FirstTouch,
    /// Drop the range's policy (MPOL_DEFAULT): pages already placed stay where they are, but
    /// nothing holds them there (NUMA balancing may move them).
    Default,
}

const MPOL_DEFAULT: libc::c_ulong = 0;
const MPOL_BIND: libc::c_ulong = 2;
const MPOL_INTERLEAVE: libc::c_ulong = 3;

/// Place the region's (untouched) pages.
pub fn place(region: &Region, placement: &Placement) -> Result<()> {
    place_range(region, 0, region.len(), placement)
}

/// Place `len` bytes from `offset` (both page aligned) of `region` before they are touched.
pub fn place_range(
    region: &Region,
    offset: usize,
    len: usize,
    placement: &Placement,
) -> Result<()> {
    if offset.checked_add(len).is_none_or(|end| end > region.len()) {
        return Err(anyhow!(
            "range {offset}+{len} is outside the {}-byte region",
            region.len()
        ));
    }
    let (mode, nodes): (libc::c_ulong, Vec<usize>) = match placement {
        Placement::Bind(n) => (MPOL_BIND, vec![*n]),
        Placement::Interleave(ns) => (MPOL_INTERLEAVE, ns.clone()),
        Placement::Default => (MPOL_DEFAULT, Vec::new()),
        Placement::FirstTouch => return Ok(()),
    };
    let mask = node_mask(&nodes);
    let maxnode = (mask.len() * 64 + 1) as libc::c_ulong;
    // SAFETY: the range lies in the region's own mapping (checked above); the mask outlives
    // the call and holds maxnode - 1 bits, which is what the kernel reads. mbind changes where
    // pages go, never what the memory holds.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            region.raw().wrapping_add(offset) as *mut libc::c_void,
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

/// Nodes the region's pages are on, from up to `samples` pages spread over it:
/// node -> pages seen. Pages not yet present are left out.
pub fn nodes(region: &Region, samples: usize) -> Result<BTreeMap<usize, usize>> {
    let page = rustix::param::page_size();
    let pages = region.len().div_ceil(page);
    let step = (pages / samples.max(1)).max(1);
    let addrs: Vec<*mut libc::c_void> = (0..pages)
        .step_by(step)
        .map(|i| region.raw().wrapping_add(i * page).cast())
        .collect();
    let mut status = vec![0 as libc::c_int; addrs.len()];
    // SAFETY: with a null nodes argument move_pages only reports each page's node into
    // `status`, which has one slot per address; the addresses lie in the region's mapping.
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
        let mut r = Region::system_default(1 << 20).unwrap();
        place(&r, &Placement::Bind(0)).unwrap();
        r.as_mut_slice_u64().fill(1);
        let seen = nodes(&r, 16).unwrap();
        assert_eq!(seen.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(r.as_slice_u64().iter().sum::<u64>(), (1 << 20) / 8);
    }

    #[test]
    fn binding_to_a_missing_node_is_an_error() {
        let r = Region::system_default(1 << 16).unwrap();
        assert!(place(&r, &Placement::Bind(1000)).is_err());
    }
}
