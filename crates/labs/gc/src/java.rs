//! The headroom curve on the JVM: the Java program in `javagc/` (the same workload shape
//! as gcbench's heap mode), built with the JDK's javac, one fresh JVM per point with
//! -Xms = -Xmx = live x (1 + h) and the collector under test.
//!
//! GC CPU share, as the Java program measures it: the CPU time of the JVM's own GC threads
//! (per thread from /proc/self/task/*/schedstat, picked by the native names HotSpot gives
//! them: "GC Thread#", "G1 ...", "Z...", "RuntimeWorker#", "Shenandoah ...", and the "VM
//! Thread" that runs the pauses) over the process's CPU time, from the end of a
//! System.gc() after the heap is built to the end of the work. GC work done by the
//! application's own threads (allocation slow paths, barriers' slow paths) is not in it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::json;

use super::plan;
use super::sweep::{fit_c, share_model};
use super::LAB;
use costlab_core::error::usage;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::sizes::{human_size, parse_list};
use costlab_core::measure::stats::median;
use costlab_history::report::{Model, ModelPoint, Outcome};

/// A runtime whose headroom curve `costlab gc --runtime` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Go,
    JavaG1,
    JavaParallel,
    JavaZgc,
    JavaShenandoah,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Go => "go",
            Runtime::JavaG1 => "java-g1",
            Runtime::JavaParallel => "java-parallel",
            Runtime::JavaZgc => "java-zgc",
            Runtime::JavaShenandoah => "java-shenandoah",
        }
    }

    /// The JVM option that selects the collector (None for Go).
    pub fn jvm_flag(self) -> Option<&'static str> {
        match self {
            Runtime::Go => None,
            Runtime::JavaG1 => Some("-XX:+UseG1GC"),
            Runtime::JavaParallel => Some("-XX:+UseParallelGC"),
            Runtime::JavaZgc => Some("-XX:+UseZGC"),
            Runtime::JavaShenandoah => Some("-XX:+UseShenandoahGC"),
        }
    }
}

pub fn parse_runtimes(text: &str) -> Result<Vec<Runtime>> {
    let mut out: Vec<Runtime> = Vec::new();
    for r in parse_list(text, |item| match item {
        "go" => Ok(Runtime::Go),
        "java-g1" => Ok(Runtime::JavaG1),
        "java-parallel" => Ok(Runtime::JavaParallel),
        "java-zgc" => Ok(Runtime::JavaZgc),
        "java-shenandoah" => Ok(Runtime::JavaShenandoah),
        other => Err(usage(format!(
            "bad runtime '{other}': use go, java-g1, java-parallel, java-zgc or java-shenandoah"
        ))),
    })? {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

/// The JDK's two programs, found on PATH (or under $JAVA_HOME/bin).
#[derive(Debug, Clone)]
pub struct Jdk {
    pub java: PathBuf,
    pub javac: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The JDK, if both java and javac are found.
pub fn find_jdk() -> Option<Jdk> {
    Some(Jdk {
        java: on_path("java")?,
        javac: on_path("javac")?,
    })
}

/// The line for a machine without a JDK.
pub const NO_JDK: &str = "skipped: no JDK (java and javac not on PATH or under $JAVA_HOME/bin); install one with scripts/install-deps.sh (apt-get install default-jdk-headless)";

/// Where the Java source lives.
pub fn source() -> PathBuf {
    crate::bench::repo_dir().join("javagc").join("GcBench.java")
}

/// Compile GcBench.java into the cache (a directory named for the source's hash), once.
pub fn build(jdk: &Jdk) -> Result<PathBuf> {
    let src = source();
    let text = std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let dir = super::bench::cache_dir().join(format!("javagc-{h:016x}"));
    if dir.join("GcBench.class").is_file() {
        return Ok(dir);
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    costlab_history::report::progress::note(&format!("building {} (javac)", dir.display()));
    let out = Command::new(&jdk.javac)
        .arg("-d")
        .arg(&tmp)
        .arg(&src)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", jdk.javac.display()))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        bail!(
            "javac {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("moving {} to {}", tmp.display(), dir.display()))?;
    Ok(dir)
}

/// Whether this JVM has the collector (Shenandoah is left out of some builds).
pub fn has_collector(jdk: &Jdk, rt: Runtime) -> bool {
    let Some(flag) = rt.jvm_flag() else {
        return true;
    };
    Command::new(&jdk.java)
        .args([flag, "-version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What `GcBench` prints for one point.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct JavaRun {
    #[serde(default)]
    pub oom: bool,
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub vnodes: u64,
    #[serde(default)]
    pub live_bytes: u64,
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub alloc_bytes: u64,
    #[serde(default)]
    pub wall_s: f64,
    #[serde(default)]
    pub gc_cpu_share: f64,
    #[serde(default)]
    pub gc_cpu_s: f64,
    #[serde(default)]
    pub cpu_s: f64,
    #[serde(default)]
    pub gc_cycles: u64,
    #[serde(default)]
    pub peak_rss_bytes: u64,
    #[serde(default)]
    pub max_heap_bytes: u64,
    #[serde(default)]
    pub java_version: String,
}

/// What `GcBench calibrate` prints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Calibration {
    pub bytes_per_vnode: f64,
    #[serde(default)]
    pub java_version: String,
}

/// Parse one line of the Java program's JSON.
pub fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T> {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{'));
    let Some(line) = line else {
        bail!("the Java program printed no JSON object: '{}'", text.trim());
    };
    serde_json::from_str(line).context("the Java program's JSON is not what this costlab expects")
}

/// What one vnode costs in gcbench's Go heap (gcbench's VnodeBytes: the object in its size
/// class, its name, its hash slot): the Java side holds as many vnodes as Go does for the
/// same --live, so both runtimes keep the same objects alive and allocate the same calls.
pub const GO_VNODE_BYTES: u64 = 312;

/// The vnodes of a --live heap, as gcbench counts them.
pub fn vnodes_for(live: u64) -> u64 {
    (live / GO_VNODE_BYTES).max(1)
}

/// -Xmx (and -Xms) for a live heap and headroom, in MiB (at least 16).
pub fn xmx_mib(live: u64, headroom: f64) -> u64 {
    ((plan::memlimit_bytes(headroom, live) as f64 / (1u64 << 20) as f64).ceil() as u64).max(16)
}

fn jvm(jdk: &Jdk, classes: &Path, rt: Runtime, heap_mib: u64, args: &[String]) -> Result<String> {
    let mut full: Vec<String> = vec![
        rt.jvm_flag().unwrap_or("").to_string(),
        format!("-Xms{heap_mib}m"),
        format!("-Xmx{heap_mib}m"),
        "-XX:-UsePerfData".to_string(),
        "-Xlog:disable".to_string(),
        "-Xlog:all=warning:stderr".to_string(),
        "-cp".to_string(),
        classes.display().to_string(),
        "GcBench".to_string(),
    ];
    full.extend(args.iter().cloned());
    // A JVM that runs out of heap says so in its JSON ("oom": true) and exits 0.
    super::bench::run(&jdk.java, &full, &[])
}

/// One runtime's sweep: `reps` rounds over the headrooms, one fresh JVM per point.
pub fn sweep(
    rt: Runtime,
    jdk: &Jdk,
    headrooms: &[f64],
    live: u64,
    reps: usize,
    alloc: Option<f64>,
) -> Result<Outcome> {
    let classes = build(jdk)?;
    let mut o = Outcome::default();
    if !has_collector(jdk, rt) {
        o.notes.push(format!(
            "{}: skipped: this JVM ({}) has no such collector",
            rt.name(),
            jdk.java.display()
        ));
        return Ok(o);
    }
    costlab_history::report::progress::note(&format!(
        "gc: {}: calibrating bytes per vnode",
        rt.name()
    ));
    let cal: Calibration = parse(&jvm(jdk, &classes, rt, 1024, &["calibrate".to_string()])?)?;
    // The same objects as Go's live set; this JVM's live bytes for them, measured.
    let n = vnodes_for(live);
    let java_live = (n as f64 * cal.bytes_per_vnode) as u64;
    let mut runs: Vec<Vec<JavaRun>> = vec![Vec::new(); headrooms.len()];
    let mark = o.results.len();
    let watch = Watch::start(&[]);
    for rep in 0..reps {
        for (i, &h) in headrooms.iter().enumerate() {
            costlab_core::measure::cancel::check()?;
            costlab_history::report::progress::note(&format!(
                "gc: {} h={h} rep {}/{reps} (live {}, -Xmx{}m)",
                rt.name(),
                rep + 1,
                human_size(java_live),
                xmx_mib(java_live, h)
            ));
            let mut args = vec![
                "-live".to_string(),
                live.to_string(),
                "-vnodes".to_string(),
                n.to_string(),
                "-bytes-per-vnode".to_string(),
                format!("{:.2}", cal.bytes_per_vnode),
            ];
            if let Some(a) = alloc {
                args.extend(["-alloc".to_string(), a.to_string()]);
            }
            let text = jvm(jdk, &classes, rt, xmx_mib(java_live, h), &args)?;
            runs[i].push(parse(&text)?);
        }
    }
    o.extend(outcome_of(rt, headrooms, &runs, live));
    o.attach_conditions(mark, watch.finish());
    o.notes.push(format!(
        "{}: {n} vnodes (as many as gcbench holds in {}) take {} in this JVM ({:.0} bytes each, calibrated: a heap of 200000 less the empty heap, after System.gc()); -Xms = -Xmx = that x (1 + h); java {}",
        rt.name(),
        human_size(live),
        human_size(java_live),
        cal.bytes_per_vnode,
        cal.java_version
    ));
    Ok(o)
}

fn case_of(rt: Runtime, h: f64, live: u64) -> costlab_history::report::Case {
    costlab_core::case! {"runtime" => rt.name(), "mode" => "xmx", "headroom" => h, "live" => live}
}

/// Rows, models and notes of one Java runtime's runs (pure: tested without a JDK).
/// `live` is the --live asked (the case key, as on Go's rows); the JVM's own live bytes for
/// the same objects are in the notes.
pub fn outcome_of(rt: Runtime, headrooms: &[f64], runs: &[Vec<JavaRun>], live: u64) -> Outcome {
    let mut o = Outcome::default();
    for (&h, rs) in headrooms.iter().zip(runs) {
        let ok: Vec<&JavaRun> = rs.iter().filter(|r| !r.oom).collect();
        if ok.len() < rs.len() {
            o.notes.push(format!(
                "{} h={h}: {} of {} JVMs ran out of heap; no share from them",
                rt.name(),
                rs.len() - ok.len(),
                rs.len(),
            ));
        }
        let case = case_of(rt, h, live);
        o.push(
            LAB,
            case.clone(),
            "gc_cpu_share",
            "%",
            ok.iter().map(|r| r.gc_cpu_share * 100.0).collect(),
        );
        o.push(
            LAB,
            case.clone(),
            "peak_rss",
            "MB",
            ok.iter().map(|r| r.peak_rss_bytes as f64 / 1e6).collect(),
        );
        o.push(
            LAB,
            case.clone(),
            "cycles",
            "count",
            ok.iter().map(|r| r.gc_cycles as f64).collect(),
        );
        o.push(
            LAB,
            case,
            "wall",
            "s",
            ok.iter().map(|r| r.wall_s).collect(),
        );
    }
    let all: Vec<&JavaRun> = runs.iter().flatten().filter(|r| !r.oom).collect();
    if let Some(first) = all.first() {
        let achieved = median(&all.iter().map(|r| r.live_bytes as f64).collect::<Vec<_>>());
        o.notes.push(format!(
            "{}: live heap {} asked, {} used after System.gc() ({} vnodes); work: {} stat-like calls allocating {} each run; GC share = CPU time of the JVM's GC threads (schedstat, by thread name) / process CPU time; java {}",
            rt.name(),
            human_size(live),
            human_size(achieved as u64),
            first.vnodes,
            first.ops,
            human_size(first.alloc_bytes),
            first.java_version
        ));
    }
    o.models.extend(models(&o, rt.name(), "xmx", live));
    o
}

/// The median GC share (%) of one runtime (and mode) at one headroom.
pub fn share_of(o: &Outcome, runtime: &str, mode: &str, h: f64) -> Option<f64> {
    o.results
        .iter()
        .find(|r| {
            r.metric == "gc_cpu_share"
                && r.summary.n > 0
                && runtime_of(r) == runtime
                && r.key("mode") == mode
                && r.case.get("headroom") == Some(&json!(h))
        })
        .map(|r| r.summary.median)
}

/// A headroom row's runtime ("go" where the key is absent: rows from before the key).
pub fn runtime_of(r: &costlab_history::report::ResultRow) -> String {
    let k = r.key("runtime");
    if k.is_empty() {
        "go".to_string()
    } else {
        k
    }
}

/// The c/(c + h) fit and the paper's points for one runtime's curve.
pub fn models(o: &Outcome, runtime: &str, mode: &str, live: u64) -> Vec<Model> {
    let mut hs: Vec<f64> = o
        .results
        .iter()
        .filter(|r| r.metric == "gc_cpu_share" && runtime_of(r) == runtime && r.key("mode") == mode)
        .filter_map(|r| r.case.get("headroom")?.as_f64())
        .collect();
    hs.dedup();
    let measured: Vec<(f64, f64)> = hs
        .iter()
        .filter_map(|&h| share_of(o, runtime, mode, h).map(|s| (h, s)))
        .collect();
    let Some(c) = fit_c(&measured) else {
        return Vec::new();
    };
    let case = |h: f64| costlab_core::case! {"runtime" => runtime, "mode" => mode, "headroom" => h, "live" => live};
    let points: Vec<ModelPoint> = measured
        .iter()
        .map(|&(h, s)| ModelPoint {
            case: case(h),
            predicted: share_model(c, h),
            measured: s,
            unit: "%".to_string(),
        })
        .collect();
    let mut params = serde_json::Map::new();
    params.insert("c".to_string(), json!(c));
    let mut out = vec![Model {
        lab: LAB.to_string(),
        name: format!("GC share = c / (c + h) ({runtime})"),
        params,
        points,
        verdict: vec![format!(
            "GC time / mutator time = {c:.3} / h for {runtime} here (the paper's two points give about 0.26 / h); the model's h for 10% GC: {:.2}",
            c * 9.0
        )],
    }];
    out.extend(super::sweep::paper_model(
        runtime,
        case,
        |h| share_of(o, runtime, mode, h),
        format!(
            "predicted = the paper's figure for Go (640 MB live, Biscuit's kernel heap); measured = {runtime} on this machine"
        ),
    ));
    out
}

/// The smallest headroom whose median GC share is under `target` %, for one runtime.
pub fn smallest_under(o: &Outcome, runtime: &str, mode: &str, target: f64) -> Option<(f64, f64)> {
    super::sweep::smallest_share_under(
        o,
        |r| r.summary.n > 0 && runtime_of(r) == runtime && r.key("mode") == mode,
        target,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    const RUN: &str = r#"{"mode":"heap","oom":false,"vnodes":205225,"live_target":67108864,"live_bytes":68902760,"build_s":5.165,"ops":306900,"alloc_bytes":201326400,"wall_s":4.3980,"gc_cpu_share":0.011765,"gc_cpu_s":0.010,"cpu_s":0.850,"gc_cycles":4,"peak_rss_bytes":226308096,"max_heap_bytes":209715200,"workers":2,"java_version":"17.0.15","gc_beans_before":{"G1 Young Generation":[9,1683],"G1 Old Generation":[1,1435]},"gc_beans":{"G1 Young Generation":[13,1700]},"checksum":-12}"#;

    #[test]
    fn parses_java_output() {
        let r: JavaRun = parse(&format!("warning: x\n{RUN}\n")).unwrap();
        assert!(!r.oom);
        assert_eq!((r.vnodes, r.gc_cycles), (205_225, 4));
        assert!((r.gc_cpu_share - 0.011765).abs() < 1e-12);
        assert_eq!(r.java_version, "17.0.15");
        let oom: JavaRun = parse(r#"{"mode":"heap","oom":true,"phase":"work"}"#).unwrap();
        assert!(oom.oom && oom.phase == "work");
        let c: Calibration = parse(
            r#"{"mode":"calibrate","vnodes":200000,"bytes_per_vnode":327.54,"java_version":"17.0.15","gc":{},"check":200000}"#,
        )
        .unwrap();
        assert!((c.bytes_per_vnode - 327.54).abs() < 1e-9);
        assert!(parse::<JavaRun>("Error: Could not create the Java Virtual Machine.").is_err());
        assert!(parse::<JavaRun>(r#"{"gc_cpu_share":"x"}"#).is_err());
    }

    #[test]
    fn runtimes_parse() {
        assert_eq!(
            parse_runtimes("go,java-g1,java-zgc").unwrap(),
            vec![Runtime::Go, Runtime::JavaG1, Runtime::JavaZgc]
        );
        // A runtime given twice is refused, naming it (docs/src/cli.md's one list rule).
        let e = parse_runtimes("go,java-g1,java-zgc,go").unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("'go' is given twice"), "{e}");
        assert_eq!(exit_code(&parse_runtimes("java-cms").unwrap_err()), 2);
        assert_eq!(Runtime::JavaParallel.jvm_flag(), Some("-XX:+UseParallelGC"));
    }

    #[test]
    fn xmx_is_live_times_one_plus_h() {
        assert_eq!(xmx_mib(256 << 20, 0.5), 384);
        assert_eq!(xmx_mib(256 << 20, 3.0), 1024);
        assert_eq!(xmx_mib(1 << 20, 1.0), 16);
        assert_eq!(vnodes_for(640 << 20), (640u64 << 20) / 312);
        assert_eq!(vnodes_for(1), 1);
    }

    fn run(share: f64, oom: bool) -> JavaRun {
        let mut r: JavaRun = parse(RUN).unwrap();
        r.gc_cpu_share = share;
        r.oom = oom;
        r
    }

    #[test]
    fn outcome_fit_target_and_oom() {
        let hs = [0.5, 1.0, 3.0];
        let runs = vec![
            vec![run(0.30, false), run(0.0, true)],
            vec![run(0.20, false), run(0.22, false)],
            vec![run(0.06, false), run(0.08, false)],
        ];
        let o = outcome_of(Runtime::JavaG1, &hs, &runs, 64 << 20);
        let r = o
            .find(
                "gc_cpu_share",
                &costlab_core::case! {"runtime" => "java-g1", "headroom" => 0.5},
            )
            .unwrap();
        assert_eq!(r.summary.n, 1);
        assert!(o.notes.iter().any(|n| n.contains("ran out of heap")));
        assert_eq!(share_of(&o, "java-g1", "xmx", 1.0), Some(21.0));
        assert_eq!(smallest_under(&o, "java-g1", "xmx", 10.0), Some((3.0, 7.0)));
        assert_eq!(smallest_under(&o, "go", "xmx", 10.0), None);
        assert_eq!(o.models.len(), 2);
        assert!(o.models[0].name.contains("java-g1"));
        assert_eq!(o.models[1].points.len(), 1); // only h = 0.5 of the paper's two was run
        assert_eq!(o.models[1].points[0].predicted, 34.0);
    }
}
