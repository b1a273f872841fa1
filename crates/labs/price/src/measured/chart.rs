//! The report's chart of a measured price: two bars on one scale, the CPU time measured at
//! the kernel's transitions by class (user, syscalls, faults, interrupts, softirqs, kernel
//! other) and the same time as priced (user as measured, each class at its price, the kernel
//! time no term prices), with each class's priced ÷ measured in the legend.

use std::fmt::Write;

use costlab_core::measure::units::human_ns;
use costlab_history::report::charts::{esc, Chart};
use costlab_history::report::{Doc, ResultRow};

use crate::LAB;

pub const CLASSES: [&str; 6] = ["user", "syscall", "fault", "irq", "softirq", "kernel-other"];
const COLORS: [&str; 6] = [
    "#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
];
const UNPRICED: &str = "#e0e0e0";

/// Per class: (measured ns, priced ns where any line of it is priced).
pub fn by_class(doc: &Doc, command: &str) -> Vec<(&'static str, f64, Option<f64>)> {
    let here =
        |r: &&ResultRow| r.lab == LAB && r.key("command") == command && !r.case.contains_key("on");
    let rows: Vec<&ResultRow> = doc.results.iter().filter(here).collect();
    CLASSES
        .iter()
        .map(|&c| {
            let mut measured = 0.0;
            let mut priced: Option<f64> = None;
            for r in rows
                .iter()
                .filter(|r| r.key("class") == c && r.metric == "cpu_time")
            {
                measured += r.summary.median;
                let ratio = rows.iter().find(|x| {
                    x.metric == "priced_ratio"
                        && x.key("class") == c
                        && x.key("event") == r.key("event")
                });
                if let Some(x) = ratio {
                    *priced.get_or_insert(0.0) += x.summary.median * r.summary.median;
                }
            }
            (c, measured, priced)
        })
        .filter(|(_, m, _)| *m > 0.0)
        .collect()
}

/// The tracer's own cost in the traced run of `command` (the price model's `tracer_ns`), 0
/// where it was not measured.
fn tracer_ns(doc: &Doc, command: &str) -> f64 {
    doc.models
        .iter()
        .find(|m| m.lab == LAB && m.name == format!("price of {command}"))
        .and_then(|m| m.params.get("tracer_ns"))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

/// The chart, or None where the run has no measured split for `command`.
pub fn chart(doc: &Doc, id: &str, command: &str) -> Option<Chart> {
    let classes = by_class(doc, command);
    if classes.is_empty() {
        return None;
    }
    let title = format!("{command}: CPU time measured beside priced");
    let measured: f64 = classes.iter().map(|c| c.1).sum();
    let user = classes.iter().find(|c| c.0 == "user").map_or(0.0, |c| c.1);
    let priced: f64 = classes.iter().filter_map(|c| c.2).sum();
    // The one total: what the split measured less the tracer's own cost (the price model's
    // `tracer_ns`), as the page's table and the text's verdict have it.
    let tracer = tracer_ns(doc, command).clamp(0.0, (measured - user).max(0.0));
    let net = measured - tracer;
    let kernel = net - user;
    let unpriced = (kernel - priced).max(0.0);
    let total = measured.max(user + priced);
    let (w, left, right, label_w) = (760.0, 20.0, 740.0, 90.0);
    let (bar_h, top) = (36.0, 40.0);
    let h = top + 2.0 * (bar_h + 12.0) + 30.0 + 20.0 * classes.len() as f64 + 30.0;
    let mut s = format!(
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" role="img" aria-label="{}">"#,
        esc(&title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="22" font-size="14" font-weight="bold">{}</text>"#,
        esc(&title)
    );
    let x0 = left + label_w;
    let scale = (right - x0) / total.max(1.0);
    let bar = |s: &mut String, y: f64, label: &str, parts: &[(String, f64, &str)]| {
        let _ = write!(
            s,
            r#"<text x="{left}" y="{:.1}" font-size="12">{label}</text>"#,
            y + bar_h / 2.0 + 4.0
        );
        let mut x = x0;
        for (name, ns, color) in parts {
            let pw = ns * scale;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{pw:.1}" height="{bar_h}" fill="{color}" stroke="white" stroke-width="1"><title>{}: {}</title></rect>"#,
                esc(name),
                human_ns(*ns)
            );
            x += pw;
        }
    };
    let color = |c: &str| {
        CLASSES
            .iter()
            .position(|x| *x == c)
            .map_or(UNPRICED, |i| COLORS[i])
    };
    let measured_parts: Vec<(String, f64, &str)> = classes
        .iter()
        .map(|(c, m, _)| (format!("{c} (measured)"), *m, color(c)))
        .collect();
    let mut priced_parts: Vec<(String, f64, &str)> = Vec::new();
    if user > 0.0 {
        priced_parts.push(("user (as measured)".into(), user, color("user")));
    }
    for (c, _, p) in &classes {
        if let Some(p) = p {
            priced_parts.push((format!("{c} (priced)"), *p, color(c)));
        }
    }
    priced_parts.push(("kernel time no term prices".into(), unpriced, UNPRICED));
    bar(&mut s, top, "measured", &measured_parts);
    if tracer > 0.0 {
        // The tracer's own cost is inside the classes: the measured bar's end past the total,
        // faded.
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{bar_h}" fill="#ffffff" fill-opacity="0.7" stroke="#757575" stroke-dasharray="3,2"><title>the tracer's own cost, taken out: {}</title></rect>"##,
            x0 + net * scale,
            tracer * scale,
            human_ns(tracer)
        );
    }
    bar(&mut s, top + bar_h + 12.0, "priced", &priced_parts);
    let axis_y = top + 2.0 * (bar_h + 12.0) + 4.0;
    let _ = write!(
        s,
        r#"<text x="{x0}" y="{axis_y}" font-size="11">0</text><text x="{:.1}" y="{axis_y}" font-size="11" text-anchor="end">{} (the cgroup's CPU time, measured{})</text>"#,
        (x0 + net * scale).max(x0 + 300.0),
        esc(&human_ns(net)),
        if tracer > 0.0 {
            format!(
                ", less the tracer's own {}: the faded end",
                esc(&human_ns(tracer))
            )
        } else {
            String::new()
        }
    );
    for (i, (c, m, p)) in classes.iter().enumerate() {
        let ly = axis_y + 26.0 + 20.0 * i as f64;
        let ratio = p.map_or("not priced".to_string(), |p| {
            format!("priced {} = {:.2}× measured", human_ns(p), p / m)
        });
        let _ = write!(
            s,
            r#"<rect x="{left}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{ly:.1}" font-size="12">{c}: measured {} ({:.1}%), {}</text>"#,
            ly - 10.0,
            color(c),
            left + 18.0,
            esc(&human_ns(*m)),
            100.0 * m / net.max(1.0),
            esc(&ratio)
        );
    }
    s.push_str("</svg>");
    Some(Chart::svg(
        id,
        &title,
        s,
        "Above: the program's CPU time as measured at the kernel's transitions, by class; its faded end is the tracer's own cost, taken out of the total. Below: user time as measured, then each class at its price (count × this machine's unit cost), then the kernel time no term prices. Each class's priced ÷ measured is in the legend.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_history::report::{Outcome, RunInfo};

    fn row(class: &str, event: &str, metric: &str, v: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            costlab_core::case! {"class" => class, "event" => event, "command" => "dd"},
            metric,
            "ns",
            vec![v],
        )
        .unwrap()
    }

    #[test]
    fn two_bars_by_class_with_the_ratio_in_the_legend() {
        let o = Outcome {
            results: vec![
                row("user", "user", "cpu_time", 600.0),
                row("syscall", "read", "cpu_time", 300.0),
                row("syscall", "read", "priced_ratio", 0.5),
                row("syscall", "exit_group", "cpu_time", 100.0),
                row("irq", "local_timer", "cpu_time", 50.0),
            ],
            ..Default::default()
        };
        let run = RunInfo {
            id: "t".into(),
            started: String::new(),
            costlab: String::new(),
            command: String::new(),
            complete: true,
        };
        let mut doc = Doc::new(run, serde_json::Value::Null, o);
        let mut params = serde_json::Map::new();
        params.insert("tracer_ns".into(), serde_json::json!(50.0));
        doc.models.push(costlab_history::report::Model {
            lab: LAB.into(),
            name: "price of dd".into(),
            params,
            points: Vec::new(),
            verdict: Vec::new(),
        });
        let c = by_class(&doc, "dd");
        assert_eq!(
            c,
            vec![
                ("user", 600.0, None),
                ("syscall", 400.0, Some(150.0)),
                ("irq", 50.0, None)
            ]
        );
        let svg = chart(&doc, "chart-price-measured", "dd")
            .unwrap()
            .svg
            .unwrap();
        assert!(svg.contains("id=\"chart-price-measured\""));
        assert!(svg.contains("0.38× measured"), "{svg}");
        assert!(svg.contains("kernel time no term prices"));
        // One total: 1050 ns measured less the tracer's 50.
        assert!(
            svg.contains("1.00 us (the cgroup's CPU time, measured, less the tracer's own 50.0 ns"),
            "{svg}"
        );
        assert!(chart(&doc, "x", "other command").is_none());
    }
}
