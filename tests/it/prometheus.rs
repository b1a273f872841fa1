//! The Prometheus export (`costlab export --format prometheus`, `costlab run --metrics-file`)
//! against the real thing: Debian's node_exporter reads the file through its textfile
//! collector, Debian's Prometheus scrapes it, and the series it stores carry the run's figures
//! and labels. promtool checks the file and runs the alert rules' test; systemd-analyze checks
//! the units in contrib/. Each needs its Debian package (scripts/install-deps.sh installs them)
//! and skips, saying which, without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::daemon::{free_port, http_get, tool, url_encode, wait_for, Daemon};
use crate::common::skip::skipped_unless_ci;
use crate::common::{costlab_db, FIXTURE};

const CONTRIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/contrib");

/// A throwaway history holding one run, imported from the results.json `results`.
fn history_with(dir: &Path, results: &str) -> (PathBuf, Value) {
    let db = dir.join("history.db");
    let out = costlab_db(&db, &["import", results]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = crate::common::schema::doc_file(results);
    (db, doc)
}

/// A throwaway history holding the fixture run.
fn history_with_a_run(dir: &Path) -> (PathBuf, Value) {
    history_with(dir, FIXTURE)
}

/// `costlab export --format prometheus last` of `db`.
fn exported(db: &Path) -> String {
    let out = costlab_db(db, &["export", "--format", "prometheus", "last"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The machine id `costlab history` gives the run: the `machine` label's value.
fn machine_id(db: &Path) -> String {
    let out = costlab_db(db, &["history", "--json", "-"]);
    assert!(out.status.success());
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    runs[0]["machine_id"].as_str().unwrap().to_string()
}

/// The sample line of `name` whose labels include every `key="value"` of `has`.
fn sample<'a>(text: &'a str, name: &str, has: &[&str]) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && has.iter().all(|h| l.contains(h)))
}

fn value_of(line: &str) -> f64 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The getppid row of the run (the syscall lab's s), as the JSON has it.
fn getppid_row(doc: &Value) -> Option<&Value> {
    doc["results"].as_array().unwrap().iter().find(|r| {
        r["lab"] == "syscall" && r["case"]["call"] == "getppid" && r["metric"] == "latency"
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// `promtool ARGS` on `stdin` (None: no promtool, the skip said so).
fn promtool(test: &str, args: &[&str], stdin: Option<&str>) -> Option<std::process::Output> {
    let Some(bin) = tool("promtool") else {
        skipped_unless_ci(test, "no promtool (Debian's prometheus package)");
        return None;
    };
    let mut c = Command::new(bin);
    c.args(args).current_dir(CONTRIB);
    let out = match stdin {
        None => c.output().unwrap(),
        Some(text) => {
            use std::io::Write;
            let mut child = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
    };
    Some(out)
}

#[test]
fn export_writes_base_units_help_type_and_the_run_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (db, doc) = history_with_a_run(dir.path());
    let text = exported(&db);
    let machine = machine_id(&db);
    let row = getppid_row(&doc).expect("a getppid row in the run");
    let ns = row["summary"]["median"].as_f64().unwrap();

    for family in [
        "costlab_syscall_latency_seconds",
        "costlab_run_start_time_seconds",
    ] {
        assert!(text.contains(&format!("# TYPE {family} gauge\n")), "{text}");
        assert!(text.contains(&format!("# HELP {family} ")), "{text}");
    }
    let line = sample(
        &text,
        "costlab_syscall_latency_seconds",
        &[
            "call=\"getppid\"",
            "batch=\"1\"",
            &format!("machine=\"{machine}\""),
        ],
    )
    .unwrap_or_else(|| panic!("no getppid series:\n{text}"));
    assert!(
        close(value_of(line), ns / 1e9),
        "{line}: want {ns} ns in seconds"
    );
    assert!(line.contains("quality=\""), "{line}");
    let cpu = doc["machine"]["cpu_model"].as_str().unwrap();
    assert!(line.contains(&format!("cpu_model=\"{cpu}\"")), "{line}");
    // The spread beside the median, each its own series.
    for (stat, key) in [("min", "min"), ("max", "max"), ("mad", "mad")] {
        let l = sample(
            &text,
            &format!("costlab_syscall_latency_{stat}_seconds"),
            &["call=\"getppid\"", "batch=\"1\""],
        )
        .unwrap_or_else(|| panic!("no {stat} series:\n{text}"));
        let want = row["summary"][key].as_f64().unwrap() / 1e9;
        assert!(close(value_of(l), want), "{l}: want {want}");
    }
    // No sample carries a timestamp (the textfile collector refuses them): a name, labels,
    // one value.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let after = l.rsplit_once('}').map_or(l, |(_, v)| v);
        assert_eq!(after.split_whitespace().count(), 1, "{l}");
    }
    let started = sample(&text, "costlab_run_start_time_seconds", &[]).unwrap();
    assert!(value_of(started) > 1.7e9, "{started}");
}

#[test]
fn promtool_accepts_the_exported_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = history_with_a_run(dir.path());
    let text = exported(&db);
    let Some(out) = promtool(
        "promtool_accepts_the_exported_metrics",
        &["check", "metrics"],
        Some(&text),
    ) else {
        return;
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "$ costlab export --format prometheus last | promtool check metrics\n{said}(exit {})",
        out.status.code().unwrap_or(-1)
    );
    // promtool prints nothing for a file it has no lint to report on.
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn export_prometheus_of_a_run_not_in_the_history_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = history_with_a_run(dir.path());
    let out = costlab_db(&db, &["export", "--format", "prometheus", "nosuchrun"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());
}

/// The largest 4k-page chase of a run (the DRAM point): of the rows at the largest block, the
/// measured one (fewest keys), not the plateau row the lab reads off it.
fn dram_chase_row(doc: &Value) -> Option<&Value> {
    doc["results"]
        .as_array()?
        .iter()
        .filter(|r| r["lab"] == "mem" && r["case"]["op"] == "chase" && r["case"]["pages"] == "4k")
        .max_by_key(|r| {
            let keys = r["case"].as_object().map_or(0, |c| c.len());
            (
                r["case"]["block"].as_u64().unwrap_or(0),
                std::cmp::Reverse(keys),
            )
        })
}

/// Every label the series of `row` must carry in Prometheus, exactly: its case keys, its
/// quality, the machine's, and the scrape's job and instance.
fn series_labels(
    name: &str,
    row: &Value,
    doc: &Value,
    machine: &str,
    exporter_port: u16,
) -> BTreeMap<String, String> {
    let mut want: BTreeMap<String, String> = row["case"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_string)))
        .collect();
    want.insert(
        "quality".into(),
        row["quality"].as_str().unwrap_or("unjudged").into(),
    );
    want.insert("machine".into(), machine.into());
    want.insert(
        "cpu_model".into(),
        doc["machine"]["cpu_model"].as_str().unwrap().into(),
    );
    want.insert("job".into(), "costlab".into());
    want.insert("instance".into(), format!("127.0.0.1:{exporter_port}"));
    want.insert("__name__".into(), name.into());
    want
}

/// node_exporter serving the textfile collector's folder `textfiles`, and Prometheus scraping it
/// every second, both on free ports, their logs and data under `dir`: (exporter, its port,
/// Prometheus, its port).
fn scrape_with_prometheus(
    dir: &Path,
    exporter: &Path,
    prometheus: &Path,
    textfiles: &Path,
) -> (Daemon, u16, Daemon, u16) {
    let exporter_port = free_port();
    let exporter = Daemon::start(
        "prometheus-node-exporter",
        Command::new(exporter)
            .arg(format!("--web.listen-address=127.0.0.1:{exporter_port}"))
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            .arg(format!(
                "--collector.textfile.directory={}",
                textfiles.display()
            )),
        dir.join("node-exporter.log"),
    );
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: costlab\n    \
             static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n"
        ),
    )
    .unwrap();
    let prom_port = free_port();
    let server = Daemon::start(
        "prometheus",
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            )),
        dir.join("prometheus.log"),
    );
    (exporter, exporter_port, server, prom_port)
}

#[test]
fn metrics_reach_a_real_prometheus_through_node_exporters_textfile_collector() {
    let test = "metrics_reach_a_real_prometheus_through_node_exporters_textfile_collector";
    let (Some(exporter), Some(prometheus)) = (tool("prometheus-node-exporter"), tool("prometheus"))
    else {
        skipped_unless_ci(
            test,
            "no prometheus-node-exporter or prometheus (Debian's packages)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The fixture, or a real run's results.json named by COSTLAB_PROM_RESULTS (to see real
    // figures in the real Prometheus).
    let results = std::env::var("COSTLAB_PROM_RESULTS").unwrap_or_else(|_| FIXTURE.into());
    let (db, doc) = history_with(dir.path(), &results);
    let textfiles = dir.path().join("textfile");
    std::fs::create_dir(&textfiles).unwrap();
    let prom_file = textfiles.join("costlab.prom");
    let out = costlab_db(
        &db,
        &[
            "export",
            "--format",
            "prometheus",
            "last",
            "--out",
            prom_file.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (mut exporter, exporter_port, mut server, prom_port) =
        scrape_with_prometheus(dir.path(), &exporter, &prometheus, &textfiles);

    let query = |q: &str| -> Option<Value> {
        let body = http_get(prom_port, &format!("/api/v1/query?query={}", url_encode(q)))?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?;
        (!result.is_empty()).then_some(v)
    };
    // The run's start time is in every file: once Prometheus has it, it has scraped the file.
    let q = "costlab_run_start_time_seconds";
    let got = wait_for(Duration::from_secs(90), || query(q));
    exporter.assert_running();
    server.assert_running();
    let got = got.unwrap_or_else(|| {
        panic!(
            "Prometheus never had {q}:\nnode_exporter:\n{}\nprometheus:\n{}",
            exporter.log(),
            server.log()
        )
    });
    eprintln!("$ curl 'http://127.0.0.1:{prom_port}/api/v1/query?query={q}'\n{got}");
    let machine = machine_id(&db);

    // The syscall lab's s (getppid) and the largest 4k-page chase (the DRAM point), as rows:
    // each series Prometheus holds has the row's median in seconds and exactly its labels.
    let checked: Vec<(&str, &Value)> = [
        ("costlab_syscall_latency_seconds", getppid_row(&doc)),
        ("costlab_mem_latency_seconds", dram_chase_row(&doc)),
    ]
    .into_iter()
    .filter_map(|(name, row)| Some((name, row?)))
    .collect();
    assert!(
        !checked.is_empty(),
        "the run has neither a getppid row nor a mem chase"
    );
    for (name, row) in checked {
        let case = row["case"].as_object().unwrap();
        let selector: Vec<String> = case
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}=\"{}\"",
                    v.as_str().map_or(v.to_string(), str::to_string)
                )
            })
            .collect();
        let q = format!("{name}{{{}}}", selector.join(","));
        let got = wait_for(Duration::from_secs(30), || query(&q))
            .unwrap_or_else(|| panic!("Prometheus has no {q}"));
        eprintln!("$ curl 'http://127.0.0.1:{prom_port}/api/v1/query?query={q}'\n{got}");
        let want = series_labels(name, row, &doc, &machine, exporter_port);
        // The selector also matches a row with more keys (the chase's plateau row): the one
        // with exactly the row's labels is the row.
        let series = got["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                let have: BTreeMap<String, String> = s["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                have == want
            })
            .unwrap_or_else(|| panic!("no series with exactly {want:?} in {got}"));
        let value: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
        let ns = row["summary"]["median"].as_f64().unwrap();
        assert!(close(value, ns / 1e9), "{value} s, the run has {ns} ns");
    }

    // The cost sheet's syscall s and DRAM latency, which the alert rules read, where the run's
    // sheet has them (the fixture's memory plan reached no DRAM plateau; a mem-only run has no
    // s).
    let text = exported(&db);
    let queries: Vec<&str> = [
        (
            "figure=\"syscall s ",
            r#"costlab_syscall_sheet_seconds{figure=~"syscall s .*"}"#,
        ),
        (
            "figure=\"DRAM latency\"",
            r#"costlab_mem_sheet_seconds{figure="DRAM latency"}"#,
        ),
    ]
    .into_iter()
    .filter(|(line, _)| text.contains(line))
    .map(|(_, q)| q)
    .collect();
    for q in queries {
        let got = wait_for(Duration::from_secs(30), || query(q))
            .unwrap_or_else(|| panic!("Prometheus has no {q}"));
        eprintln!("$ curl 'http://127.0.0.1:{prom_port}/api/v1/query?query={q}'\n{got}");
        assert_eq!(
            got["data"]["result"][0]["metric"]["machine"],
            machine_id(&db).as_str()
        );
    }
}

#[test]
fn run_writes_the_metrics_file_whole_by_renaming() {
    let dir = tempfile::tempdir().unwrap();
    let textfiles = dir.path().join("textfile");
    std::fs::create_dir(&textfiles).unwrap();
    let file = textfiles.join("costlab.prom");
    // Yesterday's file is replaced, not appended to.
    std::fs::write(&file, "costlab_stale 1\n").unwrap();
    let ran = crate::common::ran_db(
        &dir.path().join("history.db"),
        &[
            "run",
            "--quick",
            "--labs",
            "share",
            "--out-dir",
            dir.path().join("report").to_str().unwrap(),
            "--metrics-file",
            file.to_str().unwrap(),
        ],
    );
    assert!(ran.status.success(), "{}", ran.stderr);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("costlab_stale"), "{text}");
    assert!(
        text.contains("# TYPE costlab_run_start_time_seconds gauge"),
        "{text}"
    );
    // The lab's figures, where it measured any (a lab that fails on a loaded machine leaves
    // an incomplete run, whose file still says so in costlab_run_info).
    if ran.stderr.contains("share: done") {
        assert!(text.contains("costlab_share_"), "{text}\n{}", ran.stderr);
    } else {
        assert!(
            text.contains("complete=\"false\""),
            "{text}\n{}",
            ran.stderr
        );
    }
    // Only the file: the temporary one it was written as is gone.
    let names: Vec<String> = std::fs::read_dir(&textfiles)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["costlab.prom"]);
    // The same text as `export --format prometheus last` gives for the stored run.
    assert_eq!(text, exported(&dir.path().join("history.db")));
    if let Some(out) = promtool(
        "run_writes_the_metrics_file_whole_by_renaming",
        &["check", "metrics"],
        Some(&text),
    ) {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn run_with_a_metrics_file_in_no_directory_exits_2_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let ran = crate::common::ran_db(
        &dir.path().join("history.db"),
        &[
            "run",
            "--quick",
            "--labs",
            "share",
            "--metrics-file",
            "/nonexistent/dir/costlab.prom",
        ],
    );
    assert_eq!(ran.status.code(), Some(2), "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("--metrics-file"), "{}", ran.stderr);
}

#[test]
fn the_alert_rules_check_and_pass_their_promtool_test() {
    let test = "the_alert_rules_check_and_pass_their_promtool_test";
    let Some(check) = promtool(test, &["check", "rules", "costlab-alerts.yml"], None) else {
        return;
    };
    let said = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    eprintln!("$ promtool check rules contrib/costlab-alerts.yml\n{said}");
    assert!(check.status.success(), "{said}");
    let run = promtool(test, &["test", "rules", "costlab-alerts.test.yml"], None).unwrap();
    let said =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    eprintln!("$ promtool test rules contrib/costlab-alerts.test.yml\n{said}");
    assert!(run.status.success() && said.contains("SUCCESS"), "{said}");
}

#[test]
fn the_alert_rules_read_series_costlab_writes() {
    // Every costlab_* name the rules use is one the export writes for the fixture run, and
    // the figures they pick are named so in its cost sheet: the rules cannot drift from the
    // names.
    let rules = std::fs::read_to_string(Path::new(CONTRIB).join("costlab-alerts.yml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let out = costlab_db(&db, &["import", FIXTURE]);
    assert!(out.status.success());
    let text = exported(&db);
    let mut names: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("costlab_"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        assert!(
            text.contains(&format!("# TYPE {n} gauge")),
            "the rules read {n}, the export has no such family"
        );
    }
    // (The fixture's memory plan reached no DRAM plateau: its sheet has no DRAM latency line,
    // but the family is there.)
    for figure in ["figure=\"syscall s ", "figure=\"echo io_uring/epoll "] {
        assert!(text.contains(figure), "no {figure} in the export:\n{text}");
    }
}

#[test]
fn the_systemd_units_verify() {
    let test = "the_systemd_units_verify";
    let Some(analyze) = tool("systemd-analyze") else {
        skipped_unless_ci(test, "no systemd-analyze (Debian's systemd package)");
        return;
    };
    // systemd-analyze resolves the units' dependencies (timers.target, sysinit.target ...)
    // and checks that ExecStart's program exists: in a root of its own, holding systemd's
    // own units, ours where an admin puts them, costlab where the service runs it from, and
    // costlab's man page (Documentation=man:costlab(1)).
    let system_units = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("timers.target").is_file());
    let Some(system_units) = system_units else {
        crate::common::skip::skipped(test, "no systemd unit directory with timers.target on this machine: systemd-analyze cannot resolve the units' dependencies");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let st = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(st.success());
    };
    copy(system_units, &root.join("usr/lib/systemd/system"));
    for unit in ["costlab.service", "costlab.timer"] {
        copy(
            &Path::new(CONTRIB).join(unit),
            &root.join("etc/systemd/system").join(unit),
        );
    }
    // Where the service runs costlab from: a script that runs the costlab under test.
    let installed = root.join("usr/bin/costlab");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    std::fs::write(
        &installed,
        format!("#!/bin/sh\nexec {} \"$@\"\n", crate::common::BIN),
    )
    .unwrap();
    std::fs::set_permissions(
        &installed,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let man = dir.path().join("man");
    std::fs::create_dir_all(man.join("man1")).unwrap();
    let page = crate::common::costlab(&["man"]);
    assert!(page.status.success());
    std::fs::write(man.join("man1/costlab.1"), &page.stdout).unwrap();

    let out = Command::new(analyze)
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args(["costlab.service", "costlab.timer"])
        .env("MANPATH", &man)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "$ systemd-analyze verify costlab.service costlab.timer\n{said}(exit {})",
        out.status.code().unwrap_or(-1)
    );
    // Warnings (an unknown key, a bad value) are printed but do not change the exit status.
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}
