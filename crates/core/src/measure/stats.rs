//! Summaries of samples: median and spread. Every figure costlab prints is one of these.

pub use crate::model::summary::{median_sorted, Summary};

/// Median of any slice (copies and sorts); NaN for an empty slice.
pub fn median(samples: &[f64]) -> f64 {
    Summary::of(samples).map_or(f64::NAN, |s| s.median)
}

/// Ratio of two sample sets as a set of samples: every a_i / b_j pair's median would
/// overstate certainty, so pair them in order (a_i / b_i), which is how side-by-side
/// interleaved runs are taken.
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(_, y)| **y != 0.0)
        .map(|(x, y)| x / y)
        .collect()
}

/// Least-squares line y = a + b x through the points: (a, b); None with fewer than two
/// distinct x.
pub fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let k = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / k;
    let my = points.iter().map(|p| p.1).sum::<f64>() / k;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_medians() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
    }

    #[test]
    fn mad_ignores_one_outlier() {
        let s = Summary::of(&[10.0, 10.0, 11.0, 9.0, 1000.0]).unwrap();
        assert_eq!(s.median, 10.0);
        assert_eq!(s.mad, 1.0);
        assert_eq!(s.max, 1000.0);
    }

    #[test]
    fn empty_and_nan_give_none() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn paired_ratios_skip_zero_divisors() {
        assert_eq!(
            paired_ratios(&[2.0, 4.0, 6.0], &[1.0, 0.0, 3.0]),
            vec![2.0, 2.0]
        );
    }
}
