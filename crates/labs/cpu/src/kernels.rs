//! The loops the cpu lab times.
//!
//! The branch test needs the branchy loop to branch. Left to itself the compiler turns
//! `if x >= 128 { sum += x }` into a conditional move or a vector mask (if-conversion), and
//! the data's order then costs nothing. So on x86-64 both loop bodies are written in inline
//! assembly, one element per asm block: the branchy body is `cmp; jb; add` (a conditional jump
//! the predictor must guess), the branchless body `lea; cmp; cmovae` (the same sum, no jump).
//! The compiler may unroll the loop around them but cannot change what is inside.
//! `objdump -d --no-show-raw-insn target/release/costlab | grep -A10 'kernels7branchy.*>:'`
//! shows `cmp $0x80; jb; add` in the loop (and `kernels10branchless`, `lea; cmp; cmovae`).
//! Elsewhere the
//! branchy body keeps its branch by putting an opaque call (`black_box`) in the taken arm only,
//! which the compiler can neither speculate nor predicate.

use std::hint::black_box;

/// Elements of at least this value take the branch: half of uniform random bytes.
pub const THRESHOLD: u8 = 128;

/// The sum of the elements of `data` at or above [`THRESHOLD`], through a conditional jump.
#[cfg(target_arch = "x86_64")]
pub fn branchy(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    for &x in data {
        let x = x as u64;
        // SAFETY: register-only arithmetic and a jump to a label inside the same block; no
        // memory is touched and the stack is not used.
        unsafe {
            std::arch::asm!(
                "cmp {x}, 128",
                "jb 2f",
                "add {sum}, {x}",
                "2:",
                x = in(reg) x,
                sum = inout(reg) sum,
                options(nomem, nostack),
            );
        }
    }
    sum
}

/// The same sum with no jump: the candidate sum is computed always and kept by a
/// conditional move.
#[cfg(target_arch = "x86_64")]
pub fn branchless(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    for &x in data {
        let x = x as u64;
        // SAFETY: register-only arithmetic and a conditional move; no memory, no stack.
        unsafe {
            std::arch::asm!(
                "lea {t}, [{sum} + {x}]",
                "cmp {x}, 128",
                "cmovae {sum}, {t}",
                x = in(reg) x,
                sum = inout(reg) sum,
                t = out(reg) _,
                options(nomem, nostack),
            );
        }
    }
    sum
}

#[cfg(not(target_arch = "x86_64"))]
pub fn branchy(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    for &x in data {
        if x >= THRESHOLD {
            // Opaque to the optimiser and so never hoisted out of the arm: the arm stays a
            // jump.
            sum += black_box(x) as u64;
        }
    }
    sum
}

#[cfg(not(target_arch = "x86_64"))]
pub fn branchless(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    for &x in data {
        let keep = ((x >= THRESHOLD) as u64).wrapping_neg();
        sum = sum.wrapping_add(black_box(x as u64) & keep);
    }
    sum
}

/// `n` bytes, uniform over 0..=255, from a fixed seed (xorshift: the same data every run).
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 56) as u8
        })
        .collect()
}

/// The sum of an `n` x `n` matrix stored row by row, read row by row: consecutive addresses,
/// every int of each line used.
pub fn row_major(m: &[u64], n: usize) -> u64 {
    let mut sum = 0u64;
    for row in m.chunks_exact(n) {
        for &x in row {
            sum = sum.wrapping_add(x);
        }
    }
    black_box(sum)
}

/// The same sum read column by column: each load is `n` ints past the last, a new line (and,
/// beyond 512 columns, a new 4 KiB page) every time.
pub fn column_major(m: &[u64], n: usize) -> u64 {
    let mut sum = 0u64;
    for j in 0..n {
        for i in 0..n {
            sum = sum.wrapping_add(m[i * n + j]);
        }
    }
    black_box(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_branch_bodies_sum_the_same() {
        let data = random_bytes(10_000, 7);
        let want: u64 = data
            .iter()
            .filter(|&&x| x >= THRESHOLD)
            .map(|&x| x as u64)
            .sum();
        assert_eq!(branchy(&data), want);
        assert_eq!(branchless(&data), want);
        let mut sorted = data.clone();
        sorted.sort_unstable();
        assert_eq!(branchy(&sorted), want);
        // Uniform: about half take the branch.
        let taken = data.iter().filter(|&&x| x >= THRESHOLD).count();
        assert!((4000..6000).contains(&taken), "{taken}");
        assert_eq!(random_bytes(16, 3), random_bytes(16, 3));
    }

    #[test]
    fn both_loop_orders_sum_the_same() {
        let n = 37;
        let m: Vec<u64> = (0..(n * n) as u64).collect();
        let want: u64 = m.iter().sum();
        assert_eq!(row_major(&m, n), want);
        assert_eq!(column_major(&m, n), want);
    }
}
