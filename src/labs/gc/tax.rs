//! The language-safety taxes, each the ratio of two builds or variants taken side by side:
//! bounds checks (plain build vs -gcflags=-B, processes alternated), the stack-check
//! prologue (a caller with and without //go:nosplit in one binary), and the write barrier
//! (pointer stores while a GC cycle marks vs while none runs, in one process).

use anyhow::Result;

use super::bench::{self, BarrierRun, BoundsRun, Build, PrologueRun};
use super::LAB;
use crate::error::usage;
use crate::measure::sizes::{human_size, parse_list};
use crate::measure::stats::{median, paired_ratios};
use crate::measure::Summary;
use crate::report::Outcome;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bounds,
    Prologue,
    WriteBarrier,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bounds => "bounds",
            Kind::Prologue => "prologue",
            Kind::WriteBarrier => "write-barrier",
        }
    }

    /// What the two sides of the ratio are.
    pub fn compares(self) -> &'static str {
        match self {
            Kind::Bounds => "plain build / -gcflags=-B build (slice-indexing kernel)",
            Kind::Prologue => "caller with stack check / //go:nosplit caller",
            Kind::WriteBarrier => "pointer store while marking / while no GC runs",
        }
    }
}

pub fn parse_kinds(text: &str) -> anyhow::Result<Vec<Kind>> {
    let mut out: Vec<Kind> = Vec::new();
    for k in parse_list(text, |item| match item {
        "bounds" => Ok(Kind::Bounds),
        "prologue" => Ok(Kind::Prologue),
        "write-barrier" => Ok(Kind::WriteBarrier),
        other => Err(usage(format!(
            "bad tax kind '{other}': use bounds, prologue or write-barrier"
        ))),
    })? {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// Samples each side of the bounds ratio takes inside one process.
const INNER_REPS: usize = 5;

/// Ratios as overhead percentages: (a / b - 1) x 100.
pub fn overhead(a: &[f64], b: &[f64]) -> Vec<f64> {
    paired_ratios(a, b)
        .into_iter()
        .map(|r| (r - 1.0) * 100.0)
        .collect()
}

/// Measure the taxes in `kinds`; `reps` pairs each; `live` is the write-barrier heap.
pub fn measure(kinds: &[Kind], reps: usize, live: u64) -> Result<Outcome> {
    // Find (or build) the program before anything is printed: a missing toolchain is then
    // the run's one line.
    bench::locate(Build::Plain)?;
    let mut o = Outcome::default();
    for &k in kinds {
        crate::measure::cancel::check()?;
        crate::report::progress::note(&format!("gc tax: {}", k.name()));
        match k {
            Kind::Bounds => bounds(&mut o, reps)?,
            Kind::Prologue => prologue(&mut o, reps)?,
            Kind::WriteBarrier => write_barrier(&mut o, reps, live)?,
        }
    }
    Ok(o)
}

fn push(o: &mut Outcome, k: Kind, samples: Vec<f64>) {
    o.push(
        LAB,
        crate::case! {"kind" => k.name()},
        "overhead",
        "%",
        samples,
    );
}

fn show(v: &[f64], prec: usize) -> String {
    Summary::of(v).map_or("—".to_string(), |s| s.show(prec))
}

fn bounds(o: &mut Outcome, reps: usize) -> Result<()> {
    let plain = bench::locate(Build::Plain)?;
    let unchecked = match bench::locate(Build::NoBounds) {
        Ok(b) => b,
        Err(e) => {
            o.notes.push(format!(
                "bounds: no -gcflags=-B build ({e}); set COSTLAB_GCBENCH's -nobounds sibling or install Go"
            ));
            return Ok(());
        }
    };
    let args = vec![
        "-reps".to_string(),
        INNER_REPS.to_string(),
        "bounds".to_string(),
    ];
    let (mut checked_ns, mut unchecked_ns) = (Vec::new(), Vec::new());
    for r in 0..reps {
        crate::measure::cancel::check()?;
        // Alternate which build goes first, so neither always runs on a warmer machine.
        let order = if r % 2 == 0 {
            [&plain, &unchecked]
        } else {
            [&unchecked, &plain]
        };
        for bin in order {
            let run: BoundsRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
            let is_plain = std::ptr::eq(bin, &plain);
            if run.bounds_checked != is_plain {
                anyhow::bail!(
                    "{} reports bounds_checked={}; rebuild it with `costlab gc build`",
                    bin.path.display(),
                    run.bounds_checked
                );
            }
            let ns = median(&run.ns_per_iter);
            if is_plain {
                checked_ns.push(ns);
            } else {
                unchecked_ns.push(ns);
            }
        }
    }
    o.notes.push(format!(
        "bounds: {} ns per iteration checked, {} with -B (thread CPU time; medians of {INNER_REPS} per process, {reps} process pairs)",
        show(&checked_ns, 3),
        show(&unchecked_ns, 3)
    ));
    push(o, Kind::Bounds, overhead(&checked_ns, &unchecked_ns));
    Ok(())
}

fn prologue(o: &mut Outcome, reps: usize) -> Result<()> {
    let bin = bench::locate(Build::Plain)?;
    let args = vec![
        "-reps".to_string(),
        reps.to_string(),
        "prologue".to_string(),
    ];
    let run: PrologueRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
    o.notes.push(format!(
        "prologue: {} ns per call with the stack check, {} with //go:nosplit (thread CPU time; each call makes two leaf calls; code alignment can move this by a few %)",
        show(&run.checked_ns, 3),
        show(&run.nosplit_ns, 3)
    ));
    push(
        o,
        Kind::Prologue,
        overhead(&run.checked_ns, &run.nosplit_ns),
    );
    Ok(())
}

fn write_barrier(o: &mut Outcome, reps: usize, live: u64) -> Result<()> {
    let bin = bench::locate(Build::Plain)?;
    let args = vec![
        "-live".to_string(),
        live.to_string(),
        "-reps".to_string(),
        reps.to_string(),
        "write-barrier".to_string(),
    ];
    let run: BarrierRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
    if run.ptr_marking_ns.is_empty() {
        o.notes.push(format!(
            "write-barrier: no store chunk fell inside a mark phase in {reps} cycles (marks took {:?} s); use a larger --live",
            run.mark_s
        ));
        return Ok(());
    }
    o.notes.push(format!(
        "write-barrier: {} ns (thread CPU time) per pointer store while marking (the barrier is on between the cycle's two GC pauses, counted by /sched/pauses/total/gc), {} while no GC runs; control (integer stores into the same objects): {} vs {} ns, {}% — the part of the ratio that is the marker's interference, not the barrier; {} marking chunks per cycle over a {} heap, marks took {} s",
        show(&run.ptr_marking_ns, 2),
        show(&run.ptr_idle_ns, 2),
        show(&run.int_marking_ns, 2),
        show(&run.int_idle_ns, 2),
        show(&overhead(&run.int_marking_ns, &run.int_idle_ns), 0),
        show(&run.marking_chunks.iter().map(|&c| c as f64).collect::<Vec<_>>(), 0),
        human_size(live),
        show(&run.mark_s, 2),
    ));
    push(
        o,
        Kind::WriteBarrier,
        overhead(&run.ptr_marking_ns, &run.ptr_idle_ns),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    #[test]
    fn kinds_parse() {
        assert_eq!(
            parse_kinds("bounds,prologue,write-barrier,bounds").unwrap(),
            vec![Kind::Bounds, Kind::Prologue, Kind::WriteBarrier]
        );
        assert_eq!(exit_code(&parse_kinds("nil").unwrap_err()), 2);
    }

    #[test]
    fn overhead_is_paired() {
        let v = overhead(&[1.1, 2.4, 3.0], &[1.0, 2.0, 0.0]);
        assert_eq!(v.len(), 2);
        assert!((v[0] - 10.0).abs() < 1e-9 && (v[1] - 20.0).abs() < 1e-9);
    }
}
