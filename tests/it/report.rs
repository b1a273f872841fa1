//! Report generation from the fixture results.json: every chart drawn with its id, axes and
//! legend; the page self-contained; labs that did not run named in one line, not cards;
//! captions and legends that say only what is drawn.

use crate::common;

use costlab::registry;
use costlab_history::report::export::{csv, markdown};
use costlab_history::report::{html, Doc};

/// The report page of `doc` with no cost sheet, the labs' charts drawn as the runner draws them.
fn page_of(doc: &Doc) -> String {
    html::render(doc, &[], registry::charts(doc))
}

#[test]
fn fixture_report_draws_every_chart_with_axes_and_legend() {
    let doc = common::fixture();
    let page = html::render(&doc, &common::fixture_sheet(&doc), registry::charts(&doc));
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
    let page = html::render(&doc, &common::fixture_sheet(&doc), registry::charts(&doc));
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
fn labs_that_did_not_run_are_one_line_at_the_end_not_cards() {
    let mut doc = common::fixture();
    doc.results
        .retain(|r| r.lab != "gc" && r.lab != "share c2c" && r.lab != "echo");
    doc.models.clear();
    let page = html::render(&doc, &[], registry::charts(&doc));
    assert!(!page.contains("<svg id=\"chart-gc-headroom\""));
    assert!(
        !page.contains("did not run"),
        "a card for a lab that did not run"
    );
    assert!(!page.contains("id=\"chart-gc-headroom-skipped\""));
    assert!(!page.contains("id=\"chart-echo-p99-skipped\""));
    assert!(page.contains("id=\"not-run\">Not run: echo, gc.</p>"));
    // share ran (its scaling rows) without the core-to-core sweep: that card says why.
    assert!(page.contains("id=\"chart-c2c-skipped\">Not drawn: the share lab ran without"));
    // no model, no models chart
    assert!(!page.contains("chart-models"));
    assert!(page.contains("<svg id=\"chart-mem-latency\""));
    // no headline: the sheet says so
    assert!(page.contains("no lab gave a headline figure"));
}

/// The fixture cut to one lab, as `costlab syscall --quick` leaves a run.
pub fn one_lab(lab: &str) -> Doc {
    let mut doc = common::fixture();
    doc.results.retain(|r| r.lab == lab);
    doc.models.retain(|m| m.lab == lab);
    assert!(!doc.results.is_empty(), "the fixture has no {lab} rows");
    doc
}

#[test]
fn a_one_lab_report_shows_only_what_ran() {
    let doc = one_lab("syscall");
    let page = html::render(&doc, &[], registry::charts(&doc));
    assert!(
        !page.contains("Not drawn"),
        "cards for labs that did not run"
    );
    assert!(!page.contains("did not run"));
    let line = "id=\"not-run\">Not run: mem, echo, share, gc.</p>";
    assert_eq!(page.matches("id=\"not-run\"").count(), 1);
    assert!(page.contains(line), "no one line of labs not run");
    // At the end: after every chart and table, before the closing note.
    let at = page.find(line).unwrap();
    assert!(!page[at..].contains("<figure") && !page[at..].contains("<table"));
}

#[test]
fn the_full_report_has_no_not_run_line_and_its_captions_match_the_marks() {
    let doc = common::fixture();
    let page = html::render(&doc, &common::fixture_sheet(&doc), registry::charts(&doc));
    assert!(!page.contains("id=\"not-run\""));
    // The latency chart draws its cache lines and says so.
    let lat = &page[page.find("<svg id=\"chart-mem-latency\"").unwrap()..];
    let (svg, rest) = lat.split_at(lat.find("</svg>").unwrap());
    assert!(
        svg.contains("stroke-dasharray=\"4 3\""),
        "no dashed cache line"
    );
    let caption = &rest[..rest.find("</figcaption>").unwrap()];
    assert!(caption.contains("Dashed lines mark the cache sizes"));
    // Line charts key their series with lines; no square swatch where no bar is drawn.
    for id in common::CHART_IDS {
        let at = page.find(&format!("<svg id=\"{id}\"")).unwrap();
        let svg = &page[at..at + page[at..].find("</svg>").unwrap()];
        let bars = svg.contains("<rect class=\"bar\"");
        assert_eq!(
            svg.contains("legend-swatch"),
            bars,
            "{id}: legend keys do not match the marks"
        );
    }
}

#[test]
fn a_single_size_latency_chart_is_bars_without_cache_lines_in_its_caption() {
    let mut doc = one_lab("mem");
    let keep = doc
        .results
        .iter()
        .find(|r| r.metric == "latency" && r.key("op") == "chase")
        .map(|r| r.key("block"))
        .expect("a chase row");
    doc.results
        .retain(|r| !(r.metric == "latency" && r.key("op") == "chase") || r.key("block") == keep);
    let page = html::render(&doc, &[], registry::charts(&doc));
    let lat = &page[page.find("<svg id=\"chart-mem-latency\"").unwrap()..];
    let (svg, rest) = lat.split_at(lat.find("</svg>").unwrap());
    assert!(
        svg.contains("<rect class=\"bar\""),
        "one size is drawn as bars"
    );
    assert!(!svg.contains("stroke-dasharray=\"4 3\""));
    let caption = &rest[..rest.find("</figcaption>").unwrap()];
    assert!(
        !caption.contains("Dashed"),
        "the caption names lines not drawn: {caption}"
    );
    // The bars' legend has square swatches, not line-and-dot keys.
    let legend = &svg[svg.find(">legend<").unwrap()..];
    assert!(legend.contains("legend-swatch"));
    assert!(!legend.contains("<line") && !legend.contains("<circle"));
}

#[test]
fn incomplete_runs_say_so() {
    let mut doc = common::fixture();
    doc.run.complete = false;
    assert!(html::render(&doc, &[], registry::charts(&doc)).contains("This run is incomplete"));
}

#[test]
fn write_report_writes_the_page_and_the_doc() {
    let doc = common::fixture();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested/report");
    let page = html::write_report(&out, &doc, &[], registry::charts(&doc)).unwrap();
    assert_eq!(page, out.join("index.html"));
    let back = std::fs::read_to_string(out.join("results.json")).unwrap();
    crate::common::schema::doc(&back);
    let back = costlab_history::report::Doc::from_json(&back).unwrap();
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

/// The <svg> of chart `id` in `page`.
fn svg_of<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("no <svg id=\"{id}\">"));
    &page[at..at + page[at..].find("</svg>").unwrap()]
}

/// Every text of a class in an svg: `<text class="xtick" ...>TEXT</text>`.
fn texts<'a>(svg: &'a str, class: &str) -> Vec<&'a str> {
    svg.split(&format!("<text class=\"{class}\""))
        .skip(1)
        .map(|t| {
            let t = &t[t.find('>').unwrap() + 1..];
            &t[..t.find("</text>").unwrap()]
        })
        .collect()
}

#[test]
fn one_block_is_a_bar_chart_one_bar_per_series() {
    let mut doc = common::fixture();
    // The quick plan: one block size.
    doc.results.retain(|r| {
        r.lab != "mem" || r.metric != "bandwidth" || r.case.get("block") == Some(&1073741824.into())
    });
    let series = doc
        .results
        .iter()
        .filter(|r| r.lab == "mem" && r.metric == "bandwidth" && r.key("pattern") == "seq")
        .count();
    assert!(series >= 2);
    let page = html::render(&doc, &[], registry::charts(&doc));
    let svg = svg_of(&page, "chart-mem-bandwidth-seq");
    assert!(svg.contains("data-kind=\"bar\""), "not a bar chart");
    assert_eq!(svg.matches("<rect class=\"bar\"").count(), series);
    assert!(!svg.contains("<polyline"));
    assert!(svg.contains("block size (bytes): 1G"));
    // The full fixture (five blocks) stays a line chart.
    let full = page_of(&common::fixture());
    assert!(svg_of(&full, "chart-mem-bandwidth-seq").contains("data-kind=\"line\""));
}

#[test]
fn share_chart_has_whole_thread_ticks_and_a_full_legend() {
    let page = page_of(&common::fixture());
    let svg = svg_of(&page, "chart-share-scaling");
    let ticks = texts(svg, "xtick");
    assert!(!ticks.is_empty());
    for t in &ticks {
        assert!(
            t.parse::<u32>().is_ok(),
            "thread tick {t} is not a whole number"
        );
    }
    // No legend entry is cut: every name is whole, and none is elided.
    for e in texts(svg, "legend-entry") {
        assert!(!e.contains('…'), "legend entry cut: {e}");
    }
    assert!(!svg.contains("more</text>"));
    assert!(svg.contains(">USL fit (dashed)</text>"));
}

#[test]
fn models_are_one_table_with_three_significant_digits() {
    let mut doc = common::fixture();
    let i = doc.models.iter().position(|m| m.lab == "share").unwrap();
    let m = &mut doc.models[i];
    m.params
        .insert("lambda_mops".into(), serde_json::json!(101.75066768882248));
    m.params.insert("sigma".into(), serde_json::json!(0.012345));
    // A bound fitted to two points: two parameters, met exactly.
    m.params
        .insert("fit".into(), serde_json::json!("sigma-only bound"));
    m.points.truncate(2);
    for p in &mut m.points {
        p.predicted = p.measured;
    }
    let page = html::render(&doc, &[], registry::charts(&doc));
    let table = &page[page
        .find("<table id=\"model-params\"")
        .expect("params table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("lambda_mops = 102"), "{table}");
    assert!(table.contains("sigma = 0.0123"), "{table}");
    assert!(!page.contains("101.75"), "a raw parameter is left");
    assert!(
        table.contains("exact: two points, two parameters"),
        "{table}"
    );
    // One table for every model, no section per model; verdicts folded under the charts.
    assert_eq!(page.matches("<table id=\"model-params\"").count(), 1);
    assert!(!page.contains("<h3>"));
    assert!(page.contains("<details><summary>verdict and points</summary>"));
    // Model axes name a unit, not "(case)".
    assert!(!page.contains("(case)"));
}

#[test]
fn against_overlays_the_second_run_and_rings_changes() {
    let b = common::fixture();
    let mut a = common::fixture();
    a.run.id = "20261123T100000Z-aaaaaa".into();
    for r in &mut a.results {
        for s in &mut r.samples {
            *s *= 2.0;
        }
        r.summary = costlab_core::measure::Summary::of(&r.samples).unwrap();
    }
    let page = html::render_against(
        &a,
        &[],
        None,
        registry::charts(&a),
        (&b, registry::charts(&b)),
        5.0,
    );
    assert!(page.contains("id=\"against\""));
    assert!(page.contains("id=\"changes\""));
    for id in common::CHART_IDS {
        if id == "chart-c2c" {
            continue; // a heatmap: one run only
        }
        let svg = svg_of(&page, id);
        assert!(svg.contains(">A: 20261123T100000Z-aaaaaa</text>"), "{id}");
        assert!(svg.contains(">B: 20261122T100000Z-f1x7e0</text>"), "{id}");
    }
    let bw = svg_of(&page, "chart-mem-bandwidth-seq");
    assert!(bw.contains(" (B)</text>") && bw.contains("opacity=\"0.5\""));
    assert!(bw.contains("class=\"mark\"") && bw.contains("+100%"));
    // The same run against itself: nothing to ring.
    let same = html::render_against(
        &b,
        &[],
        None,
        registry::charts(&b),
        (&b, registry::charts(&b)),
        5.0,
    );
    assert!(!same.contains("class=\"mark\""));
}

#[test]
fn echo_with_several_sizes_draws_size_charts() {
    let mut doc = common::fixture();
    let extra: Vec<_> = doc
        .results
        .iter()
        .filter(|r| r.lab == "echo")
        .cloned()
        .map(|mut r| {
            r.case.insert("size".into(), serde_json::json!(16384));
            r
        })
        .collect();
    doc.results.extend(extra);
    let page = html::render(&doc, &[], registry::charts(&doc));
    let svg = svg_of(&page, "chart-echo-size-throughput");
    assert!(svg.contains("message size (bytes)"));
    assert!(svg.contains(">16K</text>"));
    assert!(
        page.contains("<svg id=\"chart-echo-size-cpu\"")
            || page.contains("chart-echo-size-cpu-skipped")
    );
    // Against connections: one size only, so no line mixes sizes.
    let conns = svg_of(&page, "chart-echo-throughput");
    assert!(!conns.contains("16384"));
    // One size: no size chart at all.
    assert!(!page_of(&common::fixture()).contains("chart-echo-size"));
}

#[test]
fn counters_show_in_the_report() {
    let mut doc = common::fixture();
    let r = doc.results.iter_mut().find(|r| r.lab == "syscall").unwrap();
    r.counters = Some([("page-faults".to_string(), 1234.0)].into_iter().collect());
    r.unsupported_counters = Some(
        [(
            "instructions".to_string(),
            "no hardware PMU in this VM".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    let page = html::render(&doc, &[], registry::charts(&doc));
    assert!(page.contains("<table id=\"counters\"") && page.contains("page-faults"));
    assert!(page.contains("instructions: no hardware PMU in this VM"));
    assert!(!page_of(&common::fixture()).contains("id=\"counters\""));
}
