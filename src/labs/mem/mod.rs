//! The memory lab: bandwidth by op, pattern, block, threads and page kind; the latency curve
//! of a dependent random chase and the plateaus that are L1, L2, L3 and DRAM; and what a TLB
//! miss costs (4 KiB pages against huge pages at the largest size).
//!
//! sysbench's random mode draws a random number per 8 bytes and so measures its generator;
//! here `rand` draws one index per whole 64-byte line from 8 independent lanes, and latency is
//! a chase of dependent loads, so the page size shows.

pub mod chase;
pub mod kernels;
pub mod loaded;
pub mod plan;
pub mod plateaus;
pub mod pools;
pub mod region;

use std::hint::black_box;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::case;
use crate::cli::{MemArgs, MemCommand, MemGridArgs};
use crate::labs::{Ctx, Headline, Lab};
use crate::machine::Machine;
use crate::measure::sizes::{format_size, human_size};
use crate::measure::{counters, cpus, cycle, sample_fn, team, Summary};
use crate::report::{progress, table, Outcome, ResultRow};

use kernels::{Isa, Lanes, RAND_STEP};
use plan::{BandwidthPlan, BandwidthText, LatencyPlan, Op, Pattern};
use plateaus::{Level, Point};
use pools::Reservation;
use region::{PageKind, Region};

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
            bandwidth(&plan, ctx)
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
        None => grid(&args.grid, ctx),
    }
}

// ---------------------------------------------------------------------------------------------
// Hugepage pools

fn reserve_pools(needs: &[(PageKind, u64)], reserve: bool) -> Result<Vec<Reservation>> {
    let root = Path::new(pools::SYSFS_HUGEPAGES);
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

/// MemAvailable from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Refuse a plan whose regions would not fit in available memory (touching them would end in
/// the OOM killer, not in a figure). Hugetlb kinds are checked against their pools instead.
fn check_fits(bytes: u64, what: &str) -> Result<()> {
    if let Some(avail) = mem_available() {
        if bytes > avail / 10 * 9 {
            return Err(crate::error::usage(format!(
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
            pools::read_pool(Path::new(pools::SYSFS_HUGEPAGES), p)
                .ok()
                .flatten()
        })
        .is_some_and(|s| s.free >= pages)
}

// ---------------------------------------------------------------------------------------------
// Bandwidth

/// One worker's sweep over its region (or its view of the shared one).
struct Sweep {
    base: *mut u8,
    /// Bytes of the region the op covers: the whole block, or each half for copy.
    span: usize,
    op: Op,
    pattern: Pattern,
    isa: Isa,
    chunk: usize,
    cursor: usize,
    rng: Lanes,
    sink: u64,
}

/// Largest power of two up to 256 KiB that divides `span`: one seq iteration moves this much,
/// so samples can be sized finely while the sweep still runs through the whole block.
fn seq_chunk(span: usize) -> usize {
    let mut c = 256 << 10;
    while c > 64 && !span.is_multiple_of(c) {
        c /= 2;
    }
    c.min(span)
}

impl Sweep {
    fn new(region: &Region, op: Op, pattern: Pattern, isa: Isa, seed: u64) -> Sweep {
        let span = if op == Op::Copy {
            region.len() / 2 / 64 * 64
        } else {
            region.len()
        };
        Sweep {
            base: region.raw(),
            span,
            op,
            pattern,
            isa,
            chunk: seq_chunk(span),
            cursor: 0,
            rng: Lanes::new(seed),
            sink: 0,
        }
    }

    /// Bytes one iteration moves, counted as STREAM does (copy = read + write).
    fn bytes_per_iter(&self) -> u64 {
        let one = match self.pattern {
            Pattern::Seq => self.chunk,
            Pattern::Rand => RAND_STEP * 64,
        } as u64;
        if self.op == Op::Copy {
            2 * one
        } else {
            one
        }
    }

    fn run(&mut self, iters: u64) {
        let (isa, base, span) = (self.isa, self.base, self.span);
        let lines = span / 64;
        for _ in 0..iters {
            // SAFETY: base..base+span (and base+span..base+2*span for copy's destination)
            // lies in a live region that outlives the team; chunk divides span and every
            // offset is a multiple of 64, so accesses are aligned and in bounds. With --shared
            // several workers store to the same bytes: the values are never read as data.
            unsafe {
                match self.pattern {
                    Pattern::Seq => {
                        let p = base.add(self.cursor);
                        match self.op {
                            Op::Read => self.sink ^= kernels::read_seq(isa, p, self.chunk),
                            Op::Write => kernels::write_seq(isa, p, self.chunk, 0x3c, false),
                            Op::WriteNt => kernels::write_seq(isa, p, self.chunk, 0x3c, true),
                            Op::Copy => kernels::copy_seq(isa, p.add(span), p, self.chunk),
                        }
                        self.cursor += self.chunk;
                        if self.cursor >= span {
                            self.cursor = 0;
                        }
                    }
                    Pattern::Rand => match self.op {
                        Op::Read => {
                            self.sink ^=
                                kernels::read_rand(isa, base, lines, RAND_STEP, &mut self.rng)
                        }
                        Op::Write | Op::WriteNt => kernels::write_rand(
                            isa,
                            base,
                            lines,
                            RAND_STEP,
                            &mut self.rng,
                            0x3c,
                            self.op == Op::WriteNt,
                        ),
                        Op::Copy => kernels::copy_rand(
                            isa,
                            base.add(span),
                            base,
                            lines,
                            RAND_STEP,
                            &mut self.rng,
                        ),
                    },
                }
            }
        }
        black_box(self.sink);
    }
}

/// Map the regions of one case: one per worker, each first-touched by its worker's CPU, or
/// one shared region touched from the first worker's CPU.
fn make_regions(
    cpu_list: &[usize],
    block: u64,
    kind: PageKind,
    shared: bool,
) -> Result<Vec<Region>> {
    let owners: &[usize] = if shared { &cpu_list[..1] } else { cpu_list };
    std::thread::scope(|s| {
        let handles: Vec<_> = owners
            .iter()
            .map(|&cpu| {
                s.spawn(move || -> Result<Region> {
                    cpus::pin_current(cpu)?;
                    Region::new(block, kind)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a mapping thread panicked")))
            })
            .collect()
    })
}

/// GB/s per sample of one op and pattern over prepared regions.
fn measure_bandwidth(
    cpu_list: &[usize],
    regions: &[Region],
    op: Op,
    pattern: Pattern,
    ctx: &Ctx,
) -> Result<Vec<f64>> {
    let isa = Isa::detect();
    let bytes = Sweep::new(&regions[0], op, pattern, isa, 1).bytes_per_iter();
    let samples = team(
        cpu_list,
        &ctx.spec,
        |i| {
            Ok(Sweep::new(
                &regions[i.min(regions.len() - 1)],
                op,
                pattern,
                isa,
                0x9e37 + i as u64,
            ))
        },
        |w: &mut Sweep, n| w.run(n),
    )?;
    let threads = cpu_list.len() as f64;
    Ok(samples
        .iter()
        .map(|s| crate::measure::units::gb_per_s(threads * s.iters as f64 * bytes as f64, s.ns))
        .collect())
}

/// Note when the kernel did not back a thp region with huge pages.
fn note_thp(region: &Region, notes: &mut Vec<String>) {
    if region.kind() != PageKind::Thp || region.len() < 4 << 20 {
        return;
    }
    if let Some(f) = region.huge_fraction() {
        if f < 0.9 {
            let note = format!(
                "thp: the kernel backed only {:.0}% of a {} region with huge pages (see /sys/kernel/mm/transparent_hugepage/enabled and defrag); thp figures are partly 4k",
                f * 100.0,
                human_size(region.len() as u64)
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
}

/// `costlab mem bandwidth`.
pub fn bandwidth(plan: &BandwidthPlan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    if plan.pages.iter().any(|k| k.pool_page().is_none()) {
        let regions = if plan.shared {
            1
        } else {
            plan.threads.iter().copied().max().unwrap_or(1) as u64
        };
        let block = plan.blocks.iter().copied().max().unwrap_or(0);
        check_fits(
            regions * block,
            &format!("{regions} x --block {}", format_size(block)),
        )?;
    }
    let held = reserve_pools(&plan.pool_needs(), plan.reserve)?;
    let mut out = Outcome::default();
    out.notes.push(format!(
        "kernels: {}; bytes counted as moved (copy = read + write, as STREAM); GB/s = 10^9 bytes/s",
        Isa::detect().name()
    ));
    let bar = progress::bar(plan.cases() as u64, "mem bw");
    for &kind in &plan.pages {
        for &threads in &plan.threads {
            let cpu_list = cpus::cpus_for_threads(threads, &allowed);
            for &block in &plan.blocks {
                progress::note(&format!(
                    "mem bandwidth: mapping {} x {} of {kind} pages",
                    if plan.shared { 1 } else { threads },
                    format_size(block)
                ));
                let regions = make_regions(&cpu_list, block, kind, plan.shared)?;
                note_thp(&regions[0], &mut out.notes);
                for &op in &plan.ops {
                    for &pattern in &plan.patterns {
                        bar.set_message(format!(
                            "{op} {pattern} {} x{threads} {kind}",
                            format_size(block)
                        ));
                        let (gbs, readings) = counters::around(ctx.counters, || {
                            measure_bandwidth(&cpu_list, &regions, op, pattern, ctx)
                        })?;
                        let first = out.results.len();
                        let mut case = case! {
                            "op" => op.name(), "pattern" => pattern.name(), "pages" => kind.name(),
                            "block" => block, "threads" => threads
                        };
                        if plan.shared {
                            case.insert("shared".into(), Value::Bool(true));
                        }
                        out.push(LAB, case, "bandwidth", "GB/s", gbs);
                        if let Some(r) = readings {
                            r.attach_from(&mut out.results, first);
                        }
                        bar.inc(1);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    release(held, &mut out);
    Ok(out)
}

/// `costlab mem`: the study's grid, sized for about a minute on a small machine.
pub fn grid(args: &MemGridArgs, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus().len();
    let pages = match &args.pages {
        Some(p) => p.clone(),
        None => {
            // 2m joins when its pool already holds the largest case, or we may reserve it.
            let need = (1u64 << 30) / (2 << 20) * allowed as u64;
            if args.reserve_hugepages || pool_has(PageKind::Huge2m, need) {
                "4k,thp,2m".to_string()
            } else {
                "4k,thp".to_string()
            }
        }
    };
    let threads = if allowed > 1 {
        format!("1,{allowed}")
    } else {
        "1".to_string()
    };
    let blocks = if ctx.quick { "16K,1G" } else { "16K,4M,1G" };
    let plan = BandwidthPlan::parse(
        &BandwidthText {
            op: "read,write",
            pattern: "seq,rand",
            block: blocks,
            threads: &threads,
            pages: &pages,
            shared: false,
            oversubscribe: false,
            reserve: args.reserve_hugepages,
        },
        allowed,
    )?;
    bandwidth(&plan, ctx)
}

// ---------------------------------------------------------------------------------------------
// Latency

/// ns per dependent load, per sample, over a chase of `next` laid out in a `kind` region.
fn measure_chase(
    next: &[u32],
    size: u64,
    kind: PageKind,
    ctx: &Ctx,
    notes: &mut Vec<String>,
) -> Result<Vec<f64>> {
    let mut region = Region::new(size, kind)?;
    note_thp(&region, notes);
    let mut p = chase::lay_out(&mut region, next);
    let samples = sample_fn(&ctx.spec, |n| {
        // SAFETY: the chain was laid out in `region`, which lives until after sampling.
        p = unsafe { chase::chase(p, n) };
        black_box(p);
    })?;
    drop(region);
    Ok(samples.iter().map(|s| s.ns_per_iter()).collect())
}

/// `costlab mem latency`: the curve, its plateaus and the TLB cost.
pub fn latency(plan: &LatencyPlan, ctx: &Ctx) -> Result<Outcome> {
    if plan.pages.iter().any(|k| k.pool_page().is_none()) {
        let largest = plan.sizes.iter().copied().max().unwrap_or(0);
        // The region plus the cycle's index array (4 bytes per line).
        check_fits(
            largest + largest / 16,
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
                for &kind in &plan.pages {
                    bar.set_message(format!("{} {kind}", format_size(size)));
                    let mut notes = Vec::new();
                    let (ns, readings) = counters::around(ctx.counters, || {
                        measure_chase(&next, size, kind, ctx, &mut notes)
                    })?;
                    for n in notes {
                        if !out.notes.contains(&n) {
                            out.notes.push(n);
                        }
                    }
                    let first = out.results.len();
                    out.push(
                        LAB,
                        case! {"op" => "chase", "pattern" => "rand", "pages" => kind.name(), "block" => size, "threads" => 1},
                        "latency",
                        "ns",
                        ns,
                    );
                    if let Some(r) = readings {
                        r.attach_from(&mut out.results, first);
                    }
                    bar.inc(1);
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

/// L1d, L2, L3 sizes: from the machine probe, else read from sysfs here.
fn cache_sizes(m: &Machine) -> [Option<u64>; 3] {
    let mut out = [m.cache_size(1), m.cache_size(2), m.cache_size(3)];
    if out.iter().all(Option::is_some) {
        return out;
    }
    let root = Path::new("/sys/devices/system/cpu/cpu0/cache");
    for i in 0..8 {
        let dir = root.join(format!("index{i}"));
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        if kind == "Instruction" {
            continue;
        }
        let Ok(level) = level.parse::<usize>() else {
            continue;
        };
        let bytes = crate::measure::sizes::parse_size(&size).ok();
        if (1..=3).contains(&level) && out[level - 1].is_none() {
            out[level - 1] = bytes;
        }
    }
    out
}

/// The chase rows of one page kind, by size.
fn curve_rows<'a>(out: &'a Outcome, kind: &str) -> Vec<&'a ResultRow> {
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

fn block_of(r: &ResultRow) -> u64 {
    r.case.get("block").and_then(Value::as_u64).unwrap_or(0)
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
fn analyse_latency(out: &mut Outcome, machine: &Machine) {
    let caches = cache_sizes(machine);
    let kinds: Vec<String> = {
        let mut k: Vec<String> = Vec::new();
        for r in &out.results {
            let p = r.key("pages");
            if r.metric == "latency" && !k.contains(&p) {
                k.push(p);
            }
        }
        k
    };
    let mut extra: Vec<ResultRow> = Vec::new();
    let mut level_notes: Vec<String> = Vec::new();
    for kind in &kinds {
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
        if Some(kind) == kinds.first() {
            level_notes.extend(missing_plateaus(&points, &named, caches, kind));
        }
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
    out.notes.extend(level_notes);
    // TLB cost: 4k minus the best huge kind measured, at the largest size both have.
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
            let diff: Vec<f64> = s
                .samples
                .iter()
                .zip(&h.samples)
                .map(|(a, b)| a - b)
                .collect();
            out.push(
                LAB,
                case! {"op" => "chase", "pattern" => "rand", "pages" => "4k", "block" => size, "threads" => 1, "versus" => hk},
                "tlb_cost",
                "ns",
                diff,
            );
            let (a, b) = (s.summary.median, h.summary.median);
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
                    "TLB: at {}, 4k pages cost {:.1} ns more per access than {hk} ({a:.1} vs {b:.1} ns, {:.2}x). Cause: page walks. Each 4 KiB page needs its own TLB entry: {entries}; the TLB holds a few thousand, so with 4 KiB pages nearly every random access misses it and walks the page table first",
                    human_size(size),
                    a - b,
                    a / b,
                )
            } else {
                format!(
                    "TLB: at {}, 4k and {hk} pages differ by only {:.2}x ({a:.1} vs {b:.1} ns): {entries}, so a TLB effect was expected; if {hk} is thp, check the thp note above, and measure a larger --sizes",
                    human_size(size),
                    a / b,
                )
            });
        }
    }
    out.results.extend(extra);
}

// ---------------------------------------------------------------------------------------------
// Rendering

fn fmt_summary(s: &Summary, prec: usize) -> String {
    format!("{:.p$} ±{:.p$}", s.median, s.mad, p = prec)
}

/// The outcome as tables: bandwidth pivoted by page kind, the latency curve, its levels.
pub fn render(out: &Outcome) -> String {
    if out.results.iter().any(|r| r.key("op") == "loaded") {
        let mut rest = out.clone();
        rest.results.retain(|r| r.key("op") != "loaded");
        return render(&rest) + &loaded::render(out);
    }
    let mut text = String::new();
    let bw: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.metric == "bandwidth")
        .collect();
    if !bw.is_empty() {
        text += &render_bandwidth(&bw);
        text += "\n";
    }
    let has_curve = out
        .results
        .iter()
        .any(|r| r.metric == "latency" && !r.case.contains_key("level"));
    if has_curve {
        text += &render_latency(out);
    }
    text
}

fn ordered_kinds<'a>(rows: impl Iterator<Item = &'a ResultRow>) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for r in rows {
        let k = r.key("pages");
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds
}

fn render_bandwidth(rows: &[&ResultRow]) -> String {
    let kinds = ordered_kinds(rows.iter().copied());
    let mut keys: Vec<(String, String, u64, String)> = Vec::new();
    for r in rows {
        let k = (r.key("op"), r.key("pattern"), block_of(r), r.key("threads"));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut headers: Vec<String> = vec![
        "threads".into(),
        "block".into(),
        "pattern".into(),
        "op".into(),
    ];
    headers.extend(kinds.iter().map(|k| format!("{k} GB/s")));
    let ratios: Vec<&String> = if kinds.iter().any(|k| k == "4k") {
        kinds.iter().filter(|k| *k != "4k").collect()
    } else {
        Vec::new()
    };
    headers.extend(ratios.iter().map(|k| format!("{k}/4k")));
    let mut table_rows = Vec::new();
    for (op, pattern, block, threads) in &keys {
        let find = |kind: &str| {
            rows.iter().find(|r| {
                r.key("op") == *op
                    && r.key("pattern") == *pattern
                    && block_of(r) == *block
                    && r.key("threads") == *threads
                    && r.key("pages") == kind
            })
        };
        let mut cells = vec![
            threads.clone(),
            format_size(*block),
            pattern.clone(),
            op.clone(),
        ];
        for k in &kinds {
            cells.push(find(k).map_or("—".into(), |r| fmt_summary(&r.summary, 2)));
        }
        for k in &ratios {
            cells.push(match (find("4k"), find(k)) {
                (Some(a), Some(b)) if a.summary.median > 0.0 => {
                    format!("{:.2}x", b.summary.median / a.summary.median)
                }
                _ => "—".into(),
            });
        }
        table_rows.push(cells);
    }
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    format!(
        "memory bandwidth (median ±MAD over samples; GB/s = 10^9 bytes/s)\n{}\n",
        table::render(&h, &table_rows)
    )
}

fn render_latency(out: &Outcome) -> String {
    let kinds = ordered_kinds(
        out.results
            .iter()
            .filter(|r| r.metric == "latency" && !r.case.contains_key("level")),
    );
    let mut sizes: Vec<u64> = Vec::new();
    for k in &kinds {
        for r in curve_rows(out, k) {
            if !sizes.contains(&block_of(r)) {
                sizes.push(block_of(r));
            }
        }
    }
    sizes.sort_unstable();
    let mut headers = vec!["size".to_string()];
    headers.extend(kinds.iter().map(|k| format!("{k} ns")));
    let rows: Vec<Vec<String>> = sizes
        .iter()
        .map(|&s| {
            let mut cells = vec![format_size(s)];
            for k in &kinds {
                cells.push(
                    curve_rows(out, k)
                        .into_iter()
                        .find(|r| block_of(r) == s)
                        .map_or("—".into(), |r| fmt_summary(&r.summary, 1)),
                );
            }
            cells
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut text = format!(
        "latency of dependent loads over one random cycle (median ±MAD, ns per load)\n{}\n",
        table::render(&h, &rows)
    );
    let levels: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.case.contains_key("level"))
        .collect();
    if !levels.is_empty() {
        let mut headers = vec!["level".to_string(), "cache (machine)".to_string()];
        headers.extend(kinds.iter().map(|k| format!("{k} ns")));
        headers.push("plateau (4k)".into());
        let mut rows = Vec::new();
        for level in Level::ALL {
            let of = |k: &str| {
                levels
                    .iter()
                    .find(|r| r.key("level") == level.name() && r.key("pages") == k)
            };
            if kinds.iter().all(|k| of(k).is_none()) {
                continue;
            }
            let any = kinds.iter().find_map(|k| of(k));
            let cache = any
                .and_then(|r| r.case.get("cache").and_then(Value::as_u64))
                .map_or("—".to_string(), human_size);
            let mut cells = vec![level.name().to_string(), cache];
            for k in &kinds {
                cells.push(of(k).map_or("—".into(), |r| {
                    format!(
                        "{} @{}",
                        fmt_summary(&r.summary, 1),
                        format_size(block_of(r))
                    )
                }));
            }
            cells.push(of("4k").map_or("—".into(), |r| {
                let g = |key: &str| {
                    r.case
                        .get(key)
                        .and_then(Value::as_u64)
                        .map_or("?".into(), format_size)
                };
                format!("{}–{}", g("plateau_from"), g("plateau_to"))
            }));
            rows.push(cells);
        }
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        text += &format!(
            "\nlevels read off the curve's plateaus\n{}\n",
            table::render(&h, &rows)
        );
    }
    if let Some(t) = out.results.iter().find(|r| r.metric == "tlb_cost") {
        text += &format!(
            "\nTLB cost per access at {}: {} ns (4k minus {})\n",
            human_size(block_of(t)),
            fmt_summary(&t.summary, 1),
            t.key("versus")
        );
    }
    text
}

// ---------------------------------------------------------------------------------------------
// The cost sheet

/// The memory lab in `costlab run`.
pub struct MemLab;

// Two points per cache level at least, so each level shows a plateau: the L3 a VM really
// gets can be far smaller than the size it reports (here 32 MiB reported, under 16 MiB seen).
const QUICK_SIZES: [u64; 12] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
    1 << 30,
];

impl Lab for MemLab {
    fn name(&self) -> &'static str {
        LAB
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        None
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
        for (ops, pattern) in [
            (vec![Op::Read, Op::Write, Op::Copy], Pattern::Seq),
            (vec![Op::Read], Pattern::Rand),
        ] {
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
    let mut h = Vec::new();
    let level = |name: &str, kind: &str| {
        out.results
            .iter()
            .find(|r| r.key("level") == name && r.key("pages") == kind)
    };
    for l in [Level::L1, Level::L2, Level::L3] {
        if let Some(r) = level(l.name(), "4k") {
            let cache = r
                .case
                .get("cache")
                .and_then(Value::as_u64)
                .map_or(String::new(), |c| format!(" (cache {})", human_size(c)));
            h.push(Headline {
                label: format!("{} latency", l.name()),
                summary: r.summary,
                unit: "ns".into(),
                reading: format!(
                    "a dependent load hitting {}{cache}: chase over {}",
                    l.name(),
                    human_size(block_of(r))
                ),
            });
        }
    }
    if let Some(r) = level("DRAM", "4k") {
        let huge = ["2m", "thp"]
            .into_iter()
            .find_map(|k| level("DRAM", k).map(|x| (k, x)));
        let reading = match huge {
            Some((k, x)) => format!(
                "random load at {} with 4 KiB pages; {:.0} ns with {k} pages",
                human_size(block_of(r)),
                x.summary.median
            ),
            None => format!(
                "random load at {} with 4 KiB pages",
                human_size(block_of(r))
            ),
        };
        h.push(Headline {
            label: "DRAM latency".into(),
            summary: r.summary,
            unit: "ns".into(),
            reading,
        });
    }
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
            h.push(Headline {
                label: format!("seq {op} bandwidth"),
                summary: r.summary,
                unit: "GB/s".into(),
                reading: format!(
                    "1 thread over {} with 4 KiB pages{more}",
                    human_size(block_of(r))
                ),
            });
        }
    }
    if let Some(t) = out.results.iter().find(|r| r.metric == "tlb_cost") {
        let hk = t.key("versus");
        h.push(Headline {
            label: "TLB cost per access".into(),
            summary: t.summary,
            unit: "ns".into(),
            reading: format!(
                "page walks: 4k minus {hk} for a random load at {}",
                human_size(block_of(t))
            ),
        });
        let small = curve_rows(out, "4k")
            .into_iter()
            .find(|r| block_of(r) == block_of(t));
        let huge = curve_rows(out, &hk)
            .into_iter()
            .find(|r| block_of(r) == block_of(t));
        if let (Some(s), Some(x)) = (small, huge) {
            let cut: Vec<f64> = s
                .samples
                .iter()
                .zip(&x.samples)
                .filter(|(a, _)| **a > 0.0)
                .map(|(a, b)| (1.0 - b / a) * 100.0)
                .collect();
            if let Some(sum) = Summary::of(&cut) {
                h.push(Headline {
                    label: "huge-page latency cut".into(),
                    summary: sum,
                    unit: "%".into(),
                    reading: format!(
                        "huge pages ({hk}) cut random DRAM latency by {:.0}% here",
                        sum.median
                    ),
                });
            }
        }
    }
    h.extend(loaded::headline(out));
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_chunks_divide_the_span() {
        assert_eq!(seq_chunk(1 << 30), 256 << 10);
        assert_eq!(seq_chunk(16 << 10), 16 << 10);
        assert_eq!(seq_chunk(12 << 10), 4 << 10);
        assert_eq!(seq_chunk(6 << 10), 2 << 10);
        for span in [4096usize, 6144, 12288, 1 << 20, 3 << 20] {
            let c = seq_chunk(span);
            assert_eq!(span % c, 0);
            assert_eq!(c % 64, 0);
        }
    }

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
                crate::machine::Cache {
                    level: 1,
                    kind: "Data".into(),
                    size: 32 << 10,
                    line: 64,
                    shared_by: vec![],
                },
                crate::machine::Cache {
                    level: 2,
                    kind: "Unified".into(),
                    size: 1 << 20,
                    line: 64,
                    shared_by: vec![],
                },
                crate::machine::Cache {
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

    /// Run by hand to time the quick plan: cargo test --release quick_plan -- --ignored --nocapture
    #[test]
    #[ignore]
    fn quick_plan_runs_and_gives_headlines() {
        let ctx = Ctx {
            machine: Machine::probe(),
            spec: crate::measure::SampleSpec::quick(),
            counters: false,
            quick: true,
            reserve_hugepages: false,
        };
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
