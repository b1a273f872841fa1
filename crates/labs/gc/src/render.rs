//! The gc lab's terminal rendering: the GC share by headroom with the smallest h under 10%,
//! the models beside the measurements, the tax by attribution, and the A/B and A/A taxes.

use costlab_history::report::{table, Outcome};

use crate::{attribution_pooled, headroom_targets, java, plan, tax};

/// The terminal rendering: the curve, the smallest h under 10%, the paper beside ours, the
/// model, and the taxes.
pub fn render(o: &Outcome) -> String {
    let mut out = render_curve(o);
    out.push_str(&render_models(o));
    out.push_str(&render_attribution(o));
    out.push_str(&render_taxes(o));
    out
}

/// The GC share, cycles, pauses, RSS and wall time by runtime, mode and headroom, and per
/// runtime the smallest headroom keeping GC under the target.
fn render_curve(o: &Outcome) -> String {
    let mut out = String::new();
    let shares: Vec<_> = o
        .results
        .iter()
        .filter(|r| r.metric == "gc_cpu_share" || r.metric == "cycles")
        .filter(|r| r.metric == "cycles" || r.summary.n > 0)
        .collect();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut rows = Vec::new();
    for r in &shares {
        let key = (
            format!("{} {}", java::runtime_of(r), r.key("mode")),
            headroom_text(&r.case),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let cell = |metric: &str, prec: usize| {
            o.results
                .iter()
                .find(|x| x.metric == metric && x.case == r.case)
                .map_or("—".to_string(), |x| x.summary.show(prec))
        };
        rows.push(vec![
            key.0.clone(),
            key.1.clone(),
            cell("gc_cpu_share", 1),
            cell("cycles", 0),
            cell("max_pause", 0),
            cell("peak_rss", 0),
            cell("wall", 2),
            cell("slowdown", 1),
        ]);
    }
    if !rows.is_empty() {
        out.push_str("GC cost by heap headroom h (free memory / live heap); median (min–max) of fresh processes\n");
        out.push_str(&table::render(
            &[
                "runtime mode",
                "h",
                "GC CPU %",
                "cycles",
                "max pause us",
                "peak RSS MB",
                "wall s",
                "slowdown %",
            ],
            &rows,
        ));
        out.push('\n');
        for (rt, mode, t) in headroom_targets(o) {
            match t {
                Some((h, s)) => out.push_str(&format!(
                    "{rt} ({mode}): the smallest h keeping GC under {}% here is {h} ({s:.1}%; the paper's rule of thumb: 2-3x)\n",
                    plan::TARGET_SHARE
                )),
                None => out.push_str(&format!(
                    "{rt} ({mode}): no headroom tested keeps GC under {}% here; try larger h\n",
                    plan::TARGET_SHARE
                )),
            }
        }
    }
    out
}

/// Each model beside the measured shares: the paper's and ours, and their verdicts.
fn render_models(o: &Outcome) -> String {
    let mut out = String::new();
    for m in o.models.iter().filter(|m| m.name != tax::CROSS_CHECK_MODEL) {
        let rows: Vec<Vec<String>> = m
            .points
            .iter()
            .map(|p| {
                let spread = o
                    .results
                    .iter()
                    .find(|r| r.metric == "gc_cpu_share" && r.case == p.case)
                    .map_or(format!("{:.1}", p.measured), |r| r.summary.show(1));
                vec![
                    headroom_text(&p.case),
                    format!("{:.1}", p.predicted),
                    spread,
                ]
            })
            .collect();
        let predicted = if m.name.starts_with("Biscuit") {
            "paper GC %"
        } else {
            "model GC %"
        };
        out.push_str(&format!("\n{}\n", m.name));
        out.push_str(&table::render(&["h", predicted, "measured GC %"], &rows));
        out.push('\n');
        for v in &m.verdict {
            out.push_str(&format!("  {v}\n"));
        }
    }
    out
}

/// The A/B and A/A taxes, each a ratio from one run, and what the A/A noise resolves.
fn render_taxes(o: &Outcome) -> String {
    let mut out = String::new();
    let taxes: Vec<Vec<String>> = o
        .results
        .iter()
        .filter(|r| r.metric == "overhead")
        .map(|r| {
            let kind = r.key("kind");
            let method = r.key("method");
            let compares = tax::parse_kinds(&kind)
                .ok()
                .and_then(|k| k.first().copied());
            let workload = r.key("workload");
            let what = match (method.as_str(), compares) {
                // The attribution's cross-check: the workload's user CPU per operation.
                ("ab", _) if !workload.is_empty() => {
                    format!("{workload} workload's user CPU per op: saved by the -gcflags=-B build")
                }
                ("aa", _) if !workload.is_empty() => format!(
                    "{workload} workload's user CPU per op: saved by the layout-shifted twin"
                ),
                ("aa", Some(tax::Kind::Bounds)) => {
                    "layout-shifted twin / plain build (same source)".to_string()
                }
                ("aa", Some(_)) => "second copy / first copy of the checked caller".to_string(),
                (_, k) => k.map_or(String::new(), |k| k.compares().to_string()),
            };
            vec![
                if method.is_empty() {
                    "ab".to_string()
                } else {
                    method
                },
                kind,
                what,
                r.summary.show(1),
                r.summary.n.to_string(),
            ]
        })
        .collect();
    if !taxes.is_empty() {
        out.push_str("\nA/B cross-check (two builds or variants) beside A/A (the same code moved): ratio from one run, median (min–max)\n");
        out.push_str(&table::render(
            &["method", "tax", "ratio of", "overhead %", "n"],
            &taxes,
        ));
        out.push('\n');
        for line in tax::resolution(o) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

fn render_attribution(o: &Outcome) -> String {
    let pooled = attribution_pooled(o);
    if pooled.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = pooled
        .iter()
        .map(|p| {
            let per = o
                .results
                .iter()
                .find(|r| {
                    r.metric == "cpu_share"
                        && r.key("method") == "attribution"
                        && r.key("workload") == p.workload
                        && r.key("kind") == p.kind
                        && r.key("of").is_empty()
                })
                .map_or("—".to_string(), |r| r.summary.show(2));
            vec![
                p.workload.clone(),
                p.kind.clone(),
                format!("{:.2}", p.share),
                format!("{:.2}–{:.2}", p.interval.0, p.interval.1),
                p.user_share.map_or("—".to_string(), |u| format!("{u:.2}")),
                format!("{} / {}", p.samples, p.total),
                per,
            ]
        })
        .collect();
    let mut out = String::from(
        "\nThe tax by attribution (as Biscuit measured it): CPU profile samples classified by the instruction they hit; a check that folds in a load is not charged the load's miss (memory)\n",
    );
    out.push_str(&table::render(
        &[
            "workload",
            "kind",
            "% of all CPU",
            "95% interval",
            "% of user CPU",
            "samples",
            "per process %",
        ],
        &rows,
    ));
    out.push_str("\n  Biscuit (its kernel, 2018): GC about 3%, prologues the largest item, write barriers very little, safety checks 2-3%\n");
    if let Some(m) = o.models.iter().find(|m| m.name == tax::CROSS_CHECK_MODEL) {
        out.push_str(&format!("\n{}\n", m.name));
        for v in &m.verdict {
            out.push_str(&format!("  {v}\n"));
        }
    }
    out
}

/// A case's headroom as typed on the command line: 0.5, 1, 2.
fn headroom_text(case: &costlab_history::report::Case) -> String {
    case.get("headroom")
        .and_then(|v| v.as_f64())
        .map_or(String::new(), |h| format!("{h}"))
}
