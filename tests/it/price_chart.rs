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

/// The price model and a `--verify` trial as a price run stores them, beside `doc()`'s split:
/// 365.2 ms of kernel time, 10 ms of it the tracer's own cost.
fn verified_doc() -> Doc {
    use costlab_price::verify::{rows, verdict::Verdict, Of, Tried};
    let mut doc = doc();
    let split = Split {
        lines: vec![
            line("syscall", "read", 20_000, 230.0),
            line("syscall", "execve", 1, 40.0),
        ],
        usage_ns: 3_165_000_000,
        ..Split::default()
    };
    let lines = beside::beside(&split, &[priced("read:file", 20_000, 1100.0)]);
    let outside = beside::outside(&split, &lines, 365e6, &beside::Evidence::default());
    let mut params = serde_json::Map::new();
    for (k, v) in [
        ("priced_kernel_ns", 130e6),
        ("kernel_ns", 355.2e6),
        ("tracer_ns", 10e6),
        ("cpu_usage_ns", 3_165e6),
        ("explained_pct", 36.6),
    ] {
        params.insert(k.into(), serde_json::json!(v));
    }
    params.insert("ended".into(), "the program exited with status 0".into());
    params.insert("outside".into(), serde_json::to_value(&outside).unwrap());
    doc.models.push(costlab_history::report::Model {
        lab: "price".into(),
        name: "price of tar czf x.tgz /usr/share/doc".into(),
        params,
        points: Vec::new(),
        verdict: vec!["explained: 37%".into()],
    });
    let mut o = Outcome::default();
    let trial = |what, remedy: &str, verdict, predicted, measured: Vec<f64>| Tried {
        what,
        remedy: remedy.into(),
        of: Of::Kernel,
        verdict,
        predicted,
        measured,
        wall_saved: Vec::new(),
        rate_change: Vec::new(),
        work_change: Vec::new(),
        before: None,
        lines: vec![format!("{what} ({remedy}): the trial's line")],
    };
    rows::push(
        &mut o,
        &[
            trial(
                "thp",
                "THP always",
                Verdict::Confirmed,
                Some((8e6, 10e6, 12e6)),
                vec![9e6, 11e6, 10.5e6],
            ),
            trial(
                "glibc-hugetlb",
                "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                Verdict::Level,
                Some((8e6, 10e6, 12e6)),
                vec![-1e6, 2e6, 0.5e6],
            ),
            Tried {
                lines: vec!["numa-policy (interleave): not tried: one node".into()],
                ..trial(
                    "numa-policy",
                    "interleave",
                    Verdict::NotTried,
                    None,
                    Vec::new(),
                )
            },
        ],
        "tar czf x.tgz /usr/share/doc",
    );
    doc.results.extend(o.results);
    doc.models.extend(o.models);
    doc
}

/// `costlab report` of a stored price (its results.json): the page leads with the program,
/// where its time went on one total, the line outside the band with its evidence, and each
/// what-if with its prediction, measured saving, interval and verdict; no cost sheet and no
/// "Not run" line, and one chart (measured beside priced), not a second total.
#[test]
fn a_price_report_tells_the_program_its_one_total_and_its_what_ifs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.json");
    std::fs::write(&json, serde_json::to_string(&verified_doc()).unwrap()).unwrap();
    let out_dir = dir.path().join("report");
    let db = dir.path().join("h.db").display().to_string();
    let out = crate::common::costlab_db(
        &db,
        &[
            "report",
            json.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for gone in [
        "no lab gave a headline figure",
        "Not run",
        "Cost sheet",
        "largest disagreement",
        "chart-price-cpu",
    ] {
        assert!(!html.contains(gone), "{gone} in the page");
    }
    assert!(html.contains("<h1>What tar czf x.tgz /usr/share/doc costs here</h1>"));
    let program = html.find("id=\"program\"").expect("the program's section");
    let what_ifs = html.find("id=\"what-ifs\"").expect("the what-ifs");
    assert!(program < html.find("id=\"where\"").unwrap() && program < what_ifs);
    assert!(html.contains("the program exited with status 0"));
    // One total: the split's kernel time less the tracer's, and the CPU on it.
    assert!(html.contains("<th>kernel total</th><th class=\"num\">355.20 ms</th>"));
    assert!(
        html.contains("<td>the tracer's own cost, taken out</td><td class=\"num\">−10.00 ms</td>")
    );
    assert!(html.contains("<th>CPU total</th><th class=\"num\">3.16 s</th>"));
    assert!(html.contains("explained: 37% of the kernel total"));
    // Each line's ratio, and the heavy line outside the band with its evidence.
    assert!(html.contains("<td>syscall</td><td>read</td><td class=\"num\">230.00 ms</td>"));
    assert!(html
        .contains("<b>syscall execve</b>: 40.00 ms measured (11% of the kernel total), no term"));
    assert!(
        html.contains("<b>syscall read</b>"),
        "read (0.10x) is outside"
    );
    assert!(html.contains("it would have to be 11.50 us"));
    // The what-ifs: prediction, measured saving, interval, verdict.
    assert!(html.contains("<td>thp</td><td>THP always</td><td>kernel</td><td class=\"num\">10.00 ms (8.00 ms–12.00 ms)</td><td class=\"num\">10.50 ms over 3 pairs</td><td class=\"num\">9.00 ms to 11.00 ms</td><td><b>confirmed</b></td>"));
    assert!(html.contains("<b>level</b>"));
    assert!(html.contains("<td>numa-policy</td><td>interleave</td>"));
    assert!(html.contains("<b>not-tried</b>: one node"));
    assert!(html.contains(
        "what-ifs tried over 3 pairs: 1 confirmed, 0 refuted, 1 level, 0 size-off; 1 not tried"
    ));
    assert!(html.contains("id=\"chart-price-measured\""));
}
