//! The numa lab's terminal rendering (the matrices, the placements, the model, the counters)
//! and its headlines (the worst remote latency, the best placement).

use costlab_core::measure::counters::Readings;
use costlab_history::report::Outcome;
use costlab_lab::Headline;

/// The terminal rendering: the matrices, the placements, the model. Empty when nothing was
/// measured (one node: the note says why).
pub fn render(outcome: &Outcome) -> String {
    if outcome.results.is_empty() {
        return String::new();
    }
    let mut text = String::new();
    for (metric, unit, title) in [
        (
            "latency",
            "ns",
            "latency, thread on node (row) -> memory on node (column)",
        ),
        (
            "bandwidth",
            "GB/s",
            "bandwidth, threads on node (row) -> memory on node (column)",
        ),
    ] {
        let rows: Vec<_> = outcome
            .results
            .iter()
            .filter(|r| {
                r.metric == metric && r.key("policy") == "bind" && r.key("cpu_node") != "all"
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut cpu_nodes: Vec<String> = rows.iter().map(|r| r.key("cpu_node")).collect();
        cpu_nodes.dedup();
        let mut mem_nodes: Vec<String> = rows.iter().map(|r| r.key("mem_node")).collect();
        mem_nodes.sort_by_key(|s| s.parse::<usize>().unwrap_or(usize::MAX));
        mem_nodes.dedup();
        let mut headers = vec![unit.to_string()];
        headers.extend(mem_nodes.iter().map(|m| format!("mem {m}")));
        let table: Vec<Vec<String>> = cpu_nodes
            .iter()
            .map(|c| {
                let threads = rows
                    .iter()
                    .find(|r| &r.key("cpu_node") == c)
                    .map(|r| r.key("threads"))
                    .unwrap_or_default();
                let mut row = vec![format!("cpu {c} ({threads} thr)")];
                for m in &mem_nodes {
                    row.push(
                        rows.iter()
                            .find(|r| &r.key("cpu_node") == c && &r.key("mem_node") == m)
                            .map_or("—".to_string(), |r| r.summary.show(1)),
                    );
                }
                row
            })
            .collect();
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        text += &format!(
            "{title}\n{}\n",
            costlab_history::report::table::render(&h, &table)
        );
    }
    let placements: Vec<Vec<String>> = outcome
        .results
        .iter()
        .filter(|r| r.key("cpu_node") == "all")
        .map(|r| {
            vec![
                r.key("policy"),
                r.key("mem_node"),
                r.key("threads"),
                r.summary.show(2),
            ]
        })
        .collect();
    if !placements.is_empty() {
        text += &format!(
            "multi-threaded read bandwidth by placement\n{}\n",
            costlab_history::report::table::render(
                &["policy", "memory on", "threads", "GB/s"],
                &placements
            )
        );
    }
    for m in &outcome.models {
        text += &format!("model: {}\n", m.name);
        for v in &m.verdict {
            text += &format!("  {v}\n");
        }
    }
    for r in &outcome.results {
        if let Some(c) = &r.counters {
            let readings = Readings {
                counters: c.clone(),
                unsupported: r.unsupported_counters.clone().unwrap_or_default(),
            };
            text += &format!(
                "counters [{}]: {}\n",
                r.figure_id(),
                readings.summary_line()
            );
        }
    }
    text
}

/// The worst remote latency against local, and the best of the three placements.
pub fn headlines(outcome: &Outcome) -> Vec<Headline> {
    let mut out = Vec::new();
    let lat: Vec<_> = outcome
        .results
        .iter()
        .filter(|r| r.metric == "latency")
        .collect();
    let local = |i: &str| {
        lat.iter()
            .find(|r| r.key("cpu_node") == i && r.key("mem_node") == i)
            .copied()
    };
    if let Some(worst) = lat
        .iter()
        .filter(|r| r.key("cpu_node") != r.key("mem_node"))
        .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
    {
        if let Some(local_row) = local(&worst.key("cpu_node")) {
            let l = local_row.summary;
            out.push(
                Headline {
                    label: format!(
                        "remote DRAM latency (node {} -> node {})",
                        worst.key("cpu_node"),
                        worst.key("mem_node")
                    ),
                    summary: worst.summary,
                    unit: "ns".to_string(),
                    reading: format!(
                        "remote memory costs {:.2}x local here ({:.0} ns vs {:.0} ns)",
                        worst.summary.median / l.median,
                        worst.summary.median,
                        l.median
                    ),
                    ..Default::default()
                }
                // The ratio in the reading is remote over local: both are inputs.
                .judged_by(&[worst, local_row]),
            );
        }
    }
    let placed = |p: &str| {
        outcome
            .results
            .iter()
            .find(|r| r.key("cpu_node") == "all" && r.key("policy") == p)
    };
    if let (Some(bind), Some(inter), Some(ft)) =
        (placed("bind"), placed("interleave"), placed("first-touch"))
    {
        let best = [bind, inter, ft]
            .into_iter()
            .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
            .unwrap_or(bind);
        out.push(
            Headline {
                label: format!(
                    "read bandwidth, {} threads, best placement",
                    best.key("threads")
                ),
                summary: best.summary,
                unit: "GB/s".to_string(),
                reading: format!(
                    "{} wins: bind {:.1}, interleave {:.1}, first-touch by one thread {:.1} GB/s",
                    best.key("policy"),
                    bind.summary.median,
                    inter.summary.median,
                    ft.summary.median
                ),
                ..Default::default()
            }
            // "wins" compares the three placements: each is an input.
            .judged_by(&[bind, inter, ft]),
        );
    }
    out
}
