//! One verdict path (issue 24): a run with a disturbed and a noisy figure, and a figure derived
//! from them, shown through every view (terminal sheet, levels table, Markdown, CSV, HTML,
//! `machines`, `trend`). Each view must show the figure's mark and, where it has room, why.
//! Nothing here measures: the figures are made up and no assertion reads a timing.

use crate::common;

use costlab_core::measure::quality::{self, Quality};
use costlab_history::report::export::{csv, markdown};
use costlab_history::report::sheet::{LabSheet, LabStatus};
use costlab_history::report::{html, Doc, Outcome, ResultRow, RunInfo};
use costlab_lab::Lab;

const DISTURBED: &str = "other processes took 97% of CPU 1 during the samples";
const NOISY: &str = "MAD is 8.0% of the median, above the 5% that latency allows";
const BLOCK: u64 = 256 << 20;

fn chase(pages: &str, level: Option<&str>, samples: Vec<f64>) -> ResultRow {
    let mut case = costlab_core::case! {"op" => "chase", "pattern" => "rand", "pages" => pages, "block" => BLOCK, "threads" => 1};
    if let Some(l) = level {
        case.insert("level".into(), l.into());
        case.insert("plateau_from".into(), (64u64 << 20).into());
        case.insert("plateau_to".into(), BLOCK.into());
    }
    ResultRow::new("mem", case, "latency", "ns", samples).unwrap()
}

fn judged(mut r: ResultRow, q: Quality, why: &str) -> ResultRow {
    r.quality = Some(q);
    r.quality_reasons = vec![why.to_string()];
    r
}

/// `mem latency --sizes 256M --pages 4k,thp` beside a CPU hog, as the lab leaves it: both
/// chases marked, their DRAM level rows with them, and the TLB cost derived from the two
/// through `quality::inherit` (as latency.rs's tlb_cost does).
fn disturbed_outcome() -> Outcome {
    let small = judged(
        chase("4k", None, vec![700.0, 719.0, 736.0]),
        Quality::Disturbed,
        DISTURBED,
    );
    let huge = judged(
        chase("thp", None, vec![380.0, 406.0, 450.0]),
        Quality::Noisy,
        NOISY,
    );
    let diff: Vec<f64> = small
        .samples
        .iter()
        .zip(&huge.samples)
        .map(|(a, b)| a - b)
        .collect();
    let mut tlb = ResultRow::new(
        "mem",
        costlab_core::case! {"op" => "chase", "pattern" => "rand", "pages" => "4k", "block" => BLOCK, "threads" => 1, "versus" => "thp"},
        "tlb_cost",
        "ns",
        diff,
    )
    .unwrap();
    quality::inherit(&mut tlb, &[&small, &huge]);
    let mut dram_4k = small.clone();
    dram_4k.case = chase("4k", Some("DRAM"), vec![1.0]).case;
    let mut dram_thp = huge.clone();
    dram_thp.case = chase("thp", Some("DRAM"), vec![1.0]).case;
    Outcome {
        results: vec![small, huge, dram_4k, dram_thp, tlb],
        models: vec![],
        notes: vec![],
    }
}

fn doc(id: &str, started: &str, outcome: Outcome) -> Doc {
    Doc::new(
        RunInfo {
            id: id.into(),
            started: started.into(),
            costlab: "0.1.0".into(),
            command: "costlab mem latency --sizes 256M --pages 4k,thp".into(),
            complete: true,
        },
        common::fixture().machine,
        outcome,
    )
}

fn mem_lab() -> Box<dyn Lab> {
    costlab::registry::all()
        .into_iter()
        .find(|l| l.name() == "mem")
        .unwrap()
}

fn sheet(o: &Outcome) -> Vec<LabSheet> {
    vec![LabSheet {
        lab: "mem".into(),
        status: LabStatus::Ran,
        headlines: mem_lab().sheet_lines(o),
    }]
}

#[test]
fn the_derived_tlb_cost_takes_the_worst_of_its_chases_and_names_both() {
    let o = disturbed_outcome();
    let tlb = o.results.iter().find(|r| r.metric == "tlb_cost").unwrap();
    assert_eq!(tlb.quality, Some(Quality::Disturbed));
    let why = tlb.quality_reasons.join(" | ");
    assert!(why.contains(&format!("from its input mem op=chase pattern=rand pages=4k block={BLOCK} threads=1 latency: disturbed ({DISTURBED})")), "{why}");
    assert!(
        why.contains(&format!(
            "pages=thp block={BLOCK} threads=1 latency: noisy ({NOISY})"
        )),
        "{why}"
    );
    // judge_rows (run on every lab's rows after it returns) keeps the inherited verdict.
    let mut rows = o.results.clone();
    quality::judge_rows(&mut rows);
    assert_eq!(rows, o.results);
}

#[test]
fn every_headline_of_the_sheet_carries_its_mark_tlb_cost_included() {
    let o = disturbed_outcome();
    let s = sheet(&o);
    let line = |label: &str| {
        s[0].headlines
            .iter()
            .find(|h| h.label == label)
            .unwrap_or_else(|| panic!("no {label} in {:?}", s[0].headlines))
    };
    for label in [
        "DRAM latency",
        "TLB cost per access",
        "huge-page latency cut",
    ] {
        let h = line(label);
        assert_eq!(h.quality, Some(Quality::Disturbed), "{label}");
        assert!(
            h.reading.starts_with("not read: disturbed"),
            "{label}: {}",
            h.reading
        );
        assert!(h.reading.contains(DISTURBED), "{label}: {}", h.reading);
    }
    // Read straight from the figure: its own reason; derived: the input is named.
    assert_eq!(line("DRAM latency").quality_reasons, vec![DISTURBED]);
    assert!(line("huge-page latency cut").quality_reasons[0].starts_with("from its input mem"));

    let text = costlab_history::report::sheet::render_text(&s);
    assert!(text.contains("719 ns!"), "{text}");
    assert!(text.contains("line(s) marked: ! disturbed"), "{text}");
}

#[test]
fn the_levels_table_and_the_tlb_line_show_the_marks() {
    let text = mem_lab().render(&disturbed_outcome());
    let levels = &text[text
        .find("levels read off the curve's plateaus")
        .expect(&text)..];
    let dram = levels.lines().find(|l| l.contains("DRAM")).unwrap();
    assert!(dram.contains("!") && dram.contains("~"), "{dram}");
    let tlb = text
        .lines()
        .find(|l| l.starts_with("TLB cost per access"))
        .unwrap();
    assert!(
        tlb.contains("ns!") && tlb.contains("(disturbed: from its input"),
        "{tlb}"
    );
}

#[test]
fn markdown_csv_and_html_carry_the_mark_and_the_reason() {
    let o = disturbed_outcome();
    let d = doc("run-md", "2026-11-25T08:00:00Z", o.clone());
    let s = sheet(&o);

    let md = markdown::render(&d, &s);
    let dram = md
        .lines()
        .find(|l| l.starts_with("| mem | DRAM latency |"))
        .expect(&md);
    assert!(
        dram.contains(&format!("| ! disturbed: {DISTURBED} |")),
        "{dram}"
    );
    let tlb = md
        .lines()
        .find(|l| l.starts_with("| mem | TLB cost per access |"))
        .unwrap();
    assert!(
        tlb.contains("| ! disturbed: from its input mem op=chase"),
        "{tlb}"
    );
    assert!(md.contains("Marks: ! disturbed"));
    // The figures table: the tlb_cost row too.
    let row = md.lines().find(|l| l.contains("| tlb_cost |")).unwrap();
    assert!(row.contains("! disturbed: from its input"), "{row}");

    let tidy = csv::render_tidy(&d, false);
    let tlb = tidy.lines().find(|l| l.contains("tlb_cost")).unwrap();
    assert!(
        tlb.contains("disturbed") && tlb.contains("from its input"),
        "{tlb}"
    );
    assert!(!tlb.contains(",ok,"), "{tlb}");

    let page = html::render(&d, &s, costlab::registry::charts(&d));
    let sheet_html = &page[page.find("id=\"cost-sheet\"").unwrap()..];
    let sheet_html = &sheet_html[..sheet_html.find("</table>").unwrap()];
    let dram = sheet_html
        .split("<tr")
        .find(|r| r.contains("DRAM latency"))
        .unwrap();
    assert!(dram.contains("class=\"q-disturbed\""), "{dram}");
    assert!(dram.contains("719!"), "{dram}");
    assert!(
        dram.contains(&format!("! disturbed: {DISTURBED}")),
        "{dram}"
    );
    assert!(
        !sheet_html.contains("—"),
        "an unjudged figure in {sheet_html}"
    );
    assert!(page.contains("id=\"marks\""));
    // The latency chart marks both chases (one size: bars, hatched).
    let chart = &page[page.find("<svg id=\"chart-mem-latency\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(
        chart.contains("bar-disturbed") && chart.contains("bar-noisy"),
        "{chart}"
    );
    assert!(chart.contains("! disturbed, ~ noisy: not clean"));
}

/// The stored path: `import` (which builds the sheet as a lab command's history does), then
/// `report`, `export --format markdown`, `machines` and `trend` from the history.
#[test]
fn the_history_views_mark_every_figure_of_a_disturbed_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    // A clean run first, then the disturbed one: the trend has two points.
    let mut clean = disturbed_outcome();
    for r in clean.results.iter_mut() {
        r.quality = Some(Quality::Ok);
        r.quality_reasons.clear();
    }
    let runs = [
        doc("run-clean", "2026-11-25T07:00:00Z", clean),
        doc("run-disturbed", "2026-11-25T08:00:00Z", disturbed_outcome()),
    ];
    let mut files = Vec::new();
    for d in &runs {
        let p = dir.path().join(format!("{}.json", d.run.id));
        std::fs::write(&p, serde_json::to_string(d).unwrap()).unwrap();
        files.push(p.to_str().unwrap().to_string());
    }
    let mut args = vec!["import"];
    args.extend(files.iter().map(String::as_str));
    common::costlab_ok(&db, &args);

    let md = String::from_utf8(
        common::costlab_ok(&db, &["export", "last", "--format", "markdown"]).stdout,
    )
    .unwrap();
    for label in ["DRAM latency", "TLB cost per access"] {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| mem | {label} |")))
            .expect(&md);
        assert!(line.contains("| ! disturbed: "), "{line}");
    }

    let out = dir.path().join("report");
    common::costlab_ok(&db, &["report", "last", "--out-dir", out.to_str().unwrap()]);
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    let sheet_html = &page[page.find("id=\"cost-sheet\"").unwrap()..];
    let sheet_html = &sheet_html[..sheet_html.find("</table>").unwrap()];
    assert!(
        sheet_html.contains(&format!("! disturbed: {DISTURBED}")),
        "{sheet_html}"
    );
    assert!(!sheet_html.contains("not judged"));

    let machines = String::from_utf8(common::costlab_ok(&db, &["machines"]).stdout).unwrap();
    for label in ["DRAM latency", "TLB cost per access"] {
        let line = machines
            .lines()
            .find(|l| l.contains(label) && !l.trim_start().starts_with('!'))
            .expect(&machines);
        assert!(line.contains('!'), "{line}");
    }
    assert!(
        machines.contains("! DRAM latency on ") && machines.contains(DISTURBED),
        "{machines}"
    );

    let trend = String::from_utf8(
        common::costlab_ok(
            &db,
            &[
                "trend",
                &format!("mem block={BLOCK} op=chase pages=4k pattern=rand threads=1 latency"),
            ],
        )
        .stdout,
    )
    .unwrap();
    assert!(
        trend.contains(&format!(
            "! run run-disturbed (2026-11-25T08:00:00Z): 719 ns (disturbed: {DISTURBED})"
        )),
        "{trend}"
    );
    assert!(!trend.contains("! run run-clean"), "{trend}");
}
