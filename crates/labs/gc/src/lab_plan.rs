//! The quick and full plans `costlab run` drives: the headroom sweep and the taxes, sized for
//! each.

use anyhow::Result;

use costlab_history::report::Outcome;

use crate::plan::{self, Mode};
use crate::{sweep, tax, tax_live, QUICK_LIVE, TAX_LIVE};

/// Quick: a 64 MiB heap at h = 0.5, 1, 2, 3 (GOGC), two processes each, and the two fast
/// taxes. Full: the default sweep over 640 MiB in both modes, two processes per point,
/// and all three taxes.
pub fn run_plan(full: bool) -> Result<Outcome> {
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
    // Quick: one short window per workload, the plain build only, at half perf's rate
    // (1.5 s on two CPUs at 10 kHz is 30,000 samples: a share's sampling error stays
    // near a tenth of a point, and perf script reads them back in half the time). The
    // -B cross-check needs rounds of three processes per workload: it runs in the full
    // plan and in `costlab gc tax`.
    o.extend(tax::measure(&tax::TaxConfig {
        methods: vec![tax::Method::Attribution, tax::Method::Ab, tax::Method::Aa],
        kinds: kinds.to_vec(),
        workloads: tax::WORKLOADS.to_vec(),
        reps: if full { 7 } else { 5 },
        procs: if full { 2 } else { 1 },
        seconds: if full { 10.0 } else { 1.5 },
        warmup: if full { tax::WARMUP_S } else { 0.5 },
        perf_hz: if full { tax::PERF_HZ } else { tax::PERF_HZ / 2 },
        cross_check: full,
        live: if full { QUICK_LIVE } else { live },
    })?);
    Ok(o)
}
