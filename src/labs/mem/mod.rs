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

use crate::measure::conditions::{judged_case, Conditions};
use std::hint::black_box;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::case;
use crate::cli::{MemArgs, MemCommand, MemGridArgs};
use crate::labs::{Ctx, Headline, Lab};
use crate::machine::Machine;
use crate::measure::conditions::Watch;
use crate::measure::sizes::{format_size, human_size};
use crate::measure::{counters, cpus, cycle, sample_fn, team_window, Summary};
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
    /// Bytes of the region the op covers: the whole block, or each half for the copies.
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

/// Work per timed unit of a worker: about 1 MiB, so the clock read after each unit costs
/// well under 1% even in L1, while the stop flag is seen within a few microseconds.
const UNIT_BYTES: u64 = 1 << 20;

impl Sweep {
    fn new(region: &Region, op: Op, pattern: Pattern, isa: Isa, seed: u64) -> Sweep {
        let span = if op.is_copy() {
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
            // The C library gets the whole span in one call, as a program copying the block
            // would call it: the size decides which method it picks.
            chunk: if op.is_libc() { span } else { seq_chunk(span) },
            cursor: 0,
            rng: Lanes::new(seed),
            sink: 0,
        }
    }

    /// Bytes one iteration moves, counted as STREAM does (copy = read + write).
    fn bytes_per_iter(&self) -> u64 {
        let one = match self.pattern {
            Pattern::Seq => self.chunk,
            Pattern::Rand if self.op.is_libc() => self.chunk,
            Pattern::Rand => RAND_STEP * 64,
        } as u64;
        if self.op.is_copy() {
            2 * one
        } else {
            one
        }
    }

    /// Iterations per timed unit (see `UNIT_BYTES`).
    fn iters_per_unit(&self) -> u64 {
        UNIT_BYTES.div_ceil(self.bytes_per_iter()).max(1)
    }

    fn run(&mut self, iters: u64) {
        let (isa, base, span) = (self.isa, self.base, self.span);
        let lines = span / 64;
        let nt = self.op.is_nt();
        for _ in 0..iters {
            // SAFETY: base..base+span (and base+span..base+2*span for the copies'
            // destination) lies in a live region that outlives the team; chunk divides span
            // and every offset is a multiple of 64, so accesses are aligned and in bounds.
            // With --shared several workers store to the same bytes: the values are never
            // read as data.
            unsafe {
                let p = base.add(self.cursor);
                match (self.pattern, self.op) {
                    // The library calls are sequential whatever the pattern (the plan never
                    // pairs them with rand).
                    (_, Op::Memcpy) => kernels::libc_memcpy(p.add(span), p, self.chunk),
                    (_, Op::Memset) => kernels::libc_memset(p, self.chunk, 0x3c),
                    (Pattern::Seq, Op::Read) => self.sink ^= kernels::read_seq(isa, p, self.chunk),
                    (Pattern::Seq, Op::Write | Op::WriteNt) => {
                        kernels::write_seq(isa, p, self.chunk, 0x3c, nt)
                    }
                    (Pattern::Seq, Op::Copy | Op::CopyNt) => {
                        kernels::copy_seq(isa, p.add(span), p, self.chunk, nt)
                    }
                    (Pattern::Rand, Op::Read) => {
                        self.sink ^= kernels::read_rand(isa, base, lines, RAND_STEP, &mut self.rng)
                    }
                    (Pattern::Rand, Op::Write | Op::WriteNt) => {
                        kernels::write_rand(isa, base, lines, RAND_STEP, &mut self.rng, 0x3c, nt)
                    }
                    (Pattern::Rand, Op::Copy | Op::CopyNt) => kernels::copy_rand(
                        isa,
                        base.add(span),
                        base,
                        lines,
                        RAND_STEP,
                        &mut self.rng,
                        nt,
                    ),
                }
            }
            if self.pattern == Pattern::Seq || self.op.is_libc() {
                self.cursor += self.chunk;
                if self.cursor >= span {
                    self.cursor = 0;
                }
            }
        }
        black_box(self.sink);
    }
}

/// The `isa` and `store` case keys: what produced a figure.
fn kernel_keys(op: Op, isa: Isa) -> (&'static str, &'static str) {
    if op.is_libc() {
        ("libc", "libc")
    } else if op == Op::Read {
        (isa.name(), "none")
    } else {
        (isa.name(), kernels::store_kind(isa, op.is_nt()))
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

/// The samples of one case: GB/s each, and the mean share of a sample's span (first start to
/// last end) that was left out because not every thread was running.
struct Measured {
    gbs: Vec<f64>,
    edge: f64,
}

/// GB/s per sample of one op and pattern over prepared regions. All threads leave one barrier
/// and run until one stop flag; only bytes moved while all of them ran are counted.
fn measure_bandwidth(
    cpu_list: &[usize],
    regions: &[Region],
    op: Op,
    pattern: Pattern,
    ctx: &Ctx,
) -> Result<Measured> {
    let isa = Isa::detect();
    let probe = Sweep::new(&regions[0], op, pattern, isa, 1);
    let unit_bytes = (probe.bytes_per_iter() * probe.iters_per_unit()) as f64;
    // Samples of at least 50 ms: a DRAM stream of 10 ms sees page-walk and refresh hiccups
    // as a spread of several percent, and the window trims a few microseconds at each edge.
    let spec = crate::measure::SampleSpec {
        min_sample: ctx
            .spec
            .min_sample
            .max(std::time::Duration::from_millis(50)),
        ..ctx.spec.clone()
    };
    let samples = team_window(
        cpu_list,
        &spec,
        |i| {
            let w = Sweep::new(
                &regions[i.min(regions.len() - 1)],
                op,
                pattern,
                isa,
                0x9e37 + i as u64,
            );
            let k = w.iters_per_unit();
            Ok((w, k))
        },
        |(w, k): &mut (Sweep, u64)| w.run(*k),
    )?;
    let gbs = samples
        .iter()
        .map(|s| crate::measure::units::gb_per_s(s.total_units() * unit_bytes, s.window_ns))
        .collect();
    let edge = samples
        .iter()
        .map(|s| 1.0 - s.window_ns / s.span_ns.max(1.0))
        .sum::<f64>()
        / samples.len().max(1) as f64;
    Ok(Measured { gbs, edge })
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

/// The block each of `regions` regions gets so that together they stay within four fifths of
/// `avail` (what the machine can give without swapping): `block` itself when it fits, else
/// halved until it does, kept a multiple of `granule`. None when one block alone does not fit
/// (the user asked for more than the machine has) or when even the smallest block per region
/// does not.
fn fit_block(block: u64, regions: u64, granule: u64, avail: u64) -> Option<u64> {
    let budget = avail / 5 * 4;
    if block > budget {
        return None;
    }
    let mut b = block;
    while regions.saturating_mul(b) > budget {
        b = b / 2 / granule * granule;
        if b < plan::MIN_SIZE.max(granule) {
            return None;
        }
    }
    Some(b)
}

/// `fit_block` for one case, or the usage error that says what to change.
fn block_that_fits(asked: u64, nregions: u64, kind: PageKind, avail: u64) -> Result<u64> {
    fit_block(asked, nregions, kind.granule(), avail).ok_or_else(|| {
        crate::error::usage(format!(
            "{nregions} x --block {} needs {} of memory but only {} is available (a block is shrunk for many threads, never below one that fits alone); use a smaller --block or fewer threads",
            format_size(asked),
            human_size(nregions.saturating_mul(asked)),
            human_size(avail)
        ))
    })
}

/// glibc's size thresholds for memcpy and memset, from the dynamic loader's tunables list
/// (glibc 2.33 and later): which method the reference cases took at a given size.
fn glibc_thresholds() -> Option<Vec<(String, u64)>> {
    let loader = [
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/ld-linux-aarch64.so.1",
        "/lib/ld-linux-x86-64.so.2",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())?;
    let out = std::process::Command::new(loader)
        .arg("--list-tunables")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let found: Vec<(String, u64)> = parse_tunables(&text);
    (!found.is_empty()).then_some(found)
}

/// The memcpy/memset thresholds of `ld.so --list-tunables` output, in bytes.
fn parse_tunables(text: &str) -> Vec<(String, u64)> {
    let wanted = [
        "x86_non_temporal_threshold",
        "x86_rep_movsb_threshold",
        "x86_rep_stosb_threshold",
    ];
    let mut found = Vec::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(short) = wanted.iter().find(|w| name.trim().ends_with(*w)) else {
            continue;
        };
        let value = rest.split_whitespace().next().unwrap_or("");
        let parsed = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        };
        if let Some(v) = parsed {
            found.push((short.to_string(), v));
        }
    }
    found
}

/// Say how glibc chose to copy and set at the sizes the reference cases used.
fn note_libc(plan: &BandwidthPlan, notes: &mut Vec<String>) {
    if !plan.ops.iter().any(|o| o.is_libc()) {
        return;
    }
    let mut note = "memcpy, memset: the C library's own, one call per pass over each thread's block (memcpy copies one half onto the other, counted as read + write); they are the reference that costlab's copy and write kernels are compared with".to_string();
    if let Some(t) = glibc_thresholds() {
        let get = |k: &str| t.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        if let Some(nt) = get("x86_non_temporal_threshold") {
            let calls: Vec<String> = plan
                .blocks
                .iter()
                .map(|&b| {
                    let half = b / 2;
                    format!(
                        "memcpy of {} takes {}",
                        format_size(half),
                        if half > nt {
                            "the streaming-store path"
                        } else {
                            "the regular-store path"
                        }
                    )
                })
                .collect();
            note += &format!(
                "; glibc here: streaming stores above {} (glibc.cpu.x86_non_temporal_threshold){}, so {}",
                format_size(nt),
                get("x86_rep_movsb_threshold")
                    .map_or(String::new(), |r| format!(", rep movsb from {}", format_size(r))),
                calls.join(", ")
            );
        }
    }
    notes.push(note);
}

/// `costlab mem bandwidth`.
pub fn bandwidth(plan: &BandwidthPlan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    let avail = mem_available();
    // Every block must fit before anything is reserved or measured.
    if let Some(avail) = avail {
        for &kind in plan.pages.iter().filter(|k| k.pool_page().is_none()) {
            for &threads in &plan.threads {
                let nregions = if plan.shared { 1 } else { threads as u64 };
                for &asked in &plan.blocks {
                    block_that_fits(asked, nregions, kind, avail)?;
                }
            }
        }
    }
    let held = reserve_pools(&plan.pool_needs(), plan.reserve)?;
    let mut out = Outcome::default();
    let isa = Isa::detect();
    out.notes.push(format!(
        "kernels: {} loads and stores (write-nt, copy-nt: streaming stores); bytes counted as moved (copy, copy-nt, memcpy = read + write, as STREAM); all threads leave one barrier and run until one stop flag, and each sample counts only the bytes moved while every thread was running; GB/s = 10^9 bytes/s",
        isa.name()
    ));
    if plan.patterns.contains(&Pattern::Rand) && plan.ops.iter().any(|o| o.is_libc()) {
        out.notes
            .push("memcpy, memset: sequential only; no rand rows for them".to_string());
    }
    note_libc(plan, &mut out.notes);
    let bar = progress::bar(plan.cases() as u64, "mem bw");
    let mut edges: Vec<f64> = Vec::new();
    for &kind in &plan.pages {
        for &threads in &plan.threads {
            let cpu_list = cpus::cpus_for_threads(threads, &allowed);
            let nregions = if plan.shared { 1 } else { threads as u64 };
            for &asked in &plan.blocks {
                let block = match (kind.pool_page(), avail) {
                    (None, Some(avail)) => block_that_fits(asked, nregions, kind, avail)?,
                    _ => asked,
                };
                if block != asked {
                    out.notes.push(format!(
                        "{threads} threads: {nregions} x --block {} would need {} but {} is available; each block is shrunk to {} for this thread count so nothing swaps (case key block_asked keeps {})",
                        format_size(asked),
                        human_size(nregions * asked),
                        human_size(avail.unwrap_or(0)),
                        format_size(block),
                        format_size(asked)
                    ));
                }
                progress::note(&format!(
                    "mem bandwidth: mapping {nregions} x {} of {kind} pages",
                    format_size(block)
                ));
                let regions = make_regions(&cpu_list, block, kind, plan.shared)?;
                note_thp(&regions[0], &mut out.notes);
                for &op in &plan.ops {
                    for &pattern in &plan.patterns {
                        if op.is_libc() && pattern != Pattern::Seq {
                            continue;
                        }
                        bar.set_message(format!(
                            "{op} {pattern} {} x{threads} {kind}",
                            format_size(block)
                        ));
                        let mark = out.results.len();
                        let watch = Watch::start(&cpu_list);
                        let (m, readings) = counters::around(ctx.counters, || {
                            measure_bandwidth(&cpu_list, &regions, op, pattern, ctx)
                        })?;
                        let conditions = watch
                            .finish()
                            .pages(kind.name(), regions[0].huge_fraction());
                        edges.push(m.edge);
                        let (isa_key, store) = kernel_keys(op, isa);
                        let mut case = case! {
                            "op" => op.name(), "pattern" => pattern.name(), "pages" => kind.name(),
                            "block" => block, "threads" => threads,
                            "isa" => isa_key, "store" => store
                        };
                        if block != asked {
                            case.insert("block_asked".into(), Value::from(asked));
                        }
                        if plan.shared {
                            case.insert("shared".into(), Value::Bool(true));
                        }
                        out.push(LAB, case, "bandwidth", "GB/s", m.gbs);
                        if let Some(r) = readings {
                            r.attach_from(&mut out.results, mark);
                        }
                        out.attach_conditions(mark, conditions);
                        bar.inc(1);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    if let Some(most) = edges.iter().copied().reduce(f64::max) {
        out.notes.push(format!(
            "ragged edges left out: at most {:.1}% of a sample's span (first start to last end) had some thread not yet started or already stopped",
            most * 100.0
        ));
    }
    let readings = bandwidth_readings(&out.results);
    out.notes.extend(readings);
    release(held, &mut out);
    Ok(out)
}

/// The block a row asked for (its block, unless it was shrunk to fit memory).
fn asked_block_of(r: &ResultRow) -> u64 {
    r.case
        .get("block_asked")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| block_of(r))
}

/// "1 thread", "16 threads".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn threads_of(r: &ResultRow) -> usize {
    r.key("threads").parse().unwrap_or(0)
}

/// The bandwidth row of `op` beside `r` (same pattern, block asked, threads, pages, sharing).
fn sibling<'a>(rows: &'a [ResultRow], r: &ResultRow, op: &str) -> Option<&'a ResultRow> {
    rows.iter().find(|x| {
        x.metric == "bandwidth"
            && x.key("op") == op
            && x.key("pattern") == r.key("pattern")
            && asked_block_of(x) == asked_block_of(r)
            && x.key("threads") == r.key("threads")
            && x.key("pages") == r.key("pages")
            && x.key("shared") == r.key("shared")
    })
}

/// "0.97x memcpy": a kernel's median against its C library reference, where both were measured.
fn versus_libc(rows: &[ResultRow], r: &ResultRow) -> Option<String> {
    let op = Op::parse(&r.key("op")).ok()?;
    let reference = op.reference()?;
    let x = sibling(rows, r, reference.name())?;
    (x.summary.median > 0.0).then(|| {
        format!(
            "{:.2}x {}",
            r.summary.median / x.summary.median,
            reference.name()
        )
    })
}

/// The readings a bandwidth run adds to its notes: kernels against the C library, what the
/// write-allocate read costs, read against copy-nt at the most threads, and where bandwidth
/// stops growing with threads.
fn bandwidth_readings(rows: &[ResultRow]) -> Vec<String> {
    let bw: Vec<&ResultRow> = rows.iter().filter(|r| r.metric == "bandwidth").collect();
    let mut notes = Vec::new();
    let tag = |r: &ResultRow| {
        format!(
            "{} {}, {}, {}",
            r.key("pattern"),
            format_size(asked_block_of(r)),
            plural(threads_of(r), "thread"),
            r.key("pages")
        )
    };
    let refs: Vec<String> = bw
        .iter()
        .filter(|r| r.key("pattern") == "seq")
        .filter_map(|r| versus_libc(rows, r).map(|v| format!("{} = {v} ({})", r.key("op"), tag(r))))
        .collect();
    if !refs.is_empty() {
        notes.push(format!(
            "against the C library (1.00x = as fast as libc): {}",
            refs.join("; ")
        ));
    }
    for r in bw.iter().filter(|r| r.key("op") == "copy") {
        let Some(nt) = sibling(rows, r, "copy-nt") else {
            continue;
        };
        let (c, n) = (r.summary.median, nt.summary.median);
        if n <= 0.0 {
            continue;
        }
        notes.push(if c < n {
            format!(
                "write-allocate ({}): copy with regular stores reads each destination line before it overwrites it, so it moves 3 bytes over the memory bus for every 2 counted; here it gives {c:.1} GB/s against copy-nt's {n:.1}: the write-allocate read costs {:.0}% of the copy rate",
                tag(r),
                (1.0 - c / n) * 100.0
            )
        } else {
            format!(
                "write-allocate ({}): copy with regular stores ({c:.1} GB/s) is not slower than copy-nt ({n:.1}): at this size the destination stays in cache, where streaming stores only add the trip to memory",
                tag(r)
            )
        });
    }
    let most = bw.iter().map(|r| threads_of(r)).max().unwrap_or(0);
    if most > 1 {
        for r in bw
            .iter()
            .filter(|r| r.key("op") == "read" && threads_of(r) == most)
        {
            if let Some(nt) = sibling(rows, r, "copy-nt") {
                let (a, b) = (r.summary.median, nt.summary.median);
                notes.push(format!(
                    "read vs copy-nt at {most} threads ({}): {a:.1} vs {b:.1} GB/s ({:.2}x){}",
                    tag(r),
                    a / b.max(1e-9),
                    if a >= b {
                        ""
                    } else {
                        "; a read-only stream moving the same bytes should not be slower: the read figure is suspect (check the conditions)"
                    }
                ));
            }
        }
    }
    notes.extend(scaling_readings(&bw));
    notes
}

/// One op's bandwidth by thread count, for the scaling table and its reading.
type Curve = Vec<(usize, f64)>;

/// The thread-scaling curves: per (op, pattern, block asked, pages), the median by threads.
fn scaling_curves(bw: &[&ResultRow]) -> Vec<(String, Curve)> {
    let mut curves: Vec<(String, Curve)> = Vec::new();
    for r in bw {
        if r.key("shared") == "true" {
            continue;
        }
        let name = format!(
            "{} {} {} {}",
            r.key("op"),
            r.key("pattern"),
            format_size(asked_block_of(r)),
            r.key("pages")
        );
        let point = (threads_of(r), r.summary.median);
        match curves.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => c.push(point),
            None => curves.push((name, vec![point])),
        }
    }
    for (_, c) in &mut curves {
        c.sort_by_key(|p| p.0);
        c.dedup_by_key(|p| p.0);
    }
    curves.retain(|(_, c)| c.len() > 1);
    curves
}

/// Where a curve stops growing: the first step between thread counts that gains less than a
/// quarter of what proportional scaling would (e.g. 8 -> 16 threads: +6%, proportional +100%).
fn stops_growing(curve: &[(usize, f64)]) -> Option<(usize, usize, f64, f64)> {
    curve.windows(2).find_map(|w| {
        let ((t1, b1), (t2, b2)) = (w[0], w[1]);
        if b1 <= 0.0 || t1 == 0 {
            return None;
        }
        let gain = b2 / b1 - 1.0;
        let ideal = t2 as f64 / t1 as f64 - 1.0;
        (gain < ideal / 4.0).then_some((t1, t2, gain * 100.0, ideal * 100.0))
    })
}

fn scaling_readings(bw: &[&ResultRow]) -> Vec<String> {
    scaling_curves(bw)
        .into_iter()
        .map(|(name, c)| match stops_growing(&c) {
            Some((t1, t2, gain, ideal)) => format!(
                "scaling {name}: bandwidth stops growing at {} ({t1} -> {t2} threads: {gain:+.0}%, proportional would be {ideal:+.0}%): from there a shared resource is the limit, not the thread count (the memory channels for a block beyond the caches; SMT siblings, a shared cache or a busy host for one inside them)",
                plural(t1, "thread")
            ),
            None => {
                let (t0, b0) = c[0];
                let (tn, bn) = c[c.len() - 1];
                format!(
                    "scaling {name}: still growing at {tn} threads ({t0} -> {tn}: {:.2}x); more threads may give more",
                    bn / b0.max(1e-9)
                )
            }
        })
        .collect()
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
) -> Result<(Vec<f64>, Option<f64>)> {
    let mut region = Region::new(size, kind)?;
    note_thp(&region, notes);
    let mut p = chase::lay_out(&mut region, next);
    let samples = sample_fn(&ctx.spec, |n| {
        // SAFETY: the chain was laid out in `region`, which lives until after sampling.
        p = unsafe { chase::chase(p, n) };
        black_box(p);
    })?;
    // After the samples: what the kernel backed the region with while they ran.
    let huge = region.huge_fraction();
    drop(region);
    Ok((samples.iter().map(|s| s.ns_per_iter()).collect(), huge))
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
                    let what = format!("mem chase {} {kind}", format_size(size));
                    let case_out = judged_case(&what, &[cpu], || {
                        let ((ns, huge), readings) = counters::around(ctx.counters, || {
                            measure_chase(&next, size, kind, ctx, &mut notes)
                        })?;
                        let mut o = Outcome::default();
                        o.push(
                            LAB,
                            case! {"op" => "chase", "pattern" => "rand", "pages" => kind.name(), "block" => size, "threads" => 1},
                            "latency",
                            "ns",
                            ns,
                        );
                        if let Some(r) = readings {
                            r.attach_from(&mut o.results, 0);
                        }
                        // Whether the region got the page size asked for matters once it
                        // spans more than a few huge pages.
                        if size >= 4 << 20 {
                            for r in o.results.iter_mut() {
                                r.conditions =
                                    Some(Conditions::default().pages(kind.name(), huge));
                            }
                        }
                        Ok(o)
                    })?;
                    for n in notes.into_iter().chain(case_out.notes) {
                        if !out.notes.contains(&n) {
                            out.notes.push(n);
                        }
                    }
                    out.results.extend(case_out.results);
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
    let all: Vec<ResultRow> = rows.iter().map(|r| (*r).clone()).collect();
    let mut headers: Vec<String> = vec![
        "threads".into(),
        "block".into(),
        "pattern".into(),
        "op".into(),
        "kernel".into(),
    ];
    headers.extend(kinds.iter().map(|k| format!("{k} GB/s")));
    let ratios: Vec<&String> = if kinds.iter().any(|k| k == "4k") {
        kinds.iter().filter(|k| *k != "4k").collect()
    } else {
        Vec::new()
    };
    headers.extend(ratios.iter().map(|k| format!("{k}/4k")));
    headers.push(format!(
        "vs libc ({})",
        kinds.first().map_or("", String::as_str)
    ));
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
        let kernel = kinds
            .iter()
            .find_map(|k| find(k))
            .map_or("—".to_string(), |r| kernel_label(r));
        let mut cells = vec![
            threads.clone(),
            format_size(*block),
            pattern.clone(),
            op.clone(),
            kernel,
        ];
        for k in &kinds {
            cells.push(find(k).map_or("—".into(), |r| {
                format!(
                    "{}{}",
                    fmt_summary(&r.summary, 2),
                    crate::report::verdict::mark(r)
                )
            }));
        }
        for k in &ratios {
            cells.push(match (find("4k"), find(k)) {
                (Some(a), Some(b)) if a.summary.median > 0.0 => {
                    format!("{:.2}x", b.summary.median / a.summary.median)
                }
                _ => "—".into(),
            });
        }
        cells.push(
            kinds
                .first()
                .and_then(|k| find(k))
                .and_then(|r| versus_libc(&all, r))
                .unwrap_or_else(|| "—".into()),
        );
        table_rows.push(cells);
    }
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut text = format!(
        "memory bandwidth (median ±MAD over samples; GB/s = 10^9 bytes/s)\n{}\n",
        table::render(&h, &table_rows)
    );
    text += &render_scaling(rows);
    text
}

/// "AVX2 streaming": the ISA and store kind behind a figure.
fn kernel_label(r: &ResultRow) -> String {
    match (r.key("isa").as_str(), r.key("store").as_str()) {
        ("", _) => "—".into(),
        ("libc", _) => "libc".into(),
        (isa, "none") => isa.to_string(),
        (isa, store) => format!("{isa} {store}"),
    }
}

/// Bandwidth by thread count, one row per op: where it stops growing shows.
fn render_scaling(rows: &[&ResultRow]) -> String {
    let curves = scaling_curves(rows);
    if curves.is_empty() {
        return String::new();
    }
    let mad_pct = |name: &str, t: usize| {
        rows.iter()
            .find(|r| {
                threads_of(r) == t
                    && r.key("shared") != "true"
                    && format!(
                        "{} {} {} {}",
                        r.key("op"),
                        r.key("pattern"),
                        format_size(asked_block_of(r)),
                        r.key("pages")
                    ) == name
            })
            .map(|r| r.summary.mad / r.summary.median.max(1e-9) * 100.0)
    };
    let mut table_rows = Vec::new();
    for (name, c) in &curves {
        let (t0, b0) = c[0];
        for &(t, b) in c {
            table_rows.push(vec![
                name.clone(),
                t.to_string(),
                format!("{b:.2}"),
                mad_pct(name, t).map_or("—".into(), |m| format!("{m:.1}%")),
                format!("{:.2}x", b / b0.max(1e-9)),
                format!("{:.2}x", t as f64 / t0 as f64),
                format!("{:.2}", b / t as f64),
            ]);
        }
    }
    let text = format!(
        "\nscaling with threads (median GB/s; MAD as % of median)\n{}\n",
        table::render(
            &[
                "op pattern block pages",
                "threads",
                "GB/s",
                "MAD",
                "x first",
                "x threads",
                "GB/s per thread",
            ],
            &table_rows,
        )
    );
    // The readings under the table are in the notes (scaling_readings).
    text
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
                        .map_or("—".into(), |r| {
                            format!(
                                "{}{}",
                                fmt_summary(&r.summary, 1),
                                crate::report::verdict::mark(r)
                            )
                        }),
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
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(&self, doc: &crate::report::Doc) -> Vec<crate::report::charts::Chart> {
        let mut v = crate::report::charts::bandwidth::charts(doc);
        v.push(crate::report::charts::latency::chart(doc));
        v.push(crate::report::charts::loaded::chart(doc));
        v
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
            (
                vec![Op::Read, Op::Write, Op::Copy, Op::CopyNt, Op::Memcpy],
                Pattern::Seq,
            ),
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
                ..Default::default()
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
            ..Default::default()
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
                ..Default::default()
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
            ..Default::default()
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
                    ..Default::default()
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

    #[test]
    fn reference_sweeps_count_the_bytes_they_move() {
        let isa = Isa::detect();
        let block = 64u64 << 10;
        let mut r = Region::new(block, PageKind::Small).unwrap();
        for (i, b) in r.as_mut_slice()[..32 << 10].iter_mut().enumerate() {
            *b = (i % 249) as u8;
        }
        // memcpy: one call copies the whole first half onto the second; read + write counted.
        let mut w = Sweep::new(&r, Op::Memcpy, Pattern::Seq, isa, 1);
        assert_eq!(w.span, 32 << 10);
        assert_eq!(w.chunk, 32 << 10);
        assert_eq!(w.bytes_per_iter(), 64 << 10);
        assert_eq!(w.iters_per_unit(), 16);
        w.run(1);
        let s = r.as_slice();
        assert_eq!(&s[..32 << 10], &s[32 << 10..]);
        // memset: one call over the whole block, counted once.
        let mut w = Sweep::new(&r, Op::Memset, Pattern::Seq, isa, 1);
        assert_eq!(
            (w.span, w.chunk, w.bytes_per_iter()),
            (64 << 10, 64 << 10, 64 << 10)
        );
        w.run(3);
        assert!(r.as_slice().iter().all(|&b| b == 0x3c));
        // The library calls stay sequential even if asked for rand.
        let w = Sweep::new(&r, Op::Memcpy, Pattern::Rand, isa, 1);
        assert_eq!(w.bytes_per_iter(), 64 << 10);
        // costlab's copies: 256 KiB-or-smaller chunks of the half, read + write counted.
        let mut big = Region::new(1 << 20, PageKind::Small).unwrap();
        for (i, b) in big.as_mut_slice()[..512 << 10].iter_mut().enumerate() {
            *b = (i % 241) as u8;
        }
        let mut w = Sweep::new(&big, Op::CopyNt, Pattern::Seq, isa, 1);
        assert_eq!(
            (w.span, w.chunk, w.bytes_per_iter()),
            (512 << 10, 256 << 10, 512 << 10)
        );
        assert_eq!(w.iters_per_unit(), 2);
        w.run(2);
        let s = big.as_slice();
        assert_eq!(&s[..512 << 10], &s[512 << 10..]);
        let w = Sweep::new(&big, Op::Read, Pattern::Rand, isa, 1);
        assert_eq!(w.bytes_per_iter(), (RAND_STEP * 64) as u64);
        assert_eq!(kernel_keys(Op::Memcpy, isa), ("libc", "libc"));
        assert_eq!(kernel_keys(Op::Read, Isa::Avx2), ("AVX2", "none"));
        assert_eq!(kernel_keys(Op::CopyNt, Isa::Avx2), ("AVX2", "streaming"));
        assert_eq!(kernel_keys(Op::Copy, Isa::Avx512), ("AVX-512", "regular"));
    }

    #[test]
    fn blocks_shrink_to_fit_memory() {
        let g = 1u64 << 30;
        // 16 x 1G in 12 GiB available: 4/5 of it is 9.6 GiB, so 512M each.
        assert_eq!(fit_block(g, 16, 4096, 12 * g), Some(512 << 20));
        assert_eq!(fit_block(g, 2, 4096, 12 * g), Some(g));
        // Shrunk blocks stay multiples of the page granule.
        let b = fit_block(6 << 20, 100, 4096, 100 << 20).unwrap();
        assert_eq!(b % 4096, 0);
        assert!(100 * b <= (100 << 20) / 5 * 4);
        assert_eq!(fit_block(g, 1 << 20, 4096, 1 << 20), None);
        // One block larger than the machine is the user's to fix, not shrunk silently.
        assert_eq!(fit_block(4096 * g, 1, 4096, 22 * g), None);
    }

    #[test]
    fn glibc_tunables_are_read() {
        let text = "glibc.cpu.x86_shared_cache_size: 0x10000000 (min: 0x0, max: 0xffffffffffffffff)\nglibc.cpu.x86_rep_movsb_threshold: 0x840 (min: 0x100, max: 0xffffffffffffffff)\nglibc.cpu.x86_non_temporal_threshold: 0xc000000 (min: 0x4040, max: 0xfffffffffffffff)\nglibc.cpu.x86_ibt:\nglibc.malloc.mxfast: 0x0 (min: 0x0, max: 0xffffffffffffffff)\n";
        assert_eq!(
            parse_tunables(text),
            vec![
                ("x86_rep_movsb_threshold".to_string(), 0x840),
                ("x86_non_temporal_threshold".to_string(), 192 << 20)
            ]
        );
    }

    fn bw(op: &str, threads: usize, gbs: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {"op" => op, "pattern" => "seq", "pages" => "4k", "block" => 1u64 << 30, "threads" => threads},
            "bandwidth",
            "GB/s",
            vec![gbs; 5],
        )
        .unwrap()
    }

    #[test]
    fn readings_compare_with_libc_write_allocate_and_scaling() {
        let rows = vec![
            bw("read", 1, 20.0),
            bw("copy", 1, 15.0),
            bw("copy-nt", 1, 19.4),
            bw("memcpy", 1, 20.0),
            bw("read", 8, 100.0),
            bw("copy-nt", 8, 90.0),
            bw("memcpy", 8, 92.0),
            bw("read", 16, 104.0),
            bw("copy-nt", 16, 95.0),
            bw("memcpy", 16, 96.0),
        ];
        assert_eq!(
            versus_libc(&rows, &rows[2]).as_deref(),
            Some("0.97x memcpy")
        );
        assert_eq!(versus_libc(&rows, &rows[0]), None);
        let notes = bandwidth_readings(&rows);
        let all = notes.join("\n");
        assert!(
            all.contains("copy-nt = 0.97x memcpy (seq 1G, 1 thread, 4k)"),
            "{all}"
        );
        assert!(all.contains("write-allocate read costs 23%"), "{all}");
        assert!(all.contains("read vs copy-nt at 16 threads"), "{all}");
        assert!(!all.contains("suspect"), "{all}");
        assert!(
            all.contains("scaling read seq 1G 4k: bandwidth stops growing at 8 threads (8 -> 16 threads: +4%"),
            "{all}"
        );
        assert_eq!(stops_growing(&[(1, 10.0), (2, 19.0), (4, 30.0)]), None);
        let text = render(&Outcome {
            results: rows,
            ..Default::default()
        });
        assert!(text.contains("scaling with threads"), "{text}");
        assert!(text.contains("0.97x memcpy"), "{text}");
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
