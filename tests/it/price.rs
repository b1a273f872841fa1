//! `costlab price`: the syscall table and the counted events read from fixtures, the
//! pricing arithmetic on fixture terms, bad input, exact counts of a C program built here that
//! makes N getppid calls, touches M pages, hands a token K times or forks F times, and the
//! program's exit status passed through. Counting needs root: those tests say why they skip
//! without it. None asserts a time. Beside it: price_counts.rs (the counts against perf stat
//! and strace, by thread, by fd kind, io_uring; a costlab killed while counting) and
//! price_fleet.rs (counts saved and priced again, here and on another machine).

use crate::common::price_refused;
use crate::common::{self, skip};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use costlab_history::report::ResultRow;
use costlab_price::count::{self, Counts, Times};
use costlab_price::pricing::{self, Unit, Units};

pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/price");

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
        vec!["sched_switch", "task_newtask", "sched_waking"]
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

pub(crate) fn unit(name: &str, samples: &[f64]) -> Unit {
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

pub(crate) fn fixture_units() -> Units {
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

pub(crate) fn fixture_counts() -> Counts {
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
    // getppid is a light call: its work is the entry and exit, at s.
    let g = find("syscall", "getppid");
    assert!(g.how.starts_with("a light call"), "{}", g.how);
    let gs = g.priced().unwrap();
    assert_eq!(
        (gs.min, gs.median, gs.max),
        (90_000.0, 100_000.0, 110_000.0)
    );
    // A heavy call with no term has no price and says so.
    assert!(pricing::syscall_pricing("io_submit").is_none());
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
    // Beside a split that found kernel time inside user time, the light call's entry and exit
    // move there: getppid's own line carries nothing, and that line prices every call's and
    // fault's at s.
    let mut split_counts = fixture_counts();
    split_counts.measured = Some(costlab_price::measured::Split {
        lines: vec![costlab_price::measured::Line {
            class: "kernel-other".into(),
            event: "inside user time".into(),
            count: 10,
            cpu_ns: 1000,
            ..Default::default()
        }],
        ..Default::default()
    });
    let rows2 = pricing::price(&split_counts, &units);
    let find2 = |c: &str, e: &str| rows2.iter().find(|r| r.class == c && r.event == e).unwrap();
    assert_eq!(find2("syscall", "getppid").priced().unwrap().median, 0.0);
    let ee = find2("kernel-other", "inside user time");
    assert_eq!(ee.count, 1000 + 10 + 4 + 1024);
    assert_eq!(ee.priced().unwrap().median, 203_800.0);
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

#[test]
fn bad_input_exits_2_with_one_line_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let _one = crate::common::serial();
    let out = common::costlab_db(&db, &["price", "--", "no-such-command-costlab"]);
    let err = price_refused(&out, &[]);
    assert!(
        err.contains("no such command 'no-such-command-costlab'"),
        "{err}"
    );
    let out = common::costlab_db(&db, &["price"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("no command to price"), "{err}");
    let out = common::costlab_db(&db, &["price", "--runs", "0", "--", "true"]);
    price_refused(&out, &[]);
    let out = common::costlab_db(&db, &["price", "--runs", "-1", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("--runs -1"), "{err}");
    let out = common::costlab_db(&db, &["price", "--pid", "1", "--duration", "0s"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("--duration"), "{err}");
    let out = common::costlab_db(&db, &["price", "--terms-run", "no-such-run", "--", "true"]);
    let err = price_refused(&out, &[]);
    assert!(err.contains("no run 'no-such-run'"), "{err}");
    let out = common::costlab_db(&db, &["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("price"), "nothing stored: {text}");
    // A run that holds no unit costs (a lab that measures none): refused before the program
    // runs, which would leave its file.
    let lab = common::costlab_db(&db, &["cpu", "branch", "--quick", "--samples", "3"]);
    assert_eq!(lab.status.code(), Some(0), "{}", common::text(&lab.stderr));
    let ran = dir.path().join("ran");
    let ran_arg = ran.to_str().unwrap();
    let out = common::costlab_db(
        &db,
        &["price", "--terms-run", "last", "--", "touch", ran_arg],
    );
    let err = price_refused(&out, &[]);
    assert!(err.contains("holds no unit costs"), "{err}");
    assert!(!ran.exists(), "the program ran before the refusal: {err}");
}

/// For a test that counts in the kernel: a fresh folder with the test program built in it, or
/// None, the test skipped with the reason (no BPF or root, which CI must have; no C compiler).
pub(crate) fn events_or_skip(name: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if let Some(why) = count::unavailable() {
        skip::skipped_unless_ci(name, &why);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    match build_events(dir.path()) {
        Ok(exe) => Some((dir, exe)),
        Err(why) => {
            skip::skipped(name, &why);
            None
        }
    }
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
pub(crate) fn counted(
    db: &Path,
    exe: &Path,
    mode: &str,
    n: u64,
) -> BTreeMap<(String, String), f64> {
    let n = n.to_string();
    let doc = common::price_with(db, &["--", exe.to_str().unwrap(), mode, &n], |_| {});
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
pub(crate) const HANDFUL: f64 = 16.0;

#[test]
fn the_test_programs_events_are_counted_exactly() {
    let name = "the_test_programs_events_are_counted_exactly";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
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
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
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
