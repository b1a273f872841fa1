//! `costlab price`'s measured split, end to end on the events program (tests/fixtures/price):
//! docs/src/contract.md's rows ("price, measured"), the classes adding up to cpu.stat's usage,
//! the syscalls and faults found in their lines, the split kept through --save-counts and --from,
//! --count-only leaving it out. Needs root and BPF (skips without). None asserts a time.

use std::collections::BTreeMap;

use crate::common::{self, skip};
use crate::price::events_or_skip;
use costlab_price::count;

/// (class, event, metric) -> median.
pub(crate) type Rows = BTreeMap<(String, String, String), f64>;

/// The price rows of a JSON document.
pub(crate) fn rows(doc: &serde_json::Value) -> Rows {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["lab"] == "price" && r["case"].get("on").is_none())
        .map(|r| {
            (
                (
                    r["case"]["class"].as_str().unwrap_or("").to_string(),
                    r["case"]["event"].as_str().unwrap_or("").to_string(),
                    r["metric"].as_str().unwrap().to_string(),
                ),
                r["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

pub(crate) fn price(db: &std::path::Path, args: &[&str]) -> serde_json::Value {
    common::price_with(db, args, |_| {})
}

/// The split's events as counts: cpu_time ÷ per_event.
pub(crate) fn count_of(r: &Rows, class: &str, event: &str) -> f64 {
    let get = |m: &str| r.get(&(class.into(), event.into(), m.into())).copied();
    match (get("cpu_time"), get("per_event")) {
        (Some(c), Some(p)) if p > 0.0 => (c / p).round(),
        _ => 0.0,
    }
}

#[test]
fn a_real_program_is_split_adds_up_and_keeps_its_split_through_a_counts_file() {
    let name = "a_real_program_is_split_adds_up_and_keeps_its_split_through_a_counts_file";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let saved = dir.path().join("counts.json");
    let _one = crate::common::serial();
    let exe = exe.to_str().unwrap();
    let run = || {
        let doc = price(
            &db,
            &[
                "--save-counts",
                saved.to_str().unwrap(),
                "--",
                exe,
                "touch",
                "30000",
            ],
        );
        let r = rows(&doc);
        // Every measured class (kernel-other inside user time included, the unmeasured rest
        // not) against the cgroup's usage, %.
        let usage = r[&("program".into(), "total".into(), "cpu_usage".into())];
        let measured: f64 = r
            .iter()
            .filter(|((c, e, m), _)| m == "cpu_time" && !(c == "kernel-other" && e == "unmeasured"))
            .map(|(_, v)| v)
            .sum();
        let diff = 100.0 * (measured - usage) / usage;
        let told = format!(
            "classes {measured} ns vs usage {usage} ns: {diff:+.2}%; lines {r:?}; notes {}",
            doc["notes"]
        );
        (r, diff, told)
    };
    // The classes add up to the usage within 2% quiet (the price's check line), within 10%
    // here under the suite's load (a short program's stray transitions weigh more: so 30000
    // pages; saturated by stress-ng, one run in three missed 8.07%). 9 of 121 quiet runs once
    // lost 4-52% (in CI -76.77%): the task came back on a CPU with no traced switch (prog::join)
    // and ran untracked. It now joins at its next fault or tick, losing up to a tick each time,
    // so a run that does not add up is run once more before it fails.
    let (mut r, mut diff, told) = run();
    if diff.abs() > 10.0 {
        eprintln!("{name}: the first run did not add up, run again: {told}");
        let again;
        (r, diff, again) = run();
        assert!(diff.abs() <= 10.0, "twice: {again}");
    }
    // The program's rows: usage, and the shares named.
    let usage = r[&("program".into(), "total".into(), "cpu_usage".into())];
    assert!(usage > 0.0);
    for m in ["attributed", "kernel_attributed"] {
        let v = r[&("program".into(), "total".into(), m.into())];
        assert!((0.0..=100.0).contains(&v), "{m} {v}");
    }
    // Each line's class is one of docs/src/contract.md's.
    for (c, _, m) in r.keys() {
        if m == "cpu_time" {
            assert!(
                ["user", "syscall", "fault", "irq", "softirq", "kernel-other"]
                    .contains(&c.as_str()),
                "{c}"
            );
        }
    }
    assert!(r.contains_key(&("user".into(), "user".into(), "cpu_time".into())));
    // The 30000 fresh pages are user faults, each in the minor line (with the loader's own).
    let minor = count_of(&r, "fault", "minor");
    assert!(
        (30000.0..=30000.0 * 1.01 + 200.0).contains(&minor),
        "{minor} minor faults in the split; its fault and kernel-other lines: {:?}",
        r.iter()
            .filter(|((c, _, _), _)| c == "fault" || c == "kernel-other")
            .collect::<Vec<_>>()
    );
    assert_eq!(count_of(&r, "syscall", "execve"), 1.0);
    assert!(r.contains_key(&("syscall".into(), "munmap".into(), "wait_time".into())));
    // The counts file carries the split, and --from prices it again with the same lines.
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(text.contains("\"measured\""), "no split in the counts file");
    let again = rows(&price(&db, &["--from", saved.to_str().unwrap()]));
    assert_eq!(
        again.get(&("fault".into(), "minor".into(), "cpu_time".into())),
        r.get(&("fault".into(), "minor".into(), "cpu_time".into()))
    );
    // --count-only: counts, no split.
    let counted = rows(&price(&db, &["--count-only", "--", exe, "getppid", "100"]));
    assert!(counted.keys().all(|(_, _, m)| m != "cpu_time"));
    assert_eq!(
        counted.get(&("syscall".into(), "getppid".into(), "count".into())),
        Some(&100.0)
    );
}

/// A light call (getppid) beside a split is priced by its entry and exit, on the line inside
/// user time: its own line is never listed as a call with no term, however heavy it is.
#[test]
fn a_light_call_is_not_listed_as_a_call_with_no_term() {
    let name = "a_light_call_is_not_listed_as_a_call_with_no_term";
    let Some((dir, exe)) = events_or_skip(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = crate::common::serial();
    let doc = price(&db, &["--", exe.to_str().unwrap(), "getppid", "200000"]);
    let r = rows(&doc);
    assert_eq!(count_of(&r, "syscall", "getppid"), 200000.0);
    let verdict: Vec<String> = doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["lab"] == "price")
        .flat_map(|m| m["verdict"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    assert!(!verdict.is_empty(), "the price model has no verdict");
    for v in &verdict {
        assert!(
            !(v.starts_with("no term:") && v.contains("getppid")),
            "a light call listed as having no term: {v}"
        );
    }
}

/// tests/fixtures/price/edges.c built into a fresh folder: the folder and the program; None
/// (the test skipped, and said so) where the split cannot run or without a C compiler.
pub(crate) fn edges(name: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if let Some(why) = count::unavailable() {
        skip::skipped_unless_ci(name, &why);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("edges");
    let cc = std::process::Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/price/edges.c"
        ))
        .output();
    match cc {
        Ok(o) if o.status.success() => Some((dir, exe)),
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            skip::skipped(name, &format!("no C compiler (cc): {e}"));
            None
        }
    }
}

/// The split's edges (tests/fixtures/price/edges.c), every call timed and one in 16: signals
/// delivered during syscalls (handlers, rt_sigreturn, a restarted read), exec from a
/// multithreaded process, a task moved between CPUs mid-syscall, vfork, children exiting
/// while their parent runs. No line may hold more than the cgroup's usage (a clock difference
/// gone below zero, read unsigned, would hold 2^64 ns), the classes' sum stays near it, no
/// row says a class passed the usage, and each edge's syscalls are counted exactly or at
/// least as often as the program made them.
#[test]
fn the_splits_edges_leave_no_impossible_line() {
    let name = "the_splits_edges_leave_no_impossible_line";
    let Some((dir, exe)) = edges(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    let exe = exe.to_str().unwrap();
    for every in ["1", "16"] {
        for (mode, n) in [
            ("signals", 2000u64),
            ("execmt", 5),
            ("migrate", 2000),
            ("vfork", 200),
            ("childexit", 300),
        ] {
            let what = format!("{mode} {n}, one call in {every} timed");
            let doc = price(
                &db,
                &["--time-one-in", every, "--", exe, mode, &n.to_string()],
            );
            let r = rows(&doc);
            let usage = r[&("program".into(), "total".into(), "cpu_usage".into())];
            let mut sum = 0.0;
            for ((c, e, m), v) in &r {
                if m == "cpu_time" {
                    assert!(
                        *v <= usage,
                        "{what}: {c} {e} {v} ns above the usage {usage}"
                    );
                    if !(c == "kernel-other" && e == "unmeasured") {
                        sum += v;
                    }
                }
            }
            // Within 10% as the test above allows under the suite's load; a line gone
            // below zero would be 10^10 times that.
            assert!(
                (sum - usage).abs() <= 0.10 * usage,
                "{what}: classes {sum} vs usage {usage}"
            );
            let reasons = doc["results"].to_string();
            assert!(
                !reasons.contains("holds more CPU time than the cgroup used"),
                "{what}"
            );
            let calls = |e: &str| count_of(&r, "syscall", e);
            match mode {
                "signals" => {
                    assert!(calls("rt_sigreturn") >= n as f64, "{what}");
                    assert!(calls("tgkill") >= n as f64, "{what}");
                }
                // The first exec is the program's own, then one a round.
                "execmt" => assert_eq!(calls("execve"), n as f64 + 1.0, "{what}"),
                "migrate" => {
                    // The read family is split by fd kind from a sample (read:dev, read).
                    let reads: f64 = r
                        .keys()
                        .filter(|(c, e, m)| {
                            c == "syscall"
                                && m == "cpu_time"
                                && (e == "read" || e.starts_with("read:"))
                        })
                        .map(|(_, e, _)| calls(e))
                        .sum();
                    assert!(reads >= n as f64, "{what}: {reads} reads");
                    assert!(calls("sched_setaffinity") >= 1.0, "{what}");
                }
                "vfork" => {
                    assert_eq!(calls("vfork"), n as f64, "{what}");
                    assert_eq!(calls("execve"), n as f64 + 1.0, "{what}");
                }
                _ => assert!(calls("clone") + calls("clone3") >= n as f64, "{what}"),
            }
        }
    }
}

/// Minor faults are split by kind where the kernel has the page cache's fault tracepoints
/// (6.9 on): anonymous pages on `fault minor`, page-cache pages mapped on `minor:file`, copies
/// on write on `minor:cow`, each priced at its own term (edges.c `faults N`: N of each).
#[test]
fn minor_faults_are_told_apart_by_kind() {
    let name = "minor_faults_are_told_apart_by_kind";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let has_tracepoint = count::host::tracefs()
        .is_ok_and(|(at, _mounted)| at.join("events/filemap/mm_filemap_map_pages").exists());
    if !has_tracepoint {
        return skip::skipped(
            name,
            "this kernel has no mm_filemap_map_pages tracepoint (6.9 on)",
        );
    }
    let Some((dir, exe)) = edges(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    let n = 2000.0;
    let doc = price(&db, &["--", exe.to_str().unwrap(), "faults", "2000"]);
    let r = rows(&doc);
    let (anon, file, cow) = (
        count_of(&r, "fault", "minor"),
        count_of(&r, "fault", "minor:file"),
        count_of(&r, "fault", "minor:cow"),
    );
    // Each page written once: n zero-fills and n copies (the libc's own faults besides);
    // the file's n pages mapped 16 at a time at most.
    assert!(anon >= n, "anonymous {anon}");
    assert!(cow >= n, "copies on write {cow}");
    assert!(file >= n / 16.0 && file < n, "file {file}");
    // The pages those faults mapped: the file's n, and the libraries' besides (a few hundred
    // at most for this small program), on a line of their own at the term's per-page part.
    let pages = r
        .get(&(
            "pages".into(),
            "mapped by file faults".into(),
            "count".into(),
        ))
        .copied()
        .unwrap_or(0.0);
    assert!(
        pages >= n && pages < n + 2000.0,
        "pages mapped by file faults {pages}"
    );
    assert!(
        r.contains_key(&(
            "pages".into(),
            "mapped by file faults".into(),
            "priced".into()
        )),
        "the pages unpriced: {r:?}"
    );
    // Each kind at its own term (fault-4k, fault-file, fault-cow): three unit costs.
    let unit = |e: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| {
                x["case"]["class"] == "fault"
                    && x["case"]["event"] == e
                    && x["metric"] == "unit_cost"
            })
            .and_then(|x| x["summary"]["median"].as_f64())
            .unwrap_or_else(|| panic!("no unit cost for fault {e}"))
    };
    let (a, f, c) = (unit("minor"), unit("minor:file"), unit("minor:cow"));
    assert!(a != f && a != c && f != c, "{a} {f} {c}");
    // Its exit unmaps what it still maps: the n zero-filled pages and the n copies, anonymous
    // (the libraries' few hundred besides, and the resident counters off by 32 pages a CPU).
    let unmapped = r
        .get(&("bytes".into(), "unmapped".into(), "count".into()))
        .copied()
        .unwrap_or(0.0)
        / 4096.0;
    let cpus = costlab_core::measure::cpus::allowed_cpus().len() as f64;
    assert!(
        unmapped >= 2.0 * n - 32.0 * cpus && unmapped <= 2.0 * n + 1500.0 + 32.0 * cpus,
        "{unmapped} anonymous pages unmapped at exit"
    );
}

/// openat with O_CREAT is a line of its own, `openat:create`, counted exactly (every call
/// timed and one in 16) and priced at the create term, and openat keeps the other opens; the
/// bytes getdents64 returned are counted exactly too.
#[test]
fn creates_are_told_from_opens_and_counted_exactly() {
    let name = "creates_are_told_from_opens_and_counted_exactly";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::calibrated_db(dir.path());
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let script = format!(
        "cd {} && for i in $(seq 40); do : > f$i; done && for i in $(seq 40); do read x < f$i || true; done && ls > /dev/null",
        files.display()
    );
    let _one = common::serial();
    for every in ["1", "16"] {
        let doc = price(&db, &["--time-one-in", every, "--", "sh", "-c", &script]);
        let r = rows(&doc);
        // 40 files, and ls's `> /dev/null` (O_CREAT too: a create by its flags).
        assert_eq!(
            count_of(&r, "syscall", "openat:create"),
            41.0,
            "one in {every}: {r:?}"
        );
        assert!(
            count_of(&r, "syscall", "openat") >= 40.0,
            "one in {every}: the 40 reads' opens stay openat: {r:?}"
        );
        // ls reads the directory once through: 42 entries (f1..f40, . and ..), each a
        // 24-byte record (19 bytes of header, a name of at most 3 bytes and its NUL,
        // rounded up to 8), and a last call that returns 0.
        assert_eq!(
            r.get(&("bytes".into(), "dirents".into(), "count".into())),
            Some(&(42.0 * 24.0)),
            "one in {every}: {r:?}"
        );
    }
}

/// The page cache in and out, counted exactly in both modes: a file's pages made by writes,
/// written back by its own fdatasync, dropped, read back cold (pages read in), dropped again
/// by its unlink; each priced at its own term (page-in, page-drop, writeback's per byte).
#[test]
fn the_page_cache_is_counted_in_and_out() {
    let name = "the_page_cache_is_counted_in_and_out";
    if let Some(why) = count::unavailable() {
        return skip::skipped_unless_ci(name, &why);
    }
    let traced = count::host::tracefs().is_ok_and(|(at, _mounted)| {
        at.join("events/filemap/mm_filemap_add_to_page_cache/format")
            .exists()
            && at.join("events/block/block_bio_queue/format").exists()
    });
    if !traced {
        return skip::skipped(
            name,
            "no filemap or block tracepoints in tracefs: the page cache is not counted here",
        );
    }
    let Some((dir, exe)) = edges(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    let n = 2000.0;
    for mode in [&[][..], &["--time-one-in", "16"][..]] {
        let mut args = mode.to_vec();
        args.extend(["--", exe.to_str().unwrap(), "pages", "2000"]);
        let doc = price(&db, &args);
        let r = rows(&doc);
        let counted = |class: &str, event: &str| {
            r.get(&(class.into(), event.into(), "count".into()))
                .copied()
                .unwrap_or(0.0)
        };
        // The file's n pages, and any of the file system's own blocks read in beside them
        // (the block device's page cache holds ext4's inode tables and bitmaps: a create just
        // after many deletions reads some in, 30 pages once here).
        let (read_in, made) = (
            counted("pages", "read in"),
            counted("pages", "made by writes"),
        );
        assert!(read_in >= n && read_in <= n + 256.0, "{mode:?} {read_in}");
        assert!(made >= n && made <= n + 256.0, "{mode:?} {made}");
        // DONTNEED drops the n pages the writes made (a folio each); the unlink drops the
        // folios the cold read made.
        let dropped = counted("folios", "dropped");
        assert!(
            dropped > n && dropped <= 2.0 * n + 64.0,
            "{mode:?} {dropped}"
        );
        let back = counted("bytes", "written back");
        assert!(
            back >= n * 4096.0 && back < n * 4096.0 + 1048576.0,
            "{mode:?} {back}"
        );
    }
    let doc = price(&db, &["--", exe.to_str().unwrap(), "pages", "200"]);
    for (class, event) in [
        ("pages", "read in"),
        ("folios", "dropped"),
        ("bytes", "written back"),
    ] {
        let unit = doc["results"].as_array().unwrap().iter().find(|x| {
            x["case"]["class"] == class && x["case"]["event"] == event && x["metric"] == "unit_cost"
        });
        assert!(unit.is_some(), "no unit cost for {class} {event}");
    }
}

/// The edges fixture for a test of interrupts sent between CPUs: None (the test skipped, and
/// said why) where the split cannot run, the kernel lacks ipi_send_cpu or one CPU is allowed.
fn ipi_edges(name: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if let Some(why) = count::unavailable() {
        skip::skipped_unless_ci(name, &why);
        return None;
    }
    let traced = count::host::tracefs()
        .is_ok_and(|(at, _mounted)| at.join("events/ipi/ipi_send_cpu/format").exists());
    if !traced {
        skip::skipped(
            name,
            "no ipi_send_cpu tracepoint: interrupts sent are not counted here",
        );
        return None;
    }
    if costlab_core::measure::cpus::allowed_cpus().len() < 2 {
        skip::skipped(name, "one CPU: no interrupt crosses CPUs");
        return None;
    }
    edges(name)
}

/// Whether the price gave the line (class, event) a unit cost, or its notes say that `term`
/// could not be measured here: the IPI terms need the other CPU to themselves, and where
/// another task held it (the test suite's other tests on a 2-CPU machine) the line is counted,
/// not priced, and the price says why.
fn priced_or_refused(doc: &serde_json::Value, class: &str, event: &str, term: &str) -> bool {
    let priced = doc["results"].as_array().unwrap().iter().any(|x| {
        x["case"]["class"] == class && x["case"]["event"] == event && x["metric"] == "unit_cost"
    });
    let refused = doc["notes"].as_array().is_some_and(|n| {
        n.iter().any(|x| {
            x.as_str().is_some_and(|t| {
                t.contains("not measurable here") && t.contains(&format!("{term}: "))
            })
        })
    });
    if !priced && refused {
        eprintln!("{term} not measured here (another task held the other CPU): {class} {event} is counted, not priced");
    }
    priced || refused
}

/// A wake-up of a task asleep on another, idle CPU: the interrupt the waker sends there is
/// counted (`ipi sent`, no more than the writes that woke the reader), priced at the wake-ipi
/// term, and placed on the call that sent it, the pipe write.
#[test]
fn the_interrupts_a_waker_sends_are_counted_on_its_write() {
    let Some((dir, exe)) = ipi_edges("the_interrupts_a_waker_sends_are_counted_on_its_write")
    else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let saved = dir.path().join("counts.json");
    let _one = common::serial();
    // A few interrupts or wake-ups may fall on its other calls (0 of 1 on read, under load).
    let (n, few) = (400.0, 4.0);
    let doc = price(
        &db,
        &[
            "--save-counts",
            saved.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "wake",
            "400",
        ],
    );
    let r = rows(&doc);
    let sent = r
        .get(&("ipi".into(), "sent".into(), "count".into()))
        .copied()
        .unwrap_or(0.0);
    // Each write wakes the reader at most once; a busy machine may keep the reader's CPU
    // from idling (no interrupt needed), so only one is asked for.
    assert!(sent >= 1.0 && sent <= n + 64.0, "{sent} interrupts sent");
    assert!(
        priced_or_refused(&doc, "ipi", "sent", "wake-ipi"),
        "no term priced the interrupts sent, and no note says why"
    );
    // The counts file's split puts them on the write line, where they were sent.
    let text = std::fs::read_to_string(&saved).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let lines = v["measured"]["lines"]
        .as_array()
        .expect("the split's lines");
    let on = |event: &str| {
        lines
            .iter()
            .filter(|l| l["class"] == "syscall" && l["event"] == event)
            .map(|l| l["ipis_sent"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
    };
    let all: f64 = lines
        .iter()
        .filter(|l| l["class"] == "syscall")
        .map(|l| l["ipis_sent"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(all, sent, "the syscall lines hold every interrupt counted");
    assert!(
        on("write") + few >= sent / 2.0,
        "{} of {sent} on write",
        on("write")
    );
    // The reader's side: its reads that slept and came back on a CPU that had halted, at
    // most one a write, on the read line (a busy machine may never let that CPU halt).
    let halted = r
        .get(&("wakeup".into(), "on a halted cpu".into(), "count".into()))
        .copied()
        .unwrap_or(0.0);
    assert!(halted <= n + 64.0, "{halted} wake-ups on a halted CPU");
    let halted_on = |event: &str| {
        lines
            .iter()
            .filter(|l| event.is_empty() || (l["class"] == "syscall" && l["event"] == event))
            .map(|l| l["halted_in"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
    };
    assert_eq!(halted_on(""), halted, "the lines hold every one counted");
    assert!(
        halted_on("read") + few >= halted / 2.0,
        "{} of {halted} on read",
        halted_on("read")
    );
}

/// The TLB shootdowns a copy-on-write fault sends to another CPU running a thread of the same
/// process: counted as interrupts sent in a fault (not in a syscall), priced at the
/// fault-shootdown term, and placed on the copy-on-write fault's line.
#[test]
fn a_faults_tlb_shootdowns_are_counted_on_its_line() {
    let Some((dir, exe)) = ipi_edges("a_faults_tlb_shootdowns_are_counted_on_its_line") else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let saved = dir.path().join("counts.json");
    let _one = common::serial();
    let n = 3000.0;
    let doc = price(
        &db,
        &[
            "--save-counts",
            saved.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "shootdown",
            "3000",
        ],
    );
    let r = rows(&doc);
    let count = |e: &str| {
        r.get(&("ipi".into(), e.into(), "count".into()))
            .copied()
            .unwrap_or(0.0)
    };
    let in_faults = count("in a fault");
    // At most one a write; a busy machine may take the spinner's CPU (no flush sent there),
    // so only one is asked for.
    assert!(
        in_faults >= 1.0 && in_faults <= n + 64.0,
        "{in_faults} interrupts sent in faults ({} in syscalls)",
        count("sent")
    );
    assert!(
        priced_or_refused(&doc, "ipi", "in a fault", "fault-shootdown"),
        "no term priced the interrupts sent in faults, and no note says why"
    );
    let text = std::fs::read_to_string(&saved).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let lines = v["measured"]["lines"]
        .as_array()
        .expect("the split's lines");
    let on = |event: &str| {
        lines
            .iter()
            .filter(|l| l["class"] == "fault" && (event.is_empty() || l["event"] == event))
            .map(|l| l["ipis_sent"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
    };
    assert_eq!(on(""), in_faults, "the fault lines hold every one counted");
    assert!(
        on("minor:cow") >= in_faults / 2.0,
        "{} of {in_faults} on minor:cow",
        on("minor:cow")
    );
}

/// A fork copies the page-table entries of the pages its process has mapped: a parent with
/// 32 MiB touched copies at least those 8192 pages each time, counted as bytes copied at fork,
/// priced at the fork term's per-byte part and placed with the spawns on the clone line; its
/// mappings are counted at the fork and at each child's exit (where BTF has map_count), and
/// a forked child's exec tears its copy down on the execve line; a vfork (the parent's
/// address space shared) copies none and its child's exec tears none down; an exec that
/// fails tears none down either.
#[test]
fn a_forks_copied_pages_are_counted_and_priced_on_its_line() {
    let name = "a_forks_copied_pages_are_counted_and_priced_on_its_line";
    let Some((dir, exe)) = edges(name) else {
        return;
    };
    let db = crate::common::calibrated_db(dir.path());
    let _one = common::serial();
    let exe = exe.to_str().unwrap();
    let forks = 20.0;
    let doc = price(&db, &["--", exe, "bigfork", "20"]);
    let r = rows(&doc);
    let get = |c: &str, e: &str, m: &str| r.get(&(c.into(), e.into(), m.into())).copied();
    let copied = get("bytes", "copied at fork", "count").expect("no bytes copied at fork counted");
    // 8192 pages a fork at least (the counters' folded part: 32 pages a CPU may wait).
    let least = forks * (8192.0 - 64.0) * 4096.0;
    assert!(copied >= least, "{copied} bytes copied by {forks} forks");
    assert!(
        copied <= forks * 64.0 * 1024.0 * 1024.0,
        "{copied} bytes copied by {forks} forks of a process of about 33 MiB"
    );
    let priced = get("bytes", "copied at fork", "priced").expect("the copied bytes unpriced");
    assert!(priced > 0.0);
    // The clone line holds them: its price is at least theirs.
    let cpu = get("syscall", "clone", "cpu_time").expect("no clone line");
    let ratio = get("syscall", "clone", "priced_ratio").expect("the clone line unpriced");
    assert!(
        ratio * cpu >= priced * 0.999,
        "clone line priced {} ns, the copied bytes {priced} ns",
        ratio * cpu
    );
    // Each fork copies the process's mappings (a C program's libraries make twenty or more),
    // and each child tears them down at its exit.
    for event in ["copied at fork", "unmapped at exit"] {
        if let Some(n) = get("vmas", event, "count") {
            assert!(n >= forks * 10.0, "{n} vmas {event} for {forks} forks");
            assert!(
                get("vmas", event, "priced").is_some_and(|p| p > 0.0),
                "{event}"
            );
        }
    }
    // A forked child's exec tears its copy down, inside execve; a vfork's child borrows its
    // parent's address space, which its exec leaves be: nothing copied, nothing torn down.
    let doc = price(&db, &["--", exe, "forkexec", "20"]);
    let r = rows(&doc);
    let get = |c: &str, e: &str, m: &str| r.get(&(c.into(), e.into(), m.into())).copied();
    if let Some(n) = get("vmas", "unmapped at exec", "count") {
        assert!(n >= forks * 10.0, "{n} vmas unmapped by {forks} execs");
        let priced = get("vmas", "unmapped at exec", "priced").unwrap_or(0.0);
        let cpu = get("syscall", "execve", "cpu_time").expect("no execve line");
        let ratio = get("syscall", "execve", "priced_ratio").expect("execve unpriced");
        assert!(ratio * cpu >= priced * 0.999, "the execve line lacks them");
    }
    let doc = price(&db, &["--", exe, "vfork", "50"]);
    let r = rows(&doc);
    let get = |c: &str, e: &str| {
        r.get(&(c.into(), e.into(), "count".into()))
            .copied()
            .unwrap_or(0.0)
    };
    assert!(
        get("bytes", "copied at fork") < 50.0 * 4096.0,
        "vforks copied {} bytes",
        get("bytes", "copied at fork")
    );
    // The program's own start is an exec of a forked copy (the spawner's), counted once; the
    // 50 vfork children's execs, of the edges program's twenty-odd mappings each, are not.
    assert!(
        get("vmas", "unmapped at exec") < 50.0 * 10.0,
        "{} vmas unmapped by the execs of vfork children",
        get("vmas", "unmapped at exec")
    );
    // 20 execs that fail (ENOENT) from a process of 32 MiB tear nothing down: sys_exit takes
    // back what sys_enter counted, leaving the program's own start.
    let doc = price(&db, &["--", exe, "failexec", "20"]);
    let r = rows(&doc);
    let count = |c: &str, e: &str| {
        r.get(&(c.into(), e.into(), "count".into()))
            .copied()
            .unwrap_or(0.0)
    };
    assert_eq!(count("syscall", "execve:failed"), 20.0, "{r:?}");
    let torn = count("bytes", "unmapped at exec");
    assert!(
        torn < 5.0 * 32.0 * 1048576.0,
        "{torn} bytes unmapped by 20 failed execs of a 32 MiB process and the program's start"
    );
}
