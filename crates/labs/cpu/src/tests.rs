//! The cpu lab's unit tests: plans, models, headlines and the counter columns. No timing is
//! asserted.

use std::collections::BTreeMap;

use super::*;
use costlab_core::machine::Cache;

fn machine(l2: u64) -> Machine {
    Machine {
        caches: vec![Cache {
            level: 2,
            kind: "Unified".into(),
            size: l2,
            line: 64,
            shared_by: vec![],
        }],
        ..Default::default()
    }
}

fn args(sizes: Option<&str>, case: Option<&str>) -> TestArgs {
    TestArgs {
        sizes: sizes.map(str::to_string),
        case: case.map(str::to_string),
        common: Default::default(),
    }
}

#[test]
fn plans_read_l2_and_refuse_bad_input_with_exit_2() {
    let m = machine(4 << 20);
    let p = Plan::parse(Test::LoopOrder, &args(None, None), &m, false).unwrap();
    assert_eq!(p.sizes, [32 << 20], "4 x L2, at least 32 MiB");
    let p = Plan::parse(
        Test::LoopOrder,
        &args(None, None),
        &machine(16 << 20),
        false,
    )
    .unwrap();
    assert_eq!(p.sizes, [64 << 20], "4 x L2");
    assert_eq!(p.variants, ["row-major", "column-major"]);
    let p = Plan::parse(
        Test::LoopOrder,
        &args(None, None),
        &machine(512 << 10),
        true,
    )
    .unwrap();
    assert_eq!(p.sizes, [4 << 20], "the floor");
    let p = Plan::parse(
        Test::Branch,
        &args(Some("64K,4M"), Some("Branchy")),
        &m,
        false,
    )
    .unwrap();
    assert_eq!(
        (p.sizes, p.variants),
        (vec![64 << 10, 4 << 20], vec!["branchy"])
    );
    for (test, sizes, case) in [
        (Test::Branch, None, Some("row-major")),
        (Test::Branch, Some("1K"), None),
        (Test::LoopOrder, Some("junk"), None),
        (Test::LoopOrder, None, Some("diagonal")),
    ] {
        let e = Plan::parse(test, &args(sizes, case), &m, false).unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2, "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

fn row(case: Map<String, Value>, samples: Vec<f64>) -> ResultRow {
    ResultRow::new(LAB, case, "time", "ns", samples).unwrap()
}

fn branch(variant: &str, data: &str, ns: f64) -> ResultRow {
    row(
        case! {"test" => "branch", "variant" => variant, "data" => data, "size" => 1 << 20},
        vec![ns, ns * 1.01, ns * 0.99],
    )
}

fn fixture() -> Outcome {
    let mut o = Outcome::default();
    o.results.extend([
        branch("branchy", "sorted", 1.0),
        branch("branchy", "shuffled", 5.0),
        branch("branchless", "sorted", 1.5),
        branch("branchless", "shuffled", 1.52),
        row(
            case! {"test" => "loop-order", "variant" => "row-major", "size" => 16 << 20, "n" => 1448},
            vec![0.5; 3],
        ),
        row(
            case! {"test" => "loop-order", "variant" => "column-major", "size" => 16 << 20, "n" => 1448},
            vec![12.0; 3],
        ),
    ]);
    o.models.extend(branch_models(&o.results));
    o.models.extend(loop_order_models(&o.results));
    o
}

#[test]
fn the_models_read_a_wrong_guess_and_a_line_per_element() {
    let o = fixture();
    let b = &o.models[0];
    assert_eq!(b.params["mispredict_ns"], Value::from(8.0));
    let text = b.verdict.join("\n");
    assert!(text.contains("a wrong guess costs about 8.0 ns"), "{text}");
    assert!(text.contains("the order does not matter"), "{text}");
    let l = &o.models[1];
    assert_eq!(l.points[0].predicted, 4.0);
    let text = l.verdict.join("\n");
    assert!(
        text.contains("24.0x row-major") && text.contains("departs"),
        "{text}"
    );
    assert!(text.contains("TLB"), "{text}");
}

#[test]
fn headlines_carry_the_derived_figures() {
    let h = headlines(&fixture());
    let labels: Vec<&str> = h.iter().map(|x| x.label.as_str()).collect();
    assert_eq!(labels, ["mispredicted branch", "column-major element"]);
    assert!((h[0].summary.median - 8.0).abs() < 1e-9);
    assert_eq!(h[0].summary.n, 3);
    assert!(
        h[1].reading.contains("24.0x row by row"),
        "{}",
        h[1].reading
    );
}

#[test]
fn counter_columns_say_unsupported_where_there_is_no_pmu() {
    let mut o = fixture();
    let no_pmu = "no hardware PMU in this VM (no CPU PMU under /sys/bus/event_source/devices)";
    for r in &mut o.results {
        r.unsupported_counters = Some(BTreeMap::from([
            ("IPC".to_string(), no_pmu.to_string()),
            ("branch-misses".to_string(), no_pmu.to_string()),
            ("cache-misses".to_string(), no_pmu.to_string()),
        ]));
        r.counters = Some(BTreeMap::from([("page-faults/element".to_string(), 0.0)]));
    }
    let text = render(&o);
    assert!(text.contains("branch-misses/el"), "{text}");
    assert!(text.contains("cache-misses/el"), "{text}");
    assert_eq!(text.matches("unsupported: no PMU").count(), 12, "{text}");
    // Where a PMU counted them, the figures show.
    let r = &mut o.results[0];
    r.counters = Some(BTreeMap::from([
        ("IPC".to_string(), 2.5),
        ("branch-misses/element".to_string(), 0.01),
    ]));
    assert_eq!(render::counter_cell(r, "IPC"), "2.50");
    assert_eq!(render::counter_cell(r, "branch-misses"), "0.010");
    // Without --counters, no counter columns at all.
    let text = render(&fixture());
    assert!(!text.contains("IPC") || text.contains("model"), "{text}");
    assert!(!text.contains("unsupported"), "{text}");
}

/// The whole lab on this machine at tiny sizes: rows with the keys and units docs/src/contract.md names.
#[test]
fn a_tiny_run_gives_every_row() {
    let ctx = Ctx {
        machine: Machine::default(),
        spec: costlab_core::measure::SampleSpec {
            samples: 3,
            min_sample: std::time::Duration::from_millis(1),
            warmup: std::time::Duration::from_millis(1),
        },
        counters: true,
        quick: true,
        reserve_hugepages: false,
        history: None,
        program_exit: Default::default(),
    };
    let plans = [
        Plan {
            test: Test::Branch,
            variants: vec!["branchy", "branchless"],
            sizes: vec![16 << 10],
        },
        Plan {
            test: Test::LoopOrder,
            variants: vec!["row-major", "column-major"],
            sizes: vec![256 << 10],
        },
    ];
    let o = measure(&plans, &ctx).unwrap();
    assert_eq!(o.results.len(), 6);
    for r in &o.results {
        assert_eq!(
            (r.lab.as_str(), r.metric.as_str(), r.unit.as_str()),
            (LAB, "time", "ns")
        );
        assert_eq!(r.summary.n, 3);
        assert!(r.quality.is_some(), "judged");
        assert!(
            r.counters.is_some() || r.unsupported_counters.is_some(),
            "counters read or explained"
        );
    }
    assert_eq!(o.models.len(), 2);
    assert_eq!(headlines(&o).len(), 2);
}
