use super::*;
use costlab_core::error::exit_code;
use costlab_core::machine::speculation::offer_from;

const STATUS_HERE: &str =
    "Speculation_Store_Bypass:\tvulnerable\nSpeculationIndirectBranch:\talways enabled\n";

#[test]
fn controls_and_batches_parse_and_bad_ones_exit_2_in_one_line() {
    assert_eq!(
        parse_controls("store-bypass,indirect-branch").unwrap(),
        vec![Control::StoreBypass, Control::IndirectBranch]
    );
    assert_eq!(
        parse_controls("indirect-branch").unwrap(),
        vec![Control::IndirectBranch]
    );
    assert_eq!(parse_batches("16,1").unwrap(), vec![1, 16]);
    for bad in ["mds", "store-bypass,", "", "store-bypass,store-bypass"] {
        let e = parse_controls(bad).unwrap_err();
        assert_eq!(exit_code(&e), 2, "{bad}");
        assert!(!e.to_string().contains('\n'));
    }
    for bad in ["0", "x", "5000", "1,,2", "16,1,16"] {
        assert_eq!(exit_code(&parse_batches(bad).unwrap_err()), 2, "{bad}");
    }
}

#[test]
fn the_states_alternate_their_order_and_read_prctl_back() {
    assert_eq!(order(0), [State::On, State::Off]);
    assert_eq!(order(1), [State::Off, State::On]);
    let prctl = libc::PR_SPEC_PRCTL;
    assert!(State::On.holds(prctl | libc::PR_SPEC_FORCE_DISABLE));
    assert!(State::On.holds(prctl | libc::PR_SPEC_DISABLE));
    assert!(!State::On.holds(prctl | libc::PR_SPEC_ENABLE));
    assert!(State::Off.holds(prctl | libc::PR_SPEC_ENABLE));
    assert!(!State::Off.holds(prctl | libc::PR_SPEC_FORCE_DISABLE));
    // This machine's answer (PR_SPEC_ENABLE only): off holds, on does not.
    assert!(State::Off.holds(2) && !State::On.holds(2));
}

#[test]
fn where_no_control_is_offered_nothing_is_measured_and_each_control_gets_one_line() {
    let offers: Vec<Offer> = Control::ALL
        .iter()
        .map(|&c| offer_from(c, Ok(2), STATUS_HERE, None))
        .collect();
    let plan = Plan {
        controls: Control::ALL.to_vec(),
        batches: vec![1],
        rounds: 1,
        samples: 3,
        quick: true,
        conns: "1".into(),
    };
    let no_retry = costlab_core::measure::conditions::RetryBudget::new(Default::default());
    let o = run_plan(&plan, &offers, &no_retry).unwrap();
    assert!(o.results.is_empty());
    assert_eq!(o.notes.len(), 2, "{:?}", o.notes);
    assert!(o.notes[0].starts_with("store-bypass: no per-task control"));
    assert!(o.notes[1].starts_with("indirect-branch: no per-task control"));
    for n in &o.notes {
        assert!(!n.contains('\n'));
        assert!(
            n.contains("mitigations=off") && n.contains("costlab compare"),
            "{n}"
        );
    }
    assert_eq!(render(&o), "");
    assert!(headlines(&o).is_empty());
}

fn report(state: State, s: f64) -> ChildReport {
    let fig = |call: &str, batch: u32, base: f64| ChildFigure {
        call: call.into(),
        batch,
        samples: vec![base, base + 2.0, base - 2.0],
    };
    ChildReport {
        control: "store-bypass".into(),
        state: state.name().into(),
        prctl: libc::PR_SPEC_PRCTL
            | match state {
                State::On => libc::PR_SPEC_FORCE_DISABLE,
                State::Off => libc::PR_SPEC_ENABLE,
            },
        status: Some("thread force mitigated".into()),
        figures: vec![
            fig("getppid", 1, s),
            fig("tcp-send", 1, s + 1000.0),
            fig("tcp-recv", 1, s + 400.0),
            fig("uring-nop", 1, s + 100.0),
            fig("uring-nop", 16, 60.0),
        ],
        uring_unsupported: None,
    }
}

fn echo(control: Control, state: State, uring: f64, epoll: f64) -> Outcome {
    let mut o = Outcome::default();
    for (engine, tput) in [("uring", uring), ("epoll", epoll)] {
        o.push(
            "echo",
            costlab_core::case! {"engine" => engine, "client" => "uring", "conns" => 128u32, "size" => 16u32},
            "throughput",
            "req/s",
            vec![tput, tput * 1.01],
        );
    }
    let mut m = Model {
        lab: "echo".into(),
        name: "per-request server CPU".into(),
        params: Default::default(),
        points: Vec::new(),
        verdict: Vec::new(),
    };
    m.params.insert(
        "crossover_article".into(),
        serde_json::json!(if state == State::On { 2 } else { 5 }),
    );
    m.params
        .insert("crossover_refined".into(), serde_json::json!(3));
    m.verdict.push("crossover: ...".into());
    m.verdict.push(format!("measured under {}", control.name()));
    o.models.push(m);
    o
}

fn rounds() -> Vec<RoundFigures> {
    let c = Control::StoreBypass;
    let mut v = Vec::new();
    for round in 0..2 {
        for state in order(round) {
            let (s, uring) = match state {
                State::On => (700.0, 120_000.0),
                State::Off => (230.0, 95_000.0),
            };
            let r = report(state, s);
            r.check(c, state).unwrap();
            v.push(RoundFigures {
                control: c,
                state,
                terms: r.outcome(c, state).results,
                echo: echo(c, state, uring, 100_000.0),
            });
        }
    }
    v
}

#[test]
fn the_rounds_merge_into_one_row_per_control_state_and_case_with_every_sample() {
    let o = merge(&rounds());
    // 5 calls + 2 echo engines, for each state.
    assert_eq!(o.results.len(), 14, "{:#?}", o.results);
    let s_on = o
        .find(
            "latency",
            &costlab_core::case! {"control" => "store-bypass", "state" => "on", "call" => "getppid", "batch" => 1u32},
        )
        .unwrap();
    assert_eq!(s_on.samples.len(), 6);
    assert_eq!(s_on.summary.median, 700.0);
    let keys: Vec<&String> = s_on.case.keys().collect();
    assert_eq!(keys, ["control", "state", "call", "batch"]);
    let echo_row = o
        .results
        .iter()
        .find(|r| r.metric == "throughput" && r.key("engine") == "uring" && r.key("state") == "off")
        .unwrap();
    assert_eq!(echo_row.lab, "mitigations");
    let keys: Vec<&String> = echo_row.case.keys().collect();
    assert_eq!(
        keys,
        ["control", "state", "engine", "client", "conns", "size"]
    );
    assert_eq!(echo_row.samples.len(), 4);
    assert_eq!(o.models.len(), 2);
    assert_eq!(o.models[0].name, "echo model, store-bypass off");
    assert_eq!(o.models[0].params["crossover_article"], 5);
}

#[test]
fn a_disturbed_round_marks_the_merged_row() {
    let mut r = rounds();
    r[0].terms[0].quality = Some(Quality::Disturbed);
    r[0].terms[0].quality_reasons = vec!["other processes took 90% of CPU 1".into()];
    for x in r.iter_mut().skip(1) {
        for t in x.terms.iter_mut() {
            t.quality = Some(Quality::Ok);
        }
    }
    let o = merge(&r);
    let s_on = o
        .results
        .iter()
        .find(|x| x.key("call") == "getppid" && x.key("state") == "on")
        .unwrap();
    assert_eq!(s_on.quality, Some(Quality::Disturbed));
    assert_eq!(s_on.quality_reasons, ["other processes took 90% of CPU 1"]);
    let s_off = o
        .results
        .iter()
        .find(|x| x.key("call") == "getppid" && x.key("state") == "off")
        .unwrap();
    assert_eq!(s_off.quality, Some(Quality::Ok));
}

#[test]
fn the_table_and_the_sheet_read_s_w_t_the_ratio_and_the_crossover_per_state() {
    let o = merge(&rounds());
    let text = render(&o);
    assert!(text.starts_with("store-bypass:\n"), "{text}");
    for want in [
        "on (speculation force-disabled)",
        "off (speculation enabled)",
        "t(1) ns",
        "t(16) ns",
        "uring/epoll 128 conns",
        "1.20x",
        "0.95x",
        "n = 2 (refined k = 3)",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let moved = text
        .lines()
        .find(|l| l.starts_with("forcing store-bypass on"))
        .unwrap();
    assert!(moved.contains("s 230.0 ns -> 700.0 ns (3.04x)"), "{moved}");
    assert!(moved.contains("w send 1.00 us -> 1.00 us"), "{moved}");
    assert!(
        moved.contains("io_uring/epoll at 128 conns 0.95x -> 1.20x"),
        "{moved}"
    );
    assert!(
        moved.contains("crossover n = 5 (refined k = 3) -> n = 2"),
        "{moved}"
    );
    let h = headlines(&o);
    let labels: Vec<&str> = h.iter().map(|h| h.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "s with store-bypass on",
            "echo io_uring/epoll, 128 conns, store-bypass on",
            "s with store-bypass off",
            "echo io_uring/epoll, 128 conns, store-bypass off",
        ]
    );
    assert_eq!(h[0].summary.median, 700.0);
    assert!((h[1].summary.median - 1.2).abs() < 1e-9);
}

#[test]
fn a_child_report_of_another_state_is_refused() {
    let r = report(State::Off, 200.0);
    assert!(r.check(Control::StoreBypass, State::On).is_err());
    assert!(r.check(Control::IndirectBranch, State::Off).is_err());
    let mut wrong = report(State::On, 200.0);
    wrong.prctl = libc::PR_SPEC_PRCTL | libc::PR_SPEC_ENABLE;
    let e = wrong.check(Control::StoreBypass, State::On).unwrap_err();
    assert!(
        e.to_string().contains("PR_SPEC_PRCTL | PR_SPEC_ENABLE"),
        "{e}"
    );
}
