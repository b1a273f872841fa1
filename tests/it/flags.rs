//! One vocabulary across commands: each meaning has one visible spelling, the old spellings
//! still parse and warn once, negative counts get costlab's own line, and the manual's flag
//! table (docs/src/cli.md) is the one `scripts/flag-table.sh` prints from `--help`.

use std::path::Path;

use crate::common::{command_db, BIN};

/// Every command of the tree with its path (`echo load`), the top level included as "".
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(path: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.to_string(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            let p = if path.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{path} {}", sub.get_name())
            };
            walk(&p, sub, out);
        }
    }
    let mut cmd = costlab::cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk("", &cmd, &mut out);
    out
}

#[test]
fn each_meaning_has_one_visible_spelling() {
    // Old spellings of sizes, the case selector, output files and directories, samples.
    let old = [
        "size", "block", "engine", "methods", "op", "html", "report", "output", "reps", "cpu",
    ];
    for (path, cmd) in commands() {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long() else { continue };
            let names = format!("costlab {path} --{long}");
            assert!(!old.contains(&long), "{names}: an old spelling is visible");
            // gc tax sweeps three case dimensions (method, workload, kind): there --workload
            // is one of them, not the case selector.
            if long == "workload" {
                assert_eq!(path, "gc tax", "{names}: the case selector is --case");
            }
            let value = arg
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            match long {
                "out" => assert_eq!(value, "FILE", "{names}: --out names a file"),
                "out-dir" => assert_eq!(value, "DIR", "{names}: a directory is --out-dir"),
                "sizes" | "threads" | "case" => {
                    assert_eq!(value, "LIST", "{names}: takes a LIST")
                }
                "samples" => assert_eq!(value, "N", "{names}: --samples is a count"),
                "json" => assert_eq!(value, "FILE", "{names}"),
                _ => {}
            }
            if value == "DIR" {
                assert_ne!(long, "out", "{names}: a directory is --out-dir");
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!help.trim().is_empty(), "{names} has no description");
        }
    }
}

#[test]
fn no_help_says_its_default_twice() {
    for (path, mut cmd) in commands() {
        let help = cmd.render_help().to_string();
        for line in help.lines() {
            if line.contains("[default:") {
                let before = &line[..line.find("[default:").unwrap()];
                assert!(
                    !before.contains("(default"),
                    "costlab {path}: the default is said twice: {line}"
                );
            }
        }
    }
}

/// `costlab ARGS` (on an empty history), its status and stderr.
fn stderr_of(db: &Path, args: &[&str]) -> (i32, String) {
    let out = command_db(db)
        .env("COSTLAB_RETRY_BUDGET", "0")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_old_spelling_parses_and_warns_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    // Each old spelling with a value the command refuses before it measures: the old
    // spelling reached the command (no clap error), which warned once.
    let cases: &[(&[&str], &str, &str)] = &[
        (&["mem", "bandwidth", "--block", "0"], "--block", "--sizes"),
        (&["mem", "bandwidth", "--op", "fly"], "--op", "--case"),
        (&["mem", "loaded", "--size", "1K"], "--size", "--sizes"),
        (&["echo", "--engine", "kqueue"], "--engine", "--case"),
        (&["echo", "--size", "0"], "--size", "--sizes"),
        (&["echo", "--threads", "0"], "--threads", "--loader-threads"),
        (
            &["echo", "serve", "--engine", "select"],
            "--engine",
            "--case",
        ),
        (&["echo", "serve", "--size", "0"], "--size", "--sizes"),
        (&["echo", "serve", "--cpu", "4096"], "--cpu", "--cpus"),
        (
            &["echo", "load", "--target", "127.0.0.1:1", "--size", "0"],
            "--size",
            "--sizes",
        ),
        (
            &["echo", "load", "--target", "127.0.0.1:1", "--threads", "0"],
            "--threads",
            "--loader-threads",
        ),
        (&["numa", "--size", "0"], "--size", "--sizes"),
        (&["zerocopy", "--methods", "pigeon"], "--methods", "--case"),
        (&["pin", "--workload", "disk"], "--workload", "--case"),
        (
            &["gc", "--reps", "2", "--headroom", "-1"],
            "--reps",
            "--samples",
        ),
        (
            &["gc", "tax", "--reps", "2", "--method", "nope"],
            "--reps",
            "--samples",
        ),
        (&["run", "--out", "/proc/x"], "--out", "--out-dir"),
        (&["run", "--report", "/proc/x"], "--report", "--out-dir"),
        (
            &["report", "last", "--out", "/proc/x"],
            "--out",
            "--out-dir",
        ),
        (
            &["export", "last", "--output", "/proc/x.csv"],
            "--output",
            "--out",
        ),
        (
            &["export", "last", "--samples"],
            "--samples",
            "--raw-samples",
        ),
        (&["trend", "--html", "/proc/x.html"], "--html", "--out"),
    ];
    for (args, old, new) in cases {
        let (code, err) = stderr_of(&db, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let warning = format!("costlab: {old} is now {new}; the old spelling will go");
        let warned = err.lines().filter(|l| l.contains(" is now ")).count();
        assert_eq!(warned, 1, "{args:?}: {err}");
        assert_eq!(
            err.lines().next(),
            Some(warning.as_str()),
            "{args:?}: {err}"
        );
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        // The warning, then the command's own one line.
        assert_eq!(err.lines().count(), 2, "{args:?}: {err}");
    }
    // Several old spellings in one command: still one line, naming each.
    let (_, err) = stderr_of(&db, &["echo", "--engine", "kqueue", "--size", "16"]);
    let warn: Vec<&str> = err.lines().filter(|l| l.contains(" is now ")).collect();
    assert_eq!(
        warn,
        ["costlab: --engine is now --case, --size is now --sizes; the old spellings will go"],
        "{err}"
    );
    // The new spellings do not warn.
    let (_, err) = stderr_of(&db, &["echo", "--case", "kqueue", "--sizes", "16"]);
    assert!(!err.contains(" is now "), "{err}");
}

#[test]
fn a_list_where_a_command_takes_one_value_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    for (args, want) in [
        (&["numa", "--sizes", "64M,1G"][..], "--sizes 64M,1G: "),
        (&["numa", "--threads", "1,2"], "--threads 1,2: "),
        (&["mem", "loaded", "--sizes", "64M,1G"], "--sizes 64M,1G: "),
        (
            &["echo", "serve", "--case", "epoll,uring"],
            "--case epoll,uring: ",
        ),
        (&["echo", "serve", "--sizes", "16,64"], "--sizes 16,64: "),
        (
            &[
                "echo",
                "load",
                "--target",
                "127.0.0.1:1",
                "--sizes",
                "16,64",
            ],
            "--sizes 16,64: ",
        ),
    ] {
        let (code, err) = stderr_of(&db, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("costlab: {want}")),
            "{args:?}: {err}"
        );
        assert!(err.contains("give one value"), "{args:?}: {err}");
    }
}

#[test]
fn negative_numbers_get_costlab_s_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    for (args, want) in [
        (
            &["syscall", "--samples", "-3"][..],
            "costlab: --samples -3: use a whole number from 1 to 1000",
        ),
        (
            &["mem", "latency", "--samples=-1"],
            "costlab: --samples -1: use a whole number from 1 to 1000",
        ),
        (
            &["echo", "--depth", "-1"],
            "costlab: --depth -1: use a whole number from 0 up",
        ),
        (
            &["echo", "load", "--target", "127.0.0.1:1", "--conns", "-4"],
            "costlab: --conns -4: use a whole number from 0 up",
        ),
        (
            &["syscall", "--retry-budget", "-5"],
            "costlab: --retry-budget -5: use a whole number from 0 up",
        ),
        (
            &["gc", "tax", "--procs", "-2"],
            "costlab: --procs -2: use a whole number from 0 up",
        ),
        (
            &["gc", "tax", "--seconds", "-1"],
            "costlab: --seconds -1: use a number above zero",
        ),
        (
            &["run", "--retry-budget", "-1"],
            "costlab: --retry-budget -1: use a whole number from 0 up",
        ),
    ] {
        let (code, err) = stderr_of(&db, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end(), want, "{args:?}");
    }
}

#[test]
fn the_readme_manual_and_help_examples_parse() {
    // Every `costlab ...` line of the README's and the manual's code blocks and every help's
    // examples parse with the spellings of today (no old spelling, no unknown flag).
    let root = env!("CARGO_MANIFEST_DIR");
    let mut text = std::fs::read_to_string(Path::new(root).join("README.md")).unwrap();
    for page in crate::common::manual_pages() {
        text += &std::fs::read_to_string(page).unwrap();
    }
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("$ costlab "))
        .map(|l| format!("costlab {l}"))
        .collect();
    for (_, cmd) in commands() {
        let after = cmd
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        for l in after.lines() {
            if let Some(rest) = l.trim_start().strip_prefix("costlab ") {
                lines.push(format!("costlab {rest}"));
            }
        }
    }
    assert!(lines.len() > 40, "{}", lines.len());
    for line in lines {
        // A shell line: stop at a pipe, a redirect, `&`, `;` or a comment; the words split at
        // spaces with the quotes dropped (the examples quote only whole words).
        let cut = line
            .split(['|', '#', '>', '&', ';'])
            .next()
            .unwrap()
            .split("  ")
            .next()
            .unwrap();
        let words: Vec<String> = shell_words(cut)
            .into_iter()
            .filter(|w| w != "...")
            // A placeholder (`<run-a>`, `$BASELINE`) stands for a word the reader fills in.
            .map(|w| {
                if w.starts_with('$') || w.starts_with('<') {
                    "X".to_string()
                } else {
                    w
                }
            })
            .collect();
        let argv = words;
        if let Err(e) = costlab::cli::parse_from(&argv) {
            use clap::error::ErrorKind;
            // An example may leave out a positional the text fills in (`compare A B` with a
            // placeholder dropped): only a wrong flag is a failure here.
            assert!(
                !matches!(
                    e.kind(),
                    ErrorKind::UnknownArgument | ErrorKind::InvalidValue
                ),
                "{line}: {}",
                costlab::cli::clap_message(&e)
            );
        }
        assert_eq!(
            costlab::cli::old_spelling_warning(&argv),
            None,
            "{line}: an old spelling in an example"
        );
    }
}

/// A command line's words as a shell splits them: at spaces, quotes kept together.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

#[test]
fn the_manuals_flag_table_is_the_one_the_script_prints() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("bash")
        .arg(Path::new(root).join("scripts/flag-table.sh"))
        .arg("--check")
        .env("COSTLAB", BIN)
        .env_remove("COSTLAB_RETRY_BUDGET")
        .env_remove("COSTLAB_SSH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
