//! Bad input, refused before any work: a table of cases, each with the exit status, the lines
//! on stderr and what it must say, checked with nothing stored in a throwaway history and no
//! file written. Add a case as a row (`refused`, `clap`); a kind of case that needs a set-up of
//! its own (a damaged history, a file to import) gets its own table below, through the same
//! `check`.

use std::path::{Path, PathBuf};

use costlab_core::error::beside_program;

use crate::common;

/// How many lines stderr holds: costlab's own one line, or clap's message (its first line
/// names the cause, then the usage line).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lines {
    One,
    Usage,
}

/// One invocation and what it must do.
#[derive(Debug)]
struct Case {
    args: Vec<String>,
    status: i32,
    lines: Lines,
    /// Said on the first line of stderr.
    says: String,
}

fn case(args: &[&str], status: u8, lines: Lines, says: &str) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        status: status.into(),
        lines,
        says: says.into(),
    }
}

/// Every command that measures, with what it needs to parse (`counters` a pid, `price` a
/// program); the bad option goes before the program's `--`.
const MEASURING: &[&[&str]] = &[
    &["mem", "bandwidth"],
    &["mem", "latency"],
    &["mem", "loaded"],
    &["mem", "stride"],
    &["syscall"],
    &["cost"],
    &["echo"],
    &["mitigations"],
    &["share"],
    &["share", "c2c"],
    &["cpu", "branch"],
    &["cpu", "loop-order"],
    &["gc"],
    &["gc", "tax"],
    &["numa"],
    &["numa-knobs"],
    &["zerocopy"],
    &["pin"],
    &["counters", "--pid", "1"],
    &["price", "--", "true"],
    &["run"],
];

/// `words` with `bad` put before a program's `--`.
fn with(words: &[&str], bad: &[&str]) -> Vec<String> {
    let at = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    let mut v: Vec<String> = words[..at].iter().map(|s| s.to_string()).collect();
    v.extend(bad.iter().map(|s| s.to_string()));
    v.extend(words[at..].iter().map(|s| s.to_string()));
    v
}

/// The common options' refusals, for every measuring command.
fn common_cases(tmp: &Path) -> Vec<Case> {
    let missing = tmp.join("no-such-folder/out.json").display().to_string();
    let bad: Vec<(Vec<&str>, Lines, &str)> = vec![
        (vec!["--samples", "0"], Lines::One, "--samples 0"),
        (
            vec!["--samples", "-3"],
            Lines::One,
            "--samples -3: use a whole number",
        ),
        (vec!["--samples", "1001"], Lines::One, "--samples 1001"),
        (
            vec!["--samples", "many"],
            Lines::One,
            "--samples many: use a whole number",
        ),
        (
            vec!["--retry-budget", "-1"],
            Lines::One,
            "--retry-budget -1: use a whole number",
        ),
        (vec!["--json", &missing], Lines::One, "no folder"),
        (
            vec!["--json", "/proc/costlab.json"],
            Lines::One,
            "--json /proc/costlab.json",
        ),
        (vec!["--no-such-flag"], Lines::Usage, "--no-such-flag"),
    ];
    let mut cases = Vec::new();
    for words in MEASURING {
        let status = if words[0] == "price" {
            beside_program::COSTLAB
        } else {
            2
        };
        for (b, lines, says) in &bad {
            let args = with(words, b);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cases.push(case(&args, status, *lines, says));
        }
    }
    cases
}

/// Refusals of one command's own options and paths.
fn own_cases(tmp: &Path) -> Vec<Case> {
    use Lines::*;
    let missing = |f: &str| tmp.join("no-such-folder").join(f).display().to_string();
    let (json, csv) = (missing("h.json"), missing("run.csv"));
    let c = beside_program::COSTLAB;
    vec![
        case(&["history", "--json", &json], 2, One, "no folder"),
        case(&["machines", "--json", &json], 2, One, "no folder"),
        case(&["export", "last", "--out", &csv], 2, One, "no folder"),
        case(
            &["compare", "a", "b", "--min-effect", "abc"],
            2,
            One,
            "--min-effect abc",
        ),
        case(
            &["compare", "a", "b", "--min-effect", "-5"],
            2,
            One,
            "--min-effect -5",
        ),
        case(&["run", "--labs", "nope"], 2, One, "unknown lab 'nope'"),
        case(&["run", "--labs", ","], 2, One, "--labs is empty"),
        case(&["run", "--quick", "--full"], 2, Usage, "--full"),
        case(&["price"], c, One, "no command to price"),
        case(
            &["price", "--", "no-such-command-costlab"],
            beside_program::NOT_FOUND,
            One,
            "no such command",
        ),
        case(
            &["price", "--", "/etc/passwd"],
            beside_program::CANNOT_EXECUTE,
            One,
            "not executable",
        ),
        case(
            &["price", "--", "/etc"],
            beside_program::CANNOT_EXECUTE,
            One,
            "a directory",
        ),
        case(&["price", "--runs", "0", "--", "true"], c, One, "--runs"),
        case(
            &["price", "--runs", "-1", "--", "true"],
            c,
            One,
            "--runs -1",
        ),
        case(
            &["price", "--save-counts", &missing("c.json"), "--", "true"],
            c,
            One,
            "no folder",
        ),
        case(
            &["price", "--terms-run", "no-such-run", "--", "true"],
            c,
            One,
            "no run 'no-such-run'",
        ),
        case(
            &["price", "--pid", "1", "--duration", "0s"],
            c,
            One,
            "--duration",
        ),
        case(
            &["price", "--pid", "1", "--duration", "banana"],
            c,
            One,
            "--duration",
        ),
        case(
            &["price", "--verify", "--pid", "1"],
            c,
            One,
            "--verify with --pid",
        ),
        case(
            &["price", "--no-such-flag", "--", "true"],
            c,
            Usage,
            "--no-such-flag",
        ),
        case(&["counters", "--pid", "0"], 2, One, "--pid 0"),
        case(&["counters", "--pid", "-4"], 2, One, "--pid -4"),
        case(&["counters"], 2, Usage, "--pid"),
        case(&["echo", "load", "--duration", "1s"], 2, Usage, "--target"),
        case(&["mem", "bandwidth", "--sizes", "-1"], 2, One, "above zero"),
        case(&["mem", "bandwidth", "--sizes", "12Q"], 2, One, "12Q"),
        case(&["syscall", "--batches", "0"], 2, One, "--batches"),
    ]
}

/// Issue 44's last part: lists with an item twice (one rule, docs/src/cli.md), numa-knobs'
/// page-cache folder, price --pid of a kernel thread, count and duration messages that say
/// what parses, and a reviewer's fresh set of bad input.
fn list_and_folder_cases(tmp: &Path) -> Vec<Case> {
    use Lines::*;
    let twice = "is given twice";
    let mut cases = vec![
        case(
            &["mem", "bandwidth", "--sizes", "16K,16K"],
            2,
            One,
            "'16K' is given twice",
        ),
        case(
            &["mem", "bandwidth", "--sizes", "16K,16384"],
            2,
            One,
            "'16K' and '16384' are the same",
        ),
        case(&["mem", "bandwidth", "--threads", "1,1"], 2, One, twice),
        case(&["mem", "bandwidth", "--case", "read,read"], 2, One, twice),
        case(&["mem", "bandwidth", "--pages", "4k,4k"], 2, One, twice),
        case(&["mem", "latency", "--sizes", "4K,4K"], 2, One, twice),
        case(&["mem", "stride", "--case", "16,16"], 2, One, twice),
        case(&["syscall", "--batches", "1,1"], 2, One, twice),
        case(&["cost", "--terms", "fault-4k,fault-4k"], 2, One, twice),
        case(&["echo", "--conns", "1,1"], 2, One, twice),
        case(&["echo", "--sizes", "64,64"], 2, One, twice),
        case(&["echo", "--case", "epoll,epoll"], 2, One, twice),
        case(&["mitigations", "--conns", "1,1"], 2, One, twice),
        case(&["share", "--case", "arc-shared,arc-shared"], 2, One, twice),
        case(&["zerocopy", "--sizes", "4K,4K"], 2, One, twice),
        case(&["pin", "--case", "memory,memory"], 2, One, twice),
        case(&["pin", "--cpus", "0,0"], 2, One, "CPU 0 is given twice"),
        case(
            &["cpu", "branch", "--cpus", "0-1,1"],
            2,
            One,
            "CPU 1 is given twice",
        ),
        case(&["numa", "--nodes", "0,0"], 2, One, "node 0 is given twice"),
        case(
            &["numa-knobs", "--case", "zone-reclaim,zone-reclaim"],
            2,
            One,
            twice,
        ),
        case(&["run", "--labs", "mem,mem"], 2, One, "--labs: bad list"),
        case(&["run", "--labs", "mem,,cpu"], 2, One, "an item is empty"),
        case(
            &["mem", "bandwidth", "--sizes", "16K,,4M"],
            2,
            One,
            "an item is empty",
        ),
    ];
    cases.extend(folder_and_count_cases(tmp));
    cases
}

/// numa-knobs' folder, price --pid, and counts, durations and sizes whose messages say what
/// parses: a reviewer's fresh set.
fn folder_and_count_cases(tmp: &Path) -> Vec<Case> {
    use Lines::*;
    let c = beside_program::COSTLAB;
    let missing = tmp.join("no-such-folder").display().to_string();
    let mut cases = vec![
        case(
            &["numa-knobs", "--dir", &missing],
            2,
            One,
            "no such directory",
        ),
        case(
            &["numa-knobs", "--dir", "/etc/passwd"],
            2,
            One,
            "not a directory",
        ),
        case(
            &["numa-knobs", "--dir", "/proc"],
            2,
            One,
            "a proc file system",
        ),
        case(
            &[
                "numa-knobs",
                "--case",
                "numa-balancing",
                "--dir",
                "/var/tmp",
            ],
            2,
            One,
            "--dir serves only the zone-reclaim knob",
        ),
        case(
            &["numa-knobs", "--case", "numa-balancing", "--fill", "1G"],
            2,
            One,
            "--fill serves only the zone-reclaim knob",
        ),
        case(&["price", "--pid", "2"], c, One, "is a kernel thread"),
        case(&["price", "--pid", "4194304"], c, One, "no such process"),
        case(
            &["price", "--runs", "1001", "--", "true"],
            c,
            One,
            "from 1 to 1000 (or 0 with --once)",
        ),
        case(
            &["price", "--runs", "1.5", "--", "true"],
            c,
            One,
            "--runs 1.5",
        ),
        case(
            &["price", "--pid", "1", "--duration", "1h5m"],
            c,
            One,
            "at most 1h",
        ),
        case(
            &["price", "--time-one-in", "3", "--", "true"],
            c,
            One,
            "power of two",
        ),
        case(&["echo", "--duration", "5ms"], 2, One, "from 100ms to 1h"),
        case(
            &["counters", "--pid", "1", "--duration", "2h"],
            2,
            One,
            "from 10ms to 1h",
        ),
        case(
            &["counters", "--pid", "1", "--samples", "1,1"],
            2,
            One,
            "--samples 1,1",
        ),
    ];
    cases.extend(reviewer_cases());
    cases
}

/// Sizes, counts and lists as a reviewer mistypes them.
fn reviewer_cases() -> Vec<Case> {
    use Lines::*;
    let c = beside_program::COSTLAB;
    let mut cases = vec![
        case(
            &["mem", "bandwidth", "--sizes", "16T"],
            2,
            One,
            "unknown unit 'T'",
        ),
        case(
            &["mem", "bandwidth", "--sizes", "1e3"],
            2,
            One,
            "bad size '1e3'",
        ),
        case(
            &["mem", "bandwidth", "--sizes", "0x10"],
            2,
            One,
            "bad size '0x10'",
        ),
        case(
            &["mem", "bandwidth", "--sizes", " "],
            2,
            One,
            "an item is empty",
        ),
        case(
            &["mem", "bandwidth", "--sizes", "99999999999999999999"],
            2,
            One,
            "too large",
        ),
        case(
            &["mem", "bandwidth", "--threads", "99999999999999999999999"],
            2,
            One,
            "bad thread count",
        ),
        case(
            &["cpu", "branch", "--cpus", "5-3"],
            2,
            One,
            "bad CPU list '5-3'",
        ),
        case(
            &["compare", "a", "b", "--min-effect", "nan"],
            2,
            One,
            "--min-effect nan",
        ),
        case(
            &["mem", "loaded", "--sizes", "1G,1G"],
            2,
            One,
            "give one value",
        ),
        case(&["numa-knobs", "--fill", "0"], 2, One, "above zero"),
        case(&["numa-knobs", "--dir", ""], 2, One, "--dir is empty"),
        case(
            &["numa-knobs", "--dir", "/sys"],
            2,
            One,
            "a sysfs file system",
        ),
        case(
            &["cpu", "branch", "--cpus", "-1"],
            2,
            One,
            "bad CPU list '-1'",
        ),
        case(
            &["mem", "loaded", "--delays", "-5"],
            2,
            One,
            "bad delay '-5'",
        ),
        case(
            &["mem", "loaded", "--delays", "1,,2"],
            2,
            One,
            "an item is empty",
        ),
        case(
            &["mem", "loaded", "--traffic", "read,rw,read-write"],
            2,
            One,
            "'rw' and 'read-write' are the same",
        ),
        case(&["echo", "--conns", "0"], 2, One, "from 1 to 1048576"),
        case(
            &["syscall", "--batches", "4096,4097"],
            2,
            One,
            "bad batch '4097'",
        ),
        case(&["pin", "--threads", "300"], 2, One, "from 1 to 256"),
        case(&["numa", "--threads", "0"], 2, One, "bad --threads '0'"),
        case(
            &["mem", "bandwidth", "--sizes", "1.5"],
            2,
            One,
            "not a whole number",
        ),
        case(
            &["price", "--runs", "0x10", "--", "true"],
            c,
            One,
            "--runs 0x10",
        ),
        case(
            &["price", "--pid", "1", "--duration", "1e400"],
            c,
            One,
            "--duration",
        ),
    ];
    // /dev/shm where it is tmpfs: its pages are memory, no page cache to reclaim.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if mounts
        .lines()
        .any(|l| l.split(' ').nth(4) == Some("/dev/shm") && l.contains(" - tmpfs "))
    {
        cases.push(case(
            &["numa-knobs", "--dir", "/dev/shm"],
            2,
            One,
            "a tmpfs file system",
        ));
    }
    cases
}

/// Run `case` on the history `db` with `tmp` as the only place it could write: its status,
/// its lines, what it says, and nothing stored or written.
fn check(case: &Case, db: &Path, tmp: &Path) -> Result<(), String> {
    let before = listing(tmp);
    // A refusal comes before the program runs: a price case's `true` runs as `touch RAN`,
    // which the listing below would show.
    let ran = tmp.join("ran").display().to_string();
    let mut args: Vec<&str> = Vec::new();
    for (i, w) in case.args.iter().enumerate() {
        match w.as_str() {
            "true" if case.args[0] == "price" && i > 0 && case.args[i - 1] == "--" => {
                args.extend(["touch", ran.as_str()])
            }
            w => args.push(w),
        }
    }
    let out = common::costlab_db(db, &args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let at = format!("costlab {}", case.args.join(" "));
    if out.status.code() != Some(case.status) {
        return Err(format!(
            "{at}: exit {:?}, not {}: {err}",
            out.status.code(),
            case.status
        ));
    }
    let first = err.lines().next().unwrap_or_default();
    match case.lines {
        Lines::One if err.trim_end().lines().count() != 1 => {
            return Err(format!("{at}: not one line: {err}"))
        }
        Lines::Usage if !err.contains("Usage: costlab") => {
            return Err(format!("{at}: no usage line: {err}"))
        }
        _ => {}
    }
    if !first.starts_with("costlab: ") || !first.contains(&case.says) {
        return Err(format!(
            "{at}: the first line does not say '{}': {err}",
            case.says
        ));
    }
    if err.contains("panicked") {
        return Err(format!("{at}: a panic: {err}"));
    }
    if listing(tmp) != before {
        return Err(format!("{at}: wrote {:?}", listing(tmp)));
    }
    if db.exists() {
        let h = common::costlab_db(db, &["history", "--json", "-"]);
        let runs: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap_or_default();
        if runs.as_array().is_none_or(|r| !r.is_empty()) {
            return Err(format!("{at}: stored {runs}"));
        }
    }
    Ok(())
}

/// Every file under `dir`, the history's own files left out.
fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p.clone());
            }
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if !name.starts_with("h.db") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_refusal_comes_first_in_one_line_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut cases = common_cases(dir.path());
    cases.extend(own_cases(dir.path()));
    cases.extend(list_and_folder_cases(dir.path()));
    assert!(cases.len() >= 150, "{} cases", cases.len());
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|c| check(c, &db, dir.path()).err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} refusals broke the promise:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// `price --pid` of a zombie (a child that exited and is not reaped yet): nothing to count,
/// refused before counting as `counters --pid` refuses it, and nothing stored.
#[test]
fn price_refuses_a_zombie_before_counting() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&stat).ok().and_then(|s| {
        s.rsplit_once(')')
            .map(|(_, r)| r.trim_start().starts_with('Z'))
    }) != Some(true)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{pid} never became a zombie"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid_text = pid.to_string();
    let c = case(
        &["price", "--pid", &pid_text],
        beside_program::COSTLAB,
        Lines::One,
        "a zombie",
    );
    let r = check(&c, &db, dir.path());
    child.wait().unwrap();
    r.unwrap();
}
