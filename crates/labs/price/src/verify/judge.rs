//! A trial's verdict over its pairs (A as it is, B with the remedy), and its lines: the
//! prediction beside the measured saving, the other fields saved, the kernel's saving by
//! measured class, the Go runtime's own view, what THP's counted events price, and the advice
//! (only for a confirmed what-if).

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use super::measure::RunMeasure;
use super::overhead::Overhead;
use super::plan::{After, Trial};
use super::thp::{self, Prediction};
use super::verdict::{self, Predicted, Verdict};
use super::{Of, Tried};
use crate::pricing::Units;

/// The runs of one trial, A and B paired in their rounds.
struct Pairs<'a> {
    a: &'a [RunMeasure],
    b: &'a [RunMeasure],
    n: usize,
}

impl<'a> Pairs<'a> {
    fn iter(&self) -> impl Iterator<Item = (&'a RunMeasure, &'a RunMeasure)> + '_ {
        self.a.iter().zip(self.b).take(self.n)
    }

    /// A - B of a field, each pair.
    fn saved(&self, f: impl Fn(&RunMeasure) -> f64) -> Vec<f64> {
        self.iter().map(|(a, b)| f(a) - f(b)).collect()
    }
}

/// "12 ms (3 ms to 20 ms)": a saving's median and range, or "nothing".
fn span(v: &[f64]) -> String {
    Summary::of(v).map_or("nothing".into(), |s| {
        format!(
            "{} ({} to {})",
            signed(s.median),
            signed(s.min),
            signed(s.max)
        )
    })
}

/// The verdict of one trial over its pairs, and its lines.
pub(super) fn judge_trial(
    t: &Trial,
    a: &[RunMeasure],
    b: &[RunMeasure],
    units: &Units,
    probe: &RunMeasure,
    overhead: Option<&Overhead>,
) -> Tried {
    let p = Pairs {
        a,
        b,
        n: a.len().min(b.len()),
    };
    let measured = p.saved(|m| t.of.of(m));
    let wall_saved = p.saved(|m| m.wall_ns);
    let rate_change: Vec<f64> = p
        .iter()
        .filter_map(|(a, b)| Some((b.rate? / a.rate.filter(|r| *r > 0.0)? - 1.0) * 100.0))
        .collect();
    let predicted = match &t.prediction {
        Prediction::Saves(p, _) => *p,
        Prediction::Withdrawn(_) => None,
    };
    let v = verdict::judge(predicted, &measured);
    let before = t.before.map(|p| (p, verdict::judge(Some(p), &measured)));
    let mut lines = vec![headline(t, p.n, &measured, v)];
    let mut beside = format!(
        "  beside it, saved: CPU {}, kernel {}, user {}, wall {}",
        span(&p.saved(|m| m.cpu_usage_ns)),
        span(&p.saved(|m| m.system_ns)),
        span(&p.saved(|m| m.user_ns)),
        span(&wall_saved)
    );
    if !rate_change.is_empty() {
        beside += &format!(", rate {}", pct_span(&rate_change));
    }
    lines.push(beside);
    lines.extend(overhead.and_then(|o| by_class(t, &p, o)));
    if t.after == After::Gc {
        lines.extend(gc_fraction(
            t,
            &p,
            probe,
            predicted,
            &rate_change,
            &wall_saved,
        ));
        lines.extend(memory_calls(t, &p));
    }
    if t.after == After::Thp {
        lines.extend(thp_priced(&p, units, &measured));
    }
    if let Some((p, bv)) = before {
        lines.push(format!(
            "  the model before this fix (faults / 512, or the gc lab's curve) predicted a saving of {}: {}",
            human_ns(p.1),
            bv.word()
        ));
    }
    lines.extend(advice(t, &p, v, &measured));
    Tried {
        what: t.what,
        remedy: t.remedy.clone(),
        of: t.of,
        verdict: v,
        predicted,
        measured,
        wall_saved,
        rate_change,
        before,
        lines,
    }
}

/// The trial's first line: the prediction, the measured saving and the verdict.
fn headline(t: &Trial, n: usize, measured: &[f64], v: Verdict) -> String {
    let what = format!("{} ({})", t.what, t.remedy);
    match &t.prediction {
        Prediction::Saves(Some(p), why) => format!(
            "{what}: predicted saving {} of {} time ({why}); measured saving {} over {n} pairs: {}",
            human_ns(p.1),
            t.of.word(),
            span(measured),
            v.word()
        ),
        Prediction::Saves(None, why) | Prediction::Withdrawn(why) => format!(
            "{what}: no size predicted ({why}); measured saving {} of {} time over {n} pairs: {}",
            span(measured),
            t.of.word(),
            v.word()
        ),
    }
}

/// The kernel's saving by measured class, the tracer's own cost taken out (traced runs).
fn by_class(t: &Trial, p: &Pairs, o: &Overhead) -> Option<String> {
    let class = |c: &'static str| {
        let v: Vec<f64> = p
            .iter()
            .filter_map(|(a, b)| {
                Some(a.traced.as_ref()?.class_ns(c, o) - b.traced.as_ref()?.class_ns(c, o))
            })
            .collect();
        (!v.is_empty()).then(|| format!("{c} {}", span(&v)))
    };
    let parts: Vec<String> = ["syscall", "fault", "irq", "softirq", "kernel-other"]
        .into_iter()
        .filter_map(class)
        .collect();
    let cost = |runs: &[RunMeasure]| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .filter_map(|m| m.traced.as_ref())
            .map(|t| t.tracer_ns)
            .collect();
        Summary::of(&v).map_or(0.0, |s| s.median)
    };
    (!parts.is_empty()).then(|| {
        format!(
            "  the kernel's saving by measured class: {} (the tracer's own cost, taken out: {} a run as it is, {} with {})",
            parts.join(", "),
            human_ns(cost(p.a)),
            human_ns(cost(p.b)),
            t.remedy
        )
    })
}

/// A Go trial: its runtime's own GC CPU fraction on each side, and the throughput.
fn gc_fraction(
    t: &Trial,
    p: &Pairs,
    probe: &RunMeasure,
    predicted: Predicted,
    rate_change: &[f64],
    wall_saved: &[f64],
) -> Option<String> {
    let fraction = |runs: &[RunMeasure]| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .filter_map(|m| m.go_gc_cpu_fraction)
            .collect();
        Summary::of(&v)
    };
    let (x, y) = (fraction(p.a)?, fraction(p.b)?);
    let wall_ratio = probe.wall_ns / probe.cpu_usage_ns.max(1.0);
    let predicted_wall = predicted.map(|p| p.1 * wall_ratio);
    Some(format!(
        "  its runtime's GC CPU fraction: {:.1}% as it is, {:.1}% with {} (ratio {:.2}); throughput {}{}",
        x.median,
        y.median,
        t.remedy,
        y.median / x.median.max(1e-9),
        if rate_change.is_empty() { format!("by wall time {}", span(wall_saved)) } else { pct_span(rate_change) },
        predicted_wall.map_or(String::new(), |w| format!(" (predicted wall saved: {}, at its {:.2} CPUs busy)", human_ns(w), 1.0 / wall_ratio))
    ))
}

/// A Go trial: the calls its runtime's scavenger and heap made, counted, on each side.
fn memory_calls(t: &Trial, p: &Pairs) -> Option<String> {
    let med = |runs: &[RunMeasure], name: &str| {
        let v: Vec<f64> = runs
            .iter()
            .take(p.n)
            .map(|m| m.calls(name) as f64)
            .collect();
        Summary::of(&v).map_or(0.0, |s| s.median)
    };
    p.a.iter().any(|m| !m.memory_calls.is_empty()).then(|| {
        format!(
            "  its runtime's scavenger and heap, counted: madvise {:.0} calls a run as it is, {:.0} with {}; mmap {:.0} and {:.0}",
            med(p.a, "madvise"),
            med(p.b, "madvise"),
            t.remedy,
            med(p.a, "mmap"),
            med(p.b, "mmap")
        )
    })
}

/// A THP trial: the saving its counted THP events price, and the kernel time they do not.
fn thp_priced(p: &Pairs, units: &Units, measured: &[f64]) -> Option<String> {
    let ex: Vec<(f64, String)> = p
        .iter()
        .filter_map(|(a, b)| thp::explained(a, b, units))
        .collect();
    let (_, why) = ex.last()?;
    let priced: Vec<f64> = ex.iter().map(|e| e.0).collect();
    let rest: Vec<f64> = measured.iter().zip(&priced).map(|(m, p)| p - m).collect();
    Some(format!(
        "  priced from what it counted: a saving of {} of kernel time; {why}; the other {} of kernel time it took is work these events do not price",
        span(&priced),
        span(&rest)
    ))
}

/// Advice for a confirmed what-if; for one that saves another size than predicted, that it is
/// not advice.
fn advice(t: &Trial, p: &Pairs, v: Verdict, measured: &[f64]) -> Option<String> {
    match v {
        Verdict::Confirmed => Some(format!(
            "  advice: {} saves {} of {} time here{}",
            t.remedy,
            span(measured),
            t.of.word(),
            if t.of == Of::Cpu {
                String::new()
            } else {
                format!(" (CPU in all: {})", span(&p.saved(|m| m.cpu_usage_ns)))
            }
        )),
        Verdict::SizeOff => Some(format!(
            "  not advice: it saves, but not what the model says (measured {})",
            span(measured)
        )),
        _ => None,
    }
}

/// A signed time: "-350 ms" for a rise.
fn signed(ns: f64) -> String {
    if ns < 0.0 {
        format!("-{}", human_ns(-ns))
    } else {
        human_ns(ns)
    }
}

pub(super) fn pct_span(v: &[f64]) -> String {
    Summary::of(v).map_or("nothing".into(), |s| {
        format!("{:+.1}% ({:+.1}% to {:+.1}%)", s.median, s.min, s.max)
    })
}
