//! The memory lab: bandwidth by op, pattern, block, threads and page kind; the latency curve
//! of a dependent random chase and the plateaus that are L1, L2, L3 and DRAM; and what a TLB
//! miss costs (4 KiB pages against huge pages at the largest size).
//!
//! sysbench's random mode draws a random number per 8 bytes, so part of its time per access is
//! its generator (bench/sysbench-random.sh measures how much; here it still showed a hugepage
//! effect, so the study's premise that it hides one was not reproduced). `rand` here draws one
//! index per whole 64-byte line from 8 independent lanes, and latency is a chase of dependent
//! loads, so nothing but the memory and the page size sets the figure.

pub mod args;
mod bandwidth;
pub mod charts;
pub mod chase;
pub mod kernels;
mod ladder;
mod latency;
mod libc_ref;
pub mod loaded;
pub mod plan;
pub mod plateaus;
pub mod pools;
mod readings;
mod render;
mod shared;
pub mod stride;
mod sweep;

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use args::{MemArgs, MemCommand};
use costlab_core::machine::pages::mem_available;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::{cpus, quality, Summary};
use costlab_history::report::{Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

use costlab_core::measure::region::PageKind;
use plan::{BandwidthPlan, BandwidthText, LatencyPlan, Op, Pattern};
use plateaus::Level;
use pools::Reservation;

pub use bandwidth::{bandwidth, grid};
use latency::curve_rows;
pub use latency::latency;
pub use render::render;

pub const LAB: &str = "mem";

/// Run `costlab mem [bandwidth|latency]`.
pub fn run(args: &MemArgs, ctx: &Ctx) -> Result<Outcome> {
    let ncpus = cpus::allowed_cpus().len();
    match &args.what {
        Some(MemCommand::Bandwidth(a)) => {
            let plan = BandwidthPlan::parse(
                &BandwidthText {
                    op: &a.op,
                    pattern: &a.pattern,
                    block: &a.block,
                    threads: &a.threads,
                    pages: &a.pages,
                    shared: a.shared,
                    oversubscribe: a.oversubscribe,
                    reserve: a.reserve_hugepages,
                },
                ncpus,
            )?;
            let mut out = bandwidth(&plan, ctx)?;
            // Read fell below copy-nt at the most threads: measure the latency that explains it
            // (idle, and with the other CPUs reading at full speed), a few seconds more.
            let beyond = bandwidth::beyond_caches(&ctx.machine);
            if ncpus > 1 && bandwidth::read_below_copy_nt(&out.results, beyond).is_some() {
                out.extend(loaded::loaded(&loaded::LoadedPlan::for_reading(), ctx)?);
                out.models
                    .extend(bandwidth::little_model(&out.results, beyond));
            }
            Ok(out)
        }
        Some(MemCommand::Latency(a)) => {
            let mut plan = LatencyPlan::parse(a.sizes.as_deref(), &a.pages, a.reserve_hugepages)?;
            if a.sizes.is_none() && ctx.quick {
                plan.sizes = QUICK_SIZES.to_vec();
            }
            latency(&plan, ctx)
        }
        Some(MemCommand::Loaded(a)) => {
            loaded::loaded(&loaded::LoadedPlan::parse(a, ctx.quick)?, ctx)
        }
        Some(MemCommand::Stride(a)) => stride::stride(
            &stride::StridePlan::parse(&a.strides, a.sizes.as_deref(), &ctx.machine, ctx.quick)?,
            ctx,
        ),
        None => grid(&args.grid, ctx),
    }
}

// ---------------------------------------------------------------------------------------------
// Hugepage pools

fn reserve_pools(needs: &[(PageKind, u64)], reserve: bool) -> Result<Vec<Reservation>> {
    let root = Path::new(costlab_core::machine::pages::SYSFS_HUGEPAGES);
    let mut held = Vec::new();
    for &(kind, pages) in needs {
        let page = kind.pool_page().unwrap_or(0);
        if let Some(r) = pools::ensure(root, kind.name(), page, pages, reserve)? {
            held.push(r);
        }
    }
    Ok(held)
}

fn release(held: Vec<Reservation>, out: &mut Outcome) {
    for r in held {
        out.notes.push(r.finish());
    }
}

/// Refuse a plan whose regions would not fit in available memory (touching them would end in
/// the OOM killer, not in a figure). Hugetlb kinds are checked against their pools instead.
fn check_fits(bytes: u64, what: &str) -> Result<()> {
    if let Some(avail) = mem_available() {
        if bytes > avail / 10 * 9 {
            return Err(costlab_core::error::usage(format!(
                "{what} needs {} of memory but only {} is available; use a smaller size or fewer threads",
                human_size(bytes),
                human_size(avail)
            )));
        }
    }
    Ok(())
}

/// True when the pool for `kind` already has `pages` free (no reservation needed).
fn pool_has(kind: PageKind, pages: u64) -> bool {
    kind.pool_page()
        .and_then(|p| {
            costlab_core::machine::pages::read_pool(
                Path::new(costlab_core::machine::pages::SYSFS_HUGEPAGES),
                p,
            )
            .ok()
            .flatten()
        })
        .is_some_and(|s| s.free >= pages)
}

/// The block of a row, in bytes (its `block` case key).
fn block_of(r: &ResultRow) -> u64 {
    r.case.get("block").and_then(Value::as_u64).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The cost sheet

/// The memory lab in `costlab run`.
pub struct MemLab;

// Two points per cache level at least, so each level shows a plateau: the L3 a VM really
// gets can be far smaller than the size it reports (here 32 MiB reported, under 16 MiB seen).
// The DRAM point is 256 MiB, not 1 GiB: 65536 pages of 4 KiB already miss any TLB, and every
// figure is now taken over several fresh mappings of it (mapping 1 GiB twice per round cost
// `costlab run` seconds it does not have).
const QUICK_SIZES: [u64; 10] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    64 << 20,
    256 << 20,
];

impl Lab for MemLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<MemArgs>(
            "mem",
            "Memory: bandwidth and latency by block, threads and page size; what a TLB miss costs",
            "Examples:\n  costlab mem                                     the study's grid\n  costlab mem bandwidth --sizes 16K,4M,1G --threads 1,2\n  costlab mem latency --sizes 1G --pages 4k,thp,2m",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: MemArgs = parsed(m)?;
        Ok(Invocation::measure(args.common().clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        charts::charts(doc)
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let sizes = if full {
            plan::default_sizes()
        } else {
            QUICK_SIZES.to_vec()
        };
        let largest = sizes.iter().copied().max().unwrap_or(1 << 30);
        let mut pages = vec![PageKind::Small, PageKind::Thp];
        // 2m joins when its pool already has the pages, or `run --reserve-hugepages` allows
        // raising it for the run.
        if ctx.reserve_hugepages || pool_has(PageKind::Huge2m, largest.div_ceil(2 << 20)) {
            pages.push(PageKind::Huge2m);
        }
        let mut out = latency(
            &LatencyPlan {
                sizes,
                pages,
                reserve: ctx.reserve_hugepages,
            },
            ctx,
        )?;
        let all = cpus::allowed_cpus().len().max(1);
        let threads: Vec<usize> = if all > 1 { vec![1, all] } else { vec![1] };
        let block = if full { 1 << 30 } else { 256 << 20 };
        // The quick plan keeps what the sheet and the Little's-law check read (seq read and
        // write, copy-nt against memcpy); the full plan adds copy and the random read.
        let plans = if full {
            vec![
                (
                    vec![Op::Read, Op::Write, Op::Copy, Op::CopyNt, Op::Memcpy],
                    Pattern::Seq,
                ),
                (vec![Op::Read], Pattern::Rand),
            ]
        } else {
            vec![(
                vec![Op::Read, Op::Write, Op::CopyNt, Op::Memcpy],
                Pattern::Seq,
            )]
        };
        for (ops, pattern) in plans {
            out.extend(bandwidth(
                &BandwidthPlan {
                    ops,
                    patterns: vec![pattern],
                    blocks: vec![block],
                    threads: threads.clone(),
                    pages: vec![PageKind::Small],
                    shared: false,
                    reserve: false,
                },
                ctx,
            )?);
        }
        if cpus::allowed_cpus().len() > 1 {
            out.extend(loaded::loaded(&loaded::LoadedPlan::for_run(full), ctx)?);
            let beyond = bandwidth::beyond_caches(&ctx.machine);
            out.models
                .extend(bandwidth::little_model(&out.results, beyond));
        }
        if full {
            let plan = stride::StridePlan {
                strides: stride::STRIDES.to_vec(),
                blocks: stride::default_blocks(&ctx.machine, false),
            };
            out.extend(stride::stride(&plan, ctx)?);
        }
        out.notes.dedup();
        Ok(out)
    }

    fn headlines(&self, out: &Outcome) -> Vec<Headline> {
        headlines(out)
    }
}

/// The lab's lines of the cost sheet.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = cache_headlines(out);
    h.extend(ladder::headlines(out));
    h.extend(dram_headlines(out));
    h.extend(bandwidth_headlines(out));
    h.extend(tlb_headlines(out));
    h.extend(loaded::headline(out));
    h.extend(stride::headlines(out));
    h
}

/// The first latency row of a level ("L1", "DRAM") at a page kind.
fn level_row<'a>(out: &'a Outcome, name: &str, kind: &str) -> Option<&'a ResultRow> {
    out.results
        .iter()
        .find(|r| r.key("level") == name && r.key("pages") == kind)
}

/// A dependent load hitting each cache level, with 4 KiB pages.
fn cache_headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    for l in [Level::L1, Level::L2, Level::L3] {
        if let Some(r) = level_row(out, l.name(), "4k") {
            let cache = r
                .case
                .get("cache")
                .and_then(Value::as_u64)
                .map_or(String::new(), |c| format!(" (cache {})", human_size(c)));
            h.push(
                Headline {
                    label: format!("{} latency", l.name()),
                    summary: r.summary,
                    unit: "ns".into(),
                    reading: format!(
                        "a dependent load hitting {}{cache}: chase over {}",
                        l.name(),
                        human_size(block_of(r))
                    ),
                    ..Default::default()
                }
                .judged_by(&[r]),
            );
        }
    }
    h
}

/// A random DRAM load with 4 KiB pages, and with huge pages beside it where measured.
fn dram_headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    if let Some(r) = level_row(out, "DRAM", "4k") {
        let huge = ["2m", "thp"]
            .into_iter()
            .find_map(|k| level_row(out, "DRAM", k).map(|x| (k, x)));
        let reading = match huge {
            Some((k, x)) => format!(
                "random load at {} with 4 KiB pages; {} with {k} pages",
                human_size(block_of(r)),
                quality::quote_row(format!("{:.0} ns", x.summary.median), x)
            ),
            None => format!(
                "random load at {} with 4 KiB pages",
                human_size(block_of(r))
            ),
        };
        h.push(
            Headline {
                label: "DRAM latency".into(),
                summary: r.summary,
                unit: "ns".into(),
                reading,
                ..Default::default()
            }
            .judged_by(&[r]),
        );
    }
    h
}

/// One thread's sequential read and write bandwidth, with the most threads beside it.
fn bandwidth_headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    for op in ["read", "write"] {
        let mut rows: Vec<&ResultRow> = out
            .results
            .iter()
            .filter(|r| {
                r.metric == "bandwidth"
                    && r.key("op") == op
                    && r.key("pattern") == "seq"
                    && r.key("pages") == "4k"
            })
            .collect();
        rows.sort_by_key(|r| (r.key("threads").parse::<usize>().unwrap_or(0), block_of(r)));
        if let Some(r) = rows.iter().rev().find(|r| r.key("threads") == "1") {
            let more = rows
                .iter()
                .rfind(|x| x.key("threads") != "1")
                .map_or(String::new(), |x| {
                    format!(
                        "; {:.1} GB/s with {} threads",
                        x.summary.median,
                        x.key("threads")
                    )
                });
            h.push(
                Headline {
                    label: format!("seq {op} bandwidth"),
                    summary: r.summary,
                    unit: "GB/s".into(),
                    reading: format!(
                        "1 thread over {} with 4 KiB pages{more}",
                        human_size(block_of(r))
                    ),
                    ..Default::default()
                }
                .judged_by(&[r]),
            );
        }
    }
    h
}

/// What a page walk costs a random load, and how much huge pages cut DRAM latency.
fn tlb_headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    if let Some(t) = out.results.iter().find(|r| r.metric == "tlb_cost") {
        let hk = t.key("versus");
        let small = curve_rows(out, "4k")
            .into_iter()
            .find(|r| block_of(r) == block_of(t));
        let huge = curve_rows(out, &hk)
            .into_iter()
            .find(|r| block_of(r) == block_of(t));
        // The difference of two chases: its own verdict and, whether or not the row inherited
        // them when it was made, those of the chases it is taken from.
        let inputs: Vec<&ResultRow> = small.into_iter().chain(huge).collect();
        h.push(
            Headline {
                label: "TLB cost per access".into(),
                summary: t.summary,
                unit: "ns".into(),
                reading: format!(
                    "page walks: 4k minus {hk} for a random load at {}",
                    human_size(block_of(t))
                ),
                quality: t.quality,
                quality_reasons: t.quality_reasons.clone(),
            }
            .judged_by(&inputs),
        );
        if let (Some(s), Some(x)) = (small, huge) {
            let cut: Vec<f64> = s
                .samples
                .iter()
                .zip(&x.samples)
                .filter(|(a, _)| **a > 0.0)
                .map(|(a, b)| (1.0 - b / a) * 100.0)
                .collect();
            if let Some(sum) = Summary::of(&cut) {
                h.push(
                    Headline {
                        label: "huge-page latency cut".into(),
                        summary: sum,
                        unit: "%".into(),
                        reading: format!(
                            "huge pages ({hk}) cut random DRAM latency by {:.0}% here",
                            sum.median
                        ),
                        ..Default::default()
                    }
                    .judged_by(&[s, x]),
                );
            }
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::latency::analyse_latency;
    use super::*;
    use costlab_core::case;
    use costlab_core::machine::Machine;

    fn row(kind: &str, size: u64, samples: Vec<f64>) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {"op" => "chase", "pattern" => "rand", "pages" => kind, "block" => size, "threads" => 1},
            "latency",
            "ns",
            samples,
        )
        .unwrap()
    }

    #[test]
    fn analysis_adds_levels_tlb_cost_and_headlines() {
        let mut out = Outcome::default();
        let curve = [
            (4u64 << 10, 1.0),
            (16 << 10, 1.0),
            (256 << 10, 3.0),
            (512 << 10, 3.1),
            (8 << 20, 11.0),
            (16 << 20, 12.0),
            (512 << 20, 120.0),
            (1 << 30, 150.0),
        ];
        for (size, ns) in curve {
            out.results.push(row("4k", size, vec![ns; 3]));
            let huge = if size >= 512 << 20 { ns * 0.66 } else { ns };
            out.results.push(row("thp", size, vec![huge; 3]));
        }
        let m = Machine {
            caches: vec![
                costlab_core::machine::Cache {
                    level: 1,
                    kind: "Data".into(),
                    size: 32 << 10,
                    line: 64,
                    shared_by: vec![],
                },
                costlab_core::machine::Cache {
                    level: 2,
                    kind: "Unified".into(),
                    size: 1 << 20,
                    line: 64,
                    shared_by: vec![],
                },
                costlab_core::machine::Cache {
                    level: 3,
                    kind: "Unified".into(),
                    size: 32 << 20,
                    line: 64,
                    shared_by: vec![],
                },
            ],
            ..Default::default()
        };
        analyse_latency(&mut out, &m);
        let tlb = out.results.iter().find(|r| r.metric == "tlb_cost").unwrap();
        assert!((tlb.summary.median - 51.0).abs() < 1e-9);
        assert_eq!(tlb.key("versus"), "thp");
        assert!(out
            .notes
            .iter()
            .any(|n| n.contains("page walks") && n.contains("262144")));
        let h = headlines(&out);
        let labels: Vec<&str> = h.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "L1 latency",
                "L2 latency",
                "L3 latency",
                "DRAM latency",
                "TLB cost per access",
                "huge-page latency cut"
            ]
        );
        assert_eq!(h[0].summary.median, 1.0);
        assert!(h[5].reading.contains("by 34%"), "{}", h[5].reading);
        let text = render(&out);
        assert!(
            text.contains("L2") && text.contains("TLB cost per access"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use costlab_core::machine::Machine;

    /// Run by hand to time the quick plan: cargo test --release quick_plan -- --ignored --nocapture
    #[test]
    #[ignore]
    fn quick_plan_runs_and_gives_headlines() {
        let ctx = Ctx::new(
            Machine::probe(),
            &costlab_lab::Common {
                quick: true,
                ..Default::default()
            },
            costlab_lab::Scope::Command,
        );
        let t0 = std::time::Instant::now();
        let out = MemLab.run_plan(&ctx, false).unwrap();
        eprintln!("quick plan: {:.1} s", t0.elapsed().as_secs_f64());
        for h in MemLab.headlines(&out) {
            eprintln!(
                "{}: {:.2} {} — {}",
                h.label, h.summary.median, h.unit, h.reading
            );
        }
        eprint!("{}", render(&out));
        assert!(MemLab.headlines(&out).len() >= 5);
    }
}
