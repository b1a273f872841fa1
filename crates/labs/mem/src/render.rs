//! Rendering: the bandwidth table pivoted by page kind, the scaling table, the latency curve
//! and its levels.

use serde_json::Value;

use costlab_core::measure::sizes::{format_size, human_size};
use costlab_core::measure::Summary;
use costlab_history::report::{table, Outcome, ResultRow};

use super::bandwidth::{asked_block_of, scaling_curves, threads_of, versus_libc};
use super::block_of;
use super::latency::curve_rows;
use super::loaded;
use super::plateaus::Level;

fn fmt_summary(s: &Summary, prec: usize) -> String {
    format!("{:.p$} ±{:.p$}", s.median, s.mad, p = prec)
}

/// The outcome as tables: bandwidth pivoted by page kind, the latency curve, its levels.
pub fn render(out: &Outcome) -> String {
    let mut text = if out.results.iter().any(|r| r.key("op") == "loaded") {
        let mut rest = out.clone();
        rest.results.retain(|r| r.key("op") != "loaded");
        render_tables(&rest) + &loaded::render(out)
    } else {
        render_tables(out)
    };
    text += &super::stride::render(out);
    for m in &out.models {
        text += &costlab_history::report::table::render_model(m);
    }
    text
}

/// The figures' tables: bandwidth, then the latency curve.
fn render_tables(out: &Outcome) -> String {
    let mut text = String::new();
    let bw: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.metric == "bandwidth")
        .collect();
    if !bw.is_empty() {
        text += &render_bandwidth(&bw);
        text += "\n";
    }
    let has_curve = out
        .results
        .iter()
        .any(|r| r.metric == "latency" && !r.case.contains_key("level"));
    if has_curve {
        text += &render_latency(out);
    }
    text
}

fn ordered_kinds<'a>(rows: impl Iterator<Item = &'a ResultRow>) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for r in rows {
        let k = r.key("pages");
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds
}

fn render_bandwidth(rows: &[&ResultRow]) -> String {
    let kinds = ordered_kinds(rows.iter().copied());
    let mut keys: Vec<(String, String, u64, String)> = Vec::new();
    for r in rows {
        let k = (r.key("op"), r.key("pattern"), block_of(r), r.key("threads"));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let all: Vec<ResultRow> = rows.iter().map(|r| (*r).clone()).collect();
    let mut headers: Vec<String> = vec![
        "threads".into(),
        "block".into(),
        "pattern".into(),
        "op".into(),
        "kernel".into(),
    ];
    headers.extend(kinds.iter().map(|k| format!("{k} GB/s")));
    let ratios: Vec<&String> = if kinds.iter().any(|k| k == "4k") {
        kinds.iter().filter(|k| *k != "4k").collect()
    } else {
        Vec::new()
    };
    headers.extend(ratios.iter().map(|k| format!("{k}/4k")));
    headers.push(format!(
        "vs libc ({})",
        kinds.first().map_or("", String::as_str)
    ));
    let mut table_rows = Vec::new();
    for (op, pattern, block, threads) in &keys {
        let find = |kind: &str| {
            rows.iter().find(|r| {
                r.key("op") == *op
                    && r.key("pattern") == *pattern
                    && block_of(r) == *block
                    && r.key("threads") == *threads
                    && r.key("pages") == kind
            })
        };
        let kernel = kinds
            .iter()
            .find_map(|k| find(k))
            .map_or("—".to_string(), |r| kernel_label(r));
        let mut cells = vec![
            threads.clone(),
            format_size(*block),
            pattern.clone(),
            op.clone(),
            kernel,
        ];
        for k in &kinds {
            cells.push(find(k).map_or("—".into(), |r| {
                format!(
                    "{}{}",
                    fmt_summary(&r.summary, 2),
                    costlab_history::report::verdict::mark(r)
                )
            }));
        }
        for k in &ratios {
            cells.push(match (find("4k"), find(k)) {
                (Some(a), Some(b)) if a.summary.median > 0.0 => {
                    format!("{:.2}x", b.summary.median / a.summary.median)
                }
                _ => "—".into(),
            });
        }
        cells.push(
            kinds
                .first()
                .and_then(|k| find(k))
                .and_then(|r| versus_libc(&all, r))
                .unwrap_or_else(|| "—".into()),
        );
        table_rows.push(cells);
    }
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut text = format!(
        "memory bandwidth (median ±MAD over samples; GB/s = 10^9 bytes/s)\n{}\n",
        table::render(&h, &table_rows)
    );
    text += &render_scaling(rows);
    text
}

/// "AVX2 streaming": the ISA and store kind behind a figure.
fn kernel_label(r: &ResultRow) -> String {
    match (r.key("isa").as_str(), r.key("store").as_str()) {
        ("", _) => "—".into(),
        ("libc", _) => "libc".into(),
        (isa, "none") => isa.to_string(),
        (isa, store) => format!("{isa} {store}"),
    }
}

/// Bandwidth by thread count, one row per op: where it stops growing shows.
fn render_scaling(rows: &[&ResultRow]) -> String {
    let curves = scaling_curves(rows);
    if curves.is_empty() {
        return String::new();
    }
    let row_of = |name: &str, t: usize| {
        rows.iter()
            .find(|r| {
                threads_of(r) == t
                    && r.key("shared") != "true"
                    && format!(
                        "{} {} {} {}",
                        r.key("op"),
                        r.key("pattern"),
                        format_size(asked_block_of(r)),
                        r.key("pages")
                    ) == name
            })
            .copied()
    };
    let mad_pct =
        |r: Option<&ResultRow>| r.map(|r| r.summary.mad / r.summary.median.max(1e-9) * 100.0);
    let mut table_rows = Vec::new();
    for (name, c) in &curves {
        let (t0, b0) = c[0];
        for &(t, b) in c {
            let r = row_of(name, t);
            table_rows.push(vec![
                name.clone(),
                t.to_string(),
                // The figure's mark, as in the bandwidth grid.
                format!(
                    "{b:.2}{}",
                    r.map_or("", costlab_history::report::verdict::mark)
                ),
                mad_pct(r).map_or("—".into(), |m| format!("{m:.1}%")),
                format!("{:.2}x", b / b0.max(1e-9)),
                format!("{:.2}x", t as f64 / t0 as f64),
                format!("{:.2}", b / t as f64),
            ]);
        }
    }
    let text = format!(
        "\nscaling with threads (median GB/s; MAD as % of median)\n{}\n",
        table::render(
            &[
                "op pattern block pages",
                "threads",
                "GB/s",
                "MAD",
                "x first",
                "x threads",
                "GB/s per thread",
            ],
            &table_rows,
        )
    );
    // The readings under the table are in the notes (scaling_readings).
    text
}

fn render_latency(out: &Outcome) -> String {
    let kinds = ordered_kinds(
        out.results
            .iter()
            .filter(|r| r.metric == "latency" && !r.case.contains_key("level")),
    );
    let mut sizes: Vec<u64> = Vec::new();
    for k in &kinds {
        for r in curve_rows(out, k) {
            if !sizes.contains(&block_of(r)) {
                sizes.push(block_of(r));
            }
        }
    }
    sizes.sort_unstable();
    let mut headers = vec!["size".to_string()];
    headers.extend(kinds.iter().map(|k| format!("{k} ns")));
    let rows: Vec<Vec<String>> = sizes
        .iter()
        .map(|&s| {
            let mut cells = vec![format_size(s)];
            for k in &kinds {
                cells.push(
                    curve_rows(out, k)
                        .into_iter()
                        .find(|r| block_of(r) == s)
                        .map_or("—".into(), |r| {
                            format!(
                                "{}{}",
                                fmt_summary(&r.summary, 1),
                                costlab_history::report::verdict::mark(r)
                            )
                        }),
                );
            }
            cells
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut text = format!(
        "latency of dependent loads over one random cycle (median ±MAD, ns per load)\n{}\n",
        table::render(&h, &rows)
    );
    let levels: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.case.contains_key("level"))
        .collect();
    if !levels.is_empty() {
        let mut headers = vec!["level".to_string(), "cache (machine)".to_string()];
        headers.extend(kinds.iter().map(|k| format!("{k} ns")));
        headers.push("plateau (4k)".into());
        let mut rows = Vec::new();
        for level in Level::ALL {
            let of = |k: &str| {
                levels
                    .iter()
                    .find(|r| r.key("level") == level.name() && r.key("pages") == k)
            };
            if kinds.iter().all(|k| of(k).is_none()) {
                continue;
            }
            let any = kinds.iter().find_map(|k| of(k));
            let cache = any
                .and_then(|r| r.case.get("cache").and_then(Value::as_u64))
                .map_or("—".to_string(), human_size);
            let mut cells = vec![level.name().to_string(), cache];
            for k in &kinds {
                // The mark goes with the figure, as in the curve's grid above.
                cells.push(of(k).map_or("—".into(), |r| {
                    format!(
                        "{}{} @{}",
                        fmt_summary(&r.summary, 1),
                        costlab_history::report::verdict::mark(r),
                        format_size(block_of(r))
                    )
                }));
            }
            cells.push(of("4k").map_or("—".into(), |r| {
                let g = |key: &str| {
                    r.case
                        .get(key)
                        .and_then(Value::as_u64)
                        .map_or("?".into(), format_size)
                };
                format!("{}–{}", g("plateau_from"), g("plateau_to"))
            }));
            rows.push(cells);
        }
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        text += &format!(
            "\nlevels read off the curve's plateaus\n{}\n",
            table::render(&h, &rows)
        );
    }
    if let Some(t) = out.results.iter().find(|r| r.metric == "tlb_cost") {
        text += &format!(
            "\nTLB cost per access at {}: {}\n",
            human_size(block_of(t)),
            costlab_core::measure::quality::quote_row(
                format!(
                    "{} ns{} (4k minus {})",
                    fmt_summary(&t.summary, 1),
                    costlab_history::report::verdict::mark(t),
                    t.key("versus")
                ),
                t
            )
        );
    }
    text
}
