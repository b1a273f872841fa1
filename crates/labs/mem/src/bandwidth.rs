//! `costlab mem bandwidth` and `costlab mem`: the sweep over page kinds, thread counts and
//! blocks (each block shrunk to fit memory), the pools held for it, and the notes; the
//! samples come from sweep.rs, the C library's references from libc_ref.rs, the readings
//! from readings.rs.

use anyhow::Result;
use serde_json::Value;

use super::args::MemGridArgs;
use costlab_core::case;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::region::PageKind;
use costlab_core::measure::sampler::SAMPLES_PER_SETUP;
use costlab_core::measure::sizes::{format_size, human_size};
use costlab_core::measure::{counters, cpus};
use costlab_history::report::{progress, Outcome};
use costlab_lab::Ctx;

use super::kernels::Isa;
use super::libc_ref::note_libc;
use super::plan::{BandwidthPlan, BandwidthText, Op, Pattern};
use super::readings::bandwidth_readings;
pub(super) use super::readings::{
    asked_block_of, beyond_caches, little_model, read_below_copy_nt, scaling_curves, threads_of,
    versus_libc,
};
use super::shared;
pub(super) use super::sweep::note_thp;
use super::sweep::{kernel_keys, make_regions, measure_cases};
use super::{mem_available, plan, pool_has, release, reserve_pools, LAB};

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
        costlab_core::error::usage(format!(
            "{nregions} x --sizes {} needs {} of memory but only {} is available (a block is shrunk for many threads, never below one that fits alone); use smaller --sizes or fewer threads",
            format_size(asked),
            human_size(nregions.saturating_mul(asked)),
            human_size(avail)
        ))
    })
}

/// `costlab mem bandwidth`.
pub fn bandwidth(plan: &BandwidthPlan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    let avail = mem_available();
    // Every block must fit before anything is reserved or measured.
    if let Some(avail) = avail {
        check_blocks_fit(plan, avail)?;
    }
    let held = reserve_pools(&plan.pool_needs(), plan.reserve)?;
    let mut out = Outcome::default();
    let isa = Isa::detect();
    note_method(plan, isa, &mut out.notes);
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
                        "{threads} threads: {nregions} x --sizes {} would need {} but {} is available; each block is shrunk to {} for this thread count so nothing swaps (case key block_asked keeps {})",
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
                    .filter(|(op, p)| !op.is_libc() || (*p == Pattern::Seq && !plan.shared))
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
                        measure_cases(&cpu_list, &make, plan.shared, &cases, ctx, &mut out.notes)
                    })?;
                    // The cases' samples are interleaved, so they share one window's
                    // conditions: whatever disturbed one mapping's turn disturbed them all.
                    let conditions = watch.finish().pages(kind.name(), huge);
                    for (&(op, pattern), m) in cases.iter().zip(measured) {
                        edges.push(m.edge());
                        let (isa_key, store) = kernel_keys(op, isa, plan.shared);
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

/// Every block of the plan fits in `avail` bytes at every thread count, or the usage error
/// that says which does not.
fn check_blocks_fit(plan: &BandwidthPlan, avail: u64) -> Result<()> {
    for &kind in plan.pages.iter().filter(|k| k.pool_page().is_none()) {
        for &threads in &plan.threads {
            let nregions = if plan.shared { 1 } else { threads as u64 };
            for &asked in &plan.blocks {
                block_that_fits(asked, nregions, kind, avail)?;
            }
        }
    }
    Ok(())
}

/// How the bytes are moved and counted: the kernels, the libc calls' limits, and --shared's
/// atomic stores.
fn note_method(plan: &BandwidthPlan, isa: Isa, notes: &mut Vec<String>) {
    notes.push(format!(
        "kernels: {} loads and stores (write-nt, copy-nt: streaming stores); bytes counted as moved (copy, copy-nt, memcpy = read + write, as STREAM); all threads leave one barrier and run until one stop flag, and each sample counts only the bytes moved while every thread was running; GB/s = 10^9 bytes/s",
        isa.name()
    ));
    if plan.patterns.contains(&Pattern::Rand) && plan.ops.iter().any(|o| o.is_libc()) {
        notes.push("memcpy, memset: sequential only; no rand rows for them".to_string());
    }
    if plan.shared {
        notes.push(format!(
            "--shared: every thread sweeps one region, so write, write-nt, copy and copy-nt store with 8-byte relaxed atomic stores (isa {}, store {}): plain or SIMD stores from several threads to the same bytes are a data race, undefined in Rust; read keeps the {} kernel{}",
            shared::ISA_KEY,
            shared::STORE_KEY,
            isa.name(),
            if plan.ops.iter().any(|o| o.is_libc()) {
                "; memcpy and memset are not run (the C library's stores would race the same way)"
            } else {
                ""
            }
        ));
    }
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
}
