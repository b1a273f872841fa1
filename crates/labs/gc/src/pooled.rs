//! The tax by attribution pooled over a workload's processes: each class's share of all CPU
//! with its interval, and of user-mode CPU, read by the rendering and the headlines alike.

use costlab_history::report::Outcome;

use crate::attrib;

/// One class's pooled share in one workload's attribution.
#[derive(Debug, Clone, PartialEq)]
pub struct PooledShare {
    pub workload: String,
    pub kind: String,
    /// Share of all CPU (kernel time included), %, and its 95% interval.
    pub share: f64,
    pub interval: (f64, f64),
    /// Share of user-mode CPU, %; None for the kernel class.
    pub user_share: Option<f64>,
    /// The class's samples, all samples.
    pub samples: u64,
    pub total: u64,
}

/// Per (workload, kind) of the attribution rows, in row order: the pooled share of all CPU
/// with its 95% interval, and of user-mode CPU.
pub fn attribution_pooled(o: &Outcome) -> Vec<PooledShare> {
    let rows: Vec<_> = o
        .results
        .iter()
        .filter(|r| r.metric == "profile_samples" && r.key("method") == "attribution")
        .collect();
    let sum = |w: &str, kind: Option<&str>| -> u64 {
        rows.iter()
            .filter(|x| x.key("workload") == w && kind.is_none_or(|k| x.key("kind") == k))
            .map(|x| x.samples.iter().sum::<f64>())
            .sum::<f64>() as u64
    };
    let mut out = Vec::new();
    for r in &rows {
        let w = r.key("workload");
        let kind = r.key("kind");
        let total = sum(&w, None);
        let user_total = total - sum(&w, Some("kernel"));
        let k = r.samples.iter().sum::<f64>() as u64;
        let pct = |k: u64, n: u64| {
            if n > 0 {
                100.0 * k as f64 / n as f64
            } else {
                0.0
            }
        };
        out.push(PooledShare {
            share: pct(k, total),
            interval: attrib::wilson(k, total),
            user_share: (kind != "kernel").then(|| pct(k, user_total)),
            samples: k,
            total,
            workload: w,
            kind,
        });
    }
    out
}
