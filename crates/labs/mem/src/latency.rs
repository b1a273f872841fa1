//! Latency: a dependent random chase per size and page kind, its plateaus (L1, L2, L3, DRAM)
//! and the TLB cost.

use costlab_core::measure::conditions::{judged_case, Conditions};
use std::hint::black_box;
use std::time::Duration;

use costlab_core::measure::SampleSpec;

use anyhow::Result;
use serde_json::Value;

use costlab_core::case;
use costlab_core::machine::Machine;
use costlab_core::measure::quality::{self, Quality};
use costlab_core::measure::sampler::{sample_paired, SAMPLES_PER_SETUP};
use costlab_core::measure::sizes::{format_size, human_size};
use costlab_core::measure::{counters, cpus, cycle};
use costlab_history::report::{progress, Outcome, ResultRow};
use costlab_lab::Ctx;

use super::bandwidth::note_thp;
use super::plan::LatencyPlan;
use super::plateaus::{Level, Point};
use super::{block_of, check_fits, release, reserve_pools, LAB};
use super::{chase, ladder, plateaus};
use costlab_core::measure::region::{PageKind, Region};

/// Chase sizes from which on the chase runs in DRAM on any machine costlab expects.
const BEYOND_CACHES: u64 = 64 << 20;

/// Per page kind: ns per load of each sample, and the worst huge-page fraction of its mappings.
type Chases = (Vec<Vec<f64>>, Vec<Option<f64>>);

/// ns per dependent load, per sample and per page kind, over a chase of `next` laid out in a
/// fresh region of each kind every [`SAMPLES_PER_SETUP`] samples, the kinds' samples taken
/// next to each other in time (`sample_paired`): so the spread covers what a new mapping
/// shows (a VM backs each mapping anew), and the 4k - huge difference (the TLB cost) is taken
/// between samples seconds apart, not minutes. Also returns, per kind, the worst huge-page
/// fraction any of its regions got (the lowest for a huge kind, the highest for 4k).
fn measure_chases(
    next: &[u32],
    size: u64,
    kinds: &[PageKind],
    ctx: &Ctx,
    notes: &mut Vec<String>,
) -> Result<Chases> {
    let mut worst_huge: Vec<Option<f64>> = vec![None; kinds.len()];
    let mut thp_noted = false;
    // Beyond the caches a 10 ms sample is some 30 thousand misses, and a burst on the host
    // moves it by 10-20% here; samples of 50 ms average that out. The quick plan keeps 10 ms
    // (`costlab run` has a minute for every lab); its TLB cost is read as noisy when it is.
    let spec = if !ctx.quick && size >= BEYOND_CACHES {
        SampleSpec {
            min_sample: ctx.spec.min_sample.max(Duration::from_millis(50)),
            ..ctx.spec.clone()
        }
    } else {
        ctx.spec.clone()
    };
    let samples = sample_paired(
        &spec,
        kinds.len(),
        |k| {
            let mut region = Region::new(size, kinds[k])?;
            if !thp_noted {
                note_thp(&region, notes);
                thp_noted = kinds[k] == PageKind::Thp;
            }
            let start = chase::lay_out(&mut region, next);
            Ok((region, start))
        },
        |(_, p), n| {
            // SAFETY: the chain was laid out in this state's region, which the state owns and
            // keeps mapped while it is sampled.
            *p = unsafe { chase::chase(*p, n) };
            black_box(*p);
        },
        |k, (region, _)| {
            // After the samples: what the kernel backed this mapping with while they ran.
            let Some(f) = region.huge_fraction() else {
                return;
            };
            let w = &mut worst_huge[k];
            *w = Some(match *w {
                None => f,
                Some(old) if kinds[k].is_huge() => old.min(f),
                Some(old) => old.max(f),
            });
        },
    )?;
    let ns = samples
        .into_iter()
        .map(|s| s.iter().map(|x| x.ns_per_iter()).collect())
        .collect();
    Ok((ns, worst_huge))
}

/// `costlab mem latency`: the curve, its plateaus and the TLB cost.
pub fn latency(plan: &LatencyPlan, ctx: &Ctx) -> Result<Outcome> {
    if plan.pages.iter().any(|k| k.pool_page().is_none()) {
        let largest = plan.sizes.iter().copied().max().unwrap_or(0);
        // One region per kind not drawn from a pool (the kinds are measured side by side),
        // plus the cycle's index array (4 bytes per line).
        let unpooled = plan
            .pages
            .iter()
            .filter(|k| k.pool_page().is_none())
            .count() as u64;
        check_fits(
            largest * unpooled + largest / 16,
            &format!("--sizes {}", format_size(largest)),
        )?;
    }
    let held = reserve_pools(&plan.pool_needs(), plan.reserve)?;
    let cpu = cpus::allowed_cpus().first().copied().unwrap_or(0);
    let mut out = Outcome::default();
    let bar = progress::bar((plan.sizes.len() * plan.pages.len()) as u64, "mem lat");
    // Measure on one pinned thread so the caller's affinity is left alone.
    let measured: Result<()> = std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            cpus::pin_current(cpu)?;
            for &size in &plan.sizes {
                if size >= 64 << 20 {
                    progress::note(&format!("mem latency: building a random cycle over {}", format_size(size)));
                }
                let next = cycle::sattolo((size / 64) as usize, size ^ 0x5eed);
                // The kinds are paired in time, unless counters are read.
                for kinds in counters::side_by_side(ctx.counters, &plan.pages) {
                    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                    bar.set_message(format!("{} {}", format_size(size), names.join("+")));
                    let mut notes = Vec::new();
                    let what = format!("mem chase {} {}", format_size(size), names.join("+"));
                    let case_out = judged_case(&what, &[cpu], &ctx.retry, || {
                        let ((ns, huge), readings) = counters::around(ctx.counters, || {
                            measure_chases(&next, size, &kinds, ctx, &mut notes)
                        })?;
                        let mut o = Outcome::default();
                        for (i, kind) in kinds.iter().enumerate() {
                            let before = o.results.len();
                            o.push(
                                LAB,
                                case! {"op" => "chase", "pattern" => "rand", "pages" => kind.name(), "block" => size, "threads" => 1},
                                "latency",
                                "ns",
                                ns[i].clone(),
                            );
                            // Whether the region got the page size asked for matters once it
                            // spans more than a few huge pages.
                            if size >= 4 << 20 {
                                for r in o.results[before..].iter_mut() {
                                    r.conditions =
                                        Some(Conditions::default().pages(kind.name(), huge[i]));
                                }
                            }
                        }
                        if let Some(r) = readings {
                            r.attach_from(&mut o.results, 0);
                        }
                        Ok(o)
                    })?;
                    for n in notes.into_iter().chain(case_out.notes) {
                        if !out.notes.contains(&n) {
                            out.notes.push(n);
                        }
                    }
                    out.results.extend(case_out.results);
                    bar.inc(kinds.len() as u64);
                }
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the chase thread panicked")))
    });
    bar.finish_and_clear();
    measured?;
    analyse_latency(&mut out, &ctx.machine);
    release(held, &mut out);
    Ok(out)
}

/// When the TLB cost's samples disagree more between mappings than within one, say so: the
/// spread is then where the host backed each mapping (a VM's guest pages land on different
/// host memory each time a region is mapped), which more samples of one mapping cannot
/// narrow and a rerun redraws. `diff` holds the paired differences in round order,
/// [`SAMPLES_PER_SETUP`] per mapping.
fn mapping_spread_note(diff: &[f64], hk: &str) -> Option<String> {
    // Only whole rounds: a mapping with one sample cannot tell its backing from a burst.
    let rounds: Vec<&[f64]> = diff
        .chunks(SAMPLES_PER_SETUP)
        .filter(|r| r.len() == SAMPLES_PER_SETUP)
        .collect();
    if rounds.len() < 2 {
        return None;
    }
    let means: Vec<f64> = rounds
        .iter()
        .map(|r| r.iter().sum::<f64>() / r.len() as f64)
        .collect();
    let within: Vec<f64> = rounds
        .iter()
        .filter(|r| r.len() > 1)
        .map(|r| {
            let (lo, hi) = r
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            (hi - lo) / 2.0
        })
        .collect();
    let between = {
        let (lo, hi) = means
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        (hi - lo) / 2.0
    };
    if within.is_empty() {
        return None;
    }
    let within = costlab_core::measure::stats::median(&within);
    if between <= 2.0 * within.max(0.5) {
        return None;
    }
    let per: Vec<String> = means.iter().map(|m| format!("{m:.1}")).collect();
    Some(format!(
        "TLB cost by mapping (4k minus {hk}, ns): {}; within one mapping its samples differ by about {within:.1} ns, between mappings by {between:.1}: the spread is where the host backed each region, which a rerun draws anew, so more samples of one mapping would not narrow it",
        per.join(", ")
    ))
}

/// L1d, L2, L3 sizes, as the machine probe read them (machine::caches); a level it did not
/// find is None and gets no plateau name.
fn cache_sizes(m: &Machine) -> [Option<u64>; 3] {
    [m.cache_size(1), m.cache_size(2), m.cache_size(3)]
}

/// The chase rows of one page kind, by size.
pub(super) fn curve_rows<'a>(out: &'a Outcome, kind: &str) -> Vec<&'a ResultRow> {
    let mut rows: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| {
            r.metric == "latency"
                && r.key("op") == "chase"
                && r.key("pages") == kind
                && !r.case.contains_key("level")
        })
        .collect();
    rows.sort_by_key(|r| r.case.get("block").and_then(Value::as_u64).unwrap_or(0));
    rows
}

/// A cache the machine reports but the curve shows no plateau for is said so, with what the
/// curve did there, rather than given a figure: on a VM or a busy host the share of a cache a
/// process really gets can be far smaller than the size the kernel reports.
fn missing_plateaus(
    points: &[Point],
    named: &[plateaus::LevelFigure],
    caches: [Option<u64>; 3],
    kind: &str,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut below = 0u64;
    for (i, level) in [Level::L1, Level::L2, Level::L3].into_iter().enumerate() {
        let Some(size) = caches[i] else { continue };
        let inside: Vec<&Point> = points
            .iter()
            .filter(|p| p.size > below && p.size <= size)
            .collect();
        below = size;
        if named.iter().any(|f| f.level == level) || inside.len() < 2 {
            continue;
        }
        let (first, last) = (inside[0], inside[inside.len() - 1]);
        notes.push(format!(
            "{}: no plateau ({kind} pages): the machine reports {}, but latency climbs from {:.1} ns at {} to {:.1} ns at {}; no {} figure is given (a VM or a busy host may get far less of this cache than reported)",
            level.name(),
            human_size(size),
            first.ns,
            human_size(first.size),
            last.ns,
            human_size(last.size),
            level.name()
        ));
    }
    notes
}

/// Add the level rows (L1/L2/L3/DRAM per page kind), the TLB cost row and the notes that
/// explain them.
pub(super) fn analyse_latency(out: &mut Outcome, machine: &Machine) {
    let caches = cache_sizes(machine);
    let kinds = page_kinds(out);
    let (extra, level_notes) = level_rows(out, &kinds, caches);
    out.notes.extend(level_notes);
    push_tlb_cost(out, &kinds);
    out.results.extend(extra);
}

/// The page kinds the latency rows were measured with, in the order first met.
fn page_kinds(out: &Outcome) -> Vec<String> {
    let mut k: Vec<String> = Vec::new();
    for r in &out.results {
        let p = r.key("pages");
        if r.metric == "latency" && !k.contains(&p) {
            k.push(p);
        }
    }
    k
}

/// Per page kind, a row for each cache level (and DRAM) found on its curve, with the
/// plateau it was read from; and, for the first kind, notes on the levels not found.
fn level_rows(
    out: &Outcome,
    kinds: &[String],
    caches: [Option<u64>; 3],
) -> (Vec<ResultRow>, Vec<String>) {
    let mut extra: Vec<ResultRow> = Vec::new();
    let mut level_notes: Vec<String> = Vec::new();
    for kind in kinds {
        let rows = curve_rows(out, kind);
        let points: Vec<Point> = rows
            .iter()
            .map(|r| Point {
                size: block_of(r),
                ns: r.summary.median,
            })
            .collect();
        let found = plateaus::find_plateaus(&points, 0.25);
        let named = plateaus::levels(&points, &found, caches);
        let first = Some(kind) == kinds.first();
        if first {
            level_notes.extend(missing_plateaus(&points, &named, caches, kind));
        }
        // A plateau is named only where its latency fits the ladder of levels.
        let (named, unnamed) = ladder::hold(&points, named);
        let notes = first.then_some(&mut level_notes);
        extra.extend(ladder::unnamed_rows(
            &rows, &points, &unnamed, caches, kind, notes,
        ));
        for f in named {
            let src = rows[f.point];
            let mut row = src.clone();
            row.case.insert("level".into(), Value::from(f.level.name()));
            let cache = match f.level {
                Level::L1 => caches[0],
                Level::L2 => caches[1],
                Level::L3 => caches[2],
                Level::Dram => None,
            };
            if let Some(c) = cache {
                row.case.insert("cache".into(), Value::from(c));
            }
            row.case.insert(
                "plateau_from".into(),
                Value::from(points[f.plateau.first].size),
            );
            row.case.insert(
                "plateau_to".into(),
                Value::from(points[f.plateau.last].size),
            );
            extra.push(row);
        }
    }
    (extra, level_notes)
}

/// TLB cost: 4k minus the best huge kind measured, at the largest size both have; its row
/// and the notes that say how it was taken and what it means.
fn push_tlb_cost(out: &mut Outcome, kinds: &[String]) {
    let huge_kind = ["2m", "1g", "thp"]
        .into_iter()
        .find(|k| kinds.iter().any(|x| x == k));
    let small = curve_rows(out, "4k").last().map(|r| (*r).clone());
    if let (Some(hk), Some(s)) = (huge_kind, small) {
        let size = block_of(&s);
        let huge = curve_rows(out, hk)
            .into_iter()
            .find(|r| block_of(r) == size)
            .cloned();
        if let Some(h) = huge {
            // Sample j of 4k was taken next to sample j of the huge kind, on mappings made
            // in the same round (`measure_chases`), so each difference is free of the drift
            // between them; with --counters the kinds ran apart and the note says so.
            let diff: Vec<f64> = s
                .samples
                .iter()
                .zip(&h.samples)
                .map(|(a, b)| a - b)
                .collect();
            let mappings = diff.len().div_ceil(SAMPLES_PER_SETUP);
            let between_mappings = mapping_spread_note(&diff, hk);
            if let Some(n) = &between_mappings {
                out.notes.push(n.clone());
            }
            let paired = s.counters.is_none() && h.counters.is_none();
            out.notes.push(format!(
                "TLB cost at {}: {} differences of 4k and {hk} samples {}, over {mappings} fresh mappings of each (a new region every {SAMPLES_PER_SETUP} samples, so the spread covers where a rerun's pages land)",
                human_size(size),
                diff.len(),
                if paired { "taken side by side in time" } else { "taken apart (--counters measures each kind alone)" },
            ));
            out.push(
                LAB,
                case! {"op" => "chase", "pattern" => "rand", "pages" => "4k", "block" => size, "threads" => 1, "versus" => hk},
                "tlb_cost",
                "ns",
                diff,
            );
            // A difference is no better than the chases it is taken from: it takes their
            // worst verdict and names them; a spread that lies between mappings is said to be
            // the host's placement, which more samples of one mapping would not narrow.
            if let Some(t) = out.results.last_mut().filter(|t| t.metric == "tlb_cost") {
                quality::inherit(t, &[&s, &h]);
                if t.quality == Some(Quality::Noisy) && between_mappings.is_some() {
                    t.quality_reasons.push(
                        "its spread lies between mappings (where the host backed each region), not within one: a rerun redraws it, more samples would not narrow it".into(),
                    );
                }
            }
            let (a, b) = (s.summary.median, h.summary.median);
            let (qa, qb) = (
                quality::quote_row(format!("{a:.1}"), &s),
                quality::quote_row(format!("{b:.1}"), &h),
            );
            let page = if hk == "1g" { 1u64 << 30 } else { 2 << 20 };
            let entries = format!(
                "{} takes {} TLB entries with 4 KiB pages but {} with {} pages",
                human_size(size),
                size.div_ceil(4096),
                size.div_ceil(page),
                human_size(page)
            );
            out.notes.push(if a >= b * 1.1 {
                format!(
                    "TLB: at {}, 4k pages cost {:.1} ns more per access than {hk} ({qa} vs {qb} ns, {:.2}x). Cause: page walks. Each 4 KiB page needs its own TLB entry: {entries}; the TLB holds a few thousand, so with 4 KiB pages nearly every random access misses it and walks the page table first",
                    human_size(size),
                    a - b,
                    a / b,
                )
            } else {
                format!(
                    "TLB: at {}, 4k and {hk} pages differ by only {:.2}x ({qa} vs {qb} ns): {entries}, so a TLB effect was expected; if {hk} is thp, check the thp note above, and measure a larger --sizes",
                    human_size(size),
                    a / b,
                )
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mapping_spread_note;

    #[test]
    fn a_spread_between_mappings_is_named_and_one_within_them_is_not() {
        // Three mappings: two agree, the third's host backing costs twice as much.
        let between = mapping_spread_note(&[60.0, 61.0, 59.0, 60.0, 120.0, 121.0], "thp").unwrap();
        assert!(between.contains("60.5, 59.5, 120.5"), "{between}");
        assert!(between.contains("within one mapping"));
        // The same spread inside every mapping: more samples would narrow it, nothing to say.
        assert!(mapping_spread_note(&[50.0, 70.0, 52.0, 68.0, 49.0, 71.0], "thp").is_none());
        // One mapping only: nothing to compare.
        assert!(mapping_spread_note(&[60.0, 90.0], "2m").is_none());
        // A last mapping with one sample is no evidence: a burst looks the same.
        assert!(mapping_spread_note(&[60.0, 61.0, 59.0, 60.0, 120.0], "thp").is_none());
    }
}
