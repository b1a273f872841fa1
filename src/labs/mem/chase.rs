//! The latency chase: every 64-byte line of a region holds the address of the next line of
//! one random cycle through all of them (Sattolo's algorithm), and the timed loop follows it.
//! Each load depends on the one before, so the time per step is the latency of wherever the
//! line lives (L1, L2, L3, DRAM), plus a page walk when the TLB misses; and because the order
//! is random, no prefetcher can run ahead.

use super::region::Region;

pub const LINE: usize = 64;

/// splitmix64: a tiny, good 64-bit generator for seeding and shuffling.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform integer in 0..bound (bound > 0).
fn below(state: &mut u64, bound: usize) -> usize {
    ((u128::from(splitmix(state)) * bound as u128) >> 64) as usize
}

/// Sattolo's algorithm: a random permutation of 0..n that is one single cycle.
/// `next[i]` is the line that follows line i.
pub fn sattolo(n: usize, seed: u64) -> Vec<u32> {
    assert!(n <= u32::MAX as usize, "too many lines for a u32 cycle");
    let mut next: Vec<u32> = (0..n as u32).collect();
    let mut state = seed;
    // Unlike Fisher-Yates, j < i strictly: that is what makes the result one cycle.
    for i in (1..n).rev() {
        let j = below(&mut state, i);
        next.swap(i, j);
    }
    next
}

/// Length of the cycle through line 0 (tests: it must be every line).
pub fn cycle_len(next: &[u32]) -> usize {
    if next.is_empty() {
        return 0;
    }
    let mut at = next[0] as usize;
    let mut len = 1;
    while at != 0 && len <= next.len() {
        at = next[at] as usize;
        len += 1;
    }
    len
}

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
    use crate::labs::mem::region::PageKind;

    #[test]
    fn sattolo_makes_one_cycle_through_every_line() {
        for n in [1usize, 2, 3, 5, 64, 1000, 4096] {
            for seed in [1u64, 42, 7_777] {
                let next = sattolo(n, seed);
                assert_eq!(cycle_len(&next), n, "n={n} seed={seed}");
                let mut seen = next.clone();
                seen.sort_unstable();
                assert!(seen.iter().enumerate().all(|(i, &v)| v as usize == i));
                if n > 1 {
                    assert!(next.iter().enumerate().all(|(i, &v)| v as usize != i));
                }
            }
        }
        assert_ne!(sattolo(64, 1), sattolo(64, 2));
    }

    #[test]
    fn cycle_len_sees_a_broken_cycle() {
        // 0 -> 1 -> 0, and 2 -> 3 -> 2: two cycles.
        assert_eq!(cycle_len(&[1, 0, 3, 2]), 2);
    }

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
