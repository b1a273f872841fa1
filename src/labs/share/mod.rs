//! The sharing lab: what a written cache line costs when cores share it.
//!
//! `costlab share` runs each case (shared and per-thread Arcs, shared, padded and falsely
//! shared atomics, a mutex, shared reads) with T pinned threads and fits the Universal
//! Scalability Law to each curve; `costlab share c2c` measures the one-way latency of a line
//! moving between two cores, the unit every shared write pays.

pub mod c2c;
pub mod cases;
pub mod usl;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{json, Map, Value};

use crate::cli::{C2cArgs, ShareArgs};
use crate::error::usage;
use crate::labs::{Ctx, Headline, Lab};
use crate::measure::conditions::{judged_case, Watch};
use crate::measure::cputime::thread_cpu_ns;
use crate::measure::{counters, cpus, stats, team, SampleSpec, Summary};
use crate::report::{progress, table, Model, ModelPoint, Outcome, ResultRow};
use cases::{Bench, Variant};

pub const LAB: &str = "share";

/// Why shared writes cost what they cost, in one line for every report.
const WHY: &str = "why: a core may write a cache line only while it holds the line's only copy; when another core writes the same line (a shared refcount, a shared counter, or a neighbour's counter on the same 64 bytes) the line must travel between the cores' caches on every write, and each trip costs about one core-to-core latency. Reads let every cache keep a copy, so nothing travels.";

/// `costlab share`: the cases over a thread sweep, and their USL fits.
pub fn run(args: &ShareArgs, ctx: &Ctx) -> Result<Outcome> {
    let variants = match &args.case {
        Some(text) => cases::parse_cases(text)?,
        None => Variant::ALL.to_vec(),
    };
    let allowed = cpus::allowed_cpus();
    let threads = match &args.threads {
        Some(text) => cpus::parse_threads(text)?,
        None => default_threads(allowed.len(), ctx.quick),
    };
    cpus::check_threads(&threads, allowed.len(), args.oversubscribe)?;
    let mut threads = threads;
    threads.sort_unstable();
    threads.dedup();
    let load_before = load_average();
    let mut out = measure_cases(&variants, &threads, &allowed, &ctx.spec, ctx.counters)?;
    out.notes
        .extend(busy_note(load_before, load_average(), allowed.len()));
    Ok(out)
}

/// The 1-minute load average, if the kernel shows it.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A warning when other work competed for the CPUs: threads that share a line only pay for
/// it while they run at the same time, so a busy machine hides (or fakes) the cost.
fn busy_note(before: Option<f64>, after: Option<f64>, cpus: usize) -> Option<String> {
    let load = before.into_iter().chain(after).fold(f64::NAN, f64::max);
    // Our own threads add up to `cpus` to the load while we run.
    (load > cpus as f64 * 1.5).then(|| {
        format!(
            "the machine was busy (load average {load:.1} on {cpus} CPUs): other processes took turns on our CPUs, so our threads often did not run at the same time and a shared line then costs little; samples where that showed are dropped (see the other notes), but rerun on a quiet machine for firm figures."
        )
    })
}

/// `costlab share c2c`: one-way latency for every pair of CPUs (or of `--cpus`).
pub fn run_c2c(args: &C2cArgs, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    let chosen = match &args.common.cpus {
        Some(text) => {
            let wanted = cpus::parse_cpu_list(text)?;
            cpus::check_cpus(&wanted, &allowed)?;
            wanted
        }
        None => allowed.clone(),
    };
    if chosen.len() < 2 {
        return Err(usage(format!(
            "c2c needs at least two CPUs to bounce a line between, got {}; name two or more with --cpus",
            cpus::format_cpu_list(&chosen)
        )));
    }
    let spec = c2c::C2cSpec::new(args.common.samples, ctx.quick);
    let pairs = if ctx.quick {
        c2c::star_pairs(&chosen)
    } else {
        c2c::pairs(&chosen)
    };
    let mut out = measure_c2c(&pairs, &spec, ctx.counters)?;
    out.notes
        .extend(kernel_cache_sharing(&ctx.machine, &chosen));
    out.notes.extend(vm_note(&ctx.machine));
    Ok(out)
}

/// Under a hypervisor CPU ids are vCPUs: the host decides (and may change) which physical
/// cores they run on, so the distance c2c measures can change from run to run.
/// `machine.hypervisor` is set whenever /proc/cpuinfo has the `hypervisor` flag
/// (`machine::kernel::read_hypervisor`), so it alone says whether this is a VM.
fn vm_note(machine: &crate::machine::Machine) -> Option<String> {
    machine.hypervisor.is_some().then(|| {
        "this is a virtual machine: CPU ids are vCPUs, and the host decides which physical cores they run on (SMT siblings, a shared L3, another chiplet or socket) and may move them, so c2c figures can change between runs; a stable figure is stable only while the host keeps the placement".to_string()
    })
}

/// What the kernel says about which of `chosen` share a cache, to set beside the groups
/// the latencies suggest.
fn kernel_cache_sharing(machine: &crate::machine::Machine, chosen: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    for c in machine.caches.iter().filter(|c| c.kind != "Instruction") {
        let groups: Vec<String> = c
            .shared_by
            .iter()
            .map(|g| {
                g.iter()
                    .copied()
                    .filter(|x| chosen.contains(x))
                    .collect::<Vec<_>>()
            })
            .filter(|g| g.len() > 1)
            .map(|g| format!("{{{}}}", cpus::format_cpu_list(&g)))
            .collect();
        if !groups.is_empty() {
            out.push(format!(
                "the kernel says L{} ({}) is shared by {}",
                c.level,
                crate::measure::sizes::human_size(c.size),
                groups.join(" ")
            ));
        }
    }
    out
}

/// 1, 2, 4, ... up to `cpus`, and `cpus` itself: the machine's shape, quick plan or not
/// (the quick plan takes shorter samples instead).
pub fn default_threads(cpus: usize, _quick: bool) -> Vec<usize> {
    let cpus = cpus.max(1);
    let mut t: Vec<usize> = std::iter::successors(Some(1usize), |x| x.checked_mul(2))
        .take_while(|&x| x < cpus)
        .collect();
    t.push(cpus);
    t.dedup();
    t
}

fn measure_cases(
    variants: &[Variant],
    threads: &[usize],
    allowed: &[usize],
    spec: &SampleSpec,
    with_counters: bool,
) -> Result<Outcome> {
    let mut out = Outcome::default();
    let (mut clean_total, mut taken_total, mut unclean) = (0, 0, Vec::new());
    let bar = progress::bar((variants.len() * threads.len()) as u64, "share");
    for &v in variants {
        progress::note(&format!("share: {} at {:?} threads", v.name(), threads));
        for &t in threads {
            bar.set_message(format!("{} T={t}", v.name()));
            let bench = Bench::new(v, t);
            let team_cpus = cpus::cpus_for_threads(t, allowed);
            let what = format!("share {} T={t}", v.name());
            let case_out = judged_case(&what, &team_cpus, || {
                let (taken, readings) =
                    counters::around(with_counters, || take_samples(&bench, &team_cpus, spec))?;
                let mut o = Outcome::default();
                o.notes.extend((!taken.clean).then(|| what.clone()));
                clean_total += taken.kept_clean;
                taken_total += taken.taken;
                let samples = taken.samples;
                let case = || crate::case! {"variant" => v.name(), "threads" => t};
                // Every worker does `iters` ops; the team's time runs from first start to last end.
                let throughput: Vec<f64> = samples
                    .iter()
                    .map(|s| (t as u64 * s.iters) as f64 / s.ns.max(1.0) * 1e3)
                    .collect();
                let latency: Vec<f64> = samples.iter().map(|s| s.ns_per_iter()).collect();
                o.push(LAB, case(), "throughput", "Mop/s", throughput);
                o.push(LAB, case(), "latency", "ns", latency);
                if let Some(r) = readings {
                    r.attach_from(&mut o.results, 0);
                }
                Ok(o)
            })?;
            // The attempt's "unclean" marker travels as a note equal to the case name.
            let (marks, notes): (Vec<String>, Vec<String>) =
                case_out.notes.into_iter().partition(|n| *n == what);
            if !marks.is_empty() {
                unclean.push(format!("{} T={t}", v.name()));
            }
            out.results.extend(case_out.results);
            out.notes.extend(notes);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if taken_total > clean_total && clean_total > 0 {
        out.notes.push(format!(
            "kept {clean_total} of {taken_total} samples: the others had a thread off its CPU, or starting late, for over {:.0}% of the sample (another process ran there), which hides the cost of sharing",
            100.0 * (1.0 - ON_CPU)
        ));
    }
    if !unclean.is_empty() {
        out.notes.push(format!(
            "too few samples with every thread on its CPU for {}: those figures keep all samples, time other processes took included (at T > 1 they understate what sharing costs)",
            unclean.join(", ")
        ));
    }
    if threads.iter().any(|&t| t > allowed.len()) {
        out.notes.push(format!(
            "oversubscribed: more threads than the {} CPUs this process may use; those figures include the scheduler's time slicing",
            allowed.len()
        ));
    }
    for &v in variants {
        out.models.extend(usl_models(v, &out.results));
    }
    if out
        .models
        .iter()
        .any(|m| m.params.get("fit") != Some(&json!("full")))
    {
        out.notes.push(TWO_POINTS.to_string());
    }
    Ok(out)
}

/// A sample counts only if every worker was on its CPU for at least this share of it.
const ON_CPU: f64 = 0.9;

/// Samples of one case, and whether they are the clean ones.
struct Taken {
    samples: Vec<crate::measure::Sample>,
    /// Clean samples kept, and samples taken in all.
    kept_clean: usize,
    taken: usize,
    clean: bool,
}

/// Take the case's samples, keeping those in which every worker stayed on its CPU: shared
/// lines only cost while the threads run at the same time, so a sample in which the
/// scheduler ran someone else on one CPU measures the scheduler. Short samples (at most
/// 5 ms, well past the clock's resolution) fit between preemptions; on a busy machine up
/// to three rounds are taken to find enough clean ones.
fn take_samples(bench: &Bench, team_cpus: &[usize], spec: &SampleSpec) -> Result<Taken> {
    let spec = SampleSpec {
        min_sample: spec.min_sample.min(Duration::from_millis(5)),
        ..spec.clone()
    };
    let oversubscribed = {
        let mut c = team_cpus.to_vec();
        c.sort_unstable();
        c.dedup();
        c.len() < team_cpus.len()
    };
    let (mut clean, mut all) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let epoch = Instant::now();
        let logs: Vec<Mutex<Vec<Call>>> =
            team_cpus.iter().map(|_| Mutex::new(Vec::new())).collect();
        let samples = team(
            team_cpus,
            &spec,
            |i| Ok(bench.worker(i)),
            |w, n| {
                let (c0, t0) = (thread_cpu_ns(), Instant::now());
                bench.work(w, n);
                let on_cpu = thread_cpu_ns().saturating_sub(c0) as f64
                    / (t0.elapsed().as_nanos() as f64).max(1.0);
                let start_ns = t0.duration_since(epoch).as_nanos() as f64;
                if let Ok(mut log) = logs[w.index()].lock() {
                    log.push(Call { start_ns, on_cpu });
                }
            },
        )?;
        // The last entries of each log are the timed samples, in order.
        let calls: Vec<Vec<Call>> = logs
            .into_iter()
            .map(|l| l.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let on = clean_samples(&samples, &calls);
        for (sample, on) in samples.into_iter().zip(on) {
            if on {
                clean.push(sample.clone());
            }
            all.push(sample);
        }
        if oversubscribed || clean.len() >= spec.samples {
            break;
        }
    }
    let taken = all.len();
    if !oversubscribed && clean.len() >= spec.samples.min(3) {
        clean.truncate(spec.samples);
        let kept_clean = clean.len();
        return Ok(Taken {
            samples: clean,
            kept_clean,
            taken,
            clean: true,
        });
    }
    all.truncate(spec.samples);
    Ok(Taken {
        samples: all,
        kept_clean: 0,
        taken: 0,
        clean: oversubscribed,
    })
}

/// One work call of one worker: when it started (ns since the team's epoch) and the share
/// of its wall time the thread spent on its CPU.
#[derive(Debug, Clone, Copy)]
struct Call {
    start_ns: f64,
    on_cpu: f64,
}

/// Which samples are clean: every worker on its CPU through its own run, and all starting
/// together (a worker preempted at the barrier starts late, and the others run alone until
/// it comes). `calls` holds each worker's calls, the timed samples last. A worker that
/// finishes early is fine: that is the unfairness of contention, not the scheduler.
fn clean_samples(samples: &[crate::measure::Sample], calls: &[Vec<Call>]) -> Vec<bool> {
    let n = samples.len();
    samples
        .iter()
        .enumerate()
        .map(|(k, sample)| {
            let mine: Option<Vec<Call>> = calls
                .iter()
                .map(|log| (log.len() >= n).then(|| log[log.len() - n + k]))
                .collect();
            let Some(mine) = mine else { return false };
            let first = mine
                .iter()
                .map(|c| c.start_ns)
                .fold(f64::INFINITY, f64::min);
            let last = mine.iter().map(|c| c.start_ns).fold(0.0, f64::max);
            last - first <= (1.0 - ON_CPU) * sample.ns && mine.iter().all(|c| c.on_cpu >= ON_CPU)
        })
        .collect()
}

const TWO_POINTS: &str = "only two thread counts were measured: the USL then has one equation (for T = 1, 2: sigma + 2 kappa = 2 X(1)/X(2) - 1) for two unknowns, so it is not a fit. The sigma-only fit (kappa = 0) is an upper bound and the kappa-only fit (sigma = 0) a lower bound for every larger T; both pass through the measured points, and the truth lies between them. Measure on a machine with more CPUs to pin the curve down.";

/// The median throughput of `v` at each measured thread count.
fn curve(v: Variant, rows: &[ResultRow]) -> Vec<(usize, ResultRow)> {
    let mut pts: Vec<(usize, ResultRow)> = rows
        .iter()
        .filter(|r| r.metric == "throughput" && r.key("variant") == v.name())
        .filter_map(|r| r.key("threads").parse().ok().map(|t| (t, r.clone())))
        .collect();
    pts.sort_by_key(|p| p.0);
    pts
}

/// The USL fit (or the two bounds) of one case's curve, as report models.
fn usl_models(v: Variant, rows: &[ResultRow]) -> Vec<Model> {
    let pts = curve(v, rows);
    let points: Vec<usl::Point> = pts
        .iter()
        .map(|(t, r)| usl::Point {
            n: *t as f64,
            x: r.summary.median,
        })
        .collect();
    let fits = match usl::analyse(&points) {
        usl::Analysis::Full(f) => vec![f],
        usl::Analysis::Bounds {
            sigma_only,
            kappa_only,
        } => vec![sigma_only, kappa_only],
        usl::Analysis::TooFew => return vec![],
    };
    fits.into_iter()
        .map(|f| {
            let mut params = Map::new();
            params.insert("fit".into(), json!(f.shape.label()));
            params.insert("lambda_mops".into(), json!(f.lambda));
            params.insert("sigma".into(), json!(f.sigma));
            params.insert("kappa".into(), json!(f.kappa));
            params.insert("peak_threads".into(), json!(f.peak()));
            params.insert("rel_rms".into(), json!(f.rel_rms));
            let extrapolated: Map<String, Value> = usl::EXTRAPOLATE_TO
                .iter()
                .map(|&n| (n.to_string(), json!(f.predict(n as f64))))
                .collect();
            params.insert("extrapolated_mops".into(), Value::Object(extrapolated));
            params.insert("extrapolation".into(), json!("model, not measured"));
            let model_points = pts
                .iter()
                .map(|(t, r)| ModelPoint {
                    case: r.case.clone(),
                    predicted: f.predict(*t as f64),
                    measured: r.summary.median,
                    unit: "Mop/s".into(),
                })
                .collect();
            Model {
                lab: LAB.into(),
                name: format!("USL {} ({})", v.name(), f.shape.label()),
                params,
                points: model_points,
                verdict: usl_verdict(v, &f, &pts),
            }
        })
        .collect()
}

/// A fit that misses a measured point by more than this says so.
const MISS: f64 = 0.10;

fn usl_verdict(v: Variant, f: &usl::Fit, pts: &[(usize, ResultRow)]) -> Vec<String> {
    let shape = match f.shape {
        usl::Shape::Full => "fit",
        usl::Shape::SigmaOnly => "upper bound (all cost as contention)",
        usl::Shape::KappaOnly => "lower bound (all cost as coherency)",
    };
    let peak = match f.peak() {
        Some(p) if p <= 1.0 => "more threads never beat one".to_string(),
        Some(p) => format!("throughput peaks near {p:.0} threads"),
        None if f.sigma > 0.0 => format!(
            "throughput never falls but flattens toward {:.1} Mop/s",
            f.lambda / f.sigma
        ),
        None => "throughput grows linearly".to_string(),
    };
    let mut out = vec![format!(
        "{} {shape}: sigma {:.4}, kappa {:.5}; {peak}; model extrapolation to 128 threads: {:.1} Mop/s",
        v.name(),
        f.sigma,
        f.kappa,
        f.predict(128.0)
    )];
    for (t, r) in pts {
        let (pred, meas) = (f.predict(*t as f64), r.summary.median);
        if meas > 0.0 && ((pred - meas) / meas).abs() > MISS {
            out.push(format!(
                "{} at T={t}: the USL predicts {pred:.1} Mop/s, measured {meas:.1} ({:+.0}%): one smooth curve does not follow this case here{}",
                v.name(),
                100.0 * (pred - meas) / meas,
                if *t > cpus::allowed_cpus().len() {
                    " (oversubscribed: this point measures the scheduler's time slicing)"
                } else {
                    " (a step such as the first line transfer, or a different cost per op beyond this T)"
                }
            ));
        }
    }
    out
}

fn measure_c2c(
    pairs: &[(usize, usize)],
    spec: &c2c::C2cSpec,
    with_counters: bool,
) -> Result<Outcome> {
    let mut out = Outcome::default();
    let bar = progress::bar(pairs.len() as u64, "c2c");
    progress::note(&format!("share c2c: {} pair(s)", pairs.len()));
    for &(a, b) in pairs {
        bar.set_message(format!("CPU {a} <-> {b}"));
        let mark = out.results.len();
        let watch = Watch::start(&[a, b]);
        let (figs, readings) =
            counters::around(with_counters, || c2c::measure_pair_lines(a, b, spec))?;
        let samples = figs.samples.clone();
        if let Some(((lo, nlo), (hi, nhi))) = c2c::two_modes(&samples) {
            out.notes.push(format!(
                "c2c CPU {a} <-> {b}: samples fall in two groups, {nlo} near {lo:.0} ns and {nhi} near {hi:.0} ns: the two threads ran at two different distances during the run (under a hypervisor a vCPU moved between physical cores or chiplets); the figure is the median of all samples, rerun to see which distance is typical"
            ));
        }
        let from = out.results.len();
        out.push(
            LAB,
            crate::case! {"from" => a, "to" => b},
            "latency",
            "ns",
            samples,
        );
        if let Some(spread) = figs.address_spread_pct() {
            out.push(
                LAB,
                crate::case! {"from" => a, "to" => b},
                "address_spread",
                "%",
                vec![spread],
            );
            if spread > 10.0 {
                out.notes.push(format!(
                    "c2c CPU {a} <-> {b}: the {} line addresses gave medians from {:.1} to {:.1} ns ({spread:.0}% apart): where the line lives matters here (a cache slice or set far from one core)",
                    figs.per_address.len(),
                    figs.per_address.iter().copied().fold(f64::INFINITY, f64::min),
                    figs.per_address.iter().copied().fold(0.0, f64::max),
                ));
            }
        }
        if let Some(r) = readings {
            r.attach_from(&mut out.results, from);
        }
        out.attach_conditions(mark, watch.finish());
        bar.inc(1);
    }
    bar.finish_and_clear();
    out.notes.push(
        "c2c: one row per unordered pair (from < to): a round trip crosses both ways, so one-way latency = round trip / 2 is the same from either end".to_string(),
    );
    Ok(out)
}

/// The side-by-side ratio of two cases' throughput at the largest thread count both ran.
#[derive(Debug, Clone)]
pub struct Ratio {
    pub better: Variant,
    pub worse: Variant,
    pub threads: usize,
    pub summary: Summary,
}

fn ratio(outcome: &Outcome, better: Variant, worse: Variant) -> Option<Ratio> {
    let a = curve(better, &outcome.results);
    let b = curve(worse, &outcome.results);
    let (t, ra, rb) = a
        .iter()
        .rev()
        .find_map(|(t, ra)| b.iter().find(|(u, _)| u == t).map(|(_, rb)| (*t, ra, rb)))?;
    let ratios = stats::paired_ratios(&ra.samples, &rb.samples);
    Some(Ratio {
        better,
        worse,
        threads: t,
        summary: Summary::of(&ratios)?,
    })
}

fn ratios(outcome: &Outcome) -> Vec<Ratio> {
    [
        (Variant::ArcPerThread, Variant::ArcShared),
        (Variant::AtomicPadded, Variant::AtomicFalseSharing),
    ]
    .into_iter()
    .filter_map(|(a, b)| ratio(outcome, a, b))
    .collect()
}

/// The c2c rows as (from, to, row).
fn c2c_rows(outcome: &Outcome) -> Vec<(usize, usize, &ResultRow)> {
    outcome
        .results
        .iter()
        .filter(|r| r.metric == "latency" && r.case.contains_key("from"))
        .filter_map(|r| Some((r.key("from").parse().ok()?, r.key("to").parse().ok()?, r)))
        .collect()
}

/// The terminal rendering of a share or c2c outcome.
pub fn render(outcome: &Outcome) -> String {
    let mut s = String::new();
    let variants: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| !curve(*v, &outcome.results).is_empty())
        .collect();
    if !variants.is_empty() {
        s += &render_cases(outcome, &variants);
    }
    let pairs = c2c_rows(outcome);
    if !pairs.is_empty() {
        s += &render_c2c(&pairs);
    }
    s
}

fn render_cases(outcome: &Outcome, variants: &[Variant]) -> String {
    let mut s = String::from(
        "share: T threads pinned one per CPU, started on a barrier, each running one op in a loop\n",
    );
    let mut rows = Vec::new();
    for &v in variants {
        let pts = curve(v, &outcome.results);
        let one = pts
            .iter()
            .find(|(t, _)| *t == 1)
            .map(|(_, r)| r.summary.median);
        for (t, r) in &pts {
            let lat = outcome
                .find(
                    "latency",
                    &crate::case! {"variant" => v.name(), "threads" => *t},
                )
                .map_or("—".to_string(), |l| {
                    format!("{}{}", l.summary.show(1), crate::report::verdict::mark(l))
                });
            let per = r.summary.median / *t as f64;
            let eff = one.map_or("—".to_string(), |x1| {
                format!("{:.0}%", 100.0 * r.summary.median / (*t as f64 * x1))
            });
            rows.push(vec![
                v.name().to_string(),
                t.to_string(),
                format!("{}{}", r.summary.show(1), crate::report::verdict::mark(r)),
                format!("{per:.1}"),
                lat,
                eff,
            ]);
        }
    }
    s += &table::render(
        &[
            "case",
            "threads",
            "total Mop/s (min–max)",
            "per thread Mop/s",
            "ns/op per thread (min–max)",
            "efficiency vs T=1",
        ],
        &rows,
    );
    s += "\n";
    for r in ratios(outcome) {
        s += &format!(
            "at T={}: {} runs {:.2}x the throughput of {} (paired samples, {})\n",
            r.threads,
            r.better.name(),
            r.summary.median,
            r.worse.name(),
            r.summary.show(2)
        );
    }
    s += WHY;
    s += "\n";
    for &v in variants {
        s += &format!("  {}: {}\n", v.name(), v.why());
    }
    s += &render_usl(outcome);
    s
}

fn param(m: &Model, key: &str) -> f64 {
    m.params
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

fn render_usl(outcome: &Outcome) -> String {
    let models: Vec<&Model> = outcome
        .models
        .iter()
        .filter(|m| m.lab == LAB && m.name.starts_with("USL "))
        .collect();
    if models.is_empty() {
        return "\nUSL: one thread count per case, nothing to fit (two give bounds, three or more a fit)\n"
            .to_string();
    }
    let mut s = String::from(
        "\nUniversal Scalability Law, X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); sigma = contention, kappa = coherency\n",
    );
    let mut rows = Vec::new();
    for m in &models {
        let fit = usl::Fit {
            shape: usl::Shape::Full,
            lambda: param(m, "lambda_mops"),
            sigma: param(m, "sigma"),
            kappa: param(m, "kappa"),
            rel_rms: param(m, "rel_rms"),
        };
        let case = m.points.first().map_or(String::new(), |p| {
            p.case
                .get("variant")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        });
        let worst = m.points.iter().map(ModelPoint::error).fold(0.0f64, |a, e| {
            if e.abs() > a.abs() {
                e
            } else {
                a
            }
        });
        let mut row = vec![
            case,
            m.params
                .get("fit")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            format!("{:.1}", fit.lambda),
            format!("{:.4}", fit.sigma),
            format!("{:.5}", fit.kappa),
            fit.peak().map_or("none".to_string(), |p| format!("{p:.1}")),
            format!("{:+.1}%", worst * 100.0 + 0.0).replace("-0.0%", "+0.0%"),
        ];
        row.extend(
            usl::EXTRAPOLATE_TO
                .iter()
                .map(|&n| format!("{:.1}", fit.predict(n as f64))),
        );
        rows.push(row);
    }
    s += &table::render(
        &[
            "case",
            "fit",
            "lambda Mop/s",
            "sigma",
            "kappa",
            "peak T",
            "worst miss",
            "T=8 Mop/s*",
            "T=24*",
            "T=64*",
            "T=128*",
        ],
        &rows,
    );
    s += "\n* model extrapolation from the measured points, not a measurement.\n";
    let full: Vec<&&Model> = models
        .iter()
        .filter(|m| m.params.get("fit") == Some(&json!("full")))
        .collect();
    if !full.is_empty() {
        let rows: Vec<Vec<String>> = full
            .iter()
            .flat_map(|m| m.points.iter())
            .map(|p| {
                vec![
                    p.case
                        .get("variant")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    p.case
                        .get("threads")
                        .map_or(String::new(), Value::to_string),
                    format!("{:.1}", p.measured),
                    format!("{:.1}", p.predicted),
                    format!("{:+.1}%", 100.0 * p.error()),
                ]
            })
            .collect();
        s += "USL fit checked against the measurements:\n";
        s += &table::render(
            &["case", "threads", "measured Mop/s", "USL Mop/s", "miss"],
            &rows,
        );
        s += "\n";
    }
    for m in &models {
        for line in m.verdict.iter().skip(1) {
            s += &format!("model check: {line}\n");
        }
    }
    if models
        .iter()
        .any(|m| m.params.get("fit") != Some(&json!("full")))
    {
        s += "With two thread counts there is one equation for two unknowns: each case gets an upper bound (sigma-only) and a lower bound (kappa-only), not a fit.\n";
    }
    s
}

fn render_c2c(pairs: &[(usize, usize, &ResultRow)]) -> String {
    let mut s = String::from(
        "\nshare c2c: one-way core-to-core latency (ns): a CAS ping-pong of one cache line, round trip / 2, median of samples\n",
    );
    let triples: Vec<(usize, usize, f64)> = pairs
        .iter()
        .map(|(a, b, r)| (*a, *b, r.summary.median))
        .collect();
    let m = c2c::Matrix::from_pairs(&triples);
    let head: Vec<String> = std::iter::once("from \\ to".to_string())
        .chain(m.cpus.iter().map(|c| format!("CPU {c}")))
        .collect();
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    s += &table::render(&head_refs, &m.rows(1));
    s += "\n";
    if pairs.len() <= 32 {
        let rows: Vec<Vec<String>> = pairs
            .iter()
            .map(|(a, b, r)| {
                vec![
                    a.to_string(),
                    b.to_string(),
                    format!("{:.1}", r.summary.median),
                    format!("{:.1}", r.summary.min),
                    format!("{:.1}", r.summary.max),
                    format!("{:.1}", r.summary.mad),
                    r.summary.n.to_string(),
                ]
            })
            .collect();
        s += &table::render(
            &[
                "from",
                "to",
                "median ns",
                "min ns",
                "max ns",
                "MAD ns",
                "samples",
            ],
            &rows,
        );
        s += "\n";
    }
    let levels = c2c::group(&m);
    if triples.len() < 2 {
        s += "groups: one pair only; grouping CPUs by distance needs three or more CPUs\n";
    } else if levels.is_empty() {
        let lo = triples.iter().map(|t| t.2).fold(f64::INFINITY, f64::min);
        let hi = triples.iter().map(|t| t.2).fold(0.0, f64::max);
        s += &format!(
            "groups: none visible: every pair is within {:.1}x of the others ({lo:.0}–{hi:.0} ns), so these CPUs are all the same distance apart\n",
            c2c::GAP
        );
    } else {
        for l in &levels {
            let names: Vec<String> = l
                .groups
                .iter()
                .map(|g| format!("{{{}}}", cpus::format_cpu_list(g)))
                .collect();
            s += &format!(
                "group at <= {:.0} ns: {} (at most {:.0} ns inside, {} between: likely a shared cache or core)\n",
                l.threshold,
                names.join(" "),
                l.inside_max,
                l.between_min
                    .map_or("—".to_string(), |x| format!("from {x:.0} ns"))
            );
        }
    }
    s += "why: every write to a line another core holds waits about this long for the line to come over; a shared refcount or counter pays it on nearly every op.\n";
    s
}

/// The sharing lab for `costlab run`.
pub struct ShareLab;

impl Lab for ShareLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(&self, doc: &crate::report::Doc) -> Vec<crate::report::charts::Chart> {
        vec![
            crate::report::charts::share::chart(doc),
            crate::report::charts::c2c::chart(doc),
        ]
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        None
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let allowed = cpus::allowed_cpus();
        let (threads, spec) = if full {
            (default_threads(allowed.len(), false), ctx.spec.clone())
        } else {
            // About 3 s: every case at T=1 and T=all, short samples.
            let spec = SampleSpec {
                samples: ctx.spec.samples.min(7),
                min_sample: Duration::from_millis(15),
                warmup: Duration::from_millis(15),
            };
            (default_threads(allowed.len(), true), spec)
        };
        let load_before = load_average();
        let mut out = measure_cases(&Variant::ALL, &threads, &allowed, &spec, ctx.counters)?;
        out.notes
            .extend(busy_note(load_before, load_average(), allowed.len()));
        if allowed.len() >= 2 {
            // Quick: the first CPU against every other (one row of the matrix shows the
            // machine's shape: siblings, shared caches, sockets); full: every pair.
            let pairs = if full {
                c2c::pairs(&allowed)
            } else {
                c2c::star_pairs(&allowed)
            };
            let c2c_spec = c2c::C2cSpec::new(None, !full);
            out.extend(measure_c2c(&pairs, &c2c_spec, ctx.counters)?);
            if full {
                out.notes
                    .extend(kernel_cache_sharing(&ctx.machine, &allowed));
            }
        } else {
            out.notes
                .push("c2c skipped: this process may use only one CPU".to_string());
        }
        Ok(out)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}

/// The cost-sheet lines of a share outcome.
pub fn headlines(outcome: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    for r in ratios(outcome) {
        let (label, cause) = if r.better == Variant::ArcPerThread {
            (
                "share: per-thread Arcs vs shared Arcs",
                "each clone/drop of a shared Arc writes the refcount's line, which must move between cores",
            )
        } else {
            (
                "share: padded vs falsely shared counters",
                "counters packed into one line move that line between cores on every add, though no data is shared",
            )
        };
        let reading = if r.threads < 2 {
            format!(
                "{:.2}x at one thread: nothing is shared with one CPU; run on two or more to see the cost",
                r.summary.median
            )
        } else {
            format!(
                "{:.1}x the throughput at {} threads: {cause}",
                r.summary.median, r.threads
            )
        };
        out.push(Headline {
            label: format!("{label} (T={})", r.threads),
            summary: r.summary,
            unit: "x".into(),
            reading,
            ..Default::default()
        });
    }
    if let Some((a, b, row)) = c2c_rows(outcome).into_iter().next() {
        out.push(Headline {
            label: format!("share c2c: one-way latency CPU {a} <-> {b}"),
            summary: row.summary,
            unit: "ns".into(),
            reading: format!(
                "a write to a line CPU {b} holds waits about {:.0} ns for it to come over to CPU {a}",
                row.summary.median
            ),
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: crate::report::model::Case, metric: &str, samples: Vec<f64>) -> ResultRow {
        ResultRow::new(LAB, case, metric, "Mop/s", samples).unwrap()
    }

    fn fake_outcome() -> Outcome {
        let mut o = Outcome::default();
        for (v, x1, x2) in [("arc-shared", 50.0, 20.0), ("arc-per-thread", 50.0, 100.0)] {
            for (t, x) in [(1, x1), (2, x2)] {
                o.results.push(row(
                    crate::case! {"variant" => v, "threads" => t},
                    "throughput",
                    vec![x * 0.99, x, x * 1.01],
                ));
                o.results.push(row(
                    crate::case! {"variant" => v, "threads" => t},
                    "latency",
                    vec![t as f64 * 1e3 / x],
                ));
            }
        }
        o.results.push(row(
            crate::case! {"from" => 0, "to" => 1},
            "latency",
            vec![50.0, 52.0, 51.0],
        ));
        for v in [Variant::ArcShared, Variant::ArcPerThread] {
            o.models.extend(usl_models(v, &o.results));
        }
        o
    }

    #[test]
    fn the_quick_plan_gives_every_headline() {
        let ctx = Ctx {
            machine: crate::machine::Machine::probe(),
            spec: SampleSpec::quick(),
            counters: false,
            quick: true,
            reserve_hugepages: false,
        };
        let t0 = std::time::Instant::now();
        let o = ShareLab.run_plan(&ctx, false).unwrap();
        eprintln!("quick plan took {:?}", t0.elapsed());
        let n = cpus::allowed_cpus().len();
        let per_case = if n >= 2 { 2 } else { 1 };
        let case_rows = o.results.iter().filter(|r| r.case.contains_key("variant"));
        assert_eq!(case_rows.count(), Variant::ALL.len() * per_case * 2);
        let h = ShareLab.headlines(&o);
        assert_eq!(h.len(), if n >= 2 { 3 } else { 2 });
        assert!(h
            .iter()
            .all(|h| h.summary.median > 0.0 && !h.reading.is_empty()));
    }

    #[test]
    fn render_groups_fake_cpus_by_latency() {
        let mut o = Outcome::default();
        for (a, b) in c2c::pairs(&[0, 1, 2, 3]) {
            let lat = if a / 2 == b / 2 { 25.0 } else { 100.0 };
            o.results.push(row(
                crate::case! {"from" => a, "to" => b},
                "latency",
                vec![lat, lat + 1.0],
            ));
        }
        let text = render(&o);
        assert!(text.contains("{0-1} {2-3}"), "{text}");
        assert!(text.contains("CPU 3"));
        assert!(!text.contains("share: T threads"));
    }

    #[test]
    fn busy_machines_are_named() {
        assert!(busy_note(Some(11.5), Some(9.0), 2)
            .unwrap()
            .contains("11.5"));
        assert!(busy_note(Some(1.0), Some(2.5), 2).is_none());
        assert!(busy_note(None, None, 2).is_none());
    }

    #[test]
    fn clean_samples_need_every_worker_running_together() {
        let sample = |ns: f64, per: [f64; 2]| crate::measure::Sample {
            iters: 10,
            ns,
            per_thread_ns: per.to_vec(),
        };
        let samples = [
            sample(100.0, [99.0, 98.0]),  // clean
            sample(100.0, [99.0, 50.0]),  // worker 1 started late
            sample(100.0, [99.0, 99.0]),  // worker 0 was preempted
            sample(100.0, [100.0, 60.0]), // worker 1 finished early: contention, clean
        ];
        let call = |start_ns, on_cpu| Call { start_ns, on_cpu };
        // Calibration calls come first in the logs, then the four samples.
        let calls = vec![
            vec![
                call(0.0, 0.3),
                call(10.0, 1.0),
                call(200.0, 1.0),
                call(400.0, 0.5),
                call(600.0, 1.0),
            ],
            vec![
                call(0.0, 1.0),
                call(12.0, 0.95),
                call(250.0, 1.0),
                call(401.0, 1.0),
                call(601.0, 1.0),
            ],
        ];
        assert_eq!(
            clean_samples(&samples, &calls),
            vec![true, false, false, true]
        );
        // A short log (should not happen) marks nothing clean rather than panicking.
        assert_eq!(
            clean_samples(&samples, &[vec![call(0.0, 1.0)]]),
            vec![false; 4]
        );
    }

    #[test]
    fn default_sweeps() {
        assert_eq!(default_threads(2, false), vec![1, 2]);
        assert_eq!(default_threads(1, false), vec![1]);
        assert_eq!(default_threads(6, false), vec![1, 2, 4, 6]);
        assert_eq!(default_threads(8, false), vec![1, 2, 4, 8]);
        assert_eq!(default_threads(8, true), vec![1, 2, 4, 8]);
        assert_eq!(default_threads(16, true), vec![1, 2, 4, 8, 16]);
    }

    #[test]
    fn two_points_give_two_bound_models_that_match_the_measurements() {
        let o = fake_outcome();
        assert_eq!(o.models.len(), 4);
        let m = &o.models[0];
        assert_eq!(m.params["fit"], json!("sigma-only bound"));
        // X(2)/X(1) = 0.4: sigma + 2 kappa = 4.
        assert!((param(m, "sigma") - 4.0).abs() < 1e-6);
        assert!((param(&o.models[1], "kappa") - 2.0).abs() < 1e-6);
        for m in &o.models {
            assert_eq!(m.points.len(), 2);
            assert!(m.points.iter().all(|p| p.error().abs() < 1e-6), "{m:?}");
        }
    }

    #[test]
    fn ratios_and_headlines_read_the_top_thread_count() {
        let o = fake_outcome();
        let r = ratios(&o);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].threads, 2);
        assert!((r[0].summary.median - 5.0).abs() < 1e-9);
        let h = headlines(&o);
        assert_eq!(h.len(), 2);
        assert!(h[0].reading.contains("5.0x") && h[0].reading.contains("refcount"));
        assert_eq!(h[1].unit, "ns");
        assert_eq!(h[1].summary.median, 51.0);
    }

    #[test]
    fn render_shows_cases_models_and_matrix() {
        let text = render(&fake_outcome());
        for want in [
            "arc-per-thread",
            "efficiency vs T=1",
            "20%",
            "5.00x",
            "model extrapolation",
            "upper bound",
            "from \\ to",
            "groups: one pair only",
            "why:",
        ] {
            assert!(text.contains(want), "missing '{want}' in:\n{text}");
        }
    }
}
