//! The share lab's unit tests (plan, clean samples, models, rendering, headlines).

use super::*;

fn row(case: costlab_history::report::model::Case, metric: &str, samples: Vec<f64>) -> ResultRow {
    ResultRow::new(LAB, case, metric, "Mop/s", samples).unwrap()
}

fn fake_outcome() -> Outcome {
    let mut o = Outcome::default();
    for (v, x1, x2) in [("arc-shared", 50.0, 20.0), ("arc-per-thread", 50.0, 100.0)] {
        for (t, x) in [(1, x1), (2, x2)] {
            o.results.push(row(
                costlab_core::case! {"variant" => v, "threads" => t},
                "throughput",
                vec![x * 0.99, x, x * 1.01],
            ));
            o.results.push(row(
                costlab_core::case! {"variant" => v, "threads" => t},
                "latency",
                vec![t as f64 * 1e3 / x],
            ));
        }
    }
    o.results.push(row(
        costlab_core::case! {"from" => 0, "to" => 1},
        "latency",
        vec![50.0, 52.0, 51.0],
    ));
    for v in [Variant::ArcShared, Variant::ArcPerThread] {
        o.models.extend(usl_models(v, &o.results));
    }
    o
}

#[test]
fn the_quick_plan_gives_every_headline() {
    let ctx = Ctx::new(
        costlab_core::machine::Machine::probe(),
        &costlab_lab::Common {
            quick: true,
            ..Default::default()
        },
        costlab_lab::Scope::Command,
    );
    let t0 = std::time::Instant::now();
    let o = ShareLab.run_plan(&ctx, false).unwrap();
    eprintln!("quick plan took {:?}", t0.elapsed());
    let n = cpus::allowed_cpus().len();
    let per_case = if n >= 2 { 2 } else { 1 };
    let case_rows = o.results.iter().filter(|r| r.case.contains_key("variant"));
    assert_eq!(case_rows.count(), Variant::ALL.len() * per_case * 2);
    let h = ShareLab.headlines(&o);
    assert_eq!(h.len(), if n >= 2 { 3 } else { 2 });
    assert!(h
        .iter()
        .all(|h| h.summary.median > 0.0 && !h.reading.is_empty()));
}

#[test]
fn render_groups_fake_cpus_by_latency() {
    let mut o = Outcome::default();
    for (a, b) in c2c::pairs(&[0, 1, 2, 3]) {
        let lat = if a / 2 == b / 2 { 25.0 } else { 100.0 };
        o.results.push(row(
            costlab_core::case! {"from" => a, "to" => b},
            "latency",
            vec![lat, lat + 1.0],
        ));
    }
    let text = render(&o);
    assert!(text.contains("{0-1} {2-3}"), "{text}");
    assert!(text.contains("CPU 3"));
    assert!(!text.contains("share: T threads"));
}

#[test]
fn busy_machines_are_named() {
    assert!(busy_note(Some(11.5), Some(9.0), 2)
        .unwrap()
        .contains("11.5"));
    assert!(busy_note(Some(1.0), Some(2.5), 2).is_none());
    assert!(busy_note(None, None, 2).is_none());
}

#[test]
fn clean_samples_need_every_worker_running_together() {
    let sample = |ns: f64, per: [f64; 2]| costlab_core::measure::Sample {
        iters: 10,
        ns,
        per_thread_ns: per.to_vec(),
    };
    let samples = [
        sample(100.0, [99.0, 98.0]),  // clean
        sample(100.0, [99.0, 50.0]),  // worker 1 started late
        sample(100.0, [99.0, 99.0]),  // worker 0 was preempted
        sample(100.0, [100.0, 60.0]), // worker 1 finished early: contention, clean
    ];
    let call = |start_ns, on_cpu| Call { start_ns, on_cpu };
    // Calibration calls come first in the logs, then the four samples.
    let calls = vec![
        vec![
            call(0.0, 0.3),
            call(10.0, 1.0),
            call(200.0, 1.0),
            call(400.0, 0.5),
            call(600.0, 1.0),
        ],
        vec![
            call(0.0, 1.0),
            call(12.0, 0.95),
            call(250.0, 1.0),
            call(401.0, 1.0),
            call(601.0, 1.0),
        ],
    ];
    assert_eq!(
        clean_samples(&samples, &calls),
        vec![true, false, false, true]
    );
    // A short log (should not happen) marks nothing clean rather than panicking.
    assert_eq!(
        clean_samples(&samples, &[vec![call(0.0, 1.0)]]),
        vec![false; 4]
    );
}

#[test]
fn default_sweeps() {
    assert_eq!(default_threads(2, false), vec![1, 2]);
    assert_eq!(default_threads(1, false), vec![1]);
    assert_eq!(default_threads(6, false), vec![1, 2, 4, 6]);
    assert_eq!(default_threads(8, false), vec![1, 2, 4, 8]);
    assert_eq!(default_threads(8, true), vec![1, 2, 4, 8]);
    assert_eq!(default_threads(16, true), vec![1, 2, 4, 8, 16]);
}

#[test]
fn two_points_give_two_bound_models_that_match_the_measurements() {
    let o = fake_outcome();
    assert_eq!(o.models.len(), 4);
    let m = &o.models[0];
    assert_eq!(m.params["fit"], json!("sigma-only bound"));
    // X(2)/X(1) = 0.4: sigma + 2 kappa = 4.
    assert!((param(m, "sigma") - 4.0).abs() < 1e-6);
    assert!((param(&o.models[1], "kappa") - 2.0).abs() < 1e-6);
    for m in &o.models {
        assert_eq!(m.points.len(), 2);
        assert!(m.points.iter().all(|p| p.error().abs() < 1e-6), "{m:?}");
    }
}

#[test]
fn ratios_and_headlines_read_the_top_thread_count() {
    let o = fake_outcome();
    let r = ratios(&o);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].threads, 2);
    assert!((r[0].summary.median - 5.0).abs() < 1e-9);
    let h = headlines(&o);
    assert_eq!(h.len(), 2);
    assert!(h[0].reading.contains("5.0x") && h[0].reading.contains("refcount"));
    assert_eq!(h[1].unit, "ns");
    assert_eq!(h[1].summary.median, 51.0);
}

#[test]
fn render_shows_cases_models_and_matrix() {
    let text = render(&fake_outcome());
    for want in [
        "arc-per-thread",
        "efficiency vs T=1",
        "20%",
        "5.00x",
        "model extrapolation",
        "upper bound",
        "from \\ to",
        "groups: one pair only",
        "why:",
    ] {
        assert!(text.contains(want), "missing '{want}' in:\n{text}");
    }
}
