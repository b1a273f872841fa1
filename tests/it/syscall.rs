//! `costlab syscall` run as a user runs it: bad input exits 2 with one line, and a tiny run
//! writes the JSON the contract describes.

use crate::common::costlab;

#[test]
fn bad_batches_exit_2_with_one_line() {
    for bad in ["0", "1,0", "x", "5000", "1,,4", "2.5"] {
        let out = costlab(&["syscall", "--batches", bad]);
        assert_eq!(out.status.code(), Some(2), "--batches {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "--batches {bad}: {err}");
        assert!(err.contains("batch"), "--batches {bad}: {err}");
        assert!(out.stdout.is_empty(), "--batches {bad}: nothing measured");
    }
}

#[test]
fn a_tiny_run_writes_the_json_contract() {
    let out = costlab(&[
        "syscall",
        "--batches",
        "1,2",
        "--samples",
        "2",
        "--quick",
        "--json",
        "-",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
    assert_eq!(doc["schema"], "costlab/1");
    assert!(doc["run"]["command"]
        .as_str()
        .unwrap()
        .starts_with("costlab syscall"));
    let results = doc["results"].as_array().unwrap();
    let calls: Vec<(String, u64)> = results
        .iter()
        .map(|r| {
            assert_eq!(r["lab"], "syscall");
            assert_eq!(r["metric"], "latency");
            assert_eq!(r["unit"], "ns");
            let keys: Vec<&String> = r["case"].as_object().unwrap().keys().collect();
            // send and recv are also measured by message size, for the per-byte fit.
            if keys.len() == 3 {
                assert_eq!(keys, ["call", "batch", "size"]);
                assert!(["tcp-send", "tcp-recv", "tcp-recv-unaligned"]
                    .contains(&r["case"]["call"].as_str().unwrap()));
            } else {
                assert_eq!(keys, ["call", "batch"]);
            }
            assert_eq!(r["summary"]["n"], 2);
            assert_eq!(r["samples"].as_array().unwrap().len(), 2);
            (
                r["case"]["call"].as_str().unwrap().to_string(),
                r["case"]["batch"].as_u64().unwrap(),
            )
        })
        .collect();
    for call in [
        "getppid",
        "clock_gettime",
        "read-devzero",
        "write-devnull",
        "tcp-send",
        "tcp-recv",
    ] {
        assert!(calls.contains(&(call.to_string(), 1)), "{call} missing");
    }
    let model = &doc["models"][0];
    assert_eq!(model["lab"], "syscall");
    assert_eq!(model["name"], "syscall cost terms");
    let sizes: Vec<u64> = results
        .iter()
        .filter(|r| r["case"]["call"] == "tcp-recv")
        .filter_map(|r| r["case"]["size"].as_u64())
        .collect();
    assert_eq!(sizes, [16, 256, 1024, 4096, 16384, 65536]);
    // The largest size again, into a buffer off a cache line, and its note beside the aligned.
    let unaligned: Vec<u64> = results
        .iter()
        .filter(|r| r["case"]["call"] == "tcp-recv-unaligned")
        .filter_map(|r| r["case"]["size"].as_u64())
        .collect();
    assert_eq!(unaligned, [65536]);
    assert!(doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("B past a cache line took")));
    for p in [
        "s_ns",
        "w_send_ns",
        "w_recv_ns",
        "mitigations",
        "t_nop_ns",
        "send_fixed_ns",
        "send_per_byte_ns",
        "recv_per_byte_ns",
    ] {
        assert!(model["params"].get(p).is_some(), "param {p} missing");
    }
    let unsupported = model["params"].get("uring_unsupported");
    match unsupported {
        // io_uring refused here: the reason is in the params and in the notes.
        Some(why) => {
            let why = why.as_str().unwrap();
            assert!(doc["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().contains(why)));
        }
        None => {
            for call in ["uring-nop", "uring-send", "uring-recv"] {
                for b in [1, 2] {
                    assert!(calls.contains(&(call.to_string(), b)), "{call} {b} missing");
                }
            }
            assert_eq!(model["params"]["t_nop_ns"].as_object().unwrap().len(), 2);
            // Per-op fits at 2 batches for 3 calls, and per-byte fits at 6 sizes for 2.
            assert_eq!(model["points"].as_array().unwrap().len(), 6 + 12);
        }
    }
    // The tables went to stderr so stdout stays parseable.
    assert!(err.contains("syscall cost terms"));
}
