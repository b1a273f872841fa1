//! The binary: `run`, `history`, `compare`, `export`, `report`, always on a temporary database.

use crate::common;
use crate::common::costlab_db as costlab;
use crate::common::text;

use std::process::Command;

use costlab_history::store::Store;

#[test]
fn unknown_labs_and_conflicting_plans_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = costlab(&db, &["run", "--labs", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown lab 'nope'"), "{err}");
    let out = costlab(&db, &["run", "--quick", "--full"]);
    assert_eq!(out.status.code(), Some(2));
    // Reading a history that is not there names it, and creates nothing.
    for args in [
        &["export", "nosuchrun"][..],
        &["export", "last"],
        &["history"],
    ] {
        let out = costlab(&db, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("no history at") && err.contains("h.db"),
            "{err}"
        );
        assert!(!db.exists());
    }
    let out = costlab(&db, &["import", common::FIXTURE]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = costlab(&db, &["export", "nosuchrun"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no run 'nosuchrun'"));
}

#[test]
fn run_writes_sheet_report_and_history_and_two_runs_at_once_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let spawn = |name: &str| {
        common::command_db(&db)
            .args(["run", "--retry-budget", "0", "--out-dir"])
            .arg(dir.path().join(name))
            .args(["--json"])
            .arg(dir.path().join(format!("{name}.json")))
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("a"));
        let b = s.spawn(|| spawn("b"));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    for out in [&a, &b] {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with("cost sheet"));
    }
    for name in ["a", "b"] {
        let page = std::fs::read_to_string(dir.path().join(name).join("index.html")).unwrap();
        assert!(page.contains("Cost sheet"));
        let doc = std::fs::read_to_string(dir.path().join(format!("{name}.json"))).unwrap();
        crate::common::schema::doc(&doc);
        let doc = costlab_history::report::Doc::from_json(&doc).unwrap();
        assert!(doc.run.command.starts_with("costlab --db"));
        crate::common::schema::doc_file(dir.path().join(name).join("results.json"));
    }
    let out = costlab(&db, &["history"]);
    assert_eq!(out.status.code(), Some(0));
    let listing = text(&out.stdout);
    assert_eq!(listing.matches("costlab --db").count(), 2, "{listing}");
    assert!(listing.contains("complete"));
    let store = Store::open(&db).unwrap();
    assert_eq!(store.runs().unwrap().len(), 2);
    assert_eq!(store.integrity().unwrap(), "ok");
}

#[test]
fn compare_flags_a_real_change_and_not_a_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let base = common::fixture();
    let mut before = base.clone();
    before.run.id = "20261122T100000Z-000001".into();
    let mut rerun = base.clone();
    rerun.run.id = "20261122T100100Z-000002".into();
    // the same figures, samples reshuffled and nudged: an identical rerun
    for r in &mut rerun.results {
        r.samples.reverse();
        r.samples = r.samples.iter().map(|x| x * 1.0001).collect();
    }
    let mut slower = base.clone();
    slower.run.id = "20261122T100200Z-000003".into();
    // memory bandwidth cut by a competing load: every sample 30% lower
    for r in &mut slower.results {
        if r.lab == "mem" && r.metric == "bandwidth" && r.key("op") != "loaded" {
            r.samples = r.samples.iter().map(|x| x * 0.7).collect();
            r.summary = costlab_core::measure::Summary::of(&r.samples).unwrap();
        }
    }
    let store = Store::open(&db).unwrap();
    for d in [&before, &rerun, &slower] {
        store.save_doc(d, &[]).unwrap();
    }
    drop(store);

    let out = costlab(
        &db,
        &["compare", "20261122T100000Z-000001", "20261122T100100Z"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("0 of 112 figures changed significantly"), "{t}");
    assert!(t.contains("no significant change"), "{t}");

    let out = costlab(&db, &["compare", "20261122T100000Z-000001", "last"]);
    let t = text(&out.stdout);
    let line = t
        .lines()
        .find(|l| l.contains("mem block=16384 op=read pages=4k pattern=seq threads=1 bandwidth"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains("-30.0%") && line.contains("significant (p=0.0079)"),
        "{line}"
    );
    assert!(t.contains("25 of 112 figures changed significantly"), "{t}");

    // For CI: the comparison as JSON on stdout (the table on stderr), read with jq, and
    // --fail-on regression: exit 4 on the real drop, 0 on the rerun.
    let out = costlab(
        &db,
        &[
            "compare",
            "20261122T100000Z-000001",
            "last",
            "--json",
            "-",
            "--fail-on",
            "regression",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("costlab: fail-on regression: mem block=16384"));
    let jq = |filter: &str, json: &[u8]| -> String {
        use std::io::Write;
        let mut child = Command::new("jq")
            .args(["-r", filter])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("jq installed by scripts/install-deps.sh");
        child.stdin.take().unwrap().write_all(json).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "jq {filter}");
        text(&o.stdout).trim().to_string()
    };
    assert_eq!(jq(".regressions", &out.stdout), "25");
    assert_eq!(jq(".figures | length", &out.stdout), "112");
    let row = jq(
        r#".figures[] | select(.figure == "mem block=16384 op=read pages=4k pattern=seq threads=1 bandwidth") | [.verdict, .regression, (.change_pct|round), .p, (.p_adjusted < 0.05), .quality_a // "none"] | @tsv"#,
        &out.stdout,
    );
    assert_eq!(
        row, "significant\ttrue\t-30\t0.007936507936507936\ttrue\tnone",
        "{row}"
    );
    let out = costlab(
        &db,
        &[
            "compare",
            "20261122T100000Z-000001",
            "20261122T100100Z",
            "--fail-on",
            "regression",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = costlab(
        &db,
        &[
            "compare",
            "20261122T100000Z-000001",
            "20261122T100100Z",
            "--fail-on",
            "change",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = costlab(
        &db,
        &["compare", "20261122T100100Z", "last", "--fail-on", "change"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));

    // history --json lists the three runs.
    let out = costlab(&db, &["history", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        jq("map(.id) | join(\",\")", &out.stdout),
        "20261122T100000Z-000001,20261122T100100Z-000002,20261122T100200Z-000003"
    );
    assert_eq!(jq(".[0].figures", &out.stdout), "112");

    // Two runs with nothing in common: bad input, one line.
    let mut other = base.clone();
    other.run.id = "20261122T100300Z-000004".into();
    for r in &mut other.results {
        r.lab = format!("{}-elsewhere", r.lab);
    }
    Store::open(&db).unwrap().save_doc(&other, &[]).unwrap();
    let out = costlab(&db, &["compare", "20261122T100000Z-000001", "last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("have no figure in common"), "{err}");
}

#[test]
fn export_and_report_a_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let doc = common::fixture();
    Store::open(&db)
        .unwrap()
        .save_doc(&doc, &common::fixture_sheet(&doc))
        .unwrap();
    let out = costlab(&db, &["export", "last", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    crate::common::schema::doc(&out.stdout);
    let back = costlab_history::report::Doc::from_json(&text(&out.stdout)).unwrap();
    assert_eq!(back.results.len(), doc.results.len());
    let out = costlab(&db, &["export", "20261122T", "--format", "csv"]);
    let plateaus = doc
        .results
        .iter()
        .filter(|r| r.case.contains_key("level"))
        .count();
    assert_eq!(
        text(&out.stdout).lines().count(),
        doc.results.len() - plateaus + 1
    );
    let out = costlab(&db, &["export", "last", "--format", "csv", "--raw-samples"]);
    let samples: usize = doc
        .results
        .iter()
        .filter(|r| !r.case.contains_key("level"))
        .map(|r| r.samples.len())
        .sum();
    assert_eq!(text(&out.stdout).lines().count(), samples + 1);
    let md = dir.path().join("run.md");
    let out = costlab(
        &db,
        &[
            "export",
            "last",
            "--format",
            "markdown",
            "-o",
            md.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("| syscall | syscall s (getppid) |"));

    let rep = dir.path().join("rep");
    let out = costlab(&db, &["report", "last", "--out-dir", rep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(rep.join("index.html"))
        .unwrap()
        .contains("syscall s (getppid)"));
    let rep2 = dir.path().join("rep2");
    let out = costlab(
        &db,
        &[
            "report",
            common::FIXTURE,
            "--out-dir",
            rep2.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(rep2.join("index.html").is_file());
}

#[test]
fn the_database_can_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("env.db");
    let with_env = |args: &[&str]| {
        crate::common::command()
            .args(args)
            .env("COSTLAB_DB", &db)
            .output()
            .unwrap()
    };
    let out = with_env(&["history"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(db.to_str().unwrap()));
    assert!(!db.exists());
    let out = with_env(&["import", common::FIXTURE]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(db.is_file());
    let out = with_env(&["history"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("FIXTURE CPU"));
}
