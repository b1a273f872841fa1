//! `costlab price`'s terminal table: each event priced (and priced on another machine with
//! --on), then the check against the program's system time.

use crate::LAB;
use costlab_core::measure::units::human_ns;
use costlab_history::report::{table, Outcome, ResultRow};

/// The table: class, event, count, unit cost, priced (bounds), share; with `--on`, that
/// machine's unit cost and price beside them; then the check.
pub fn render(o: &Outcome) -> String {
    let ours: Vec<&ResultRow> = o.results.iter().filter(|r| r.lab == LAB).collect();
    let on: Option<String> = ours.iter().find_map(|r| {
        r.case
            .get("on")
            .and_then(|v| v.as_str())
            .map(str::to_string)
    });
    let find = |class: &str, event: &str, metric: &str, there: bool| {
        ours.iter()
            .find(|r| {
                r.key("class") == class
                    && r.key("event") == event
                    && r.metric == metric
                    && r.case.contains_key("on") == there
            })
            .copied()
    };
    let get = |class: &str, event: &str, metric: &str| find(class, event, metric, false);
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in &ours {
        let k = (r.key("class"), r.key("event"));
        if r.metric == "count" && !keys.contains(&k) {
            keys.push(k);
        }
    }
    // Most priced first; unpriced after, by count.
    let priced_of =
        |k: &(String, String)| get(&k.0, &k.1, "priced").map_or(-1.0, |r| r.summary.median);
    keys.sort_by(|a, b| priced_of(b).total_cmp(&priced_of(a)));
    let unit_text = |u: Option<&ResultRow>| u.map_or("—".into(), table::median_marked);
    let priced_text = |p: Option<&ResultRow>| {
        p.map_or("not priced".into(), |p| {
            format!(
                "{} ({}–{})",
                human_ns(p.summary.median),
                human_ns(p.summary.min),
                human_ns(p.summary.max)
            )
        })
    };
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|(c, e)| {
            let count = get(c, e, "count").map_or(0.0, |r| r.summary.median);
            let share = get(c, e, "share");
            let mut row = vec![
                c.clone(),
                e.clone(),
                format!("{count:.0}"),
                unit_text(get(c, e, "unit_cost")),
                priced_text(get(c, e, "priced")),
            ];
            if on.is_some() {
                row.push(unit_text(find(c, e, "unit_cost", true)));
                row.push(priced_text(find(c, e, "priced", true)));
            }
            row.push(share.map_or("—".into(), |s| format!("{:.1}%", s.summary.median)));
            row
        })
        .collect();
    let mut head: Vec<String> = ["class", "event", "count", "unit ns", "priced"]
        .map(String::from)
        .to_vec();
    if let Some(m) = &on {
        let short: String = m.chars().take(8).collect();
        head.push(format!("unit ns on {short}"));
        head.push(format!("priced on {short}"));
    }
    head.push("share of CPU".into());
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut out = table::render(&head, &rows);
    out += &crate::measured::beside::render(o);
    out.push('\n');
    for m in o.models.iter().filter(|m| m.lab == LAB) {
        for v in &m.verdict {
            out += &format!("{v}\n");
        }
    }
    out
}
