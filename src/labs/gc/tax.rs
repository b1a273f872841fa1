//! The language taxes, three ways.
//!
//! - `attribution` (the headline, as Biscuit measured it): the share of a running
//!   workload's CPU profile samples that fall in GC work, prologues, write barriers,
//!   safety checks, the loads checks fold in, and the kernel (see `attrib`), of all CPU and
//!   of user-mode CPU. It is cross-validated in the same run: the workload is also run
//!   built with -gcflags=-B (the A/B: what removing the bounds checks saves per operation)
//!   and as its layout-shifted twin (the A/A: what moving the same code changes), processes
//!   interleaved, and the attributed share is set beside the A/B difference.
//! - `ab`: each tax the ratio of two builds or variants taken side by side: bounds checks
//!   (plain build vs -gcflags=-B, processes alternated), the stack-check prologue (a caller
//!   with and without //go:nosplit in one binary), and the write barrier (pointer stores
//!   while a GC cycle marks vs while none runs, in one process).
//! - `aa`: the same pairs with nothing removed, only the code moved (the plain build vs
//!   its layout-shifted twin; two copies of the same checked caller): the noise floor an
//!   A/B difference must clear.

use std::collections::{BTreeSet, HashMap};

use anyhow::Result;

use super::attrib::{self, Class, ClassMap, Counts, SymTab, Tally};
use super::bench::{self, BarrierRun, BoundsRun, Build, ProfileRun, PrologueRun};
use super::LAB;
use crate::error::usage;
use crate::measure::conditions::Watch;
use crate::measure::sizes::{human_size, parse_list};
use crate::measure::stats::{median, paired_ratios};
use crate::measure::Summary;
use crate::report::{Model, ModelPoint, Outcome};

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
    /// Attribution: profiled processes per workload and build, seconds each sampled, and
    /// seconds each runs unsampled first.
    pub procs: usize,
    pub seconds: f64,
    pub warmup: f64,
    /// Attribution: the rate asked of perf (samples per CPU-second).
    pub perf_hz: u64,
    /// Attribution: also run the -B build and the layout-shifted twin (the A/B cross-check
    /// and its A/A control), interleaved with the plain build.
    pub cross_check: bool,
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

/// Seconds the workload runs unsampled before each window, by default.
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

/// perf at `hz` (capped by the kernel) when it is on PATH and may sample here (a short
/// probe run), else pprof with the reason. COSTLAB_GC_SAMPLER=pprof forces the fallback.
pub fn choose_sampler(hz: u64) -> Sampler {
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
    let hz = crate::measure::perf::rate(hz);
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
/// `perf script` (cpumode, period, the user call chain) and tallied as they stream.
fn perf_process(
    perf: &std::path::Path,
    hz: u64,
    bin: &std::path::Path,
    args: &[String],
) -> Result<(ProfileRun, Tally)> {
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
        // --user-callchains: the kernel's frames are not needed (a kernel-mode sample is
        // kernel time whatever it did there, and perf's cpumode says which it was).
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
            .args([
                "script",
                "-F",
                "misc,period,ip,sym,symoff",
                "--no-inline",
                "-i",
            ])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting perf script")?;
        let tally = attrib::tally_perf(BufReader::new(
            child.stdout.take().context("perf script's output")?,
        ));
        let status = child.wait()?;
        if !status.success() {
            anyhow::bail!("perf script -i {} failed ({status})", data.display());
        }
        Ok((run, tally?))
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
    // The kinds' pairs are the ab and aa methods: attribution alone runs none of them.
    let kinds: &[Kind] = if ab || aa { &cfg.kinds } else { &[] };
    for &k in kinds {
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
    if aa && kinds.contains(&Kind::WriteBarrier) {
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

/// One profiled process: its run and its samples.
struct Profiled {
    build: Build,
    run: ProfileRun,
    tally: Tally,
}

/// The tax by attribution: per workload, `cfg.procs` rounds of profiled processes, each
/// round the plain build and (with the cross-check) the -B build and the layout-shifted
/// twin, in an order that rotates from round to round.
fn attribution(o: &mut Outcome, cfg: &TaxConfig) -> Result<()> {
    let plain = bench::locate(Build::Plain)?;
    let Some(go) = bench::find_go() else {
        o.notes.push("attribution: skipped: it classifies samples against `go tool objdump`, and `go` is not on PATH".to_string());
        return Ok(());
    };
    let mut builds = vec![(Build::Plain, plain.path)];
    if cfg.cross_check {
        match (bench::locate(Build::NoBounds), bench::locate(Build::Shifted)) {
            (Ok(b), Ok(s)) => {
                builds.push((Build::NoBounds, b.path));
                builds.push((Build::Shifted, s.path));
            }
            (Err(e), _) | (_, Err(e)) => o.notes.push(format!(
                "attribution: no A/B cross-check: a build is missing ({e}); `costlab gc build` makes them"
            )),
        }
    }
    let sampler = choose_sampler(cfg.perf_hz);
    o.notes
        .push(format!("attribution: sampler {}", sampler.describe()));
    let mut symtabs: HashMap<Build, SymTab> = HashMap::new();
    let mut checks: Vec<CrossCheck> = Vec::new();
    for &w in &cfg.workloads {
        let mark = o.results.len();
        let watch = Watch::start(&[]);
        let mut procs: Vec<Profiled> = Vec::new();
        for round in 0..cfg.procs {
            for k in 0..builds.len() {
                let (build, path) = &builds[(round + k) % builds.len()];
                crate::measure::cancel::check()?;
                crate::report::progress::note(&format!(
                    "gc tax: profiling the {w} workload, {} build, round {}/{} ({} s)",
                    build.describe(),
                    round + 1,
                    cfg.procs,
                    cfg.seconds
                ));
                let (run, tally) = profile(&sampler, &go, path, *build, w, cfg, &mut symtabs)?;
                procs.push(Profiled {
                    build: *build,
                    run,
                    tally,
                });
            }
        }
        // Each build's disassembly, of the functions its samples fell in.
        let mut maps: HashMap<Build, ClassMap> = HashMap::new();
        for (build, path) in &builds {
            let syms: BTreeSet<String> = procs
                .iter()
                .filter(|p| p.build == *build)
                .flat_map(|p| p.tally.leaf_symbols())
                .collect();
            maps.insert(*build, attrib::class_map_of(&go, path, &syms)?);
        }
        let counts: Vec<Counts> = procs
            .iter()
            .map(|p| maps[&p.build].classify(&p.tally))
            .collect();
        // The attributed shares: the builds with checks (the plain build and its
        // layout-shifted twin are the same code, placed differently).
        let checked: Vec<usize> = (0..procs.len())
            .filter(|&i| procs[i].build != Build::NoBounds)
            .collect();
        let per_proc: Vec<Counts> = checked.iter().map(|&i| counts[i]).collect();
        push_attribution(o, w, &per_proc);
        let runs: Vec<&ProfileRun> = checked.iter().map(|&i| &procs[i].run).collect();
        o.notes
            .extend(attribution_notes(w, &per_proc, &runs, &sampler));
        let plain_tallies: Vec<&Tally> = procs
            .iter()
            .filter(|p| p.build == Build::Plain)
            .map(|p| &p.tally)
            .collect();
        let map = &maps[&Build::Plain];
        let sites: Vec<String> = [Class::Safety, Class::Memory]
            .iter()
            .map(|&c| {
                let top = map.sites(&plain_tallies, c, 3);
                let list = if top.is_empty() {
                    "none".to_string()
                } else {
                    top.iter()
                        .map(|(at, n)| format!("{at} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!("{}'s: {list}", c.name())
            })
            .collect();
        o.notes.push(format!(
            "attribution {w}: where samples fell (plain build, instruction and samples): {}; disassembled {} sampled functions",
            sites.join("; "),
            map.functions()
        ));
        if builds.len() > 1 {
            let cc = CrossCheck::of(w, &procs, &counts);
            cc.push_rows(o);
            checks.push(cc);
        }
        o.attach_conditions(mark, watch.finish());
    }
    if !checks.is_empty() {
        o.models.push(cross_check_model(&checks));
        for cc in &checks {
            o.notes.push(cc.note());
        }
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

/// Run one process of `workload` from `bin` under the sampler; its samples tallied.
fn profile(
    sampler: &Sampler,
    go: &std::path::Path,
    bin: &std::path::Path,
    build: Build,
    workload: &str,
    cfg: &TaxConfig,
    symtabs: &mut HashMap<Build, SymTab>,
) -> Result<(ProfileRun, Tally)> {
    let hz = match sampler {
        Sampler::Perf { hz, .. } => *hz,
        Sampler::Pprof { .. } => PROFILE_HZ,
    };
    let mut args = vec![
        "-live".to_string(),
        ATTRIB_LIVE.min(cfg.live).to_string(),
        "-seconds".to_string(),
        cfg.seconds.to_string(),
        "-warmup".to_string(),
        cfg.warmup.to_string(),
        "-hz".to_string(),
        hz.to_string(),
    ];
    match sampler {
        Sampler::Perf { perf, hz } => {
            args.extend(["profile".to_string(), workload.to_string()]);
            perf_process(perf, *hz, bin, &args)
        }
        Sampler::Pprof { .. } => {
            args.extend([
                "-sampler".to_string(),
                "pprof".to_string(),
                "profile".to_string(),
                workload.to_string(),
            ]);
            let run: ProfileRun = bench::parse(&bench::run(bin, &args, &[])?)?;
            let syms = match symtabs.entry(build) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(attrib::symtab_of(go, bin)?)
                }
            };
            let tally = attrib::tally_pprof(syms, &run.stacks);
            Ok((run, tally))
        }
    }
}

/// Rows for one workload: per class, each process's share (%) of all CPU and of user-mode
/// CPU (`of` = user; kernel has none), and its sample count.
pub fn push_attribution(o: &mut Outcome, workload: &str, per_proc: &[Counts]) {
    for (i, c) in Class::ALL.iter().enumerate() {
        let case =
            crate::case! {"method" => "attribution", "workload" => workload, "kind" => c.name()};
        let share = |total: fn(&Counts) -> u64| -> Vec<f64> {
            per_proc
                .iter()
                .filter(|p| total(p) > 0)
                .map(|p| 100.0 * p[i] as f64 / total(p) as f64)
                .collect()
        };
        o.push(
            LAB,
            case.clone(),
            "cpu_share",
            "%",
            share(|p| p.iter().sum()),
        );
        if *c != Class::Kernel {
            let mut user = case.clone();
            user.insert("of".to_string(), serde_json::json!("user"));
            o.push(
                LAB,
                user,
                "cpu_share",
                "%",
                share(|p| p.iter().sum::<u64>() - p[Class::Kernel.index()]),
            );
        }
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

/// The pooled share of each class of all CPU, with its 95% interval.
pub fn pooled(per_proc: &[Counts]) -> Vec<Pooled> {
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
    per_proc: &[Counts],
    runs: &[&ProfileRun],
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
    let kernel: u64 = per_proc.iter().map(|p| p[Class::Kernel.index()]).sum();
    let cpu: f64 = runs.iter().map(|r| r.cpu_s).sum();
    let sys: f64 = runs.iter().map(|r| r.cpu_sys_s).sum();
    let wall: f64 = runs.iter().map(|r| r.wall_s).sum();
    out.push(format!(
        "attribution {w}: pooled over {} processes (the plain build{}), {samples} samples, shares of all CPU: {} (95% binomial intervals); of user-mode CPU, divide by {:.3} (1 - the kernel's share)",
        runs.len(),
        if runs.len() > 1 { " and its layout-shifted twin" } else { "" },
        shares.join(", "),
        if samples > 0 { 1.0 - kernel as f64 / samples as f64 } else { 1.0 }
    ));
    if cpu > 0.0 && samples > 0 && matches!(sampler, Sampler::Perf { .. }) {
        out.push(format!(
            "attribution {w}: kernel mode took {:.1}% of the samples and {:.1}% of the CPU time by getrusage (user {:.2} s, kernel {sys:.2} s): the kernel class is the time spent there, not a guess",
            100.0 * kernel as f64 / samples as f64,
            100.0 * sys / cpu,
            cpu - sys
        ));
    }
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
                "pprof: the kernel checks CPU-time timers at its tick, so a thread gets at most HZ; kernel time is the samples delivered on a syscall's return"
            }
        };
        out.push(format!(
            "attribution {w}: sampler {}, rate asked {} Hz per CPU-second, got {:.0} ({samples} samples over {cpu:.1} CPU-s, {wall:.1} s wall, after {} s unsampled warm-up, from one GC cycle's end to another's; {limit}); the runtime's own GC accounting says {runtime_gc:.1}% ({})",
            if matches!(sampler, Sampler::Perf { .. }) { "perf" } else { "pprof" },
            first.hz_asked,
            if cpu > 0.0 { samples as f64 / cpu } else { 0.0 },
            first.warmup_s,
            first.go_version
        ));
    }
    out
}

/// The attribution's cross-check for one workload: what the classifier charges to safety
/// beside what building without bounds checks saves, with the A/A control's noise.
///
/// Both sides are taken of user-mode CPU, where the checks run, and the A/B difference is
/// package main's time per operation: the server's kernel time per request (loopback TCP,
/// wakeups) and the scheduler's spinning move from process to process by more than the
/// checks cost, and no build changes them. The -B build removes package main's bounds checks
/// only (the runtime's are compiled once for both builds, and nil, divide and shift checks
/// stay), so what attribution predicts it saves is safety's share in the plain build less
/// its share in the -B build, both classified by their own disassembly.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossCheck {
    pub workload: String,
    /// Safety's pooled share of user-mode CPU (%) in the builds with checks, and in the
    /// -B build (what -B leaves).
    pub checked: f64,
    pub unchecked: f64,
    /// Per round, % of the plain build's user-mode CPU per operation that the -B build
    /// saves in package main (A/B) and that the layout-shifted twin saves there (A/A: the
    /// same code, moved).
    pub ab: Vec<f64>,
    pub aa: Vec<f64>,
}

/// What a verdict on a cross-check says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// The attributed saving lies within the A/B difference's interval.
    Agrees,
    /// Neither the attribution nor the A/B difference clears the A/A noise.
    BothBelowNoise,
    /// They disagree by more than the noise.
    Gap,
    /// No A/A control and a single round: no interval.
    Unjudged,
}

impl CrossCheck {
    /// From one workload's processes (in run order, `counts` their classes): rounds are
    /// taken as they ran, one process of each build per round.
    fn of(workload: &str, procs: &[Profiled], counts: &[Counts]) -> CrossCheck {
        let safety = |want: &dyn Fn(Build) -> bool| {
            let (k, n) = procs
                .iter()
                .zip(counts)
                .filter(|(p, _)| want(p.build))
                .fold((0u64, 0u64), |(k, n), (_, c)| {
                    let user = c.iter().sum::<u64>() - c[Class::Kernel.index()];
                    (k + c[Class::Safety.index()], n + user)
                });
            if n > 0 {
                100.0 * k as f64 / n as f64
            } else {
                0.0
            }
        };
        // Per process: package main's samples per operation, and all user-mode samples per
        // operation. -B compiles package main only, so the difference in main's time per
        // operation is what removing its checks saved, miss included; the runtime, the
        // scheduler (whose spinning for work moves with the machine's load) and the kernel
        // are left out of both sides. A sample is a fixed slice of CPU time (perf's
        // cpu-clock period, pprof's timer), so samples per operation are CPU per operation.
        let per_op = |b: Build, round: usize| {
            let p = procs.iter().filter(|p| p.build == b).nth(round)?;
            let ops = p.run.ops as f64;
            (ops > 0.0).then(|| {
                let user = p.tally.total() - p.tally.kernel_samples();
                (p.tally.samples_in(MAIN) as f64 / ops, user as f64 / ops)
            })
        };
        let rounds = procs.iter().filter(|p| p.build == Build::Plain).count();
        let (mut ab, mut aa) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let Some((main, user)) = per_op(Build::Plain, r).filter(|&(_, u)| u > 0.0) else {
                continue;
            };
            if let Some((b, _)) = per_op(Build::NoBounds, r) {
                ab.push(100.0 * (main - b) / user);
            }
            if let Some((s, _)) = per_op(Build::Shifted, r) {
                aa.push(100.0 * (main - s) / user);
            }
        }
        CrossCheck {
            workload: workload.to_string(),
            checked: safety(&|b| b != Build::NoBounds),
            unchecked: safety(&|b| b == Build::NoBounds),
            ab,
            aa,
        }
    }

    /// What the attribution predicts -B saves: the safety share it removes.
    pub fn predicted(&self) -> f64 {
        self.checked - self.unchecked
    }

    /// The A/B difference: the median over rounds.
    pub fn measured(&self) -> Option<f64> {
        (!self.ab.is_empty()).then(|| median(&self.ab))
    }

    /// How far two processes differ with nothing removed: the larger of the A/A control's
    /// largest difference and half the A/B rounds' range. None with neither.
    pub fn noise(&self) -> Option<f64> {
        let aa = self
            .aa
            .iter()
            .map(|d| d.abs())
            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
        let spread = (self.ab.len() > 1).then(|| {
            let lo = self.ab.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = self.ab.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo) / 2.0
        });
        match (aa, spread) {
            (Some(a), Some(s)) => Some(a.max(s)),
            (a, s) => a.or(s),
        }
    }

    /// The A/B difference's interval: its median ± the noise.
    pub fn interval(&self) -> Option<(f64, f64)> {
        let (m, n) = (self.measured()?, self.noise()?);
        Some((m - n, m + n))
    }

    pub fn agreement(&self) -> Agreement {
        let (Some(m), Some((lo, hi)), Some(n)) = (self.measured(), self.interval(), self.noise())
        else {
            return Agreement::Unjudged;
        };
        let p = self.predicted();
        if (lo..=hi).contains(&p) {
            Agreement::Agrees
        } else if m.abs() <= n && p.abs() <= n {
            Agreement::BothBelowNoise
        } else {
            Agreement::Gap
        }
    }

    /// One line: the attributed share beside the A/B difference, and the verdict.
    pub fn verdict(&self) -> String {
        let p = self.predicted();
        let head = format!(
            "{}: attribution charges the checks -B removes {:.2}% of user-mode CPU (safety {:.2}% with checks, {:.2}% left in the -B build)",
            self.workload, p, self.checked, self.unchecked
        );
        let (Some(m), Some((lo, hi)), Some(n)) = (self.measured(), self.interval(), self.noise())
        else {
            return format!(
                "{head}; the -B build's difference is not judged: {} A/B round(s) and no A/A control",
                self.ab.len()
            );
        };
        let ab = format!(
            "the -B build saves {m:.2}% of the user-mode CPU per operation in package main (median of {} rounds), interval {lo:.2} to {hi:.2} (± {n:.2}: the A/A control's largest difference and the rounds' half-range)",
            self.ab.len()
        );
        match self.agreement() {
            Agreement::Agrees => format!("{head}; {ab}: agrees"),
            Agreement::BothBelowNoise => format!(
                "{head}; {ab}: agrees (both within ± {n:.2}, below what the A/A control resolves)"
            ),
            Agreement::Gap => {
                let (gap, side) = if p > hi {
                    (p - hi, "above")
                } else {
                    (lo - p, "below")
                };
                format!(
                    "{head}; {ab}: disagrees: the attribution is {gap:.2} points {side} the A/B interval"
                )
            }
            Agreement::Unjudged => format!("{head}; {ab}"),
        }
    }

    /// The verdict in a few words, for the sheet's headline.
    pub fn short(&self) -> String {
        let p = self.predicted();
        match (self.agreement(), self.interval()) {
            (Agreement::Agrees, _) => "agrees".to_string(),
            (Agreement::BothBelowNoise, _) => "agrees (both below the A/A noise)".to_string(),
            (Agreement::Gap, Some((_, hi))) if p > hi => {
                format!("disagrees: attribution {:.2} points above it", p - hi)
            }
            (Agreement::Gap, Some((lo, _))) => {
                format!("disagrees: attribution {:.2} points below it", lo - p)
            }
            _ => "not judged (one round, no A/A control)".to_string(),
        }
    }

    fn note(&self) -> String {
        format!("attribution cross-check {}", self.verdict())
    }

    /// The A/B and A/A rows (method ab and aa, this workload, kind safety).
    fn push_rows(&self, o: &mut Outcome) {
        for (m, v) in [(Method::Ab, &self.ab), (Method::Aa, &self.aa)] {
            o.push(
                LAB,
                crate::case! {"method" => m.name(), "workload" => self.workload.as_str(), "kind" => "safety"},
                "overhead",
                "%",
                v.clone(),
            );
        }
    }
}

/// The cross-checks as a model: predicted = the safety share attribution says -B removes,
/// measured = what the -B build saved; params hold each workload's verdict in a few words.
pub fn cross_check_model(checks: &[CrossCheck]) -> Model {
    Model {
        lab: LAB.to_string(),
        name: CROSS_CHECK_MODEL.to_string(),
        params: checks
            .iter()
            .map(|c| (c.workload.clone(), serde_json::json!(c.short())))
            .collect(),
        points: checks
            .iter()
            .filter_map(|c| {
                Some(ModelPoint {
                    case: crate::case! {"method" => "attribution", "workload" => c.workload.as_str(), "kind" => "safety"},
                    predicted: c.predicted(),
                    measured: c.measured()?,
                    unit: "%".to_string(),
                })
            })
            .collect(),
        verdict: checks.iter().map(CrossCheck::verdict).collect(),
    }
}

/// The package -gcflags=-B compiles without bounds checks (symbols' prefix).
const MAIN: &str = "main.";

/// The cross-check model's name.
pub const CROSS_CHECK_MODEL: &str =
    "safety checks: attribution beside the -B build (A/B, A/A control)";

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

    fn cc(checked: f64, unchecked: f64, ab: &[f64], aa: &[f64]) -> CrossCheck {
        CrossCheck {
            workload: "server".to_string(),
            checked,
            unchecked,
            ab: ab.to_vec(),
            aa: aa.to_vec(),
        }
    }

    #[test]
    fn cross_check_verdicts() {
        // Attribution 0.8 within the A/B median 1.0 ± max(|A/A| 0.6, half-range 0.5).
        let c = cc(1.0, 0.2, &[0.5, 1.0, 1.5], &[0.6, -0.3]);
        assert_eq!(c.noise(), Some(0.6));
        let (lo, hi) = c.interval().unwrap();
        assert!((lo - 0.4).abs() < 1e-9 && (hi - 1.6).abs() < 1e-9);
        assert_eq!(c.agreement(), Agreement::Agrees);
        assert!(c.verdict().ends_with(": agrees"), "{}", c.verdict());
        assert_eq!(c.short(), "agrees");
        // The attribution at 10% where -B saves 1 ± 0.6: a gap, named in points.
        let c = cc(10.2, 0.2, &[0.5, 1.0, 1.5], &[0.6, -0.3]);
        assert_eq!(c.agreement(), Agreement::Gap);
        assert!(
            c.verdict()
                .contains("disagrees: the attribution is 8.40 points above"),
            "{}",
            c.verdict()
        );
        // Neither clears the A/A noise: they cannot contradict each other.
        let c = cc(0.3, 0.0, &[-1.5], &[2.0, -1.8]);
        assert_eq!(c.agreement(), Agreement::Agrees);
        let c = cc(1.9, 0.0, &[-1.5], &[2.0]);
        assert_eq!(c.agreement(), Agreement::BothBelowNoise);
        // One round, no control: no interval, no verdict.
        let c = cc(1.0, 0.0, &[0.5], &[]);
        assert_eq!(c.agreement(), Agreement::Unjudged);
        assert!(c.verdict().contains("not judged"));
        let m = cross_check_model(&[cc(1.0, 0.2, &[0.5, 1.0, 1.5], &[0.6])]);
        assert_eq!(m.points.len(), 1);
        assert!((m.points[0].predicted - 0.8).abs() < 1e-9 && m.points[0].measured == 1.0);
    }

    #[test]
    fn cross_check_compares_package_mains_time_per_operation() {
        use attrib::{Mode, Sample};
        let proc = |build: Build, main: u64, ops: u64| {
            let mut tally = Tally::default();
            let at = |f: &str, mode: Mode| Sample {
                mode,
                under_gc: false,
                leaf: Some((f.to_string(), 0)),
            };
            tally.add(at("main.handle", Mode::User), main);
            tally.add(at("runtime.mallocgc", Mode::User), 6 * ops);
            tally.add(at("main.handle", Mode::Kernel), ops);
            let run: ProfileRun = bench::parse(&format!(
                r#"{{"workload":"server","hz_asked":1000,"samples":0,"wall_s":1,"ops":{ops}}}"#
            ))
            .unwrap();
            Profiled { build, run, tally }
        };
        // Round 1 ran plain, -B, shifted; round 2 in the rotated order.
        let procs = [
            proc(Build::Plain, 300, 100),
            proc(Build::NoBounds, 240, 100),
            proc(Build::Shifted, 297, 100),
            proc(Build::NoBounds, 480, 200),
            proc(Build::Shifted, 606, 200),
            proc(Build::Plain, 600, 200),
        ];
        let counts: Vec<Counts> = procs
            .iter()
            .map(|p| match p.build {
                Build::NoBounds => [0, 0, 0, 1, 0, 100, 839],
                _ => [0, 0, 0, 9, 0, 100, 891],
            })
            .collect();
        let c = CrossCheck::of("server", &procs, &counts);
        // Plain: 3 main samples and 9 user samples per op; -B: 2.4 main per op.
        let close = |v: &[f64], want: &[f64]| {
            v.len() == want.len() && v.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9)
        };
        assert!(close(&c.ab, &[60.0 / 9.0, 60.0 / 9.0]), "{:?}", c.ab);
        assert!(close(&c.aa, &[3.0 / 9.0, -3.0 / 9.0]), "{:?}", c.aa);
        // Safety of user-mode samples: 9 of 900 with checks, 1 of 840 with -B.
        assert!((c.checked - 1.0).abs() < 1e-9 && (c.unchecked - 100.0 / 840.0).abs() < 1e-9);
    }

    #[test]
    fn attribution_rows_of_all_and_of_user_cpu() {
        let mut o = Outcome::default();
        push_attribution(&mut o, "server", &[[0, 0, 0, 1, 9, 40, 50]]);
        let share = |kind: &str, of: Option<&str>| {
            o.results
                .iter()
                .find(|r| {
                    r.metric == "cpu_share"
                        && r.key("kind") == kind
                        && r.case.get("of").and_then(|v| v.as_str()) == of
                })
                .map(|r| r.summary.median)
        };
        assert_eq!(share("safety", None), Some(1.0));
        assert_eq!(share("memory", Some("user")), Some(15.0));
        assert_eq!(share("kernel", None), Some(40.0));
        assert_eq!(share("kernel", Some("user")), None);
        let n = o
            .results
            .iter()
            .filter(|r| r.metric == "profile_samples")
            .count();
        assert_eq!(n, attrib::N);
    }

    #[test]
    fn overhead_is_paired() {
        let v = overhead(&[1.1, 2.4, 3.0], &[1.0, 2.0, 0.0]);
        assert_eq!(v.len(), 2);
        assert!((v[0] - 10.0).abs() < 1e-9 && (v[1] - 20.0).abs() < 1e-9);
    }
}
