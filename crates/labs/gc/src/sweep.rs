//! The headroom sweep: one fresh Go process per point and repetition, and what it yields:
//! rows per (mode, headroom), the c/(c + h) model and the paper's points beside ours.

use anyhow::Result;
use serde_json::json;

use super::bench::{self, Build, HeapRun};
use super::plan::{self, Mode, Point, PAPER_POINTS};
use super::LAB;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::stats::{median, paired_ratios};
use costlab_history::report::{Model, ModelPoint, Outcome, ResultRow};

/// What to sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub modes: Vec<Mode>,
    pub headrooms: Vec<f64>,
    /// The live heap asked for (`--live`), or None for the default.
    pub live: Option<u64>,
    pub default_live: u64,
    pub reps: usize,
    /// Work as a multiple of the live heap allocated (None: the program's default).
    pub alloc: Option<f64>,
}

/// Run the sweep and turn it into an outcome.
pub fn sweep(cfg: &SweepConfig) -> Result<Outcome> {
    let max_h = cfg.headrooms.iter().copied().fold(0.0, f64::max);
    let (live, live_note) = plan::choose_live(
        cfg.live,
        cfg.default_live,
        max_h,
        costlab_core::machine::pages::mem_available(),
    )?;
    let bin = bench::locate(Build::Plain)?;
    let points = plan::points(&cfg.modes, &cfg.headrooms);
    let schedule = plan::schedule(&points, cfg.reps);
    let mut runs: Vec<Vec<HeapRun>> = vec![Vec::new(); points.len()];
    let bar = costlab_history::report::progress::bar(schedule.len() as u64, "gc");
    for (i, (rep, p)) in schedule.iter().enumerate() {
        costlab_core::measure::cancel::check()?;
        bar.set_message(format!(
            "{} h={} rep {}",
            p.mode.name(),
            p.headroom,
            rep + 1
        ));
        costlab_history::report::progress::note(&format!(
            "gc: {} h={} rep {}/{} (live {})",
            p.mode.name(),
            p.headroom,
            rep + 1,
            cfg.reps,
            human_size(live)
        ));
        let mut args = vec!["-live".to_string(), live.to_string()];
        if let Some(a) = cfg.alloc {
            args.extend(["-alloc".to_string(), a.to_string()]);
        }
        args.push("heap".to_string());
        let env = plan::env_for(p.mode, p.headroom, live);
        let text = bench::run(&bin.path, &args, &env)?;
        let run: HeapRun = bench::parse(&text)?;
        let idx = i % points.len();
        runs[idx].push(run);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut outcome = outcome_of(&points, &runs, live);
    if let Some(n) = live_note {
        outcome.notes.insert(0, n);
    }
    if bin.how != "cached" {
        outcome
            .notes
            .push(format!("gcbench {}: {}", bin.how, bin.path.display()));
    }
    Ok(outcome)
}

fn case_of(p: &Point, live: u64) -> costlab_history::report::Case {
    costlab_core::case! {"mode" => p.mode.name(), "headroom" => p.headroom, "live" => live, "runtime" => "go"}
}

/// Rows, models and notes from the runs of each point (pure: tested without Go).
pub fn outcome_of(points: &[Point], runs: &[Vec<HeapRun>], live: u64) -> Outcome {
    let mut o = Outcome::default();
    for (p, rs) in points.iter().zip(runs) {
        let case = case_of(p, live);
        // A run in which no GC cycle ended has an empty window: no share to report.
        let share: Vec<f64> = rs
            .iter()
            .map(|r| {
                if r.gc_cycles == 0 {
                    f64::NAN
                } else {
                    r.gc_cpu_share * 100.0
                }
            })
            .collect();
        let empty = share.iter().filter(|s| s.is_nan()).count();
        if empty > 0 {
            o.notes.push(format!(
                "{} h={}: no GC cycle ended during the work in {empty} of {} runs, so those runs give no GC share; use a smaller headroom or a larger --live",
                p.mode.name(), p.headroom, rs.len()
            ));
        }
        let share: Vec<f64> = share.into_iter().filter(|s| !s.is_nan()).collect();
        o.push(LAB, case.clone(), "gc_cpu_share", "%", share);
        o.push(
            LAB,
            case.clone(),
            "max_pause",
            "us",
            rs.iter()
                .filter(|r| r.gc_cycles > 0)
                .map(|r| r.max_pause_s * 1e6)
                .collect(),
        );
        o.push(
            LAB,
            case.clone(),
            "peak_rss",
            "MB",
            rs.iter().map(|r| r.peak_rss_bytes as f64 / 1e6).collect(),
        );
        o.push(
            LAB,
            case.clone(),
            "cycles",
            "count",
            rs.iter().map(|r| r.gc_cycles as f64).collect(),
        );
        o.push(
            LAB,
            case.clone(),
            "wall",
            "s",
            rs.iter().map(|r| r.wall_s).collect(),
        );
        // Slowdown against the same mode's largest headroom, run by run: run r of this
        // point and run r of the reference were taken in the same round.
        if let Some(ri) = reference_of(points, p.mode) {
            let this: Vec<f64> = rs.iter().map(|r| r.wall_s).collect();
            let reference: Vec<f64> = runs[ri].iter().map(|r| r.wall_s).collect();
            let slow: Vec<f64> = paired_ratios(&this, &reference)
                .into_iter()
                .map(|x| (x - 1.0) * 100.0)
                .collect();
            o.push(LAB, case, "slowdown", "%", slow);
        }
    }
    let all: Vec<&HeapRun> = runs.iter().flatten().collect();
    if let Some(first) = all.first() {
        let achieved = median(&all.iter().map(|r| r.live_bytes as f64).collect::<Vec<_>>());
        o.notes.push(format!(
            "live heap {} asked, {} achieved ({} vnodes); work: {} stat-like calls allocating {} each run, {} GOMAXPROCS, {}",
            human_size(live),
            human_size(achieved as u64),
            first.vnodes,
            first.ops,
            human_size(first.alloc_bytes),
            first.gomaxprocs,
            first.go_version
        ));
    }
    o.notes.push(
        "gc_cpu_share: runtime/metrics /cpu/classes/gc/total over (/cpu/classes/total - /cpu/classes/idle), from the end of a forced cycle before the work to the end of the last cycle in it; idle mark workers count as GC (on busy cores their work would fall to the mutator)".to_string(),
    );
    o.models.extend(models(points, &o, live));
    o
}

/// The point of `mode` with the largest headroom: slowdowns are measured against it.
fn reference_of(points: &[Point], mode: Mode) -> Option<usize> {
    points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.mode == mode)
        .max_by(|a, b| a.1.headroom.total_cmp(&b.1.headroom))
        .map(|(i, _)| i)
}

/// The median GC share (%) at one point, if measured.
pub fn share_at(o: &Outcome, mode: Mode, headroom: f64) -> Option<f64> {
    o.results
        .iter()
        .find(|r| {
            r.metric == "gc_cpu_share"
                && r.case.get("mode") == Some(&json!(mode.name()))
                && r.case.get("headroom") == Some(&json!(headroom))
        })
        .map(|r| r.summary.median)
}

/// The model c/(c + h) and the paper's points.
///
/// Each cycle marks the live heap (cost proportional to live) and a cycle comes every
/// h x live bytes allocated, so GC time / mutator time = c / h for a constant c of the
/// workload and machine, and the GC share is c / (c + h). c is fitted as the median of
/// h s / (1 - s) over the points.
fn models(points: &[Point], o: &Outcome, live: u64) -> Vec<Model> {
    let mut out = Vec::new();
    for mode in [Mode::Gogc, Mode::Memlimit] {
        let measured: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.mode == mode)
            .filter_map(|p| share_at(o, mode, p.headroom).map(|s| (p.headroom, s)))
            .collect();
        let Some(c) = fit_c(&measured) else { continue };
        let pts: Vec<ModelPoint> = measured
            .iter()
            .map(|&(h, s)| ModelPoint {
                case: costlab_core::case! {"mode" => mode.name(), "headroom" => h, "live" => live, "runtime" => "go"},
                predicted: share_model(c, h),
                measured: s,
                unit: "%".to_string(),
            })
            .collect();
        let mut verdict = vec![format!(
            "GC time / mutator time = {c:.3} / h here (the paper's two points give about 0.26 / h); the model's h for 10% GC: {:.2}",
            c * 9.0
        )];
        for p in &pts {
            if p.error().abs() > 0.25 {
                verdict.push(format!(
                    "h={}: measured {:.1}% vs {:.1}% predicted; the cost per cycle is not constant there (assists, limiter, or few cycles)",
                    p.case["headroom"], p.measured, p.predicted
                ));
            }
        }
        let mut params = serde_json::Map::new();
        params.insert("c".to_string(), json!(c));
        out.push(Model {
            lab: LAB.to_string(),
            name: format!("GC share = c / (c + h) ({})", mode.name()),
            params,
            points: pts,
            verdict,
        });
        out.extend(paper_model(
            mode.name(),
            |h| costlab_core::case! {"mode" => mode.name(), "headroom" => h, "live" => live, "runtime" => "go"},
            |h| share_at(o, mode, h),
            "predicted = the paper's figure (640 MB live, Biscuit's kernel heap); measured = this machine's"
                .to_string(),
        ));
    }
    out
}

/// The model's share (%) at headroom h.
pub fn share_model(c: f64, h: f64) -> f64 {
    100.0 * c / (c + h)
}

/// c from measured (h, share %) points: the median of h s / (1 - s).
pub fn fit_c(points: &[(f64, f64)]) -> Option<f64> {
    let cs: Vec<f64> = points
        .iter()
        .filter(|(_, s)| *s > 0.0 && *s < 100.0)
        .map(|&(h, s)| {
            let f = s / 100.0;
            h * f / (1.0 - f)
        })
        .collect();
    let c = median(&cs);
    c.is_finite().then_some(c)
}

/// The Biscuit paper's GC share at its headrooms (predicted) beside `measured(h)` here, named
/// for `who` (a mode or a runtime); None when none of the paper's headrooms was measured.
pub fn paper_model(
    who: &str,
    case: impl Fn(f64) -> costlab_history::report::Case,
    measured: impl Fn(f64) -> Option<f64>,
    verdict: String,
) -> Option<Model> {
    let points: Vec<ModelPoint> = PAPER_POINTS
        .iter()
        .filter_map(|&(h, paper)| {
            measured(h).map(|s| ModelPoint {
                case: case(h),
                predicted: paper,
                measured: s,
                unit: "%".to_string(),
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut params = serde_json::Map::new();
    params.insert("paper_live".to_string(), json!(plan::PAPER_LIVE));
    Some(Model {
        lab: LAB.to_string(),
        name: format!("Biscuit, OSDI 2018: GC share by headroom ({who})"),
        params,
        points,
        verdict: vec![verdict],
    })
}

/// The smallest headroom whose median GC share is under `target` %, among the gc_cpu_share
/// rows `pick` keeps (one mode, one runtime).
pub fn smallest_share_under(
    o: &Outcome,
    pick: impl Fn(&ResultRow) -> bool,
    target: f64,
) -> Option<(f64, f64)> {
    o.results
        .iter()
        .filter(|r| r.metric == "gc_cpu_share" && pick(r))
        .filter_map(|r| Some((r.case.get("headroom")?.as_f64()?, r.summary.median)))
        .filter(|(_, s)| *s < target)
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// The smallest headroom whose median GC share is under `target` %, per mode.
pub fn smallest_under(o: &Outcome, mode: Mode, target: f64) -> Option<(f64, f64)> {
    smallest_share_under(
        o,
        |r| r.case.get("mode") == Some(&json!(mode.name())),
        target,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(share: f64, cycles: u64, wall: f64) -> HeapRun {
        HeapRun {
            gc_cpu_share: share,
            gc_cpu_share_busy: share,
            gc_cycles: cycles,
            max_pause_s: 0.0005,
            peak_rss_bytes: 400_000_000,
            wall_s: wall,
            live_bytes: 128 << 20,
            vnodes: 430_185,
            ops: 1000,
            alloc_bytes: 1 << 30,
            gomaxprocs: 2,
            go_version: "go1.26".into(),
        }
    }

    #[test]
    fn outcome_rows_slowdown_and_models() {
        let pts = plan::points(&[Mode::Gogc], &[0.5, 2.0, 4.0]);
        let runs = vec![
            vec![run(0.34, 20, 3.0), run(0.36, 21, 3.3)],
            vec![run(0.10, 6, 2.2), run(0.12, 6, 2.2)],
            vec![run(0.05, 3, 2.0), run(0.0, 0, 2.0)],
        ];
        let o = outcome_of(&pts, &runs, 128 << 20);
        assert!((share_at(&o, Mode::Gogc, 0.5).unwrap() - 35.0).abs() < 1e-9);
        // The run with no cycle gives no share, and says so.
        let four = o
            .find("gc_cpu_share", &costlab_core::case! {"headroom" => 4.0})
            .unwrap();
        assert_eq!(four.summary.n, 1);
        assert!(o.notes.iter().any(|n| n.contains("no GC cycle")));
        // Slowdown is paired run by run against h=4 (walls 2.0, 2.0).
        let slow = o
            .find("slowdown", &costlab_core::case! {"headroom" => 0.5})
            .unwrap();
        assert_eq!(slow.samples.len(), 2);
        assert!((slow.samples[0] - 50.0).abs() < 1e-9);
        assert!((slow.samples[1] - 65.0).abs() < 1e-9);
        let rss = o
            .find("peak_rss", &costlab_core::case! {"headroom" => 2.0})
            .unwrap();
        assert_eq!((rss.unit.as_str(), rss.summary.median), ("MB", 400.0));
        let pause = o
            .find("max_pause", &costlab_core::case! {"headroom" => 2.0})
            .unwrap();
        assert!((pause.summary.median - 500.0).abs() < 1e-9);
        // The model and the paper's two points beside ours.
        assert_eq!(o.models.len(), 2);
        let paper = &o.models[1];
        assert_eq!(paper.points.len(), 2);
        assert_eq!(
            (paper.points[0].predicted, paper.points[1].predicted),
            (34.0, 9.0)
        );
        assert!((paper.points[0].measured - 35.0).abs() < 1e-9);
        assert_eq!(smallest_under(&o, Mode::Gogc, 10.0).map(|x| x.0), Some(4.0));
        assert_eq!(smallest_under(&o, Mode::Gogc, 12.0).map(|x| x.0), Some(2.0));
        assert_eq!(smallest_under(&o, Mode::Memlimit, 10.0), None);
        let text = serde_json::to_string(&o).unwrap();
        assert!(text.contains(r#""mode":"gogc","headroom":0.5"#));
    }

    #[test]
    fn c_fit_and_model() {
        // The paper's 0.5x -> 34% gives c = 0.5 * 0.34 / 0.66.
        let c = fit_c(&[(0.5, 34.0)]).unwrap();
        assert!((c - 0.5 * 0.34 / 0.66).abs() < 1e-12);
        assert!((share_model(c, 0.5) - 34.0).abs() < 1e-9);
        assert!(fit_c(&[]).is_none());
        assert!(fit_c(&[(1.0, 0.0)]).is_none());
    }

    #[test]
    fn reference_is_the_largest_headroom_of_the_mode() {
        let pts = plan::points(&[Mode::Gogc, Mode::Memlimit], &[3.0, 1.0]);
        assert_eq!(reference_of(&pts, Mode::Gogc), Some(0));
        assert_eq!(reference_of(&pts, Mode::Memlimit), Some(2));
    }
}
