//! Bandwidth: one sweep per worker over its region, all workers between one barrier and one
//! stop flag; the C library references; the readings (against libc, write-allocate, scaling).

use std::hint::black_box;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use super::args::MemGridArgs;
use crate::case;
use crate::labs::Ctx;
use crate::measure::conditions::Watch;
use crate::measure::sampler::SAMPLES_PER_SETUP;
use crate::measure::sizes::{format_size, human_size};
use crate::measure::{counters, cpus, team_window};
use crate::report::{progress, Model, ModelPoint, Outcome, ResultRow};

use super::kernels::{self, Isa, Lanes, RAND_STEP};
use super::plan::{BandwidthPlan, BandwidthText, Op, Pattern};
use super::{block_of, mem_available, plan, pool_has, release, reserve_pools, LAB};
use crate::measure::region::{PageKind, Region};

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
#[derive(Default)]
struct Measured {
    gbs: Vec<f64>,
    edges: Vec<f64>,
}

impl Measured {
    fn edge(&self) -> f64 {
        self.edges.iter().sum::<f64>() / self.edges.len().max(1) as f64
    }
}

/// GB/s per sample of each of `cases` (op, pattern) over one block size and thread count, and
/// the worst huge-page fraction any mapping got (the lowest for a huge kind, the highest for
/// 4k). All threads leave one barrier and run until one stop flag; only bytes moved while all
/// of them ran are counted.
///
/// The regions are mapped afresh (`make`) every [`SAMPLES_PER_SETUP`] samples: in a VM a
/// mapping's bandwidth depends on how the host backs it, which one mapping's samples cannot
/// show and a rerun maps anew. Each mapping serves every case in turn, so the cases' samples
/// are interleaved in time (their ratios carry no drift between them) and a figure of 7
/// samples costs four mappings, not four per op.
fn measure_cases(
    cpu_list: &[usize],
    make: &dyn Fn() -> Result<Vec<Region>>,
    cases: &[(Op, Pattern)],
    ctx: &Ctx,
    notes: &mut Vec<String>,
) -> Result<(Vec<Measured>, Option<f64>)> {
    let isa = Isa::detect();
    let total = ctx.spec.samples.max(1);
    let mut out: Vec<Measured> = cases.iter().map(|_| Measured::default()).collect();
    let mut huge: Option<f64> = None;
    let mut taken = 0;
    while taken < total {
        let regions = make()?;
        if taken == 0 {
            // The first mapping speaks for the notes; the conditions keep the worst of all.
            note_thp(&regions[0], notes);
        }
        let take = SAMPLES_PER_SETUP.min(total - taken);
        // Samples of at least 50 ms: a DRAM stream of 10 ms sees page-walk and refresh
        // hiccups as a spread of several percent, and the window trims a few microseconds at
        // each edge.
        let spec = crate::measure::SampleSpec {
            min_sample: ctx
                .spec
                .min_sample
                .max(std::time::Duration::from_millis(50)),
            samples: take,
            ..ctx.spec.clone()
        };
        for (&(op, pattern), m) in cases.iter().zip(out.iter_mut()) {
            let probe = Sweep::new(&regions[0], op, pattern, isa, 1);
            let unit_bytes = (probe.bytes_per_iter() * probe.iters_per_unit()) as f64;
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
            m.gbs.extend(samples.iter().map(|s| {
                crate::measure::units::gb_per_s(s.total_units() * unit_bytes, s.window_ns)
            }));
            m.edges.extend(
                samples
                    .iter()
                    .map(|s| 1.0 - s.window_ns / s.span_ns.max(1.0)),
            );
        }
        for r in &regions {
            if let Some(f) = r.huge_fraction() {
                huge = Some(match huge {
                    None => f,
                    Some(old) if r.kind().is_huge() => old.min(f),
                    Some(old) => old.max(f),
                });
            }
        }
        taken += take;
    }
    Ok((out, huge))
}

/// Note when the kernel did not back a thp region with huge pages.
pub(super) fn note_thp(region: &Region, notes: &mut Vec<String>) {
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
                    "mem bandwidth: mapping {nregions} x {} of {kind} pages (afresh every {SAMPLES_PER_SETUP} samples)",
                    format_size(block)
                ));
                let make = || make_regions(&cpu_list, block, kind, plan.shared);
                let all: Vec<(Op, Pattern)> = plan
                    .ops
                    .iter()
                    .flat_map(|&op| plan.patterns.iter().map(move |&p| (op, p)))
                    .filter(|(op, p)| !op.is_libc() || *p == Pattern::Seq)
                    .collect();
                // The cases share each mapping (interleaved in time), unless counters are read.
                for cases in counters::side_by_side(ctx.counters, &all) {
                    let names: Vec<String> =
                        cases.iter().map(|(op, p)| format!("{op} {p}")).collect();
                    bar.set_message(format!(
                        "{} {} x{threads} {kind}",
                        names.join(", "),
                        format_size(block)
                    ));
                    let mark = out.results.len();
                    let watch = Watch::start(&cpu_list);
                    let ((measured, huge), readings) = counters::around(ctx.counters, || {
                        measure_cases(&cpu_list, &make, &cases, ctx, &mut out.notes)
                    })?;
                    // The cases' samples are interleaved, so they share one window's
                    // conditions: whatever disturbed one mapping's turn disturbed them all.
                    let conditions = watch.finish().pages(kind.name(), huge);
                    for (&(op, pattern), m) in cases.iter().zip(measured) {
                        edges.push(m.edge());
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
                        bar.inc(1);
                    }
                    if let Some(r) = readings {
                        r.attach_from(&mut out.results, mark);
                    }
                    out.attach_conditions(mark, conditions);
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
pub(super) fn asked_block_of(r: &ResultRow) -> u64 {
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

pub(super) fn threads_of(r: &ResultRow) -> usize {
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
pub(super) fn versus_libc(rows: &[ResultRow], r: &ResultRow) -> Option<String> {
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
                        String::new()
                    } else {
                        format!("; the memory bus carried {b:.1} GB/s for copy-nt, so the read stream is held back by its cores, not by the bus: a core's loads wait for every line, streaming stores wait for none (the Little's-law model, where the latency was measured, says how far)")
                    }
                ));
            }
        }
    }
    notes.extend(scaling_readings(&bw));
    notes
}

/// The smallest block that is about memory, not the caches: twice the last-level cache where
/// the machine says its size, else 64 MiB.
pub(super) fn beyond_caches(m: &crate::machine::Machine) -> u64 {
    (1..=4)
        .rev()
        .find_map(|l| m.cache_size(l))
        .map_or(64 << 20, |c| 2 * c)
}

/// The read row at the most threads (more than one) whose copy-nt beside it moved more: the
/// case where a read-only stream fell behind a copy, which `little_reading` explains.
/// Only blocks of at least `min_block` count (beyond the caches: see `beyond_caches`).
pub(super) fn read_below_copy_nt(
    rows: &[ResultRow],
    min_block: u64,
) -> Option<(&ResultRow, &ResultRow)> {
    let reads = rows.iter().filter(|r| {
        r.metric == "bandwidth"
            && r.key("op") == "read"
            && r.key("pattern") == "seq"
            && block_of(r) >= min_block
    });
    let most = reads.clone().map(threads_of).max().filter(|&n| n > 1)?;
    reads
        .filter(|r| threads_of(r) == most)
        .filter_map(|r| Some((r, sibling(rows, r, "copy-nt")?)))
        .find(|(r, nt)| r.summary.median < nt.summary.median)
}

/// Little's law for the read stream, where read at the most threads fell below copy-nt and
/// the loaded-latency points (idle, and the heaviest load) were measured in the same run. A
/// core's loads wait for each line, so its read rate is the lines it keeps in flight times
/// 64 bytes over the latency. One thread's read at the idle latency gives (at least) those
/// lines; with the other CPUs loading, the latency rises, and the model predicts each
/// thread's read at the most threads from that latency, beside what each thread read.
/// Streaming stores wait for no reply, so a copy adds its writes to the bus beside its reads.
pub(super) fn little_model(rows: &[ResultRow], min_block: u64) -> Option<Model> {
    let (rn, nt) = read_below_copy_nt(rows, min_block)?;
    let n = threads_of(rn);
    let r1 = rows.iter().find(|x| {
        x.metric == "bandwidth"
            && x.key("op") == "read"
            && x.key("pattern") == "seq"
            && threads_of(x) == 1
            && asked_block_of(x) == asked_block_of(rn)
            && x.key("pages") == rn.key("pages")
    })?;
    let (idle, heavy, heavy_bw) =
        super::loaded::idle_and_heaviest(rows, super::loaded::Traffic::Read.name())?;
    let (l0, lh, bh) = (
        idle.summary.median,
        heavy.summary.median,
        heavy_bw.summary.median,
    );
    let (g1, gn, gc) = (r1.summary.median, rn.summary.median, nt.summary.median);
    if l0 <= 0.0 || lh <= 0.0 || g1 <= 0.0 || gn <= 0.0 {
        return None;
    }
    // GB/s x ns = bytes in flight.
    let lines = g1 * l0 / 64.0;
    let point = ModelPoint {
        case: case! {
            "op" => "read", "pattern" => "seq", "block" => asked_block_of(rn),
            "pages" => rn.key("pages"), "threads" => n, "per" => "thread"
        },
        predicted: lines * 64.0 / lh,
        measured: gn / n as f64,
        unit: "GB/s".into(),
    };
    let others = heavy
        .case
        .get("load_threads")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let err = point.error();
    let mut params = serde_json::Map::new();
    params.insert("lines_in_flight".into(), Value::from(lines));
    params.insert("idle_latency_ns".into(), Value::from(l0));
    params.insert("loaded_latency_ns".into(), Value::from(lh));
    let verdict = vec![
        format!(
            "one thread read {g1:.1} GB/s at an idle latency of {l0:.0} ns: it kept at least {lines:.0} lines in flight; with {} reading {bh:.1} GB/s the latency was {lh:.0} ns ({:.2}x idle), so each of {n} threads should read {:.1} GB/s with as many lines in flight: it read {:.1} (prediction {:+.0}%): {}",
            plural(others, "other CPU"),
            lh / l0,
            point.predicted,
            point.measured,
            err * 100.0,
            if lh < l0 {
                format!(
                    "not read: the latency under load came out below idle ({lh:.0} vs {l0:.0} ns), so the host's drift between the points is larger than the load's effect; run again on a quiet machine"
                )
            } else if err.abs() <= 0.25 {
                "holds: the read stream is bounded by the lines each core keeps in flight and by the latency the load adds".to_string()
            } else {
                format!(
                    "disagrees: the latency point had {bh:.1} GB/s of load, the {n} threads read {gn:.1} GB/s together; for the law to hold at their load the latency would have to be {:.0} ns ({:.2}x idle)",
                    lines * 64.0 / point.measured,
                    lines * 64.0 / point.measured / l0
                )
            },
        ),
        format!(
            "the bus carried {gc:.1} GB/s for copy-nt, whose streaming stores wait for no reply: read ({gn:.1} GB/s at {n} threads) below copy-nt is the cores' limit, not the bus's; read reaches copy-nt where the bus fills first (many cores per memory channel)"
        ),
    ];
    let mut m = Model {
        lab: LAB.into(),
        name: "read per thread = lines in flight x 64 B / latency (Little's law)".into(),
        params,
        points: vec![point],
        verdict,
    };
    // Every term is a measured figure: one thread's and n threads' read, copy-nt, the idle and
    // the loaded latency and the load's bandwidth.
    crate::measure::quality::model_inherits(&mut m, &[r1, rn, nt, idle, heavy, heavy_bw]);
    Some(m)
}

/// One op's bandwidth by thread count, for the scaling table and its reading.
type Curve = Vec<(usize, f64)>;

/// The thread-scaling curves: per (op, pattern, block asked, pages), the median by threads.
pub(super) fn scaling_curves(bw: &[&ResultRow]) -> Vec<(String, Curve)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labs::mem::render::render;

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

    fn loaded_row(delay: Option<u64>, metric: &str, v: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {
                "op" => "loaded", "traffic" => "read",
                "load_threads" => if delay.is_some() { 1 } else { 0 },
                "delay" => delay.map_or(Value::Null, Value::from),
                "block" => 256u64 << 20, "pages" => "thp"
            },
            metric,
            if metric == "latency" { "ns" } else { "GB/s" },
            vec![v; 5],
        )
        .unwrap()
    }

    #[test]
    fn littles_law_explains_read_below_copy_nt() {
        let g = 1u64 << 30;
        let mut rows = vec![
            bw("read", 1, 14.8),
            bw("read", 2, 21.2),
            bw("copy-nt", 1, 17.0),
            bw("copy-nt", 2, 27.4),
        ];
        // Without the latency points there is nothing to predict from.
        assert!(read_below_copy_nt(&rows, 64 << 20).is_some());
        assert!(little_model(&rows, 64 << 20).is_none());
        rows.extend([
            loaded_row(None, "latency", 186.0),
            loaded_row(None, "bandwidth", 0.0),
            loaded_row(Some(0), "latency", 253.0),
            loaded_row(Some(0), "bandwidth", 10.8),
        ]);
        let m = little_model(&rows, 64 << 20).expect("a model");
        let p = &m.points[0];
        // 14.8 GB/s x 186 ns = 2752.8 bytes = 43.0 lines; 43.0 x 64 / 253 = 10.88 GB/s.
        assert!((m.params["lines_in_flight"].as_f64().unwrap() - 43.01).abs() < 0.01);
        assert!((p.predicted - 10.881).abs() < 0.01, "{}", p.predicted);
        assert!((p.measured - 10.6).abs() < 1e-9);
        assert_eq!(p.case["threads"], Value::from(2));
        let text = m.verdict.join("\n");
        assert!(text.contains("holds"), "{text}");
        assert!(
            text.contains("with 1 other CPU reading 10.8 GB/s"),
            "{text}"
        );
        assert!(text.contains("the cores' limit, not the bus's"), "{text}");
        // A block inside the caches is not about memory: no model.
        assert!(little_model(&rows, 2 * g).is_none());
        // Read at or above copy-nt needs no explaining.
        rows[1] = bw("read", 2, 30.0);
        assert!(read_below_copy_nt(&rows, 64 << 20).is_none());
        assert!(little_model(&rows, 64 << 20).is_none());
        // Latency under load below idle is noise, not a reading.
        let mut noisy = rows.clone();
        noisy[1] = bw("read", 2, 21.2);
        noisy[4] = loaded_row(None, "latency", 260.0);
        let m = little_model(&noisy, 64 << 20).unwrap();
        assert!(m.verdict[0].contains("not read"), "{:?}", m.verdict);
        // A prediction far off is said to disagree.
        rows[1] = bw("read", 2, 12.0);
        let m = little_model(&rows, 64 << 20).unwrap();
        assert!(m.verdict[0].contains("disagrees"), "{:?}", m.verdict);
        // 43.0 lines x 64 B / 6.0 GB/s per thread = 459 ns.
        assert!(
            m.verdict[0].contains("the latency would have to be 459 ns (2.47x idle)"),
            "{:?}",
            m.verdict
        );
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
}
