//! A figure across runs and the changes in it: E-divisive means (Matteson & James, 2014, the
//! method Apache Otava / Hunter use on benchmark histories) with a permutation test.
//!
//! The series is bisected where the energy distance between the two sides, weighted by their
//! sizes, is largest; the split is kept when fewer than 5% of random permutations of the same
//! segment give as large a statistic (p < 0.05), and each side is searched again, the segment
//! with the strongest split first. Energy distance compares whole distributions, not means, so
//! one outlier does not make a change, and it needs no assumption of normal noise. The
//! permutations come from a fixed seed: the same history gives the same changes every time.

use serde::Serialize;

use costlab_core::model::Quality;

/// A split is kept when p < ALPHA. Stricter than the usual 5%: E-divisive tests again inside
/// every segment it has cut, and at 5% a 30-run history with one real step also gave a
/// spurious 1.7% "change" in a 10-run tail (p = 0.024). Hunter's default is stricter still
/// (0.001).
pub const ALPHA: f64 = 0.01;
/// With 999 permutations the smallest p is 0.001.
pub const PERMUTATIONS: usize = 999;
/// The fewest points on either side of a change.
pub const MIN_SEGMENT: usize = 3;
const SEED: u64 = 0x0000_c057_1ab7_e5d0;

/// A change found in a series: the new level starts at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    pub at: usize,
    pub p: f64,
    pub q: f64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The best split of `x` (index of the first point on the right) and its statistic
/// Q = m·k/(m+k) · (2/(m·k)·B − W_L/C(m,2) − W_R/C(k,2)), with sums of |xi − xj|.
fn best_split(x: &[f64]) -> Option<(usize, f64)> {
    let n = x.len();
    if n < 2 * MIN_SEGMENT {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    let mut total = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            total += d(i, j);
        }
    }
    // within-left sums for every split, and within-right sums.
    let mut wl = vec![0.0; n + 1];
    for t in 1..=n {
        let add: f64 = (0..t - 1).map(|i| d(i, t - 1)).sum();
        wl[t] = wl[t - 1] + add;
    }
    let mut wr = vec![0.0; n + 1];
    for t in (0..n).rev() {
        let add: f64 = (t + 1..n).map(|j| d(t, j)).sum();
        wr[t] = wr[t + 1] + add;
    }
    let mut best: Option<(usize, f64)> = None;
    for t in MIN_SEGMENT..=n - MIN_SEGMENT {
        let (m, k) = (t as f64, (n - t) as f64);
        let b = total - wl[t] - wr[t];
        let e = 2.0 * b / (m * k) - wl[t] / (m * (m - 1.0) / 2.0) - wr[t] / (k * (k - 1.0) / 2.0);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((t, q));
        }
    }
    best
}

/// The permutation p-value of a segment's best split.
fn significance(x: &[f64], q: f64, rng: &mut Rng) -> f64 {
    let mut y = x.to_vec();
    let mut as_large = 0;
    for _ in 0..PERMUTATIONS {
        for i in (1..y.len()).rev() {
            let j = rng.below(i + 1);
            y.swap(i, j);
        }
        if let Some((_, qp)) = best_split(&y) {
            if qp >= q {
                as_large += 1;
            }
        }
    }
    (as_large + 1) as f64 / (PERMUTATIONS + 1) as f64
}

/// Every change in `x`, in order of position.
pub fn change_points(x: &[f64]) -> Vec<ChangePoint> {
    let mut rng = Rng(SEED);
    let mut found: Vec<ChangePoint> = Vec::new();
    // Segments still to search, as [start, end).
    let mut segments = vec![(0usize, x.len())];
    loop {
        // The strongest candidate split over all segments is tested first.
        let mut cand: Option<(usize, usize, f64, usize)> = None;
        for (si, &(s, e)) in segments.iter().enumerate() {
            if let Some((t, q)) = best_split(&x[s..e]) {
                if cand.is_none_or(|(_, _, bq, _)| q > bq) {
                    cand = Some((s, t, q, si));
                }
            }
        }
        let Some((s, t, q, si)) = cand else { break };
        let (seg_s, seg_e) = segments[si];
        let p = significance(&x[seg_s..seg_e], q, &mut rng);
        if p >= ALPHA {
            break;
        }
        found.push(ChangePoint { at: s + t, p, q });
        segments.remove(si);
        segments.push((seg_s, s + t));
        segments.push((s + t, seg_e));
    }
    found.sort_by_key(|c| c.at);
    found
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One run's value of a figure, with that run's verdict on it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Point {
    pub run: String,
    pub started: String,
    pub median: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quality_reasons: Vec<String>,
}

impl Point {
    pub fn mark(&self) -> &'static str {
        self.quality.map_or("", Quality::mark)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub run: String,
    pub started: String,
    pub before: f64,
    pub after: f64,
    pub change_pct: f64,
    pub p: f64,
    /// A change is read from the runs on either side of it: it takes their worst verdict and
    /// names each run that is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quality_reasons: Vec<String>,
}

/// The worst verdict of the runs a change compares, and one reason per run not ok.
fn judge_change(runs: &[Point]) -> (Option<Quality>, Vec<String>) {
    let q = runs.iter().filter_map(|p| p.quality).max();
    let mut why = Vec::new();
    for p in runs
        .iter()
        .filter(|p| p.quality.is_some_and(|q| q != Quality::Ok))
    {
        why.push(costlab_core::measure::quality::quote(
            format!("from run {}", p.run),
            p.quality,
            &p.quality_reasons,
        ));
    }
    (q, why)
}

#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    pub figure: String,
    pub unit: String,
    pub machine: String,
    pub runs: Vec<Point>,
    pub changes: Vec<Change>,
}

/// The changes of one series, with the medians of the levels on either side.
pub fn analyse(figure: &str, unit: &str, machine: &str, runs: Vec<Point>) -> Trend {
    let x: Vec<f64> = runs.iter().map(|p| p.median).collect();
    let cps = change_points(&x);
    let mut bounds = vec![0];
    bounds.extend(cps.iter().map(|c| c.at));
    bounds.push(x.len());
    let changes = cps
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let before = median(&x[bounds[i]..bounds[i + 1]]);
            let after = median(&x[bounds[i + 1]..bounds[i + 2]]);
            let (quality, quality_reasons) = judge_change(&runs[bounds[i]..bounds[i + 2]]);
            Change {
                quality,
                quality_reasons,
                run: runs[c.at].run.clone(),
                started: runs[c.at].started.clone(),
                before,
                after,
                change_pct: if before == 0.0 {
                    f64::INFINITY
                } else {
                    (after - before) / before.abs() * 100.0
                },
                p: c.p,
            }
        })
        .collect();
    Trend {
        figure: figure.to_string(),
        unit: unit.to_string(),
        machine: machine.to_string(),
        runs,
        changes,
    }
}

/// Every (figure, machine) series in the history, runs in order.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::trend::{render, render_html, sparkline};

    /// Noise of about ±`pct` percent around 1, from a fixed seed.
    fn noise(n: usize, pct: f64, seed: u64) -> Vec<f64> {
        let mut r = Rng(seed);
        (0..n)
            .map(|_| {
                1.0 + pct / 100.0 * ((r.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            })
            .collect()
    }

    #[test]
    fn a_step_is_found_where_it_is() {
        for seed in 1..6 {
            let x: Vec<f64> = noise(30, 3.0, seed)
                .iter()
                .enumerate()
                .map(|(i, e)| if i < 20 { 100.0 * e } else { 115.0 * e })
                .collect();
            let c = change_points(&x);
            assert_eq!(c.len(), 1, "seed {seed}: {c:?}");
            assert!((19..=21).contains(&c[0].at), "seed {seed}: {c:?}");
            assert!(c[0].p < ALPHA);
        }
    }

    #[test]
    fn flat_noise_has_no_change() {
        for seed in 1..6 {
            let x: Vec<f64> = noise(30, 3.0, seed).iter().map(|e| 100.0 * e).collect();
            assert!(change_points(&x).is_empty(), "seed {seed}");
        }
    }

    #[test]
    fn single_outliers_are_not_changes() {
        let mut x: Vec<f64> = noise(30, 2.0, 7).iter().map(|e| 100.0 * e).collect();
        x[8] = 180.0;
        x[22] = 40.0;
        assert!(change_points(&x).is_empty(), "{:?}", change_points(&x));
    }

    #[test]
    fn a_ramp_is_cut_into_rising_levels() {
        let x: Vec<f64> = (0..40).map(|i| 100.0 + i as f64).collect();
        let c = change_points(&x);
        assert!(!c.is_empty());
        let t = analyse(
            "f",
            "ns",
            "m",
            x.iter()
                .enumerate()
                .map(|(i, v)| Point {
                    run: format!("r{i:02}"),
                    started: String::new(),
                    median: *v,
                    ..Default::default()
                })
                .collect(),
        );
        assert!(
            t.changes.iter().all(|c| c.after > c.before),
            "{:?}",
            t.changes
        );
    }

    #[test]
    fn two_steps_are_two_changes_and_the_same_input_gives_the_same_answer() {
        let x: Vec<f64> = noise(45, 2.0, 3)
            .iter()
            .enumerate()
            .map(|(i, e)| {
                e * if i < 15 {
                    100.0
                } else if i < 30 {
                    130.0
                } else {
                    90.0
                }
            })
            .collect();
        let c = change_points(&x);
        let at: Vec<usize> = c.iter().map(|c| c.at).collect();
        assert_eq!(at.len(), 2, "{c:?}");
        assert!(
            (14..=16).contains(&at[0]) && (29..=31).contains(&at[1]),
            "{at:?}"
        );
        assert_eq!(c, change_points(&x));
    }

    #[test]
    fn changes_carry_levels_and_percent() {
        let pts: Vec<Point> = (0..12)
            .map(|i| Point {
                run: format!("r{i}"),
                started: format!("2026-01-{:02}T00:00:00Z", i + 1),
                median: if i < 6 { 10.0 } else { 20.0 },
                ..Default::default()
            })
            .collect();
        let t = analyse("f", "ns", "m", pts);
        assert_eq!(t.changes.len(), 1);
        let c = &t.changes[0];
        assert_eq!(c.run, "r6");
        assert_eq!((c.before, c.after), (10.0, 20.0));
        assert!((c.change_pct - 100.0).abs() < 1e-9);
        assert!(sparkline(&t).contains('|'));
        assert!(render_html(&[t]).contains("class=\"change\""));
    }

    #[test]
    fn a_disturbed_run_is_marked_and_the_change_across_it_inherits_its_verdict() {
        let pts: Vec<Point> = (0..12)
            .map(|i| Point {
                run: format!("r{i}"),
                started: format!("2026-01-{:02}T00:00:00Z", i + 1),
                median: if i < 6 { 10.0 } else { 20.0 },
                quality: Some(if i == 7 {
                    Quality::Disturbed
                } else {
                    Quality::Ok
                }),
                quality_reasons: if i == 7 {
                    vec!["other processes took 97% of CPU 1 during the samples".into()]
                } else {
                    vec![]
                },
            })
            .collect();
        let t = analyse("mem DRAM latency", "ns", "m", pts);
        let c = &t.changes[0];
        assert_eq!(c.quality, Some(Quality::Disturbed));
        assert_eq!(
            c.quality_reasons,
            vec!["from run r7 (disturbed: other processes took 97% of CPU 1 during the samples)"]
        );
        let text = render(std::slice::from_ref(&t));
        assert!(text.contains("(+100.0%)!, p="), "{text}");
        assert!(
            text.contains("  ! run r7 (2026-01-08T00:00:00Z): 20.0 ns (disturbed: other processes took 97% of CPU 1 during the samples)"),
            "{text}"
        );
        let html = render_html(std::slice::from_ref(&t));
        assert_eq!(html.matches("class=\"verdict-mark\"").count(), 1);
        assert!(html.contains("Marked runs: ! disturbed"));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["runs"][7]["quality"], "disturbed");
        assert_eq!(json["changes"][0]["quality"], "disturbed");
    }
}
