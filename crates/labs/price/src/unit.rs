//! A unit cost: the samples of one measured term (ns per event) and the figures they come
//! from, and the units a price reads by name.

use std::collections::BTreeMap;

use costlab_core::measure::Summary;
use costlab_history::report::ResultRow;

/// A unit cost: its samples (ns per event) and the figures it is read from.
#[derive(Debug, Clone)]
pub struct Unit {
    pub samples: Vec<f64>,
    /// The stored or just-measured figures it comes from (for the verdict and the "from").
    pub rows: Vec<ResultRow>,
    /// Where it comes from, in words: "run 2026...: cost term=fault-4k latency".
    pub from: String,
}

impl Unit {
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples)
    }

    /// A unit read from one figure.
    pub fn of_row(row: &ResultRow, run: &str) -> Unit {
        Unit {
            samples: row.samples.clone(),
            rows: vec![row.clone()],
            from: format!("run {run}: {}", row.name()),
        }
    }

    /// `self - others`, sample by sample (the k-th sample of each, cycling a shorter one),
    /// never below zero: a term with the calls it contains taken out.
    pub fn minus(&self, others: &[&Unit]) -> Unit {
        let samples = self
            .samples
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let sub: f64 = others
                    .iter()
                    .map(|o| o.samples[i % o.samples.len().max(1)])
                    .sum();
                (x - sub).max(0.0)
            })
            .collect();
        let mut rows = self.rows.clone();
        let mut from = self.from.clone();
        for o in others {
            rows.extend(o.rows.iter().cloned());
            from.push_str(&format!(" minus {}", o.from));
        }
        Unit {
            samples,
            rows,
            from,
        }
    }

    pub fn scaled(&self, k: f64) -> Unit {
        Unit {
            samples: self.samples.iter().map(|x| x * k).collect(),
            rows: self.rows.clone(),
            from: self.from.clone(),
        }
    }
}

/// Unit costs by name: the `cost` terms ("fault-4k", "pipe-rw", "pipe-rw/byte" for a
/// per-byte part), "s" (the syscall lab's getppid), "t(N)" (its io_uring NOP per op at N).
pub type Units = BTreeMap<String, Unit>;
