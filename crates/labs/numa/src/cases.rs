//! One measured case: memory placed on a node (or interleaved, or first-touched), read by
//! threads pinned to CPUs, and whether its pages landed where they were meant to.

use anyhow::Result;

use crate::kernels;
use crate::policy::{self, majority, place, place_range, Placement, Region};
use costlab_core::measure::cpus::Pinned;
use costlab_core::measure::region::PageKind;
use costlab_core::measure::{team, SampleSpec};

/// One case's samples, where its memory landed, and notes where it is not where it was meant.
pub struct CaseResult {
    pub samples: Vec<f64>,
    pub landed: Option<usize>,
    pub misplaced: Vec<String>,
}

fn check_landed(region: &Region, want: &Placement) -> (Option<usize>, Vec<String>) {
    let seen = match policy::nodes(region, 64) {
        Ok(s) => s,
        Err(e) => return (None, vec![format!("could not check page placement: {e}")]),
    };
    let landed = majority(&seen);
    let mut notes = Vec::new();
    if let Placement::Bind(j) = want {
        if seen.keys().any(|n| n != j) {
            notes.push(format!(
                "memory bound to node {j} was found on nodes {:?} (pages sampled per node)",
                seen
            ));
        }
    }
    (landed, notes)
}

/// ns per dependent load: a thread on `cpu` chasing through `bytes` bound to `mem_node`.
pub fn latency_case(
    cpu: usize,
    mem_node: usize,
    bytes: u64,
    spec: &SampleSpec,
) -> Result<CaseResult> {
    let mut region = Region::untouched(bytes, PageKind::Thp)?;
    place(&region, &Placement::Bind(mem_node))?;
    kernels::build_chase(region.as_mut_slice_u64(), 0x9E37_79B9_7F4A_7C15 ^ bytes);
    let (landed, misplaced) = check_landed(&region, &Placement::Bind(mem_node));
    let words = region.as_slice_u64();
    let samples = team(
        &[cpu],
        spec,
        |_| Ok(0usize),
        |at, n| {
            *at = kernels::chase(words, *at, n);
        },
    )?;
    Ok(CaseResult {
        samples: samples.iter().map(|s| s.ns_per_iter()).collect(),
        landed,
        misplaced,
    })
}

/// GB/s of `cpus.len()` threads each reading its own `bytes_per_thread` slice of one region.
/// Slice k is placed by `placement(k)`; with `toucher`, one thread pinned there writes the
/// whole region first (first-touch), otherwise the placement decides and who writes does not
/// matter.
pub fn bandwidth_case(
    cpus: &[usize],
    placement: impl Fn(usize) -> Placement,
    toucher: Option<usize>,
    bytes_per_thread: u64,
    spec: &SampleSpec,
) -> Result<CaseResult> {
    let slice = bytes_per_thread as usize;
    let mut region = Region::system_default((slice * cpus.len()) as u64)?;
    let first = placement(0);
    if matches!(first, Placement::Interleave(_)) {
        place(&region, &first)?;
    } else {
        for k in 0..cpus.len() {
            place_range(&region, k * slice, slice, &placement(k))?;
        }
    }
    let _restore = match toucher {
        Some(cpu) => Some(Pinned::to(cpu)?),
        None => None,
    };
    for (k, chunk) in region.as_mut_slice_u64().chunks_mut(slice / 8).enumerate() {
        chunk.fill(k as u64 + 1);
    }
    let (landed, mut misplaced) = check_landed(&region, &first);
    if (1..cpus.len()).any(|k| placement(k) != first) {
        misplaced.clear(); // slices bound to different nodes: the whole-region check does not apply
    }
    let words = region.as_slice_u64();
    let per = slice / 8;
    let samples = team(
        cpus,
        spec,
        |k| Ok(&words[k * per..(k + 1) * per]),
        |mine: &mut &[u64], n| {
            for _ in 0..n {
                kernels::read_all(mine);
            }
        },
    )?;
    let total = (slice * cpus.len()) as f64;
    Ok(CaseResult {
        samples: samples
            .iter()
            .map(|s| costlab_core::measure::units::gb_per_s(total * s.iters as f64, s.ns))
            .collect(),
        landed,
        misplaced,
    })
}
