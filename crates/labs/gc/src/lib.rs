//! The gc lab: what a garbage-collected language costs. It drives the Go program in
//! `gcbench/` (built on demand, cached, never fetched) and reads its JSON.
//!
//! - `costlab gc`: the GC's CPU share as the heap headroom h grows (GOGC = 100 h, or
//!   GOMEMLIMIT = live x (1 + h)), each point a fresh process, beside the Biscuit paper's
//!   0.5x -> 34% and 2x -> 9%.
//! - `costlab gc tax`: bounds checks, stack-check prologues and write barriers, each a ratio
//!   of two builds or variants from one run.

pub mod args;
pub mod attrib;
pub mod bench;
pub mod charts;
mod crosscheck;
mod headlines;
pub mod java;
mod lab_plan;
pub mod plan;
mod pooled;
mod render;
mod sampler;
pub mod sweep;
pub mod tax;
mod tax_options;

use anyhow::Result;

use args::{GcArgs, GcTaxArgs, GcWhat};
use costlab_core::error::usage;
use costlab_core::measure::sizes::parse_size;
use costlab_history::report::Outcome;
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};
pub use pooled::{attribution_pooled, PooledShare};
pub use render::render;

pub const LAB: &str = "gc";

/// Live heap for `--quick` and `costlab run`'s quick plan.
pub const QUICK_LIVE: u64 = 64 << 20;
/// Live heap the write-barrier kernel's cycles mark, by default.
pub const TAX_LIVE: u64 = 256 << 20;

fn reps_of(given: Option<usize>, default: usize) -> Result<usize> {
    match given {
        Some(0) => Err(usage(
            "bad --samples 0: give at least 1 (2 or more for a spread)",
        )),
        Some(n) if n > 100 => Err(usage(format!(
            "bad --samples {n}: at most 100 fresh processes per point"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// `costlab gc`: the headroom sweep, per runtime.
pub fn run(args: &GcArgs, ctx: &Ctx) -> Result<Outcome> {
    let runtimes = java::parse_runtimes(&args.runtime)?;
    let cfg = sweep::SweepConfig {
        modes: plan::parse_modes(&args.mode)?,
        headrooms: plan::parse_headrooms(&args.headroom)?,
        live: args.live.as_deref().map(parse_size).transpose()?,
        default_live: if ctx.quick {
            QUICK_LIVE
        } else {
            plan::PAPER_LIVE
        },
        reps: reps_of(
            args.reps.or(args.common.samples),
            if ctx.quick { 2 } else { 3 },
        )?,
        alloc: None,
    };
    let mut o = Outcome::default();
    if runtimes.contains(&java::Runtime::Go) {
        o.extend(sweep::sweep(&cfg)?);
    }
    let javas: Vec<_> = runtimes
        .iter()
        .copied()
        .filter(|r| *r != java::Runtime::Go)
        .collect();
    if !javas.is_empty() {
        let max_h = cfg.headrooms.iter().copied().fold(0.0, f64::max);
        let (live, note) = plan::choose_live(
            cfg.live,
            cfg.default_live,
            max_h,
            costlab_core::machine::pages::mem_available(),
        )?;
        match java::find_jdk() {
            None => {
                for rt in &javas {
                    o.notes.push(format!("{}: {}", rt.name(), java::NO_JDK));
                }
            }
            Some(jdk) => {
                if let Some(n) = note {
                    o.notes.push(format!("java: {n}"));
                }
                for rt in javas {
                    o.extend(java::sweep(
                        rt,
                        &jdk,
                        &cfg.headrooms,
                        live,
                        cfg.reps,
                        cfg.alloc,
                    )?);
                }
            }
        }
    }
    counters_note(ctx, &mut o);
    Ok(o)
}

/// (runtime, mode, the smallest headroom under 10% and its share %).
pub type Target = (String, String, Option<(f64, f64)>);

/// Per runtime (and mode) in `o`: the smallest headroom keeping GC under 10%, with its
/// share; None where no headroom tested does.
pub fn headroom_targets(o: &Outcome) -> Vec<Target> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in o.results.iter().filter(|r| r.metric == "gc_cpu_share") {
        let key = (java::runtime_of(r), r.key("mode"));
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen.into_iter()
        .map(|(rt, mode)| {
            let t = java::smallest_under(o, &rt, &mode, plan::TARGET_SHARE);
            (rt, mode, t)
        })
        .collect()
}

/// `costlab gc tax`.
pub fn run_tax(args: &GcTaxArgs, ctx: &Ctx) -> Result<Outcome> {
    let kinds = tax::parse_kinds(&args.kind)?;
    let methods = tax::parse_methods(&args.method)?;
    let workloads = tax::parse_workloads(&args.workload)?;
    let seconds = match args.seconds {
        Some(s) if !(s.is_finite() && (0.5..=600.0).contains(&s)) => {
            return Err(usage(format!(
                "bad --seconds {s}: give 0.5 to 600 seconds per profiled process"
            )))
        }
        Some(s) => s,
        None if ctx.quick => 2.0,
        None => 5.0,
    };
    let procs = reps_of(args.procs, if ctx.quick { 1 } else { 3 })?;
    let reps = reps_of(
        args.reps.or(args.common.samples),
        if ctx.quick { 3 } else { 5 },
    )?;
    let live = match args.live.as_deref().map(parse_size).transpose()? {
        Some(l) => {
            plan::choose_live(
                Some(l),
                l,
                1.0,
                costlab_core::machine::pages::mem_available(),
            )?;
            l
        }
        None => tax_live(if ctx.quick { QUICK_LIVE } else { TAX_LIVE }),
    };
    let cfg = tax::TaxConfig {
        methods,
        kinds,
        workloads,
        reps,
        procs,
        seconds,
        warmup: tax::WARMUP_S,
        perf_hz: tax::PERF_HZ,
        cross_check: true,
        live,
    };
    let mut o = tax::measure(&cfg)?;
    counters_note(ctx, &mut o);
    Ok(o)
}

/// The gc lab reads the Go runtime's own accounting; say so when counters were asked for.
fn counters_note(ctx: &Ctx, o: &mut Outcome) {
    if ctx.counters {
        o.notes.push(
            "--counters: the gc lab reads the Go runtime's metrics (runtime/metrics), not perf counters".to_string(),
        );
    }
}

/// The write-barrier heap: the default, shrunk when memory is short.
fn tax_live(default: u64) -> u64 {
    plan::choose_live(
        None,
        default,
        1.0,
        costlab_core::machine::pages::mem_available(),
    )
    .map_or(default, |(l, _)| l)
}

/// `costlab gc build`: the Go builds (plain, -B, layout-shifted) and, where a JDK is
/// found, the Java program, into the cache; prints where they are.
pub fn build_all() -> Result<String> {
    let plain = bench::locate(bench::Build::Plain)?;
    let nob = bench::locate(bench::Build::NoBounds)?;
    let shifted = bench::locate(bench::Build::Shifted)?;
    let mut out = format!(
        "gcbench ({}): {}\ngcbench -gcflags=-B ({}): {}\ngcbench layout-shifted, the A/A twin ({}): {}\n",
        plain.how,
        plain.path.display(),
        nob.how,
        nob.path.display(),
        shifted.how,
        shifted.path.display()
    );
    // Go's nm and objdump (the attribution's) are built on first use since Go 1.24: build
    // them now, not inside a timed run.
    if let Some(go) = bench::find_go() {
        for tool in ["nm", "objdump"] {
            match attrib::tool_path(&go, tool) {
                Some(p) => out.push_str(&format!("go tool {tool}: {}\n", p.display())),
                None => out.push_str(&format!(
                    "go tool {tool}: not resolved by `go tool -n {tool}`; the attribution runs `go tool {tool}`\n"
                )),
            }
        }
    }
    match java::find_jdk() {
        Some(jdk) => out.push_str(&format!(
            "javagc (javac): {}\n",
            java::build(&jdk)?.display()
        )),
        None => out.push_str(&format!("javagc: {}\n", java::NO_JDK)),
    }
    Ok(out)
}

/// The gc lab as `costlab run` drives it.
pub struct GcLab;

impl Lab for GcLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<GcArgs>(
            "gc",
            "What a garbage collector costs: GC CPU share by heap headroom (GOGC / GOMEMLIMIT), and the language-safety taxes (bounds checks, stack-check prologues, write barriers)",
            "Examples:\n  costlab gc --headroom 0.5,1,2 --samples 3\n  costlab gc tax --kind bounds,prologue\n  costlab gc build",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: GcArgs = parsed(m)?;
        Ok(match args.what {
            None => Invocation::measure(args.common.clone(), move |ctx| run(&args, ctx)),
            Some(GcWhat::Tax(tax)) => {
                Invocation::measure(tax.common.clone(), move |ctx| run_tax(&tax, ctx))
            }
            Some(GcWhat::Build) => {
                print!("{}", build_all()?);
                Invocation::Done
            }
        })
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        vec![charts::chart(doc)]
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        bench::unavailable()
    }

    fn run_plan(&self, _ctx: &Ctx, full: bool) -> Result<Outcome> {
        lab_plan::run_plan(full)
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        headlines::headlines(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        let mut o = Outcome::default();
        for (h, share) in [(1.0, [30.0, 32.0]), (3.0, [10.0, 12.0])] {
            o.push(
                LAB,
                costlab_core::case! {"mode" => "gogc", "headroom" => h, "live" => 64u64 << 20},
                "gc_cpu_share",
                "%",
                share.to_vec(),
            );
        }
        o.push(
            LAB,
            costlab_core::case! {"method" => "ab", "kind" => "bounds"},
            "overhead",
            "%",
            vec![2.0, 3.0, 4.0],
        );
        o.push(
            LAB,
            costlab_core::case! {"method" => "aa", "kind" => "bounds"},
            "overhead",
            "%",
            vec![-5.0, 1.0, 6.0],
        );
        // Per process: gc, prologue, write-barrier, safety, memory, kernel, other.
        tax::push_attribution(
            &mut o,
            "heap",
            &[[30, 5, 2, 3, 10, 40, 10], [32, 4, 2, 2, 12, 40, 8]],
        );
        o.models.push(tax::cross_check_model(&[tax::CrossCheck {
            workload: "heap".to_string(),
            checked: 1.2,
            unchecked: 0.2,
            ab: vec![0.5, 1.5, 2.5],
            aa: vec![-0.5, 1.0],
        }]));
        o
    }

    #[test]
    fn headlines_read_the_sweep_and_attribution() {
        let h = GcLab.headlines(&outcome());
        assert_eq!(h[0].summary.median, 31.0);
        assert!(h[0].label.contains("1x") && h[0].reading.contains("34%"));
        assert_eq!((h[1].summary.min, h[1].summary.max), (10.0, 12.0));
        // Tax lines: attribution only (gc, prologue, write-barrier, safety), none from A/B.
        let taxes: Vec<_> = h
            .iter()
            .filter(|x| x.label.contains("share of CPU"))
            .collect();
        assert_eq!(taxes.len(), 4);
        assert_eq!(taxes[0].label, "gc share of CPU (heap workload)");
        // Pooled: 62 of 200 samples, 80 of them in the kernel: 31% of all CPU, 51.67% of
        // the 120 in user mode; the reading names both denominators.
        assert!(
            taxes[0].reading.contains("31.00% of all CPU")
                && taxes[0].reading.contains("62 of 200")
                && taxes[0].reading.contains("51.67% of user-mode CPU"),
            "{}",
            taxes[0].reading
        );
        assert_eq!(taxes[0].unit, "% of all CPU");
        assert!(taxes.iter().all(|x| x.summary.min >= 0.0));
        // The safety line carries the -B cross-check's verdict; no line for memory, kernel
        // or other.
        let safety = taxes
            .iter()
            .find(|x| x.label.starts_with("safety"))
            .unwrap();
        assert!(
            safety.reading.ends_with("A/B difference agrees"),
            "{}",
            safety.reading
        );
        assert!(!h
            .iter()
            .any(|x| x.label.starts_with("memory") || x.label.starts_with("kernel")));
        assert!(!h.iter().any(|x| x.label.contains("bounds")));
    }

    #[test]
    fn render_shows_curve_target_and_taxes() {
        let text = render(&outcome());
        assert!(text.contains("GC CPU %") && text.contains("31.0 (30.0–32.0)"));
        assert!(text.contains("no headroom tested keeps GC under 10%"));
        assert!(text.contains("bounds") && text.contains("3.0 (2.0–4.0)"));
        assert!(text.contains("within the A/A noise"), "{text}");
        assert!(
            text.contains("write-barrier") && text.contains("62 / 200"),
            "{text}"
        );
        assert!(
            text.contains("% of user CPU") && text.contains("51.67"),
            "{text}"
        );
        assert!(
            text.contains(tax::CROSS_CHECK_MODEL) && text.contains("agrees"),
            "{text}"
        );
    }

    #[test]
    fn reps_bounds() {
        assert_eq!(reps_of(None, 3).unwrap(), 3);
        assert_eq!(reps_of(Some(5), 3).unwrap(), 5);
        assert!(reps_of(Some(0), 3).is_err());
        assert!(reps_of(Some(1000), 3).is_err());
    }
}
