//! Comparing two runs figure by figure: the change in the median and whether the samples say
//! it is real (two-sided Mann-Whitney U, alpha 0.05).

use std::collections::BTreeMap;

use crate::report::sheet::figure;
use crate::report::{Doc, ResultRow};

use super::mwu;

pub const ALPHA: f64 = 0.05;

/// What the test says of one figure.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// p < alpha: the figure moved.
    Significant { p: f64 },
    /// p >= alpha.
    NoChange { p: f64 },
    /// Even a full separation of the samples could not reach alpha with this many samples.
    TooFew { min_p: f64 },
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
        }
    }
}

fn p_text(p: f64) -> String {
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
    pub verdict: Verdict,
}

/// The comparison of run A (before) with run B (after).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub changes: Vec<Change>,
    pub only_a: usize,
    pub only_b: usize,
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
            verdict,
        });
    }
    Comparison {
        only_a: fa.keys().filter(|k| !fb.contains_key(*k)).count(),
        only_b: fb.keys().filter(|k| !fa.contains_key(*k)).count(),
        changes,
    }
}

/// The comparison as a table, with a count of what changed.
pub fn render(c: &Comparison, a_id: &str, b_id: &str) -> String {
    let mut out =
        format!("compare A = {a_id} with B = {b_id} (Mann-Whitney U, two-sided, alpha {ALPHA})\n");
    if c.changes.is_empty() {
        out.push_str("no figure is present in both runs\n");
    } else {
        let rows: Vec<Vec<String>> = c
            .changes
            .iter()
            .map(|ch| {
                vec![
                    ch.figure.clone(),
                    ch.unit.clone(),
                    figure(ch.a),
                    figure(ch.b),
                    if ch.change_pct.is_finite() {
                        format!("{:+.1}%", ch.change_pct)
                    } else {
                        "—".to_string()
                    },
                    figure(ch.u),
                    ch.verdict.text(),
                ]
            })
            .collect();
        out.push_str(&crate::report::table::render(
            &[
                "figure", "unit", "A median", "B median", "change", "U", "verdict",
            ],
            &rows,
        ));
        out.push('\n');
        let sig = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::Significant { .. }))
            .count();
        let few = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::TooFew { .. }))
            .count();
        out.push_str(&format!(
            "{sig} of {} figures changed significantly",
            c.changes.len()
        ));
        if few > 0 {
            out.push_str(&format!(
                "; {few} had too few samples to tell (take more with --samples)"
            ));
        }
        if sig == 0 && few < c.changes.len() {
            out.push_str("; no significant change");
        }
        out.push('\n');
    }
    if c.only_a + c.only_b > 0 {
        out.push_str(&format!(
            "{} figures only in A, {} only in B (not compared)\n",
            c.only_a, c.only_b
        ));
    }
    out
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
    let (ia, ib) = (super::machine_id(a), super::machine_id(b));
    (ia != ib).then_some((ia, ib))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Outcome, RunInfo};

    fn doc(id: &str, samples: Vec<f64>) -> Doc {
        let mut o = Outcome::default();
        o.push(
            "mem",
            crate::case! {"op" => "read", "pattern" => "seq", "pages" => "4k", "block" => 1u64 << 30, "threads" => 1},
            "bandwidth",
            "GB/s",
            samples,
        );
        o.push(
            "syscall",
            crate::case! {"call" => "getppid"},
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
