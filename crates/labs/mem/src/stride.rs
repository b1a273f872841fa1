//! `costlab mem stride`: touch one int (4 bytes) in every `stride` over a block and time each
//! touch, the CPU notes' experiment. The reading is "lines, not bytes": the memory moves
//! 64-byte lines (16 ints), so over a block that streams from memory touching one int in 16
//! costs about what touching all 16 does, and the time per touched int grows with the stride
//! up to 16 ints while the time per line touched stays flat. Beyond 16 ints each touch is a
//! line of its own; the hardware prefetchers (which fetch neighbouring lines and stop at page
//! edges) and the TLB (a 4 KiB page holds only 1024 ints) show there, where the model departs.
//!
//! Each touch is a read-modify-write (`x *= 3`), as the notes' loop: every touched line is
//! read and written back.

use std::hint::black_box;

use anyhow::Result;
use serde_json::{Map, Value};

use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::machine::Machine;
use costlab_core::measure::conditions::judged_case;
use costlab_core::measure::region::{PageKind, Region};
use costlab_core::measure::sizes::{format_size, human_size, parse_list, parse_size_list};
use costlab_core::measure::{counters, cpus, quality, sample_fn};
use costlab_history::report::{progress, table, Headline, Model, ModelPoint, Outcome, ResultRow};
use costlab_lab::Ctx;

use super::{block_of, check_fits, LAB};

/// Ints of 4 bytes in a 64-byte line.
pub const INTS_PER_LINE: u64 = 16;

/// The strides the notes use: 1 to 64 ints, doubling.
pub const STRIDES: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// A model point departs from the prediction beyond this share.
const TOLERANCE: f64 = 0.25;

/// What `costlab mem stride` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct StridePlan {
    pub strides: Vec<u64>,
    pub blocks: Vec<u64>,
}

impl StridePlan {
    /// From `--case` (strides in ints) and `--sizes` (blocks; default: one inside L1, one
    /// beyond the last-level cache).
    pub fn parse(
        strides: &str,
        sizes: Option<&str>,
        machine: &Machine,
        quick: bool,
    ) -> Result<StridePlan> {
        let mut s = parse_list(strides, |t| {
            costlab_core::measure::units::parse_count(
                t,
                "stride (ints)",
                1,
                1 << 20,
                "1,2,4,8,16,32,64",
            )
        })
        .map_err(|e| {
            usage(format!(
                "--case {strides}: {}",
                costlab_core::error::one_line(&e)
            ))
        })?;
        s.sort_unstable();
        s.dedup();
        let blocks = match sizes {
            Some(text) => parse_size_list(text)?,
            None => default_blocks(machine, quick),
        };
        for &b in &blocks {
            let most = *s.last().expect("a list has an item");
            if b < most * 4 || b % 4096 != 0 {
                return Err(usage(format!(
                    "--sizes {}: a block must be a whole number of 4 KiB pages and hold at least one touch at the largest stride ({most} ints = {} bytes); give a larger size",
                    format_size(b),
                    most * 4
                )));
            }
            check_fits(b, &format!("--sizes {}", format_size(b)))?;
        }
        Ok(StridePlan { strides: s, blocks })
    }
}

/// A small block that fits L1 (half of it; 16 KiB when the machine does not say) for contrast,
/// and one beyond the last-level cache: twice its size, from 64 MiB up to 1 GiB (256 MiB with
/// --quick). A VM may report a host's whole L3 but share it, so 64 MiB is the floor either way.
pub fn default_blocks(machine: &Machine, quick: bool) -> Vec<u64> {
    let small = machine
        .cache_size(1)
        .map_or(16 << 10, |c| (c / 2).max(4096));
    let small = small / 4096 * 4096;
    let llc = (1..=4).rev().find_map(|l| machine.cache_size(l));
    let cap: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let large = llc
        .map_or(256 << 20, |c| (2 * c).next_power_of_two())
        .clamp(64 << 20, cap);
    vec![small, large]
}

/// Touch `n` ints, every `stride`-th of `data`, from `*pos` on, wrapping to the start at the
/// end; `*pos` is where the next call goes on.
fn touch(data: &mut [u32], stride: usize, pos: &mut usize, mut n: u64) {
    let len = data.len();
    let mut i = *pos;
    while n > 0 {
        let room = (len - i).div_ceil(stride) as u64;
        let k = room.min(n);
        if stride == 1 {
            // Contiguous: a loop the compiler vectorises, so that at stride 1 (16 touches per
            // line) the loop's own work stays below a line's trip from memory and the figure
            // is the memory's; a strided loop of scalar touches would be the limit here.
            for x in &mut data[i..i + k as usize] {
                *x = x.wrapping_mul(3);
            }
        } else {
            for x in data[i..].iter_mut().step_by(stride).take(k as usize) {
                *x = x.wrapping_mul(3);
            }
        }
        n -= k;
        i += k as usize * stride;
        if i >= len {
            i = 0;
        }
    }
    *pos = i;
    black_box(data.as_ptr());
}

/// Lines touched per int touched: 16 ints share a line up to a stride of 16, beyond it each
/// touch is a line of its own.
pub fn ints_per_line(stride: u64) -> f64 {
    (INTS_PER_LINE as f64 / stride as f64).max(1.0)
}

/// `costlab mem stride`: per block and stride, the time per touched int and per line.
pub fn stride(plan: &StridePlan, ctx: &Ctx) -> Result<Outcome> {
    let cpu = cpus::allowed_cpus().first().copied().unwrap_or(0);
    let mut out = Outcome::default();
    let bar = progress::bar(
        (plan.blocks.len() * plan.strides.len()) as u64,
        "mem stride",
    );
    let measured: Result<()> = std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            cpus::pin_current(cpu)?;
            for &block in &plan.blocks {
                // 4 KiB pages, as the notes' loop got from malloc: the TLB is part of the story.
                let mut region = Region::new(block, PageKind::Small)?;
                let data = region.as_mut_slice_u32();
                for &st in &plan.strides {
                    bar.set_message(format!("{} stride {st}", format_size(block)));
                    let what = format!("mem stride {st} over {}", format_size(block));
                    let o = judged_case(&what, &[cpu], &ctx.retry, || {
                        let mut pos = 0usize;
                        let (samples, readings) = counters::around(ctx.counters, || {
                            sample_fn(&ctx.spec, |n| touch(data, st as usize, &mut pos, n))
                        })?;
                        let per_int: Vec<f64> = samples.iter().map(|x| x.ns_per_iter()).collect();
                        let per_line: Vec<f64> =
                            per_int.iter().map(|x| x * ints_per_line(st)).collect();
                        let mut o = Outcome::default();
                        let key = case! {"op" => "stride", "stride" => st, "block" => block, "pages" => "4k", "threads" => 1};
                        o.push(LAB, key.clone(), "time", "ns", per_int);
                        o.push(LAB, key, "per_line", "ns", per_line);
                        if let Some(r) = readings {
                            let iters: u64 = samples.iter().map(|x| x.iters).sum();
                            per_touch(&r, iters).attach_from(&mut o.results, 0);
                        }
                        Ok(o)
                    })?;
                    out.extend(o);
                    bar.inc(1);
                }
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the stride thread panicked")))
    });
    bar.finish_and_clear();
    measured?;
    out.models.extend(models(&out.results, &ctx.machine));
    out.notes.extend(contrast(&out.results, &ctx.machine));
    Ok(out)
}

/// Counters per touched int (calibration and warm-up runs are counted too, so the division
/// is by the timed touches: a slight overcount, said in the key's name).
fn per_touch(r: &counters::Readings, timed: u64) -> counters::Readings {
    let mut x = r.clone();
    for (k, v) in x.counters.iter_mut() {
        if k != "IPC" {
            *v /= timed.max(1) as f64;
        }
    }
    x.counters = x
        .counters
        .into_iter()
        .map(|(k, v)| {
            if k == "IPC" {
                (k, v)
            } else {
                (format!("{k}/int"), v)
            }
        })
        .collect();
    x
}

/// The rows of one block and metric, by stride.
fn rows_of<'a>(rows: &'a [ResultRow], block: u64, metric: &str) -> Vec<&'a ResultRow> {
    let mut v: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| r.key("op") == "stride" && r.metric == metric && block_of(r) == block)
        .collect();
    v.sort_by_key(|r| stride_of(r));
    v
}

fn stride_of(r: &ResultRow) -> u64 {
    r.case.get("stride").and_then(Value::as_u64).unwrap_or(0)
}

fn blocks(rows: &[ResultRow]) -> Vec<u64> {
    let mut b: Vec<u64> = rows
        .iter()
        .filter(|r| r.key("op") == "stride")
        .map(block_of)
        .collect();
    b.sort_unstable();
    b.dedup();
    b
}

/// Whether a block streams from memory (the model's case): larger than the L2 a core owns.
/// The L3 a VM really gets can be far below what it reports, so the L2 is the honest line.
fn streams(block: u64, machine: &Machine) -> bool {
    block > machine.cache_size(2).unwrap_or(4 << 20)
}

/// The model, per block that streams from memory: a line costs the same whatever is touched
/// in it, so the time per line is flat at its stride-16 figure (one int per line: only lines),
/// and the time per touched int is that cost shared by the ints a line holds.
pub fn models(rows: &[ResultRow], machine: &Machine) -> Vec<Model> {
    blocks(rows)
        .into_iter()
        .filter(|&b| streams(b, machine))
        .filter_map(|b| model(rows, b))
        .collect()
}

fn model(rows: &[ResultRow], block: u64) -> Option<Model> {
    let lines = rows_of(rows, block, "per_line");
    let ints = rows_of(rows, block, "time");
    let anchor = lines.iter().find(|r| stride_of(r) == INTS_PER_LINE)?;
    let c = anchor.summary.median;
    if c <= 0.0 {
        return None;
    }
    let mut points = Vec::new();
    for r in &ints {
        let s = stride_of(r);
        points.push(ModelPoint {
            case: case! {"op" => "stride", "stride" => s, "block" => block, "per" => "int"},
            predicted: c / ints_per_line(s),
            measured: r.summary.median,
            unit: "ns".into(),
        });
    }
    let mut verdict = Vec::new();
    let first = lines.first().filter(|r| stride_of(r) < INTS_PER_LINE);
    if let Some(one) = first {
        let s1 = stride_of(one);
        let ratio = c / one.summary.median;
        let bytes_ratio = ints_per_line(s1).recip();
        // Lines predict a ratio of 1, bytes 1/16 (at stride 1): which is it nearer, on a log scale?
        let reading = if (ratio.ln()).abs() <= (ratio / bytes_ratio).ln().abs() {
            "lines, not bytes: the memory moves 64-byte lines, so a line costs about the same however few of its ints are used"
        } else {
            "nearer bytes than lines: here the work per touched int, not the lines, set the time (a block inside the caches, or a loop slower than memory)"
        };
        verdict.push(format!(
            "over {}, touching one int in {INTS_PER_LINE} took {} per line against {} at stride {s1}: the whole pass took {ratio:.2}x as long while touching {:.0}x fewer ints; lines predict 1.00x, bytes {bytes_ratio:.2}x: {reading}",
            human_size(block),
            quality::quote_row(format!("{c:.2} ns"), anchor),
            quality::quote_row(format!("{:.2} ns", one.summary.median), one),
            INTS_PER_LINE as f64 / s1 as f64,
        ));
    }
    let departs: Vec<String> = lines
        .iter()
        .filter(|r| {
            let e = (c - r.summary.median) / r.summary.median;
            e.abs() > TOLERANCE
        })
        .map(|r| {
            let s = stride_of(r);
            let m = r.summary.median;
            let why = if s < INTS_PER_LINE && m < c {
                "the sequential lines of a small stride stream faster than lines one int apart: the prefetchers see a dense stream, and a stride of 16 still reads each line whole"
            } else if s < INTS_PER_LINE {
                "the loop's own work per touched int adds to the line's cost where a line holds several touches (or the machine was busy: see the marks)"
            } else if m > c {
                "beyond a line each touch is a line of its own, the adjacent-line prefetcher fetches neighbours no touch uses, and a 4 KiB page holds few touches, so page walks and the prefetchers' stop at page edges add"
            } else {
                "beyond a line fewer lines are fetched in all, and the prefetchers' extra lines are spared"
            };
            format!(
                "departs at stride {s}: {m:.2} ns per line against {c:.2} predicted ({:+.0}%): {why}",
                (c - m) / m * 100.0
            )
        })
        .collect();
    if departs.is_empty() {
        verdict.push(format!(
            "holds at every stride within {:.0}%: per line flat, per int shared by the ints a line holds",
            TOLERANCE * 100.0
        ));
    } else {
        verdict.extend(departs);
    }
    let mut params = Map::new();
    params.insert("line_ns".into(), Value::from(c));
    params.insert("ints_per_line".into(), Value::from(INTS_PER_LINE));
    params.insert("block".into(), Value::from(block));
    let mut m = Model {
        lab: LAB.into(),
        name: format!(
            "stride over {}: ns per int = line cost x stride / 16 (per line flat up to 16 ints)",
            format_size(block)
        ),
        params,
        points,
        verdict,
    };
    let inputs: Vec<&ResultRow> = lines.iter().chain(ints.iter()).copied().collect();
    quality::model_inherits(&mut m, &inputs);
    Some(m)
}

/// For a block inside the caches, the contrast: no line comes from memory, so the time goes
/// by the ints touched, not the lines.
fn contrast(rows: &[ResultRow], machine: &Machine) -> Vec<String> {
    blocks(rows)
        .into_iter()
        .filter(|&b| !streams(b, machine))
        .filter_map(|b| {
            let ints = rows_of(rows, b, "time");
            let (lo, hi) = (ints.first()?, ints.last()?);
            let lines = rows_of(rows, b, "per_line");
            let (l_lo, l_hi) = (lines.first()?, lines.last()?);
            Some(format!(
                "in cache ({}): no line comes from memory, so the time goes by the touches, not the lines: {} per int at stride {} and {} at stride {}, that is {} and {} per line touched; the line is the unit only where lines travel",
                human_size(b),
                quality::quote_row(format!("{:.2} ns", lo.summary.median), lo),
                stride_of(lo),
                quality::quote_row(format!("{:.2} ns", hi.summary.median), hi),
                stride_of(hi),
                table::figure(l_lo.summary.median),
                table::figure(l_hi.summary.median),
            ))
        })
        .collect()
}

/// The cost sheet's line: what a line costs from memory (stride 16, one int per line), beside
/// the time per line at stride 1, for the largest block measured.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let Some(b) = blocks(&out.results).pop() else {
        return Vec::new();
    };
    let lines = rows_of(&out.results, b, "per_line");
    let Some(c) = lines.iter().find(|r| stride_of(r) == INTS_PER_LINE) else {
        return Vec::new();
    };
    let one = lines.iter().find(|r| stride_of(r) == 1);
    let beside = one.map_or(String::new(), |r| {
        format!(
            "; touching all 16 ints of each line (stride 1): {} per line",
            quality::quote_row(format!("{:.2} ns", r.summary.median), r)
        )
    });
    let inputs: Vec<&ResultRow> = std::iter::once(*c).chain(one.copied()).collect();
    vec![Headline {
        label: "line touched (stride 16)".into(),
        summary: c.summary,
        unit: "ns".into(),
        reading: format!(
            "one int per 64-byte line over {}{beside}: lines, not bytes, are the unit",
            human_size(b)
        ),
        ..Default::default()
    }
    .judged_by(&inputs)]
}

/// The stride table: per block and stride, ns per int and per line, each beside the model's
/// prediction where the block streams from memory.
pub fn render(out: &Outcome) -> String {
    let mut text = String::new();
    for b in blocks(&out.results) {
        let ints = rows_of(&out.results, b, "time");
        let lines = rows_of(&out.results, b, "per_line");
        // Predictions only where the model was made: a block that streams from memory.
        let c = out
            .models
            .iter()
            .find(|m| m.params.get("block").and_then(Value::as_u64) == Some(b))
            .and_then(|m| m.params.get("line_ns").and_then(Value::as_f64));
        let rows: Vec<Vec<String>> = ints
            .iter()
            .map(|r| {
                let s = stride_of(r);
                let line = lines.iter().find(|x| stride_of(x) == s);
                let show = |r: &ResultRow| {
                    format!(
                        "{} ±{}{}",
                        table::figure(r.summary.median),
                        table::figure(r.summary.mad),
                        costlab_history::report::verdict::mark(r)
                    )
                };
                let pred = |x: Option<f64>| x.map_or("—".into(), table::figure);
                vec![
                    s.to_string(),
                    format!("{} B", s * 4),
                    show(r),
                    pred(c.map(|c| c / ints_per_line(s))),
                    line.map_or("—".into(), |l| show(l)),
                    pred(c),
                ]
            })
            .collect();
        let model_note = if c.is_some() {
            "predicted: per line flat at stride 16's figure, per int = that / ints per line"
        } else {
            "no prediction: the block stays in the caches (or stride 16 was not measured)"
        };
        text += &format!(
            "stride over {} (4 KiB pages; ns per touched int and per line touched; {model_note})\n{}\n",
            human_size(b),
            table::render(
                &[
                    "stride (ints)",
                    "bytes",
                    "ns/int",
                    "predicted",
                    "ns/line",
                    "predicted"
                ],
                &rows
            )
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::machine::Cache;

    fn machine() -> Machine {
        let c = |level, size| Cache {
            level,
            kind: if level == 1 { "Data" } else { "Unified" }.into(),
            size,
            line: 64,
            shared_by: vec![],
        };
        Machine {
            caches: vec![c(1, 48 << 10), c(2, 2 << 20), c(3, 32 << 20)],
            ..Default::default()
        }
    }

    #[test]
    fn touch_walks_every_stride_th_int_and_wraps() {
        let mut data = vec![1u32; 64];
        let mut pos = 0;
        touch(&mut data, 16, &mut pos, 3);
        assert_eq!(pos, 48);
        touch(&mut data, 16, &mut pos, 2);
        assert_eq!(pos, 16, "wrapped to the start");
        let touched: Vec<usize> = (0..64).filter(|&i| data[i] != 1).collect();
        assert_eq!(touched, [0, 16, 32, 48]);
        assert_eq!(data[0], 9, "touched twice");
        let mut data = vec![1u32; 10];
        let mut pos = 0;
        touch(&mut data, 1, &mut pos, 25);
        assert_eq!(pos, 5);
        assert_eq!(data.iter().filter(|&&x| x == 27).count(), 5);
    }

    #[test]
    fn plans_parse_and_bad_strides_exit_2() {
        let m = machine();
        let p = StridePlan::parse("64,1,16", None, &m, true).unwrap();
        assert_eq!(p.strides, [1, 16, 64]);
        assert_eq!(p.blocks, [24 << 10, 64 << 20]);
        assert_eq!(
            default_blocks(&Machine::default(), false),
            [16 << 10, 256 << 20]
        );
        for bad in ["0", "x", "1,,2", "-4"] {
            let e = StridePlan::parse(bad, None, &m, true).unwrap_err();
            assert_eq!(costlab_core::error::exit_code(&e), 2, "{bad}: {e}");
        }
        let e = StridePlan::parse("4096", Some("4K"), &m, true).unwrap_err();
        assert!(e.to_string().contains("at least one touch"), "{e}");
    }

    fn row(block: u64, stride: u64, metric: &str, ns: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {"op" => "stride", "stride" => stride, "block" => block, "pages" => "4k", "threads" => 1},
            metric,
            "ns",
            vec![ns; 5],
        )
        .unwrap()
    }

    /// Lines cost 8 ns each from memory whatever is touched in them, except at 64 ints where
    /// page walks add; in L1 a touch costs 0.5 ns at any stride.
    #[test]
    fn the_model_predicts_flat_lines_and_names_where_it_departs() {
        let big = 256u64 << 20;
        let small = 16u64 << 10;
        let mut rows = Vec::new();
        for s in STRIDES {
            let line = if s == 64 { 14.0 } else { 8.0 };
            rows.push(row(big, s, "time", line / ints_per_line(s)));
            rows.push(row(big, s, "per_line", line));
            rows.push(row(small, s, "time", 0.5));
            rows.push(row(small, s, "per_line", 0.5 * ints_per_line(s)));
        }
        let ms = models(&rows, &machine());
        assert_eq!(ms.len(), 1, "only the block that streams from memory");
        let m = &ms[0];
        assert_eq!(m.params["line_ns"], Value::from(8.0));
        let p1 = &m.points[0];
        assert_eq!(p1.case["stride"], Value::from(1));
        assert!((p1.predicted - 0.5).abs() < 1e-9 && (p1.measured - 0.5).abs() < 1e-9);
        let text = m.verdict.join("\n");
        assert!(text.starts_with("over 256 MiB"), "{text}");
        assert!(text.contains(": lines, not bytes"), "{text}");
        assert!(
            text.contains("took 1.00x as long while touching 16x fewer ints"),
            "{text}"
        );
        assert!(text.contains("departs at stride 64"), "{text}");
        assert!(!text.contains("departs at stride 32"), "{text}");
        let notes = contrast(&rows, &machine());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("in cache (16 KiB)"), "{}", notes[0]);
        let out = Outcome {
            results: rows,
            models: ms,
            ..Default::default()
        };
        let t = render(&out);
        assert!(
            t.contains("stride over 256 MiB") && t.contains("ns/line"),
            "{t}"
        );
        assert!(
            t.contains("no prediction: the block stays in the caches"),
            "{t}"
        );
    }
}
