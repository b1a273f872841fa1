//! `costlab zerocopy` from the command line: bad input exits 2 with one line, and a tiny run's
//! JSON rows carry the documented case keys (method, size, link).

use crate::common::ran_db as costlab;

#[test]
fn bad_methods_sizes_and_links_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    for (args, want) in [
        (
            &["zerocopy", "--case", "carrier-pigeon"][..],
            "unknown method 'carrier-pigeon' in --case",
        ),
        (&["zerocopy", "--sizes", "128M"], "out of range"),
        (&["zerocopy", "--link", "wifi"], "unknown link 'wifi'"),
        (&["zerocopy", "--samples", "1001"], "at most 1000"),
    ] {
        let ran = costlab(&db, args);
        let err = ran.stderr.trim_end();
        assert_eq!(ran.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want}: {err}");
    }
}

#[test]
fn a_tiny_run_writes_rows_by_method_size_and_link() {
    let dir = tempfile::tempdir().unwrap();
    let ran = costlab(
        &dir.path().join("h.db"),
        &[
            "zerocopy",
            "--case",
            "read-write,send",
            "--sizes",
            "64K",
            "--link",
            "loopback",
            "--samples",
            "2",
            "--quick",
            "--json",
            "-",
        ],
    );
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr);
    let doc: serde_json::Value = crate::common::schema::doc(&ran.stdout);
    let rows = doc["results"].as_array().unwrap();
    assert!(!rows.is_empty());
    for method in ["read-write", "send"] {
        assert!(
            rows.iter()
                .any(|r| r["metric"] == "throughput" && r["case"]["method"] == method),
            "no throughput of {method}: {rows:?}"
        );
    }
    for r in rows {
        assert_eq!(r["lab"], "zerocopy");
        let case = r["case"].as_object().unwrap();
        for key in ["method", "size", "link"] {
            assert!(case.contains_key(key), "{key} missing: {r}");
        }
        assert_eq!(case["size"], 65536, "{r}");
        assert_eq!(case["link"], "loopback", "{r}");
    }
}
