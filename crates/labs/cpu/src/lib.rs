//! The cpu lab: the CPU notes' small experiments. `costlab cpu branch` runs sorted and
//! shuffled bytes through a data-dependent branch (and a branchless body): the same work, but
//! on shuffled data the predictor guesses wrong half the time and each wrong guess throws
//! away the work in flight. `costlab cpu loop-order` sums a matrix larger than L2 row by row
//! and column by column: the same adds, but column by column every load needs a new line.
//! With `--counters`, IPC, branch misses and cache misses per element where a PMU exists;
//! where none does the counter columns say so and the times are still measured.

pub mod args;
pub mod kernels;
mod render;

use std::hint::black_box;

use anyhow::Result;
use serde_json::{Map, Value};

use args::{CpuArgs, CpuWhat, TestArgs};
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::machine::Machine;
use costlab_core::measure::conditions::judged_case;
use costlab_core::measure::sizes::{format_size, human_size, parse_list, parse_size_list};
use costlab_core::measure::{counters, cpus, quality, sample_fn, Summary};
use costlab_history::report::{progress, Model, ModelPoint, Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub use render::render;

pub const LAB: &str = "cpu";

/// Ints of 8 bytes in a 64-byte line.
const INTS_PER_LINE: f64 = 8.0;

/// The two tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Branch,
    LoopOrder,
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Test::Branch => "branch",
            Test::LoopOrder => "loop-order",
        }
    }

    /// The variants `--case` may name, the default first.
    pub fn variants(self) -> [&'static str; 2] {
        match self {
            Test::Branch => ["branchy", "branchless"],
            Test::LoopOrder => ["row-major", "column-major"],
        }
    }
}

/// One test's plan: its variants and sizes (bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub test: Test,
    pub variants: Vec<&'static str>,
    pub sizes: Vec<u64>,
}

/// The default sizes: 1 MiB of bytes for the branch (large enough that the predictor cannot
/// learn the shuffled order by heart, small enough to stay in cache, so only the branch
/// differs); for the loop order a matrix of 4 x L2 from the machine probe, at least 32 MiB (a
/// VM's share of L3 is unknown, so well past it), or 2 x L2 and at least 4 MiB with --quick.
pub fn default_sizes(test: Test, machine: &Machine, quick: bool) -> Vec<u64> {
    match test {
        Test::Branch => vec![1 << 20],
        Test::LoopOrder => {
            let l2 = machine.cache_size(2).unwrap_or(1 << 20);
            let (times, floor) = if quick { (2, 4 << 20) } else { (4, 32 << 20) };
            vec![(l2 * times).max(floor)]
        }
    }
}

impl Plan {
    pub fn parse(test: Test, a: &TestArgs, machine: &Machine, quick: bool) -> Result<Plan> {
        let variants = match &a.case {
            None => test.variants().to_vec(),
            Some(text) => {
                let mut v = parse_list(text, |t| {
                    test.variants()
                        .into_iter()
                        .find(|x| *x == t.to_ascii_lowercase())
                        .ok_or_else(|| {
                            usage(format!(
                                "--case {text}: unknown {} variant '{t}'; use {}",
                                test.name(),
                                test.variants().join(" or ")
                            ))
                        })
                })?;
                v.dedup();
                v
            }
        };
        let sizes = match &a.sizes {
            None => default_sizes(test, machine, quick),
            Some(text) => parse_size_list(text)?,
        };
        for &s in &sizes {
            let (lo, hi) = match test {
                Test::Branch => (4 << 10, 1 << 30),
                Test::LoopOrder => (64 << 10, 4 << 30),
            };
            if !(lo..=hi).contains(&s) {
                return Err(usage(format!(
                    "--sizes {}: {} takes sizes from {} to {}; give a size in that range",
                    format_size(s),
                    test.name(),
                    format_size(lo),
                    format_size(hi)
                )));
            }
        }
        Ok(Plan {
            test,
            variants,
            sizes,
        })
    }
}

/// `costlab cpu [branch|loop-order]`.
pub fn run(args: &CpuArgs, ctx: &Ctx) -> Result<Outcome> {
    let plans = match &args.what {
        Some(CpuWhat::Branch(a)) => vec![Plan::parse(Test::Branch, a, &ctx.machine, ctx.quick)?],
        Some(CpuWhat::LoopOrder(a)) => {
            vec![Plan::parse(Test::LoopOrder, a, &ctx.machine, ctx.quick)?]
        }
        None => default_plans(&ctx.machine, ctx.quick),
    };
    measure(&plans, ctx)
}

fn default_plans(machine: &Machine, quick: bool) -> Vec<Plan> {
    [Test::Branch, Test::LoopOrder]
        .into_iter()
        .map(|test| Plan {
            test,
            variants: test.variants().to_vec(),
            sizes: default_sizes(test, machine, quick),
        })
        .collect()
}

/// Measure every plan on one pinned CPU, each case judged with its conditions.
pub fn measure(plans: &[Plan], ctx: &Ctx) -> Result<Outcome> {
    let cpu = cpus::allowed_cpus().first().copied().unwrap_or(0);
    let total: usize = plans
        .iter()
        .map(|p| p.sizes.len() * p.variants.len() * if p.test == Test::Branch { 2 } else { 1 })
        .sum();
    let bar = progress::bar(total as u64, "cpu");
    let mut out = Outcome::default();
    let measured: Result<()> = std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            cpus::pin_current(cpu)?;
            for p in plans {
                for &size in &p.sizes {
                    match p.test {
                        Test::Branch => {
                            let shuffled = kernels::random_bytes(size as usize, size ^ 0xb4a9c4);
                            let mut sorted = shuffled.clone();
                            sorted.sort_unstable();
                            for &v in &p.variants {
                                let body = if v == "branchy" {
                                    kernels::branchy
                                } else {
                                    kernels::branchless
                                };
                                for (data, bytes) in [("sorted", &sorted), ("shuffled", &shuffled)] {
                                    bar.set_message(format!("branch {v} {data}"));
                                    let key = case! {"test" => "branch", "variant" => v, "data" => data, "size" => size};
                                    let what = format!("cpu branch {v} {data} {}", format_size(size));
                                    out.extend(timed(&what, cpu, ctx, key, bytes.len(), || {
                                        black_box(body(black_box(bytes)));
                                    })?);
                                    bar.inc(1);
                                }
                            }
                        }
                        Test::LoopOrder => {
                            let n = ((size / 8) as f64).sqrt() as usize;
                            let m: Vec<u64> = (0..(n * n) as u64).collect();
                            for &v in &p.variants {
                                bar.set_message(format!("loop-order {v}"));
                                let body = if v == "row-major" {
                                    kernels::row_major
                                } else {
                                    kernels::column_major
                                };
                                let key = case! {"test" => "loop-order", "variant" => v, "size" => size, "n" => n};
                                let what = format!("cpu loop-order {v} {n}x{n}");
                                out.extend(timed(&what, cpu, ctx, key, n * n, || {
                                    black_box(body(black_box(&m), n));
                                })?);
                                bar.inc(1);
                            }
                        }
                    }
                }
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the cpu lab's thread panicked")))
    });
    bar.finish_and_clear();
    measured?;
    out.models.extend(branch_models(&out.results));
    out.models.extend(loop_order_models(&out.results));
    if ctx.counters {
        out.notes.push("counters are per element over the whole case (calibration and warm-up passes included, so a slight overcount); IPC over the same".into());
    }
    Ok(out)
}

/// One case: samples of whole passes over `elements`, as ns per element, judged with its
/// conditions, with counters per element where `--counters` asked.
fn timed(
    what: &str,
    cpu: usize,
    ctx: &Ctx,
    key: Map<String, Value>,
    elements: usize,
    mut pass: impl FnMut(),
) -> Result<Outcome> {
    judged_case(what, &[cpu], &ctx.retry, || {
        let (samples, readings) = counters::around(ctx.counters, || {
            sample_fn(&ctx.spec, |iters| {
                for _ in 0..iters {
                    pass();
                }
            })
        })?;
        let per: Vec<f64> = samples
            .iter()
            .map(|x| x.ns_per_iter() / elements.max(1) as f64)
            .collect();
        let mut o = Outcome::default();
        o.push(LAB, key.clone(), "time", "ns", per);
        if let Some(mut r) = readings {
            // Every pass the sampler ran, timed or not, is in the counts: divide by the
            // calibration's estimate (the timed passes), the same for every counter.
            let passes: u64 = samples.iter().map(|x| x.iters).sum::<u64>().max(1);
            let per_element = (passes as f64) * elements.max(1) as f64;
            r.counters = r
                .counters
                .into_iter()
                .map(|(k, v)| {
                    if k == "IPC" {
                        (k, v)
                    } else {
                        (format!("{k}/element"), v / per_element)
                    }
                })
                .collect();
            r.attach_from(&mut o.results, 0);
        }
        Ok(o)
    })
}

/// The time row of a case.
fn find<'a>(
    rows: &'a [ResultRow],
    test: &str,
    variant: &str,
    data: Option<&str>,
    size: u64,
) -> Option<&'a ResultRow> {
    rows.iter().find(|r| {
        r.metric == "time"
            && r.key("test") == test
            && r.key("variant") == variant
            && data.is_none_or(|d| r.key("data") == d)
            && size_of(r) == size
    })
}

fn size_of(r: &ResultRow) -> u64 {
    r.case.get("size").and_then(Value::as_u64).unwrap_or(0)
}

fn sizes_of(rows: &[ResultRow], test: &str) -> Vec<u64> {
    let mut s: Vec<u64> = rows
        .iter()
        .filter(|r| r.key("test") == test)
        .map(size_of)
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// The samples' element-wise differences `a - b` times `k` (sample j of each was the j-th of
/// its case), summarised: a derived figure with a spread.
fn difference(a: &ResultRow, b: &ResultRow, k: f64) -> Option<Summary> {
    let d: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| (x - y) * k)
        .collect();
    Summary::of(&d)
}

/// The branch model, per size: the branchy loop on shuffled data pays sorted's time plus a
/// wrong guess on half the elements (uniform bytes against a threshold of 128), so a wrong
/// guess costs 2 x (shuffled - sorted); the branchless body does not depend on the order, so
/// its shuffled time is predicted by its sorted time.
pub fn branch_models(rows: &[ResultRow]) -> Vec<Model> {
    sizes_of(rows, "branch")
        .into_iter()
        .filter_map(|size| {
            let mut points = Vec::new();
            let mut verdict = Vec::new();
            let mut params = Map::new();
            let mut inputs: Vec<&ResultRow> = Vec::new();
            let by = |v, d| find(rows, "branch", v, Some(d), size);
            if let (Some(s), Some(x)) = (by("branchy", "sorted"), by("branchy", "shuffled")) {
                let miss = 2.0 * (x.summary.median - s.summary.median);
                params.insert("mispredict_ns".into(), Value::from(miss));
                verdict.push(format!(
                    "branchy: shuffled {} vs sorted {} per element; with half the elements guessed wrong a wrong guess costs about {miss:.1} ns{}",
                    quality::quote_row(format!("{:.2} ns", x.summary.median), x),
                    quality::quote_row(format!("{:.2} ns", s.summary.median), s),
                    misses_seen(x).map_or(String::new(), |m| format!(
                        " (counted: {m:.2} branch misses per element, model 0.50)"
                    ))
                ));
                inputs.extend([s, x]);
            }
            if let (Some(s), Some(x)) = (by("branchless", "sorted"), by("branchless", "shuffled")) {
                let p = ModelPoint {
                    case: case! {"test" => "branch", "variant" => "branchless", "data" => "shuffled", "size" => size},
                    predicted: s.summary.median,
                    measured: x.summary.median,
                    unit: "ns".into(),
                };
                let e = p.error();
                verdict.push(if e.abs() <= 0.15 {
                    format!("branchless: shuffled and sorted within {:.0}%: no jump, nothing to guess, the order does not matter", e.abs() * 100.0)
                } else {
                    format!("branchless: shuffled differs from sorted by {:+.0}%: the order should not matter to a body with no jump; the machine was busy, or the compiler changed the body (check the disassembly)", -e * 100.0)
                });
                points.push(p);
                inputs.extend([s, x]);
                if let Some(bx) = by("branchy", "shuffled") {
                    verdict.push(format!(
                        "on shuffled data the branchless body takes {:.2}x the branchy one's time: it always pays for the add it may not keep, never for a wrong guess",
                        x.summary.median / bx.summary.median
                    ));
                }
            }
            if verdict.is_empty() {
                return None;
            }
            let mut m = Model {
                lab: LAB.into(),
                name: format!(
                    "branch over {}: shuffled = sorted + 1/2 x a wrong guess; branchless independent of order",
                    human_size(size)
                ),
                params,
                points,
                verdict,
            };
            quality::model_inherits(&mut m, &inputs);
            Some(m)
        })
        .collect()
}

/// Branch misses per element, where a PMU counted them.
fn misses_seen(r: &ResultRow) -> Option<f64> {
    r.counters.as_ref()?.get("branch-misses/element").copied()
}

/// The loop-order model, per size: row by row each line brings 8 ints and all are used; column
/// by column each element needs a line of its own, so at least one line's cost per element:
/// 8 x row-major's time per element, where row-major streams from memory.
pub fn loop_order_models(rows: &[ResultRow]) -> Vec<Model> {
    sizes_of(rows, "loop-order")
        .into_iter()
        .filter_map(|size| {
            let r = find(rows, "loop-order", "row-major", None, size)?;
            let c = find(rows, "loop-order", "column-major", None, size)?;
            let p = ModelPoint {
                case: case! {"test" => "loop-order", "variant" => "column-major", "size" => size},
                predicted: r.summary.median * INTS_PER_LINE,
                measured: c.summary.median,
                unit: "ns".into(),
            };
            let ratio = c.summary.median / r.summary.median;
            let e = p.error();
            let mut verdict = vec![format!(
                "column-major takes {ratio:.1}x row-major's time per element ({} vs {}) over a {} matrix",
                quality::quote_row(format!("{:.2} ns", c.summary.median), c),
                quality::quote_row(format!("{:.2} ns", r.summary.median), r),
                human_size(size)
            )];
            verdict.push(if e.abs() <= 0.25 {
                "holds: each element read column by column costs a whole line, the 8 ints row by row share".to_string()
            } else if p.measured > p.predicted {
                format!("departs (measured {:.2} ns, predicted {:.2}): column by column is worse than a line per element: every load is a new 4 KiB page (a TLB miss) and the prefetchers cannot follow a stride that leaves the page each time, so the loads wait on memory's latency, not its bandwidth", p.measured, p.predicted)
            } else {
                format!("departs (measured {:.2} ns, predicted {:.2}): column by column is cheaper than a line per element: the lines brought for one column are still cached when the next column uses them (the matrix, or its lines of one column's pass, fit a cache level: try a larger --sizes), or several misses overlap", p.measured, p.predicted)
            });
            let mut params = Map::new();
            params.insert("ints_per_line".into(), Value::from(INTS_PER_LINE));
            let mut m = Model {
                lab: LAB.into(),
                name: format!(
                    "loop order over {}: column-major = row-major x 8 ints per line",
                    human_size(size)
                ),
                params,
                points: vec![p],
                verdict,
            };
            quality::model_inherits(&mut m, &[r, c]);
            Some(m)
        })
        .collect()
}

/// The cost sheet: what a wrong guess costs (branchy, shuffled minus sorted, doubled) and
/// column-major's time per element beside row-major's.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    if let Some(size) = sizes_of(&out.results, "branch").pop() {
        let s = find(&out.results, "branch", "branchy", Some("sorted"), size);
        let x = find(&out.results, "branch", "branchy", Some("shuffled"), size);
        if let (Some(s), Some(x)) = (s, x) {
            if let Some(sum) = difference(x, s, 2.0) {
                h.push(
                    Headline {
                        label: "mispredicted branch".into(),
                        summary: sum,
                        unit: "ns".into(),
                        reading: format!(
                            "2 x (shuffled - sorted) per element through a 50% branch over {}: shuffled {:.2} ns, sorted {:.2} ns per element",
                            human_size(size),
                            x.summary.median,
                            s.summary.median
                        ),
                        ..Default::default()
                    }
                    .judged_by(&[s, x]),
                );
            }
        }
    }
    if let Some(size) = sizes_of(&out.results, "loop-order").pop() {
        let r = find(&out.results, "loop-order", "row-major", None, size);
        let c = find(&out.results, "loop-order", "column-major", None, size);
        if let (Some(r), Some(c)) = (r, c) {
            h.push(
                Headline {
                    label: "column-major element".into(),
                    summary: c.summary,
                    unit: "ns".into(),
                    reading: format!(
                        "summing a {} matrix column by column: {:.1}x row by row ({:.2} ns per element)",
                        human_size(size),
                        c.summary.median / r.summary.median,
                        r.summary.median
                    ),
                    ..Default::default()
                }
                .judged_by(&[r, c]),
            );
        }
    }
    h
}

/// The cpu lab in `costlab run`.
pub struct CpuLab;

impl Lab for CpuLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<CpuArgs>(
            "cpu",
            "CPU: what a mispredicted branch and a cache-hostile loop order cost",
            "Examples:\n  costlab cpu                        both tests\n  costlab cpu branch --counters\n  costlab cpu loop-order --sizes 64M",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: CpuArgs = parsed(m)?;
        Ok(Invocation::measure(args.common().clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        None
    }
    /// Quick: both tests at their smallest default sizes (a second or two). Full: the branch
    /// also at 16 MiB (beyond L2), the loop order at its full size.
    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let mut plans = default_plans(&ctx.machine, !full);
        if full {
            plans[0].sizes.push(16 << 20);
        }
        measure(&plans, ctx)
    }
    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
}

#[cfg(test)]
mod tests;
