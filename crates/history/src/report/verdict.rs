//! How verdicts are shown: the footnote under every lab's table, the lines of `--strict`, and
//! the headline readings that follow the verdict (a gain its spread does not support is not
//! stated).

use costlab_core::measure::quality::THRESHOLDS_HELP;
use costlab_core::model::Quality;
use costlab_core::model::{LabSheet, ResultRow};

use crate::store::Store;

/// One line per figure that is not ok: mark, name, median and the first reason.
pub fn not_ok_lines(rows: &[ResultRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| matches!(r.quality, Some(q) if q != Quality::Ok))
        .map(|r| {
            let q = r.quality.unwrap_or(Quality::Ok);
            format!(
                "{} {}: {} = {} {} ({})",
                q.mark(),
                q.word(),
                r.name(),
                costlab_core::measure::units::sig(r.summary.median, 3),
                r.unit,
                r.quality_reasons.join("; ")
            )
        })
        .collect()
}

/// The footnote printed under a lab's tables: how many figures are not ok, and why each.
pub fn footnote(rows: &[ResultRow]) -> String {
    let judged = rows.iter().filter(|r| r.quality.is_some()).count();
    let lines = not_ok_lines(rows);
    if judged == 0 {
        return String::new();
    }
    if lines.is_empty() {
        let watched = rows.iter().filter(|r| r.conditions.is_some()).count();
        return format!(
            "quality: all {judged} figures ok ({watched} with their conditions recorded: no other process above 10% of a used CPU, no steal above 5%, spreads within their thresholds)\n"
        );
    }
    let mut out = format!(
        "quality: {} of {judged} figures are not ok (! disturbed, ~ noisy) and must not be read as clean:\n",
        lines.len()
    );
    for l in lines {
        out.push_str("  ");
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str(&format!("  ({THRESHOLDS_HELP})\n"));
    out
}

/// A verdict in words for a table's quality cell: "" when unjudged, "ok", or the mark, the
/// word and why ("! disturbed: other processes took 48% of CPU 1 during the samples").
pub fn verdict_text(q: Option<Quality>, reasons: &[String]) -> String {
    match q {
        None => String::new(),
        Some(Quality::Ok) => Quality::Ok.word().to_string(),
        Some(q) if reasons.is_empty() => format!("{} {}", q.mark(), q.word()),
        Some(q) => format!("{} {}: {}", q.mark(), q.word(), reasons.join("; ")),
    }
}

/// What the marks mean, said once under any table or chart that shows one.
pub const MARKS_LEGEND: &str = "! disturbed (something else ran on its CPUs, the host stole \
time, or the case's condition was not met), ~ noisy (the spread does not support a reading); \
a figure derived from others takes the worst mark of its inputs and names which";

/// The mark beside a figure in a table ("" for ok or unjudged).
pub fn mark(r: &ResultRow) -> &'static str {
    r.quality.map_or("", Quality::mark)
}

/// What would give a reading of a figure not read for its verdict `q`.
pub fn not_read_remedy(q: Quality) -> &'static str {
    match q {
        Quality::Disturbed => "run again on a quiet machine (`costlab check` lists what disturbs)",
        _ => "more samples or a quieter machine would resolve it",
    }
}

/// A headline's reading for a view that shows its verdict and reasons in a column of their
/// own (the report's sheet): a figure not read says so and what would resolve it, without
/// repeating the reasons beside it.
pub fn reading_beside_verdict(h: &costlab_core::model::Headline) -> String {
    match h.quality {
        Some(q @ (Quality::Disturbed | Quality::Noisy)) if h.reading.starts_with("not read:") => {
            format!("not read; {}", not_read_remedy(q))
        }
        _ => h.reading.clone(),
    }
}

/// Make each headline's verdict and reading follow the evidence:
/// - a headline read straight from a figure takes that figure's verdict (labs may also set
///   it with `Headline::judged_by` for figures derived from several);
/// - a disturbed or noisy headline states no cost or gain: its reading says why not;
/// - a ratio whose range crosses 1 reads as level;
/// - a share or tax whose range reaches zero or below reads as below what the machine resolves.
pub fn follow(headlines: &mut [costlab_core::model::Headline], rows: &[ResultRow]) {
    for h in headlines.iter_mut() {
        if h.quality.is_none() {
            if let Some(r) = rows
                .iter()
                .filter(|r| r.summary == h.summary && r.quality.is_some())
                .max_by_key(|r| r.quality)
            {
                h.quality = r.quality;
                h.quality_reasons = r.quality_reasons.clone();
            }
        }
        let s = h.summary;
        if let Some(q @ (Quality::Disturbed | Quality::Noisy)) = h.quality {
            h.reading = format!(
                "not read: {} ({}); {}",
                q.word(),
                h.quality_reasons.join("; "),
                not_read_remedy(q)
            );
            continue;
        }
        if h.unit == "x" && s.n > 1 && s.min < 1.0 && s.max > 1.0 {
            h.reading = format!(
                "level: the spread {}–{} crosses 1, so neither side is faster here",
                crate::report::sheet::figure(s.min),
                crate::report::sheet::figure(s.max)
            );
            h.quality.get_or_insert(Quality::Ok);
        } else if h.unit == "%" && is_difference(&h.label) && (s.median <= 0.0 || s.min < 0.0) {
            h.reading = format!(
                "below what this machine resolves: the samples range {}..{} %, which includes no cost",
                crate::report::sheet::figure(s.min),
                crate::report::sheet::figure(s.max)
            );
            if h.quality.is_none_or(|q| q == Quality::Ok) {
                h.quality = Some(Quality::Noisy);
                h.quality_reasons = vec!["its range reaches zero or below".into()];
            }
        }
    }
}

/// `follow` over a whole sheet, each lab's headlines against that lab's figures: for a sheet
/// read back from the history, whose headlines may predate their verdicts.
pub fn judge_sheet(sheet: &mut [costlab_core::model::LabSheet], rows: &[ResultRow]) {
    for lab in sheet.iter_mut() {
        let own: Vec<ResultRow> = rows.iter().filter(|r| r.lab == lab.lab).cloned().collect();
        follow(&mut lab.headlines, &own);
    }
}

/// Headlines whose figure is a difference between two measurements (a tax, a cut, an
/// overhead): a value at or below zero is no cost, not a negative one.
fn is_difference(label: &str) -> bool {
    ["tax", "cut", "overhead", "slowdown", "cost"]
        .iter()
        .any(|w| label.contains(w))
}

/// A stored run's sheet with every headline judged. Runs stored before headlines carried their
/// verdict get it from the run's stored figures (loaded only then), so `machines`, `report`
/// and `export` mark an old run's figures as they mark a new one's.
pub fn judged_sheet(store: &Store, id: &str) -> anyhow::Result<Vec<LabSheet>> {
    let mut sheet = store.load_sheet(id)?;
    if sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .any(|h| h.quality.is_none())
    {
        let doc = store.load_doc(id)?;
        judge_sheet(&mut sheet, &doc.results);
    }
    Ok(sheet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::measure::Summary;
    use costlab_core::model::Headline;

    fn h(label: &str, unit: &str, samples: &[f64]) -> Headline {
        Headline {
            label: label.into(),
            summary: Summary::of(samples).unwrap(),
            unit: unit.into(),
            reading: "a gain of 30%".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_ratio_crossing_one_reads_level() {
        let mut hs = vec![h("uring/epoll", "x", &[0.9, 1.0, 1.1])];
        follow(&mut hs, &[]);
        assert!(hs[0].reading.starts_with("level:"), "{}", hs[0].reading);
        let mut hs = vec![h("uring/epoll", "x", &[1.2, 1.3, 1.4])];
        follow(&mut hs, &[]);
        assert_eq!(hs[0].reading, "a gain of 30%");
    }

    /// The text sheet has no quality column, so its reading names the reasons; the report's
    /// sheet gives them in its quality column and its reading only says what would resolve it.
    #[test]
    fn a_noisy_headline_names_its_reason_once_beside_its_verdict() {
        let mut hs = vec![h("TLB cost per access", "ns", &[51.2, 60.6, 88.6])];
        hs[0].quality = Some(Quality::Noisy);
        hs[0].quality_reasons = vec!["MAD is 15.5% of the median".into()];
        follow(&mut hs, &[]);
        assert_eq!(
            hs[0].reading,
            "not read: noisy (MAD is 15.5% of the median); more samples or a quieter machine would resolve it"
        );
        let beside = reading_beside_verdict(&hs[0]);
        assert_eq!(
            beside,
            "not read; more samples or a quieter machine would resolve it"
        );
        assert!(!beside.contains("MAD"));
        let mut ok = vec![h("L1 latency", "ns", &[1.0, 1.1, 1.2])];
        follow(&mut ok, &[]);
        assert_eq!(reading_beside_verdict(&ok[0]), "a gain of 30%");
    }

    #[test]
    fn a_negative_tax_is_below_resolution_not_a_negative_cost() {
        let mut hs = vec![h("prologue tax", "%", &[-8.0, -5.9, 3.0])];
        follow(&mut hs, &[]);
        assert!(hs[0]
            .reading
            .starts_with("below what this machine resolves"));
        assert_eq!(hs[0].quality, Some(Quality::Noisy));
    }

    #[test]
    fn a_disturbed_source_figure_silences_the_reading() {
        let mut row = ResultRow::new(
            "share",
            costlab_core::case! {"variant" => "arc-shared", "threads" => 2},
            "throughput",
            "Mop/s",
            vec![1.0, 1.1, 1.2],
        )
        .unwrap();
        row.quality = Some(Quality::Disturbed);
        row.quality_reasons = vec!["other processes took 48% of CPU 1 during the samples".into()];
        let mut hs = vec![h("share ratio", "x", &[7.0, 8.0, 9.0]).judged_by(&[&row])];
        follow(&mut hs, &[]);
        // A ratio is derived: its reason names the input it inherits from.
        assert!(
            hs[0].reading.starts_with(
                "not read: disturbed (from its input share variant=arc-shared threads=2 throughput: disturbed (other processes took 48%"
            ),
            "{}",
            hs[0].reading
        );
        // Straight from a figure: found by its summary.
        let mut hs = vec![Headline {
            summary: row.summary,
            ..h("throughput", "Mop/s", &[1.0])
        }];
        follow(&mut hs, std::slice::from_ref(&row));
        assert_eq!(hs[0].quality, Some(Quality::Disturbed));
        assert!(not_ok_lines(&[row])[0].starts_with(
            "! disturbed: share variant=arc-shared threads=2 throughput = 1.10 Mop/s"
        ));
    }
}
