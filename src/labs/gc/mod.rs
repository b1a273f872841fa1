//! The gc lab: what a garbage-collected language costs. It drives the Go program in
//! `gcbench/` (built on demand, cached, never fetched) and reads its JSON.
//!
//! - `costlab gc`: the GC's CPU share as the heap headroom h grows (GOGC = 100 h, or
//!   GOMEMLIMIT = live x (1 + h)), each point a fresh process, beside the Biscuit paper's
//!   0.5x -> 34% and 2x -> 9%.
//! - `costlab gc tax`: bounds checks, stack-check prologues and write barriers, each a ratio
//!   of two builds or variants from one run.

pub mod bench;
pub mod plan;
pub mod sweep;
pub mod tax;

use anyhow::Result;

use crate::cli::{GcArgs, GcTaxArgs};
use crate::error::usage;
use crate::labs::{Ctx, Headline, Lab};
use crate::measure::sizes::parse_size;
use crate::report::{table, Outcome};
use plan::Mode;

pub const LAB: &str = "gc";

/// Live heap for `--quick` and `costlab run`'s quick plan.
pub const QUICK_LIVE: u64 = 64 << 20;
/// Live heap the write-barrier kernel's cycles mark, by default.
pub const TAX_LIVE: u64 = 256 << 20;

fn reps_of(given: Option<usize>, default: usize) -> Result<usize> {
    match given {
        Some(0) => Err(usage(
            "bad --samples 0: give at least 1 (2 or more for a spread)",
        )),
        Some(n) if n > 100 => Err(usage(format!(
            "bad --samples {n}: at most 100 fresh processes per point"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// `costlab gc`: the headroom sweep.
pub fn run(args: &GcArgs, ctx: &Ctx) -> Result<Outcome> {
    let cfg = sweep::SweepConfig {
        modes: plan::parse_modes(&args.mode)?,
        headrooms: plan::parse_headrooms(&args.headroom)?,
        live: args.live.as_deref().map(parse_size).transpose()?,
        default_live: if ctx.quick {
            QUICK_LIVE
        } else {
            plan::PAPER_LIVE
        },
        reps: reps_of(
            args.reps.or(args.common.samples),
            if ctx.quick { 2 } else { 3 },
        )?,
        alloc: None,
    };
    let mut o = sweep::sweep(&cfg)?;
    counters_note(ctx, &mut o);
    Ok(o)
}

/// `costlab gc tax`.
pub fn run_tax(args: &GcTaxArgs, ctx: &Ctx) -> Result<Outcome> {
    let kinds = tax::parse_kinds(&args.kind)?;
    let reps = reps_of(
        args.reps.or(args.common.samples),
        if ctx.quick { 3 } else { 5 },
    )?;
    let live = match args.live.as_deref().map(parse_size).transpose()? {
        Some(l) => {
            plan::choose_live(Some(l), l, 1.0, plan::mem_available())?;
            l
        }
        None => tax_live(if ctx.quick { QUICK_LIVE } else { TAX_LIVE }),
    };
    let mut o = tax::measure(&kinds, reps, live)?;
    counters_note(ctx, &mut o);
    Ok(o)
}

/// The gc lab reads the Go runtime's own accounting; say so when counters were asked for.
fn counters_note(ctx: &Ctx, o: &mut Outcome) {
    if ctx.counters {
        o.notes.push(
            "--counters: the gc lab reads the Go runtime's metrics (runtime/metrics), not perf counters".to_string(),
        );
    }
}

/// The write-barrier heap: the default, shrunk when memory is short.
fn tax_live(default: u64) -> u64 {
    plan::choose_live(None, default, 1.0, plan::mem_available()).map_or(default, |(l, _)| l)
}

/// `costlab gc build`: both builds into the cache; prints where they are.
pub fn build_all() -> Result<String> {
    let plain = bench::locate(bench::Build::Plain)?;
    let nob = bench::locate(bench::Build::NoBounds)?;
    Ok(format!(
        "gcbench ({}): {}\ngcbench -gcflags=-B ({}): {}\n",
        plain.how,
        plain.path.display(),
        nob.how,
        nob.path.display()
    ))
}

/// The terminal rendering: the curve, the smallest h under 10%, the paper beside ours, the
/// model, and the taxes.
pub fn render(o: &Outcome) -> String {
    let mut out = String::new();
    let shares: Vec<_> = o
        .results
        .iter()
        .filter(|r| r.metric == "gc_cpu_share" || r.metric == "cycles")
        .filter(|r| r.metric == "cycles" || r.summary.n > 0)
        .collect();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut rows = Vec::new();
    for r in &shares {
        let key = (r.key("mode"), headroom_text(&r.case));
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let cell = |metric: &str, prec: usize| {
            o.results
                .iter()
                .find(|x| x.metric == metric && x.case == r.case)
                .map_or("—".to_string(), |x| x.summary.show(prec))
        };
        rows.push(vec![
            key.0.clone(),
            key.1.clone(),
            cell("gc_cpu_share", 1),
            cell("cycles", 0),
            cell("max_pause", 0),
            cell("peak_rss", 0),
            cell("wall", 2),
            cell("slowdown", 1),
        ]);
    }
    if !rows.is_empty() {
        out.push_str("GC cost by heap headroom h (free memory / live heap); median (min–max) of fresh processes\n");
        out.push_str(&table::render(
            &[
                "mode",
                "h",
                "GC CPU %",
                "cycles",
                "max pause us",
                "peak RSS MB",
                "wall s",
                "slowdown %",
            ],
            &rows,
        ));
        out.push('\n');
        for mode in [Mode::Gogc, Mode::Memlimit] {
            if !seen.iter().any(|(m, _)| m == mode.name()) {
                continue;
            }
            match sweep::smallest_under(o, mode, plan::TARGET_SHARE) {
                Some((h, s)) => out.push_str(&format!(
                    "{}: the smallest h keeping GC under {}% here is {h} ({s:.1}%; the paper's rule of thumb: 2-3x)\n",
                    mode.name(),
                    plan::TARGET_SHARE
                )),
                None => out.push_str(&format!(
                    "{}: no headroom tested keeps GC under {}% here; try larger h\n",
                    mode.name(),
                    plan::TARGET_SHARE
                )),
            }
        }
    }
    for m in &o.models {
        let rows: Vec<Vec<String>> = m
            .points
            .iter()
            .map(|p| {
                let spread = o
                    .results
                    .iter()
                    .find(|r| r.metric == "gc_cpu_share" && r.case == p.case)
                    .map_or(format!("{:.1}", p.measured), |r| r.summary.show(1));
                vec![
                    headroom_text(&p.case),
                    format!("{:.1}", p.predicted),
                    spread,
                ]
            })
            .collect();
        let predicted = if m.name.starts_with("Biscuit") {
            "paper GC %"
        } else {
            "model GC %"
        };
        out.push_str(&format!("\n{}\n", m.name));
        out.push_str(&table::render(&["h", predicted, "measured GC %"], &rows));
        out.push('\n');
        for v in &m.verdict {
            out.push_str(&format!("  {v}\n"));
        }
    }
    let taxes: Vec<Vec<String>> = o
        .results
        .iter()
        .filter(|r| r.metric == "overhead")
        .map(|r| {
            let kind = r.key("kind");
            let compares = tax::parse_kinds(&kind)
                .ok()
                .and_then(|k| k.first().copied());
            vec![
                kind,
                compares.map_or(String::new(), |k| k.compares().to_string()),
                r.summary.show(1),
                r.summary.n.to_string(),
            ]
        })
        .collect();
    if !taxes.is_empty() {
        out.push_str("\nLanguage-safety taxes: ratio of two builds/variants from one run, median (min–max)\n");
        out.push_str(&table::render(
            &["tax", "ratio of", "overhead %", "n"],
            &taxes,
        ));
        out.push('\n');
    }
    out
}

/// One line for a tax: its median, and when the spread crosses zero, that it is too noisy to
/// tell from no tax at all.
fn tax_reading(what: &str, s: &crate::measure::Summary) -> String {
    let paper = "Biscuit: bounds/nil 2-3%, prologues the largest item, barriers small";
    if s.min <= 0.0 && s.max >= 0.0 {
        format!(
            "{what} a median {:.1}% here, but the spread ({:.0}% to {:.0}%) crosses zero: too noisy to tell from no tax ({paper})",
            s.median, s.min, s.max
        )
    } else {
        format!("{what} {:.1}% here ({paper})", s.median)
    }
}

/// A case's headroom as typed on the command line: 0.5, 1, 2.
fn headroom_text(case: &crate::report::Case) -> String {
    case.get("headroom")
        .and_then(|v| v.as_f64())
        .map_or(String::new(), |h| format!("{h}"))
}

/// The gc lab as `costlab run` drives it.
pub struct GcLab;

impl Lab for GcLab {
    fn name(&self) -> &'static str {
        LAB
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        bench::unavailable()
    }

    /// Quick: a 64 MiB heap at h = 0.5, 1, 2, 3 (GOGC), two processes each, and the two fast
    /// taxes. Full: the default sweep over 640 MiB in both modes, two processes per point,
    /// and all three taxes.
    fn run_plan(&self, _ctx: &Ctx, full: bool) -> Result<Outcome> {
        let cfg = if full {
            sweep::SweepConfig {
                modes: vec![Mode::Gogc, Mode::Memlimit],
                headrooms: plan::parse_headrooms(plan::DEFAULT_HEADROOM)?,
                live: None,
                default_live: plan::PAPER_LIVE,
                reps: 2,
                alloc: None,
            }
        } else {
            sweep::SweepConfig {
                modes: vec![Mode::Gogc],
                headrooms: vec![0.5, 1.0, 2.0, 3.0],
                live: None,
                default_live: QUICK_LIVE,
                reps: 2,
                alloc: Some(6.0),
            }
        };
        let mut o = sweep::sweep(&cfg)?;
        let kinds: &[tax::Kind] = if full {
            &[
                tax::Kind::Bounds,
                tax::Kind::Prologue,
                tax::Kind::WriteBarrier,
            ]
        } else {
            &[tax::Kind::Bounds, tax::Kind::Prologue]
        };
        let live = tax_live(if full { TAX_LIVE } else { QUICK_LIVE });
        // Five pairs even in the quick plan: the bounds tax compares two separately built
        // binaries, and with three pairs its spread here crossed zero (-18% to +81%).
        o.extend(tax::measure(kinds, if full { 7 } else { 5 }, live)?);
        Ok(o)
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        let mut out = Vec::new();
        let paper = "paper: 0.5x -> 34%, 2x -> 9%";
        for (h, what) in [(1.0, "GOGC=100"), (3.0, "GOGC=300")] {
            let want = crate::case! {"mode" => "gogc", "headroom" => h};
            if let Some(r) = o.find("gc_cpu_share", &want) {
                out.push(Headline {
                    label: format!("GC CPU share at {h}x headroom ({what})"),
                    summary: r.summary,
                    unit: "%".to_string(),
                    reading: format!(
                        "with {h}x the live heap free the collector takes {:.0}% of the CPU here ({paper})",
                        r.summary.median
                    ),
                });
            }
        }
        for r in o.results.iter().filter(|r| r.metric == "overhead") {
            let kind = r.key("kind");
            let what = match kind.as_str() {
                "bounds" => "bounds checks cost",
                "prologue" => "stack-check prologues cost",
                _ => "the write barrier slows a pointer store while marking by",
            };
            out.push(Headline {
                label: format!("{kind} tax"),
                summary: r.summary,
                unit: "%".to_string(),
                reading: tax_reading(what, &r.summary),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        let mut o = Outcome::default();
        for (h, share) in [(1.0, [30.0, 32.0]), (3.0, [10.0, 12.0])] {
            o.push(
                LAB,
                crate::case! {"mode" => "gogc", "headroom" => h, "live" => 64u64 << 20},
                "gc_cpu_share",
                "%",
                share.to_vec(),
            );
        }
        o.push(
            LAB,
            crate::case! {"kind" => "bounds"},
            "overhead",
            "%",
            vec![2.0, 3.0, 4.0],
        );
        o
    }

    #[test]
    fn headlines_read_the_sweep_and_taxes() {
        let h = GcLab.headlines(&outcome());
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].summary.median, 31.0);
        assert!(h[0].label.contains("1x") && h[0].reading.contains("34%"));
        assert_eq!((h[1].summary.min, h[1].summary.max), (10.0, 12.0));
        assert_eq!(h[2].label, "bounds tax");
        assert!(h[2].reading.contains("3.0% here"));
        let crosses = crate::measure::Summary::of(&[-1.0, 2.0, 3.0]).unwrap();
        assert!(tax_reading("x", &crosses).contains("too noisy to tell"));
        assert_eq!(h[2].unit, "%");
    }

    #[test]
    fn render_shows_curve_target_and_taxes() {
        let text = render(&outcome());
        assert!(text.contains("GC CPU %") && text.contains("31.0 (30.0–32.0)"));
        assert!(text.contains("no headroom tested keeps GC under 10%"));
        assert!(text.contains("bounds") && text.contains("3.0 (2.0–4.0)"));
    }

    #[test]
    fn reps_bounds() {
        assert_eq!(reps_of(None, 3).unwrap(), 3);
        assert_eq!(reps_of(Some(5), 3).unwrap(), 5);
        assert!(reps_of(Some(0), 3).is_err());
        assert!(reps_of(Some(1000), 3).is_err());
    }
}
