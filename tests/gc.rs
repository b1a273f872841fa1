//! The gc lab from the outside: the missing-Go error, bad input, and (where Go is
//! installed) a tiny real sweep and tax run whose JSON is checked for shape.

use std::process::Command;

fn costlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_costlab"))
}

fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn missing_go_exits_2_with_one_line() {
    // PATH is an empty directory: no `go` anywhere on it; the cache is empty too.
    let empty = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    for args in [
        vec!["gc", "--live", "16M"],
        vec!["gc", "tax"],
        vec!["gc", "build"],
    ] {
        let out = costlab()
            .args(&args)
            .env("PATH", empty.path())
            .env_remove("COSTLAB_GCBENCH")
            .env("COSTLAB_GCBENCH_CACHE", cache.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("no Go toolchain"), "{err}");
        assert!(
            err.contains("go.dev/dl") && err.contains("golang-go"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn bad_input_exits_2() {
    for args in [
        vec!["gc", "--headroom", "0.5,x"],
        vec!["gc", "--headroom", "-1"],
        vec!["gc", "--mode", "zgc"],
        vec!["gc", "--live", "12Q"],
        vec!["gc", "--reps", "0"],
        vec!["gc", "tax", "--kind", "nil-checks"],
        vec!["gc", "--live", "100G"],
    ] {
        let out = costlab()
            .args(&args)
            .env("COSTLAB_GCBENCH", "/nonexistent/gcbench")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn a_bad_costlab_gcbench_is_named() {
    let out = costlab()
        .args(["gc", "--live", "16M", "--headroom", "1"])
        .env("COSTLAB_GCBENCH", "/nonexistent/gcbench")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("COSTLAB_GCBENCH"));
}

#[test]
fn tiny_sweep_and_taxes_write_costlab_json() {
    if !go_available() {
        eprintln!("skipped: no Go toolchain");
        return;
    }
    let out = costlab()
        .args([
            "gc",
            "--live",
            "16M",
            "--headroom",
            "1,2",
            "--reps",
            "1",
            "--json",
            "-",
        ])
        .env_remove("COSTLAB_GCBENCH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "costlab/1");
    let results = doc["results"].as_array().unwrap();
    for metric in ["gc_cpu_share", "slowdown", "max_pause", "peak_rss"] {
        assert!(
            results.iter().any(|r| r["metric"] == metric
                && r["lab"] == "gc"
                && r["case"]["mode"] == "gogc"
                && r["case"]["headroom"].as_f64() == Some(1.0)),
            "no {metric} row"
        );
    }
    let rss = results.iter().find(|r| r["metric"] == "peak_rss").unwrap();
    assert_eq!(rss["unit"], "MB");
    assert!(rss["summary"]["median"].as_f64().unwrap() > 16.0);

    let out = costlab()
        .args([
            "gc",
            "tax",
            "--kind",
            "prologue,bounds",
            "--reps",
            "2",
            "--json",
            "-",
        ])
        .env_remove("COSTLAB_GCBENCH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    for kind in ["prologue", "bounds"] {
        let r = results
            .iter()
            .find(|r| r["case"]["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} row"));
        assert_eq!(
            (r["metric"].as_str(), r["unit"].as_str()),
            (Some("overhead"), Some("%"))
        );
        assert_eq!(r["summary"]["n"], 2);
    }
}
