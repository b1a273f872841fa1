//! `costlab price`'s counts checked against other tools and in harder cases: perf stat's
//! counts of the same cgroup, strace's for every syscall it lists, a running process by
//! thread, reads and writes by the kind of fd, io_uring submissions by batch; a costlab killed
//! while counting or sampling leaves nothing behind. Counting needs root: those tests say why
//! they skip without it. None asserts a time.

use crate::common::{self, skip};
use crate::price::{
    build_events, counted, events_or_skip, fixture_counts, fixture_units, unit, HANDFUL,
};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use costlab_price::count;
use costlab_price::pricing;

use crate::price_measured::{count_of, price, rows};

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
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    // The two runs are separate, and the other tasks of a busy machine preempt each at their
    // own times (the suite's emulated guests beside them): a pair may differ by that, now and
    // then. A wrong count differs on every try: a mode passes when one of three pairs agrees.
    for (mode, n) in [("touch", 2000), ("token", 1000), ("fork", 50)] {
        let mut tries = Vec::new();
        for _ in 0..3 {
            let ours = counted(&db, &exe, mode, n);
            let theirs = match perf_stat_cgroup(&perf, &exe, mode, n) {
                Ok(t) => t,
                Err(why) => return skip::skipped_unless_ci(name, &why),
            };
            match agree(&ours, &theirs, mode, n) {
                Ok(()) => break,
                Err(e) => tries.push(e),
            }
        }
        assert!(
            tries.len() < 3,
            "{mode} {n}, three pairs of runs: {tries:#?}"
        );
    }
}

/// Whether costlab's count is within 1% plus a handful of perf's: the runs are two, and perf's
/// cgroup is joined by a shell that then execs (a few faults of its own); a wrong filter or a
/// missed CPU is off by far more.
fn close(ours: f64, theirs: f64, what: &str) -> Result<(), String> {
    if (ours - theirs).abs() <= theirs * 0.01 + HANDFUL {
        Ok(())
    } else {
        Err(format!(
            "{what}: costlab counted {ours}, perf stat {theirs}"
        ))
    }
}

/// Whether costlab's counts of one run of `mode n` agree with perf stat's of another.
fn agree(
    ours: &BTreeMap<(String, String), f64>,
    theirs: &BTreeMap<String, f64>,
    mode: &str,
    n: u64,
) -> Result<(), String> {
    let o = |c: &str, e: &str| {
        ours.get(&(c.to_string(), e.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    let t = |e: &str| theirs.get(e).copied().unwrap_or(0.0);
    let what = format!("{mode} {n}");
    // A fork's parent and child share pages copied on write: which of them writes one first
    // decides how often it faults, so fork runs differ by tens of faults. The other two modes
    // fault alike from run to run.
    if mode != "fork" {
        close(
            o("fault", "minor"),
            t("minor-faults"),
            &format!("{what}: minor faults"),
        )?;
    }
    close(
        o("fault", "major"),
        t("major-faults"),
        &format!("{what}: major faults"),
    )?;
    close(
        o("switch", "voluntary") + o("switch", "involuntary"),
        t("sched:sched_switch"),
        &format!("{what}: switches"),
    )?;
    // Which side of a hand-off is preempted differs from run to run; a fork's parent sleeps in
    // wait() each time: there the voluntary side is the program's own.
    if mode != "token" {
        close(
            o("switch", "voluntary"),
            t("sched:sched_switch/filtered"),
            &format!("{what}: voluntary switches"),
        )?;
    }
    close(
        o("spawn", "process") + o("spawn", "thread"),
        t("task:task_newtask"),
        &format!("{what}: tasks started"),
    )?;
    close(
        o("spawn", "thread"),
        t("task:task_newtask/filtered"),
        &format!("{what}: threads started"),
    )
}

#[test]
fn a_running_process_has_its_switches_and_wakeups_counted_by_thread() {
    let name = "a_running_process_has_its_switches_and_wakeups_counted_by_thread";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
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
    let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
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
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let theirs = match strace_counts(&exe, &["fork", "5"], dir.path()) {
        Ok(c) => c,
        Err(why) => return skip::skipped_unless_ci(name, &why),
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
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
    let _one = crate::common::serial();
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
    let mut child = crate::common::command()
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
    let out = crate::common::command()
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
    let _tracer = crate::common::tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut child = crate::common::command()
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
    assert!(
        bytes.how.contains("by the calls' count")
            && bytes
                .how
                .contains("the 300 bytes on character devices left out"),
        "{}",
        bytes.how
    );
    assert_eq!(
        pricing::syscall_pricing("write:pipe").unwrap().unit,
        "pipe-rw"
    );
    assert_eq!(pricing::syscall_pricing("write:pipe").unwrap().factor, 0.5);
    assert_eq!(
        pricing::syscall_pricing("openat:other").unwrap().unit,
        "open"
    );
    // File-system calls at their own terms; an exec at the exec term, never at s.
    for (call, term) in [
        ("mkdirat", "mkdir"),
        ("unlinkat", "unlink"),
        ("renameat2", "rename"),
        ("fdatasync", "fdatasync"),
        ("getdents64", "getdents64"),
        ("execve", "exec"),
        ("close", "close"),
        ("mprotect", "mmap"),
    ] {
        assert_eq!(pricing::syscall_pricing(call).unwrap().unit, term, "{call}");
    }
    assert_eq!(
        pricing::event_pricing("fault", "major").unwrap().unit,
        "fault-major"
    );
    assert_eq!(
        pricing::event_pricing("irq", "local_timer").unwrap().unit,
        "tick"
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

/// An mmap of a file is a line of its own, `mmap:file`, priced at the mmap-file term; an
/// anonymous one stays mmap's, whichever calls were timed.
#[test]
fn file_mmaps_are_told_from_anonymous_ones() {
    let name = "file_mmaps_are_told_from_anonymous_ones";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = common::calibrated_db(dir.path());
    let _one = common::serial();
    let exe = exe.to_str().unwrap();
    let base = rows(&price(&db, &["--", exe, "mapfile", "0"]));
    for every in ["1", "16"] {
        let doc = price(&db, &["--time-one-in", every, "--", exe, "mapfile", "300"]);
        let r = rows(&doc);
        let more = |event: &str| count_of(&r, "syscall", event) - count_of(&base, "syscall", event);
        assert_eq!(more("mmap:file"), 300.0, "one in {every}: {r:?}");
        assert_eq!(more("mmap"), 300.0, "one in {every}: {r:?}");
        let priced = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["case"]["event"] == "mmap:file" && x["metric"] == "unit_cost")
            .unwrap_or_else(|| panic!("mmap:file not priced: {}", doc["results"]));
        assert!(
            priced["summary"]["median"].as_f64().unwrap() > 0.0,
            "{priced}"
        );
    }
}

/// An execve that fails (a PATH search) is a line of its own, `execve:failed`, with its count
/// and time, priced as the path lookup it made; execve keeps the execs that loaded a program.
#[test]
fn failed_execs_are_told_from_execs() {
    let name = "failed_execs_are_told_from_execs";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    // env's execvp tries /nonexistent-a/true and /nonexistent-b/true (ENOENT), then
    // /usr/bin/true: two failed, and the two execs that ran (env's own and true's).
    let doc = price(
        &db,
        &[
            "--",
            "env",
            "PATH=/nonexistent-a:/nonexistent-b:/usr/bin:/bin",
            "true",
        ],
    );
    let r = rows(&doc);
    assert_eq!(count_of(&r, "syscall", "execve:failed"), 2.0, "{r:?}");
    assert_eq!(count_of(&r, "syscall", "execve"), 2.0, "{r:?}");
    assert_eq!(
        r.get(&("syscall".into(), "execve:failed".into(), "count".into())),
        Some(&2.0),
        "priced apart: {r:?}"
    );
}
