//! The latency chase: every 64-byte line of a region holds the address of the next line of
//! one random cycle through all of them (`measure::cycle`), and the timed loop follows it.
//! Each load depends on the one before, so the time per step is the latency of wherever the
//! line lives (L1, L2, L3, DRAM), plus a page walk when the TLB misses; and because the order
//! is random, no prefetcher can run ahead.

use costlab_core::measure::region::Region;

pub const LINE: usize = 64;

/// Write the cycle into the first `lines` lines of `region`: line i holds the address of
/// line next[i]. Returns the start of the chase.
pub fn lay_out(region: &mut Region, next: &[u32]) -> *const usize {
    assert!(
        next.len() * LINE <= region.len(),
        "cycle larger than the region"
    );
    let base = region.as_mut_ptr();
    for (i, &n) in next.iter().enumerate() {
        // SAFETY: i and n are below next.len(), so both lines lie inside the region; the
        // line start is 64-byte aligned, so the usize write is aligned.
        unsafe {
            let target = base.add(n as usize * LINE) as usize;
            base.add(i * LINE).cast::<usize>().write(target);
        }
    }
    base as *const usize
}

/// Follow the chain `steps` times from `p`; returns where it stopped (to resume from).
///
/// # Safety
/// `p` must point into a chain laid out by `lay_out` whose region is still mapped.
#[inline(never)]
pub unsafe fn chase(mut p: *const usize, steps: u64) -> *const usize {
    let mut left = steps;
    while left >= 8 {
        for _ in 0..8 {
            p = p.read() as *const usize;
        }
        left -= 8;
    }
    while left > 0 {
        p = p.read() as *const usize;
        left -= 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::measure::cycle::sattolo;
    use costlab_core::measure::region::PageKind;

    #[test]
    fn the_chase_visits_every_line_and_returns_to_the_start() {
        let n = 256;
        let mut r = Region::new((n * LINE) as u64, PageKind::Small).unwrap();
        let next = sattolo(n, 9);
        let start = lay_out(&mut r, &next);
        // SAFETY: the chain was laid out in r, which is alive.
        let end = unsafe { chase(start, n as u64) };
        assert_eq!(end, start);
        // SAFETY: as above.
        let one = unsafe { chase(start, 1) };
        assert_eq!(one as usize, start as usize + next[0] as usize * LINE);
    }
}
