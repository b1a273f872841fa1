//! `--rounds N`: every term measured once per round, and each figure taken from one round.
//!
//! A term's samples are taken in one burst of tens of milliseconds, and this kind of machine
//! (a shared KVM guest) has slow seconds: a 4 KiB fault measured every 8 s on a quiet guest
//! read 1267-2222 ns, each burst with a spread of a few percent. A figure taken in one burst
//! carries whichever second it fell in into every price made from it. With rounds, each
//! figure is the round whose median is nearest the median of the rounds' medians (an ok
//! round first), so one slow stretch moves one round, not the figure; the rounds that
//! disagreed are named in a note.

use std::collections::BTreeMap;

use costlab_core::measure::quality::Quality;
use costlab_core::measure::units::human_ns;
use costlab_history::report::{Outcome, ResultRow};

/// Rounds whose medians differ by more than this ratio (largest ÷ smallest) are named.
const APART: f64 = 1.2;
/// At most this many figures are named in the note; the others are counted.
const NAMED: usize = 8;

/// A figure's identity across rounds: its lab, case and metric.
fn key(r: &ResultRow) -> String {
    format!(
        "{}|{}|{}",
        r.lab,
        serde_json::Value::Object(r.case.clone()),
        r.metric
    )
}

/// One outcome from the rounds' outcomes: for each figure, the round nearest the median of
/// the rounds' medians among its ok rounds (among all of them where none is ok; the earlier
/// of two as near), in the order the first round gave them; the notes of all rounds once each, and one note on the rounds.
pub fn pick(rounds: Vec<Outcome>) -> Outcome {
    let n = rounds.len();
    if n <= 1 {
        return rounds.into_iter().next().unwrap_or_default();
    }
    let mut order: Vec<String> = Vec::new();
    let mut by_key: BTreeMap<String, Vec<ResultRow>> = BTreeMap::new();
    let mut out = Outcome::default();
    for o in rounds {
        for r in o.results {
            let k = key(&r);
            if !by_key.contains_key(&k) {
                order.push(k.clone());
            }
            by_key.entry(k).or_default().push(r);
        }
        out.models.extend(o.models);
        for note in o.notes {
            if !out.notes.contains(&note) {
                out.notes.push(note);
            }
        }
    }
    let mut apart = Vec::new();
    for k in order {
        let Some(rows) = by_key.remove(&k) else {
            continue;
        };
        let medians: Vec<f64> = rows.iter().map(|r| r.summary.median).collect();
        let mid = costlab_core::measure::stats::median(&medians);
        let ok = |r: &&ResultRow| r.quality.is_none_or(|q| q == Quality::Ok);
        let pool: Vec<&ResultRow> = if rows.iter().any(|r| ok(&r)) {
            rows.iter().filter(ok).collect()
        } else {
            rows.iter().collect()
        };
        let Some(chosen) = pool.into_iter().min_by(|a, b| {
            (a.summary.median - mid)
                .abs()
                .total_cmp(&(b.summary.median - mid).abs())
        }) else {
            continue;
        };
        let (lo, hi) = medians
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &m| {
                (l.min(m), h.max(m))
            });
        if lo > 0.0 && hi / lo > APART {
            apart.push(format!(
                "{} ({})",
                name(chosen),
                readings(&medians, &chosen.unit)
            ));
        }
        out.results.push(chosen.clone());
    }
    out.notes.push(rounds_note(n, &apart));
    out
}

/// A figure's name in a note: its term, size and metric where they say more.
fn name(r: &ResultRow) -> String {
    let mut s = r.key("term");
    if let Some(fs) = r.case.get("fs").and_then(|v| v.as_str()) {
        s.push_str(&format!(" on {fs}"));
    }
    if let Some(size) = r.case.get("size").and_then(|v| v.as_u64()) {
        s.push_str(&format!(
            " at {}",
            costlab_core::measure::unitcost::size_words(&r.key("term"), size)
        ));
    }
    if r.metric != "latency" {
        s.push_str(&format!(" {}", r.metric));
    }
    s
}

/// The rounds' medians in the order they were measured.
fn readings(medians: &[f64], unit: &str) -> String {
    medians
        .iter()
        .map(|&m| {
            if unit == "ns" {
                human_ns(m)
            } else {
                format!("{m:.3} {unit}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn rounds_note(n: usize, apart: &[String]) -> String {
    let head = format!(
        "{n} rounds: every term measured once a round; each figure is the round nearest the rounds' median (an ok round first)"
    );
    if apart.is_empty() {
        return format!("{head}; no figure's rounds differ by more than {APART}x");
    }
    let mut named: Vec<String> = apart.iter().take(NAMED).cloned().collect();
    if apart.len() > NAMED {
        named.push(format!("and {} more", apart.len() - NAMED));
    }
    format!(
        "{head}; the machine's speed moved between rounds for {} figures, whose rounds differ by more than {APART}x: {}",
        apart.len(),
        named.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::case;

    fn row(term: &str, samples: &[f64], quality: Quality) -> ResultRow {
        let mut r = ResultRow::new(
            "cost",
            case! {"term" => term},
            "latency",
            "ns",
            samples.to_vec(),
        )
        .unwrap();
        r.quality = Some(quality);
        r
    }

    fn round(rows: Vec<ResultRow>, note: &str) -> Outcome {
        Outcome {
            results: rows,
            models: vec![],
            notes: vec![note.to_string()],
        }
    }

    #[test]
    fn one_round_is_returned_as_it_is() {
        let o = round(vec![row("stat", &[1.0, 2.0, 3.0], Quality::Ok)], "a");
        assert_eq!(pick(vec![o.clone()]), o);
        assert_eq!(pick(vec![]), Outcome::default());
    }

    #[test]
    fn each_figure_is_its_middle_round_and_a_slow_round_is_named() {
        let rounds = vec![
            round(
                vec![
                    row("fault-4k", &[1500.0, 1510.0, 1490.0], Quality::Ok),
                    row("stat", &[1000.0, 1001.0], Quality::Ok),
                ],
                "same",
            ),
            round(
                vec![
                    row("fault-4k", &[2200.0, 2210.0, 2190.0], Quality::Ok),
                    row("stat", &[1010.0, 1011.0], Quality::Ok),
                ],
                "same",
            ),
            round(
                vec![
                    row("fault-4k", &[1400.0, 1410.0, 1390.0], Quality::Ok),
                    row("stat", &[1020.0, 1021.0], Quality::Ok),
                ],
                "other",
            ),
        ];
        let o = pick(rounds);
        let medians: Vec<(String, f64)> = o
            .results
            .iter()
            .map(|r| (r.key("term"), r.summary.median))
            .collect();
        assert_eq!(
            medians,
            vec![
                ("fault-4k".to_string(), 1500.0),
                ("stat".to_string(), 1010.5)
            ]
        );
        assert_eq!(o.notes[..2], ["same".to_string(), "other".to_string()]);
        let last = o.notes.last().unwrap();
        assert!(last.starts_with("3 rounds"), "{last}");
        assert!(last.contains("for 1 figures"), "{last}");
        assert!(
            last.contains("fault-4k (1.50 us, 2.20 us, 1.40 us)"),
            "{last}"
        );
        assert!(!last.contains("stat ("), "{last}");
    }

    #[test]
    fn an_ok_round_is_taken_before_a_nearer_disturbed_one() {
        let rounds = vec![
            round(vec![row("stat", &[1000.0], Quality::Ok)], "n"),
            round(vec![row("stat", &[1100.0], Quality::Disturbed)], "n"),
            round(vec![row("stat", &[1300.0], Quality::Ok)], "n"),
        ];
        let o = pick(rounds);
        assert_eq!(o.results.len(), 1);
        assert_eq!(o.results[0].quality, Some(Quality::Ok));
        assert!([1000.0, 1300.0].contains(&o.results[0].summary.median));
        // None ok: the nearest of all.
        let rounds = vec![
            round(vec![row("stat", &[1000.0], Quality::Noisy)], "n"),
            round(vec![row("stat", &[1100.0], Quality::Disturbed)], "n"),
            round(vec![row("stat", &[1300.0], Quality::Noisy)], "n"),
        ];
        assert_eq!(pick(rounds).results[0].summary.median, 1100.0);
    }

    #[test]
    fn a_figure_one_round_lacks_is_kept_from_the_others() {
        let rounds = vec![
            round(vec![row("stat", &[1000.0], Quality::Ok)], "n"),
            round(
                vec![
                    row("stat", &[1000.0], Quality::Ok),
                    row("tick", &[500.0], Quality::Ok),
                ],
                "n",
            ),
        ];
        let o = pick(rounds);
        assert_eq!(o.results.len(), 2);
        assert!(o
            .notes
            .last()
            .unwrap()
            .contains("no figure's rounds differ"));
    }
}
