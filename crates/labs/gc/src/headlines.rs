//! The gc lab's headlines: the GC share at 1x and 3x headroom beside the paper, the headroom
//! each runtime needs for under 10%, and the taxes by attribution.

use costlab_history::report::Outcome;
use costlab_lab::Headline;

use crate::{attribution_pooled, headroom_targets, tax};

/// Every headline of `o`, in that order.
pub fn headlines(o: &Outcome) -> Vec<Headline> {
    let mut out = share_headlines(o);
    out.extend(target_headlines(o));
    out.extend(tax_headlines(o));
    out
}

/// The GC share at GOGC=100 and GOGC=300 beside the paper's.
fn share_headlines(o: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    let paper = "paper: 0.5x -> 34%, 2x -> 9%";
    for (h, what) in [(1.0, "GOGC=100"), (3.0, "GOGC=300")] {
        let want = costlab_core::case! {"mode" => "gogc", "headroom" => h};
        if let Some(r) = o.find("gc_cpu_share", &want) {
            out.push(Headline {
                label: format!("GC CPU share at {h}x headroom ({what})"),
                summary: r.summary,
                unit: "%".to_string(),
                reading: format!(
                    "with {h}x the live heap free the collector takes {:.0}% of the CPU here ({paper})",
                    r.summary.median
                ),
                ..Default::default()
            });
        }
    }
    out
}

/// Per runtime and mode, the smallest headroom keeping GC under 10%.
fn target_headlines(o: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    for (rt, mode, t) in headroom_targets(o) {
        if let Some((h, share)) = t {
            if let Some(summary) = costlab_core::measure::Summary::of(&[h]) {
                out.push(Headline {
                    label: format!("headroom for <10% GC ({rt}, {mode})"),
                    summary,
                    unit: "x live heap".to_string(),
                    reading: format!(
                        "{rt} needs {h}x the live heap free to keep its collector under 10% of the CPU here ({share:.1}% at {h}x; paper: 3x the heap for Go)"
                    ),
                    ..Default::default()
                });
            }
        }
    }
    out
}

/// The taxes by attribution (gc, prologue, write-barrier, safety), each beside Biscuit's.
fn tax_headlines(o: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    // The tax lines come from attribution: a share of CPU samples is never negative,
    // and its interval is the sampling error. The figure is the share of all CPU
    // (kernel time included); the reading gives the user-mode share beside it.
    let verdicts = o
        .models
        .iter()
        .find(|m| m.name == tax::CROSS_CHECK_MODEL)
        .map(|m| &m.params);
    for p in attribution_pooled(o) {
        if !matches!(
            p.kind.as_str(),
            "gc" | "prologue" | "write-barrier" | "safety"
        ) {
            continue;
        }
        let Some(r) = o.results.iter().find(|r| {
            r.metric == "cpu_share"
                && r.key("method") == "attribution"
                && r.key("workload") == p.workload
                && r.key("kind") == p.kind
                && r.key("of").is_empty()
        }) else {
            continue;
        };
        let paper = match p.kind.as_str() {
            "gc" => "Biscuit: about 3%",
            "prologue" => "Biscuit: the largest item",
            "write-barrier" => "Biscuit: very little",
            _ => "Biscuit: 2-3%",
        };
        let user = p
            .user_share
            .map_or(String::new(), |u| format!(", {u:.2}% of user-mode CPU"));
        let check = verdicts
            .filter(|_| p.kind == "safety")
            .and_then(|v| v.get(&p.workload))
            .and_then(|v| v.as_str())
            .map_or(String::new(), |v| {
                format!("; the -B build's A/B difference {v}")
            });
        out.push(Headline {
            label: format!("{} share of CPU ({} workload)", p.kind, p.workload),
            summary: r.summary,
            unit: "% of all CPU".to_string(),
            reading: format!(
                "{:.2}% of all CPU (kernel time included; {} of {} profile samples){user} fell in {} here, 95% interval {:.2}-{:.2}% ({paper}){check}",
                p.share, p.samples, p.total, p.kind, p.interval.0, p.interval.1
            ),
            ..Default::default()
        });
    }
    out
}
