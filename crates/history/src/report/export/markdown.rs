//! Markdown export: the run, its cost sheet, its figures per lab, its models and notes.

use crate::report::sheet::{figure, spread};
use crate::report::verdict::{verdict_text, MARKS_LEGEND};
use costlab_core::model::Doc;
use costlab_core::model::LabSheet;
use costlab_core::model::Quality;

use super::{Exporter, Run};

pub struct Markdown;

impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }
    fn export(&self, run: &Run) -> anyhow::Result<String> {
        Ok(render(run.doc, run.sheet))
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, headers: &[&str], rows: &[Vec<String>]) {
    out.push_str(&format!("| {} |\n", headers.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push('\n');
}

pub fn render(doc: &Doc, sheet: &[LabSheet]) -> String {
    let mut out = format!("# costlab run {}\n\n", doc.run.id);
    out.push_str(&format!(
        "- started: {}\n- command: `{}`\n- machine: {}\n- complete: {}\n\n",
        doc.run.started,
        doc.run.command,
        costlab_core::machine::machine_summary(&doc.machine),
        if doc.run.complete { "yes" } else { "no" }
    ));
    if !sheet.is_empty() {
        out.push_str("## Cost sheet\n\n");
        let mut rows = Vec::new();
        for lab in sheet {
            for h in &lab.headlines {
                rows.push(vec![
                    lab.lab.clone(),
                    h.label.clone(),
                    figure(h.summary.median),
                    spread(&h.summary),
                    h.unit.clone(),
                    verdict_text(h.quality, &h.quality_reasons),
                    h.reading.clone(),
                ]);
            }
        }
        table(
            &mut out,
            &[
                "lab", "figure", "median", "spread", "unit", "quality", "reading",
            ],
            &rows,
        );
        if sheet
            .iter()
            .flat_map(|l| &l.headlines)
            .any(|h| h.quality.is_some_and(|q| q != Quality::Ok))
        {
            out.push_str(&format!("Marks: {MARKS_LEGEND}.\n\n"));
        }
        for lab in sheet {
            if let Some(r) = lab.status.reason() {
                out.push_str(&format!(
                    "- {} {}: {}\n",
                    lab.lab,
                    lab.status.word(),
                    cell(r)
                ));
            }
        }
        out.push('\n');
    }
    let mut labs: Vec<&str> = Vec::new();
    for r in &doc.results {
        if !labs.contains(&r.lab.as_str()) {
            labs.push(&r.lab);
        }
    }
    for lab in labs {
        out.push_str(&format!("## {lab}\n\n"));
        let rows: Vec<Vec<String>> = doc
            .results
            .iter()
            .filter(|r| r.lab == lab)
            .map(|r| {
                vec![
                    costlab_core::model::case_text(&r.case),
                    r.metric.clone(),
                    figure(r.summary.median),
                    spread(&r.summary),
                    r.unit.clone(),
                    verdict_text(r.quality, &r.quality_reasons),
                ]
            })
            .collect();
        table(
            &mut out,
            &["case", "metric", "median", "spread", "unit", "quality"],
            &rows,
        );
    }
    if !doc.models.is_empty() {
        out.push_str("## Models\n\n");
        for m in &doc.models {
            out.push_str(&format!("### {} — {}\n\n", m.lab, m.name));
            let rows: Vec<Vec<String>> = m
                .points
                .iter()
                .map(|p| {
                    vec![
                        costlab_core::model::case_text(&p.case),
                        figure(p.predicted),
                        figure(p.measured),
                        p.unit.clone(),
                        format!("{:+.1}%", p.error() * 100.0),
                    ]
                })
                .collect();
            table(
                &mut out,
                &["case", "predicted", "measured", "unit", "error"],
                &rows,
            );
            for v in &m.verdict {
                out.push_str(&format!("- {}\n", cell(v)));
            }
            if !m.verdict.is_empty() {
                out.push('\n');
            }
        }
    }
    if !doc.notes.is_empty() {
        out.push_str("## Notes\n\n");
        for n in &doc.notes {
            out.push_str(&format!("- {}\n", cell(n)));
        }
    }
    out
}
