//! The report of a measured price opened in headless Chromium: the chart of its CPU time,
//! measured beside priced, is in the page and on the screenshot (its classes' colours), from
//! the rows price stores (a fixture split, no root needed). Fails without chromium, as the
//! other browser checks do. COSTLAB_KEEP_PRICE_SCREENSHOT=FILE keeps the screenshot.

use costlab_history::report::{Doc, Outcome, RunInfo};
use costlab_price::measured::{beside, Line, Split};
use costlab_price::pricing::{Priced, Unit};

use crate::browser::{pixels, screenshot};

fn line(class: &str, event: &str, count: u64, cpu_ms: f64) -> Line {
    Line {
        class: class.into(),
        event: event.into(),
        count,
        cpu_ns: (cpu_ms * 1e6) as u64,
        ..Line::default()
    }
}

fn priced(event: &str, count: u64, unit: f64) -> Priced {
    Priced {
        class: if event == "minor" { "fault" } else { "syscall" }.into(),
        event: event.into(),
        count,
        unit: Some(Unit {
            samples: vec![unit * 0.95, unit, unit * 1.05],
            rows: Vec::new(),
            from: "fixture".into(),
        }),
        unit_name: "s".into(),
        how: String::new(),
    }
}

/// A tar czf-like split: user-heavy, reads and writes, faults, the timer irq.
fn doc() -> Doc {
    let split = Split {
        lines: vec![
            line("user", "user", 0, 2800.0),
            line("syscall", "read", 20_000, 230.0),
            line("syscall", "write", 12_000, 60.0),
            line("syscall", "newfstatat", 18_000, 46.0),
            line("fault", "minor", 450, 0.9),
            line("irq", "local_timer", 900, 9.9),
            line("softirq", "block", 5900, 13.9),
            line("kernel-other", "unmeasured", 0, 4.5),
        ],
        usage_ns: 3_165_000_000,
        ..Split::default()
    };
    let p = vec![
        priced("read:file", 20_000, 1100.0),
        priced("write:file", 12_000, 1900.0),
        priced("newfstatat", 18_000, 320.0),
        priced("minor", 450, 2000.0),
    ];
    let lines = beside::beside(&split, &p);
    let mut o = Outcome::default();
    beside::push_rows(&mut o, &split, &lines, "tar czf x.tgz /usr/share/doc", 0);
    let run = RunInfo {
        id: "20261126T080000Z-price".into(),
        started: "2026-11-26T08:00:00Z".into(),
        costlab: "test".into(),
        command: "costlab price -- tar czf x.tgz /usr/share/doc".into(),
        complete: true,
    };
    Doc::new(run, serde_json::Value::Null, o)
}

#[test]
fn the_measured_price_chart_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let doc = doc();
    let charts = costlab::registry::charts(&doc);
    assert!(charts.iter().any(|c| c.id == "chart-price-measured"));
    let page =
        costlab_history::report::html::write_report(&dir.path().join("report"), &doc, &[], charts)
            .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"chart-price-measured\""));
    assert!(html.contains("measured beside priced"));
    let png = dir.path().join("shot.png");
    screenshot(&page, &png, &dir.path().join("profile"));
    if let Ok(keep) = std::env::var("COSTLAB_KEEP_PRICE_SCREENSHOT") {
        let _ = std::fs::copy(&png, keep);
    }
    let (_, _, px) = pixels(&png);
    // The syscall class's blue and the fault class's orange are drawn.
    let near = |c: [u8; 3], p: &[u8; 3]| c.iter().zip(p).all(|(a, b)| a.abs_diff(*b) <= 6);
    for (name, colour) in [
        ("syscall", [0x1f, 0x77, 0xb4]),
        ("user", [0x9e, 0x9e, 0x9e]),
    ] {
        let n = px.iter().filter(|p| near(colour, p)).count();
        assert!(
            n > 200,
            "{name}'s colour not on the screenshot ({n} pixels)"
        );
    }
}
