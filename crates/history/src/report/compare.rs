//! `costlab compare` as a table: each figure's A, B, change, p and verdict, and a count of what
//! changed (the statistics are `analysis::compare`).

use crate::analysis::compare::{p_text, Comparison, Verdict, ALPHA};
use crate::analysis::mitigations::{MitigationDiff, Moved};
use crate::report::sheet::figure;

/// The comparison as a table, with a count of what changed.
pub fn render(c: &Comparison, a_id: &str, b_id: &str) -> String {
    let mut out = format!(
        "compare A = {a_id} with B = {b_id} (Mann-Whitney U, two-sided; Benjamini-Hochberg over the {} figures, q < {ALPHA}; changes under {}% not called)\n",
        c.changes.len(),
        c.min_effect_pct
    );
    if c.changes.is_empty() {
        out.push_str("no figure is present in both runs\n");
    } else {
        let rows: Vec<Vec<String>> = c
            .changes
            .iter()
            .map(|ch| {
                vec![
                    ch.figure.clone(),
                    ch.unit.clone(),
                    figure(ch.a),
                    figure(ch.b),
                    if ch.change_pct.is_finite() {
                        format!("{:+.1}%", ch.change_pct)
                    } else {
                        "—".to_string()
                    },
                    figure(ch.u),
                    p_text(ch.q),
                    ch.verdict.text(),
                ]
            })
            .collect();
        out.push_str(&crate::report::table::render(
            &[
                "figure", "unit", "A median", "B median", "change", "U", "q (BH)", "verdict",
            ],
            &rows,
        ));
        out.push('\n');
        let sig = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::Significant { .. }))
            .count();
        let few = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::TooFew { .. }))
            .count();
        out.push_str(&format!(
            "{sig} of {} figures changed significantly",
            c.changes.len()
        ));
        let small = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::Small { .. }))
            .count();
        if small > 0 {
            out.push_str(&format!(
                "; {small} moved by less than {}% (not called; --min-effect to change)",
                c.min_effect_pct
            ));
        }
        if few > 0 {
            out.push_str(&format!(
                "; {few} had too few samples to tell (take more with --samples)"
            ));
        }
        let unclean = c
            .changes
            .iter()
            .filter(|ch| matches!(ch.verdict, Verdict::NotClean { .. }))
            .count();
        if unclean > 0 {
            out.push_str(&format!(
                "; {unclean} differ but are not called, since a side was disturbed or noisy (re-measure on a quiet machine)"
            ));
        }
        if sig == 0 && few < c.changes.len() {
            out.push_str("; no significant change");
        }
        out.push('\n');
    }
    if c.only_a + c.only_b > 0 {
        out.push_str(&format!(
            "{} figures only in A, {} only in B (not compared)\n",
            c.only_a, c.only_b
        ));
    }
    out
}

/// "s 700.2 -> 230.1 ns (-67.1%, significant (p=0.0002))"; a crossover as "2 -> none".
pub fn moved_text(m: &Moved) -> String {
    let crossover = m.term.starts_with("crossover");
    let v = |x: Option<f64>| match x {
        Some(x) if crossover => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None if crossover => "none".into(),
        None => "not measured".into(),
    };
    let unit = if crossover {
        String::new()
    } else {
        format!(" {}", m.unit)
    };
    let mut t = format!("{} {} -> {}{unit}", m.term, v(m.a), v(m.b));
    if let (Some(a), Some(b)) = (m.a, m.b) {
        if !crossover && a != 0.0 {
            t.push_str(&format!(" ({:+.1}%", (b - a) / a.abs() * 100.0));
            match &m.verdict {
                Some(v) => t.push_str(&format!(", {})", v.text())),
                None => t.push(')'),
            }
        }
    }
    t
}

/// The lines `costlab compare` prints on the runs' mitigations: what differs (the kernel
/// command line's switches, each vulnerability whose state differs) and what that moved.
/// None when the mitigations are the same.
pub fn mitigation_lines(d: &MitigationDiff) -> Vec<String> {
    if !d.differ() {
        return Vec::new();
    }
    let mut what = Vec::new();
    if let Some((a, b)) = &d.params {
        let show = |p: &Vec<String>| {
            if p.is_empty() {
                "none (the kernel's default)".to_string()
            } else {
                p.join(" ")
            }
        };
        what.push(format!(
            "kernel command line A: {}, B: {}",
            show(a),
            show(b)
        ));
    }
    for s in &d.states {
        let show = |x: &Option<String>| x.clone().unwrap_or_else(|| "absent".into());
        what.push(format!(
            "{}: A \"{}\", B \"{}\"",
            s.name,
            show(&s.a),
            show(&s.b)
        ));
    }
    let mut out = vec![format!("mitigations differ: {}", what.join("; "))];
    if d.moved.is_empty() {
        out.push(
            "what they moved: neither run has s, w, t(n) or the echo model (run `costlab run`, or the syscall and echo labs, on each boot)"
                .into(),
        );
    } else {
        out.push(format!(
            "what they moved (A -> B): {}",
            d.moved
                .iter()
                .map(moved_text)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    out
}
