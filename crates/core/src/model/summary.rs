//! A figure's samples summarised: median and spread (min, max, MAD, n). Every figure costlab
//! prints is one of these; `measure::stats` holds the rest of the arithmetic.

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
