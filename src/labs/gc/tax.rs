//! The language taxes, three ways.
//!
//! - `attribution` (the headline, as Biscuit measured it): the share of a running
//!   workload's CPU profile samples that fall in GC work, prologues, write barriers and
//!   safety checks (see `attrib`).
//! - `ab`: each tax the ratio of two builds or variants taken side by side: bounds checks
//!   (plain build vs -gcflags=-B, processes alternated), the stack-check prologue (a caller
//!   with and without //go:nosplit in one binary), and the write barrier (pointer stores
//!   while a GC cycle marks vs while none runs, in one process).
//! - `aa`: the same pairs with nothing removed, only the code moved (the plain build vs
//!   its layout-shifted twin; two copies of the same checked caller): the noise floor an
//!   A/B difference must clear.

use anyhow::Result;

use super::attrib::{self, Class};
use super::bench::{self, BarrierRun, BoundsRun, Build, ProfileRun, PrologueRun};
use super::LAB;
use crate::error::usage;
use crate::measure::conditions::Watch;
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

/// How a tax is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Attribution,
    Ab,
    Aa,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Attribution => "attribution",
            Method::Ab => "ab",
            Method::Aa => "aa",
        }
    }
}

pub fn parse_methods(text: &str) -> anyhow::Result<Vec<Method>> {
    let mut out: Vec<Method> = Vec::new();
    for m in parse_list(text, |item| {
        match item {
        "attribution" => Ok(Method::Attribution),
        "ab" => Ok(Method::Ab),
        "aa" => Ok(Method::Aa),
        other => Err(usage(format!(
            "bad tax method '{other}': use attribution (CPU profile), ab (two builds) or aa (the same build moved)"
        ))),
    }
    })? {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// The workloads profiled for attribution.
pub const WORKLOADS: [&str; 2] = ["heap", "server"];

pub fn parse_workloads(text: &str) -> anyhow::Result<Vec<&'static str>> {
    let mut out: Vec<&'static str> = Vec::new();
    for w in parse_list(text, |item| {
        WORKLOADS.iter().copied().find(|w| *w == item).ok_or_else(|| {
            usage(format!(
                "bad workload '{item}': use heap (the vnode heap builder) or server (requests over loopback)"
            ))
        })
    })? {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

/// What `costlab gc tax` measures.
#[derive(Debug, Clone)]
pub struct TaxConfig {
    pub methods: Vec<Method>,
    /// The A/B (and A/A) kinds.
    pub kinds: Vec<Kind>,
    pub workloads: Vec<&'static str>,
    /// A/B and A/A pairs per kind.
    pub reps: usize,
    /// Attribution: profiled processes per workload, and seconds each.
    pub procs: usize,
    pub seconds: f64,
    /// Live heap of the heap workload and the write-barrier kernel.
    pub live: u64,
}

/// The profiling rate asked of runtime/pprof (samples per CPU-second). The kernel checks
/// the CPU-time timers behind it at its tick, so what a thread gets is at most HZ (250 on
/// this machine's kernel): asking more is harmless, and the output says what was got.
pub const PROFILE_HZ: u64 = 1000;

/// The rate asked of perf's cpu-clock (samples per CPU-second), capped by the kernel's
/// perf_event_max_sample_rate: enough that the smallest taxes (write barriers, well under
/// 1%) get a thousand samples from a few processes of ten seconds.
pub const PERF_HZ: u64 = 20_000;

/// Seconds the workload runs unsampled before each window.
pub const WARMUP_S: f64 = 1.0;

/// How the CPU samples are taken.
#[derive(Debug, Clone)]
pub enum Sampler {
    /// `perf record -e cpu-clock -F hz` (the program at hand, perf's path).
    Perf { perf: std::path::PathBuf, hz: u64 },
    /// runtime/pprof, and why perf is not used.
    Pprof { why: String },
}

impl Sampler {
    pub fn describe(&self) -> String {
        match self {
            Sampler::Perf { hz, .. } => {
                format!("perf record -e cpu-clock -F {hz} (software event, frame-pointer stacks)")
            }
            Sampler::Pprof { why } => {
                format!("runtime/pprof at {PROFILE_HZ} Hz asked (fallback: {why})")
            }
        }
    }
}

/// perf when it is on PATH and may sample here (a short probe run), else pprof with the
/// reason. COSTLAB_GC_SAMPLER=pprof forces the fallback.
pub fn choose_sampler() -> Sampler {
    if std::env::var("COSTLAB_GC_SAMPLER").is_ok_and(|v| v == "pprof") {
        return Sampler::Pprof {
            why: "COSTLAB_GC_SAMPLER=pprof".to_string(),
        };
    }
    let Some(perf) = crate::measure::perf::find() else {
        return Sampler::Pprof {
            why: "perf is not on PATH (apt-get install linux-perf)".to_string(),
        };
    };
    let hz = crate::measure::perf::rate(PERF_HZ);
    let dir = std::env::temp_dir().join(format!("costlab-perf-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let out = std::process::Command::new(&perf)
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            &hz.to_string(),
            "-o",
        ])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Ok(o) if o.status.success() => Sampler::Perf { perf, hz },
        Ok(o) => Sampler::Pprof {
            why: format!(
                "perf record failed here ({}); see /proc/sys/kernel/perf_event_paranoid",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no message")
                    .trim()
            ),
        },
        Err(e) => Sampler::Pprof {
            why: format!("perf did not start ({e})"),
        },
    }
}

/// One profiled process under perf: the program turns sampling on after its warm-up and
/// off at the window's end through perf's control fifos; the samples are read back with
/// `perf script` and classified as they stream.
fn perf_process(
    perf: &std::path::Path,
    hz: u64,
    bin: &std::path::Path,
    args: &[String],
    map: &attrib::ClassMap,
) -> Result<(ProfileRun, [u64; 5])> {
    use anyhow::Context;
    use std::io::BufReader;
    use std::process::{Command, Stdio};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "costlab-perf-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = (|| {
        let (ctl, ack, data) = (dir.join("ctl"), dir.join("ack"), dir.join("perf.data"));
        for f in [&ctl, &ack] {
            rustix::fs::mkfifoat(rustix::fs::CWD, f, rustix::fs::Mode::from_raw_mode(0o600))
                .with_context(|| format!("mkfifo {}", f.display()))?;
        }
        let mut all: Vec<String> = vec![
            "record".into(),
            "-q".into(),
            "-e".into(),
            "cpu-clock".into(),
            "-F".into(),
            hz.to_string(),
            "--call-graph".into(),
            "fp".into(),
            "--user-callchains".into(),
            "--control".into(),
            format!("fifo:{},{}", ctl.display(), ack.display()),
            "-D".into(),
            "-1".into(),
            "-o".into(),
            data.display().to_string(),
            "--".into(),
            bin.display().to_string(),
            "-sampler".into(),
            "perf".into(),
            "-perf-ctl".into(),
            ctl.display().to_string(),
            "-perf-ack".into(),
            ack.display().to_string(),
        ];
        all.extend(args.iter().cloned());
        let run: ProfileRun = bench::parse(&bench::run(perf, &all, &[])?)?;
        let mut child = Command::new(perf)
            .args(["script", "-F", "period,ip,sym,symoff", "--no-inline", "-i"])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting perf script")?;
        let counts = attrib::attribute_perf(
            map,
            BufReader::new(child.stdout.take().context("perf script's output")?),
        );
        let status = child.wait()?;
        if !status.success() {
            anyhow::bail!("perf script -i {} failed ({status})", data.display());
        }
        Ok((run, counts?))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
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

/// The attribution workloads' live heap at most: small enough that a window holds many GC
/// cycles (a window of a few cycles moves the GC share by where it falls in them).
pub const ATTRIB_LIVE: u64 = 64 << 20;

/// Samples each side of the bounds ratio takes inside one process.
const INNER_REPS: usize = 5;

/// Ratios as overhead percentages: (a / b - 1) x 100.
pub fn overhead(a: &[f64], b: &[f64]) -> Vec<f64> {
    paired_ratios(a, b)
        .into_iter()
        .map(|r| (r - 1.0) * 100.0)
        .collect()
}

/// Measure the taxes `cfg` asks for.
pub fn measure(cfg: &TaxConfig) -> Result<Outcome> {
    // Find (or build) the program before anything is printed: a missing toolchain is then
    // the run's one line.
    bench::locate(Build::Plain)?;
    let mut o = Outcome::default();
    if cfg.methods.contains(&Method::Attribution) {
        attribution(&mut o, cfg)?;
    }
    let ab = cfg.methods.contains(&Method::Ab);
    let aa = cfg.methods.contains(&Method::Aa);
    for &k in &cfg.kinds {
        crate::measure::cancel::check()?;
        crate::report::progress::note(&format!("gc tax: {}", k.name()));
        let mark = o.results.len();
        let w = Watch::start(&[]);
        match k {
            Kind::Bounds => bounds(&mut o, cfg.reps, ab, aa)?,
            Kind::Prologue => prologue(&mut o, cfg.reps, ab, aa)?,
            Kind::WriteBarrier if ab => write_barrier(&mut o, cfg.reps, cfg.live)?,
            Kind::WriteBarrier => {}
        }
        o.attach_conditions(mark, w.finish());
    }
    if aa && cfg.kinds.contains(&Kind::WriteBarrier) {
        o.notes.push("write-barrier: no A/A pair (its two sides are one binary's two GC states, not two builds); its int-store control is in the note above".to_string());
    }
    for line in resolution(&o) {
        o.notes.push(line);
    }
    Ok(o)
}

fn push(o: &mut Outcome, m: Method, k: Kind, samples: Vec<f64>) {
    o.push(
        LAB,
        crate::case! {"method" => m.name(), "kind" => k.name()},
        "overhead",
        "%",
        samples,
    );
}

/// Per kind with both an A/B and an A/A row: whether the A/B difference clears the A/A
/// noise (the largest |difference| the same code, moved, showed).
pub fn resolution(o: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    for k in [Kind::Bounds, Kind::Prologue] {
        let find = |m: Method| {
            o.results.iter().find(|r| {
                r.metric == "overhead" && r.key("method") == m.name() && r.key("kind") == k.name()
            })
        };
        let (Some(ab), Some(aa)) = (find(Method::Ab), find(Method::Aa)) else {
            continue;
        };
        let noise = aa.summary.min.abs().max(aa.summary.max.abs());
        let verdict = if ab.summary.median.abs() <= noise {
            "the A/B difference is within the A/A noise: this pair cannot resolve the tax"
        } else {
            "the A/B difference is larger than the A/A noise"
        };
        out.push(format!(
            "{}: A/B {:.1}% (median), A/A {:.1}% to {:.1}% (same code, layout moved): {verdict}",
            k.name(),
            ab.summary.median,
            aa.summary.min,
            aa.summary.max
        ));
    }
    out
}

/// The tax by attribution: `cfg.procs` profiled processes per workload.
fn attribution(o: &mut Outcome, cfg: &TaxConfig) -> Result<()> {
    let bin = bench::locate(Build::Plain)?;
    let Some(go) = bench::find_go() else {
        o.notes.push("attribution: skipped: it classifies samples against `go tool objdump`, and `go` is not on PATH".to_string());
        return Ok(());
    };
    crate::report::progress::note("gc tax: disassembling gcbench (go tool objdump)");
    let map = attrib::class_map_of(&go, &bin.path)?;
    let counts = map.counts();
    o.notes.push(format!(
        "attribution: gcbench's disassembly has {} instructions: {}",
        counts.iter().sum::<u64>(),
        Class::ALL
            .iter()
            .zip(counts)
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let sampler = choose_sampler();
    o.notes
        .push(format!("attribution: sampler {}", sampler.describe()));
    for &w in &cfg.workloads {
        let mark = o.results.len();
        let watch = Watch::start(&[]);
        let mut per_proc: Vec<[u64; 5]> = Vec::new();
        let mut runs: Vec<ProfileRun> = Vec::new();
        for p in 0..cfg.procs {
            crate::measure::cancel::check()?;
            crate::report::progress::note(&format!(
                "gc tax: profiling the {w} workload, process {}/{} ({} s)",
                p + 1,
                cfg.procs,
                cfg.seconds
            ));
            let hz = match &sampler {
                Sampler::Perf { hz, .. } => *hz,
                Sampler::Pprof { .. } => PROFILE_HZ,
            };
            let mut args = vec![
                "-live".to_string(),
                ATTRIB_LIVE.min(cfg.live).to_string(),
                "-seconds".to_string(),
                cfg.seconds.to_string(),
                "-warmup".to_string(),
                WARMUP_S.to_string(),
                "-hz".to_string(),
                hz.to_string(),
            ];
            let (run, counts) = match &sampler {
                Sampler::Perf { perf, hz } => {
                    args.extend(["profile".to_string(), w.to_string()]);
                    perf_process(perf, *hz, &bin.path, &args, &map)?
                }
                Sampler::Pprof { .. } => {
                    args.extend([
                        "-sampler".to_string(),
                        "pprof".to_string(),
                        "profile".to_string(),
                        w.to_string(),
                    ]);
                    let run: ProfileRun = bench::parse(&bench::run(&bin.path, &args, &[])?)?;
                    let c = attrib::attribute(&map, &run.stacks);
                    (run, c)
                }
            };
            per_proc.push(counts);
            runs.push(run);
        }
        push_attribution(o, w, &per_proc);
        o.attach_conditions(mark, watch.finish());
        o.notes
            .extend(attribution_notes(w, &per_proc, &runs, &sampler));
    }
    o.notes.push(format!(
        "attribution classes: {}",
        Class::ALL
            .iter()
            .map(|c| format!("{}: {}", c.name(), c.means()))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    Ok(())
}

/// Rows for one workload: per class, each process's share (%) and sample count.
pub fn push_attribution(o: &mut Outcome, workload: &str, per_proc: &[[u64; 5]]) {
    for (i, c) in Class::ALL.iter().enumerate() {
        let case =
            crate::case! {"method" => "attribution", "workload" => workload, "kind" => c.name()};
        let shares: Vec<f64> = per_proc
            .iter()
            .filter(|p| p.iter().sum::<u64>() > 0)
            .map(|p| 100.0 * p[i] as f64 / p.iter().sum::<u64>() as f64)
            .collect();
        o.push(LAB, case.clone(), "cpu_share", "%", shares);
        o.push(
            LAB,
            case,
            "profile_samples",
            "count",
            per_proc.iter().map(|p| p[i] as f64).collect(),
        );
    }
}

/// (class, its samples, all samples, share %, 95% interval in %).
pub type Pooled = (Class, u64, u64, f64, (f64, f64));

/// The pooled share of each class with its 95% interval, for notes and the table.
pub fn pooled(per_proc: &[[u64; 5]]) -> Vec<Pooled> {
    let total: u64 = per_proc.iter().flatten().sum();
    Class::ALL
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let k: u64 = per_proc.iter().map(|p| p[i]).sum();
            let share = if total > 0 {
                100.0 * k as f64 / total as f64
            } else {
                0.0
            };
            (c, k, total, share, attrib::wilson(k, total))
        })
        .collect()
}

fn attribution_notes(
    w: &str,
    per_proc: &[[u64; 5]],
    runs: &[ProfileRun],
    sampler: &Sampler,
) -> Vec<String> {
    let mut out = Vec::new();
    let shares: Vec<String> = pooled(per_proc)
        .iter()
        .map(|(c, k, _, share, (lo, hi))| {
            format!("{} {share:.2}% [{lo:.2}, {hi:.2}] ({k} samples)", c.name())
        })
        .collect();
    let samples: u64 = per_proc.iter().flatten().sum();
    let cpu: f64 = runs.iter().map(|r| r.cpu_s).sum();
    let wall: f64 = runs.iter().map(|r| r.wall_s).sum();
    out.push(format!(
        "attribution {w}: pooled over {} processes, {samples} samples: {} (95% binomial intervals)",
        runs.len(),
        shares.join(", ")
    ));
    if let Some(first) = runs.first() {
        let runtime_gc = median(
            &runs
                .iter()
                .map(|r| r.gc_cpu_share * 100.0)
                .collect::<Vec<_>>(),
        );
        let limit = match sampler {
            Sampler::Perf { .. } => "perf's software cpu-clock event",
            Sampler::Pprof { .. } => {
                "pprof: the kernel checks CPU-time timers at its tick, so a thread gets at most HZ"
            }
        };
        out.push(format!(
            "attribution {w}: sampler {}, rate asked {} Hz per CPU-second, got {:.0} ({samples} samples over {cpu:.1} CPU-s, {wall:.1} s wall, after {WARMUP_S} s unsampled warm-up, from one GC cycle's end to another's; {limit}); the runtime's own GC accounting says {runtime_gc:.1}% ({})",
            if matches!(sampler, Sampler::Perf { .. }) { "perf" } else { "pprof" },
            first.hz_asked,
            if cpu > 0.0 { samples as f64 / cpu } else { 0.0 },
            first.go_version
        ));
    }
    out
}

fn show(v: &[f64], prec: usize) -> String {
    Summary::of(v).map_or("—".to_string(), |s| s.show(prec))
}

fn bounds(o: &mut Outcome, reps: usize, ab: bool, aa: bool) -> Result<()> {
    if ab {
        bounds_pair(o, reps, Build::NoBounds)?;
    }
    if aa {
        bounds_pair(o, reps, Build::Shifted)?;
    }
    Ok(())
}

/// The bounds kernel, the plain build against `other` (-B, or the layout-shifted twin).
fn bounds_pair(o: &mut Outcome, reps: usize, other: Build) -> Result<()> {
    let plain = bench::locate(Build::Plain)?;
    let unchecked = match bench::locate(other) {
        Ok(b) => b,
        Err(e) => {
            let (what, suffix) = if other == Build::Shifted {
                ("layout-shifted (A/A)", "-shifted")
            } else {
                ("-gcflags=-B", "-nobounds")
            };
            o.notes.push(format!(
                "bounds: no {what} build ({e}); set COSTLAB_GCBENCH's {suffix} sibling or install Go"
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
            if run.bounds_checked != (is_plain || other == Build::Shifted) {
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
    if other == Build::Shifted {
        o.notes.push(format!(
            "bounds A/A: {} ns per iteration, {} in the layout-shifted twin (same source plus one unused function laid out first; {reps} process pairs)",
            show(&checked_ns, 3),
            show(&unchecked_ns, 3)
        ));
        push(
            o,
            Method::Aa,
            Kind::Bounds,
            overhead(&unchecked_ns, &checked_ns),
        );
        return Ok(());
    }
    o.notes.push(format!(
        "bounds: {} ns per iteration checked, {} with -B (thread CPU time; medians of {INNER_REPS} per process, {reps} process pairs)",
        show(&checked_ns, 3),
        show(&unchecked_ns, 3)
    ));
    push(
        o,
        Method::Ab,
        Kind::Bounds,
        overhead(&checked_ns, &unchecked_ns),
    );
    Ok(())
}

fn prologue(o: &mut Outcome, reps: usize, ab: bool, aa: bool) -> Result<()> {
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
    if ab {
        push(
            o,
            Method::Ab,
            Kind::Prologue,
            overhead(&run.checked_ns, &run.nosplit_ns),
        );
    }
    if aa && !run.checked1_ns.is_empty() {
        push(
            o,
            Method::Aa,
            Kind::Prologue,
            overhead(&run.checked2_ns, &run.checked1_ns),
        );
    }
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
        Method::Ab,
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
