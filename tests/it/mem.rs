//! The memory lab run as a user runs it: tiny sizes, JSON shape, exit codes, and hugepage
//! pools that are put back (on success, on error and on Ctrl-C).

use crate::common::{costlab, json};

use crate::common::skip;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

fn check_row_shape(row: &Value) {
    let case = row["case"].as_object().expect("case is an object");
    let keys: Vec<&str> = case.keys().map(String::as_str).collect();
    assert_eq!(
        &keys[..5],
        ["op", "pattern", "pages", "block", "threads"],
        "{row}"
    );
    assert!(case["block"].is_u64() && case["threads"].is_u64());
    for k in ["median", "min", "max", "mad", "n"] {
        assert!(row["summary"][k].is_number(), "summary.{k} in {row}");
    }
    let samples = row["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    // The summary is of the samples given beside it: n counts them, the median lies between
    // min and max, and the spread is not negative.
    let f = |k: &str| row["summary"][k].as_f64().unwrap();
    assert_eq!(
        row["summary"]["n"].as_u64(),
        Some(samples.len() as u64),
        "{row}"
    );
    assert!(f("min") <= f("median") && f("median") <= f("max"), "{row}");
    assert!(f("mad") >= 0.0, "{row}");
    assert_eq!(row["lab"], "mem");
}

/// A bandwidth a machine can give: above 10 MB/s (slower is a kernel timing a page fault, not
/// memory) and under 10 TB/s (no memory system moves more; a higher figure is a kernel whose
/// work was optimised away).
fn assert_plausible_bandwidth(row: &Value) {
    let m = row["summary"]["median"].as_f64().unwrap();
    assert!((0.01..10_000.0).contains(&m), "bandwidth {m} GB/s: {row}");
}

/// A latency a dependent load can take: above 0.1 ns (less than one cycle at 10 GHz: the chase
/// was not dependent) and under 100 us (more is a page fault or a preemption per load).
fn assert_plausible_latency(row: &Value) {
    let m = row["summary"]["median"].as_f64().unwrap();
    assert!((0.1..100_000.0).contains(&m), "latency {m} ns: {row}");
}

#[test]
fn bandwidth_json_has_every_case_with_its_units() {
    let out = costlab(&[
        "mem",
        "bandwidth",
        "--case",
        "read,write,write-nt,copy",
        "--pattern",
        "seq,rand",
        "--sizes",
        "16K",
        "--threads",
        "1",
        "--pages",
        "4k,thp",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    assert_eq!(doc["schema"], "costlab/1");
    assert!(doc["run"]["command"]
        .as_str()
        .unwrap()
        .starts_with("costlab mem bandwidth"));
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4 * 2 * 2);
    for r in rows {
        check_row_shape(r);
        assert_eq!(r["metric"], "bandwidth");
        assert_eq!(r["unit"], "GB/s");
        assert_eq!(r["case"]["block"], 16384);
        assert_plausible_bandwidth(r);
    }
    let ops: Vec<&str> = rows
        .iter()
        .map(|r| r["case"]["op"].as_str().unwrap())
        .collect();
    for op in ["read", "write", "write-nt", "copy"] {
        assert!(ops.contains(&op));
    }
    // The tables went to stderr so stdout stays parseable.
    assert!(String::from_utf8_lossy(&out.stderr).contains("GB/s"));
}

#[test]
fn reference_cases_run_beside_the_kernels_and_name_their_kernel() {
    let out = costlab(&[
        "mem",
        "bandwidth",
        "--case",
        "copy,copy-nt,memcpy,memset,write",
        "--pattern",
        "seq,rand",
        "--sizes",
        "64K",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    let rows = doc["results"].as_array().unwrap();
    // memcpy and memset are sequential only: 3 kernels x 2 patterns + 2 references.
    assert_eq!(rows.len(), 3 * 2 + 2);
    for r in rows {
        check_row_shape(r);
        let (op, isa, store) = (
            r["case"]["op"].as_str().unwrap(),
            r["case"]["isa"].as_str().unwrap(),
            r["case"]["store"].as_str().unwrap(),
        );
        match op {
            "memcpy" | "memset" => assert_eq!((isa, store), ("libc", "libc")),
            "copy-nt" => assert!(store == "streaming" || isa == "scalar", "{r}"),
            _ => assert_eq!(store, "regular", "{r}"),
        }
        assert!(r["conditions"].is_object(), "{r}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("x memcpy") && err.contains("x memset"),
        "{err}"
    );
}

#[test]
fn two_threads_and_a_shared_region() {
    let out = costlab(&[
        "mem",
        "bandwidth",
        "--case",
        "read,write",
        "--sizes",
        "8K",
        "--threads",
        "2",
        "--shared",
        "--oversubscribe",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    for r in doc["results"].as_array().unwrap() {
        check_row_shape(r);
        assert_eq!(r["case"]["threads"], 2);
        assert_eq!(r["case"]["shared"], true);
        assert_eq!(r["unit"], "GB/s");
        assert_plausible_bandwidth(r);
    }
}

#[test]
fn latency_json_has_the_curve_and_tables_print() {
    let out = costlab(&[
        "mem",
        "latency",
        "--sizes",
        "4K,64K,1M",
        "--pages",
        "4k,thp",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    let rows = doc["results"].as_array().unwrap();
    let curve: Vec<&Value> = rows
        .iter()
        .filter(|r| r["metric"] == "latency" && r["case"].get("level").is_none())
        .collect();
    assert_eq!(curve.len(), 6);
    for r in &curve {
        check_row_shape(r);
        assert_eq!(r["case"]["op"], "chase");
        assert_eq!(r["case"]["pattern"], "rand");
        assert_eq!(r["unit"], "ns");
        assert_plausible_latency(r);
    }
    // The TLB cost at the largest size, 4k minus thp.
    let tlb = rows
        .iter()
        .find(|r| r["metric"] == "tlb_cost")
        .expect("tlb_cost row");
    assert_eq!(tlb["case"]["versus"], "thp");
    assert_eq!(tlb["case"]["block"], 1 << 20);
    // The note explains the difference (page walks) or says there is none to explain.
    assert!(doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().starts_with("TLB: at 1 MiB")));
    let text = costlab(&[
        "mem",
        "latency",
        "--sizes",
        "4K,8K",
        "--pages",
        "4k",
        "--samples",
        "2",
        "--quick",
    ]);
    assert!(text.status.success());
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("4k ns") && stdout.contains("8K"),
        "{stdout}"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["mem", "bandwidth", "--case", "fly"],
        &["mem", "bandwidth", "--pattern", "zigzag"],
        &["mem", "bandwidth", "--pages", "3m"],
        &["mem", "bandwidth", "--sizes", "0"],
        &["mem", "bandwidth", "--sizes", "12Q"],
        &["mem", "bandwidth", "--sizes", "1K"],
        &["mem", "bandwidth", "--sizes", "6K", "--pages", "2m"],
        &[
            "mem",
            "bandwidth",
            "--sizes",
            "1G",
            "--pages",
            "1g,4k",
            "--case",
            "read",
            "--threads",
            "999",
        ],
        &["mem", "bandwidth", "--threads", "0"],
        &["mem", "latency", "--sizes", "1K"],
        &["mem", "latency", "--pages", "huge"],
        &["mem", "--pages", "x"],
        &["mem", "bandwidth", "--sizes", "4096G"],
        &["mem", "latency", "--sizes", "4096G"],
    ];
    for args in cases {
        let out = costlab(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("costlab: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = costlab(&["mem", "bandwidth", "--threads", "999"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--oversubscribe"));
}

fn pool_file(kb: u64, name: &str) -> String {
    format!("/sys/kernel/mm/hugepages/hugepages-{kb}kB/{name}")
}

fn read_num(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn a_short_pool_names_the_command_and_reserving_puts_it_back() {
    let _one = crate::common::serial();
    let nr = pool_file(2048, "nr_hugepages");
    let (Some(before), Some(free)) = (read_num(&nr), read_num(&pool_file(2048, "free_hugepages")))
    else {
        skip::skipped(
            "a_short_pool_names_the_command_and_reserving_puts_it_back",
            "no 2 MiB hugepage pool",
        );
        return;
    };
    // Ask for more than is free: without the flag it is refused with the command to run.
    let want = (free + 2) * 2;
    let block = format!("{want}M");
    let out = costlab(&[
        "mem",
        "bandwidth",
        "--case",
        "read",
        "--sizes",
        &block,
        "--pages",
        "2m",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("> {nr}")) && err.contains("--reserve-hugepages"),
        "{err}"
    );
    assert_eq!(read_num(&nr), Some(before));
    if !crate::common::is_root() {
        skip::skipped(
            "a_short_pool_names_the_command_and_reserving_puts_it_back",
            "the reservation half of this test needs root",
        );
        return;
    }
    let out = costlab(&[
        "mem",
        "latency",
        "--sizes",
        "4M",
        "--pages",
        "2m",
        "--reserve-hugepages",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    if out.status.code() == Some(2) {
        // Not enough memory for even a few pages: it must say so and leave the pool as it was.
        assert!(String::from_utf8_lossy(&out.stderr).contains("fragmented"));
    } else {
        let doc = json(&out);
        let notes: Vec<&str> = doc["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            notes.iter().any(|n| n.starts_with("2m pages: pool had")
                && n.contains(&format!("restored to {before}"))),
            "{notes:?}"
        );
    }
    assert_eq!(read_num(&nr), Some(before), "the 2M pool was not put back");

    // 1 GiB pages: one page, reserved or refused as fragmented; either way the pool comes back.
    let nr1 = pool_file(1_048_576, "nr_hugepages");
    if let Some(before1) = read_num(&nr1) {
        let out = costlab(&[
            "mem",
            "bandwidth",
            "--case",
            "read",
            "--sizes",
            "1G",
            "--pages",
            "1g",
            "--reserve-hugepages",
            "--samples",
            "1",
            "--quick",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => assert!(String::from_utf8_lossy(&out.stdout).contains("1g pages: pool had")),
            Some(2) => assert!(err.contains("fragmented") || err.contains("free"), "{err}"),
            other => panic!("1g reservation exited {other:?}: {err}"),
        }
        assert_eq!(
            read_num(&nr1),
            Some(before1),
            "the 1G pool was not put back"
        );
    }
}

#[test]
fn ctrl_c_puts_the_pool_back() {
    let _one = crate::common::serial();
    let nr = pool_file(2048, "nr_hugepages");
    let Some(before) = read_num(&nr) else {
        skip::skipped("ctrl_c_puts_the_pool_back", "no 2 MiB hugepage pool");
        return;
    };
    if !crate::common::is_root() || !Path::new(&nr).exists() {
        skip::skipped("ctrl_c_puts_the_pool_back", "not root");
        return;
    }
    // The most samples allowed (1000): the run would take 10 s or more; it is interrupted
    // once the pool is raised.
    let mut child = crate::common::command()
        .args([
            "mem",
            "latency",
            "--sizes",
            "8M",
            "--pages",
            "2m",
            "--reserve-hugepages",
            "--samples",
            "1000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning costlab");
    let t0 = Instant::now();
    let mut raised = false;
    while t0.elapsed() < Duration::from_secs(20) {
        if read_num(&nr).is_some_and(|n| n > before) {
            raised = true;
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !raised {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert_eq!(read_num(&nr), Some(before));
        skip::skipped(
            "ctrl_c_puts_the_pool_back",
            &format!(
                "the pool could not be raised: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return;
    }
    // Let it reach the sampling loop, then Ctrl-C.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill with a pid we spawned and still own.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t1 = Instant::now();
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if t1.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("costlab did not stop within 20 s of SIGINT");
    };
    assert_eq!(status.code(), Some(130), "exit after Ctrl-C");
    assert_eq!(
        read_num(&nr),
        Some(before),
        "the 2M pool was not put back after Ctrl-C"
    );
}

/// `costlab mem stride`: a time and a per_line row per block and stride, with the keys
/// the contract (docs/src/contract.md) names, and the model over a block beyond L2 where the machine's L2 is smaller.
#[test]
fn stride_rows_have_time_and_per_line_by_stride_and_block() {
    let out = costlab(&[
        "mem",
        "stride",
        "--case",
        "1,16,64",
        "--sizes",
        "16K,64M",
        "--samples",
        "2",
        "--quick",
        "--retry-budget",
        "0",
        "--json",
        "-",
    ]);
    let doc = json(&out);
    let rows: Vec<&Value> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["case"]["op"] == "stride")
        .collect();
    assert_eq!(rows.len(), 2 * 3 * 2, "{rows:?}");
    for r in &rows {
        assert_eq!(r["unit"], "ns");
        assert!(r["metric"] == "time" || r["metric"] == "per_line", "{r}");
        assert!([1, 16, 64].contains(&r["case"]["stride"].as_u64().unwrap()));
        assert!([16384, 64 << 20].contains(&r["case"]["block"].as_u64().unwrap()));
        assert_eq!(r["summary"]["n"], 2);
        assert!(r["quality"].is_string(), "{r}");
    }
    // Up to a line (16 ints) per_line = time x 16 / stride; beyond it each touch is a line.
    for r in rows.iter().filter(|r| r["metric"] == "time") {
        let s = r["case"]["stride"].as_u64().unwrap() as f64;
        let line = rows
            .iter()
            .find(|x| x["metric"] == "per_line" && x["case"] == r["case"])
            .unwrap();
        let (t, l) = (
            r["summary"]["median"].as_f64().unwrap(),
            line["summary"]["median"].as_f64().unwrap(),
        );
        assert!(
            (l - t * (16.0 / s).max(1.0)).abs() <= 1e-9 * l.max(1.0),
            "{t} {l}"
        );
    }
    for m in doc["models"].as_array().unwrap() {
        assert_eq!(m["params"]["ints_per_line"], 16);
        let verdict = m["verdict"].to_string();
        assert!(verdict.contains("lines predict 1.00x"), "{verdict}");
    }
    let bad = costlab(&["mem", "stride", "--case", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1);
}
