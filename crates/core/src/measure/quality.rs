//! The verdict on a figure: `ok`, `noisy` (its spread is too wide to support a reading) or
//! `disturbed` (something else ran on its CPUs, the host stole time, or the condition the case
//! depends on was not met). Thresholds are stated here, once, and printed by `--help`.

pub use crate::model::quality::Quality;
pub use crate::model::verdict::{
    fold_inputs, input_reason, model_inherits, quote, quote_row, worst_of,
};
use crate::model::{Conditions, ResultRow, Summary};

/// Interference above which a figure is `disturbed`: other processes' share of any CPU the case
/// used (%).
pub const OTHER_CPU_PCT: f64 = 10.0;
/// Steal above which a figure is `disturbed` (% of the CPUs' time).
pub const STEAL_PCT: f64 = 5.0;
/// A memory case that asked for huge pages and got less than this fraction is `disturbed`.
pub const HUGE_FRACTION: f64 = 0.9;
/// A memory case on 4 KiB pages that got more than this fraction huge is `disturbed`.
pub const SMALL_HUGE_FRACTION: f64 = 0.1;

/// The spread (MAD / |median|) above which a metric is `noisy`, by metric. Figures whose
/// reading is a difference (taxes) are judged by whether their range crosses zero instead.
pub fn noise_threshold(metric: &str) -> Option<f64> {
    Some(match metric {
        "bandwidth" | "latency" | "tlb_cost" => 0.05,
        "throughput" | "server_cpu_per_req" | "loader_cpu_per_req" => 0.10,
        "p50" => 0.15,
        "p99" | "p999" => 0.25,
        "gc_cpu_share" | "slowdown" | "cpu_share" => 0.10,
        "max_pause" => 0.5,
        _ => return None,
    })
}

/// The text of the thresholds, for `--help` and the README.
pub const THRESHOLDS_HELP: &str = "A figure is 'disturbed' when other processes took more than \
10% of a CPU it used, the host stole more than 5%, or a memory case got under 90% of its \
region in the page size it asked for; 'noisy' when its MAD exceeds 5% of the median \
(bandwidth, latency), 10% (throughput, CPU per request, GC share), 25% (p99), or when a tax's \
range crosses zero.";

/// Judge interference from a case's conditions: the reasons it is disturbed (empty: none).
pub fn disturbance(c: &Conditions) -> Vec<String> {
    let mut why = Vec::new();
    let mut worst: Vec<(&String, &f64)> = c
        .other_cpu_pct
        .iter()
        .filter(|(_, p)| **p > OTHER_CPU_PCT)
        .collect();
    worst.sort_by(|a, b| b.1.total_cmp(a.1));
    if let Some((cpu, pct)) = worst.first() {
        let more = if worst.len() > 1 {
            format!(" (and {} more of its CPUs)", worst.len() - 1)
        } else {
            String::new()
        };
        why.push(format!(
            "other processes took {pct:.0}% of CPU {cpu} during the samples{more}"
        ));
    }
    if let Some(s) = c.steal_pct {
        if s > STEAL_PCT {
            why.push(format!("the hypervisor stole {s:.0}% of the CPUs' time"));
        }
    }
    if let (Some(asked), Some(f)) = (c.pages_asked.as_deref(), c.huge_fraction) {
        let huge = asked != "4k";
        if huge && f < HUGE_FRACTION {
            why.push(format!(
                "{asked} pages asked, {:.0}% of the region was huge",
                f * 100.0
            ));
        } else if !huge && f > SMALL_HUGE_FRACTION {
            why.push(format!(
                "4k pages asked, {:.0}% of the region was huge (THP)",
                f * 100.0
            ));
        }
    }
    why
}

/// Judge a figure's spread: why it is noisy (None: its spread supports a reading).
pub fn noise(metric: &str, s: &Summary) -> Option<String> {
    if s.n < 2 {
        return None;
    }
    if metric == "overhead" {
        return (s.min < 0.0 && s.max > 0.0).then(|| {
            format!(
                "its range {:.3}..{:.3} crosses zero: below what this machine resolves",
                s.min, s.max
            )
        });
    }
    let t = noise_threshold(metric)?;
    let rel = if s.median == 0.0 {
        return None;
    } else {
        s.mad / s.median.abs()
    };
    (rel > t).then(|| {
        format!(
            "MAD is {:.1}% of the median, above the {:.0}% that {metric} allows",
            rel * 100.0,
            t * 100.0
        )
    })
}

/// The verdict and its reasons for a figure.
pub fn judge(metric: &str, s: &Summary, c: Option<&Conditions>) -> (Quality, Vec<String>) {
    let mut reasons = c.map(disturbance).unwrap_or_default();
    if !reasons.is_empty() {
        if let Some(n) = noise(metric, s) {
            reasons.push(n);
        }
        return (Quality::Disturbed, reasons);
    }
    if let Some(n) = noise(metric, s) {
        reasons.push(n);
        return (Quality::Noisy, reasons);
    }
    (Quality::Ok, reasons)
}

/// Judge every row that has no verdict yet, from its spread and its conditions. A row that
/// already has one (judged with its conditions, or given its inputs' by `inherit`) keeps it.
pub fn judge_rows(rows: &mut [ResultRow]) {
    for r in rows.iter_mut().filter(|r| r.quality.is_none()) {
        let (q, why) = judge(&r.metric, &r.summary, r.conditions.as_ref());
        r.quality = Some(q);
        r.quality_reasons = why;
    }
}

/// Give a derived figure (a difference such as tlb_cost, a ratio, a cut, a fitted term) the
/// worst verdict of its own spread and of the figures it is computed from, naming each input
/// that is not ok. Its own spread is judged first (as `judge_rows` would), so the verdict set
/// here is complete and `judge_rows`, which leaves judged rows alone, keeps it.
///
/// `let d = out.results.last_mut(); quality::inherit(d, &[&small, &huge]);`
pub fn inherit(derived: &mut ResultRow, inputs: &[&ResultRow]) {
    if derived.quality.is_none() {
        let (q, why) = judge(
            &derived.metric,
            &derived.summary,
            derived.conditions.as_ref(),
        );
        derived.quality = Some(q);
        derived.quality_reasons = why;
    }
    fold_inputs(&mut derived.quality, &mut derived.quality_reasons, inputs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summ(median: f64, mad: f64) -> Summary {
        Summary {
            median,
            min: median - 2.0 * mad,
            max: median + 2.0 * mad,
            mad,
            n: 7,
        }
    }

    #[test]
    fn quiet_tight_figure_is_ok() {
        let c = Conditions {
            other_cpu_pct: [("0".to_string(), 1.0)].into(),
            other_cpu_max_pct: Some(1.0),
            steal_pct: Some(0.0),
            ..Default::default()
        };
        assert_eq!(
            judge("latency", &summ(100.0, 1.0), Some(&c)),
            (Quality::Ok, vec![])
        );
    }

    #[test]
    fn another_process_on_a_used_cpu_disturbs() {
        let c = Conditions {
            other_cpu_pct: [("0".to_string(), 2.0), ("1".to_string(), 48.0)].into(),
            ..Default::default()
        };
        let (q, why) = judge("throughput", &summ(10.0, 0.1), Some(&c));
        assert_eq!(q, Quality::Disturbed);
        assert_eq!(
            why[0],
            "other processes took 48% of CPU 1 during the samples"
        );
    }

    #[test]
    fn wide_spread_is_noisy_by_metric() {
        assert_eq!(judge("latency", &summ(100.0, 6.0), None).0, Quality::Noisy);
        assert_eq!(judge("throughput", &summ(100.0, 6.0), None).0, Quality::Ok);
        assert_eq!(judge("p99", &summ(100.0, 20.0), None).0, Quality::Ok);
    }

    #[test]
    fn a_tax_whose_range_crosses_zero_is_noisy() {
        let s = Summary {
            median: 5.0,
            min: -3.0,
            max: 12.0,
            mad: 2.0,
            n: 5,
        };
        let (q, why) = judge("overhead", &s, None);
        assert_eq!(q, Quality::Noisy);
        assert!(why[0].contains("crosses zero"));
    }

    #[test]
    fn huge_pages_asked_but_not_given_disturbs() {
        let c = Conditions::default().pages("thp", Some(0.12));
        let (q, why) = judge("latency", &summ(100.0, 1.0), Some(&c));
        assert_eq!(q, Quality::Disturbed);
        assert_eq!(why, vec!["thp pages asked, 12% of the region was huge"]);
        let c = Conditions::default().pages("2m", Some(1.0));
        assert_eq!(judge("latency", &summ(100.0, 1.0), Some(&c)).0, Quality::Ok);
    }

    fn chase(pages: &str, q: Quality, why: &str) -> ResultRow {
        let mut r = ResultRow::new(
            "mem",
            crate::case! {"op" => "chase", "pages" => pages, "block" => 268435456u64},
            "latency",
            "ns",
            vec![700.0, 710.0, 720.0],
        )
        .unwrap();
        r.quality = Some(q);
        if !why.is_empty() {
            r.quality_reasons = vec![why.to_string()];
        }
        r
    }

    fn tlb(samples: Vec<f64>) -> ResultRow {
        ResultRow::new(
            "mem",
            crate::case! {"op" => "chase", "pages" => "4k", "versus" => "thp"},
            "tlb_cost",
            "ns",
            samples,
        )
        .unwrap()
    }

    #[test]
    fn a_derived_figure_takes_the_worst_verdict_of_its_inputs_and_names_them() {
        let small = chase(
            "4k",
            Quality::Disturbed,
            "other processes took 97% of CPU 1 during the samples",
        );
        let huge = chase(
            "thp",
            Quality::Noisy,
            "MAD is 8.0% of the median, above the 5% that latency allows",
        );
        // Its own spread is tight: alone it would be ok.
        let mut d = tlb(vec![300.0, 301.0, 302.0]);
        inherit(&mut d, &[&small, &huge]);
        assert_eq!(d.quality, Some(Quality::Disturbed));
        assert_eq!(
            d.quality_reasons,
            vec![
                "from its input mem op=chase pages=4k block=268435456 latency: disturbed (other processes took 97% of CPU 1 during the samples)",
                "from its input mem op=chase pages=thp block=268435456 latency: noisy (MAD is 8.0% of the median, above the 5% that latency allows)",
            ]
        );
        // Folding the same inputs again adds nothing, and judge_rows leaves the verdict alone.
        inherit(&mut d, &[&small, &huge]);
        assert_eq!(d.quality_reasons.len(), 2);
        let mut rows = vec![d.clone()];
        judge_rows(&mut rows);
        assert_eq!(rows[0], d);
    }

    #[test]
    fn a_derived_figure_keeps_its_own_noise_beside_clean_inputs() {
        let a = chase("4k", Quality::Ok, "");
        let b = chase("thp", Quality::Ok, "");
        let mut d = tlb(vec![10.0, 100.0, 300.0]);
        inherit(&mut d, &[&a, &b]);
        assert_eq!(d.quality, Some(Quality::Noisy));
        assert!(
            d.quality_reasons[0].starts_with("MAD is"),
            "{:?}",
            d.quality_reasons
        );
        let mut clean = tlb(vec![300.0, 301.0, 302.0]);
        inherit(&mut clean, &[&a, &b]);
        assert_eq!(
            (clean.quality, clean.quality_reasons),
            (Some(Quality::Ok), vec![])
        );
    }

    #[test]
    fn prose_quoting_a_figure_that_is_not_ok_says_so() {
        let s = chase(
            "4k",
            Quality::Disturbed,
            "other processes took 97% of CPU 1 during the samples",
        );
        assert_eq!(
            quote_row("s = 406.4 ns", &s),
            "s = 406.4 ns (disturbed: other processes took 97% of CPU 1 during the samples)"
        );
        assert_eq!(
            quote_row("s = 40 ns", &chase("4k", Quality::Ok, "")),
            "s = 40 ns"
        );
    }

    #[test]
    fn steal_disturbs() {
        let c = Conditions {
            steal_pct: Some(12.0),
            ..Default::default()
        };
        assert_eq!(
            judge("bandwidth", &summ(10.0, 0.1), Some(&c)).1,
            vec!["the hypervisor stole 12% of the CPUs' time"]
        );
    }
}
