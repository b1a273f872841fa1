//! The echo lab's unit tests (plan, sweep bookkeeping, rendering, headlines).

use super::sweep::{default_clients, percent_range, point_case, Trouble};
use super::*;
use costlab_core::error::exit_code;

#[test]
fn durations_parse() {
    assert_eq!(
        parse_duration("2", "--duration").unwrap(),
        Duration::from_secs(2)
    );
    assert_eq!(
        parse_duration("2s", "--duration").unwrap(),
        Duration::from_secs(2)
    );
    assert_eq!(
        parse_duration("500ms", "--duration").unwrap(),
        Duration::from_millis(500)
    );
    for bad in ["0", "-1s", "abc", "2h", ""] {
        assert_eq!(
            exit_code(&parse_duration(bad, "--duration").unwrap_err()),
            2,
            "{bad}"
        );
    }
}

#[test]
fn ratios_pair_repetitions_and_headlines_read_them() {
    let mut o = Outcome::default();
    let uring = Variant::plain(Engine::Uring);
    let no_bundle = Variant {
        engine: Engine::Uring,
        features: Features::default().without("bundle"),
        off: Some("bundle"),
    };
    let epoll = Variant::plain(Engine::Epoll);
    for (v, size, tput, cpu) in [
        (epoll, 16, vec![100.0, 200.0], vec![1000.0, 1000.0]),
        (uring, 16, vec![150.0, 240.0], vec![800.0, 500.0]),
        (epoll, 16384, vec![50.0, 50.0], vec![4000.0, 4000.0]),
        (uring, 16384, vec![100.0, 75.0], vec![2000.0, 2000.0]),
        (no_bundle, 16384, vec![50.0, 50.0], vec![3000.0, 4000.0]),
    ] {
        let c = point_case(&Plan::quick(), &v, ClientKind::Event, 128, size);
        o.push(LAB, c.clone(), "throughput", "req/s", tput);
        o.push(LAB, c, "server_cpu_per_req", "ns", cpu);
    }
    assert_eq!(
        throughput_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16)),
        vec![1.5, 1.2]
    );
    assert_eq!(
        cpu_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16)),
        vec![1.25, 2.0]
    );
    // The plan's own uring, not the ablated one, is what the ratios read.
    assert_eq!(
        throughput_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16384)),
        vec![2.0, 1.5]
    );
    let h = EchoLab.headlines(&o);
    assert_eq!(h.len(), 2, "{h:?}");
    assert!((h[0].summary.median - 1.35).abs() < 1e-9);
    assert!(h[0].reading.contains("more requests"), "{}", h[0].reading);
    assert_eq!(h[1].label, "echo io_uring/epoll at 16 KiB");
    assert!((h[1].summary.median - 1.75).abs() < 1e-9);
    assert!(
        h[1].reading.contains("2.00x the server CPU"),
        "{}",
        h[1].reading
    );
    let text = render(&o);
    assert!(
        text.contains("uring÷epoll") && text.contains("1.35"),
        "{text}"
    );
    // Switching bundles off: uring/without 2.0 and 1.5, CPU without/uring 1.5 and 2.0.
    let abl = ablation_rows(&o);
    assert_eq!(abl.len(), 1, "{abl:?}");
    assert_eq!(abl[0][0], "-bundle");
    assert_eq!(abl[0][4], "1.75 (1.50–2.00)");
    assert_eq!(abl[0][5], "1.75 (1.50–2.00)");
    assert!(
        text.contains("what each uring technique is worth"),
        "{text}"
    );
}

#[test]
fn variants_ablate_each_feature_that_is_on() {
    let (clients, _) = default_clients();
    let mut plan = Plan::quick();
    plan.clients = clients;
    assert_eq!(variants(&plan).len(), 3);
    plan.ablate = true;
    plan.features = Features::parse("-fixed").unwrap();
    let v = variants(&plan);
    let labels: Vec<String> = v.iter().map(Variant::label).collect();
    assert_eq!(
        labels,
        vec![
            "epoll",
            "uring -fixed",
            "uring -big,-fixed",
            "uring -bundle,-fixed",
            "uring -inc,-fixed",
            "uring -sendmsg,-fixed",
            "uring -fixed,-huge",
            "uring -fixed,-hot",
            "uring -fixed,-spin",
            "uring-basic"
        ]
    );
    assert_eq!(parse_msg_sizes("16,512,4K,16K,64K").unwrap()[4], 65536);
    assert_eq!(exit_code(&parse_msg_sizes("0").unwrap_err()), 2);
    assert_eq!(exit_code(&parse_msg_sizes("128M").unwrap_err()), 2);
}

/// One run's loader report: `busy` share of its one CPU, `timeouts` errors.
fn load_report(busy: f64, timeouts: u64) -> LoadReport {
    let mut r = LoadReport::empty(1);
    r.window = Duration::from_secs(1);
    r.cpu_ns = (busy * 1e9) as u64;
    r.errors.timeout = timeouts;
    r
}

fn server_stats(enobufs: u64) -> ServerStats {
    ServerStats {
        enobufs,
        ..ServerStats::new("uring", "single_issuer+defer_taskrun", 16)
    }
}

#[test]
fn trouble_makes_one_note_per_point_over_its_runs() {
    let at = "epoll event client 128 conns";
    let mut t = Trouble::default();
    for (busy, timeouts, enobufs) in [(1.05, 0, 2), (1.11, 3, 0), (1.03, 1, 5)] {
        t.add(&load_report(busy, timeouts), &server_stats(enobufs));
    }
    let notes = t.notes(at);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert_eq!(
        notes[0],
        format!("{at}: loader errors in 2 of 3 runs: mismatch 0, reset 0, timeout 4, connect 0")
    );
    assert_eq!(
        notes[1],
        format!("{at}: the loader kept its 1 CPU(s) 103–111% busy over 3 runs: the client may be the bottleneck, not the server")
    );
    assert_eq!(
        notes[2],
        format!("{at}: the provided-buffer ring ran dry 7 times in 2 of 3 runs (recv re-armed as sends completed)")
    );
    // The hot path's short sends, counted the same way.
    let mut hot = Trouble::default();
    for short in [0, 4] {
        let s = ServerStats {
            short_sends: short,
            ..server_stats(0)
        };
        hot.add(&load_report(0.5, 0), &s);
    }
    assert_eq!(
        hot.notes(at),
        vec![format!("{at}: uring's sends came back short 4 times in 1 of 2 runs (a peer slow to read; the rest went in a later send)")]
    );
}

#[test]
fn one_run_reads_as_before_and_a_quiet_point_says_nothing() {
    let at = "uring blocking client 1 conns";
    let mut t = Trouble::default();
    t.add(&load_report(0.95, 2), &server_stats(0));
    let r = load_report(0.95, 2);
    assert_eq!(
        t.notes(at),
        vec![
            format!("{at}: loader errors: mismatch 0, reset 0, timeout 2, connect 0"),
            format!("{at}: {}", r.bottleneck_note().unwrap()),
        ]
    );
    let mut quiet = Trouble::default();
    for _ in 0..5 {
        quiet.add(&load_report(0.5, 0), &server_stats(0));
    }
    assert!(quiet.notes(at).is_empty());
    // Shares that round to the same percent read as one figure.
    assert_eq!(percent_range(&[1.051, 1.049]), "105%");
    assert_eq!(percent_range(&[0.92]), "92%");
}

#[test]
fn readings_say_level_when_the_spread_crosses_one() {
    let s = Summary::of(&[0.9, 1.0, 1.1]).unwrap();
    assert!(reading(s, 1, None).contains("level"));
    let s = Summary::of(&[0.8, 0.85, 0.9]).unwrap();
    assert!(reading(s, 1, Some(2.0)).contains("fewer"));
    assert!(reading(s, 1, Some(2.0)).contains("2.0 completions per enter"));
}

#[test]
fn attribution_table_names_where_uring_and_epoll_differ() {
    let mut o = Outcome::default();
    for (engine, recv, tcp) in [("epoll", 4500.0, 11000.0), ("uring", 10900.0, 15400.0)] {
        for (part, ns) in [("recv copy", recv), ("tcp/ip", tcp), ("user", 700.0)] {
            let mut c =
                case! {"engine" => engine, "client" => "uring", "conns" => 16, "size" => 65536};
            if engine == "uring" {
                c.insert("features".into(), "all".into());
            }
            c.insert("part".into(), part.into());
            o.push(LAB, c, "server_cpu_part", "ns", vec![ns]);
        }
    }
    let text = render::attribution_table(&o).unwrap();
    assert!(text.contains("recv copy"), "{text}");
    let line = text.lines().find(|l| l.contains("uring − epoll")).unwrap();
    assert!(
        line.contains(
            "recv copy +6400 ns (10900 vs 4500), tcp/ip +4400 ns (15400 vs 11000), user +0 ns"
        ),
        "{line}"
    );
    assert!(line.ends_with("in all +10800 ns"), "{line}");
    assert!(render::attribution_table(&Outcome::default()).is_none());
}

#[test]
fn ablations_run_only_where_the_technique_acts() {
    let mut plan = Plan::quick();
    plan.ablate = true;
    let vars = variants(&plan);
    let at = |size: usize| -> Vec<String> {
        vars.iter()
            .filter(|v| v.engine == Engine::Uring && v.runs_at(&plan.features, size))
            .map(|v| v.label())
            .collect()
    };
    // Below the hot path's threshold: the ring's techniques, fixed, no -hot.
    assert_eq!(
        at(4096),
        [
            "uring",
            "uring -big",
            "uring -bundle",
            "uring -inc",
            "uring -sendmsg",
            "uring -fixed",
            "uring -huge",
            "uring -spin"
        ]
    );
    // On the hot path: only what it uses.
    assert_eq!(
        at(65536),
        ["uring", "uring -fixed", "uring -hot", "uring -spin"]
    );
    // The other engines run at every size.
    assert!(vars
        .iter()
        .filter(|v| v.engine != Engine::Uring)
        .all(|v| v.runs_at(&plan.features, 65536) && v.runs_at(&plan.features, 16)));
}
