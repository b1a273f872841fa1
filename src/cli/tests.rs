use super::*;

fn err(args: &[&str]) -> String {
    let mut argv = vec!["costlab"];
    argv.extend_from_slice(args);
    let Err(e) = parse_from(argv) else {
        panic!("should not parse: {args:?}")
    };
    clap_message(&e)
}

#[test]
fn a_missing_argument_is_named_with_the_usage_line() {
    let m = err(&["echo", "load", "--duration", "1s"]);
    assert!(m.contains("--target <HOST:PORT>"), "{m}");
    assert!(m.contains("Usage: costlab echo load"), "{m}");
    assert!(m.starts_with("costlab: "), "{m}");
}

#[test]
fn a_misspelling_gets_the_right_spelling() {
    let m = err(&["mem", "latency", "--size", "4K"]);
    assert!(m.contains("--sizes"), "{m}");
    assert!(m.contains("Usage: costlab mem latency"), "{m}");
}

#[test]
fn a_bad_choice_lists_the_possible_values() {
    let m = err(&["export", "last", "--format", "xml"]);
    assert!(
        m.contains("[possible values: json, csv, markdown, prometheus]"),
        "{m}"
    );
}

#[test]
fn a_negative_size_reaches_the_size_parser() {
    // '-1' is a value of --sizes (was --block), not an unknown flag: the lab's size
    // parser then says what is wrong with it.
    // Read from the matches by the argument's id, so that the binary names no lab crate.
    let Ok(Parsed::Lab { matches, .. }) =
        parse_from(["costlab", "mem", "bandwidth", "--block", "-1"])
    else {
        panic!()
    };
    let Some(("bandwidth", b)) = matches.subcommand() else {
        panic!()
    };
    let block = b.get_one::<String>("block").unwrap();
    assert_eq!(block, "-1");
    let e = costlab_core::measure::sizes::parse_size_list(block).unwrap_err();
    assert!(e.to_string().contains("above zero"), "{e}");
}

#[test]
fn old_spellings_still_parse_and_stay_out_of_help() {
    for argv in [
        &["costlab", "mem", "bandwidth", "--block", "4M"][..],
        &["costlab", "echo", "--threads", "2"],
        &[
            "costlab",
            "echo",
            "load",
            "--target",
            "x:1",
            "--threads",
            "2",
        ],
        &["costlab", "echo", "serve", "--cpu", "0"],
        &["costlab", "gc", "--reps", "2"],
        &["costlab", "gc", "tax", "--reps", "2"],
        &["costlab", "run", "--report", "d"],
        &["costlab", "export", "last", "--output", "f"],
        &["costlab", "export", "last", "-o", "f"],
        &["costlab", "export", "last", "--samples"],
        &["costlab", "mem", "bandwidth", "--op", "read"],
        &["costlab", "mem", "loaded", "--size", "64M"],
        &["costlab", "echo", "--engine", "epoll", "--size", "16"],
        &[
            "costlab", "echo", "serve", "--engine", "epoll", "--size", "16",
        ],
        &["costlab", "echo", "load", "--target", "x:1", "--size", "16"],
        &["costlab", "numa", "--size", "64M"],
        &["costlab", "zerocopy", "--methods", "send"],
        &["costlab", "pin", "--workload", "memory"],
        &["costlab", "run", "--out", "d"],
        &["costlab", "report", "last", "--out", "d"],
        &["costlab", "trend", "--html", "t.html"],
    ] {
        if let Err(e) = parse_from(argv) {
            panic!("{argv:?}: {e}");
        }
    }
    let mut cmd = command();
    let help = cmd
        .find_subcommand_mut("mem")
        .unwrap()
        .find_subcommand_mut("bandwidth")
        .unwrap()
        .render_help()
        .to_string();
    assert!(
        help.contains("--sizes") && !help.contains("--block "),
        "{help}"
    );
}

#[test]
fn an_old_spelling_warns_once_naming_the_new_one() {
    let w = |args: &[&str]| {
        let mut argv = vec!["costlab"];
        argv.extend_from_slice(args);
        old_spelling_warning(argv)
    };
    assert_eq!(
        w(&["echo", "--engine", "epoll"]).as_deref(),
        Some("costlab: --engine is now --case; the old spelling will go")
    );
    let two = w(&["echo", "--engine=epoll", "--size", "16"]).unwrap();
    assert_eq!(two.lines().count(), 1, "{two}");
    assert!(
        two.contains("--engine is now --case") && two.contains("--size is now --sizes"),
        "{two}"
    );
    assert_eq!(w(&["echo", "--case", "epoll"]), None);
    assert_eq!(w(&["export", "last", "--raw-samples"]), None);
    assert!(w(&["export", "last", "--samples"])
        .unwrap()
        .contains("--samples is now --raw-samples"));
    // After `--` the words are a program's, not costlab's.
    assert_eq!(w(&["check", "--", "prog", "--engine"]), None);
}

#[test]
fn every_old_spelling_names_an_argument_of_its_command() {
    // mut_arg panics on an unknown id: building the tree checks the table.
    let mut cmd = command();
    cmd.build();
    for o in OLD_SPELLINGS {
        let mut at = &cmd;
        for word in o.path.split(' ') {
            at = at
                .find_subcommand(word)
                .unwrap_or_else(|| panic!("{}", o.path));
        }
        let arg = at.get_arguments().find(|a| a.get_id() == o.id).unwrap();
        if o.own.is_some() {
            assert!(
                arg.is_hide_set() && arg.get_long() == Some(o.old),
                "{}",
                o.old
            );
            continue;
        }
        assert!(
            arg.get_all_aliases().unwrap_or_default().contains(&o.old),
            "{} --{}",
            o.path,
            o.old
        );
        assert!(
            arg.get_visible_aliases().unwrap_or_default().is_empty(),
            "{} --{}",
            o.path,
            o.old
        );
    }
}

#[test]
fn a_negative_count_gets_costlab_s_own_line() {
    assert_eq!(
        err(&["syscall", "--samples", "-3"]),
        "costlab: --samples -3: use a whole number from 1 to 1000\n"
    );
    let m = err(&["echo", "load", "--target", "x:1", "--conns", "-2"]);
    assert_eq!(m, "costlab: --conns -2: use a whole number from 0 up\n");
    assert!(err(&["gc", "tax", "--seconds", "-1"]).starts_with("costlab: --seconds -1: "));
}

#[test]
fn every_command_has_examples_and_run_takes_counters() {
    let cmd = command();
    let nested = cmd.get_subcommands().flat_map(|c| c.get_subcommands());
    for sub in cmd.get_subcommands().chain(nested) {
        let after = sub
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(
            after.starts_with("Examples:") && after.lines().count() >= 3,
            "{}: {after}",
            sub.get_name()
        );
    }
    assert!(parse_from(["costlab", "run", "--counters"]).is_ok());
}

#[test]
fn the_labs_are_listed_after_run_in_the_registry_s_order() {
    let mut cmd = command();
    cmd.build();
    let mut subs: Vec<_> = cmd
        .get_subcommands()
        .filter(|c| c.get_name() != "help")
        .map(|c| (c.get_display_order(), c.get_name().to_string()))
        .collect();
    subs.sort();
    let names: Vec<String> = subs.into_iter().map(|(_, n)| n).collect();
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert_eq!(at("machine"), 0);
    assert_eq!(at("run"), 1);
    assert_eq!(at("mem"), 2);
    assert!(at("pin") < at("history"), "{names:?}");
    // A lab's commands are listed together: the numa lab's three, one after another.
    let mut numa = [at("numa"), at("numa-knobs"), at("numa-maps")];
    numa.sort();
    assert!(numa[2] - numa[0] == 2, "{names:?}");
}

#[test]
fn numa_maps_refuses_what_it_would_ignore() {
    for flag in ["--samples", "--quick", "--counters"] {
        let mut argv = vec!["costlab", "numa-maps", "--self", flag];
        if flag == "--samples" {
            argv.push("3");
        }
        assert!(parse_from(argv).is_err(), "{flag}");
    }
}

#[test]
fn db_is_read_before_or_after_a_lab_s_command() {
    for argv in [
        &["costlab", "--db", "x.db", "syscall"][..],
        &["costlab", "syscall", "--db", "x.db"],
    ] {
        let Ok(Parsed::Lab { db, name, .. }) = parse_from(argv) else {
            panic!("{argv:?}")
        };
        assert_eq!(name, "syscall");
        assert_eq!(db, Some(PathBuf::from("x.db")), "{argv:?}");
    }
}

#[test]
fn the_command_is_named_from_words_that_do_not_parse() {
    let name = |args: &[&str]| {
        let mut argv = vec!["costlab"];
        argv.extend_from_slice(args);
        command_name(&argv)
    };
    assert_eq!(name(&["price", "--bogus"]).as_deref(), Some("price"));
    assert_eq!(name(&["--db", "h.db", "price"]).as_deref(), Some("price"));
    assert_eq!(name(&["--db=h.db", "mem", "x"]).as_deref(), Some("mem"));
    assert_eq!(name(&["--", "price"]), None);
    assert_eq!(name(&[]), None);
}

#[test]
fn run_takes_every_common_option_and_full_excludes_quick() {
    let Ok(Parsed::Own(cli)) = parse_from([
        "costlab",
        "run",
        "--samples",
        "3",
        "--cpus",
        "0",
        "--retry-budget",
        "5",
        "--counters",
        "--strict",
        "--json",
        "-",
    ]) else {
        panic!("run parses the common options")
    };
    let Command::Run(r) = cli.command else {
        panic!()
    };
    let c = &r.common;
    assert_eq!((c.samples, c.cpus.as_deref()), (Some(3), Some("0")));
    assert_eq!(c.retry_budget, Some(5));
    assert!(c.counters && c.strict && c.json.as_deref() == Some("-"));
    assert!(parse_from(["costlab", "run", "--quick", "--full"]).is_err());
}

#[test]
fn a_command_that_runs_a_program_documents_its_exit_statuses() {
    use costlab_core::error::beside_program::*;
    let cmd = command();
    let runners: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| crate::registry::runs_a_program(c.get_name()))
        .collect();
    assert!(!runners.is_empty(), "price runs a program");
    for c in runners {
        let after = c
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        let after = after.replace('\n', " ");
        for said in [
            format!("{STRICT} --strict"),
            format!("{COSTLAB} costlab refused"),
            format!("{CANNOT_EXECUTE} the program cannot be executed"),
            format!("{NOT_FOUND} no such program"),
        ] {
            assert!(
                after.contains(&said),
                "{}: no '{said}' in {after}",
                c.get_name()
            );
        }
    }
}
