//! The Go program: finding or building it, running it, reading what it prints.
//!
//! Its source is `gcbench/` in this crate. Built binaries are cached under a name that
//! carries a hash of the source, so an edited source is rebuilt and an unchanged one is
//! not. Nothing is fetched: the program uses the standard library only and the build runs
//! with GOTOOLCHAIN=local and GOPROXY=off.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use costlab_core::error::usage;
use costlab_core::measure::cancel;

/// The repository's top folder, where the gc lab's programs live beside the workspace
/// (gcbench/, javagc/): this crate's manifest is three folders below it (crates/labs/gc).
pub fn repo_dir() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(3).unwrap_or(here).to_path_buf()
}

/// Where the Go source lives.
pub fn source_dir() -> PathBuf {
    repo_dir().join("gcbench")
}

/// The builds of the program: plain; with bounds checks off (-gcflags=-B); and the A/A
/// twin of plain: the same source with one unused function added ahead of the rest, so
/// every function of package main moves (its code layout is perturbed, nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Build {
    Plain,
    NoBounds,
    Shifted,
}

impl Build {
    /// The build in a few words, for notes.
    pub fn describe(self) -> &'static str {
        match self {
            Build::Plain => "plain",
            Build::NoBounds => "-gcflags=-B",
            Build::Shifted => "layout-shifted twin",
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Build::Plain => "",
            Build::NoBounds => "-nobounds",
            Build::Shifted => "-shifted",
        }
    }

    fn gcflags(self) -> Option<&'static str> {
        match self {
            Build::NoBounds => Some("-gcflags=-B"),
            _ => None,
        }
    }
}

/// The file the Shifted build adds: a function package main never calls (init keeps it
/// from being dropped), declared in a file that sorts first, so it is laid out before the
/// rest of main and moves them by its size (not a multiple of 64 bytes).
const SHIFT_FILE: (&str, &str) = (
    "aaa_layout_shift.go",
    "package main\n\nimport \"os\"\n\nvar layoutSink uint64\n\n//go:noinline\nfunc layoutShift(x []uint64) uint64 {\n\tvar a, b uint64 = 1, 3\n\tfor i := range x {\n\t\ta = a*31 + x[i]\n\t\tb ^= a >> 7\n\t}\n\treturn a ^ b\n}\n\nfunc init() {\n\tif len(os.Args) > 1<<20 {\n\t\tlayoutSink = layoutShift(nil)\n\t}\n}\n",
);

/// The one line for a machine without Go.
pub fn no_go_message() -> String {
    "no Go toolchain: the gc lab builds a Go program and `go` is not on PATH; install Go 1.22 or later (apt-get install golang-go, or https://go.dev/dl) or set COSTLAB_GCBENCH to a gcbench binary built with `costlab gc build`".to_string()
}

/// The `go` executable on PATH, if any.
pub fn find_go() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("go"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The cache directory for built binaries: $COSTLAB_GCBENCH_CACHE, else `target/gcbench`
/// beside the running costlab (target/release/costlab), else $XDG_CACHE_HOME/costlab/gcbench.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("COSTLAB_GCBENCH_CACHE") {
        return PathBuf::from(d);
    }
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("gcbench")));
    if let Some(d) = beside_exe {
        let parent_writable = d
            .parent()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| !m.permissions().readonly());
        if parent_writable {
            return d;
        }
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("costlab")
        .join("gcbench")
}

/// FNV-1a over the names and contents of the program's build inputs (the .go files that
/// are not tests, and go.mod), sorted by name.
pub fn source_hash(dir: &Path) -> Result<u64> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name == "go.mod" || (name.ends_with(".go") && !name.ends_with("_test.go"))
        })
        .collect();
    if names.is_empty() {
        bail!("no Go source in {}", dir.display());
    }
    names.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in names {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let body = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
        for b in name.unwrap_or_default().bytes().chain([0u8]).chain(body) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(h)
}

/// A binary that is ready, or why it is not.
pub struct Located {
    pub path: PathBuf,
    /// "built", "cached" or "from COSTLAB_GCBENCH".
    pub how: &'static str,
}

/// Why the lab cannot run here, without building anything: no binary given, none cached
/// for this source, and no Go to build one.
pub fn unavailable() -> Option<String> {
    if std::env::var_os("COSTLAB_GCBENCH").is_some() || find_go().is_some() {
        return None;
    }
    let cached = source_hash(&source_dir())
        .ok()
        .map(|h| cache_dir().join(binary_name(h, Build::Plain)))
        .is_some_and(|p| is_executable(&p));
    if cached {
        None
    } else {
        Some(no_go_message())
    }
}

fn binary_name(hash: u64, build: Build) -> String {
    format!("gcbench-{hash:016x}{}", build.suffix())
}

/// Find the binary for `build`: $COSTLAB_GCBENCH (and its `-nobounds` sibling), else the
/// cache, else build it. No Go and nothing cached is a usage error (exit 2).
pub fn locate(build: Build) -> Result<Located> {
    if let Some(given) = std::env::var_os("COSTLAB_GCBENCH") {
        let mut path = PathBuf::from(&given);
        if build != Build::Plain {
            let mut s = given.clone();
            s.push(build.suffix());
            path = PathBuf::from(s);
        }
        if is_executable(&path) {
            return Ok(Located {
                path,
                how: "from COSTLAB_GCBENCH",
            });
        }
        if build == Build::Plain {
            return Err(usage(format!(
                "COSTLAB_GCBENCH={} is not an executable file; unset it or point it at a binary built with `costlab gc build`",
                path.display()
            )));
        }
    }
    let src = source_dir();
    let hash = source_hash(&src).map_err(|e| {
        usage(format!(
            "the gcbench source is not at {} ({e}); set COSTLAB_GCBENCH to a binary built with `costlab gc build`",
            src.display()
        ))
    })?;
    let dir = cache_dir();
    let path = dir.join(binary_name(hash, build));
    if is_executable(&path) {
        return Ok(Located {
            path,
            how: "cached",
        });
    }
    let go = find_go().ok_or_else(|| usage(no_go_message()))?;
    go_build(&go, &src, &dir, &path, build)?;
    Ok(Located { path, how: "built" })
}

/// `go build` into a temporary name, then rename: a concurrent or interrupted build never
/// leaves a half-written binary under the final name.
fn go_build(go: &Path, src: &Path, dir: &Path, out: &Path, build: Build) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if build == Build::Shifted {
        let copy = dir.join(format!("src-shifted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy).with_context(|| format!("creating {}", copy.display()))?;
        for e in std::fs::read_dir(src)? {
            let p = e?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "go.mod" || (name.ends_with(".go") && !name.ends_with("_test.go")) {
                std::fs::copy(&p, copy.join(name))?;
            }
        }
        std::fs::write(copy.join(SHIFT_FILE.0), SHIFT_FILE.1)?;
        let r = go_build(go, &copy, dir, out, Build::Plain);
        let _ = std::fs::remove_dir_all(&copy);
        return r;
    }
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let mut cmd = Command::new(go);
    cmd.arg("build").arg("-trimpath");
    if let Some(flags) = build.gcflags() {
        cmd.arg(flags);
    }
    cmd.arg("-o").arg(&tmp).arg(".");
    cmd.current_dir(src)
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOWORK", "off")
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null());
    if std::env::var_os("GOCACHE").is_none()
        && std::env::var_os("HOME").is_none()
        && std::env::var_os("XDG_CACHE_HOME").is_none()
    {
        cmd.env("GOCACHE", dir.join("go-build"));
    }
    costlab_history::report::progress::note(&format!("building {}", out.display()));
    let output = cmd
        .output()
        .with_context(|| format!("running {}", go.display()))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let err = String::from_utf8_lossy(&output.stderr);
        let line = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("; ");
        if line.contains("requires go >=") || line.contains("go.mod requires go") {
            return Err(usage(format!(
                "the installed Go is too old for gcbench ({line}); install Go 1.22 or later (https://go.dev/dl)"
            )));
        }
        bail!("go build of {} failed: {line}", src.display());
    }
    std::fs::rename(&tmp, out)
        .with_context(|| format!("moving {} to {}", tmp.display(), out.display()))?;
    Ok(())
}

/// The longest a single gcbench process may run before it is stopped.
pub const PROCESS_LIMIT: Duration = Duration::from_secs(600);

/// Run the program with `args` and `env`; return its stdout. Ctrl-C or the time limit stop
/// it; a failure carries the last line of its stderr.
pub fn run(bin: &Path, args: &[String], env: &[(&str, String)]) -> Result<String> {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let started = Instant::now();
    loop {
        if let Some(_status) = child.try_wait()? {
            break;
        }
        if cancel::requested() || started.elapsed() > PROCESS_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            cancel::check()?;
            bail!(
                "{} ran past {} s and was stopped",
                bin.display(),
                PROCESS_LIMIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(anyhow!(
            "{} {} failed ({}): {last}",
            bin.display(),
            args.join(" "),
            output.status
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What `gcbench heap` prints (one JSON object; extra fields are ignored).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HeapRun {
    pub gc_cpu_share: f64,
    #[serde(default)]
    pub gc_cpu_share_busy: f64,
    pub gc_cycles: u64,
    pub max_pause_s: f64,
    pub peak_rss_bytes: u64,
    pub wall_s: f64,
    pub live_bytes: u64,
    #[serde(default)]
    pub vnodes: u64,
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub alloc_bytes: u64,
    #[serde(default)]
    pub gomaxprocs: u64,
    #[serde(default)]
    pub go_version: String,
}

/// What `gcbench bounds` prints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct BoundsRun {
    pub ns_per_iter: Vec<f64>,
    pub bounds_checked: bool,
}

/// What `gcbench prologue` prints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PrologueRun {
    pub checked_ns: Vec<f64>,
    pub nosplit_ns: Vec<f64>,
    /// Each copy of the checked caller on its own (the A/A pair: same code, two places).
    #[serde(default)]
    pub checked1_ns: Vec<f64>,
    #[serde(default)]
    pub checked2_ns: Vec<f64>,
}

/// What `gcbench profile heap|server` prints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ProfileRun {
    pub workload: String,
    #[serde(default)]
    pub sampler: String,
    pub hz_asked: u64,
    /// pprof's samples (perf's are in its own file).
    pub samples: u64,
    /// pprof's stacks: [count, leaf pc, caller pcs...].
    #[serde(default)]
    pub stacks: Vec<Vec<u64>>,
    pub wall_s: f64,
    #[serde(default)]
    pub warmup_s: f64,
    #[serde(default)]
    pub cpu_s: f64,
    /// cpu_s split by mode (getrusage): what a sampler should find in user and kernel mode.
    #[serde(default)]
    pub cpu_user_s: f64,
    #[serde(default)]
    pub cpu_sys_s: f64,
    /// Operations done inside the sampled window (calls of the heap workload, requests
    /// answered by the server).
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub gc_cpu_share: f64,
    #[serde(default)]
    pub gc_cycles: u64,
    #[serde(default)]
    pub go_version: String,
}

/// What `gcbench write-barrier` prints: per GC cycle, the median ns per store.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct BarrierRun {
    #[serde(default)]
    pub ptr_marking_ns: Vec<f64>,
    #[serde(default)]
    pub ptr_idle_ns: Vec<f64>,
    #[serde(default)]
    pub int_marking_ns: Vec<f64>,
    #[serde(default)]
    pub int_idle_ns: Vec<f64>,
    #[serde(default)]
    pub marking_chunks: Vec<u64>,
    #[serde(default)]
    pub mark_s: Vec<f64>,
}

/// Parse one of the program's JSON objects (Go writes null for an empty slice).
pub fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T> {
    let cleaned = text.trim();
    let mut value: serde_json::Value = serde_json::from_str(cleaned)
        .with_context(|| format!("gcbench printed no JSON object: '{cleaned}'"))?;
    if let serde_json::Value::Object(map) = &mut value {
        for v in map.values_mut() {
            if v.is_null() {
                *v = serde_json::Value::Array(vec![]);
            }
        }
    }
    serde_json::from_value(value).context("gcbench's JSON is not what this costlab expects")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAP: &str = r#"{"mode":"heap","gogc":"100","gomemlimit":"off","gomaxprocs":2,"workers":2,"vnodes":430185,"live_target":134217728,"live_bytes":135060304,"build_s":0.53,"ops":2455202,"alloc_bytes":1610608408,"wall_s":4.19,"gc_cpu_share":0.332,"gc_cpu_share_busy":0.331,"gc_cpu_s":2.71,"busy_cpu_s":8.15,"gc_cycles":9,"max_pause_s":0.003145728,"peak_rss_bytes":410054656,"checksum":9569269935382661225,"go_version":"go1.26.8"}"#;

    #[test]
    fn parses_heap_json() {
        let r: HeapRun = parse(HEAP).unwrap();
        assert_eq!(r.gc_cycles, 9);
        assert_eq!(r.live_bytes, 135_060_304);
        assert_eq!(r.peak_rss_bytes, 410_054_656);
        assert!((r.gc_cpu_share - 0.332).abs() < 1e-12);
        assert!((r.max_pause_s - 0.003145728).abs() < 1e-15);
        assert_eq!(r.go_version, "go1.26.8");
    }

    #[test]
    fn parses_tax_json_with_nulls() {
        let b: BoundsRun =
            parse(r#"{"bounds_checked":false,"mode":"bounds","ns_per_iter":[1.2,1.3],"sink":1}"#)
                .unwrap();
        assert_eq!((b.bounds_checked, b.ns_per_iter.len()), (false, 2));
        let p: PrologueRun =
            parse(r#"{"checked_ns":[4.1],"mode":"prologue","nosplit_ns":[4.0],"sink":3}"#).unwrap();
        assert_eq!(p.nosplit_ns, vec![4.0]);
        let w: BarrierRun = parse(
            r#"{"int_idle_ns":null,"int_marking_ns":null,"ptr_marking_ns":[9.5],"ptr_idle_ns":[3.0],"marking_chunks":[61],"mark_s":[0.8],"mode":"write-barrier"}"#,
        )
        .unwrap();
        assert!(w.int_idle_ns.is_empty());
        assert_eq!(w.marking_chunks, vec![61]);
    }

    #[test]
    fn bad_json_is_an_error_not_a_panic() {
        assert!(parse::<HeapRun>("").is_err());
        assert!(parse::<HeapRun>("panic: runtime error").is_err());
        assert!(parse::<HeapRun>(r#"{"gc_cpu_share":"x"}"#).is_err());
    }

    #[test]
    fn source_hash_tracks_build_inputs_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("go.mod"), "module x\n").unwrap();
        std::fs::write(d.path().join("main.go"), "package main\n").unwrap();
        let h1 = source_hash(d.path()).unwrap();
        std::fs::write(d.path().join("main_test.go"), "package main\n").unwrap();
        assert_eq!(source_hash(d.path()).unwrap(), h1);
        std::fs::write(d.path().join("main.go"), "package main // edited\n").unwrap();
        assert_ne!(source_hash(d.path()).unwrap(), h1);
        assert!(source_hash(&d.path().join("missing")).is_err());
        assert!(binary_name(h1, Build::NoBounds).ends_with("-nobounds"));
        assert!(source_hash(&source_dir()).is_ok());
    }
}
