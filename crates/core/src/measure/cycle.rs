//! One random cycle through every element of 0..n, for dependent-load chases: a lab lays the
//! cycle out in memory (the mem lab as pointers in a mapped region, the numa lab as word
//! indices) and follows it, so each load waits on the one before and, the order being random,
//! no prefetcher can run ahead. Both labs need the same cycle, so it lives here.

/// splitmix64: a tiny, good 64-bit generator for seeding and shuffling. Any seed, 0 included,
/// gives a full-period sequence.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform integer in 0..bound (bound > 0), by multiply-shift rather than `%`, which would
/// favour the low values.
fn below(state: &mut u64, bound: usize) -> usize {
    ((u128::from(splitmix(state)) * bound as u128) >> 64) as usize
}

/// Sattolo's algorithm: a random permutation of 0..n that is one single cycle.
/// `next[i]` is the element that follows element i; the same seed gives the same cycle.
pub fn sattolo(n: usize, seed: u64) -> Vec<u32> {
    assert!(n <= u32::MAX as usize, "too many elements for a u32 cycle");
    let mut next: Vec<u32> = (0..n as u32).collect();
    let mut state = seed;
    // Unlike Fisher-Yates, j < i strictly: that is what makes the result one cycle.
    for i in (1..n).rev() {
        let j = below(&mut state, i);
        next.swap(i, j);
    }
    next
}

/// Length of the cycle through element 0; a single cycle has length `next.len()`.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `next` is a permutation of 0..n.
    fn is_permutation(next: &[u32]) -> bool {
        let mut seen = next.to_vec();
        seen.sort_unstable();
        seen.iter().enumerate().all(|(i, &v)| v as usize == i)
    }

    #[test]
    fn sattolo_makes_one_cycle_through_every_element() {
        for n in [3usize, 5, 64, 1000, 4096] {
            for seed in [0u64, 1, 42, 7_777] {
                let next = sattolo(n, seed);
                assert_eq!(cycle_len(&next), n, "n={n} seed={seed}");
                assert!(is_permutation(&next), "n={n} seed={seed}");
                assert!(
                    next.iter().enumerate().all(|(i, &v)| v as usize != i),
                    "n={n} seed={seed}: an element follows itself"
                );
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_cycle_and_different_seeds_differ() {
        assert_eq!(sattolo(64, 1), sattolo(64, 1));
        assert_ne!(sattolo(64, 1), sattolo(64, 2));
        assert_ne!(sattolo(1000, 0), sattolo(1000, 1));
    }

    #[test]
    fn the_smallest_cycles() {
        assert_eq!(sattolo(0, 5), Vec::<u32>::new());
        assert_eq!(cycle_len(&[]), 0);
        // One element follows itself; two can only swap.
        for seed in [0u64, 1, 99] {
            assert_eq!(sattolo(1, seed), vec![0]);
            assert_eq!(cycle_len(&sattolo(1, seed)), 1);
            assert_eq!(sattolo(2, seed), vec![1, 0]);
            assert_eq!(cycle_len(&sattolo(2, seed)), 2);
        }
    }

    #[test]
    fn cycle_len_sees_a_broken_cycle() {
        // 0 -> 1 -> 0, and 2 -> 3 -> 2: two cycles.
        assert_eq!(cycle_len(&[1, 0, 3, 2]), 2);
        // 0 -> 0 alone, 1 -> 2 -> 1 apart.
        assert_eq!(cycle_len(&[0, 2, 1]), 1);
    }

    #[test]
    fn splitmix_is_seeded() {
        let (mut a, mut b, mut c) = (7u64, 7u64, 8u64);
        let from_a: Vec<u64> = (0..4).map(|_| splitmix(&mut a)).collect();
        let from_b: Vec<u64> = (0..4).map(|_| splitmix(&mut b)).collect();
        let from_c: Vec<u64> = (0..4).map(|_| splitmix(&mut c)).collect();
        assert_eq!(from_a, from_b);
        assert_ne!(from_a, from_c);
    }
}
