//! Comparing two runs figure by figure: the change in the median and whether the samples say
//! it is real: two-sided Mann-Whitney U per figure, Benjamini-Hochberg over all the figures
//! compared (false discovery rate 0.05), and a minimum effect below which a change is not
//! called (default 5%, as benchstat-style regression gates do).

use std::collections::BTreeMap;

use costlab_core::model::{Doc, ResultRow};

use super::mwu;

pub const ALPHA: f64 = 0.05;

/// The smallest change of the median, in percent, that is called a change by default.
pub const MIN_EFFECT_PCT: f64 = 5.0;

/// What the test says of one figure.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// p < alpha: the figure moved.
    Significant { p: f64 },
    /// p >= alpha.
    NoChange { p: f64 },
    /// Even a full separation of the samples could not reach alpha with this many samples.
    TooFew { min_p: f64 },
    /// The samples differ (BH-adjusted q < alpha) but the median moved less than the minimum
    /// effect: real perhaps, too small to call.
    Small { p: f64 },
    /// The samples differ, but one side's figure is disturbed or noisy: the change may be the
    /// interference, so it is not called. `why` names the side and its verdict.
    NotClean { p: f64, why: String },
}

impl Verdict {
    pub fn text(&self) -> String {
        match self {
            Verdict::Significant { p } => format!("significant (p={})", p_text(*p)),
            Verdict::NoChange { p } => format!("no significant change (p={})", p_text(*p)),
            Verdict::TooFew { min_p } => format!(
                "too few samples to tell (best possible p={})",
                p_text(*min_p)
            ),
            Verdict::Small { p } => {
                format!("under the minimum effect, not called (p={})", p_text(*p))
            }
            Verdict::NotClean { p, why } => {
                format!("not called: {why} (p={})", p_text(*p))
            }
        }
    }
}

pub fn p_text(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

/// One figure present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub figure: String,
    pub unit: String,
    pub a: f64,
    pub b: f64,
    /// (b - a) / a in percent; infinite when a is 0.
    pub change_pct: f64,
    pub u: f64,
    /// The p value adjusted by Benjamini-Hochberg over every figure compared.
    pub q: f64,
    pub verdict: Verdict,
    /// Each side's own verdict on the figure (None for runs stored before verdicts).
    pub quality_a: Option<costlab_core::model::Quality>,
    pub quality_b: Option<costlab_core::model::Quality>,
}

impl Change {
    /// The test called the change: significant after Benjamini-Hochberg, above the minimum
    /// effect, both sides clean.
    pub fn called(&self) -> bool {
        matches!(self.verdict, Verdict::Significant { .. })
    }

    /// The figure got worse: larger for a cost (ns, us, %, cycles), smaller for a rate.
    pub fn worse(&self) -> bool {
        if lower_is_better(&self.unit, &self.figure) {
            self.b > self.a
        } else {
            self.b < self.a
        }
    }

    /// A called change that made the figure worse.
    pub fn regression(&self) -> bool {
        self.called() && self.worse()
    }

    /// The raw p value the verdict carries.
    pub fn p(&self) -> f64 {
        match &self.verdict {
            Verdict::Significant { p }
            | Verdict::NoChange { p }
            | Verdict::Small { p }
            | Verdict::NotClean { p, .. } => *p,
            Verdict::TooFew { min_p } => *min_p,
        }
    }
}

impl Verdict {
    /// One word for JSON: significant, no-change, too-few, small, not-clean.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Significant { .. } => "significant",
            Verdict::NoChange { .. } => "no-change",
            Verdict::TooFew { .. } => "too-few",
            Verdict::Small { .. } => "small",
            Verdict::NotClean { .. } => "not-clean",
        }
    }
}

/// Whether a smaller figure is the better one, read from its unit and label or figure name.
pub fn lower_is_better(unit: &str, label: &str) -> bool {
    let l = label.to_ascii_lowercase();
    match unit {
        "ns" | "us" | "µs" | "ms" | "s" | "cycles" => true,
        "%" => !(l.contains("cut") || l.contains("saving") || l.contains("gain")),
        _ => false,
    }
}

impl Comparison {
    /// The comparison as JSON for CI (`compare --json`): each figure's A, B, change, p,
    /// BH-adjusted p, the test's verdict, whether it is a regression, and both sides' quality.
    pub fn to_json(&self, a_id: &str, b_id: &str) -> serde_json::Value {
        use serde_json::json;
        let q = |x: Option<costlab_core::model::Quality>| x.map(|q| q.word());
        let num = |x: f64| {
            if x.is_finite() {
                json!(x)
            } else {
                serde_json::Value::Null
            }
        };
        json!({
            "a": a_id,
            "b": b_id,
            "test": "Mann-Whitney U, two-sided; Benjamini-Hochberg",
            "alpha": ALPHA,
            "min_effect_pct": self.min_effect_pct,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "called": self.changes.iter().filter(|c| c.called()).count(),
            "regressions": self.changes.iter().filter(|c| c.regression()).count(),
            "figures": self.changes.iter().map(|c| json!({
                "figure": c.figure,
                "unit": c.unit,
                "a": c.a,
                "b": c.b,
                "change_pct": num(c.change_pct),
                "p": c.p(),
                "p_adjusted": c.q,
                "verdict": c.verdict.word(),
                "reading": c.verdict.text(),
                "worse": c.worse(),
                "regression": c.regression(),
                "quality_a": q(c.quality_a),
                "quality_b": q(c.quality_b),
            })).collect::<Vec<_>>(),
        })
    }
}

/// The comparison of run A (before) with run B (after).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub changes: Vec<Change>,
    pub only_a: usize,
    pub only_b: usize,
    /// The minimum effect (percent) the verdicts used.
    pub min_effect_pct: f64,
}

/// Benjamini-Hochberg adjusted p values (q), in the order given: q_(i) = min over j >= i of
/// p_(j) m / j for the sorted p, capped at 1.
pub fn bh_adjust(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        q[i] = running.min(1.0);
    }
    q
}

/// Test one figure's samples, a before and b after.
pub fn judge(a: &[f64], b: &[f64]) -> Option<(f64, Verdict)> {
    let t = mwu::test(a, b)?;
    let v = if t.min_p >= ALPHA {
        Verdict::TooFew { min_p: t.min_p }
    } else if t.p < ALPHA {
        Verdict::Significant { p: t.p }
    } else {
        Verdict::NoChange { p: t.p }
    };
    Some((t.u, v))
}

fn by_figure(doc: &Doc) -> BTreeMap<String, &ResultRow> {
    let mut m = BTreeMap::new();
    for r in &doc.results {
        // The first row of a figure wins: a lab repeats a figure only by mistake.
        m.entry(r.figure_id()).or_insert(r);
    }
    m
}

pub fn compare(a: &Doc, b: &Doc) -> Comparison {
    compare_with(a, b, MIN_EFFECT_PCT)
}

/// Compare with a minimum effect of `min_effect_pct` percent.
pub fn compare_with(a: &Doc, b: &Doc, min_effect_pct: f64) -> Comparison {
    let fa = by_figure(a);
    let fb = by_figure(b);
    let mut changes = Vec::new();
    for (id, ra) in &fa {
        let Some(rb) = fb.get(id) else { continue };
        let Some((u, verdict)) = judge(&ra.samples, &rb.samples) else {
            continue;
        };
        let (ma, mb) = (ra.summary.median, rb.summary.median);
        let change_pct = if ma == 0.0 {
            f64::INFINITY
        } else {
            (mb - ma) / ma.abs() * 100.0
        };
        changes.push(Change {
            figure: id.clone(),
            unit: ra.unit.clone(),
            a: ma,
            b: mb,
            change_pct,
            u,
            q: 1.0,
            verdict,
            quality_a: ra.quality,
            quality_b: rb.quality,
        });
    }
    // Many figures at once: a raw p < 0.05 would call one in twenty unchanged figures
    // changed. Adjust over all of them, then ask for an effect worth calling.
    let raw: Vec<f64> = changes
        .iter()
        .map(|c| match c.verdict {
            Verdict::Significant { p }
            | Verdict::NoChange { p }
            | Verdict::Small { p }
            | Verdict::NotClean { p, .. } => p,
            // Too few samples: still one of the m tests, its p at least this.
            Verdict::TooFew { min_p } => min_p,
        })
        .collect();
    let q = bh_adjust(&raw);
    for (c, q) in changes.iter_mut().zip(q) {
        c.q = q;
        if let Verdict::Significant { p } | Verdict::NoChange { p } = c.verdict {
            c.verdict = if q >= ALPHA {
                Verdict::NoChange { p }
            } else if c.change_pct.abs() < min_effect_pct {
                Verdict::Small { p }
            } else if let Some(why) = not_clean(fa[&c.figure], fb[&c.figure]) {
                Verdict::NotClean { p, why }
            } else {
                Verdict::Significant { p }
            };
        }
    }
    Comparison {
        min_effect_pct,
        only_a: fa.keys().filter(|k| !fb.contains_key(*k)).count(),
        only_b: fb.keys().filter(|k| !fa.contains_key(*k)).count(),
        changes,
    }
}

/// Why a change between these two figures cannot be called: one side disturbed or noisy.
fn not_clean(a: &ResultRow, b: &ResultRow) -> Option<String> {
    use costlab_core::model::Quality;
    let bad = |r: &ResultRow| r.quality.filter(|q| *q != Quality::Ok);
    match (bad(a), bad(b)) {
        (None, None) => None,
        (Some(q), None) => Some(format!("A is {}", q.word())),
        (None, Some(q)) => Some(format!("B is {}", q.word())),
        (Some(qa), Some(qb)) => Some(format!("A is {}, B is {}", qa.word(), qb.word())),
    }
}

/// What identifies a machine for comparison: facts that stay put between two runs on the same
/// machine. Free memory per node, free hugepages and interrupt counts change by the second and
/// say nothing about whether two runs are comparable, so they are left out.
const MACHINE_IDENTITY: [&str; 20] = [
    "cpu_model",
    "arch",
    "cpus_online",
    "allowed_cpus",
    "threads_per_core",
    "cores",
    "sockets",
    "caches",
    "numa_nodes",
    "mem_total",
    "base_page",
    "thp",
    "kernel",
    "hypervisor",
    "cpu_flags",
    "mitigations",
    "io_uring",
    "perf_event_paranoid",
    "zone_reclaim_mode",
    "numa_balancing",
];

/// The identity facts on which two runs' machines differ (empty: the same machine, as far as
/// the figures are concerned).
pub fn machine_differences(a: &serde_json::Value, b: &serde_json::Value) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = MACHINE_IDENTITY
        .iter()
        .copied()
        .filter(|k| a.get(k) != b.get(k))
        .collect();
    // The run's fingerprint: facts of the set-up that may change on one machine. Compared only
    // when both runs recorded one (documents from before it carry none).
    let (fa, fb) = (a.get("fingerprint"), b.get("fingerprint"));
    if let (Some(fa), Some(fb)) = (fa, fb) {
        for k in FINGERPRINT {
            if fa.get(k) != fb.get(k) && !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// The fingerprint's facts (`machine::identity::Fingerprint`).
const FINGERPRINT: [&str; 8] = [
    "kernel",
    "microcode",
    "mitigations",
    "governor",
    "thp",
    "smt",
    "product",
    "hypervisor",
];

/// The two runs' machine ids when they differ (None: the same machine, or unknown).
pub fn other_machine(a: &serde_json::Value, b: &serde_json::Value) -> Option<(String, String)> {
    let (ia, ib) = (
        costlab_core::machine::identity::machine_id_of(a),
        costlab_core::machine::identity::machine_id_of(b),
    );
    (ia != ib).then_some((ia, ib))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::render;
    use costlab_core::model::{Outcome, RunInfo};

    fn doc(id: &str, samples: Vec<f64>) -> Doc {
        let mut o = Outcome::default();
        o.push(
            "mem",
            costlab_core::case! {"op" => "read", "pattern" => "seq", "pages" => "4k", "block" => 1u64 << 30, "threads" => 1},
            "bandwidth",
            "GB/s",
            samples,
        );
        o.push(
            "syscall",
            costlab_core::case! {"call" => "getppid"},
            "latency",
            "ns",
            vec![50.0, 51.0, 52.0],
        );
        let run = RunInfo {
            id: id.into(),
            started: "2026-11-22T10:00:00Z".into(),
            costlab: "0.1.0".into(),
            command: "costlab mem".into(),
            complete: true,
        };
        Doc::new(run, serde_json::json!({}), o)
    }

    #[test]
    fn a_real_drop_is_flagged_and_a_rerun_is_not() {
        let a = doc("a", vec![30.0, 31.0, 30.5, 30.8, 31.2]);
        let b = doc("b", vec![20.0, 21.0, 19.5, 20.4, 20.9]);
        let c = compare(&a, &b);
        let mem = c
            .changes
            .iter()
            .find(|x| x.figure.starts_with("mem"))
            .unwrap();
        assert_eq!(mem.u, 25.0);
        assert!(
            matches!(mem.verdict, Verdict::Significant { p } if (p - 2.0 / 252.0).abs() < 1e-12)
        );
        assert!((mem.change_pct - (20.4 - 30.8) / 30.8 * 100.0).abs() < 1e-9);
        // 3 vs 3 samples cannot reach 5%.
        let sys = c
            .changes
            .iter()
            .find(|x| x.figure.starts_with("syscall"))
            .unwrap();
        assert!(matches!(sys.verdict, Verdict::TooFew { .. }));

        let again = doc("c", vec![30.9, 30.4, 31.1, 30.7, 31.0]);
        let c2 = compare(&a, &again);
        let mem = c2
            .changes
            .iter()
            .find(|x| x.figure.starts_with("mem"))
            .unwrap();
        assert!(
            matches!(mem.verdict, Verdict::NoChange { .. }),
            "{:?}",
            mem.verdict
        );
        let text = render(&c2, "a", "c");
        assert!(text.contains("no significant change"), "{text}");
        assert!(text.contains("too few samples to tell"), "{text}");
    }

    #[test]
    fn a_change_against_a_disturbed_figure_is_not_called() {
        let a = doc("a", vec![10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0]);
        let mut b = doc("b", vec![5.0, 5.1, 4.9, 5.0, 5.2, 4.8, 5.0]);
        b.results[0].quality = Some(costlab_core::model::Quality::Disturbed);
        let c = compare(&a, &b);
        assert!(
            matches!(&c.changes[0].verdict, Verdict::NotClean { why, .. } if why == "B is disturbed"),
            "{:?}",
            c.changes[0].verdict
        );
        let text = render(&c, "a", "b");
        assert!(
            text.contains("0 of 2 figures changed significantly"),
            "{text}"
        );
        assert!(text.contains("not called: B is disturbed"), "{text}");
        // Both ok: the same samples are called.
        b.results[0].quality = Some(costlab_core::model::Quality::Ok);
        assert!(matches!(
            compare(&a, &b).changes[0].verdict,
            Verdict::Significant { .. }
        ));
    }

    #[test]
    fn benjamini_hochberg_by_hand() {
        // m = 4: p * 4 / rank, then the running minimum from the top.
        let q = bh_adjust(&[0.01, 0.04, 0.03, 0.5]);
        let want = [0.04, 0.04 * 4.0 / 3.0, 0.04 * 4.0 / 3.0, 0.5];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        assert!(bh_adjust(&[]).is_empty());
        assert_eq!(bh_adjust(&[0.9, 0.9]), vec![0.9, 0.9]);
    }

    #[test]
    fn many_figures_a_lone_low_p_and_small_effects_are_not_called() {
        let run = |id: &str, shift: &[f64]| {
            let mut o = Outcome::default();
            for (i, s) in shift.iter().enumerate() {
                o.push(
                    "x",
                    costlab_core::case! {"i" => i},
                    "t",
                    "ns",
                    (0..5).map(|k| 100.0 + k as f64 * 0.1 + s).collect(),
                );
            }
            let info = RunInfo {
                id: id.into(),
                started: "2026-11-22T10:00:00Z".into(),
                costlab: "0".into(),
                command: "costlab".into(),
                complete: true,
            };
            Doc::new(info, serde_json::json!({}), o)
        };
        // 20 figures; one moved by 2% (fully separated samples, raw p = 0.0079), the rest not.
        let mut shift = vec![0.0; 20];
        let a = run("a", &shift);
        shift[3] = 2.0;
        let b = run("b", &shift);
        let c = compare(&a, &b);
        assert_eq!(c.changes.len(), 20);
        // BH over 20 figures: q = 0.0079 * 20 = 0.16, not a discovery.
        let moved = &c.changes.iter().find(|x| x.figure.contains("i=3")).unwrap();
        assert!((moved.q - 20.0 * 2.0 / 252.0).abs() < 1e-9, "{}", moved.q);
        assert!(matches!(moved.verdict, Verdict::NoChange { .. }));
        // Every figure moved by 2%: all discoveries, all under the 5% minimum effect.
        let b = run("b", &[2.0; 20]);
        let c = compare(&a, &b);
        assert!(c
            .changes
            .iter()
            .all(|x| matches!(x.verdict, Verdict::Small { .. })));
        let text = render(&c, "a", "b");
        assert!(
            text.contains("0 of 20 figures changed significantly; 20 moved by less than 5%"),
            "{text}"
        );
        // With a 1% minimum they are called.
        let c = compare_with(&a, &b, 1.0);
        assert!(c
            .changes
            .iter()
            .all(|x| matches!(x.verdict, Verdict::Significant { .. })));
    }

    #[test]
    fn machines_differ_only_on_identity_facts() {
        let a = serde_json::json!({"cpu_model": "EPYC", "kernel": "6.18", "nodes": [{"free": 1}], "hugepages": [{"free": 0}]});
        let same = serde_json::json!({"cpu_model": "EPYC", "kernel": "6.18", "nodes": [{"free": 2}], "hugepages": [{"free": 512}]});
        let newer =
            serde_json::json!({"cpu_model": "EPYC", "kernel": "6.19", "nodes": [{"free": 1}]});
        assert!(super::machine_differences(&a, &same).is_empty());
        assert_eq!(super::machine_differences(&a, &newer), vec!["kernel"]);
        let fp = |mc: &str, gov: &str| {
            serde_json::json!({"cpu_model": "EPYC", "id": "m1",
            "fingerprint": {"kernel": "6.18", "microcode": mc, "governor": gov, "smt": "on"}})
        };
        assert_eq!(
            super::machine_differences(&fp("0x1", "performance"), &fp("0x2", "powersave")),
            vec!["microcode", "governor"]
        );
        assert_eq!(super::other_machine(&fp("0x1", "x"), &fp("0x2", "y")), None);
        let mut elsewhere = fp("0x1", "x");
        elsewhere["id"] = "m2".into();
        assert_eq!(
            super::other_machine(&fp("0x1", "x"), &elsewhere),
            Some(("m1".to_string(), "m2".to_string()))
        );
    }
}
