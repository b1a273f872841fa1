//! Sampling the tree's kernel and user stacks on the software cpu-clock (no PMU needed) with
//! Debian's `perf record -a -G CGROUP` while the program runs, read back with `perf script`
//! (perf symbolizes: kallsyms for the kernel, the DSOs' symbol tables for user space), each
//! kernel sample classed into a subsystem and each user sample named DSO:function, with the
//! classes the labs price first.

pub mod classify;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use classify::{dso_name, kernel_subsystem, user_class, Frame};
use costlab_core::measure::quality::Quality;
use costlab_history::report::{Outcome, ResultRow};

/// Samples per CPU-second asked of perf (capped by the kernel's limit). Each is a cpu-clock
/// interrupt, which on a VM costs exits: on a loop timed by its own CPU time, interleaved, 999
/// Hz took 2.2-3.6% more CPU here, 499 Hz 0.5-2.6%, 249 Hz 0.5-1.5% (busy machine, 2026-11-26;
/// with or without -g alike: the interrupt costs, not the stack walk). 499 Hz still gives a
/// 1 s run of one busy CPU ~500 samples, and the share of kernel samples classed does not
/// depend on the rate. COSTLAB_PRICE_SAMPLE_HZ asks another rate (bench/price-overhead.sh
/// compares them on tar).
pub const HZ: u64 = 499;

/// The rate asked: COSTLAB_PRICE_SAMPLE_HZ where it is a number from 1 up, else `HZ`.
pub fn hz_asked() -> u64 {
    hz_from(std::env::var("COSTLAB_PRICE_SAMPLE_HZ").ok().as_deref())
}

/// The rate a COSTLAB_PRICE_SAMPLE_HZ value asks: a number from 1 up, else `HZ`.
fn hz_from(v: Option<&str>) -> u64 {
    v.and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(HZ)
}

/// One subsystem's samples and its top functions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subsystem {
    pub samples: u64,
    /// Its leaf functions, most first (the top ten).
    pub top: Vec<(String, u64)>,
}

/// The samples of one run, tallied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    pub hz: u64,
    pub total: u64,
    /// Samples whose leaf function perf named.
    pub named: u64,
    /// User samples perf could not name by function, by DSO (stripped binaries).
    #[serde(default)]
    pub unnamed_dsos: BTreeMap<String, u64>,
    pub kernel: BTreeMap<String, Subsystem>,
    pub user_total: u64,
    /// DSO:function of user samples, most first (the top thirty).
    pub user: Vec<(String, u64)>,
    /// User samples in the classes the labs price (go-gc, memcpy-memset, allocator,
    /// atomics-locks).
    pub user_classes: BTreeMap<String, u64>,
    /// Kernel samples by the event they ran inside (`classify::inside_event`: "syscall
    /// openat", "fault", "irq local_timer"), each with its top leaf functions: the evidence a
    /// slow line's reading cites.
    #[serde(default)]
    pub inside: BTreeMap<String, Subsystem>,
}

impl Samples {
    pub fn kernel_total(&self) -> u64 {
        self.kernel.values().map(|s| s.samples).sum()
    }
    /// The share of kernel samples that name a subsystem (not "other").
    pub fn kernel_named_share(&self) -> f64 {
        let all = self.kernel_total();
        if all == 0 {
            return 0.0;
        }
        let other = self.kernel.get("other").map_or(0, |s| s.samples);
        (all - other) as f64 / all as f64
    }
}

/// Tally `perf script -F comm,tid,ip,sym,dso` output: a header line per sample, then its
/// frames (tab-indented `ip sym (dso)`), leaf first; a blank line between samples.
pub fn tally(input: impl BufRead) -> Samples {
    let mut s = Samples::default();
    let mut kfuncs: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut user: BTreeMap<String, u64> = BTreeMap::new();
    let mut inside: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut flush = |frames: &mut Vec<Frame>, s: &mut Samples| {
        let Some(leaf) = frames.first() else { return };
        s.total += 1;
        if leaf.named() {
            s.named += 1;
        } else if !leaf.is_kernel() {
            *s.unnamed_dsos
                .entry(dso_name(&leaf.dso).to_string())
                .or_default() += 1;
        }
        if leaf.is_kernel() {
            if let Some(ev) = classify::inside_event(frames) {
                *inside
                    .entry(ev)
                    .or_default()
                    .entry(leaf.sym.clone())
                    .or_default() += 1;
            }
            let sub = kernel_subsystem(frames);
            s.kernel.entry(sub.into()).or_default().samples += 1;
            *kfuncs
                .entry(sub.into())
                .or_default()
                .entry(leaf.sym.clone())
                .or_default() += 1;
        } else {
            s.user_total += 1;
            *user
                .entry(format!("{}:{}", dso_name(&leaf.dso), leaf.sym))
                .or_default() += 1;
            if let Some(c) = user_class(&leaf.sym) {
                *s.user_classes.entry(c.into()).or_default() += 1;
            }
        }
        frames.clear();
    };
    for line in input.lines().map_while(|l| l.ok()) {
        if line.trim().is_empty() {
            flush(&mut frames, &mut s);
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            flush(&mut frames, &mut s);
            continue;
        }
        let t = line.trim();
        // "ffffffff816fd582 __d_lookup_rcu ([kernel.kallsyms])"
        let Some((ip, rest)) = t.split_once(' ') else {
            continue;
        };
        let ip = u64::from_str_radix(ip, 16).unwrap_or(0);
        let (sym, dso) = match rest.rfind(" (") {
            Some(i) => (
                &rest[..i],
                &rest[i + 2..rest.len().saturating_sub(1).max(i + 2)],
            ),
            None => (rest, ""),
        };
        let sym = sym.split("+0x").next().unwrap_or(sym).trim();
        frames.push(Frame {
            ip,
            sym: sym.to_string(),
            dso: dso.to_string(),
        });
    }
    flush(&mut frames, &mut s);
    let top = |m: BTreeMap<String, u64>, n: usize| {
        let mut v: Vec<(String, u64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    };
    for (sub, funcs) in kfuncs {
        if let Some(e) = s.kernel.get_mut(&sub) {
            e.top = top(funcs, 10);
        }
    }
    for (ev, funcs) in inside {
        let samples = funcs.values().sum();
        s.inside.insert(
            ev,
            Subsystem {
                samples,
                top: top(funcs, 5),
            },
        );
    }
    s.user = top(user, 30);
    s
}

/// Where a sampler keeps its perf.data: this prefix, then costlab's pid.
const DIR_PREFIX: &str = "costlab-price-samples-";

/// Remove the sample folders of costlab processes that no longer run (one killed with kill -9
/// leaves its folder behind).
fn remove_stale_dirs(tmp: &Path) {
    for d in costlab_core::machine::restore::journal::left_by_dead(tmp, DIR_PREFIX) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A `perf record` of a cgroup's tasks on every CPU, running until `finish`.
pub struct Sampler {
    perf: PathBuf,
    child: Child,
    dir: PathBuf,
    hz: u64,
    rel: String,
}

impl Sampler {
    /// Start sampling the cgroup `rel` (its path under the cgroup v2 mount); returns once
    /// perf has its events on (its `sleep` workload started).
    pub fn start(rel: &str) -> Result<Sampler> {
        Sampler::spawn(rel)?.ready()
    }

    /// Start perf without waiting for it (the caller sets up the rest meanwhile, then calls
    /// `ready`).
    pub fn spawn(rel: &str) -> Result<Sampler> {
        let perf = costlab_core::measure::perf::find()
            .context("perf is not on PATH (scripts/install-deps.sh installs linux-perf)")?;
        let hz = costlab_core::measure::perf::rate(hz_asked());
        remove_stale_dirs(&std::env::temp_dir());
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let data = dir.join("perf.data");
        let mut cmd = Command::new(&perf);
        // A costlab killed with kill -9 must not leave perf sampling the machine for a day:
        // perf gets SIGTERM when costlab dies, stops, and ends its `sleep` workload.
        // SAFETY: prctl is async-signal-safe and only sets this child's own attribute.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            // -B: no build-id pass over every DSO at the end (seconds of set-up);
            // --no-bpf-event: no records of BPF programs (costlab's own are named by kallsyms).
            .args([
                "record",
                "-q",
                "-B",
                "--no-bpf-event",
                "-e",
                "cpu-clock",
                "-F",
                &hz.to_string(),
                "-a",
                "-g",
            ])
            .args(["-G", rel, "-o"])
            .arg(&data)
            .args(["--", "sleep", "86400"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting perf record")?;
        Ok(Sampler {
            perf,
            child,
            dir,
            hz,
            rel: rel.to_string(),
        })
    }

    /// Wait until perf has its events on (its `sleep` workload started).
    pub fn ready(mut self) -> Result<Sampler> {
        let s = &mut self;
        let rel = s.rel.clone();
        let t0 = Instant::now();
        loop {
            let list = format!("/proc/{0}/task/{0}/children", s.child.id());
            let started = std::fs::read_to_string(&list).is_ok_and(|c| {
                c.split_whitespace().any(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|n| n.trim() == "sleep")
                })
            });
            if started {
                return Ok(self);
            }
            if let Some(status) = s.child.try_wait()? {
                let mut why = String::new();
                if let Some(mut e) = s.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut why);
                }
                bail!(
                    "perf record -G {rel} failed ({status}): {}",
                    why.lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("no message")
                        .trim()
                );
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("perf record did not start within 10 s");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stop perf (SIGINT, as Ctrl-C would) and tally what it sampled.
    pub fn finish(mut self) -> Result<Samples> {
        // SAFETY: a signal to the perf process this sampler started and has not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGINT);
        }
        let _ = self.child.wait();
        let data = self.dir.join("perf.data");
        let mut script = Command::new(&self.perf)
            .args(["script", "-F", "comm,tid,ip,sym,dso", "--no-inline", "-i"])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting perf script")?;
        let out = script.stdout.take().context("perf script's output")?;
        let mut samples = tally(std::io::BufReader::new(out));
        let status = script.wait()?;
        if !status.success() {
            bail!("perf script -i {} failed ({status})", data.display());
        }
        samples.hz = self.hz;
        Ok(samples)
    }
}

impl Drop for Sampler {
    /// A sampler dropped unfinished (an error, or a caller that wants no samples) stops perf
    /// as `finish` does, with SIGINT, on which perf ends its `sleep` workload too. A SIGKILL
    /// left the workload running for its day, reparented (ten of them after ten drops). If
    /// perf has not stopped in 2 s, its workload and then perf are killed.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let id = self.child.id();
            let workload = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
                .unwrap_or_default();
            // SAFETY: a signal to the perf process this sampler started and has not reaped.
            unsafe { libc::kill(id as i32, libc::SIGINT) };
            let t0 = Instant::now();
            while self.child.try_wait().ok().flatten().is_none()
                && t0.elapsed() < Duration::from_secs(2)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            if self.child.try_wait().ok().flatten().is_none() {
                for pid in workload
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    // SAFETY: perf's own children, not reaped while perf runs (so not reused).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The cgroup `dir`'s path under the cgroup v2 mount, as perf -G takes it.
pub fn cgroup_rel(dir: &Path, mount: &Path) -> Option<String> {
    dir.strip_prefix(mount)
        .ok()
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
}

/// The rows the contract names (docs/src/contract.md): per kernel subsystem and per user DSO:function (and per priced
/// user class), samples and share of the tree's samples.
pub fn push_rows(o: &mut Outcome, s: &Samples, cmd: &str) {
    if s.total == 0 {
        return;
    }
    let mut put = |class: &str, event: &str, n: u64| {
        let case = costlab_core::case! {"class" => class, "event" => event, "command" => cmd};
        for (metric, unit, v) in [
            ("samples", "count", n as f64),
            ("share", "%", 100.0 * n as f64 / s.total as f64),
        ] {
            if let Some(mut r) = ResultRow::new(crate::LAB, case.clone(), metric, unit, vec![v]) {
                r.quality = Some(Quality::Ok);
                o.results.push(r);
            }
        }
    };
    for (sub, v) in &s.kernel {
        put("kernel-sample", sub, v.samples);
    }
    for (class, n) in &s.user_classes {
        put("user-sample", &format!("[{class}]"), *n);
    }
    for (f, n) in &s.user {
        put("user-sample", f, *n);
    }
}

/// The verdict's lines: the share named, each subsystem with its top functions, the user
/// classes and top functions.
pub fn verdict(s: &Samples) -> Vec<String> {
    if s.total == 0 {
        return vec![
            "no samples were taken: the program ran too briefly for the sampling clock".into(),
        ];
    }
    let pct = |n: u64| 100.0 * n as f64 / s.total as f64;
    let mut v = vec![format!(
        "sampled at {} Hz on cpu-clock: {} samples, {:.1}% named by function ({} kernel, {} user)",
        s.hz,
        s.total,
        pct(s.named),
        s.kernel_total(),
        s.user_total
    )];
    let mut stripped: Vec<(&String, &u64)> = s.unnamed_dsos.iter().collect();
    stripped.sort_by_key(|s| std::cmp::Reverse(*s.1));
    if let Some((dso, n)) = stripped.first().filter(|(_, n)| pct(**n) >= 1.0) {
        v.push(format!(
            "{:.1}% of samples are in {dso} without a symbol for their function (a stripped binary: its -dbgsym package names them); {} of the unnamed are named by DSO",
            pct(**n),
            if stripped.len() == 1 { "all" } else { "each" }
        ));
    }
    let mut subs: Vec<(&String, &Subsystem)> = s.kernel.iter().collect();
    subs.sort_by_key(|s| std::cmp::Reverse(s.1.samples));
    for (name, sub) in subs {
        let top: Vec<String> = sub
            .top
            .iter()
            .take(3)
            .map(|(f, n)| format!("{f} {:.1}%", pct(*n)))
            .collect();
        v.push(format!(
            "kernel {name}: {:.1}% of samples ({})",
            pct(sub.samples),
            top.join(", ")
        ));
    }
    if s.user_total > 0 {
        let classes: Vec<String> = s
            .user_classes
            .iter()
            .map(|(c, n)| format!("{c} {:.1}%", pct(*n)))
            .collect();
        let top: Vec<String> = s
            .user
            .iter()
            .take(5)
            .map(|(f, n)| format!("{f} {:.1}%", pct(*n)))
            .collect();
        v.push(format!(
            "user: {:.1}% of samples{}; top {}",
            pct(s.user_total),
            if classes.is_empty() {
                String::new()
            } else {
                format!(" ({})", classes.join(", "))
            },
            top.join(", ")
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_folders_of_dead_costlabs_are_removed_and_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("costlab-stale-test-{}", std::process::id()));
        let live = tmp.join(format!("{DIR_PREFIX}{}", std::process::id()));
        // Past any pid_max: no process has it.
        let dead = tmp.join(format!("{DIR_PREFIX}4294967000"));
        let other = tmp.join("costlab-price-samples-notapid");
        for d in [&live, &dead, &other] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("perf.data"), b"x").unwrap();
        }
        remove_stale_dirs(&tmp);
        assert!(live.is_dir() && other.is_dir());
        assert!(!dead.exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_sampler_dropped_unfinished_leaves_neither_perf_nor_its_workload() {
        // SAFETY: geteuid takes nothing and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let cg = match crate::count::Cgroup::create() {
            Ok(cg) if root && costlab_core::measure::perf::find().is_some() => cg,
            _ => {
                eprintln!("skipped: needs root, perf and a cgroup v2 tree");
                return;
            }
        };
        let Some(rel) = cg.rel() else {
            eprintln!("skipped: the cgroup is not under the cgroup v2 mount");
            return;
        };
        let s = Sampler::start(&rel).unwrap();
        let perf = s.child.id();
        let workload: Vec<String> =
            std::fs::read_to_string(format!("/proc/{perf}/task/{perf}/children"))
                .unwrap()
                .split_whitespace()
                .map(String::from)
                .collect();
        assert!(!workload.is_empty(), "perf's sleep is started");
        drop(s);
        // Gone, or a zombie of a parent that is not reaping it here.
        let running = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                st.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        assert!(!running(&perf.to_string()), "perf still runs");
        for w in &workload {
            assert!(!running(w), "perf's workload {w} still runs");
        }
    }

    #[test]
    fn the_sample_rate_asked_is_a_positive_number_or_the_default() {
        assert_eq!(hz_from(None), HZ);
        assert_eq!(hz_from(Some("999")), 999);
        assert_eq!(hz_from(Some(" 249\n")), 249);
        assert_eq!(hz_from(Some("0")), HZ);
        assert_eq!(hz_from(Some("fast")), HZ);
    }

    const SCRIPT: &str = "tar  9261 \n\t           123b8 _dl_check_map_versions (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n\ntar  9262 \n\tffffffff816fd582 __d_lookup_rcu ([kernel.kallsyms])\n\tffffffff816e887e lookup_fast ([kernel.kallsyms])\n\tffffffff816dec9a vfs_statx ([kernel.kallsyms])\n\tffffffff82259cc1 do_syscall_64 ([kernel.kallsyms])\n\t           f786a __GI___fstatat64 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\t  73736572706d6f [unknown] ([unknown])\n\ngzip  9263 \n\t           4a1b0 __memmove_avx_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\ngzip  9263 \n\t            3a10 [unknown] (/usr/bin/gzip)\n\n";

    #[test]
    fn perf_script_output_is_tallied_and_named() {
        let s = tally(SCRIPT.as_bytes());
        assert_eq!(s.total, 4);
        assert_eq!(s.named, 3);
        assert_eq!(s.kernel_total(), 1);
        assert_eq!(s.kernel["fs/VFS"].samples, 1);
        assert_eq!(s.kernel["fs/VFS"].top[0].0, "__d_lookup_rcu");
        // Its stack names no syscall's own frame (the fixture's do_syscall_64 calls vfs_statx
        // directly): placed nowhere.
        assert!(s.inside.is_empty(), "{:?}", s.inside);
        let t = tally("tar 1 \n\tffffffff81000001 recently_deleted ([kernel.kallsyms])\n\tffffffff81000002 __x64_sys_openat ([kernel.kallsyms])\n\ntar 1 \n\tffffffff81000003 find_inode_bit ([kernel.kallsyms])\n\tffffffff81000002 __x64_sys_openat ([kernel.kallsyms])\n\n".as_bytes());
        let open = &t.inside["syscall openat"];
        assert_eq!(open.samples, 2);
        assert_eq!(
            open.top,
            [
                ("find_inode_bit".to_string(), 1),
                ("recently_deleted".to_string(), 1)
            ]
        );
        assert_eq!(s.user_total, 3);
        assert_eq!(s.user_classes.get("memcpy-memset"), Some(&1));
        assert!(s
            .user
            .iter()
            .any(|(f, _)| f == "ld-linux-x86-64.so.2:_dl_check_map_versions"));
        assert!(s.user.iter().any(|(f, _)| f == "gzip:[unknown]"));
        assert_eq!(s.kernel_named_share(), 1.0);
        let mut o = Outcome::default();
        push_rows(&mut o, &s, "tar");
        let row = o
            .results
            .iter()
            .find(|r| r.key("class") == "kernel-sample" && r.metric == "share")
            .unwrap();
        assert_eq!(
            (row.key("event"), row.summary.median),
            ("fs/VFS".to_string(), 25.0)
        );
        assert!(o
            .results
            .iter()
            .any(|r| r.key("event") == "[memcpy-memset]"));
        assert!(verdict(&s)[0].contains("75.0% named"));
        assert_eq!(s.unnamed_dsos.get("gzip"), Some(&1));
        assert!(verdict(&s)[1].contains("gzip without a symbol"));
    }

    #[test]
    fn the_cgroup_path_is_taken_under_the_mount() {
        let m = Path::new("/sys/fs/cgroup/unified");
        assert_eq!(
            cgroup_rel(Path::new("/sys/fs/cgroup/unified/costlab-price-7"), m).as_deref(),
            Some("costlab-price-7")
        );
        assert_eq!(cgroup_rel(Path::new("/elsewhere"), m), None);
    }
}
