//! A trial's rows (`price what-if`: what, verdict; saved, measured_saved), its model (the
//! predicted saving beside the measured one, per what-if), and what `--strict` and `compare`
//! read back from stored rows.

use costlab_core::measure::quality::Quality;
use costlab_history::report::{Doc, Model, ModelPoint, Outcome, ResultRow};

use super::{Tried, Verdict};
use crate::LAB;

/// Rows per what-if: `saved` (predicted: low, mid, high), `measured_saved` (one per pair),
/// `wall_saved`, `rate_change` (%) where --rate found the program's rate, and `work_change`
/// (%) where --work found its work in every run (`measured_saved` is then at equal work).
pub fn push(o: &mut Outcome, tried: &[Tried], cmd: &str) {
    for t in tried {
        let case = costlab_core::case! {
            "what" => t.what, "verdict" => t.verdict.word(), "remedy" => t.remedy,
            "of" => t.of.word(), "command" => cmd
        };
        let mut rows = vec![
            (
                "saved",
                "ns",
                t.predicted.map(|p| vec![p.0, p.1, p.2]).unwrap_or_default(),
            ),
            ("measured_saved", "ns", t.measured.clone()),
            ("wall_saved", "ns", t.wall_saved.clone()),
            ("rate_change", "%", t.rate_change.clone()),
            ("work_change", "%", t.work_change.clone()),
        ];
        for (metric, unit, samples) in rows.drain(..) {
            if let Some(mut r) = ResultRow::new(LAB, case.clone(), metric, unit, samples) {
                // The pairs' spread is what the verdict judges: not a figure's noise.
                r.quality = Some(Quality::Ok);
                o.results.push(r);
            }
        }
    }
    let points = tried
        .iter()
        .filter_map(|t| {
            let m = costlab_core::measure::Summary::of(&t.measured)?;
            Some(ModelPoint {
                case: costlab_core::case! {"what" => t.what, "remedy" => t.remedy, "verdict" => t.verdict.word()},
                predicted: t.predicted.map_or(f64::NAN, |p| p.1),
                measured: m.median,
                unit: "ns".into(),
            })
        })
        .filter(|p| p.predicted.is_finite())
        .collect();
    o.models.push(Model {
        lab: LAB.into(),
        name: format!("what-ifs tried on {cmd}"),
        params: serde_json::Map::new(),
        points,
        verdict: std::iter::once(tally(tried))
            .chain(tried.iter().flat_map(|t| t.lines.clone()))
            .collect(),
    });
}

/// One line: how many what-ifs each verdict took.
fn tally(tried: &[Tried]) -> String {
    let count = |v: Verdict| tried.iter().filter(|t| t.verdict == v).count();
    let pairs = tried.iter().map(|t| t.measured.len()).max().unwrap_or(0);
    format!(
        "what-ifs tried over {pairs} pairs: {} confirmed, {} refuted, {} level, {} size-off; {} not tried",
        count(Verdict::Confirmed),
        count(Verdict::Refuted),
        count(Verdict::Level),
        count(Verdict::SizeOff),
        count(Verdict::NotTried)
    )
}

/// Whether a stored row is a tried what-if's measured saving.
fn is_tried(r: &ResultRow) -> bool {
    r.lab == LAB && r.metric == "measured_saved" && r.case.contains_key("verdict")
}

/// `--strict`: one line per refuted what-if.
pub fn refuted_lines(rows: &[ResultRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| is_tried(r) && r.key("verdict") == Verdict::Refuted.word())
        .map(|r| {
            format!(
                "what-if {} ({}) refuted: the trial measured {:.0} ns saved",
                r.key("what"),
                r.key("remedy"),
                r.summary.median
            )
        })
        .collect()
}

/// `compare` of two verified prices: each what-if's verdict in A and in B.
pub fn compare_lines(a: &Doc, b: &Doc) -> Vec<String> {
    let verdicts = |d: &Doc| -> Vec<(String, String, f64)> {
        d.results
            .iter()
            .filter(|r| is_tried(r))
            .map(|r| {
                (
                    format!("{} ({})", r.key("what"), r.key("remedy")),
                    r.key("verdict"),
                    r.summary.median,
                )
            })
            .collect()
    };
    let (va, vb) = (verdicts(a), verdicts(b));
    let mut names: Vec<&String> = va.iter().chain(&vb).map(|v| &v.0).collect();
    names.sort();
    names.dedup();
    let show = |v: &[(String, String, f64)], n: &str| {
        v.iter()
            .find(|x| x.0 == n)
            .map_or("not tried".to_string(), |x| {
                format!(
                    "{} ({} saved)",
                    x.1,
                    costlab_core::measure::units::human_ns(x.2)
                )
            })
    };
    names
        .into_iter()
        .map(|n| format!("what-if {n}: A {}, B {}", show(&va, n), show(&vb, n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Of;

    fn tried(verdict: Verdict, measured: Vec<f64>) -> Tried {
        Tried {
            what: "thp",
            remedy: "THP always".into(),
            of: Of::Kernel,
            verdict,
            predicted: Some((300e6, 352e6, 400e6)),
            measured,
            wall_saved: vec![1.0, 2.0],
            rate_change: Vec::new(),
            work_change: Vec::new(),
            before: None,
            lines: vec!["thp (THP always): refuted".into()],
        }
    }

    #[test]
    fn a_tried_what_if_has_the_contracts_keys_and_metrics() {
        let mut o = Outcome::default();
        push(
            &mut o,
            &[tried(Verdict::Refuted, vec![-400e6, -350e6])],
            "prog",
        );
        let saved = o.results.iter().find(|r| r.metric == "saved").unwrap();
        let v = serde_json::to_value(saved).unwrap();
        assert_eq!(v["lab"], "price");
        assert_eq!(v["case"]["what"], "thp");
        assert_eq!(v["case"]["verdict"], "refuted");
        assert_eq!(v["case"]["of"], "kernel");
        assert_eq!(v["unit"], "ns");
        assert_eq!(v["samples"], serde_json::json!([300e6, 352e6, 400e6]));
        let m = o
            .results
            .iter()
            .find(|r| r.metric == "measured_saved")
            .unwrap();
        assert_eq!(m.samples, vec![-400e6, -350e6]);
        assert!(o.results.iter().all(|r| r.metric != "rate_change"));
        assert_eq!(o.models[0].points[0].measured, -375e6);
        assert_eq!(refuted_lines(&o.results).len(), 1);
        assert_eq!(
            o.models[0].verdict[0],
            "what-ifs tried over 2 pairs: 0 confirmed, 1 refuted, 0 level, 0 size-off; 0 not tried"
        );
        assert!(refuted_lines(&o.results)[0].starts_with("what-if thp (THP always) refuted"));
    }

    #[test]
    fn not_tried_has_no_measured_saving() {
        let mut o = Outcome::default();
        let mut t = tried(Verdict::NotTried, Vec::new());
        t.wall_saved.clear();
        push(&mut o, &[t], "prog");
        assert_eq!(o.results.len(), 1);
        assert_eq!(o.results[0].metric, "saved");
        assert!(o.models[0].points.is_empty());
        assert!(refuted_lines(&o.results).is_empty());
    }
}
