//! The machine's cost sheet: one line per headline figure of every lab that ran, grouped by
//! lab, and a line for each lab that was skipped, failed or cut short, saying why.

use costlab_core::measure::Summary;
use costlab_core::model::Headline;
pub use costlab_core::model::{LabSheet, LabStatus};

/// A figure with as many digits as it deserves: three significant digits, no exponent.
pub fn figure(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        // 0.0123 -> 4 decimals: keep three significant digits.
        (2 - a.log10().floor() as i32).clamp(2, 9) as usize
    };
    format!("{x:.decimals$}")
}

/// The verdict's mark after a headline's unit: "!" disturbed, "~" noisy, nothing for ok.
fn mark(h: &Headline) -> &'static str {
    h.quality.map_or("", |q| q.mark())
}

/// "min–max, MAD m, n=7": the spread beside a median.
pub fn spread(s: &Summary) -> String {
    format!(
        "{}–{}, MAD {}, n={}",
        figure(s.min),
        figure(s.max),
        figure(s.mad),
        s.n
    )
}

/// The sheet for a terminal: a heading per lab, then one aligned line per headline (figure,
/// median with unit, spread, reading). Plain lines rather than a table: readings are long
/// and a table would wrap or widen every row to the longest.
pub fn render_text(sheet: &[LabSheet]) -> String {
    let lines: Vec<(&str, String, String, &str)> = sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .map(|h| {
            (
                h.label.as_str(),
                format!("{} {}{}", figure(h.summary.median), h.unit, mark(h)),
                spread(&h.summary),
                h.reading.as_str(),
            )
        })
        .collect();
    let w0 = lines.iter().map(|l| l.0.chars().count()).max().unwrap_or(0);
    let w1 = lines.iter().map(|l| l.1.chars().count()).max().unwrap_or(0);
    let w2 = lines.iter().map(|l| l.2.chars().count()).max().unwrap_or(0);
    let mut out = String::from("cost sheet (median, then min–max, MAD and n of the samples)\n");
    let mut any = false;
    for lab in sheet {
        if lab.headlines.is_empty() {
            continue;
        }
        any = true;
        out.push_str(&format!("{}\n", lab.lab));
        for h in &lab.headlines {
            let fig = format!("{} {}{}", figure(h.summary.median), h.unit, mark(h));
            out.push_str(&format!(
                "  {:<w0$}  {:>w1$}  {:<w2$}  {}\n",
                h.label,
                fig,
                spread(&h.summary),
                h.reading
            ));
        }
    }
    if !any {
        out.push_str("(no lab gave a figure)\n");
    }
    let marked = sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .filter(|h| !mark(h).is_empty())
        .count();
    if marked > 0 {
        out.push_str(&format!(
            "{marked} line(s) marked: ! disturbed (something else ran, or the case's condition was not met), ~ noisy (the spread does not support a reading); the reading says why\n"
        ));
    }
    for lab in sheet {
        if let Some(reason) = lab.status.reason() {
            out.push_str(&format!("{} {}: {reason}\n", lab.lab, lab.status.word()));
        } else if lab.headlines.is_empty() {
            out.push_str(&format!("{} ran but gave no headline figure\n", lab.lab));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_three_significant_digits() {
        assert_eq!(figure(31.234), "31.2");
        assert_eq!(figure(1234.4), "1234");
        assert_eq!(figure(2.345), "2.35");
        assert_eq!(figure(0.01234), "0.0123");
        assert_eq!(figure(0.0), "0");
    }

    #[test]
    fn sheet_lists_headlines_and_skipped_labs() {
        let s = Summary::of(&[10.0, 11.0, 12.0]).unwrap();
        let sheet = vec![
            LabSheet {
                lab: "syscall".into(),
                status: LabStatus::Ran,
                headlines: vec![Headline {
                    label: "syscall s (getppid)".into(),
                    summary: s,
                    unit: "ns".into(),
                    reading: "a null syscall costs 11 ns".into(),
                    ..Default::default()
                }],
            },
            LabSheet {
                lab: "gc".into(),
                status: LabStatus::Skipped("no Go toolchain: install golang-go".into()),
                headlines: vec![],
            },
        ];
        let text = render_text(&sheet);
        assert!(text.contains("syscall s (getppid)"));
        assert!(text.contains("10.0–12.0, MAD 1.00, n=3"));
        assert!(text.contains("gc skipped: no Go toolchain: install golang-go"));
        let json = serde_json::to_string(&sheet[1].status).unwrap();
        assert_eq!(
            json,
            r#"{"status":"skipped","reason":"no Go toolchain: install golang-go"}"#
        );
    }
}
