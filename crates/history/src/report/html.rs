//! The HTML report: one self-contained file (inline CSS and SVG, no script, no external font
//! or style), so it can be mailed to a colleague or opened from a CI artifact.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::charts::{self, esc, Chart};
use super::sheet::{figure, spread, LabSheet};
use super::verdict::{reading_beside_verdict, verdict_text, MARKS_LEGEND};
use super::Doc;
use crate::analysis::compare::{Comparison, Verdict};

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:0;padding:24px 32px;color:#222;background:#f6f6f4}
h1{font-size:24px;margin:0 0 6px}h2{font-size:19px;margin:28px 0 10px;border-bottom:2px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px}.meta code{background:#eee;padding:1px 4px;border-radius:3px}
.incomplete{background:#fde8e8;border:1px solid #e0a0a0;padding:6px 10px;border-radius:4px;display:inline-block;margin-top:8px}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:6px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eee}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.charts{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:16px;align-items:start}
@media (max-width:1200px){.charts{grid-template-columns:minmax(0,1fr)}}
figure{margin:0;background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px;min-width:0}
figure svg{width:100%;height:auto;display:block}
figcaption{font-size:12px;color:#444;margin-top:4px}
figcaption details{margin-top:4px}figcaption summary{cursor:pointer;color:#225}
table.points,table#model-params{font-size:12px}
tr.changed td{background:#fff3f3}
.skipped{color:#777;font-style:italic;font-size:13px;margin:4px 0}
ul.notes{font-size:13px}
tr.q-disturbed td.quality{color:#b00020;font-weight:bold}
tr.q-noisy td.quality{color:#a66300;font-weight:bold}
table#quality td{font-size:13px}
";

/// A section of the page, its HTML already escaped.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub id: String,
    pub title: String,
    pub html: String,
}

/// What leads the page of a run that one lab tells whole (price: the program it ran), in
/// place of the cost sheet: the page's title and the lab's sections. Such a page has no cost
/// sheet, no "Not run" line, and leaves out that lab's models, which its sections tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Lead {
    pub lab: String,
    pub title: String,
    pub sections: Vec<Section>,
}

fn sheet_html(o: &mut String, sheet: &[LabSheet]) {
    let _ = write!(
        o,
        "<table id=\"cost-sheet\"><tr><th>lab</th><th>figure</th><th>median</th><th>spread (min–max, MAD, n)</th><th>unit</th><th>quality</th><th>reading</th></tr>"
    );
    let mut any = false;
    for lab in sheet {
        for h in &lab.headlines {
            any = true;
            let _ = write!(
                o,
                "<tr class=\"q-{q}\"><td>{}</td><td>{}</td><td class=\"num\">{}{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"quality\">{}</td><td>{}</td></tr>",
                esc(&lab.lab),
                esc(&h.label),
                figure(h.summary.median),
                h.quality.map_or("", |q| q.mark()),
                esc(&spread(&h.summary)),
                esc(&h.unit),
                match h.quality {
                    // Not judged: a figure stored before costlab judged figures.
                    None => "not judged".to_string(),
                    q => esc(&verdict_text(q, &h.quality_reasons)),
                },
                // The quality column gives the reasons: the reading does not repeat them.
                esc(&reading_beside_verdict(h)),
                q = h.quality.map_or("unjudged", |q| q.word()),
            );
        }
    }
    if !any {
        o.push_str(
            "<tr><td colspan=\"7\" class=\"skipped\">no lab gave a headline figure</td></tr>",
        );
    }
    o.push_str("</table>");
    if sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .any(|h| !h.quality.map_or("", |q| q.mark()).is_empty())
    {
        let _ = write!(
            o,
            "<p class=\"meta\" id=\"marks\">Marks: {}.</p>",
            esc(MARKS_LEGEND)
        );
    }
    let others: Vec<&LabSheet> = sheet
        .iter()
        .filter(|l| l.status.reason().is_some())
        .collect();
    if !others.is_empty() {
        o.push_str("<ul class=\"notes\">");
        for l in others {
            let _ = write!(
                o,
                "<li><b>{}</b> {}: {}</li>",
                esc(&l.lab),
                l.status.word(),
                esc(l.status.reason().unwrap_or(""))
            );
        }
        o.push_str("</ul>");
    }
}

/// The models' parameters in one compact table (three significant digits) with how well
/// each fits; the verdicts and points are folded under each model's chart.
fn models_html(o: &mut String, doc: &Doc) {
    use super::charts::models::{fit_text, param_text};
    if doc.models.is_empty() {
        return;
    }
    o.push_str("<h2>Models: parameters</h2><table id=\"model-params\"><tr><th>lab</th><th>model</th><th>parameters</th><th>fit</th></tr>");
    for m in &doc.models {
        let params: Vec<String> = m
            .params
            .iter()
            .map(|(k, v)| format!("{k} = {}", param_text(v)))
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.lab),
            esc(&m.name),
            esc(&params.join(", ")),
            esc(&fit_text(m))
        );
    }
    o.push_str("</table><p class=\"meta\">Each model's verdict and its points, predicted beside measured, are under its chart.</p>");
}

/// `--counters`: the readings of every figure that took them, and what the machine could not
/// count, with why.
fn counters_html(o: &mut String, doc: &Doc) {
    use costlab_core::measure::counters::short_count;
    let rows: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.counters.as_ref().is_some_and(|c| !c.is_empty()))
        .collect();
    if rows.is_empty() {
        return;
    }
    let mut names: Vec<&String> = Vec::new();
    for r in &rows {
        for k in r.counters.iter().flat_map(|c| c.keys()) {
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    o.push_str(
        "<h2>Counters</h2><table id=\"counters\"><tr><th>lab</th><th>case</th><th>metric</th>",
    );
    for n in &names {
        let _ = write!(o, "<th>{}</th>", esc(n));
    }
    o.push_str("</tr>");
    for r in &rows {
        let c = r.counters.as_ref().expect("filtered");
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            esc(&r.lab),
            esc(&costlab_core::model::case_text(&r.case)),
            esc(&r.metric)
        );
        for n in &names {
            let v = c.get(*n).map_or(String::from("—"), |v| {
                if n.as_str() == "IPC" {
                    format!("{v:.2}")
                } else {
                    short_count(*v)
                }
            });
            let _ = write!(o, "<td class=\"num\">{}</td>", esc(&v));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    let mut why: Vec<String> = Vec::new();
    for r in &doc.results {
        for (k, v) in r.unsupported_counters.iter().flatten() {
            let line = format!("{k}: {v}");
            if !why.contains(&line) {
                why.push(line);
            }
        }
    }
    if !why.is_empty() {
        let _ = write!(
            o,
            "<p class=\"meta\" id=\"counters-unsupported\">Not counted on this machine: {}.</p>",
            esc(&why.join("; "))
        );
    }
}

/// Run B beside run A: what changed significantly (Benjamini-Hochberg over every figure
/// compared, and the minimum effect), as `costlab compare B A` calls it.
fn changes_html(o: &mut String, a: &Doc, b: &Doc, cmp: &Comparison) {
    let sig: Vec<_> = cmp
        .changes
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Significant { .. }))
        .collect();
    let _ = write!(
        o,
        "<h2>Against run B</h2><p class=\"meta\" id=\"against\">A = <code>{}</code> (solid), B = <code>{}</code> (dashed, lighter) in every chart. {} of {} figures in both runs changed significantly (Mann-Whitney U, Benjamini-Hochberg at {}, minimum effect {}%); they are ringed in the charts.</p>",
        esc(&a.run.id),
        esc(&b.run.id),
        sig.len(),
        cmp.changes.len(),
        crate::analysis::compare::ALPHA,
        cmp.min_effect_pct
    );
    if sig.is_empty() {
        return;
    }
    // A long list would push the charts off the page: fold it.
    let _ = write!(
        o,
        "<details{}><summary>the {} changed figures</summary>",
        if sig.len() <= 12 { " open" } else { "" },
        sig.len()
    );
    o.push_str("<table id=\"changes\"><tr><th>figure</th><th>B</th><th>A</th><th>unit</th><th>change</th><th>q</th></tr>");
    for c in sig {
        let _ = write!(
            o,
            "<tr class=\"changed\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{:+.1}%</td><td class=\"num\">{:.4}</td></tr>",
            esc(&c.figure),
            figure(c.a),
            figure(c.b),
            esc(&c.unit),
            c.change_pct,
            c.q
        );
    }
    o.push_str("</table></details>");
}

/// Every figure that is not ok, with why: the page must not let a disturbed figure pass as
/// clean.
fn quality_html(o: &mut String, doc: &Doc) {
    use costlab_core::model::Quality;
    let judged = doc.results.iter().filter(|r| r.quality.is_some()).count();
    if judged == 0 {
        return;
    }
    let bad: Vec<_> = doc
        .results
        .iter()
        .filter(|r| matches!(r.quality, Some(q) if q != Quality::Ok))
        .collect();
    let _ = write!(
        o,
        "<h2>Quality</h2><p class=\"meta\" id=\"quality-summary\">{} of {judged} figures are not ok (disturbed: something else ran on their CPUs, the host stole time, or the page size asked for was not given; noisy: the spread does not support a reading). {}</p>",
        bad.len(),
        esc(costlab_core::measure::quality::THRESHOLDS_HELP)
    );
    if bad.is_empty() {
        return;
    }
    o.push_str("<details><summary>the figures not ok</summary><table id=\"quality\"><tr><th>lab</th><th>case</th><th>metric</th><th>median</th><th>verdict</th><th>why</th></tr>");
    for r in bad {
        let case: Vec<String> = r.case.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let q = r.quality.map_or("", |q| q.word());
        let _ = write!(
            o,
            "<tr class=\"q-{q}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} {}{}</td><td class=\"quality\">{q}</td><td>{}</td></tr>",
            esc(&r.lab),
            esc(&case.join(" ")),
            esc(&r.metric),
            figure(r.summary.median),
            esc(&r.unit),
            r.quality.map_or("", |q| q.mark()),
            esc(&r.quality_reasons.join("; "))
        );
    }
    o.push_str("</table></details>");
}

/// The whole page. `lab_charts` are the labs' charts of `doc` (`labs::charts`): the report
/// draws them where they belong, and the models' charts itself.
pub fn render(doc: &Doc, sheet: &[LabSheet], lab_charts: Vec<Chart>) -> String {
    render_with(doc, sheet, None, lab_charts, None)
}

/// The page, led by `lead` where a lab tells the run whole (`Lab::lead`), else as `render`.
pub fn render_led(
    doc: &Doc,
    sheet: &[LabSheet],
    lead: Option<&Lead>,
    lab_charts: Vec<Chart>,
) -> String {
    render_with(doc, sheet, lead, lab_charts, None)
}

/// The page of run `doc` with run `b` overlaid in every chart; changes called with a minimum
/// effect of `min_effect_pct` percent. Each run comes with its labs' charts, as for `render`.
pub fn render_against(
    doc: &Doc,
    sheet: &[LabSheet],
    lead: Option<&Lead>,
    lab_charts: Vec<Chart>,
    b: (&Doc, Vec<Chart>),
    min_effect_pct: f64,
) -> String {
    let (b, b_charts) = b;
    // B is the reference: a change is A's median against B's.
    let cmp = crate::analysis::compare::compare_with(b, doc, min_effect_pct);
    render_with(doc, sheet, lead, lab_charts, Some((b, b_charts, &cmp)))
}

/// The lead's sections, each under its heading.
fn lead_html(o: &mut String, lead: &Lead) {
    for sec in &lead.sections {
        let _ = write!(
            o,
            "<h2 id=\"{}\">{}</h2>{}",
            esc(&sec.id),
            esc(&sec.title),
            sec.html
        );
    }
}

fn render_with(
    doc: &Doc,
    sheet: &[LabSheet],
    lead: Option<&Lead>,
    lab_charts: Vec<Chart>,
    against: Option<(&Doc, Vec<Chart>, &Comparison)>,
) -> String {
    // A lead tells its lab's models: the page leaves them out of its charts and tables.
    let led;
    let doc = match lead {
        Some(l) => {
            let mut d = doc.clone();
            d.models.retain(|m| m.lab != l.lab);
            led = d;
            &led
        }
        None => doc,
    };
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>costlab report {}</title><style>{STYLE}</style></head><body>",
        esc(&doc.run.id)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><div class=\"meta\">run <code>{}</code> · started {} · <code>{}</code> · costlab {}<br>machine: {}</div>",
        esc(lead.map_or("What this machine charges", |l| l.title.as_str())),
        esc(&doc.run.id),
        esc(&doc.run.started),
        esc(&doc.run.command),
        esc(&doc.run.costlab),
        esc(&costlab_core::machine::machine_summary(&doc.machine))
    );
    if !doc.run.complete {
        o.push_str("<div class=\"incomplete\">This run is incomplete: a lab failed or it was interrupted. What finished is shown.</div>");
    }
    match lead {
        Some(l) => lead_html(&mut o, l),
        None => {
            o.push_str("<h2>Cost sheet</h2>");
            sheet_html(&mut o, sheet);
        }
    }
    quality_html(&mut o, doc);
    let charts = match against {
        Some((b, b_charts, cmp)) => {
            changes_html(&mut o, doc, b, cmp);
            let by_figure: std::collections::HashMap<String, f64> = doc
                .results
                .iter()
                .map(|r| (r.figure_id(), r.summary.median))
                .collect();
            let changed: Vec<(f64, String)> = cmp
                .changes
                .iter()
                .filter(|c| matches!(c.verdict, Verdict::Significant { .. }))
                .filter_map(|c| {
                    by_figure
                        .get(&c.figure)
                        .map(|m| (*m, format!("{:+.0}%", c.change_pct)))
                })
                .collect();
            charts::all_against((doc, lab_charts), (b, b_charts), &changed)
        }
        None => charts::all(doc, lab_charts),
    };
    // A lab that did not run gets no card per chart: it is named once, at the end.
    let mut not_run: Vec<String> = Vec::new();
    let charts: Vec<Chart> = charts
        .into_iter()
        .filter(|c| match &c.not_run {
            Some(lab) => {
                if !not_run.contains(lab) {
                    not_run.push(lab.clone());
                }
                false
            }
            None => true,
        })
        .collect();
    if !charts.is_empty() {
        o.push_str("<h2>Charts</h2><div class=\"charts\">");
    }
    let drew_charts = !charts.is_empty();
    for c in charts {
        match &c.svg {
            Ok(svg) => {
                let details = if c.details.is_empty() {
                    String::new()
                } else {
                    format!(
                        "<details><summary>verdict and points</summary>{}</details>",
                        c.details
                    )
                };
                let _ = write!(
                    o,
                    "<figure>{svg}<figcaption>{}{details}</figcaption></figure>",
                    esc(&c.caption)
                );
            }
            Err(why) => {
                let _ = write!(
                    o,
                    "<figure><b>{}</b><p class=\"skipped\" id=\"{}-skipped\">Not drawn: {}.</p></figure>",
                    esc(&c.title),
                    esc(&c.id),
                    esc(why)
                );
            }
        }
    }
    if drew_charts {
        o.push_str("</div>");
    }
    models_html(&mut o, doc);
    counters_html(&mut o, doc);
    if !doc.notes.is_empty() {
        o.push_str("<h2>Notes</h2><ul class=\"notes\" id=\"notes\">");
        for n in &doc.notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>");
    }
    if !not_run.is_empty() && lead.is_none() {
        let _ = write!(
            o,
            "<p class=\"skipped\" id=\"not-run\">Not run: {}.</p>",
            esc(&not_run.join(", "))
        );
    }
    o.push_str("<p class=\"meta\">The figures are medians of the samples; the full samples are in results.json beside this file.</p></body></html>\n");
    o
}

/// Write `index.html` and `results.json` into `dir` (created if needed); returns the page.
/// `lab_charts` as for `render`.
pub fn write_report(
    dir: &Path,
    doc: &Doc,
    sheet: &[LabSheet],
    lab_charts: Vec<Chart>,
) -> Result<PathBuf> {
    write_page(dir, doc, &render(doc, sheet, lab_charts))
}

/// Write a page already rendered (`render_against`) and the run's `results.json`.
pub fn write_page(dir: &Path, doc: &Doc, html: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the report directory {}", dir.display()))?;
    let page = dir.join("index.html");
    std::fs::write(&page, html).with_context(|| format!("writing {}", page.display()))?;
    let json = dir.join("results.json");
    std::fs::write(&json, serde_json::to_string_pretty(doc)? + "\n")
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(page)
}
