//! `costlab price`: the syscall table and the counted events read from fixtures, the
//! pricing arithmetic on fixture terms, bad input, and exact counts of a C program built here
//! that makes N getppid calls, touches M pages, hands a token K times or forks F times, checked
//! against perf stat's own counts too. Counting needs root: those tests say why they skip
//! without it. None asserts a time.

use crate::common::{self, skip};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use costlab_history::report::ResultRow;
use costlab_price::count::{self, Counts, Times};
use costlab_price::pricing::{self, Unit, Units};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/price");

/// Runs of `costlab price` one at a time: each may mount and unmount tracefs.
pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

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
fn the_counted_events_are_the_software_ones_and_the_tracepoints_the_tracefs_tree_has() {
    use costlab_price::bpf::tp;
    use count::perfcount;
    // Software events always, on perf counters; syscalls are counted by costlab's own BPF
    // program, not here.
    let keys: Vec<(&str, &str)> = perfcount::specs()
        .iter()
        .map(|s| (s.class, s.event))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("fault", "minor"),
            ("fault", "major"),
            ("migration", "migration")
        ]
    );
    // Tracepoints by BPF, each only where the tracefs tree has it (an id file is not needed:
    // a raw tracepoint is attached by name).
    let tracefs = Path::new(FIXTURES).join("tracefs");
    let present: Vec<&str> = tp::present(&tracefs).iter().map(|t| t.raw).collect();
    assert_eq!(
        present,
        vec!["sched_switch", "task_newtask", "sched_wakeup"]
    );
    let keys: Vec<(&str, &str)> = tp::present(&tracefs)
        .iter()
        .flat_map(|t| (0..2).filter_map(|s| t.key(s)))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("switch", "voluntary"),
            ("switch", "involuntary"),
            ("spawn", "thread"),
            ("spawn", "process"),
            ("wakeup", "made")
        ]
    );
}

#[test]
fn syscall_ids_are_named_with_unknown_ones_kept() {
    let mut ids = BTreeMap::new();
    ids.insert(110u32, 1000u64);
    ids.insert(999, 4);
    let names = count::syscall_names(&Path::new(FIXTURES).join("sysroot"));
    let named = count::named(&ids, &names);
    assert_eq!(named.get("getppid"), Some(&1000));
    assert_eq!(named.get("syscall_999"), Some(&4));
}

fn unit(name: &str, samples: &[f64]) -> Unit {
    let row = ResultRow::new(
        "cost",
        costlab_core::case! {"term" => name},
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
    let sys = costlab_core::measure::Summary::of(&[2e6, 2.5e6, 3e6]).unwrap();
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
    let s = costlab_core::measure::Summary::of(&w.saved).unwrap();
    assert_eq!(s.median, 1_024_000.0 - 120_000.0);
    assert!(w.from.contains("term=fault-thp"), "{}", w.from);
    let mut few = fixture_counts();
    few.events.insert(("fault".into(), "minor".into()), 100);
    assert!(pricing::thp_what_if(&few, &units).is_none());
    // No echo batch figure: no io_uring what-if.
    assert!(pricing::uring_what_if(&fixture_counts(), &units).is_none());
}

/// costlab price refused, in one line, with the status costlab's own refusals take beside a
/// program's (README, "Exit status"): 125, or 127 for a program that is not there.
fn one_line_exit_2(out: &std::process::Output, what: &str) -> String {
    use costlab_core::error::beside_program::{COSTLAB, NOT_FOUND};
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let want = if err.contains("no such command") {
        NOT_FOUND
    } else {
        COSTLAB
    };
    assert_eq!(out.status.code(), Some(want.into()), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    err
}

#[test]
fn bad_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = common::costlab_db(&db, &["price", "--", "no-such-command-costlab"]);
    let err = one_line_exit_2(&out, "no such command");
    assert!(
        err.contains("no such command 'no-such-command-costlab'"),
        "{err}"
    );
    let out = common::costlab_db(&db, &["price"]);
    let err = one_line_exit_2(&out, "no command");
    assert!(err.contains("no command to price"), "{err}");
    let out = common::costlab_db(&db, &["price", "--runs", "0", "--", "true"]);
    one_line_exit_2(&out, "--runs 0");
    let out = common::costlab_db(&db, &["price", "--runs", "-1", "--", "true"]);
    let err = one_line_exit_2(&out, "--runs -1");
    assert!(err.contains("--runs -1"), "{err}");
    let out = common::costlab_db(&db, &["price", "--pid", "1", "--duration", "0s"]);
    let err = one_line_exit_2(&out, "--duration 0s");
    assert!(err.contains("--duration"), "{err}");
    let out = common::costlab_db(&db, &["price", "--terms-run", "no-such-run", "--", "true"]);
    let err = one_line_exit_2(&out, "--terms-run no-such-run");
    assert!(err.contains("no run 'no-such-run'"), "{err}");
    let out = common::costlab_db(&db, &["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("price"), "nothing stored: {text}");
}

/// The test program, built with the system's C compiler; None (with the reason) without one.
pub(crate) fn build_events(dir: &Path) -> Result<PathBuf, String> {
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
    let out = common::costlab_db(
        db,
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

/// `perf stat -a -G` of `exe MODE N`, joined to a fresh cgroup just before its exec (as costlab
/// joins its own): event name (with the filter's side, "sched:sched_switch/voluntary") -> count.
fn perf_stat_cgroup(
    perf: &Path,
    exe: &Path,
    mode: &str,
    n: u64,
) -> Result<BTreeMap<String, f64>, String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let root = count::mount_point(&mounts, "cgroup2").ok_or("no cgroup v2 mount")?;
    let name = format!("costlab-test-perf-{}", std::process::id());
    let cg = root.join(&name);
    std::fs::create_dir(&cg).map_err(|e| format!("cannot create {}: {e}", cg.display()))?;
    let events = [
        ("minor-faults", None),
        ("major-faults", None),
        ("sched:sched_switch", None),
        ("sched:sched_switch", Some("prev_state & 127")),
        ("task:task_newtask", None),
        ("task:task_newtask", Some("clone_flags & 65536")),
    ];
    let mut cmd = Command::new(perf);
    cmd.args(["stat", "-x,", "-a"]);
    for (e, f) in events {
        cmd.args(["-e", e]);
        if let Some(f) = f {
            cmd.args(["--filter", f]);
        }
    }
    cmd.arg("-G")
        .arg(vec![name.as_str(); events.len()].join(","))
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec \"$@\"",
            cg.display()
        ))
        .arg("sh")
        .arg(exe)
        .arg(mode)
        .arg(n.to_string())
        .stdout(std::process::Stdio::null());
    let out = cmd.output().map_err(|e| format!("perf stat: {e}"));
    let _ = std::fs::remove_dir(&cg);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(format!("perf stat -a -G failed: {text}"));
    }
    // CSV rows: count, unit, event, ... in the order the events were given.
    let rows: Vec<(String, f64)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((f.get(2)?.to_string(), f.first()?.parse::<f64>().ok()?))
        })
        .collect();
    if rows.len() != events.len() {
        return Err(format!("perf stat gave {} counts: {text}", rows.len()));
    }
    Ok(rows
        .into_iter()
        .zip(events)
        .map(|((e, n), (_, f))| {
            (
                if f.is_some() {
                    format!("{e}/filtered")
                } else {
                    e
                },
                n,
            )
        })
        .collect())
}

#[test]
fn the_faults_switches_and_spawns_match_perf_stats_counts_of_the_same_cgroup() {
    let name = "the_faults_switches_and_spawns_match_perf_stats_counts_of_the_same_cgroup";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let Some(perf) = costlab_core::measure::perf::find() else {
        return skip::skipped_unless_ci(
            name,
            "no perf on PATH (scripts/install-deps.sh installs linux-perf)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = match build_events(dir.path()) {
        Ok(e) => e,
        Err(why) => return skip::skipped(name, &why),
    };
    let db = dir.path().join("h.db");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Within 1% plus a handful: the runs are two, and perf's cgroup is joined by a shell that
    // then execs (a few faults of its own); a wrong filter or a missed CPU is off by far more.
    let close = |ours: f64, theirs: f64, what: &str| {
        assert!(
            (ours - theirs).abs() <= theirs * 0.01 + HANDFUL,
            "{what}: costlab counted {ours}, perf stat {theirs}"
        );
    };
    for (mode, n) in [("touch", 2000), ("token", 1000), ("fork", 50)] {
        let ours = counted(&db, &exe, mode, n);
        let theirs = match perf_stat_cgroup(&perf, &exe, mode, n) {
            Ok(t) => t,
            Err(why) => return skip::skipped_unless_ci(name, &why),
        };
        let o = |c: &str, e: &str| {
            ours.get(&(c.to_string(), e.to_string()))
                .copied()
                .unwrap_or(0.0)
        };
        let t = |e: &str| theirs.get(e).copied().unwrap_or(0.0);
        let what = format!("{mode} {n}");
        // A fork's parent and child share pages copied on write: which of them writes one
        // first decides how often it faults, so fork runs differ by tens of faults. The
        // other two modes fault alike from run to run.
        if mode != "fork" {
            close(
                o("fault", "minor"),
                t("minor-faults"),
                &format!("{what}: minor faults"),
            );
        }
        close(
            o("fault", "major"),
            t("major-faults"),
            &format!("{what}: major faults"),
        );
        close(
            o("switch", "voluntary") + o("switch", "involuntary"),
            t("sched:sched_switch"),
            &format!("{what}: switches"),
        );
        // Which side of a hand-off is preempted differs from run to run; a fork's parent
        // sleeps in wait() each time: there the voluntary side is the program's own.
        if mode != "token" {
            close(
                o("switch", "voluntary"),
                t("sched:sched_switch/filtered"),
                &format!("{what}: voluntary switches"),
            );
        }
        close(
            o("spawn", "process") + o("spawn", "thread"),
            t("task:task_newtask"),
            &format!("{what}: tasks started"),
        );
        close(
            o("spawn", "thread"),
            t("task:task_newtask/filtered"),
            &format!("{what}: threads started"),
        );
    }
}

#[test]
fn a_running_process_has_its_switches_and_wakeups_counted_by_thread() {
    let name = "a_running_process_has_its_switches_and_wakeups_counted_by_thread";
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
    // Two threads hand a token back and forth until killed: its second thread is started
    // before the counting, so both are counted one by one.
    let mut child = Command::new(&exe)
        .args(["token", "1000000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = child.id().to_string();
    let out = common::costlab_db(
        &db,
        &[
            "price",
            "--pid",
            &pid,
            "--duration",
            "1s",
            "--quick",
            "--samples",
            "3",
            "--json",
            "-",
        ],
    );
    let _ = child.kill();
    let _ = child.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let count = |c: &str, e: &str| -> f64 {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["lab"] == "price" && r["metric"] == "count")
            .filter(|r| r["case"]["class"] == c && r["case"]["event"] == e)
            .map(|r| r["summary"]["median"].as_f64().unwrap())
            .sum()
    };
    let (vol, wake) = (count("switch", "voluntary"), count("wakeup", "made"));
    assert!(vol > 1000.0, "{vol} voluntary switches in a second: {err}");
    // Each hand-off: the holder wakes its partner, then sleeps. Wake-ups made, not received
    // (those would be twice as many): as many as the voluntary switches.
    assert!(
        (vol - wake).abs() <= vol * 0.02 + HANDFUL,
        "{vol} voluntary switches, {wake} wake-ups made"
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
    let out = common::costlab_db(
        &db,
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
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    // stdout is the program's alone; costlab's table follows the program's own stderr.
    assert_eq!(stdout, "to-stdout\n");
    assert!(stderr.starts_with("to-stderr\n"), "{stderr}");
    assert!(stderr.contains("the counted events"), "{stderr}");
    // One line says the program failed, after costlab's table.
    assert!(
        stderr
            .trim_end()
            .ends_with("costlab: the program exited with status 7"),
        "{stderr}"
    );
    // Stored like every lab's run.
    let h = common::costlab_db(&db, &["history"]);
    let listed = String::from_utf8_lossy(&h.stdout);
    assert!(
        listed.contains(" price ") && listed.contains("-- sh -c"),
        "{listed}"
    );
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
    // Its program (sleep) was left running in the killed run's cgroup: end it.
    common::end_killed_price_program(pid);
}

/// The pids of `perf record` processes sampling the cgroup of costlab pid `pid`.
fn samplers_of(pid: u32) -> Vec<u32> {
    let want = format!("costlab-price-{pid}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            args.contains(&b"record".as_slice()) && args.contains(&want.as_bytes())
        })
        .collect()
}

#[test]
fn a_costlab_killed_while_sampling_leaves_no_sampler_running() {
    let name = "a_costlab_killed_while_sampling_leaves_no_sampler_running";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    if costlab_core::measure::perf::find().is_none() {
        return skip::skipped_unless_ci(name, "perf is not installed (scripts/install-deps.sh)");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_costlab"))
        .args(["price", "--once", "--", "sleep", "30"])
        .env("COSTLAB_DB", dir.path().join("h.db"))
        .env("COSTLAB_JOURNAL_DIR", dir.path().join("journal"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = std::time::Instant::now();
    while samplers_of(pid).is_empty() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sampler = samplers_of(pid);
    assert!(
        !sampler.is_empty(),
        "costlab price never started its sampler"
    );
    child.kill().unwrap(); // SIGKILL: no guard runs
    child.wait().unwrap();
    let t0 = std::time::Instant::now();
    while !samplers_of(pid).is_empty() && t0.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let left = samplers_of(pid);
    for p in &left {
        // SAFETY: a plain kill(2) of a sampler the test found by its command line.
        unsafe { libc::kill(*p as i32, libc::SIGKILL) };
    }
    common::end_killed_price_program(pid);
    assert!(
        left.is_empty(),
        "perf record {left:?} outlived the killed costlab {pid}"
    );
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

// ---- The fleet: counts saved and priced again, here and on another machine (no root). ----

/// The fixture run of machine A's (made-up) unit costs, and machine B's id.
const RUN_A: &str = "20261120T100000Z-f1a701";
const MACHINE_B: &str = "f1b7000000000b02";

fn fixture(name: &str) -> String {
    Path::new(FIXTURES).join(name).display().to_string()
}

/// A history (a SQLite file or a postgres:// URL) holding machines A's and B's unit costs.
fn fleet_history(db: &str) {
    let out = crate::common::costlab_db(
        db,
        &[
            "import",
            &fixture("terms-machine-a.json"),
            &fixture("terms-machine-b.json"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `costlab --db DB ARGS --json -`: exit 0, its document.
fn priced_doc(db: &str, args: &[&str]) -> (serde_json::Value, String) {
    // Before any `--`: what follows it is the priced command's.
    let mut all = vec![args[0], "--json", "-"];
    all.extend(&args[1..]);
    let out = crate::common::command_db(db)
        .env("COSTLAB_RETRY_BUDGET", "0")
        .args(&all)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), err)
}

/// The price rows of a document: (class, event, metric, on) -> median.
fn price_rows(doc: &serde_json::Value) -> BTreeMap<(String, String, String, String), f64> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price")
        .map(|r| {
            let key = |k: &str| r["case"][k].as_str().unwrap_or("").to_string();
            (
                (
                    key("class"),
                    key("event"),
                    r["metric"].as_str().unwrap().into(),
                    key("on"),
                ),
                r["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn median(
    rows: &BTreeMap<(String, String, String, String), f64>,
    c: &str,
    e: &str,
    m: &str,
    on: &str,
) -> f64 {
    *rows
        .get(&(c.into(), e.into(), m.into(), on.into()))
        .unwrap_or_else(|| panic!("no row {c} {e} {m} on={on}: {rows:?}"))
}

/// The --from/--on run every store is checked with: the fixture counts priced at A's terms
/// and B's; its rows and what it printed.
fn check_from_and_on(db: &str) -> serde_json::Value {
    fleet_history(db);
    let (doc, err) = priced_doc(
        db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
            "--on",
            "f1b7",
        ],
    );
    let rows = price_rows(&doc);
    // Counts as saved; each priced at A's unit here and at B's on B.
    assert_eq!(median(&rows, "syscall", "getppid", "count", ""), 1000.0);
    assert_eq!(median(&rows, "syscall", "getppid", "unit_cost", ""), 166.0);
    assert_eq!(
        median(&rows, "syscall", "getppid", "unit_cost", MACHINE_B),
        274.0
    );
    assert_eq!(
        median(&rows, "syscall", "getppid", "priced", MACHINE_B),
        274_000.0
    );
    assert_eq!(median(&rows, "fault", "minor", "priced", ""), 1_024_000.0);
    // A send at the syscall lab's loopback TCP send, on either machine.
    assert_eq!(median(&rows, "syscall", "sendto", "unit_cost", ""), 1500.0);
    assert_eq!(
        median(&rows, "syscall", "sendto", "unit_cost", MACHINE_B),
        1950.0
    );
    assert_eq!(
        median(&rows, "fault", "minor", "priced", MACHINE_B),
        1_331_200.0
    );
    // The times are the saved untraced run's.
    assert_eq!(median(&rows, "program", "total", "sys_time", ""), 2.5e6);
    let here = median(&rows, "program", "total", "priced_kernel", "");
    let there = median(&rows, "program", "total", "priced_kernel", MACHINE_B);
    assert!(there > here, "{there} vs {here}");
    // Both columns side by side, and the line naming the terms that differ.
    assert!(err.contains("unit ns on f1b70000"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("on f1b7000000000b02 this program's kernel time is "))
        .unwrap_or_else(|| panic!("no --on line: {err}"));
    assert!(line.contains(&format!("{:.2}x", there / here)), "{line}");
    assert!(line.contains("s is 274 vs 166 ns"), "{line}");
    assert!(line.contains("fault-4k is 1300 vs 1000 ns"), "{line}");
    assert!(err.contains("nothing run here"), "{err}");
    // Stored whole: the run in the history is the document, row for row.
    let out = crate::common::costlab_db(db, &["export", "last"]);
    let stored: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stored["run"]["id"], doc["run"]["id"]);
    assert_eq!(price_rows(&stored), rows);
    assert_eq!(
        stored["results"].as_array().unwrap().len(),
        doc["results"].as_array().unwrap().len()
    );
    assert_eq!(stored["models"], doc["models"]);
    doc
}

#[test]
fn counts_from_a_file_are_priced_here_and_on_a_second_stored_machine_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    check_from_and_on(&db);
}

#[test]
fn counts_from_a_file_are_priced_here_and_on_a_second_stored_machine_in_postgres() {
    let url = crate::common::pg::cluster().fresh();
    check_from_and_on(&url);
}

/// A term the history holds only as a figure that is not ok is priced with that figure and
/// flagged, not measured again at the price's own cost.
#[test]
fn a_term_the_history_holds_only_noisy_is_used_and_flagged_not_measured_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("terms-machine-a.json")).unwrap())
            .unwrap();
    for r in doc["results"].as_array_mut().unwrap() {
        if r["lab"] == "cost" && r["case"]["term"] == "fault-4k" {
            r["quality"] = "noisy".into();
        }
    }
    let noisy = dir.path().join("terms-noisy.json");
    std::fs::write(&noisy, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = crate::common::costlab_db(&db, &["import", noisy.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, err) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    assert!(
        err.contains("the history has no ok figure for fault-4k (run 20261120T100000Z-f1a701"),
        "{err}"
    );
    assert!(!err.contains("measured first"), "{err}");
}

/// `--once` with `--from`: the saved traced run's times, as saved (the counting's cost on the
/// machine that counted is not known here, so nothing is taken out), and nothing measured.
#[test]
fn once_from_a_file_uses_the_saved_traced_times_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let (doc, err) = priced_doc(
        &db,
        &[
            "price",
            "--once",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    let rows = price_rows(&doc);
    assert_eq!(median(&rows, "program", "total", "sys_time", ""), 3.0e6);
    assert_eq!(median(&rows, "program", "total", "user_time", ""), 1.5e6);
    assert!(err.contains("times from the traced run as saved"), "{err}");
    assert!(!rows.keys().any(|k| k.0 == "tracing"), "{rows:?}");
}

#[test]
fn two_prices_of_one_command_compare_class_by_class() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let (a, _) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    // The same command counted again with 3x the getppid calls and fewer faults.
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("counts.json")).unwrap()).unwrap();
    for e in saved["events"].as_array_mut().unwrap() {
        match (e["class"].as_str().unwrap(), e["event"].as_str().unwrap()) {
            ("syscall", "getppid") => e["count"] = 3000.into(),
            ("fault", "minor") => e["count"] = 200.into(),
            _ => {}
        }
    }
    let second = dir.path().join("counts-2.json");
    std::fs::write(&second, saved.to_string()).unwrap();
    let (b, _) = priced_doc(
        &db,
        &[
            "price",
            "--from",
            second.to_str().unwrap(),
            "--terms-run",
            RUN_A,
        ],
    );
    let (ia, ib) = (
        a["run"]["id"].as_str().unwrap(),
        b["run"]["id"].as_str().unwrap(),
    );
    let out = crate::common::costlab_db(&db, &["compare", ia, ib]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no '{needle}' in {text}"))
            .to_string()
    };
    assert!(
        line("class=syscall command=fixture-program --made-up event=getppid priced")
            .contains("+200.0%")
    );
    assert!(
        line("class=fault command=fixture-program --made-up event=minor count").contains("-80.5%")
    );
    assert!(
        line("class=spawn command=fixture-program --made-up event=process priced")
            .contains("+0.0%")
    );
    assert!(
        line("class=program command=fixture-program --made-up event=total priced_kernel")
            .contains('%')
    );
}

#[test]
fn a_price_has_its_chart_in_the_report_and_its_rows_in_csv_and_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    priced_doc(
        &db,
        &[
            "price",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
        ],
    );
    let out_dir = dir.path().join("report");
    let out =
        crate::common::costlab_db(&db, &["report", "last", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(
        html.contains("<svg id=\"chart-price-cpu\""),
        "no price chart"
    );
    for piece in [
        "user time",
        "kernel: fault",
        "kernel: syscall",
        "kernel work no term prices",
    ] {
        assert!(html.contains(piece), "{piece} not drawn");
    }
    assert!(
        html.contains("One bar of the program&#39;s CPU time"),
        "caption"
    );
    // Price never runs in `costlab run`: a report without it names no price lab.
    assert!(!html.contains("Not run: price"));
    // Its check is a model with no points: its lines are in the models section, no empty card.
    assert!(!html.contains("the model has no points"));
    assert!(html.contains("this program") || html.contains("of its system time"));

    let out = crate::common::costlab_db(&db, &["export", "last", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    let head = csv.lines().next().unwrap();
    for col in ["class", "event", "command"] {
        assert!(head.split(',').any(|c| c == col), "{head}");
    }
    assert!(
        csv.lines().any(
            |l| l.contains(",price,syscall,getppid,fixture-program --made-up,")
                && l.contains(",priced,ns,166000,")
        ),
        "{csv}"
    );
    let out = crate::common::costlab_db(&db, &["export", "last", "--format", "markdown"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("## price"), "{md}");
    assert!(
        md.contains(
            "| class=syscall event=getppid command=fixture-program --made-up | priced | 166000 |"
        ),
        "{md}"
    );
}

/// `--strict` as in every lab: exit 3 and a line per figure that is not ok. A price takes
/// only ok stored figures as units, so from the clean fixture terms nothing is marked and
/// --strict passes (a unit measured now, on a busy machine, is what could fail it: not a
/// thing a test can pin down).
#[test]
fn strict_passes_a_price_read_from_ok_terms_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let out = crate::common::costlab_db(
        &db,
        &[
            "price",
            "--strict",
            "--from",
            &fixture("counts.json"),
            "--terms-run",
            RUN_A,
            "--on",
            MACHINE_B,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("costlab: strict:"), "{err}");
    assert!(err.contains("quality: all "), "{err}");
}

#[test]
fn bad_fleet_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let check = |args: &[&str], needles: &[&str]| {
        let out = crate::common::costlab_db(&db, args);
        let err = one_line_exit_2(&out, &format!("{args:?}"));
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err}");
        }
    };
    let missing = dir.path().join("missing.json");
    check(
        &["price", "--from", missing.to_str().unwrap()],
        &["cannot read --from", "no such file", "--save-counts FILE"],
    );
    let garbled = dir.path().join("garbled.json");
    std::fs::write(&garbled, "{\"schema\": \"costlab-counts/1\", \"events\": 7").unwrap();
    check(
        &["price", "--from", garbled.to_str().unwrap()],
        &["is not a costlab counts file", "not JSON"],
    );
    std::fs::write(
        &garbled,
        std::fs::read_to_string(fixture("terms-machine-a.json")).unwrap(),
    )
    .unwrap();
    check(
        &["price", "--from", garbled.to_str().unwrap()],
        &["is not a costlab counts file", "schema 'costlab/1'"],
    );
    let counts = fixture("counts.json");
    check(
        &["price", "--from", &counts, "--on", "no-such-machine"],
        &[
            "--on no-such-machine: no such machine in the history",
            "machines with stored unit costs: f1a7000000000a01, f1b7000000000b02",
        ],
    );
    check(
        &["price", "--from", &counts, "--on", "f1"],
        &["matches 2 machines"],
    );
    // A machine whose runs price nothing (the all-labs fixture without its syscall rows).
    let mut other = crate::common::fixture();
    other.results.retain(|r| r.lab == "mem");
    other.run.id = "20261121T100000Z-f1c7c3".into();
    let mut machine = other.machine.clone();
    machine["id"] = "f1c7000000000c03".into();
    other.machine = machine;
    let file = dir.path().join("no-terms.json");
    std::fs::write(&file, serde_json::to_string(&other).unwrap()).unwrap();
    let out = crate::common::costlab_db(&db, &["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    check(
        &["price", "--from", &counts, "--on", "f1c7"],
        &[
            "machine f1c7000000000c03 has no stored unit costs",
            "f1a7000000000a01, f1b7000000000b02",
        ],
    );
    // --save-counts into a folder that does not exist: refused before anything runs.
    check(
        &[
            "price",
            "--save-counts",
            "/nonexistent/dir/c.json",
            "--",
            "true",
        ],
        &["--save-counts", "no folder /nonexistent/dir"],
    );
    // --from with a command or a --pid: one or the other.
    let out = crate::common::costlab_db(&db, &["price", "--from", &counts, "--", "true"]);
    let refused = costlab_core::error::beside_program::COSTLAB;
    assert_eq!(out.status.code(), Some(refused.into()));
    let out = crate::common::costlab_db(&db, &["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("costlab price"), "nothing stored: {text}");
}

#[test]
fn saved_counts_price_the_same_as_the_run_that_counted_them() {
    let name = "saved_counts_price_the_same_as_the_run_that_counted_them";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = match build_events(dir.path()) {
        Ok(e) => e,
        Err(why) => return skip::skipped(name, &why),
    };
    let db = dir.path().join("h.db").display().to_string();
    fleet_history(&db);
    let saved = dir.path().join("counts.json");
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // At machine A's terms both times, so nothing is measured and the unit costs are equal.
    let (direct, _) = priced_doc(
        &db,
        &[
            "price",
            "--terms-run",
            RUN_A,
            "--save-counts",
            saved.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "getppid",
            "200",
        ],
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(file["schema"], "costlab-counts/1");
    assert_eq!(file["complete"], true);
    assert_eq!(file["untraced"].as_array().unwrap().len(), 1);
    assert!(file["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["class"] == "syscall" && e["event"] == "getppid" && e["count"] == 200));
    let (again, _) = priced_doc(
        &db,
        &[
            "price",
            "--terms-run",
            RUN_A,
            "--from",
            saved.to_str().unwrap(),
        ],
    );
    let (a, b) = (price_rows(&direct), price_rows(&again));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        let w = b[k];
        assert!(
            (v - w).abs() <= 1e-9 * v.abs().max(1.0),
            "{k:?}: {v} then {w}"
        );
    }
}
