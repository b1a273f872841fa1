//! The Mann-Whitney U test: do two sets of samples come from the same distribution?
//!
//! It asks only how the samples rank against each other, so it needs no assumption of
//! normality (benchmark samples are skewed, with a long tail). For small sets the p-value comes
//! from the exact distribution of U (every way of splitting the ranks); past that, or with
//! tied samples, from the normal approximation with tie and continuity corrections.

/// Largest n1 + n2 for which the exact distribution is used.
const EXACT_MAX_TOTAL: usize = 40;

/// The outcome of a two-sided test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first set: the number of (a, b) pairs with a > b, ties counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// The smallest two-sided p any outcome could give with these set sizes: when it is above
    /// alpha, not even a full separation of the samples could be called significant.
    pub min_p: f64,
    /// True when `p` came from the exact distribution.
    pub exact: bool,
}

/// Ranks of `all` (1-based, ties get the mean of the ranks they span) and whether any tied.
fn mid_ranks(all: &[f64]) -> (Vec<f64>, bool) {
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&i, &j| all[i].total_cmp(&all[j]));
    let mut ranks = vec![0.0; all.len()];
    let mut ties = false;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && all[order[j + 1]] == all[order[i]] {
            j += 1;
        }
        ties |= j > i;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    (ranks, ties)
}

/// How many of the C(n1 + n2, n1) splits of the ranks give each U = 0 ..= n1 * n2.
/// Built up by the recurrence f(n1, n2, u) = f(n1 - 1, n2, u - n2) + f(n1, n2 - 1, u): the
/// largest rank belongs either to the first set (and beats all n2 of the second) or not.
pub fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // table[j] holds the counts for (i, j) while i grows; start with i = 0: one way, U = 0.
    let mut table: Vec<Vec<f64>> = (0..=n2).map(|_| vec![1.0]).collect();
    for i in 1..=n1 {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n2 + 1);
        next.push(vec![1.0]); // (i, 0): U is always 0
        for j in 1..=n2 {
            let mut f = vec![0.0; i * j + 1];
            // first set holds the largest rank: U grows by j
            for (u, c) in table[j].iter().enumerate() {
                f[u + j] += c;
            }
            // second set holds it: counts of (i, j - 1)
            for (u, c) in next[j - 1].iter().enumerate() {
                f[u] += c;
            }
            next.push(f);
        }
        table = next;
    }
    table.pop().unwrap_or_else(|| vec![1.0])
}

/// Standard normal upper tail, 1 - Phi(z), by the complementary error function.
fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// erfc with relative error below 1.2e-7 (Numerical Recipes' Chebyshev fit).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Two-sided Mann-Whitney U test of `a` against `b`. `None` when either set is empty.
pub fn test(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let (ranks, ties) = mid_ranks(&all);
    let r1: f64 = ranks[..n1].iter().sum();
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let nn = (n1 * n2) as f64;
    let exact_ok = n1 + n2 <= EXACT_MAX_TOTAL;
    let min_p = if exact_ok {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        (2.0 / total).min(1.0)
    } else {
        2.0 * normal_upper_tail(normal_z(nn, nn, n1, n2, &[]))
    };
    if exact_ok && !ties {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let k = u.round() as usize;
        let lower: f64 = counts[..=k].iter().sum::<f64>() / total;
        let upper: f64 = counts[k..].iter().sum::<f64>() / total;
        let p = (2.0 * lower.min(upper)).min(1.0);
        return Some(MannWhitney {
            u,
            p,
            min_p,
            exact: true,
        });
    }
    let tie_groups = tie_sizes(&all);
    let z = normal_z(u, nn, n1, n2, &tie_groups);
    let p = (2.0 * normal_upper_tail(z)).min(1.0);
    Some(MannWhitney {
        u,
        p,
        min_p,
        exact: false,
    })
}

/// Sizes of the groups of equal values (only groups of two or more matter).
fn tie_sizes(all: &[f64]) -> Vec<usize> {
    let mut v = all.to_vec();
    v.sort_by(f64::total_cmp);
    let mut sizes = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[i] {
            j += 1;
        }
        if j > i {
            sizes.push(j - i + 1);
        }
        i = j + 1;
    }
    sizes
}

/// |z| of U under the null, with the continuity correction and the tie-corrected variance.
fn normal_z(u: f64, nn: f64, n1: usize, n2: usize, ties: &[usize]) -> f64 {
    let n = (n1 + n2) as f64;
    let mean = nn / 2.0;
    let tie_term: f64 = ties
        .iter()
        .map(|&t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum::<f64>()
        / (n * (n - 1.0));
    let var = nn / 12.0 * ((n + 1.0) - tie_term);
    if var <= 0.0 {
        return 0.0;
    }
    let d = ((u - mean).abs() - 0.5).max(0.0);
    d / var.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_published_tables() {
        // n1 = n2 = 3: 20 splits, U = 0..9.
        assert_eq!(
            u_counts(3, 3),
            vec![1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0]
        );
        // n1 = n2 = 4: 70 splits.
        assert_eq!(
            u_counts(4, 4),
            vec![
                1.0, 1.0, 2.0, 3.0, 5.0, 5.0, 7.0, 7.0, 8.0, 7.0, 7.0, 5.0, 5.0, 3.0, 2.0, 1.0, 1.0
            ]
        );
        assert_eq!(u_counts(5, 5).iter().sum::<f64>(), 252.0);
        assert_eq!(u_counts(2, 3), vec![1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn full_separation_of_five_and_five_gives_2_over_252() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        let r = test(&a, &b).unwrap();
        assert_eq!(r.u, 0.0);
        assert!((r.p - 2.0 / 252.0).abs() < 1e-12, "{}", r.p);
        assert!((r.min_p - 0.0079).abs() < 1e-4);
        assert!(r.exact);
        // Reversed, U is n1 * n2 and p the same.
        let r = test(&b, &a).unwrap();
        assert_eq!(r.u, 25.0);
        assert!((r.p - 2.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn interleaved_samples_are_not_significant() {
        // Ranks of a: 1,3,5,7,9 -> R1 = 25, U = 25 - 15 = 10; P(U <= 10) = 0.345 for 5 vs 5,
        // so p = 0.690 (table value).
        let a = [1.0, 3.0, 5.0, 7.0, 9.0];
        let b = [2.0, 4.0, 6.0, 8.0, 10.0];
        let r = test(&a, &b).unwrap();
        assert_eq!(r.u, 10.0);
        let counts = u_counts(5, 5);
        let lower: f64 = counts[..=10].iter().sum();
        assert_eq!(lower, 87.0);
        assert!((r.p - 2.0 * 87.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn four_and_four_one_overlap() {
        // a = {1,2,3,5}, b = {4,6,7,8}: U = 1 (5 > 4). P(U <= 1) = 2/70, p = 4/70 = 0.0571.
        let r = test(&[1.0, 2.0, 3.0, 5.0], &[4.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(r.u, 1.0);
        assert!((r.p - 4.0 / 70.0).abs() < 1e-12);
        assert!((r.min_p - 2.0 / 70.0).abs() < 1e-12);
    }

    #[test]
    fn three_and_three_can_never_reach_five_percent() {
        let r = test(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((r.p - 0.1).abs() < 1e-12);
        assert!(r.min_p > 0.05);
    }

    #[test]
    fn ties_use_mid_ranks_and_the_normal_approximation() {
        // a = {1,2,2}, b = {2,3,4}: ranks 1, 3, 3 | 3, 5, 6 -> R1 = 7, U = 7 - 6 = 1.
        let r = test(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0]).unwrap();
        assert_eq!(r.u, 1.0);
        assert!(!r.exact);
        // mean 4.5; ties: one group of 3 -> (27 - 3) / (6 * 5) = 0.8; var = 9/12 * (7 - 0.8)
        // = 4.65; z = (3.5 - 0.5) / sqrt(4.65) = 1.3912; p = 2 * (1 - Phi(1.3912)) = 0.1642.
        assert!((r.p - 0.1642).abs() < 1e-3, "{}", r.p);
    }

    #[test]
    fn large_sets_use_the_normal_approximation() {
        // 30 vs 30 fully separated: U = 0, mean 450, var = 900 * 61 / 12 = 4575,
        // z = 449.5 / 67.64 = 6.646 -> p ~ 3.0e-11.
        let a: Vec<f64> = (0..30).map(f64::from).collect();
        let b: Vec<f64> = (30..60).map(f64::from).collect();
        let r = test(&a, &b).unwrap();
        assert!(!r.exact);
        assert_eq!(r.u, 0.0);
        assert!(r.p < 1e-9 && r.p > 1e-12, "{}", r.p);
        assert!(test(&[], &[1.0]).is_none());
    }

    #[test]
    fn erfc_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-6);
        assert!((2.0 * normal_upper_tail(1.959_964) - 0.05).abs() < 1e-6);
    }
}
