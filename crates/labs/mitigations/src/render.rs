//! The mitigations lab's tables and cost-sheet lines: per control, each state's s, w, t(n)
//! and echo io_uring/epoll ratio, then what forcing the control on moved.

use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;
use costlab_history::report::{table, Outcome, ResultRow};
use costlab_lab::Headline;

use super::LAB;

fn rows_of<'a>(o: &'a Outcome, control: &str, state: &str) -> Vec<&'a ResultRow> {
    o.results
        .iter()
        .filter(|r| r.lab == LAB && r.key("control") == control && r.key("state") == state)
        .collect()
}

fn call<'a>(rows: &[&'a ResultRow], call: &str, batch: u32) -> Option<&'a ResultRow> {
    rows.iter()
        .copied()
        .find(|r| r.key("call") == call && r.key("batch") == batch.to_string())
}

/// The controls the outcome has rows of, in the order first seen.
fn controls(o: &Outcome) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in o.results.iter().filter(|r| r.lab == LAB) {
        let c = r.key("control");
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// The echo points (client, conns, size) the rows of one state have.
fn echo_points(rows: &[&ResultRow]) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = rows
        .iter()
        .filter(|r| r.metric == "throughput")
        .map(|r| (r.key("client"), num(r, "conns"), num(r, "size")))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn num(r: &ResultRow, key: &str) -> u64 {
    r.case.get(key).and_then(|v| v.as_u64()).unwrap_or(0)
}

/// io_uring's throughput over epoll's at one point: paired by round and repetition where both
/// engines have as many samples (they ran side by side), else the ratio of the medians.
pub fn echo_ratio(rows: &[&ResultRow], point: &(String, u64, u64)) -> Option<Summary> {
    let engine = |e: &str| {
        rows.iter().copied().find(|r| {
            r.metric == "throughput"
                && r.key("engine") == e
                && r.key("client") == point.0
                && num(r, "conns") == point.1
                && num(r, "size") == point.2
        })
    };
    let (u, e) = (engine("uring")?, engine("epoll")?);
    let ratios: Vec<f64> = if u.samples.len() == e.samples.len() {
        u.samples
            .iter()
            .zip(&e.samples)
            .filter(|(_, b)| **b > 0.0)
            .map(|(a, b)| a / b)
            .collect()
    } else if e.summary.median > 0.0 {
        vec![u.summary.median / e.summary.median]
    } else {
        Vec::new()
    };
    Summary::of(&ratios)
}

/// Per-state figures of one control, as the table and the headlines read them.
struct StateFigures<'a> {
    s: Option<&'a ResultRow>,
    send: Option<&'a ResultRow>,
    recv: Option<&'a ResultRow>,
    nops: Vec<&'a ResultRow>,
    ratios: Vec<((String, u64, u64), Summary)>,
    crossover: Option<String>,
}

fn state_figures<'a>(o: &'a Outcome, control: &str, state: &str) -> StateFigures<'a> {
    let rows = rows_of(o, control, state);
    let mut nops: Vec<&ResultRow> = rows
        .iter()
        .copied()
        .filter(|r| r.key("call") == "uring-nop")
        .collect();
    nops.sort_by_key(|r| num(r, "batch"));
    let ratios = echo_points(&rows)
        .into_iter()
        .filter_map(|p| echo_ratio(&rows, &p).map(|s| (p, s)))
        .collect();
    let crossover = o
        .models
        .iter()
        .find(|m| m.lab == LAB && m.name == format!("echo model, {control} {state}"))
        .and_then(|m| {
            let a = m.params.get("crossover_article")?;
            let r = m.params.get("crossover_refined");
            Some(format!(
                "n = {}{}",
                a.as_u64().map_or("none".into(), |n| n.to_string()),
                r.and_then(|r| r.as_u64())
                    .map_or(String::new(), |k| format!(" (refined k = {k})"))
            ))
        });
    StateFigures {
        s: call(&rows, "getppid", 1),
        send: call(&rows, "tcp-send", 1),
        recv: call(&rows, "tcp-recv", 1),
        nops,
        ratios,
        crossover,
    }
}

fn med(r: Option<&ResultRow>) -> Option<f64> {
    r.map(|r| r.summary.median)
}

fn ns(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| format!("{x:.1}"))
}

/// w of a send or recv: its median beyond s's.
fn w(of: Option<&ResultRow>, s: Option<&ResultRow>) -> Option<f64> {
    Some(med(of)? - med(s)?)
}

/// The tables: one per control, a row per state, then what the control moved.
pub fn render(o: &Outcome) -> String {
    let mut out = String::new();
    for control in controls(o) {
        let on = state_figures(o, &control, "on");
        let off = state_figures(o, &control, "off");
        let batches: Vec<u64> = on.nops.iter().map(|r| num(r, "batch")).collect();
        let points: Vec<(String, u64, u64)> = on
            .ratios
            .iter()
            .map(|(p, _)| p.clone())
            .chain(off.ratios.iter().map(|(p, _)| p.clone()))
            .fold(Vec::new(), |mut v, p| {
                if !v.contains(&p) {
                    v.push(p);
                }
                v
            });
        let mut head: Vec<String> = vec![
            "state".into(),
            "s ns".into(),
            "w send ns".into(),
            "w recv ns".into(),
        ];
        head.extend(batches.iter().map(|b| format!("t({b}) ns")));
        head.extend(
            points
                .iter()
                .map(|(_, c, _)| format!("uring/epoll {c} conn{}", if *c == 1 { "" } else { "s" })),
        );
        head.push("crossover".into());
        let line = |name: &str, f: &StateFigures| -> Vec<String> {
            let mut v = vec![
                name.to_string(),
                f.s.map_or("—".into(), |r| {
                    format!(
                        "{:.1}{}",
                        r.summary.median,
                        costlab_history::report::verdict::mark(r)
                    )
                }),
                ns(w(f.send, f.s)),
                ns(w(f.recv, f.s)),
            ];
            for b in &batches {
                v.push(ns(med(f
                    .nops
                    .iter()
                    .copied()
                    .find(|r| num(r, "batch") == *b))));
            }
            for p in &points {
                v.push(
                    f.ratios
                        .iter()
                        .find(|(q, _)| q == p)
                        .map_or("—".into(), |(_, s)| format!("{:.2}x", s.median)),
                );
            }
            v.push(f.crossover.clone().unwrap_or_else(|| "—".into()));
            v
        };
        let rows = vec![
            line("on (speculation force-disabled)", &on),
            line("off (speculation enabled)", &off),
        ];
        let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
        out.push_str(&format!("{control}:\n"));
        out.push_str(&table::render(&head_refs, &rows));
        out.push('\n');
        out.push_str(&moved_line(&control, &on, &off));
        out.push('\n');
    }
    out
}

/// "store-bypass on moves s 230 -> 700 ns (3.04x), w send ..., uring/epoll at 1 conn 0.95x -> 1.12x".
fn moved_line(control: &str, on: &StateFigures, off: &StateFigures) -> String {
    let mut parts = Vec::new();
    if let (Some(a), Some(b)) = (med(off.s), med(on.s)) {
        parts.push(format!(
            "s {} -> {} ({:.2}x)",
            human_ns(a),
            human_ns(b),
            b / a.max(1e-9)
        ));
    }
    for (what, x, y) in [
        ("w send", w(off.send, off.s), w(on.send, on.s)),
        ("w recv", w(off.recv, off.s), w(on.recv, on.s)),
    ] {
        if let (Some(a), Some(b)) = (x, y) {
            parts.push(format!("{what} {} -> {}", human_ns(a), human_ns(b)));
        }
    }
    for (p, b) in &on.ratios {
        if let Some((_, a)) = off.ratios.iter().find(|(q, _)| q == p) {
            parts.push(format!(
                "io_uring/epoll at {} conns {:.2}x -> {:.2}x",
                p.1, a.median, b.median
            ));
        }
    }
    if let (Some(a), Some(b)) = (&off.crossover, &on.crossover) {
        parts.push(format!("crossover {a} -> {b}"));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("forcing {control} on (off -> on): {}\n", parts.join("; "))
}

/// The cost-sheet lines: per control and state, s and the echo ratio at the most connections.
pub fn headlines(o: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    for control in controls(o) {
        for state in ["on", "off"] {
            let f = state_figures(o, &control, state);
            if let Some(s) = f.s {
                h.push(
                    Headline {
                        label: format!("s with {control} {state}"),
                        summary: s.summary,
                        unit: "ns".into(),
                        reading: format!(
                            "a null syscall costs {} with {control} speculation {}",
                            human_ns(s.summary.median),
                            if state == "on" {
                                "force-disabled"
                            } else {
                                "enabled"
                            }
                        ),
                        ..Default::default()
                    }
                    .judged_by(&[s]),
                );
            }
            if let Some((p, r)) = f.ratios.iter().max_by_key(|(p, _)| p.1) {
                let rows = rows_of(o, &control, state);
                let sources: Vec<&ResultRow> = rows
                    .iter()
                    .copied()
                    .filter(|r| r.metric == "throughput" && num(r, "conns") == p.1)
                    .collect();
                h.push(
                    Headline {
                        label: format!("echo io_uring/epoll, {} conns, {control} {state}", p.1),
                        summary: *r,
                        unit: "x".into(),
                        reading: format!(
                            "io_uring serves {:.2}x epoll's requests per second with {control} {state}",
                            r.median
                        ),
                        ..Default::default()
                    }
                    .judged_by(&sources),
                );
            }
        }
    }
    h
}
