//! The lab's own small kernels: a dependent pointer chase and a streaming read. Plain scalar
//! code on purpose: the lab compares placements, and the same kernel runs for every one.

use std::hint::black_box;

use costlab_core::measure::cycle;

/// Words per 64-byte line.
const LINE_WORDS: usize = 8;

/// Write one random cycle through every line of `words` (`measure::cycle`): line i's first
/// word holds the word index of the next line. Every load depends on the one before, so the
/// prefetcher cannot hide the memory's latency. Returns the number of lines.
pub fn build_chase(words: &mut [u64], seed: u64) -> usize {
    let lines = words.len() / LINE_WORDS;
    for (i, &next) in cycle::sattolo(lines, seed).iter().enumerate() {
        words[i * LINE_WORDS] = (next as usize * LINE_WORDS) as u64;
    }
    lines
}

/// Follow the chain `steps` times from word index `at`; returns where it stopped.
pub fn chase(words: &[u64], mut at: usize, steps: u64) -> usize {
    for _ in 0..steps {
        at = words[at] as usize;
    }
    black_box(at)
}

/// Read every word once; four sums so the adds do not serialise the loads.
pub fn read_all(words: &[u64]) -> u64 {
    let mut s = [0u64; 4];
    let mut chunks = words.chunks_exact(4);
    for c in &mut chunks {
        s[0] = s[0].wrapping_add(c[0]);
        s[1] = s[1].wrapping_add(c[1]);
        s[2] = s[2].wrapping_add(c[2]);
        s[3] = s[3].wrapping_add(c[3]);
    }
    let tail: u64 = chunks.remainder().iter().fold(0, |a, &b| a.wrapping_add(b));
    black_box(s[0] ^ s[1] ^ s[2] ^ s[3] ^ tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_is_one_cycle_through_every_line() {
        let mut words = vec![0u64; 1000 * LINE_WORDS];
        let lines = build_chase(&mut words, 42);
        assert_eq!(lines, 1000);
        let mut seen = vec![false; lines];
        let mut at = 0;
        for _ in 0..lines {
            assert!(
                !seen[at / LINE_WORDS],
                "line visited twice before the cycle closed"
            );
            seen[at / LINE_WORDS] = true;
            at = chase(&words, at, 1);
        }
        assert_eq!(at, 0);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn reads_every_word() {
        let words: Vec<u64> = (1..=10).collect();
        // The xor of the four lane sums (1+5, 2+6, 3+7, 4+8) and the tail (9+10).
        let lanes: [u64; 4] = [6, 8, 10, 12];
        assert_eq!(
            read_all(&words),
            lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ 19
        );
        assert_eq!(build_chase(&mut [0u64; 4], 1), 0);
    }
}
