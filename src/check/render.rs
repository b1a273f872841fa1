//! `check`'s findings as a table for the terminal, the busy processes under it, and a last
//! line that says whether anything should disturb figures.

use super::{Level, Report};

/// The findings as a table for the terminal.
pub fn render(r: &Report) -> String {
    let mut rows = Vec::new();
    for f in &r.findings {
        let mark = match f.level {
            Level::Ok => "ok",
            Level::Warn => "WARN",
            Level::Info => "info",
        };
        rows.push(vec![
            f.item.clone(),
            mark.to_string(),
            f.value.clone(),
            f.fix.clone(),
        ]);
    }
    let mut out = format!(
        "what may disturb figures on this machine (watched for {:.1} s)\n",
        r.window_s
    );
    out.push_str(&costlab_history::report::table::render(
        &["item", "", "state", "fix"],
        &rows,
    ));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !r.busy.is_empty() {
        out.push_str("busy processes (CPU % of one CPU while we watched):\n");
        for b in r.busy.iter().take(10) {
            out.push_str(&format!(
                "  {:>6}  {:<20} {:>5.0}%\n",
                b.pid, b.name, b.cpu_pct
            ));
        }
    }
    let warns = r.findings.iter().filter(|f| f.level == Level::Warn).count();
    out.push_str(&if warns == 0 {
        "nothing here should disturb costlab's figures\n".to_string()
    } else {
        format!("{warns} item(s) may disturb figures; figures taken meanwhile carry their conditions and verdicts\n")
    });
    out
}
