//! `--on MACHINE`: the same counts priced with another machine's stored unit costs, beside
//! this machine's, and the terms that make the two differ most.

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::measure::quality::Quality;
use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;
use costlab_history::report::ResultRow;
use costlab_history::store::Store;

use super::pricing::{Priced, Unit, Units};

/// How many of a machine's newest runs its unit costs are looked for in.
const HISTORY_DEPTH: usize = 200;

/// The labs whose rows `units::unit_key` turns into units: cost, syscall, echo and gc (a lab
/// added there is added here).
pub const UNIT_LABS: [&str; 4] = ["cost", "syscall", "echo", "gc"];

/// The ids of the runs that hold at least one result row of one of `labs`.
fn runs_with_rows_of(store: &Store, labs: &[&str]) -> Result<std::collections::HashSet<String>> {
    let list = labs
        .iter()
        .map(|l| format!("'{}'", l.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(store
        .read_rows(&format!(
            "SELECT DISTINCT run_id FROM results WHERE lab IN ({list})"
        ))?
        .into_iter()
        .filter_map(|row| row.first().and_then(|v| v.text()))
        .collect())
}

/// A machine of the history: its id and its summary ("CPU · 4 CPUs · kernel").
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub id: String,
    pub summary: String,
}

/// The unit costs of `machine_id` in the history: for each, the newest ok figure of its runs,
/// or (`only`, a run id) the ok figures of that one run whatever its machine.
pub fn units_of(
    store: &Store,
    machine_id: &str,
    only: Option<&str>,
    unit_key: fn(&ResultRow) -> Option<String>,
    enough: fn(&Units) -> bool,
) -> Result<Units> {
    let mut units = Units::new();
    // The newest figure of each term that is not ok (noisy, disturbed): used only where no
    // run within reach has an ok one, and then flagged by the price's verdicts, so a price
    // does not re-measure (at its own cost, and no quieter) a term the history holds.
    let mut not_ok = Units::new();
    let mut runs = store.runs()?;
    runs.reverse();
    // Only the runs holding a row of a lab that gives units are read whole (a history of
    // price runs would otherwise be parsed run by run, every count row of each).
    let with_units = runs_with_rows_of(store, &UNIT_LABS)?;
    for run in runs
        .iter()
        .filter(|r| match only {
            Some(id) => r.id == id,
            None => r.machine_id == machine_id,
        })
        .take(HISTORY_DEPTH)
        .filter(|r| with_units.contains(&r.id))
    {
        let doc = store.load_doc(&run.id)?;
        // The echo lab's io_uring batch is the best one its newest run found (the largest:
        // the load that filled the rings most), not whichever row came first.
        let mut best_batch: Option<&costlab_history::report::ResultRow> = None;
        for row in &doc.results {
            if !matches!(row.quality, None | Some(Quality::Ok)) {
                if let Some(key) = unit_key(row).filter(|k| k != "echo-batch") {
                    not_ok
                        .entry(key)
                        .or_insert_with(|| Unit::of_row(row, &run.id));
                }
                continue;
            }
            if let Some(key) = unit_key(row) {
                if key == "echo-batch" {
                    let m = |r: &costlab_history::report::ResultRow| r.summary.median;
                    if best_batch.is_none_or(|b| m(row) > m(b)) {
                        best_batch = Some(row);
                    }
                    continue;
                }
                units
                    .entry(key)
                    .or_insert_with(|| Unit::of_row(row, &run.id));
            }
        }
        if let Some(row) = best_batch {
            units
                .entry("echo-batch".into())
                .or_insert_with(|| Unit::of_row(row, &run.id));
        }
        if enough(&units) {
            break;
        }
    }
    for (k, u) in not_ok {
        units.entry(k).or_insert(u);
    }
    Ok(units)
}

/// Every machine of the history, in the order first seen.
pub fn machines(store: &Store) -> Result<Vec<Machine>> {
    let mut v: Vec<Machine> = Vec::new();
    for r in store.runs()? {
        if !v.iter().any(|m| m.id == r.machine_id) {
            v.push(Machine {
                id: r.machine_id.clone(),
                summary: r.machine_summary.clone(),
            });
        }
    }
    Ok(v)
}

/// Whether a run of the machine holds a figure that prices something.
fn has_terms(store: &Store, id: &str, unit_key: fn(&ResultRow) -> Option<String>) -> Result<bool> {
    let mut runs = store.runs()?;
    runs.reverse();
    for run in runs
        .iter()
        .filter(|r| r.machine_id == id)
        .take(HISTORY_DEPTH)
    {
        let doc = store.load_doc(&run.id)?;
        if doc
            .results
            .iter()
            .any(|r| matches!(r.quality, None | Some(Quality::Ok)) && unit_key(r).is_some())
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The machine `name` names (its id, or a unique part of it), checked to have stored unit
/// costs; otherwise a usage error that lists the machines that have them.
pub fn resolve(
    store: &Store,
    name: &str,
    unit_key: fn(&ResultRow) -> Option<String>,
) -> Result<Machine> {
    let all = machines(store)?;
    let with_terms = || -> Result<String> {
        let mut have = Vec::new();
        for m in &all {
            if has_terms(store, &m.id, unit_key)? {
                have.push(m.id.clone());
            }
        }
        Ok(if have.is_empty() {
            "no machine in the history has any: run `costlab cost` and `costlab syscall` on one and `costlab import` its results.json".into()
        } else {
            format!("machines with stored unit costs: {}", have.join(", "))
        })
    };
    let hits: Vec<&Machine> = match all.iter().find(|m| m.id == name) {
        Some(m) => vec![m],
        None => all.iter().filter(|m| m.id.contains(name)).collect(),
    };
    match hits.len() {
        0 => Err(usage(format!(
            "--on {name}: no such machine in the history; {} (see `costlab machines`)",
            with_terms()?
        ))),
        1 if has_terms(store, &hits[0].id, unit_key)? => Ok(hits[0].clone()),
        1 => Err(usage(format!(
            "--on {name}: machine {} has no stored unit costs (no ok cost or syscall figures); {}",
            hits[0].id,
            with_terms()?
        ))),
        n => Err(usage(format!(
            "--on {name}: matches {n} machines ({}): give more of the id",
            hits.iter()
                .map(|m| m.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The median of a unit, ns.
fn median(u: &Unit) -> Option<f64> {
    Summary::of(&u.samples).map(|s| s.median)
}

/// A unit cost in words: "274 ns", "0.12 ns" for a per-byte part.
fn unit_text(ns: f64) -> String {
    if ns >= 100.0 {
        format!("{ns:.0}")
    } else if ns >= 1.0 {
        format!("{ns:.1}")
    } else {
        format!("{ns:.3}")
    }
}

/// The line that sets the two prices side by side: "on B this program's kernel time is 1.6x:
/// s is 274 vs 166 ns, fault-4k is ...", the terms ordered by how much of the difference
/// each makes (count × the units' difference), at most three. None when nothing is priced
/// here.
pub fn compare_line(
    machine: &str,
    here: &[Priced],
    there: &[Priced],
    units_here: &Units,
    units_there: &Units,
) -> Option<(f64, String)> {
    let total = |rows: &[Priced]| -> f64 {
        rows.iter()
            .filter_map(|p| p.priced().map(|s| s.median))
            .sum()
    };
    let (a, b) = (total(here), total(there));
    if a <= 0.0 {
        return None;
    }
    let ratio = b / a;
    // Per unit: the difference it makes over this program's events.
    let mut by_unit: Vec<(String, f64)> = Vec::new();
    for p in here {
        let Some(q) = there
            .iter()
            .find(|q| q.class == p.class && q.event == p.event)
        else {
            continue;
        };
        let (Some(x), Some(y)) = (p.priced(), q.priced()) else {
            continue;
        };
        let d = y.median - x.median;
        match by_unit.iter_mut().find(|(u, _)| *u == p.unit_name) {
            Some(e) => e.1 += d,
            None => by_unit.push((p.unit_name.clone(), d)),
        }
    }
    by_unit.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()));
    let terms: Vec<String> = by_unit
        .iter()
        .filter(|(_, d)| *d != 0.0)
        .take(3)
        .filter_map(|(u, _)| {
            let (x, y) = (median(units_here.get(u)?)?, median(units_there.get(u)?)?);
            Some(format!("{u} is {} vs {} ns", unit_text(y), unit_text(x)))
        })
        .collect();
    let mut line = format!(
        "on {machine} this program's kernel time is {ratio:.2}x: {} there vs {} here",
        human_ns(b),
        human_ns(a)
    );
    if !terms.is_empty() {
        line.push_str(&format!("; {}", terms.join(", ")));
    }
    let unpriced: Vec<String> = here
        .iter()
        .filter(|p| p.unit.is_some())
        .filter(|p| {
            !there
                .iter()
                .any(|q| q.class == p.class && q.event == p.event && q.unit.is_some())
        })
        .map(|p| format!("{} {}", p.class, p.event))
        .collect();
    if !unpriced.is_empty() {
        line.push_str(&format!(
            "; not priced there (no term stored): {}",
            unpriced.join(", ")
        ));
    }
    Some((ratio, line))
}
