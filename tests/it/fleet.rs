//! Many machines, one history, through the binary: bad `--db` input, PostgreSQL connection
//! errors, import and push (idempotent), machines side by side, trend with change points, two
//! `costlab run` at once into one PostgreSQL. The PostgreSQL is a throwaway cluster
//! (tests/it/common/pg.rs).

use crate::common;
use crate::common::costlab_db as costlab;
use crate::common::{one_line_exit_2, text, with_id};

use std::path::{Path, PathBuf};

use costlab_history::report::{Doc, Outcome, RunInfo};
use costlab_history::store::Store;

#[test]
fn bad_db_paths_are_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, b"this is not a database, it is a shopping list\n").unwrap();
    for args in [&["history"][..], &["import", common::FIXTURE]] {
        one_line_exit_2(
            &costlab(&garbage, args),
            &["garbage.db", "not a costlab history"],
        );
    }
    assert_eq!(
        std::fs::read(&garbage).unwrap(),
        b"this is not a database, it is a shopping list\n"
    );
    one_line_exit_2(&costlab("/dev/null", &["history"]), &["/dev/null"]);
    one_line_exit_2(&costlab(dir.path(), &["history"]), &["is a directory"]);
    let missing = dir.path().join("sub/none.db");
    for args in [
        &["history"][..],
        &["machines"],
        &["trend"],
        &["export", "last"],
    ] {
        one_line_exit_2(&costlab(&missing, args), &["no history at", "none.db"]);
    }
    assert!(!dir.path().join("sub").exists());
}

#[test]
fn a_history_that_cannot_be_used_is_refused_before_measuring_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let secret = common::pg::PASSWORD;
    let run_in_cwd = |db: &str, args: &[&str]| {
        common::command_db(db)
            .current_dir(&cwd)
            .args(args)
            .output()
            .unwrap()
    };
    let unreachable = format!("postgres://u:{secret}@127.0.0.1:1/x");
    let mysql = format!("mysql://u:{secret}@h/x");
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            &unreachable,
            &["syscall", "--quick"],
            &["cannot connect", "u:***@"],
        ),
        (
            &mysql,
            &["syscall", "--quick"],
            &["no 'mysql' history", "u:***@"],
        ),
        (&mysql, &["history"], &["no 'mysql' history"]),
        (
            "/proc/costlab-none/h.db",
            &["syscall", "--quick"],
            &["/proc/costlab-none"],
        ),
    ];
    for (db, args, needles) in cases {
        let out = run_in_cwd(db, args);
        one_line_exit_2(&out, needles);
        // Nothing measured: no table, no run id.
        assert!(out.stdout.is_empty(), "{args:?}: measured first");
    }
    // push --to an unknown scheme, from a history that holds a run.
    let from = dir.path().join("from.db");
    assert_eq!(
        costlab(&from, &["import", common::FIXTURE]).status.code(),
        Some(0)
    );
    let out = crate::common::command()
        .current_dir(&cwd)
        .arg("--db")
        .arg(&from)
        .args(["push", "--to", &mysql])
        .output()
        .unwrap();
    one_line_exit_2(&out, &["no 'mysql' history"]);
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // import into one: the same check.
    one_line_exit_2(
        &run_in_cwd(&mysql, &["import", common::FIXTURE]),
        &["mysql"],
    );
    let created: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
    assert!(created.is_empty(), "created {created:?}");
}

#[test]
fn postgres_connection_errors_are_one_line_with_cause_and_fix() {
    let c = common::pg::cluster();
    // Wrong password: the cause and where to fix it; the password itself never shown.
    let url = c
        .url("postgres")
        .replace(common::pg::PASSWORD, "not-the-password");
    let err = one_line_exit_2(
        &costlab(&url, &["history"]),
        &["wrong password", "PGPASSWORD"],
    );
    assert!(!err.contains("not-the-password"), "{err}");
    // No password at all.
    one_line_exit_2(
        &costlab(c.url_without_password("postgres"), &["history"]),
        &["password", "~/.pgpass"],
    );
    // Nobody listening.
    let dead = format!(
        "postgres://costlab:{}@localhost/x?host={}&port=1",
        common::pg::PASSWORD,
        c.dir.display()
    );
    one_line_exit_2(
        &costlab(&dead, &["history"]),
        &["cannot connect", "server is up"],
    );
    // A malformed URL.
    one_line_exit_2(
        &costlab(
            format!("postgres://costlab:{}@h:port/x", common::pg::PASSWORD),
            &["history"],
        ),
        &["bad PostgreSQL URL"],
    );
    // The password from PGPASSWORD, and from a password file (mode 600), both work.
    let out = crate::common::command()
        .args([
            "--db",
            &c.url_without_password("postgres"),
            "import",
            common::FIXTURE,
        ])
        .env("PGPASSWORD", common::pg::PASSWORD)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pgpass");
    std::fs::write(&pass, format!("*:*:*:costlab:{}\n", common::pg::PASSWORD)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let out = crate::common::command()
        .args(["--db", &c.url_without_password("postgres"), "history"])
        .env_remove("PGPASSWORD")
        .env("PGPASSFILE", &pass)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("FIXTURE CPU"));
}

fn write_doc(dir: &Path, doc: &Doc) -> PathBuf {
    let p = dir.join(format!("{}.json", doc.run.id));
    std::fs::write(&p, serde_json::to_string_pretty(doc).unwrap()).unwrap();
    p
}

#[test]
fn import_and_push_are_idempotent_and_push_lands_whole_runs() {
    let c = common::pg::cluster();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    let mut a = with_id(common::fixture(), "20260101T000000Z-aaaaaa");
    a.run.started = "2026-01-01T00:00:00Z".into();
    let mut b = with_id(common::fixture(), "20260102T000000Z-bbbbbb");
    b.run.started = "2026-01-02T00:00:00Z".into();
    let (fa, fb) = (write_doc(dir.path(), &a), write_doc(dir.path(), &b));
    let (fa, fb) = (fa.to_str().unwrap(), fb.to_str().unwrap());
    let out = costlab(&local, &["import", fa, fb]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("2 imported, 0 skipped"));
    let out = costlab(&local, &["import", fa]);
    assert!(text(&out.stdout).contains("already in the history: skipped"));
    assert!(text(&out.stdout).contains("0 imported, 1 skipped"));
    // A bad file among good ones: nothing of any is imported.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": 3}").unwrap();
    let fresh = dir.path().join("fresh.db");
    one_line_exit_2(
        &costlab(&fresh, &["import", fa, bad.to_str().unwrap()]),
        &["bad.json", "not a costlab results.json"],
    );
    assert!(!fresh.exists());

    // Push into PostgreSQL: both, then again (skipped), then one named.
    let url = c.fresh();
    let out = costlab(&local, &["push", "--to", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("2 pushed, 0 skipped"), "{said}");
    assert!(!said.contains(common::pg::PASSWORD), "{said}");
    let out = costlab(&local, &["push", "--to", &url, "last"]);
    assert!(text(&out.stdout).contains("0 pushed, 1 skipped"));
    let shared = Store::open(Path::new(&url)).unwrap();
    let runs = shared.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs
        .iter()
        .all(|r| r.figures == a.results.len() && r.complete));
    assert_eq!(
        shared.load_sheet(&a.run.id).unwrap(),
        Store::open(&local).unwrap().load_sheet(&a.run.id).unwrap()
    );
    // A push refused at the door (wrong password) writes nothing anywhere.
    let wrong = url.replace(common::pg::PASSWORD, "nope");
    one_line_exit_2(
        &costlab(&local, &["push", "--to", &wrong]),
        &["wrong password"],
    );
    assert_eq!(shared.runs().unwrap().len(), 2);
}

/// A one-figure run of a made-up machine: syscall latency with five samples around `level`.
fn synthetic(i: usize, level: f64, machine: &str, noise_seed: u64) -> Doc {
    let mut s = noise_seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64;
    let mut noise = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut o = Outcome::default();
    let samples: Vec<f64> = (0..5).map(|_| level * (1.0 + 0.03 * noise())).collect();
    o.push(
        "syscall",
        costlab_core::case! {"call" => "getppid", "batch" => 1},
        "latency",
        "ns",
        samples,
    );
    let run = RunInfo {
        id: format!(
            "2026{:02}{:02}T000000Z-{machine}{i:02}",
            1 + i / 28,
            1 + i % 28
        ),
        started: format!("2026-{:02}-{:02}T00:00:00Z", 1 + i / 28, 1 + i % 28),
        costlab: "0.1.0".into(),
        command: "costlab syscall".into(),
        complete: true,
    };
    Doc::new(
        run,
        serde_json::json!({"cpu_model": format!("CPU {machine}"), "cpus_online": 2, "id": machine}),
        o,
    )
}

fn trend_json(db: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["trend"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "-"]);
    let out = costlab(db, &all);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn import_all(db: &str, docs: &[Doc], dir: &Path) {
    let files: Vec<String> = docs
        .iter()
        .map(|d| write_doc(dir, d).to_str().unwrap().to_string())
        .collect();
    let mut args = vec!["import"];
    args.extend(files.iter().map(String::as_str));
    let out = costlab(db, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn trend_finds_a_15_percent_step_at_run_20_and_nothing_in_flat_noise() {
    let c = common::pg::cluster();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("t.db");
    for db in [sqlite.to_str().unwrap().to_string(), c.fresh()] {
        let step: Vec<Doc> = (0..30)
            .map(|i| synthetic(i, if i < 20 { 200.0 } else { 230.0 }, "stepmachine", 1))
            .collect();
        let flat: Vec<Doc> = (0..30)
            .map(|i| synthetic(i, 200.0, "flatmachine", 2))
            .collect();
        import_all(&db, &step, dir.path());
        import_all(&db, &flat, dir.path());
        let j = trend_json(&db, &["getppid", "--machine", "stepmachine"]);
        let figs = j["figures"].as_array().unwrap();
        assert_eq!(figs.len(), 1);
        assert_eq!(figs[0]["runs"].as_array().unwrap().len(), 30);
        let changes = figs[0]["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{j}");
        let at = step
            .iter()
            .position(|d| d.run.id == changes[0]["run"].as_str().unwrap())
            .unwrap();
        assert!((19..=21).contains(&at), "change at {at}");
        assert!(changes[0]["p"].as_f64().unwrap() < 0.05);
        let pct = changes[0]["change_pct"].as_f64().unwrap();
        assert!((10.0..20.0).contains(&pct), "{pct}");
        let j = trend_json(&db, &["getppid", "--machine", "flatmachine"]);
        assert!(
            j["figures"][0]["changes"].as_array().unwrap().is_empty(),
            "{j}"
        );
        // With no figure named: only series with a change are shown.
        let j = trend_json(&db, &[]);
        let figs = j["figures"].as_array().unwrap();
        assert_eq!(figs.len(), 1, "{j}");
        assert_eq!(figs[0]["machine"], "stepmachine");
        // The terminal form and the chart.
        let page = dir.path().join("trend.html");
        let out = costlab(
            &db,
            &[
                "trend",
                "getppid",
                "--machine",
                "step",
                "--out",
                page.to_str().unwrap(),
            ],
        );
        let said = text(&out.stdout);
        assert!(
            said.contains("change at run") && said.contains('|'),
            "{said}"
        );
        assert!(std::fs::read_to_string(&page)
            .unwrap()
            .contains("class=\"change\""));

        // Machines side by side: both, the cheaper syscall marked best.
        let out = costlab(&db, &["machines"]);
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            said.contains("stepmachine") && said.contains("flatmachine"),
            "{said}"
        );
        assert!(said.contains(" *"), "{said}");
        // The same grid as JSON for CI: both machines, each figure with its verdict, the best
        // machine per figure.
        let out = costlab(&db, &["machines", "--json", "-"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let grid: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ids: Vec<&str> = grid["machines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert!(ids.iter().any(|i| i.contains("stepmachine")), "{ids:?}");
        assert!(ids.iter().any(|i| i.contains("flatmachine")), "{ids:?}");
        let first = &grid["figures"][0];
        assert!(first["best"].is_string(), "{first}");
        let label = first["figure"].as_str().unwrap();
        let fig = &grid["machines"][0]["figures"][label];
        // Synthetic runs carry no verdict of their own: the key is there, null.
        assert!(
            fig["median"].is_number() && fig.get("quality").is_some(),
            "{fig}"
        );
        let rep = dir.path().join("machines");
        let out = costlab(
            &db,
            &[
                "report",
                "--machines",
                "step,flat",
                "--out-dir",
                rep.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let html = std::fs::read_to_string(rep.join("index.html")).unwrap();
        assert!(html.contains("class=\"best\""), "{html}");
        assert!(!html.contains(common::pg::PASSWORD));
        one_line_exit_2(
            &costlab(&db, &["report", "--machines", "nosuch"]),
            &["no machine 'nosuch'"],
        );
    }
}

#[test]
fn two_runs_at_once_into_one_postgres_both_land_complete() {
    let url = common::pg::cluster().fresh();
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..2)
        .map(|i| {
            crate::common::command()
                .args([
                    "--db",
                    &url,
                    "run",
                    "--quick",
                    "--labs",
                    "syscall",
                    "--out-dir",
                ])
                .arg(dir.path().join(format!("rep{i}")))
                .env_remove("COSTLAB_DB")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(!text(&out.stderr).contains(common::pg::PASSWORD));
    }
    let store = Store::open(Path::new(&url)).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert!(r.complete, "{r:?}");
        assert!(r.figures > 0);
        assert!(r.command.contains("costlab:***@"), "{}", r.command);
        assert!(!r.machine_id.is_empty());
        let doc = store.load_doc(&r.id).unwrap();
        assert!(doc.machine.get("fingerprint").is_some());
    }
    // Two runs of one machine: compare says nothing of other machines.
    let out = costlab(&url, &["compare", &runs[0].id, &runs[1].id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("ran on machine"));
}
