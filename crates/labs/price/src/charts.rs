//! The price lab's chart in the HTML report: one stacked bar per priced command of where its
//! CPU time went: user time, each priced kernel class, and the kernel work no term prices.

use std::fmt::Write;

use costlab_core::measure::units::human_ns;
use costlab_history::report::charts::plot::PALETTE;
use costlab_history::report::charts::{esc, Chart};
use costlab_history::report::{Doc, ResultRow};

use super::LAB;

/// One piece of the bar: its name and its time, ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub name: String,
    pub ns: f64,
}

/// The pieces of one command's CPU time: user time, the priced kernel time by class (largest
/// first), the system time no term prices (only when the price is below it).
pub fn pieces(doc: &Doc, command: &str) -> Vec<Piece> {
    let here =
        |r: &&ResultRow| r.lab == LAB && r.key("command") == command && !r.case.contains_key("on");
    let program = |metric: &str| {
        doc.results
            .iter()
            .filter(here)
            .find(|r| r.key("class") == "program" && r.metric == metric)
            .map(|r| r.summary.median)
    };
    let mut v = Vec::new();
    if let Some(u) = program("user_time") {
        v.push(Piece {
            name: "user time".into(),
            ns: u,
        });
    }
    let mut classes: Vec<Piece> = Vec::new();
    for r in doc
        .results
        .iter()
        .filter(here)
        .filter(|r| r.metric == "priced" && r.key("class") != "program")
    {
        let class = r.key("class");
        match classes.iter_mut().find(|p| p.name == class) {
            Some(p) => p.ns += r.summary.median,
            None => classes.push(Piece {
                name: class,
                ns: r.summary.median,
            }),
        }
    }
    classes.sort_by(|a, b| b.ns.total_cmp(&a.ns));
    let priced: f64 = classes.iter().map(|p| p.ns).sum();
    v.extend(classes.into_iter().map(|p| Piece {
        name: format!("kernel: {}", p.name),
        ns: p.ns,
    }));
    if let Some(sys) = program("sys_time") {
        if sys > priced {
            v.push(Piece {
                name: "kernel work no term prices".into(),
                ns: sys - priced,
            });
        }
    }
    v.retain(|p| p.ns > 0.0);
    v
}

/// The commands priced in `doc`, in the order first seen.
fn commands(doc: &Doc) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in doc.results.iter().filter(|r| r.lab == LAB) {
        let c = r.key("command");
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// One chart per priced command (measured beside priced where the split ran, else the
/// untraced CPU bar); none when the run priced nothing (price is never part of
/// `costlab run`, so its absence is not worth a line).
pub fn charts(doc: &Doc) -> Vec<Chart> {
    let mut out = Vec::new();
    for (i, c) in commands(doc).iter().enumerate() {
        let suffix = if i == 0 {
            String::new()
        } else {
            format!("-{i}")
        };
        // Where the run measured the split, priced beside measured on its total; else the
        // untraced runs' CPU time: one total per chart, never both.
        match crate::measured::chart::chart(doc, &format!("chart-price-measured{suffix}"), c) {
            Some(measured) => out.push(measured),
            None => out.push(chart(
                &format!("chart-price-cpu{suffix}"),
                c,
                &pieces(doc, c),
            )),
        }
    }
    out
}

fn chart(id: &str, command: &str, pieces: &[Piece]) -> Chart {
    let title = format!("Where {command}'s CPU time went");
    let total: f64 = pieces.iter().map(|p| p.ns).sum();
    if pieces.is_empty() || total <= 0.0 {
        return Chart::skipped(id, &title, "no CPU time was measured for it");
    }
    let (w, left, right, top, bar_h) = (720.0, 20.0, 700.0, 40.0, 44.0);
    let rows = pieces.len().div_ceil(2);
    let h = top + bar_h + 40.0 + 20.0 * rows as f64 + 10.0;
    let mut s = format!(
        r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" role="img" aria-label="{}">"#,
        esc(&title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="22" font-size="14" font-weight="bold">{}</text>"#,
        esc(&title)
    );
    let scale = (right - left) / total;
    let mut x = left;
    for (i, p) in pieces.iter().enumerate() {
        let pw = p.ns * scale;
        let color = color_of(&p.name, i);
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{top}" width="{pw:.1}" height="{bar_h}" fill="{color}" stroke="white" stroke-width="1"><title>{}: {}</title></rect>"#,
            esc(&p.name),
            human_ns(p.ns)
        );
        x += pw;
    }
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{top}" width="{:.1}" height="{bar_h}" fill="none" stroke="#757575"/>"##,
        right - left
    );
    // The axis: 0 and the whole CPU time, in its unit.
    let axis_y = top + bar_h + 14.0;
    let _ = write!(
        s,
        r#"<text x="{left}" y="{axis_y}" font-size="11">0</text><text x="{right}" y="{axis_y}" font-size="11" text-anchor="end">{} of CPU time (user + system)</text>"#,
        esc(&human_ns(total))
    );
    for (i, p) in pieces.iter().enumerate() {
        let (col, row) = (i % 2, i / 2);
        let lx = left + col as f64 * 340.0;
        let ly = top + bar_h + 36.0 + row as f64 * 20.0;
        let _ = write!(
            s,
            r#"<rect x="{lx}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{ly:.1}" font-size="12">{} — {} ({:.1}%)</text>"#,
            ly - 10.0,
            color_of(&p.name, i),
            lx + 18.0,
            esc(&p.name),
            esc(&human_ns(p.ns)),
            100.0 * p.ns / total
        );
    }
    s.push_str("</svg>");
    Chart::svg(
        id,
        &title,
        s,
        "One bar of the program's CPU time (median of its times): its user time, the kernel time each class of counted events is priced at, and the rest of its system time, which no term prices.",
    )
}

/// User time grey, the unpriced kernel work hatched-looking light grey, the classes the palette.
fn color_of(name: &str, i: usize) -> &'static str {
    match name {
        "user time" => "#9e9e9e",
        "kernel work no term prices" => "#e0e0e0",
        _ => PALETTE[i % PALETTE.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_history::report::{Outcome, RunInfo};

    fn row(class: &str, metric: &str, v: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            costlab_core::case! {"class" => class, "event" => "e", "command" => "x"},
            metric,
            "ns",
            vec![v],
        )
        .unwrap()
    }

    #[test]
    fn the_bar_is_user_time_each_class_and_the_rest_of_the_system_time() {
        let o = Outcome {
            results: vec![
                row("program", "user_time", 100.0),
                row("program", "sys_time", 50.0),
                row("syscall", "priced", 20.0),
                row("fault", "priced", 10.0),
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
        let doc = Doc::new(run, serde_json::Value::Null, o);
        let p = pieces(&doc, "x");
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "user time",
                "kernel: syscall",
                "kernel: fault",
                "kernel work no term prices"
            ]
        );
        assert_eq!(p[3].ns, 20.0);
        let c = charts(&doc);
        assert_eq!(c.len(), 1);
        assert!(c[0]
            .svg
            .as_ref()
            .unwrap()
            .contains("id=\"chart-price-cpu\""));
    }
}
