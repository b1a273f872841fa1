//! Terminal tables with units in the headers.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// Render a table. Columns whose every cell starts like a number are right-aligned.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().copied());
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
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_headers_and_cells() {
        let s = super::render(&["op", "GB/s"], &[vec!["read".into(), "31.2".into()]]);
        assert!(s.contains("op") && s.contains("GB/s") && s.contains("31.2"));
    }
}
