//! Summaries of samples: median and spread. Every figure costlab prints is one of these.

use serde::{Deserialize, Serialize};

/// Median and spread of a set of samples. `mad` is the median absolute deviation from the
/// median (unscaled), a spread that one outlier cannot move.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mad: f64,
    pub n: usize,
}

impl Summary {
    /// Summarise samples; `None` when there are none (or only NaNs).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let median = median_sorted(&v);
        let mut dev: Vec<f64> = v.iter().map(|x| (x - median).abs()).collect();
        dev.sort_by(f64::total_cmp);
        Some(Summary {
            median,
            min: v[0],
            max: v[v.len() - 1],
            mad: median_sorted(&dev),
            n: v.len(),
        })
    }

    /// Spread relative to the median, as a fraction (max - min) / median.
    pub fn rel_range(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median.abs()
        }
    }

    /// "31.2 (30.9–31.5)" with `prec` decimals.
    pub fn show(&self, prec: usize) -> String {
        format!(
            "{:.p$} ({:.p$}–{:.p$})",
            self.median,
            self.min,
            self.max,
            p = prec
        )
    }
}

/// Median of an already sorted, non-empty slice.
pub fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

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
