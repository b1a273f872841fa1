//! The model's reading of the measurements: from which payload each zero-copy method pays,
//! whether the kernel really did not copy, and what the model leaves out.

use crate::model::{self, Method};
use costlab_core::case;
use costlab_core::measure::sizes::human_size;
use costlab_history::report::{ModelPoint, Outcome};

/// The median of `metric` for one method, size and link, where measured.
pub(crate) fn median_of(
    out: &Outcome,
    metric: &str,
    m: Method,
    size: u64,
    link: &str,
) -> Option<f64> {
    out.find(
        metric,
        &case! {"method" => m.name(), "size" => size, "link" => link},
    )
    .map(|r| r.summary.median)
}

/// The model's reading: where each zero-copy method starts to pay, whether the kernel really
/// did not copy, and which term the measurement disagrees with.
pub fn verdict(
    out: &Outcome,
    points: &[ModelPoint],
    copy: &[(u64, f64)],
    call_ns: f64,
) -> Vec<String> {
    let mut v = Vec::new();
    let mut sizes: Vec<u64> = out
        .results
        .iter()
        .filter_map(|r| r.case.get("size")?.as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut links: Vec<String> = out.results.iter().map(|r| r.key("link")).collect();
    links.dedup();
    for link in &links {
        for m in model::ALL {
            let Some(base) = m.baseline() else { continue };
            let pts: Vec<(u64, f64, f64)> = sizes
                .iter()
                .filter_map(|&s| {
                    Some((
                        s,
                        median_of(out, "sender_cpu_per_gb", m, s, link)?,
                        median_of(out, "sender_cpu_per_gb", base, s, link)?,
                    ))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            v.push(match model::pays_from(&pts) {
                Some(s) => format!(
                    "{link}: {} costs the sender less CPU per GB than {} from {} payloads up",
                    m.name(),
                    base.name(),
                    human_size(s)
                ),
                None => format!(
                    "{link}: {} never costs the sender less CPU per GB than {} at the sizes measured",
                    m.name(),
                    base.name()
                ),
            });
            if m.reports_zerocopy() {
                let fr: Vec<f64> = sizes
                    .iter()
                    .filter_map(|&s| median_of(out, "zerocopy_fraction", m, s, link))
                    .collect();
                if !fr.is_empty() {
                    let mean = fr.iter().sum::<f64>() / fr.len() as f64;
                    v.push(format!(
                        "{link}: {}: the kernel reported {:.0}% of sends sent without a copy{}",
                        m.name(),
                        mean * 100.0,
                        if mean < 0.01 {
                            " - zero copy did not happen here (it copied, and said so)"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
    // Which term disagrees: the largest share of the measurement neither term explains.
    if let Some(worst) = points
        .iter()
        .filter(|p| p.measured > 0.0)
        .max_by(|a, b| (a.measured - a.predicted).total_cmp(&(b.measured - b.predicted)))
    {
        let size = worst.case.get("size").and_then(|s| s.as_u64()).unwrap_or(0);
        let c = copy.iter().find(|c| c.0 == size).map_or(0.0, |c| c.1);
        v.push(format!(
            "the model leaves out the TCP/IP stack's own work (segments, ACKs, skb allocation, page pinning): it under-predicts most for {} {} at {}, {:.0} of {:.0} ms/GB unexplained (copy {:.3} ns/byte, call {:.0} ns)",
            worst.case.get("link").and_then(|x| x.as_str()).unwrap_or(""),
            worst.case.get("method").and_then(|x| x.as_str()).unwrap_or(""),
            human_size(size),
            worst.measured - worst.predicted,
            worst.measured,
            c,
            call_ns
        ));
    }
    v
}
