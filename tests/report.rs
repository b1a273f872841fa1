//! Report generation from the fixture results.json: every chart drawn with its id, axes and
//! legend; the page self-contained; charts of labs that did not run replaced by a line.

mod common;

use costlab::report::{csv, html, markdown};

#[test]
fn fixture_report_draws_every_chart_with_axes_and_legend() {
    let doc = common::fixture();
    let page = html::render(&doc, &common::fixture_sheet(&doc));
    for id in common::CHART_IDS {
        let at = page
            .find(&format!("<svg id=\"{id}\""))
            .unwrap_or_else(|| panic!("no <svg id=\"{id}\"> in the report"));
        let svg = &page[at..at + page[at..].find("</svg>").unwrap()];
        assert!(svg.contains("legend"), "{id} has no legend");
        // Axis labels carry a unit in parentheses (the c2c heatmap: "from CPU (id)").
        assert!(svg.matches(" (").count() >= 2, "{id} lacks axis units");
    }
    assert!(!page.contains("Not drawn"), "a chart was skipped");
    // the latency chart marks the fixture's caches
    for cache in ["L1d 32K", "L2 1M", "L3 32M"] {
        assert!(page.contains(cache), "no {cache} guide");
    }
    // plateau summary rows (extra case keys) are not drawn as a series of their own
    let lat = &page[page.find("<svg id=\"chart-mem-latency\"").unwrap()..];
    let lat = &lat[..lat.find("</svg>").unwrap()];
    assert!(!lat.contains("L2 cache"), "a plateau row became a series");
    // the USL curve is drawn from lambda_mops as the share lab writes it
    assert!(page.contains("USL fit arc-shared"));
    // the paper's GC points
    assert!(page.contains("Biscuit paper"));
    // the cost sheet and notes as HTML
    assert!(page.contains("id=\"cost-sheet\"") && page.contains("syscall s (getppid)"));
    assert!(page.contains("numa</b> skipped: one NUMA node"));
    assert!(page.contains("id=\"notes\"") && page.contains("FIXTURE: every figure"));
}

#[test]
fn report_is_self_contained() {
    let doc = common::fixture();
    let page = html::render(&doc, &common::fixture_sheet(&doc));
    let lower = page.to_lowercase();
    for banned in ["<script", "<link", "@import", "src=", "<img", "<iframe"] {
        assert!(!lower.contains(banned), "report contains {banned}");
    }
    // The only URL is the SVG namespace, which is a name, not a fetch.
    let urls = lower.matches("http").count();
    let ns = lower
        .matches("xmlns=\"http://www.w3.org/2000/svg\"")
        .count();
    assert_eq!(urls, ns);
    assert!(page.starts_with("<!DOCTYPE html>"));
}

#[test]
fn charts_of_labs_that_did_not_run_are_a_line_of_text() {
    let mut doc = common::fixture();
    doc.results
        .retain(|r| r.lab != "gc" && r.lab != "share c2c" && r.lab != "echo");
    doc.models.clear();
    let page = html::render(&doc, &[]);
    assert!(!page.contains("<svg id=\"chart-gc-headroom\""));
    assert!(page.contains("id=\"chart-gc-headroom-skipped\">Not drawn: the gc lab did not run."));
    assert!(page.contains("id=\"chart-echo-p99-skipped\""));
    assert!(page.contains("id=\"chart-c2c-skipped\""));
    assert!(page.contains("id=\"chart-models-skipped\""));
    assert!(page.contains("<svg id=\"chart-mem-latency\""));
    // no headline: the sheet says so
    assert!(page.contains("no lab gave a headline figure"));
}

#[test]
fn incomplete_runs_say_so() {
    let mut doc = common::fixture();
    doc.run.complete = false;
    assert!(html::render(&doc, &[]).contains("This run is incomplete"));
}

#[test]
fn write_report_writes_the_page_and_the_doc() {
    let doc = common::fixture();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested/report");
    let page = html::write_report(&out, &doc, &[]).unwrap();
    assert_eq!(page, out.join("index.html"));
    let back = std::fs::read_to_string(out.join("results.json")).unwrap();
    let back = costlab::report::Doc::from_json(&back).unwrap();
    assert_eq!(back.results.len(), doc.results.len());
    assert_eq!(back.run, doc.run);
}

#[test]
fn csv_and_markdown_exports() {
    let doc = common::fixture();
    let text = csv::render(&doc);
    let lines: Vec<&str> = text.lines().collect();
    // Tidy: one row per figure, the plateau copies (case key "level") folded into their row.
    let plateaus = doc
        .results
        .iter()
        .filter(|r| r.case.contains_key("level"))
        .count();
    assert_eq!(lines.len(), doc.results.len() - plateaus + 1);
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(
        &header[..7],
        ["run_id", "lab", "op", "pattern", "pages", "block", "threads"]
    );
    assert!(
        lines[0].ends_with(
            ",metric,unit,median,min,max,mad,n,quality,quality_reasons,other_cpu_max_pct,steal_pct"
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains(",level,"), "{}", lines[0]);
    assert!(lines[1].starts_with("20261122T100000Z-f1x7e0,mem,read,seq,4k,16384,1,"));
    // Every line has the header's number of cells (no quoting needed in this fixture).
    for l in &lines {
        assert_eq!(l.split(',').count(), header.len(), "{l}");
    }
    let md = markdown::render(&doc, &common::fixture_sheet(&doc));
    for want in [
        "# costlab run 20261122T100000Z-f1x7e0",
        "## Cost sheet",
        "| syscall | syscall s (getppid) |",
        "- numa skipped: one NUMA node",
        "## mem",
        "## share c2c",
        "### share — USL arc-shared",
        "## Notes",
    ] {
        assert!(md.contains(want), "markdown lacks {want}");
    }
}
