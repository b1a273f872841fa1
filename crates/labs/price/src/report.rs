//! The HTML report of a price (`Lab::lead`): the same story as the text, read back from the
//! stored run. It leads with the program (its command, how it ended, its wall and CPU time),
//! then where its time went on one total (the split's kernel time net of the tracer's own
//! cost: user, the kernel by class, the waits beside), each line's priced ÷ measured, the heavy
//! lines outside 0.67-1.5x with their evidence (`measured::beside::evidence`, stored as the
//! model's `outside`), and each what-if with its prediction, measured saving, interval and
//! verdict.

use std::fmt::Write;

use serde_json::Value;

use costlab_core::measure::units::human_ns;
use costlab_history::report::charts::esc;
use costlab_history::report::html::{Lead, Section};
use costlab_history::report::{Doc, Model, ResultRow};

use crate::measured::beside::{BAND, HEAVY_SHARE};
use crate::measured::chart::CLASSES;
use crate::LAB;

/// The lines shown in the table of lines; the rest are summed in one row.
const TOP_LINES: usize = 15;

/// The page's lead for a run of price, or None where the run priced nothing.
pub fn lead(doc: &Doc) -> Option<Lead> {
    let model = doc
        .models
        .iter()
        .find(|m| m.lab == LAB && m.name.starts_with("price of "))?;
    let cmd = model.name.trim_start_matches("price of ").to_string();
    let run = Run {
        rows: doc
            .results
            .iter()
            .filter(|r| r.lab == LAB && r.key("command") == cmd && !r.case.contains_key("on"))
            .collect(),
        model,
        tried: doc
            .models
            .iter()
            .find(|m| m.lab == LAB && m.name.starts_with("what-ifs tried on ")),
    };
    let mut sections = vec![run.program(&cmd), run.where_it_went()];
    sections.extend(run.what_ifs());
    Some(Lead {
        lab: LAB.into(),
        title: format!("What {cmd} costs here"),
        sections,
    })
}

/// One priced command's rows and models.
struct Run<'a> {
    rows: Vec<&'a ResultRow>,
    model: &'a Model,
    tried: Option<&'a Model>,
}

impl Run<'_> {
    fn get(&self, class: &str, event: &str, metric: &str) -> Option<&ResultRow> {
        self.rows
            .iter()
            .find(|r| r.key("class") == class && r.key("event") == event && r.metric == metric)
            .copied()
    }

    fn program_figure(&self, metric: &str) -> Option<f64> {
        self.get("program", "total", metric)
            .map(|r| r.summary.median)
    }

    fn param(&self, name: &str) -> Option<f64> {
        self.model.params.get(name).and_then(Value::as_f64)
    }

    /// The measured lines (class, event, on-CPU ns), most first.
    fn lines(&self) -> Vec<(String, String, f64)> {
        let mut v: Vec<(String, String, f64)> = self
            .rows
            .iter()
            .filter(|r| r.metric == "cpu_time" && r.key("class") != "program")
            .map(|r| (r.key("class"), r.key("event"), r.summary.median))
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2));
        v
    }

    /// The program: its command, how it ended, its wall time and its CPU time on the one
    /// total the rest of the page uses.
    fn program(&self, cmd: &str) -> Section {
        let mut h = String::from("<table id=\"program-figures\">");
        let mut row = |k: &str, v: String| {
            let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
        };
        row("command", cmd.to_string());
        row(
            "how it ended",
            self.model
                .params
                .get("ended")
                .and_then(Value::as_str)
                .unwrap_or("not recorded (a price of saved counts or of a running process)")
                .to_string(),
        );
        if let Some(w) = self.get("program", "total", "wall_time") {
            row(
                "wall time",
                format!(
                    "{} (median of {} untraced runs)",
                    human_ns(w.summary.median),
                    w.summary.n
                ),
            );
        }
        let user: f64 = self
            .lines()
            .iter()
            .filter(|l| l.0 == "user")
            .map(|l| l.2)
            .sum();
        match self.param("kernel_ns") {
            Some(kernel) => {
                let tracer = self.param("tracer_ns").unwrap_or(0.0);
                row(
                    "CPU time",
                    format!(
                        "{} in the traced run, the tracer's own {} taken out",
                        human_ns(user + kernel),
                        human_ns(tracer)
                    ),
                );
                row(
                    "of it in the kernel",
                    format!(
                        "{} (the measured split's, net of the tracer's cost: the one kernel total of this page)",
                        human_ns(kernel)
                    ),
                );
            }
            _ => {
                let user = self.program_figure("user_time").unwrap_or(0.0);
                let sys = self.program_figure("sys_time").unwrap_or(0.0);
                row(
                    "CPU time",
                    format!("{} (untraced runs)", human_ns(user + sys)),
                );
                row(
                    "of it in the kernel",
                    format!(
                        "{} (system time from the timer's ticks: no split ran)",
                        human_ns(sys)
                    ),
                );
            }
        }
        h.push_str("</table>");
        Section {
            id: "program".into(),
            title: "The program".into(),
            html: h,
        }
    }

    /// Measured beside priced on one total, each line's ratio, and the lines outside the band
    /// with their evidence.
    fn where_it_went(&self) -> Section {
        let mut h = String::new();
        let lines = self.lines();
        let priced_kernel = self.param("priced_kernel_ns").unwrap_or(0.0);
        let explained = self.param("explained_pct");
        match self.param("kernel_ns") {
            Some(kernel) if !lines.is_empty() => {
                self.classes(&mut h, &lines, kernel, priced_kernel, explained);
                self.lines_table(&mut h, &lines, kernel);
                self.outside(&mut h, kernel);
            }
            _ => {
                let sys = self.param("sys_time_ns").unwrap_or(0.0);
                let _ = write!(
                    h,
                    "<p class=\"meta\" id=\"one-total\">No split ran (--count-only, or saved counts): the one kernel total is the untraced runs' system time, {}, from the timer's ticks (each run's cgroup, where one could be made). Priced: {}{}.</p>",
                    esc(&human_ns(sys)),
                    esc(&human_ns(priced_kernel)),
                    explained.map_or(String::new(), |e| format!(", explained {e:.0}%"))
                );
            }
        }
        Section {
            id: "where".into(),
            title: "Where its time went: measured beside priced".into(),
            html: h,
        }
    }

    /// User, the kernel by class, the tracer's cost taken out: the kernel total net of it.
    fn classes(
        &self,
        h: &mut String,
        lines: &[(String, String, f64)],
        kernel: f64,
        priced_kernel: f64,
        explained: Option<f64>,
    ) {
        let tracer = self.param("tracer_ns").unwrap_or(0.0);
        let user: f64 = lines.iter().filter(|l| l.0 == "user").map(|l| l.2).sum();
        let total = user + kernel;
        let share = |ns: f64| {
            if total > 0.0 {
                format!("{:.1}%", 100.0 * ns / total)
            } else {
                "—".into()
            }
        };
        h.push_str("<table id=\"one-total\"><tr><th>class</th><th>measured</th><th>of the CPU</th><th>priced</th><th>priced ÷ measured</th></tr>");
        let _ = write!(
            h,
            "<tr><td>user</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>as measured</td><td></td></tr>",
            esc(&human_ns(user)),
            share(user)
        );
        let mut classes_ns = 0.0;
        for class in CLASSES.iter().filter(|c| **c != "user") {
            let mine: Vec<&(String, String, f64)> =
                lines.iter().filter(|l| l.0 == *class).collect();
            if mine.is_empty() {
                continue;
            }
            let measured: f64 = mine.iter().map(|l| l.2).sum();
            classes_ns += measured;
            let priced: Option<f64> = mine
                .iter()
                .filter_map(|l| self.priced(l))
                .fold(None, |a, p| Some(a.unwrap_or(0.0) + p));
            let _ = write!(
                h,
                "<tr><td>kernel: {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(class),
                esc(&human_ns(measured)),
                share(measured),
                priced.map_or("no term".into(), |p| esc(&human_ns(p))),
                priced
                    .filter(|_| measured > 0.0)
                    .map_or(String::new(), |p| format!("{:.2}", p / measured))
            );
        }
        let _ = write!(
            h,
            "<tr><td>the tracer's own cost, taken out</td><td class=\"num\">−{}</td><td class=\"num\">−{}</td><td></td><td></td></tr>",
            esc(&human_ns(tracer)),
            share(tracer)
        );
        // The kernel total is the cgroup's usage less user time; the classes meet it within the
        // split's sum check, and what they leave is said, not hidden.
        let gap = kernel - (classes_ns - tracer);
        if gap.abs() >= 1.0 {
            let _ = write!(
                h,
                "<tr><td>the classes against the cgroup's usage (the split's sum check)</td><td class=\"num\">{sign}{}</td><td class=\"num\">{sign}{}</td><td></td><td></td></tr>",
                esc(&human_ns(gap.abs())),
                share(gap.abs()),
                sign = if gap < 0.0 { "−" } else { "+" },
            );
        }
        let _ = write!(
            h,
            "<tr><th>kernel total</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">{}</th></tr>",
            esc(&human_ns(kernel)),
            share(kernel),
            esc(&human_ns(priced_kernel)),
            if kernel > 0.0 {
                format!("{:.2}", priced_kernel / kernel)
            } else {
                String::new()
            }
        );
        let _ = write!(
            h,
            "<tr><th>CPU total</th><th class=\"num\">{}</th><th class=\"num\">100%</th><th></th><th></th></tr></table>",
            esc(&human_ns(total))
        );
        let waits: f64 = self
            .rows
            .iter()
            .filter(|r| r.metric == "wait_time")
            .map(|r| r.summary.median)
            .sum::<f64>()
            + 0.0;
        let _ = write!(
            h,
            "<p class=\"meta\" id=\"explained\">explained: {} of the kernel total (priced {} ÷ measured {}); lines with no term count 0 in the price. Waited inside syscalls and faults, off CPU: {} (not CPU time, beside the total).</p>",
            explained.map_or("—".into(), |e| format!("{e:.0}%")),
            esc(&human_ns(priced_kernel)),
            esc(&human_ns(kernel)),
            esc(&human_ns(waits))
        );
    }

    /// The priced ns of a line: its ratio times its own time (its measured time less the
    /// tracer's inside it, on which the ratio is read).
    fn priced(&self, l: &(String, String, f64)) -> Option<f64> {
        let tracer = self
            .get(&l.0, &l.1, "tracer_time")
            .map(|r| r.summary.median);
        self.get(&l.0, &l.1, "priced_ratio")
            .map(|r| crate::measured::beside::priced_of_rows(r.summary.median, l.2, tracer))
    }

    fn lines_table(&self, h: &mut String, lines: &[(String, String, f64)], kernel: f64) {
        h.push_str("<table id=\"lines\"><tr><th>class</th><th>event</th><th>on CPU</th><th>of the kernel total</th><th>ns/event</th><th>waited</th><th>priced</th><th>priced ÷ measured</th><th>band 0.67–1.5x</th></tr>");
        for l in lines.iter().take(TOP_LINES) {
            let ratio = self
                .get(&l.0, &l.1, "priced_ratio")
                .map(|r| r.summary.median);
            let band = match (l.0.as_str(), ratio) {
                ("user", _) => "",
                (_, Some(r)) if (BAND.0..=BAND.1).contains(&r) => "within",
                (_, Some(_)) => "outside",
                (_, None) => "no term",
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{band}</td></tr>",
                esc(&l.0),
                esc(&l.1),
                esc(&human_ns(l.2)),
                if l.0 == "user" || kernel <= 0.0 {
                    String::new()
                } else {
                    format!("{:.1}%", 100.0 * l.2 / kernel)
                },
                self.get(&l.0, &l.1, "per_event")
                    .map_or("—".into(), |r| format!("{:.0}", r.summary.median)),
                self.get(&l.0, &l.1, "wait_time")
                    .filter(|r| r.summary.median > 0.0)
                    .map_or("—".into(), |r| esc(&human_ns(r.summary.median))),
                self.priced(l).map_or("—".into(), |p| esc(&human_ns(p))),
                ratio.map_or("—".into(), |r| format!("{r:.2}")),
            );
        }
        if lines.len() > TOP_LINES {
            let rest: f64 = lines[TOP_LINES..].iter().map(|l| l.2).sum();
            let _ = write!(
                h,
                "<tr><td colspan=\"2\">{} more lines</td><td class=\"num\">{}</td><td colspan=\"6\"></td></tr>",
                lines.len() - TOP_LINES,
                esc(&human_ns(rest))
            );
        }
        h.push_str("</table>");
    }

    /// The heavy lines outside the band, each with its evidence (the model's `outside`).
    fn outside(&self, h: &mut String, kernel: f64) {
        let Some(Value::Array(out)) = self.model.params.get("outside") else {
            let heavy = self.heavy_outside(kernel);
            let _ = match heavy.is_empty() {
                true => write!(
                    h,
                    "<p class=\"meta\" id=\"outside\">Every line carrying 5% or more of the kernel total is within {}–{}x of its price.</p>",
                    BAND.0, BAND.1
                ),
                false => write!(
                    h,
                    "<p class=\"meta\" id=\"outside\">Outside {}–{}x with 5% or more of the kernel total: {}. This run stored no evidence for them (priced before the evidence was kept with the run).</p>",
                    BAND.0,
                    BAND.1,
                    esc(&heavy.join(", "))
                ),
            };
            return;
        };
        let _ = write!(
            h,
            "<p class=\"meta\">The lines carrying 5% or more of the kernel total outside {}–{}x, with what the same run shows of why:</p><ul class=\"notes\" id=\"outside\">",
            BAND.0, BAND.1
        );
        for o in out {
            let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
            let f = |k: &str| o.get(k).and_then(Value::as_f64);
            let _ = write!(
                h,
                "<li><b>{} {}</b>: {} measured ({:.0}% of the kernel total), {}<ul>",
                esc(s("class")),
                esc(s("event")),
                esc(&human_ns(f("measured_ns").unwrap_or(0.0))),
                f("share_pct").unwrap_or(0.0),
                match (f("priced_ns"), f("ratio")) {
                    (Some(p), Some(r)) => format!("priced {} ({r:.2}x)", esc(&human_ns(p))),
                    _ => "no term".into(),
                }
            );
            for e in o
                .get("evidence")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let _ = write!(h, "<li>{}</li>", esc(e));
            }
            h.push_str("</ul></li>");
        }
        h.push_str("</ul>");
    }

    /// The lines carrying `HEAVY_SHARE` or more of `kernel` outside the band or with no term
    /// (what `beside::outside` names at price time), read from the rows.
    fn heavy_outside(&self, kernel: f64) -> Vec<String> {
        self.lines()
            .iter()
            .filter(|l| l.0 != "user" && kernel > 0.0 && l.2 >= HEAVY_SHARE * kernel)
            .filter(|l| {
                self.get(&l.0, &l.1, "priced_ratio")
                    .is_none_or(|r| !(BAND.0..=BAND.1).contains(&r.summary.median))
            })
            .map(|l| format!("{} {}", l.0, l.1))
            .collect()
    }

    /// Each what-if: its prediction, and where `--verify` tried it, the measured saving over
    /// the pairs, their interval and the verdict; the trials' lines folded under.
    fn what_ifs(&self) -> Option<Section> {
        let tried: Vec<&&ResultRow> = self
            .rows
            .iter()
            .filter(|r| r.metric == "saved" && r.case.contains_key("verdict"))
            .collect();
        let offered: Vec<&&ResultRow> = self
            .rows
            .iter()
            .filter(|r| r.metric == "saved" && r.case.contains_key("from"))
            .collect();
        if tried.is_empty() && offered.is_empty() && self.tried.is_none() {
            return None;
        }
        // Why each what-if was not tried, from its trial's line ("what (remedy): not tried: why").
        let why_not: Vec<(&str, &str, &str)> = self
            .tried
            .iter()
            .flat_map(|m| &m.verdict)
            .filter(|l| !l.starts_with(' '))
            .filter_map(|l| {
                let (head, why) = l.split_once("): not tried: ")?;
                let (what, remedy) = head.split_once(" (")?;
                Some((what, remedy, why))
            })
            .collect();
        let verdict_cell = |what: &str, remedy: &str, verdict: &str| match why_not
            .iter()
            .find(|w| w.0 == what && w.1 == remedy)
        {
            Some((_, _, why)) => format!("<b>{}</b>: {}", esc(verdict), esc(why)),
            None => format!("<b>{}</b>", esc(verdict)),
        };
        let mut h = String::from("<table id=\"what-if-table\"><tr><th>what-if</th><th>remedy</th><th>saving of</th><th>predicted saving</th><th>measured saving</th><th>interval (pairs' min–max)</th><th>verdict</th></tr>");
        let predicted = |r: &ResultRow| {
            let s = &r.summary;
            if s.n >= 3 && s.min != s.max {
                format!(
                    "{} ({}–{})",
                    human_ns(s.median),
                    human_ns(s.min),
                    human_ns(s.max)
                )
            } else {
                human_ns(s.median)
            }
        };
        for r in &tried {
            let measured = self.rows.iter().find(|m| {
                m.metric == "measured_saved"
                    && m.key("what") == r.key("what")
                    && m.key("remedy") == r.key("remedy")
            });
            let _ = write!(
                h,
                "<tr class=\"v-{v}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&r.key("what")),
                esc(&r.key("remedy")),
                esc(&r.key("of")),
                if r.samples.is_empty() {
                    "no size (judged by its sign)".into()
                } else {
                    esc(&predicted(r))
                },
                measured.map_or("—".into(), |m| format!(
                    "{} over {} pairs",
                    esc(&human_ns(m.summary.median)),
                    m.summary.n
                )),
                measured.map_or("—".into(), |m| esc(&format!(
                    "{} to {}",
                    human_ns(m.summary.min),
                    human_ns(m.summary.max)
                ))),
                verdict_cell(&r.key("what"), &r.key("remedy"), &r.key("verdict")),
                v = esc(&r.key("verdict")),
            );
        }
        // A tried what-if with no size has no `saved` row: its measured row carries it.
        for m in self.rows.iter().filter(|m| {
            m.metric == "measured_saved"
                && m.case.contains_key("verdict")
                && !tried
                    .iter()
                    .any(|t| t.key("what") == m.key("what") && t.key("remedy") == m.key("remedy"))
        }) {
            let _ = write!(
                h,
                "<tr class=\"v-{v}\"><td>{}</td><td>{}</td><td>{}</td><td>no size (judged by its sign)</td><td class=\"num\">{} over {} pairs</td><td class=\"num\">{}</td><td><b>{v}</b></td></tr>",
                esc(&m.key("what")),
                esc(&m.key("remedy")),
                esc(&m.key("of")),
                esc(&human_ns(m.summary.median)),
                m.summary.n,
                esc(&format!(
                    "{} to {}",
                    human_ns(m.summary.min),
                    human_ns(m.summary.max)
                )),
                v = esc(&m.key("verdict")),
            );
        }
        // A what-if not tried with no prediction has no row: its line says why.
        for (what, remedy, _) in why_not.iter().filter(|(what, remedy, _)| {
            !tried
                .iter()
                .any(|t| t.key("what") == *what && t.key("remedy") == *remedy)
        }) {
            let _ = write!(
                h,
                "<tr class=\"v-not-tried\"><td>{}</td><td>{}</td><td></td><td>—</td><td>—</td><td>—</td><td>{}</td></tr>",
                esc(what),
                esc(remedy),
                verdict_cell(what, remedy, "not-tried")
            );
        }
        if self.tried.is_none() {
            for r in &offered {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td></td><td></td><td class=\"num\">{}</td><td>—</td><td>—</td><td>not tried: <code>costlab price --verify</code> tries it</td></tr>",
                    esc(&r.key("what")),
                    esc(&predicted(r))
                );
            }
        }
        h.push_str("</table>");
        if let Some(m) = self.tried {
            let mut v = m.verdict.iter();
            if let Some(tally) = v.next() {
                let _ = write!(
                    h,
                    "<p class=\"meta\" id=\"what-if-tally\">{}.</p>",
                    esc(tally)
                );
            }
            h.push_str(
                "<details><summary>each trial, as the text says it</summary><ul class=\"notes\">",
            );
            for line in v {
                let _ = write!(h, "<li>{}</li>", esc(line.trim_start()));
            }
            h.push_str("</ul></details>");
        }
        Some(Section {
            id: "what-ifs".into(),
            title: "What-ifs".into(),
            html: h,
        })
    }
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

    fn doc(kernel_ns: f64) -> Doc {
        let o = Outcome {
            results: vec![
                row("user", "user", "cpu_time", 100.0),
                row("syscall", "read", "cpu_time", 60.0),
                row("syscall", "read", "priced_ratio", 0.5),
                row("fault", "minor", "cpu_time", 50.0),
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
        let mut d = Doc::new(run, Value::Null, o);
        let mut params = serde_json::Map::new();
        for (k, v) in [
            ("kernel_ns", kernel_ns),
            ("tracer_ns", 5.0),
            ("priced_kernel_ns", 30.0),
        ] {
            params.insert(k.into(), serde_json::json!(v));
        }
        d.models.push(Model {
            lab: LAB.into(),
            name: "price of dd".into(),
            params,
            points: Vec::new(),
            verdict: Vec::new(),
        });
        d
    }

    fn page(d: &Doc) -> String {
        lead(d)
            .unwrap()
            .sections
            .iter()
            .map(|s| s.html.clone())
            .collect()
    }

    #[test]
    fn the_classes_less_the_tracer_meet_the_kernel_total_or_the_gap_is_said() {
        // 110 ns of kernel classes less the tracer's 5: the kernel total of 105, no gap.
        let even = page(&doc(105.0));
        assert!(even.contains("<th>kernel total</th><th class=\"num\">105.0 ns</th>"));
        assert!(!even.contains("sum check"), "{even}");
        assert!(even.contains("<td>kernel: syscall</td><td class=\"num\">60.0 ns</td>"));
        assert!(even.contains("<td class=\"num\">30.0 ns</td><td class=\"num\">0.50</td>"));
        // The classes passing the usage by 5 ns: said on a line of its own.
        let over = page(&doc(100.0));
        assert!(
            over.contains("(the split's sum check)</td><td class=\"num\">−5.0 ns</td><td class=\"num\">−2.5%</td>"),
            "{over}"
        );
        assert!(over.contains("<th>CPU total</th><th class=\"num\">200.0 ns</th>"));
        assert!(over.contains(
            "<td>200.0 ns in the traced run, the tracer&#39;s own 5.0 ns taken out</td>"
        ));
        assert!(over.contains("off CPU: 0.0 ns"));
        // No evidence stored (a run priced before it was kept): the heavy lines are named.
        assert!(
            over.contains("with 5% or more of the kernel total: syscall read, fault minor."),
            "{over}"
        );
        // Without the price model there is no lead: the page is the lab report.
        let mut none = doc(100.0);
        none.models.clear();
        assert!(lead(&none).is_none());
    }

    #[test]
    fn a_lines_priced_cell_is_its_ratio_times_its_own_time() {
        // 60 ns on CPU, 20 of them the tracer's: priced 0.5 of the own 40, 20 ns (not 30).
        let mut d = doc(105.0);
        d.results.push(row("syscall", "read", "tracer_time", 20.0));
        let p = page(&d);
        assert!(
            p.contains("<td class=\"num\">20.0 ns</td><td class=\"num\">0.50</td>"),
            "{p}"
        );
    }
}
