//! The unit costs a price needs: the newest ok figures in the history (or one run's), and
//! those it lacks measured first, as the cost and syscall labs measure them.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use serde_json::json;

use crate::args::PriceArgs;
use crate::count::Counts;
use crate::fleet;
use crate::pricing::{self, Unit, Units};
use costlab_core::measure::quality;
use costlab_core::measure::unitcost;
use costlab_history::report::{Outcome, ResultRow};
use costlab_lab::Ctx;

/// The units `counts` needs: from the history (or `--terms-run`), the missing ones measured
/// here now unless interrupted, and those derived from others; each choice said in a note.
pub fn units_for(
    db: Option<&Path>,
    ctx: &Ctx,
    args: &PriceArgs,
    counts: &Counts,
    o: &mut Outcome,
) -> Result<Units> {
    let mut units = units_from_history(db, ctx, args.terms.as_deref())?;
    if let Some(run) = &args.terms {
        o.notes.push(format!(
            "unit costs from run {run} only ({} of them); the others measured here now",
            units.len()
        ));
    }
    let flagged: Vec<String> = pricing::needed(counts)
        .into_iter()
        .filter_map(|u| {
            let unit = units.get(u)?;
            let q = unit.rows.first()?.quality?;
            (q != costlab_core::measure::quality::Quality::Ok)
                .then(|| format!("{u} ({})", unit.from))
        })
        .collect();
    if !flagged.is_empty() {
        o.notes.push(format!(
            "the history has no ok figure for {}: priced with its newest one, which is not ok, and flagged below (costlab cost measures them again)",
            flagged.join(", ")
        ));
    }
    let missing: Vec<&'static str> = pricing::needed(counts)
        .into_iter()
        .filter(|u| !units.contains_key(*u))
        .collect();
    if !missing.is_empty() && costlab_core::measure::cancel::requested() {
        o.notes.push(format!(
            "interrupted: {} not measured, events needing them are not priced",
            missing.join(", ")
        ));
    } else if !missing.is_empty() {
        let (measured, rows, note) = measure_units(&missing, ctx)?;
        o.results.extend(rows);
        o.notes.push(note);
        units.extend(measured);
    }
    pricing::derive(&mut units);
    Ok(units)
}

/// The unit costs in the history: for each term, the newest ok figure of this machine's runs,
/// or (`--terms-run RUN`) the ok figures of that one run.
fn units_from_history(db: Option<&Path>, ctx: &Ctx, only: Option<&str>) -> Result<Units> {
    // Read only: the history may have filled its disk while the program ran, and the counts
    // must still reach the store's fallback file.
    let store = costlab_history::store::open_existing(db)?;
    let me = costlab_history::store::machine_id(&serde_json::to_value(&ctx.machine)?);
    let only = only.map(|r| store.resolve(r)).transpose()?;
    fleet::units_of(&store, &me, only.as_deref(), unit_key, has_every_term)
}

/// Whether `units` holds every term, the syscall lab's terms, s and an io_uring send: no
/// older run need be read.
pub(crate) fn has_every_term(units: &Units) -> bool {
    let have = |t: &&str| units.contains_key(*t);
    unitcost::TERMS.iter().all(have)
        && pricing::SYSCALL_TERMS.iter().all(have)
        && units.contains_key("s")
        && units.keys().any(|k| k.starts_with("uring-send("))
        && units.keys().any(|k| k.starts_with("gc-share("))
        && units.keys().any(|k| k.starts_with("t("))
        && units.contains_key("echo-batch")
}

/// The unit a stored figure gives, if any: a cost term (at its smallest size; its per-byte
/// part as "TERM/byte"), s, t(N), the echo lab's io_uring batch. Only rows of
/// `fleet::UNIT_LABS` give one (the history is searched for those labs' runs only).
pub(crate) fn unit_key(row: &ResultRow) -> Option<String> {
    match (row.lab.as_str(), row.metric.as_str()) {
        ("cost", "latency") => {
            let size = row.case.get("size").and_then(|v| v.as_u64());
            (size.is_none() || size == Some(unitcost::SIZES[0])).then(|| row.key("term"))
        }
        ("cost", "per_byte") => Some(format!("{}/byte", row.key("term"))),
        ("syscall", "latency") if row.key("batch") == "1" && row.key("call") == "getppid" => {
            Some("s".into())
        }
        ("syscall", "latency")
            if row.key("batch") == "1"
                && !row.case.contains_key("size")
                && pricing::SYSCALL_TERMS.contains(&row.key("call").as_str()) =>
        {
            Some(row.key("call"))
        }
        ("syscall", "latency")
            if matches!(row.key("call").as_str(), "uring-send" | "uring-recv")
                && !row.case.contains_key("size") =>
        {
            Some(format!("{}({})", row.key("call"), row.key("batch")))
        }
        ("syscall", "latency") if row.key("call") == "uring-nop" => {
            Some(format!("t({})", row.key("batch")))
        }
        ("echo", "batch") if row.key("engine") == "uring" => Some("echo-batch".into()),
        ("gc", "gc_cpu_share")
            if row.key("runtime") == "go"
                && row.key("mode") == "gogc"
                && !row.case.contains_key("of") =>
        {
            Some(format!("gc-share({})", row.key("headroom")))
        }
        _ => None,
    }
}

/// Measure the units the history lacks: cost terms, and s as the syscall lab measures it.
/// Returns the units, their rows (lab cost and syscall, stored with this run) and a note.
fn measure_units(missing: &[&str], ctx: &Ctx) -> Result<(Units, Vec<ResultRow>, String)> {
    let t0 = Instant::now();
    let bar = costlab_history::report::progress::bar(missing.len() as u64, "cost terms");
    let mut rows = Vec::new();
    let mut unsupported = Vec::new();
    for &term in missing {
        bar.set_message(term.to_string());
        if term == "s" {
            let samples = costlab_core::measure::syscost::null_syscall(&ctx.spec)?;
            rows.extend(ResultRow::new(
                "syscall",
                costlab_core::case! {"call" => "getppid", "batch" => 1u32},
                "latency",
                "ns",
                samples,
            ));
        } else if rows
            .iter()
            .any(|r: &ResultRow| r.lab == "syscall" && r.key("call") == term)
        {
            // Measured beside another term (tcp-recv with tcp-send).
        } else if pricing::SYSCALL_TERMS.contains(&term) {
            // As the syscall lab measures them: tcp-send and tcp-recv come as a pair.
            use costlab_core::measure::syscost;
            let got = match term {
                "read-devzero" => syscost::read_devzero(&ctx.spec).map(|s| vec![(term, s)]),
                "write-devnull" => syscost::write_devnull(&ctx.spec).map(|s| vec![(term, s)]),
                _ => syscost::tcp_send_recv(&ctx.spec)
                    .map(|(send, recv)| vec![("tcp-send", send), ("tcp-recv", recv)]),
            };
            match got {
                Ok(figs) => {
                    for (call, samples) in figs {
                        rows.extend(ResultRow::new(
                            "syscall",
                            costlab_core::case! {"call" => call, "batch" => 1u32},
                            "latency",
                            "ns",
                            samples,
                        ));
                    }
                }
                Err(e) if costlab_core::measure::cancel::is_interrupt(&e) => return Err(e),
                Err(e) => {
                    unsupported.push(format!("{term}: {}", costlab_core::error::one_line(&e)))
                }
            }
        } else {
            match unitcost::measure(term, &ctx.spec) {
                Ok(figs) => rows.extend(figs.into_iter().filter_map(cost_row)),
                Err(e) if costlab_core::measure::cancel::is_interrupt(&e) => return Err(e),
                Err(e) => {
                    unsupported.push(format!("{term}: {}", costlab_core::error::one_line(&e)))
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    quality::judge_rows(&mut rows);
    let mut units = Units::new();
    for r in &rows {
        if let Some(k) = unit_key(r) {
            units.insert(k, Unit::of_row(r, "this run"));
        }
    }
    let mut note = format!(
        "the history had no ok figure for {}: measured first, in {:.1} s",
        missing.join(", "),
        t0.elapsed().as_secs_f64()
    );
    if !unsupported.is_empty() {
        note.push_str(&format!(
            "; not measurable here: {}",
            unsupported.join("; ")
        ));
    }
    Ok((units, rows, note))
}

/// A cost lab row of a measured term.
pub fn cost_row(f: unitcost::TermFigure) -> Option<ResultRow> {
    let mut case = costlab_core::case! {"term" => f.term};
    if let Some(size) = f.size {
        case.insert("size".into(), json!(size));
    }
    ResultRow::new("cost", case, f.metric, "ns", f.samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lab: &str, metric: &str, case: costlab_core::model::Case) -> ResultRow {
        ResultRow::new(lab, case, metric, "ns", vec![1.0]).unwrap()
    }

    #[test]
    fn only_the_unit_labs_rows_give_units() {
        let shapes = |lab: &str| {
            vec![
                row(lab, "latency", costlab_core::case! {"term" => "fault-4k"}),
                row(lab, "per_byte", costlab_core::case! {"term" => "file-read"}),
                row(
                    lab,
                    "latency",
                    costlab_core::case! {"call" => "getppid", "batch" => 1u32},
                ),
                row(lab, "batch", costlab_core::case! {"engine" => "uring"}),
                row(
                    lab,
                    "gc_cpu_share",
                    costlab_core::case! {"runtime" => "go", "mode" => "gogc", "headroom" => 100u32},
                ),
            ]
        };
        for lab in ["price", "mem", "share", "numa", "pin"] {
            assert!(
                shapes(lab).iter().all(|r| unit_key(r).is_none()),
                "{lab} gives a unit: add it to fleet::UNIT_LABS"
            );
        }
        let given: Vec<String> = fleet::UNIT_LABS
            .iter()
            .flat_map(|lab| shapes(lab))
            .filter(|r| unit_key(r).is_some())
            .map(|r| r.lab.clone())
            .collect();
        for lab in fleet::UNIT_LABS {
            assert!(given.iter().any(|l| l == lab), "{lab} gives no unit");
        }
    }
}
