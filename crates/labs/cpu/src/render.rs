//! The cpu lab's tables: one per test, ns per element with its spread and mark, and with
//! `--counters` IPC and the counters that explain the test (branch misses; cache misses),
//! each read, or unsupported with why.

use costlab_history::report::{table, verdict, Outcome, ResultRow};

use costlab_core::measure::sizes::format_size;

/// The counters shown per test: (column, counter name as read, name per element).
fn counter_columns(test: &str) -> [(&'static str, &'static str); 2] {
    match test {
        "branch" => [("IPC", "IPC"), ("branch-misses/el", "branch-misses")],
        _ => [("IPC", "IPC"), ("cache-misses/el", "cache-misses")],
    }
}

/// A counter's cell: its value, or why it is missing ("unsupported: no PMU").
pub fn counter_cell(r: &ResultRow, name: &str) -> String {
    let counted = r.counters.as_ref().and_then(|c| {
        c.get(name)
            .or_else(|| c.get(&format!("{name}/element")))
            .copied()
    });
    if let Some(v) = counted {
        return if name == "IPC" {
            format!("{v:.2}")
        } else {
            format!("{v:.3}")
        };
    }
    match r.unsupported_counters.as_ref().and_then(|u| u.get(name)) {
        Some(why) if why.starts_with("no hardware PMU") => "unsupported: no PMU".into(),
        Some(why) => format!("unsupported: {why}"),
        None => "—".into(),
    }
}

pub fn render(out: &Outcome) -> String {
    let mut text = String::new();
    for test in ["branch", "loop-order"] {
        let rows: Vec<&ResultRow> = out
            .results
            .iter()
            .filter(|r| r.metric == "time" && r.key("test") == test)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let counted = rows
            .iter()
            .any(|r| r.counters.is_some() || r.unsupported_counters.is_some());
        let mut headers: Vec<&str> = match test {
            "branch" => vec!["variant", "data", "size", "ns/element", "spread"],
            _ => vec!["variant", "matrix", "size", "ns/element", "spread"],
        };
        if counted {
            headers.extend(counter_columns(test).iter().map(|c| c.0));
        }
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let mut cells = vec![
                    r.key("variant"),
                    if test == "branch" {
                        r.key("data")
                    } else {
                        format!("{0}x{0}", r.key("n"))
                    },
                    r.case
                        .get("size")
                        .and_then(|v| v.as_u64())
                        .map_or("?".into(), format_size),
                    format!("{}{}", table::figure(r.summary.median), verdict::mark(r)),
                    format!(
                        "±{} ({}–{}, n={})",
                        table::figure(r.summary.mad),
                        table::figure(r.summary.min),
                        table::figure(r.summary.max),
                        r.summary.n
                    ),
                ];
                if counted {
                    cells.extend(counter_columns(test).iter().map(|c| counter_cell(r, c.1)));
                }
                cells
            })
            .collect();
        let title = match test {
            "branch" => "branch: the sum of bytes >= 128, through a jump (branchy) or a conditional move (branchless)",
            _ => "loop order: the sum of a matrix of 8-byte ints, row by row or column by column",
        };
        text += &format!("{title}\n{}\n", table::render(&headers, &body));
    }
    for m in &out.models {
        text += &table::render_model(m);
    }
    text
}
