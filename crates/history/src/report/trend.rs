//! `costlab trend` drawn: a sparkline and table per figure for the terminal, and an HTML page
//! (the change points are `analysis::trend`).

use crate::analysis::trend::{Trend, ALPHA};
use crate::report::sheet::figure;
use costlab_core::model::Quality;

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The series as a sparkline, with `|` before each run where a new level starts.
pub fn sparkline(t: &Trend) -> String {
    let x: Vec<f64> = t.runs.iter().map(|p| p.median).collect();
    let lo = x.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut s = String::new();
    for (i, v) in x.iter().enumerate() {
        if t.changes.iter().any(|c| c.run == t.runs[i].run) {
            s.push('|');
        }
        let k = if hi > lo {
            (((v - lo) / (hi - lo)) * 7.0).round() as usize
        } else {
            3
        };
        s.push(BARS[k.min(7)]);
    }
    s
}

pub fn render(trends: &[Trend]) -> String {
    let mut out = String::new();
    for t in trends {
        let lo = t
            .runs
            .iter()
            .map(|p| p.median)
            .fold(f64::INFINITY, f64::min);
        let hi = t
            .runs
            .iter()
            .map(|p| p.median)
            .fold(f64::NEG_INFINITY, f64::max);
        out.push_str(&format!(
            "{} ({}) · machine {} · {} runs\n  {}  {}–{} {}\n",
            t.figure,
            t.unit,
            t.machine,
            t.runs.len(),
            sparkline(t),
            figure(lo),
            figure(hi),
            t.unit
        ));
        if t.changes.is_empty() {
            out.push_str(&format!(
                "  no change (E-divisive means, permutation test, p >= {ALPHA})\n"
            ));
        }
        for c in &t.changes {
            let mark = c.quality.map_or("", Quality::mark);
            out.push_str(&format!(
                "  change at run {} ({}): {}\n",
                c.run,
                c.started,
                costlab_core::measure::quality::quote(
                    format!(
                        "median {} -> {} {} ({:+.1}%){mark}, p={:.3}",
                        figure(c.before),
                        figure(c.after),
                        t.unit,
                        c.change_pct,
                        c.p
                    ),
                    c.quality,
                    &c.quality_reasons
                )
            ));
        }
        // The sparkline has no room for marks: each run whose figure is not ok, one line.
        for p in t.runs.iter().filter(|p| !p.mark().is_empty()) {
            out.push_str(&format!(
                "  {} run {} ({}): {}\n",
                p.mark(),
                p.run,
                p.started,
                costlab_core::measure::quality::quote(
                    format!("{} {}", figure(p.median), t.unit),
                    p.quality,
                    &p.quality_reasons
                )
            ));
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One SVG line chart per trend, the changes as dashed lines, in one page.
pub fn render_html(trends: &[Trend]) -> String {
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>costlab trend</title>\
         <style>body{font-family:system-ui,sans-serif;margin:2em}svg{background:#fafafa}</style>\
         </head><body><h1>Figures across runs</h1>\n",
    );
    for (n, t) in trends.iter().enumerate() {
        let (w, ht, pad) = (720.0, 220.0, 40.0);
        let x: Vec<f64> = t.runs.iter().map(|p| p.median).collect();
        let lo = x.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let span = if hi > lo { hi - lo } else { 1.0 };
        let px = |i: usize| pad + (w - 2.0 * pad) * i as f64 / (x.len().max(2) - 1) as f64;
        let py = |v: f64| ht - pad - (ht - 2.0 * pad) * (v - lo) / span;
        h.push_str(&format!(
            "<h2>{} ({})</h2><p>machine <code>{}</code>, {} runs</p>\
             <svg id=\"trend-{n}\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\">",
            esc(&t.figure),
            esc(&t.unit),
            esc(&t.machine),
            t.runs.len()
        ));
        let pts: Vec<String> = x
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", px(i), py(*v)))
            .collect();
        h.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"#2060c0\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        ));
        for (i, v) in x.iter().enumerate() {
            let p = &t.runs[i];
            h.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#2060c0\"><title>{} {}</title></circle>",
                px(i),
                py(*v),
                esc(&p.run),
                esc(&costlab_core::measure::quality::quote(figure(*v), p.quality, &p.quality_reasons))
            ));
            if !p.mark().is_empty() {
                h.push_str(&format!(
                    "<text class=\"verdict-mark\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"bold\" fill=\"#b00020\">{}</text>",
                    px(i) + 4.0,
                    py(*v) - 4.0,
                    p.mark()
                ));
            }
        }
        for c in &t.changes {
            if let Some(i) = t.runs.iter().position(|p| p.run == c.run) {
                let xx = (px(i - 1) + px(i)) / 2.0;
                h.push_str(&format!(
                    "<line class=\"change\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{pad}\" y2=\"{}\" \
                     stroke=\"#c03020\" stroke-dasharray=\"4 3\"><title>{:+.1}% (p={:.3})</title></line>",
                    ht - pad,
                    c.change_pct,
                    c.p
                ));
            }
        }
        h.push_str(&format!(
            "<text x=\"4\" y=\"{:.1}\" font-size=\"11\">{}</text><text x=\"4\" y=\"{:.1}\" font-size=\"11\">{}</text></svg>",
            py(hi) + 4.0,
            figure(hi),
            py(lo) + 4.0,
            figure(lo)
        ));
        if t.runs.iter().any(|p| !p.mark().is_empty()) {
            h.push_str(&format!(
                "<p class=\"marks\">Marked runs: {}.</p>",
                esc(crate::report::verdict::MARKS_LEGEND)
            ));
        }
        for c in &t.changes {
            h.push_str(&format!(
                "<p>change at run <code>{}</code> ({}): {}</p>",
                esc(&c.run),
                esc(&c.started),
                esc(&costlab_core::measure::quality::quote(
                    format!(
                        "{} → {} {} ({:+.1}%){}, p={:.3}",
                        figure(c.before),
                        figure(c.after),
                        t.unit,
                        c.change_pct,
                        c.quality.map_or("", Quality::mark),
                        c.p
                    ),
                    c.quality,
                    &c.quality_reasons
                ))
            ));
        }
    }
    h.push_str("</body></html>\n");
    h
}
