//! Terminal tables with units in the headers.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table, TableComponent};

/// The width to fit tables to: `COSTLAB_COLUMNS` if set, else the terminal's when stdout is
/// one (`COLUMNS`, then the terminal's own size). Piped output is plain: no width, no wrapping.
pub fn width() -> Option<u16> {
    use std::io::IsTerminal;
    let env = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<u16>().ok())
            .filter(|&w| w >= 20)
    };
    if let Some(w) = env("COSTLAB_COLUMNS") {
        return Some(w);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    env("COLUMNS").or_else(|| Table::new().width())
}

/// Render a table. Columns whose every cell starts like a number are right-aligned. Fitted
/// to the terminal's width (see `width`): prose columns wrap, short one-word columns stay whole.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    render_at(headers, rows, width())
}

/// `render` at a given width (None: plain, as when piped).
pub fn render_at(headers: &[&str], rows: &[Vec<String>], width: Option<u16>) -> String {
    let mut t = Table::new();
    // A rule above and below the header and at the bottom; no rule between rows, so a long
    // sweep stays readable in a terminal.
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .remove_style(TableComponent::HorizontalLines)
        .remove_style(TableComponent::MiddleIntersections)
        .remove_style(TableComponent::LeftBorderIntersections)
        .remove_style(TableComponent::RightBorderIntersections)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().copied());
    if let Some(w) = width {
        // Fit the terminal: comfy-table wraps the cells of the widest columns first, at
        // word boundaries, so every column stays and no line runs past the edge.
        t.set_content_arrangement(ContentArrangement::DynamicFullWidth)
            .set_width(w);
    }
    for r in rows {
        t.add_row(r.iter().map(String::as_str));
    }
    for (i, col) in t.column_iter_mut().enumerate() {
        let numeric = !rows.is_empty()
            && rows.iter().all(|r| {
                r.get(i).is_none_or(|c| {
                    c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+')
                        || c == "—"
                })
            });
        if numeric {
            col.set_cell_alignment(CellAlignment::Right);
        }
        // Short one-word cells (ids, figures, units) never wrap: a run id split over two
        // lines cannot be copied. The wrapping falls on the prose columns.
        let atomic = rows.iter().all(|r| {
            r.get(i)
                .is_none_or(|c| c.chars().count() <= 30 && !c.contains(char::is_whitespace))
        });
        if atomic && width.is_some() {
            col.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
    }
    t.to_string()
}

/// A model as a table: each point's case, predicted beside measured, the error; then the
/// model's verdict lines. Every lab's model prints the same way.
pub fn render_model(m: &costlab_core::model::Model) -> String {
    let rows: Vec<Vec<String>> = m
        .points
        .iter()
        .map(|p| {
            let case: Vec<String> = p
                .case
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            vec![
                case.join(" "),
                figure(p.predicted),
                figure(p.measured),
                p.unit.clone(),
                if p.error().is_finite() {
                    format!("{:+.0}%", p.error() * 100.0)
                } else {
                    "—".to_string()
                },
            ]
        })
        .collect();
    let mut out = format!("model: {} ({})\n", m.name, m.lab);
    if !rows.is_empty() {
        out += &render(&["case", "predicted", "measured", "unit", "error"], &rows);
        out.push('\n');
    }
    for v in &m.verdict {
        out += &format!("  {v}\n");
    }
    out
}

/// A figure with as many decimals as its size deserves: 12345, 12.3, 0.123.
/// A figure's median as tables show it, with its verdict's mark ("412~"): the cell every lab's
/// table uses for a median.
pub fn median_marked(r: &costlab_core::model::ResultRow) -> String {
    format!(
        "{}{}",
        figure(r.summary.median),
        crate::report::verdict::mark(r)
    )
}

pub fn figure(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_headers_and_cells() {
        let s = super::render(&["op", "GB/s"], &[vec!["read".into(), "31.2".into()]]);
        assert!(s.contains("op") && s.contains("GB/s") && s.contains("31.2"));
    }
}

#[cfg(test)]
mod width_tests {
    #[test]
    fn a_narrow_terminal_wraps_prose_and_keeps_ids_whole() {
        let long = "a command line with many words that would run far past the edge".repeat(2);
        let rows = [vec!["20261123T065158Z-ba7b51".to_string(), long]];
        let plain = super::render_at(&["id", "command"], &rows, None);
        assert_eq!(plain.lines().count(), 5, "{plain}");
        let t = super::render_at(&["id", "command"], &rows, Some(60));
        assert!(t.lines().all(|l| l.chars().count() <= 60), "{t}");
        assert!(t.contains("20261123T065158Z-ba7b51"), "{t}");
        assert!(t.lines().count() > 5, "{t}");
    }
}

/// `--counters`: one row per figure that read them, one column per counter (per iteration
/// where the lab divided them so; as the lab stored them otherwise). None when no row has any.
pub fn render_counters(rows: &[costlab_core::model::ResultRow]) -> Option<String> {
    let with: Vec<&costlab_core::model::ResultRow> = rows
        .iter()
        .filter(|r| r.counters.as_ref().is_some_and(|c| !c.is_empty()))
        .collect();
    if with.is_empty() {
        return None;
    }
    let mut names: Vec<&String> = Vec::new();
    for r in &with {
        for k in r.counters.as_ref().into_iter().flat_map(|c| c.keys()) {
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    let body: Vec<Vec<String>> = with
        .iter()
        .map(|r| {
            let c = r.counters.as_ref().expect("filtered");
            let mut row = vec![format!(
                "{} {}",
                costlab_core::model::case_text(&r.case),
                r.metric
            )];
            row.extend(
                names
                    .iter()
                    .map(|n| c.get(*n).map_or("—".to_string(), |v| figure(*v))),
            );
            row
        })
        .collect();
    let mut headers: Vec<&str> = vec!["figure"];
    headers.extend(names.iter().map(|n| n.as_str()));
    Some(format!("perf counters\n{}\n", render(&headers, &body)))
}
