//! Which trials a `--verify` runs, from the first run and the counts: each remedy that can
//! be set from outside the program (the Go runtime's GC goals, THP, glibc's hugetlb tunables,
//! pinning, a NUMA policy), with its model's prediction; and the what-ifs that cannot be tried
//! here, with why.

use std::path::Path;

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use super::gogc::{self, Goal};
use super::measure::{RunMeasure, Setup};
use super::thp::{self, Prediction};
use super::verdict::{Predicted, Verdict};
use super::{remedy, Inputs, Of, Tried};

/// What explains a THP-like trial's outcome after it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum After {
    Thp,
    Gc,
    Nothing,
}

/// A remedy to try, with its model's prediction.
#[derive(Debug, Clone)]
pub(super) struct Trial {
    pub what: &'static str,
    pub remedy: String,
    pub setup: Setup,
    pub thp_always: bool,
    pub of: Of,
    pub prediction: Prediction,
    /// The model before issue 34's prediction, to judge beside.
    pub before: Option<(f64, f64, f64)>,
    pub after: After,
}

pub(super) fn not_tried(
    what: &'static str,
    remedy: &str,
    why: String,
    predicted: Predicted,
) -> Tried {
    Tried {
        what,
        remedy: remedy.into(),
        of: Of::Cpu,
        verdict: Verdict::NotTried,
        predicted,
        measured: Vec::new(),
        wall_saved: Vec::new(),
        rate_change: Vec::new(),
        work_change: Vec::new(),
        before: None,
        lines: vec![format!("{what} ({remedy}): not tried: {why}")],
    }
}

/// The trials that apply here, and the what-ifs that cannot be tried, with why.
pub(super) fn plan(
    inp: &Inputs,
    go: bool,
    base: &Setup,
    probe: &RunMeasure,
    judged: &Path,
) -> (Vec<Trial>, Vec<Tried>) {
    let mut trials = Vec::new();
    let mut skipped = Vec::new();
    let with_env = |pairs: &[(&str, String)]| {
        let mut s = base.clone();
        s.env
            .extend(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())));
        s
    };
    if go {
        go_trials(inp, probe, &with_env, &mut trials, &mut skipped);
    }
    thp_trials(
        inp,
        (go, judged),
        base,
        probe,
        &with_env,
        &mut trials,
        &mut skipped,
    );
    placement_trials(inp, base, &mut trials, &mut skipped);
    for w in inp.what_ifs.iter().filter(|w| w.what == "uring-batch") {
        let s = Summary::of(&w.saved).map(|s| (s.min, s.median, s.max));
        skipped.push(not_tried(
            "uring-batch",
            "io_uring",
            "io_uring is the program's own code: it cannot be set from outside".into(),
            s,
        ));
    }
    (trials, skipped)
}

/// THP always, and glibc's hugetlb tunables (1: madvise; 2: a reserved pool) for a glibc
/// program (`judged`: the one that ran), where its faults are at least a huge page's worth.
fn thp_trials(
    inp: &Inputs,
    (go, judged): (bool, &Path),
    base: &Setup,
    probe: &RunMeasure,
    with_env: &WithEnv<'_>,
    trials: &mut Vec<Trial>,
    skipped: &mut Vec<Tried>,
) {
    let faults = inp.counts.anon_faults();
    let mode = remedy::thp_mode();
    let thp_prediction = thp::predict(inp.counts, inp.units, go);
    match (&mode, faults) {
        (None, _) => skipped.push(not_tried(
            "thp",
            "THP always",
            "this kernel has no transparent huge pages".into(),
            None,
        )),
        (_, f) if f < 512 => skipped.push(not_tried(
            "thp",
            "THP always",
            format!("{f} faults: fewer than one huge page's worth"),
            None,
        )),
        (Some(m), _) if m == "always" => skipped.push(not_tried(
            "thp",
            "THP always",
            "THP is already always here".into(),
            None,
        )),
        _ => trials.push(Trial {
            what: "thp",
            remedy: "THP always".into(),
            setup: base.clone(),
            thp_always: true,
            of: Of::Kernel,
            prediction: thp_prediction.clone(),
            before: thp::before(inp.counts, inp.units),
            after: After::Thp,
        }),
    }
    if !go && faults >= 512 {
        // The program that ran (`program::judged`), not a script that exec'd it.
        if remedy::is_glibc_dynamic(judged) {
            if mode.as_deref() == Some("never") {
                skipped.push(not_tried(
                    "glibc-hugetlb",
                    "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                    "THP is never here: the tunable's madvise has nothing to ask for".into(),
                    None,
                ));
            } else {
                trials.push(Trial {
                    what: "glibc-hugetlb",
                    remedy: "GLIBC_TUNABLES=glibc.malloc.hugetlb=1".into(),
                    setup: with_env(&[("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1".into())]),
                    thp_always: false,
                    of: Of::Kernel,
                    prediction: thp_prediction.clone(),
                    before: None,
                    after: After::Thp,
                });
            }
            let pages = remedy::pool_pages(probe.max_rss);
            if inp.reserve_hugepages {
                trials.push(Trial {
                    what: "glibc-hugetlb",
                    remedy: "GLIBC_TUNABLES=glibc.malloc.hugetlb=2".into(),
                    setup: with_env(&[("GLIBC_TUNABLES", "glibc.malloc.hugetlb=2".into())]),
                    thp_always: false,
                    of: Of::Kernel,
                    prediction: thp_prediction.clone(),
                    before: None,
                    after: After::Nothing,
                });
            } else {
                skipped.push(not_tried(
                    "glibc-hugetlb",
                    "GLIBC_TUNABLES=glibc.malloc.hugetlb=2",
                    format!("needs a pool of ~{pages} 2 MiB pages: add --reserve-hugepages"),
                    None,
                ));
            }
        } else {
            skipped.push(not_tried(
                "glibc-hugetlb",
                "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                format!(
                    "{} is not a dynamically linked glibc program: the tunable does not reach its allocator",
                    judged.display()
                ),
                None,
            ));
        }
    }
}

/// Pinned to CPUs, and memory interleaved over the nodes where there are two or more: judged
/// by their sign (no term prices a migration or a remote access).
fn placement_trials(inp: &Inputs, base: &Setup, trials: &mut Vec<Trial>, skipped: &mut Vec<Tried>) {
    let cpus = remedy::pin_set();
    let migrations = inp.counts.class_total("migration");
    trials.push(Trial {
        what: "pin",
        remedy: format!(
            "pinned to CPU {}",
            costlab_core::measure::cpus::format_cpu_list(&cpus)
        ),
        setup: Setup {
            cpus,
            ..base.clone()
        },
        thp_always: false,
        of: Of::Wall,
        prediction: Prediction::Withdrawn(format!(
            "no term prices a migration: {migrations} counted; judged by its sign"
        )),
        before: None,
        after: After::Nothing,
    });
    let nodes = remedy::memory_nodes();
    if nodes.len() >= 2 {
        trials.push(Trial {
            what: "numa-policy",
            remedy: format!(
                "interleave over nodes {}",
                costlab_core::measure::cpus::format_cpu_list(&nodes)
            ),
            setup: Setup {
                interleave: remedy::node_mask(&nodes),
                ..base.clone()
            },
            thp_always: false,
            of: Of::Wall,
            prediction: Prediction::Withdrawn(
                "no model of where its memory lives: judged by its sign".into(),
            ),
            before: None,
            after: After::Nothing,
        });
    } else {
        skipped.push(not_tried(
            "numa-policy",
            "interleave",
            "one node".into(),
            None,
        ));
    }
}

/// The base setup with some variables added to the program's environment.
type WithEnv<'a> = dyn Fn(&[(&str, String)]) -> Setup + 'a;

/// GOGC 2x and 4x, and GOMEMLIMIT where the program sets none, from the probe's GC trace.
fn go_trials(
    inp: &Inputs,
    probe: &RunMeasure,
    with_env: &WithEnv<'_>,
    trials: &mut Vec<Trial>,
    skipped: &mut Vec<Tried>,
) {
    let Some(g) = crate::gowhatif::gogc(std::env::var("GOGC").ok().as_deref()) else {
        skipped.push(not_tried(
            "go-gogc",
            "GOGC",
            "the program runs with GOGC=off".into(),
            None,
        ));
        return;
    };
    let cycles = &probe.go_cycles;
    // The runtime's own share of its CPU, applied to the cgroup's CPU: the trace's per-cycle
    // figures are wall times x workers, which a busy machine inflates; their ratio holds.
    // Where the traced run's samples saw more of the collector than the runtime counts (its
    // sweep and scavenging), the samples' share.
    let sampled = crate::gowhatif::sampled_share(inp.counts.samples.as_ref());
    let share = probe
        .go_gc_cpu_fraction
        .map(|f| crate::gowhatif::share_to_scale(f, sampled).0);
    let gc = share.map_or_else(|| gogc::gc_cpu(cycles), |f| f / 100.0 * probe.cpu_usage_ns);
    let ratio = |to: Goal| gogc::predict(cycles, gc, Goal::Gogc(g), to);
    // The larger heap's first touches, at the fault-4k term: a saving less them, and the words.
    let fault_ns = gogc::fault_4k_ns(inp.units);
    let faults = |to: Goal| -> (f64, String) {
        let Some(unit) = fault_ns else {
            return (
                0.0,
                "; no fault-4k term to price the larger heap's first touches".into(),
            );
        };
        match gogc::heap_faults(cycles, Goal::Gogc(g), to, unit) {
            (pages, ns) if pages > 0.0 => (
                ns,
                format!(
                    "; its heap would peak {:.0} MiB higher: {pages:.0} more pages first touched at the fault-4k term's {}, {} more in faults, taken off",
                    pages / 256.0,
                    human_ns(unit),
                    human_ns(ns)
                ),
            ),
            _ => (0.0, String::new()),
        }
    };
    let before = probe.go_gc_cpu_fraction.and_then(|share| {
        let cpu = Summary::of(&[probe.cpu_usage_ns])?;
        let w = crate::gowhatif::go_what_if(share, g, &cpu, inp.units)?;
        Summary::of(&w.saved).map(|s| (s.min, s.median, s.max))
    });
    for k in [2.0, 4.0] {
        let to = g * k;
        let (heap_ns, heap_words) = faults(Goal::Gogc(to));
        let prediction = match ratio(Goal::Gogc(to)) {
            Some(then) => Prediction::Saves(
                Some(point(gc - then - heap_ns)),
                format!(
                    "its {} GC cycles ({} of CPU, {}) replayed at GOGC={to:.0}: each cycle costs what one of its live heap cost here, so its GC CPU would be {:.2}x{heap_words}",
                    cycles.len(),
                    human_ns(gc),
                    probe
                        .go_gc_cpu_fraction
                        .map_or("its cycles' CPU".to_string(), |f| {
                            crate::gowhatif::share_to_scale(f, sampled).1
                        }),
                    then / gc.max(1.0)
                ),
            ),
            None => Prediction::Withdrawn(format!(
                "{} GC cycles in its trace: too few to replay",
                cycles.len()
            )),
        };
        trials.push(Trial {
            what: "go-gogc",
            remedy: format!("GOGC={to:.0}"),
            setup: with_env(&[("GOGC", format!("{to:.0}"))]),
            thp_always: false,
            of: Of::Cpu,
            prediction,
            before: if k == 2.0 { before } else { None },
            after: After::Gc,
        });
    }
    if let Ok(v) = std::env::var("GOMEMLIMIT") {
        skipped.push(not_tried(
            "gomemlimit",
            "GOMEMLIMIT",
            format!("the program runs with GOMEMLIMIT={v} already"),
            None,
        ));
        return;
    }
    let peak = gogc::peak_heap(cycles);
    if peak <= 0.0 {
        skipped.push(not_tried(
            "gomemlimit",
            "GOMEMLIMIT",
            "its runtime ran no GC cycle".into(),
            None,
        ));
        return;
    }
    // The limit counts every byte the runtime maps, not the heap alone: twice the peak RSS,
    // with the heap's goal what the limit leaves after the rest (the RSS beyond the heap).
    let rss = probe.max_rss as f64 / f64::from(1 << 20);
    let limit = (2.0 * rss.max(peak)).ceil().max(8.0);
    let heap_goal = limit - (rss - peak).max(0.0);
    let (heap_ns, heap_words) = faults(Goal::Limit(heap_goal));
    let prediction = match ratio(Goal::Limit(heap_goal)) {
        Some(then) => Prediction::Saves(
            Some(point(gc - then - heap_ns)),
            format!("its GC cycles replayed with GOGC=off and a heap goal of {heap_goal:.0} MiB (a {limit:.0} MiB limit, twice its peak RSS, less its {:.0} MiB besides the heap), so its GC CPU fraction would be {:.2}x{heap_words}; leaves out the allocation after its last traced cycle, and the runtime's own reading of its memory", (rss - peak).max(0.0), then / gc.max(1.0)),
        ),
        None => Prediction::Withdrawn("too few GC cycles to replay".into()),
    };
    trials.push(Trial {
        what: "gomemlimit",
        remedy: format!("GOGC=off GOMEMLIMIT={limit:.0}MiB"),
        setup: with_env(&[
            ("GOGC", "off".into()),
            ("GOMEMLIMIT", format!("{limit:.0}MiB")),
        ]),
        thp_always: false,
        of: Of::Cpu,
        prediction,
        before: None,
        after: After::Gc,
    });
}

pub(super) fn point(x: f64) -> (f64, f64, f64) {
    (x, x, x)
}
