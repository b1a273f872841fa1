//! `costlab price`: the syscall table and the tracer's output read from fixtures, the pricing
//! arithmetic on fixture terms, bad input, and exact counts of a C program built here that
//! makes N getppid calls, touches M pages, hands a token K times or forks F times. Counting
//! needs root and bpftrace: those tests say why they skip without them. None asserts a time.

use crate::common::skip;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use costlab::labs::price::count::{self, Counts, Filter, Times};
use costlab::labs::price::pricing::{self, Unit, Units};
use costlab::report::ResultRow;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/price");

/// Runs of `costlab price` one at a time: each may mount and unmount tracefs.
static SERIAL: Mutex<()> = Mutex::new(());

fn costlab(args: &[&str], db: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_costlab"))
        .args(args)
        .env("COSTLAB_DB", db)
        .env("COSTLAB_RETRY_BUDGET", "0")
        .output()
        .expect("running costlab")
}

#[test]
fn syscall_ids_are_named_from_the_headers_of_a_fixture_tree() {
    let names = count::syscall_names(&Path::new(FIXTURES).join("sysroot"));
    assert_eq!(names.get(&110).map(String::as_str), Some("getppid"));
    assert_eq!(names.get(&0).map(String::as_str), Some("read"));
    assert_eq!(names.get(&435).map(String::as_str), Some("clone3"));
    assert_eq!(names.len(), 5);
    // No header under the root: no names (ids are then shown as syscall_<id>).
    assert!(count::syscall_names(Path::new(FIXTURES)).is_empty());
    let tracefs = Path::new(FIXTURES).join("tracefs");
    assert_eq!(count::traced_syscalls(&tracefs), vec!["getppid", "read"]);
}

#[test]
fn mounts_and_off_cpu_time_are_read_as_written() {
    let mounts = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
    assert_eq!(
        count::mount_point(mounts, "cgroup2"),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    assert_eq!(count::mount_point(mounts, "tracefs"), None);
    let t = Times {
        user_ns: 1.0,
        sys_ns: 2.0,
        wall_ns: 10.0,
    };
    assert_eq!(t.off_cpu_ns(), Some(7.0));
    // Threads side by side: more CPU than wall time, no off-CPU time to speak of.
    let busy = Times {
        user_ns: 8.0,
        sys_ns: 4.0,
        wall_ns: 10.0,
    };
    assert_eq!(busy.off_cpu_ns(), None);
}

#[test]
fn the_script_has_the_probes_the_tracefs_tree_has() {
    let tracefs = Path::new(FIXTURES).join("tracefs");
    let s = count::script(&Filter::Cgroup(PathBuf::from("/cg/x")), &tracefs);
    // Syscalls are counted by costlab's own BPF program, not by bpftrace.
    assert!(!s.contains("raw_syscalls"), "{s}");
    assert!(
        s.contains("software:minor-faults:1 /cgroup == cgroupid(\"/cg/x\")/"),
        "{s}"
    );
    assert!(s.contains("tracepoint:sched:sched_switch"), "{s}");
    assert!(s.contains("tracepoint:task:task_newtask"), "{s}");
    // Not in the fixture tree: not asked for.
    assert!(!s.contains("io_uring"), "{s}");
    assert!(!s.contains("tlb_flush"), "{s}");
    let p = count::script(&Filter::Pid(42), &tracefs);
    assert!(p.contains("/pid == 42/"), "{p}");
}

#[test]
fn the_tracers_maps_are_read_and_named() {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join("bpftrace-out.json")).unwrap();
    let (ids, events) = count::parse_maps(&text);
    assert_eq!(ids.get(&110), Some(&1000));
    assert_eq!(ids.get(&1), Some(&20003));
    let ev = |c: &str, e: &str| events.get(&(c.to_string(), e.to_string())).copied();
    assert_eq!(ev("fault", "minor"), Some(80));
    assert_eq!(ev("switch", "involuntary"), Some(6));
    assert_eq!(ev("spawn", "process"), Some(2));
    let names = count::syscall_names(&Path::new(FIXTURES).join("sysroot"));
    let named = count::named(&ids, &names);
    assert_eq!(named.get("getppid"), Some(&1000));
    assert_eq!(named.get("syscall_999"), Some(&4));
}

fn unit(name: &str, samples: &[f64]) -> Unit {
    let row = ResultRow::new(
        "cost",
        costlab::case! {"term" => name},
        "latency",
        "ns",
        samples.to_vec(),
    )
    .unwrap();
    Unit::of_row(&row, "fixture")
}

fn fixture_units() -> Units {
    let mut u = Units::new();
    u.insert("s".into(), unit("s", &[90.0, 100.0, 110.0]));
    u.insert(
        "fault-4k".into(),
        unit("fault-4k", &[900.0, 1000.0, 1100.0]),
    );
    u.insert(
        "fault-thp".into(),
        unit("fault-thp", &[50_000.0, 60_000.0, 70_000.0]),
    );
    u.insert(
        "futex-wake".into(),
        unit("futex-wake", &[100.0, 100.0, 100.0]),
    );
    u.insert(
        "futex-wait-eagain".into(),
        unit("futex-wait-eagain", &[100.0, 100.0, 100.0]),
    );
    u.insert(
        "switch-same-cpu".into(),
        unit("switch-same-cpu", &[1100.0, 1200.0, 1300.0]),
    );
    u.insert(
        "file-read".into(),
        unit("file-read", &[200.0, 200.0, 200.0]),
    );
    u.insert("file-read/byte".into(), unit("file-read", &[0.5, 0.5, 0.5]));
    pricing::derive(&mut u);
    u
}

fn fixture_counts() -> Counts {
    let mut syscalls = BTreeMap::new();
    syscalls.insert("getppid".to_string(), 1000);
    syscalls.insert("read".to_string(), 10);
    syscalls.insert("futex".to_string(), 4);
    let mut events = BTreeMap::new();
    events.insert(("fault".to_string(), "minor".to_string()), 1024);
    events.insert(("switch".to_string(), "voluntary".to_string()), 10);
    events.insert(("migration".to_string(), "migration".to_string()), 3);
    Counts {
        syscalls,
        events,
        times: Times {
            user_ns: 1e6,
            sys_ns: 2e6,
            wall_ns: 4e6,
        },
        rchar: 100,
        ..Default::default()
    }
}

#[test]
fn counts_times_units_with_the_units_spread_carried_to_the_total() {
    let units = fixture_units();
    let rows = pricing::price(&fixture_counts(), &units);
    let find = |c: &str, e: &str| rows.iter().find(|r| r.class == c && r.event == e).unwrap();
    // getppid has no term of its own: s, said so.
    let g = find("syscall", "getppid");
    assert_eq!(g.how, "priced at s only");
    let gs = g.priced().unwrap();
    assert_eq!(
        (gs.min, gs.median, gs.max),
        (90_000.0, 100_000.0, 110_000.0)
    );
    // A switch is the hand-off without its two futex calls: 1000 ns median.
    let sw = find("switch", "voluntary").priced().unwrap();
    assert_eq!((sw.min, sw.median, sw.max), (9_000.0, 10_000.0, 11_000.0));
    assert_eq!(find("fault", "minor").priced().unwrap().median, 1_024_000.0);
    assert_eq!(find("syscall", "read").priced().unwrap().median, 2_000.0);
    assert_eq!(find("syscall", "futex").priced().unwrap().median, 400.0);
    assert_eq!(find("bytes", "read").priced().unwrap().median, 50.0);
    // No term prices a migration: counted, not priced.
    assert!(find("migration", "migration").priced().is_none());
    let total = pricing::total(&rows);
    assert_eq!(
        total.1,
        100_000.0 + 10_000.0 + 1_024_000.0 + 2_000.0 + 400.0 + 50.0
    );
    assert_eq!(
        total.0,
        90_000.0 + 9_000.0 + 921_600.0 + 2_000.0 + 400.0 + 50.0
    );
    assert_eq!(
        total.2,
        110_000.0 + 11_000.0 + 1_126_400.0 + 2_000.0 + 400.0 + 50.0
    );
    // Against system times of 2.0, 2.5 and 3.0 ms: the price's low end over the slowest run,
    // its high end over the quickest.
    let sys = costlab::measure::Summary::of(&[2e6, 2.5e6, 3e6]).unwrap();
    let (lo, mid, hi) = pricing::explained(total, &sys).unwrap();
    assert!((mid - 100.0 * total.1 / 2.5e6).abs() < 1e-9);
    assert!((lo - 100.0 * total.0 / 3e6).abs() < 1e-9);
    assert!((hi - 100.0 * total.2 / 2e6).abs() < 1e-9);
    assert!(lo < mid && mid < hi);
}

#[test]
fn the_thp_what_if_names_its_figure_and_needs_512_faults() {
    let units = fixture_units();
    let w = pricing::thp_what_if(&fixture_counts(), &units).unwrap();
    assert_eq!(w.after, 2);
    // 1024 × 1000 - 2 × 60000 at the medians.
    let s = costlab::measure::Summary::of(&w.saved).unwrap();
    assert_eq!(s.median, 1_024_000.0 - 120_000.0);
    assert!(w.from.contains("term=fault-thp"), "{}", w.from);
    let mut few = fixture_counts();
    few.events.insert(("fault".into(), "minor".into()), 100);
    assert!(pricing::thp_what_if(&few, &units).is_none());
    // No echo batch figure: no io_uring what-if.
    assert!(pricing::uring_what_if(&fixture_counts(), &units).is_none());
}

fn one_line_exit_2(out: &std::process::Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    err
}

#[test]
fn bad_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = costlab(&["price", "--", "no-such-command-costlab"], &db);
    let err = one_line_exit_2(&out, "no such command");
    assert!(
        err.contains("no such command 'no-such-command-costlab'"),
        "{err}"
    );
    let out = costlab(&["price"], &db);
    let err = one_line_exit_2(&out, "no command");
    assert!(err.contains("no command to price"), "{err}");
    let out = costlab(&["price", "--runs", "0", "--", "true"], &db);
    one_line_exit_2(&out, "--runs 0");
    let out = costlab(&["price", "--pid", "1", "--duration", "0s"], &db);
    let err = one_line_exit_2(&out, "--duration 0s");
    assert!(err.contains("--duration"), "{err}");
    let out = costlab(&["price", "--terms", "no-such-run", "--", "true"], &db);
    let err = one_line_exit_2(&out, "--terms no-such-run");
    assert!(err.contains("no run 'no-such-run'"), "{err}");
    let out = costlab(&["history"], &db);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("price"), "nothing stored: {text}");
}

/// The test program, built with the system's C compiler; None (with the reason) without one.
fn build_events(dir: &Path) -> Result<PathBuf, String> {
    let exe = dir.join("events");
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(Path::new(FIXTURES).join("events.c"))
        .output()
        .map_err(|e| format!("no C compiler (cc): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(exe)
}

/// (class, event) -> count of one `costlab price --once` of `events MODE N`.
fn counted(db: &Path, exe: &Path, mode: &str, n: u64) -> BTreeMap<(String, String), f64> {
    let out = costlab(
        &[
            "price",
            "--once",
            "--quick",
            "--samples",
            "3",
            "--json",
            "-",
            "--",
            exe.to_str().unwrap(),
            mode,
            &n.to_string(),
        ],
        db,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{mode} {n}: {err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price" && r["metric"] == "count")
        .fold(BTreeMap::new(), |mut m, r| {
            // `read:dev` and `read:file` are reads: the kinds of fd share out one count.
            let event = r["case"]["event"].as_str().unwrap();
            let event = event.split_once(':').map_or(event, |(b, _)| b);
            *m.entry((
                r["case"]["class"].as_str().unwrap().to_string(),
                event.to_string(),
            ))
            .or_insert(0.0) += r["summary"]["median"].as_f64().unwrap();
            m
        })
}

/// The count of `mode N` beyond the baseline `mode 0`.
fn beyond_baseline(db: &Path, exe: &Path, mode: &str, n: u64, keys: &[(&str, &str)]) -> f64 {
    let sum = |m: &BTreeMap<(String, String), f64>| -> f64 {
        keys.iter()
            .map(|(c, e)| {
                m.get(&(c.to_string(), e.to_string()))
                    .copied()
                    .unwrap_or(0.0)
            })
            .sum()
    };
    sum(&counted(db, exe, mode, n)) - sum(&counted(db, exe, mode, 0))
}

/// Faults and switches besides the N events that a run may take or not (the runtime's own
/// first touches and the odd preemption): the "fixed handful" the counts may miss by.
const HANDFUL: f64 = 16.0;

#[test]
fn the_test_programs_events_are_counted_exactly() {
    let name = "the_test_programs_events_are_counted_exactly";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = match build_events(dir.path()) {
        Ok(e) => e,
        Err(why) => return skip::skipped(name, &why),
    };
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Syscalls: exact.
    let getppid = counted(&db, &exe, "getppid", 1000);
    assert_eq!(
        getppid.get(&("syscall".into(), "getppid".into())),
        Some(&1000.0)
    );
    assert_eq!(
        beyond_baseline(&db, &exe, "getppid", 1000, &[("syscall", "getppid")]),
        1000.0
    );
    // Forks: exact, as calls and as processes started.
    let f = 50;
    assert_eq!(
        beyond_baseline(&db, &exe, "fork", f, &[("spawn", "process")]),
        50.0
    );
    assert_eq!(
        beyond_baseline(&db, &exe, "fork", f, &[("syscall", "clone")]),
        50.0
    );
    // Faults: every fresh page once, within 1% plus a handful.
    let m = 2000.0;
    let faults = beyond_baseline(&db, &exe, "touch", 2000, &[("fault", "minor")]);
    assert!(
        faults >= m - HANDFUL && faults <= m * 1.01 + HANDFUL,
        "{faults} faults for {m} pages"
    );
    // Switches: each hand-off on one CPU switches once, voluntarily or (when the woken thread
    // preempts its waker) not.
    let k = 1000.0;
    let switches = beyond_baseline(
        &db,
        &exe,
        "token",
        1000,
        &[("switch", "voluntary"), ("switch", "involuntary")],
    );
    assert!(
        switches >= k - HANDFUL && switches <= k * 1.01 + HANDFUL,
        "{switches} switches for {k} hand-offs"
    );
}

#[test]
fn the_programs_exit_status_and_output_pass_through() {
    let name = "the_programs_exit_status_and_output_pass_through";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = costlab(
        &[
            "price",
            "--once",
            "--quick",
            "--samples",
            "3",
            "--",
            "sh",
            "-c",
            "echo to-stdout; echo to-stderr >&2; exit 7",
        ],
        &db,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    // stdout is the program's alone; costlab's table follows the program's own stderr.
    assert_eq!(stdout, "to-stdout\n");
    assert!(stderr.starts_with("to-stderr\n"), "{stderr}");
    assert!(stderr.contains("the counted events"), "{stderr}");
    // Stored like every lab's run.
    let h = costlab(&["history"], &db);
    assert!(String::from_utf8_lossy(&h.stdout).contains("costlab price"));
}

/// strace -c -f's calls column: {syscall: calls}.
fn strace_counts(exe: &Path, args: &[&str], dir: &Path) -> Result<BTreeMap<String, f64>, String> {
    let out_file = dir.join("strace.txt");
    let st = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&out_file)
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("no strace: {e}"))?;
    if !st.status.success() {
        return Err(format!(
            "strace failed: {}",
            String::from_utf8_lossy(&st.stderr)
        ));
    }
    let text = std::fs::read_to_string(&out_file).map_err(|e| e.to_string())?;
    // Rows: % time, seconds, usecs/call, calls, [errors,] syscall.
    Ok(text
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with('-'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = *f.last()?;
            if name == "total" || f.len() < 5 {
                return None;
            }
            Some((name.to_string(), f[3].parse::<f64>().ok()?))
        })
        .collect())
}

#[test]
fn the_counts_agree_with_strace_for_every_syscall_it_lists() {
    let name = "the_counts_agree_with_strace_for_every_syscall_it_lists";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = match build_events(dir.path()) {
        Ok(e) => e,
        Err(why) => return skip::skipped(name, &why),
    };
    let theirs = match strace_counts(&exe, &["fork", "5"], dir.path()) {
        Ok(c) => c,
        Err(why) => return skip::skipped_unless_ci(name, &why),
    };
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ours = counted(&db, &exe, "fork", 5);
    assert!(theirs.get("clone") == Some(&5.0), "{theirs:?}");
    for (call, n) in &theirs {
        assert_eq!(
            ours.get(&("syscall".to_string(), call.clone())),
            Some(n),
            "{call}: strace counted {n}; ours {ours:?}"
        );
    }
    // strace -c leaves out the calls that never return; costlab counts them.
    assert_eq!(
        ours.get(&("syscall".into(), "exit_group".into())),
        Some(&6.0)
    );
}

#[test]
fn a_costlab_killed_while_counting_leaves_tracefs_for_the_next_command_to_unmount() {
    let name = "a_costlab_killed_while_counting_leaves_tracefs_for_the_next_command_to_unmount";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mounted = || {
        std::fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
    };
    if mounted() {
        return skip::skipped(
            name,
            "tracefs is mounted already (by someone else): costlab would not mount it, so there is no mount to leave",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    // Its own journal: no other costlab in this suite recovers (and reports) it first.
    let journal = dir.path().join("journal");
    let mut child = Command::new(env!("CARGO_BIN_EXE_costlab"))
        .args(["price", "--once", "--", "sleep", "30"])
        .env("COSTLAB_DB", &db)
        .env("COSTLAB_JOURNAL_DIR", &journal)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !mounted() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(mounted(), "costlab price never mounted tracefs");
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no guard runs
    child.wait().unwrap();
    assert!(
        mounted(),
        "a SIGKILL runs no guard: tracefs stays until the next command"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_costlab"))
        .arg("history")
        .env("COSTLAB_DB", &db)
        .env("COSTLAB_JOURNAL_DIR", &journal)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!mounted(), "the next costlab command unmounts it: {err}");
    assert!(
        err.contains("tracefs at /sys/kernel/tracing: unmounted (left mounted by costlab pid"),
        "{err}"
    );
    // Its program (sleep) was left running in the killed run's cgroup: end it by its pid.
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    if let Some(root) = count::mount_point(&mounts, "cgroup2") {
        let cg = root
            .join(own.trim_start_matches('/'))
            .join(format!("costlab-price-{pid}"));
        let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
        for p in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: a plain kill(2) of the test's own orphaned program, by its pid.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = std::fs::remove_dir(&cg);
    }
}

#[test]
fn reads_and_writes_are_priced_by_the_kind_of_fd_they_went_to() {
    let mut units = fixture_units();
    units.insert(
        "read-devzero".into(),
        unit("read-devzero", &[150.0, 150.0, 150.0]),
    );
    let mut counts = fixture_counts();
    counts.syscalls.remove("read");
    counts.syscalls.insert("read:dev".into(), 30);
    counts.syscalls.insert("read:file".into(), 10);
    counts.rchar = 400;
    let rows = pricing::price(&counts, &units);
    let find = |c: &str, e: &str| rows.iter().find(|r| r.class == c && r.event == e).unwrap();
    // A character device's read is priced at /dev/zero's, said so; a cached file's at its term.
    let dev = find("syscall", "read:dev");
    assert!(dev.how.contains("character device"), "{}", dev.how);
    assert_eq!(dev.priced().unwrap().median, 4_500.0);
    assert_eq!(
        find("syscall", "read:file").priced().unwrap().median,
        2_000.0
    );
    // Bytes read through the device are its own work: only the file's quarter is priced.
    let bytes = find("bytes", "read");
    assert_eq!(bytes.count, 100);
    assert!(bytes.how.contains("30 of 40 calls"), "{}", bytes.how);
    assert_eq!(
        pricing::syscall_pricing("write:pipe").unwrap().unit,
        "pipe-rw"
    );
    assert_eq!(pricing::syscall_pricing("write:pipe").unwrap().factor, 0.5);
    assert_eq!(
        pricing::syscall_pricing("openat:other").unwrap().unit,
        "openat-close"
    );
    assert_eq!(pricing::base_name("pread64:file"), "pread64");
    // Sockets: at the syscall lab's loopback TCP send and recv.
    assert_eq!(
        pricing::syscall_pricing("write:socket").unwrap().unit,
        "tcp-send"
    );
    assert_eq!(
        pricing::syscall_pricing("recvfrom").unwrap().unit,
        "tcp-recv"
    );
}

#[test]
fn io_uring_submissions_are_priced_at_the_nearest_measured_batch() {
    let mut units = fixture_units();
    for (b, send, recv) in [
        (1, 4000.0, 3000.0),
        (4, 3000.0, 2000.0),
        (16, 2600.0, 1800.0),
    ] {
        units.insert(format!("uring-send({b})"), unit("uring-send", &[send]));
        units.insert(format!("uring-recv({b})"), unit("uring-recv", &[recv]));
    }
    let mut counts = fixture_counts();
    counts.syscalls.insert("io_uring_enter".into(), 10);
    counts
        .events
        .insert(("uring_submit".into(), "submit".into()), 50);
    let rows = pricing::price(&counts, &units);
    let sub = rows
        .iter()
        .find(|r| r.class == "uring_submit" && r.event == "submit")
        .unwrap();
    // 5 submissions per enter: batch 4 is nearest; (3000 + 2000) / 2 - s / 4 per op.
    assert!(sub.how.contains("batch 4"), "{}", sub.how);
    let s_median = units["s"].summary().unwrap().median;
    let per_op = sub.priced().unwrap().median / 50.0;
    assert!(
        (per_op - (2500.0 - s_median / 4.0)).abs() < 1e-6,
        "{per_op}"
    );
    // Without the syscall lab's io_uring figures: counted, not priced, and it says how to.
    let bare = pricing::price(&counts, &fixture_units());
    let sub = bare.iter().find(|r| r.class == "uring_submit").unwrap();
    assert!(
        sub.unit.is_none() && sub.how.contains("costlab syscall"),
        "{}",
        sub.how
    );
}
