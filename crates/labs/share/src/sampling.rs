//! Taking the share lab's samples: the thread-count sweep over the cases, keeping only the
//! samples in which every worker stayed on its CPU, and the core-to-core pairs.

use super::*;

pub(super) fn measure_cases(
    variants: &[Variant],
    threads: &[usize],
    allowed: &[usize],
    spec: &SampleSpec,
    with_counters: bool,
    retry: &RetryBudget,
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
            let case_out = judged_case(&what, &team_cpus, retry, || {
                let (taken, readings) =
                    counters::around(with_counters, || take_samples(&bench, &team_cpus, spec))?;
                let mut o = Outcome::default();
                o.notes.extend((!taken.clean).then(|| what.clone()));
                clean_total += taken.kept_clean;
                taken_total += taken.taken;
                let samples = taken.samples;
                let case = || costlab_core::case! {"variant" => v.name(), "threads" => t};
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
pub(super) const ON_CPU: f64 = 0.9;

/// Samples of one case, and whether they are the clean ones.
pub(super) struct Taken {
    pub(super) samples: Vec<costlab_core::measure::Sample>,
    /// Clean samples kept, and samples taken in all.
    pub(super) kept_clean: usize,
    pub(super) taken: usize,
    pub(super) clean: bool,
}

/// Take the case's samples, keeping those in which every worker stayed on its CPU: shared
/// lines only cost while the threads run at the same time, so a sample in which the
/// scheduler ran someone else on one CPU measures the scheduler. Short samples (at most
/// 5 ms, well past the clock's resolution) fit between preemptions; on a busy machine up
/// to three rounds are taken to find enough clean ones.
pub(super) fn take_samples(bench: &Bench, team_cpus: &[usize], spec: &SampleSpec) -> Result<Taken> {
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
pub(super) struct Call {
    pub(super) start_ns: f64,
    pub(super) on_cpu: f64,
}

/// Which samples are clean: every worker on its CPU through its own run, and all starting
/// together (a worker preempted at the barrier starts late, and the others run alone until
/// it comes). `calls` holds each worker's calls, the timed samples last. A worker that
/// finishes early is fine: that is the unfairness of contention, not the scheduler.
pub(super) fn clean_samples(
    samples: &[costlab_core::measure::Sample],
    calls: &[Vec<Call>],
) -> Vec<bool> {
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

pub(super) fn measure_c2c(
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
            costlab_core::case! {"from" => a, "to" => b},
            "latency",
            "ns",
            samples,
        );
        if let Some(spread) = figs.address_spread_pct() {
            out.push(
                LAB,
                costlab_core::case! {"from" => a, "to" => b},
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
