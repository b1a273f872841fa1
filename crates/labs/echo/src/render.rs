//! The echo lab's text: the result tables, the ablation, the paired ratios they quote, and the
//! one-line reading of a figure.

use super::*;

pub fn render_load(o: &Outcome) -> String {
    let rows: Vec<Vec<String>> = o
        .results
        .iter()
        .map(|r| {
            vec![
                r.metric.clone(),
                format!("{:.1}", r.summary.median),
                r.unit.clone(),
            ]
        })
        .collect();
    table::render(&["metric", "value", "unit"], &rows) + "\n"
}

/// The samples of `metric` at one point for `engine` (its first row: the plan's own uring
/// features come before the ablated ones). `size` None: the first size that has the point.
pub(super) fn point_samples(
    o: &Outcome,
    metric: &str,
    engine: &str,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Option<Vec<f64>> {
    let mut want = case! {"engine" => engine, "client" => client, "conns" => conns};
    if let Some(b) = size {
        want.insert("size".into(), b.into());
    }
    o.find(metric, &want).map(|r| r.samples.clone())
}

/// Paired throughput ratios a/b at one (client, conns, size), one per repetition.
pub fn throughput_ratios(
    o: &Outcome,
    a: Engine,
    b: Engine,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Vec<f64> {
    engine_ratios(o, "throughput", a, b, client, conns, size)
}

/// Paired server-CPU ratios b/a (ns per request of b over a's: above 1, a is the cheaper).
pub fn cpu_ratios(
    o: &Outcome,
    a: Engine,
    b: Engine,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Vec<f64> {
    engine_ratios(o, "server_cpu_per_req", b, a, client, conns, size)
}

/// Paired ratios num/den of one metric at one (client, conns, size), one per repetition.
fn engine_ratios(
    o: &Outcome,
    metric: &str,
    num: Engine,
    den: Engine,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Vec<f64> {
    let find = |e: Engine| point_samples(o, metric, e.name(), client, conns, size);
    match (find(num), find(den)) {
        (Some(x), Some(y)) => paired_ratios(&x, &y),
        _ => Vec::new(),
    }
}

/// A loader's throughput over the blocking loader's, against one engine at one point.
pub(super) fn client_ratios(
    o: &Outcome,
    client: &str,
    engine: &str,
    conns: usize,
    size: usize,
) -> Vec<f64> {
    let find = |c: &str| point_samples(o, "throughput", engine, c, conns, Some(size));
    match (find(client), find("blocking")) {
        (Some(x), Some(y)) => paired_ratios(&x, &y),
        _ => Vec::new(),
    }
}

/// "uring", "uring -bundle", "epoll": the server of a row.
pub(super) fn row_label(r: &costlab_history::report::ResultRow) -> String {
    let f = r.key("features");
    if r.key("engine") == "uring" && !f.is_empty() && f != "all" {
        format!("uring {f}")
    } else {
        r.key("engine")
    }
}

pub(super) fn num_key(r: &costlab_history::report::ResultRow, key: &str) -> u64 {
    r.case.get(key).and_then(|v| v.as_u64()).unwrap_or(0)
}

pub fn render(o: &Outcome) -> String {
    let (mut text, keys) = point_table(o);
    text.push_str(&ratio_table(o, keys));
    let ablation = ablation_rows(o);
    if !ablation.is_empty() {
        text.push_str("what each uring technique is worth (uring with all its features against uring with one switched off):\n");
        text.push_str(&table::render(
            &[
                "switched off",
                "client",
                "size",
                "conns",
                "req/s uring÷without",
                "CPU/req without÷uring",
            ],
            &ablation,
        ));
        text.push('\n');
    }
    if let Some(parts) = attribution_table(o) {
        text.push_str("where the server's CPU per request goes, ns (--attribute: perf on one extra run per point):\n");
        text.push_str(&parts);
        text.push('\n');
    }
    for m in o.models.iter().filter(|m| m.lab == LAB) {
        text.push_str(&table::render_model(m));
    }
    text
}

/// One line per point: throughput, latency percentiles, server and loader CPU; and the
/// (client, size, conns) of each point.
fn point_table(o: &Outcome) -> (String, Vec<(String, u64, u64)>) {
    let mut rows = Vec::new();
    let mut keys: Vec<(String, u64, u64)> = Vec::new();
    for r in o.results.iter().filter(|r| r.metric == "throughput") {
        let get = |m: &str| {
            o.find(m, &r.case).map_or("—".to_string(), |x| {
                format!(
                    "{:.1}{}",
                    x.summary.median,
                    costlab_history::report::verdict::mark(x)
                )
            })
        };
        let conns = num_key(r, "conns");
        let size = num_key(r, "size");
        keys.push((r.key("client"), size, conns));
        rows.push(vec![
            row_label(r),
            r.key("client"),
            conns.to_string(),
            sizes::format_size(size),
            format!(
                "{}{}",
                r.summary.show(0),
                costlab_history::report::verdict::mark(r)
            ),
            get("p50"),
            get("p99"),
            get("p999"),
            get("server_cpu_per_req"),
            o.find("batch", &r.case)
                .map_or("—".into(), |x| format!("{:.2}", x.summary.median)),
            o.find("loader_cpu", &r.case)
                .map_or("—".into(), |x| format!("{:.0}", x.summary.median)),
            get("loader_cpu_per_req"),
        ]);
    }
    let mut text = table::render(
        &[
            "engine",
            "client",
            "conns",
            "size",
            "req/s (min–max)",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "server CPU ns/req",
            "batch n",
            "loader CPU %",
            "loader ns/req",
        ],
        &rows,
    );
    text.push('\n');
    (text, keys)
}

/// uring against epoll and against basic uring, and each client against blocking, per
/// (client, size, conns); empty without points.
fn ratio_table(o: &Outcome, mut keys: Vec<(String, u64, u64)>) -> String {
    let mut text = String::new();
    keys.sort();
    keys.dedup();
    let mut ratio_rows = Vec::new();
    for (client, size, conns) in &keys {
        let show = |v: Vec<f64>| Summary::of(&v).map_or("—".to_string(), |s| s.show(2));
        let (conns, size) = (*conns as usize, Some(*size as usize));
        let (u, e, b) = (Engine::Uring, Engine::Epoll, Engine::UringBasic);
        ratio_rows.push(vec![
            client.clone(),
            sizes::format_size(*size.as_ref().unwrap() as u64),
            conns.to_string(),
            show(throughput_ratios(o, u, e, client, conns, size)),
            show(cpu_ratios(o, u, e, client, conns, size)),
            show(throughput_ratios(o, u, b, client, conns, size)),
            show(cpu_ratios(o, u, b, client, conns, size)),
            if client != "blocking" {
                show(client_ratios(o, client, "uring", conns, size.unwrap_or(0)))
            } else {
                "—".into()
            },
        ]);
    }
    if !ratio_rows.is_empty() {
        text.push_str(&table::render(
            &[
                "client",
                "size",
                "conns",
                "req/s uring÷epoll",
                "CPU/req epoll÷uring",
                "req/s uring÷basic",
                "CPU/req basic÷uring",
                "client/blocking (uring)",
            ],
            &ratio_rows,
        ));
        text.push_str(
            "\n(ratios above 1 favour uring: more requests, or less server CPU per request)\n\n",
        );
    }
    text
}

/// The `server_cpu_part` rows as one line per point and one column per part seen, with the
/// parts' sum; None without such rows.
pub(super) fn attribution_table(o: &Outcome) -> Option<String> {
    use super::attribute::Part;
    let rows: Vec<&costlab_history::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.metric == "server_cpu_part")
        .collect();
    if rows.is_empty() {
        return None;
    }
    // Points in the order first seen (engine, client, conns, size), each with its parts.
    type Parts = Vec<(String, f64)>;
    let mut points: Vec<(Vec<String>, Parts)> = Vec::new();
    for r in &rows {
        let label = vec![
            row_label(r),
            r.key("client"),
            num_key(r, "conns").to_string(),
            sizes::format_size(num_key(r, "size")),
        ];
        let part = (r.key("part"), r.summary.median);
        match points.iter_mut().find(|(l, _)| *l == label) {
            Some((_, parts)) => parts.push(part),
            None => points.push((label, vec![part])),
        }
    }
    let shown: Vec<Part> = Part::ALL
        .into_iter()
        .filter(|p| {
            points
                .iter()
                .any(|(_, parts)| parts.iter().any(|(n, v)| n == p.name() && *v >= 0.5))
        })
        .collect();
    let mut header: Vec<&str> = vec!["engine", "client", "conns", "size"];
    header.extend(shown.iter().map(|p| p.name()));
    header.push("total");
    let body: Vec<Vec<String>> = points
        .iter()
        .map(|(label, parts)| {
            let mut line = label.clone();
            for p in &shown {
                let v = parts
                    .iter()
                    .find(|(n, _)| n == p.name())
                    .map_or(0.0, |x| x.1);
                line.push(format!("{v:.0}"));
            }
            line.push(format!("{:.0}", parts.iter().map(|x| x.1).sum::<f64>()));
            line
        })
        .collect();
    let mut text = table::render(&header, &body);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // Where the engines part ways: at each (client, conns, size) with both, uring's parts
    // against epoll's, the largest differences first.
    for (label, uring) in points.iter().filter(|(l, _)| l[0] == "uring") {
        let Some((_, epoll)) = points
            .iter()
            .find(|(l, _)| l[0] == "epoll" && l[1..] == label[1..])
        else {
            continue;
        };
        text.push_str(&format!(
            "  {} client {} conns {}: {}\n",
            label[1],
            label[2],
            label[3],
            part_differences(uring, epoll)
        ));
    }
    Some(text)
}

/// "uring − epoll: recv copy +6379 ns (10895 vs 4516), tcp/ip +4001 ns (...), ...": the three
/// parts that differ most, then the total.
fn part_differences(uring: &[(String, f64)], epoll: &[(String, f64)]) -> String {
    let get = |parts: &[(String, f64)], name: &str| {
        parts.iter().find(|(n, _)| n == name).map_or(0.0, |x| x.1)
    };
    let mut diffs: Vec<(&str, f64, f64)> = uring
        .iter()
        .map(|(n, u)| (n.as_str(), *u, get(epoll, n)))
        .collect();
    diffs.sort_by(|a, b| (b.1 - b.2).abs().total_cmp(&(a.1 - a.2).abs()));
    let top: Vec<String> = diffs
        .iter()
        .take(3)
        .map(|(n, u, e)| format!("{n} {:+.0} ns ({u:.0} vs {e:.0})", u - e))
        .collect();
    let total = |parts: &[(String, f64)]| parts.iter().map(|x| x.1).sum::<f64>();
    format!(
        "uring − epoll: {}; in all {:+.0} ns",
        top.join(", "),
        total(uring) - total(epoll)
    )
}

/// One row per ablated uring point: the full-featured uring over it, paired by repetition.
pub(super) fn ablation_rows(o: &Outcome) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let uring: Vec<&costlab_history::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.metric == "throughput" && r.key("engine") == "uring")
        .collect();
    let show = |v: Vec<f64>| Summary::of(&v).map_or("—".to_string(), |s| s.show(2));
    for r in &uring {
        let (client, conns, size) = (r.key("client"), num_key(r, "conns"), num_key(r, "size"));
        // The plan's own uring is the first uring row at this point.
        let Some(full) = uring.iter().find(|x| {
            x.key("client") == client && num_key(x, "conns") == conns && num_key(x, "size") == size
        }) else {
            continue;
        };
        if std::ptr::eq(*full, *r) {
            continue;
        }
        let cpu = |row: &costlab_history::report::ResultRow| {
            o.find("server_cpu_per_req", &row.case)
                .map(|x| x.samples.clone())
                .unwrap_or_default()
        };
        let off = r.key("features");
        out.push(vec![
            off,
            client,
            sizes::format_size(size),
            conns.to_string(),
            show(paired_ratios(&full.samples, &r.samples)),
            show(paired_ratios(&cpu(r), &cpu(full))),
        ]);
    }
    out
}

/// One line saying what a uring/epoll ratio means, with the batch io_uring reached.
pub fn reading(s: Summary, conns: usize, batch: Option<f64>) -> String {
    let pct = (s.median - 1.0) * 100.0;
    let clear = s.min > 1.0 || s.max < 1.0;
    let at = format!("at {conns} connection{}", if conns == 1 { "" } else { "s" });
    let n = batch.map_or(String::new(), |b| {
        format!(" (io_uring reaped {b:.1} completions per enter)")
    });
    if !clear {
        format!(
            "io_uring and epoll are level {at} here: ratio {:.2}, spread crosses 1{n}",
            s.median
        )
    } else if pct > 0.0 {
        format!("io_uring serves {pct:.0}% more requests than epoll {at}{n}")
    } else {
        format!(
            "io_uring serves {:.0}% fewer requests than epoll {at}{n}: its per-op cost is not repaid by batching",
            -pct
        )
    }
}
