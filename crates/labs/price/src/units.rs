//! The unit costs a price needs: the newest ok figures in the history (or one run's), and
//! those it lacks measured first, as the cost and syscall labs measure them.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;

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
pub fn units_for(ctx: &Ctx, args: &PriceArgs, counts: &Counts, o: &mut Outcome) -> Result<Units> {
    let mut units = units_from_history(ctx, args.terms.as_deref())?;
    let (fs, scratch) = program_fs()?;
    if let Some(run) = &args.terms {
        o.notes.push(format!(
            "unit costs from run {run} ({} of them); the others from this machine's history, or measured here now",
            units.len()
        ));
        // A term the pinned run lacks (a newer term than the run) is this machine's figure
        // from its history before it is measured again: a price --from the same counts then
        // reads the figure the first price measured and stored, not a second measurement.
        for (k, u) in units_from_history(ctx, None)? {
            units.entry(k).or_insert(u);
        }
    }
    crate::cold::alias(&mut units);
    let flagged: Vec<String> = pricing::needed(counts)
        .into_iter()
        .filter_map(|u| {
            let unit = units.get(&stored_key(u, &fs))?;
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
        .filter(|u| !units.contains_key(&stored_key(u, &fs)))
        .collect();
    if !missing.is_empty() && costlab_core::measure::cancel::requested() {
        o.notes.push(format!(
            "interrupted: {} not measured, events needing them are not priced",
            missing.join(", ")
        ));
    } else if !missing.is_empty() {
        let (measured, rows, note) = measure_units(&missing, ctx, &scratch)?;
        o.results.extend(rows);
        o.notes.push(note);
        units.extend(measured);
        crate::cold::alias(&mut units);
    }
    let used: Vec<String> = unitcost::FS_TERMS
        .iter()
        .filter_map(|t| {
            units
                .get(&stored_key(t, &fs))
                .map(|u| format!("{t} ({})", u.from))
        })
        .collect();
    if !used.is_empty() {
        o.notes.push(format!(
            "the file-system terms are {fs}'s (the working directory's file system): {}",
            used.join(", ")
        ));
    }
    alias_fs(&mut units, &fs);
    pricing::derive(&mut units);
    Ok(units)
}

/// `--terms-run RUN`, checked before anything runs: a run of this history that holds unit
/// costs (a run of `costlab cost`, `run`, `syscall`, `echo` or `gc`, or a price that measured
/// some). A run that holds none would price every event at this machine's figures while the
/// notes said they came from that run.
pub fn check_terms_run(ctx: &Ctx, run: &str) -> Result<()> {
    let id = ctx.history()?.resolve(run)?;
    if units_from_history(ctx, Some(&id))?.is_empty() {
        return Err(costlab_core::error::usage(format!(
            "--terms-run {run}: run {id} holds no unit costs; name a run of costlab cost (or run, syscall, echo, gc) from `costlab history`, or leave --terms-run out"
        )));
    }
    Ok(())
}

/// The unit costs in the history: for each term, the newest ok figure of this machine's runs,
/// or (`--terms-run RUN`) the ok figures of that one run.
fn units_from_history(ctx: &Ctx, only: Option<&str>) -> Result<Units> {
    let store = ctx.history()?;
    let me = costlab_history::store::machine_id(&serde_json::to_value(&ctx.machine)?);
    let only = only.map(|r| store.resolve(r)).transpose()?;
    fleet::units_of(&store, &me, only.as_deref(), unit_key, has_every_term)
}

/// Whether `units` holds every term, the syscall lab's terms, s and an io_uring send: no
/// older run need be read.
pub(crate) fn has_every_term(units: &Units) -> bool {
    let have = |t: &&str| {
        units.contains_key(*t)
            || (*t == crate::cold::TERM && crate::cold::has_curve(units))
            || (unitcost::FS_TERMS.contains(t)
                && units
                    .keys()
                    .any(|k| k.strip_prefix(*t).is_some_and(|r| r.starts_with('@'))))
    };
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
    if row.lab == "cost" {
        let rev = row.case.get("rev").and_then(|v| v.as_u64());
        if rev != unitcost::revision(&row.key("term")) {
            // Measured by an older method: not a figure of the term as it now stands.
            return None;
        }
    }
    match (row.lab.as_str(), row.metric.as_str()) {
        ("cost", "latency") => {
            let size = row.case.get("size").and_then(|v| v.as_u64());
            let term = row.key("term");
            match size {
                // The cold-call curve: a point at each sweep.
                Some(s) if term == crate::cold::TERM => Some(crate::cold::point(s)),
                None => Some(with_fs(term, row)),
                Some(s) if s == unitcost::base_size(&term) => Some(with_fs(term, row)),
                // A read or write term's other sizes, for the segment a program's mean falls in.
                Some(s) if unitcost::RW_TERMS.contains(&term.as_str()) => {
                    Some(with_fs(crate::sizing::at_size(&term, s), row))
                }
                // A wake-up term's longer idle times, for the run's own waits.
                Some(s) if unitcost::WAIT_TERMS.contains(&term.as_str()) => {
                    Some(crate::sizing::at_size(&term, s))
                }
                Some(_) => None,
            }
        }
        ("cost", "per_byte") => Some(with_fs(format!("{}/byte", row.key("term")), row)),
        ("cost", "per_entry") => Some(with_fs(format!("{}/entry", row.key("term")), row)),
        ("cost", "extra_ns") => {
            let s = row.case.get("size").and_then(|v| v.as_u64())?;
            Some(format!("{}/ns", crate::cold::point(s)))
        }
        ("cost", "after_calls_ns") => {
            let s = row.case.get("size").and_then(|v| v.as_u64())?;
            Some(format!("{}/calls", crate::cold::point(s)))
        }
        ("cost", "per_ns_fault") => {
            let s = row.case.get("size").and_then(|v| v.as_u64())?;
            Some(format!("{}/fault", crate::cold::point(s)))
        }
        ("cost", "per_page") => Some(with_fs(format!("{}/page", row.key("term")), row)),
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

/// A unit's name with the file system its figure was measured on: "open@ext4".
fn with_fs(name: String, row: &ResultRow) -> String {
    match row.case.get("fs").and_then(|v| v.as_str()) {
        Some(fs) => format!("{name}@{fs}"),
        None => name,
    }
}

/// The file system a program works on: its working directory's (costlab's own, which the
/// program inherits), and where its file-system terms are measured: the temporary directory
/// when it is on the same type of file system, else the working directory itself.
pub fn program_fs() -> Result<(String, std::path::PathBuf)> {
    let cwd = std::env::current_dir()?;
    let fs = unitcost::fsops::fs_of(&cwd)?;
    let tmp = std::env::temp_dir();
    let dir = match unitcost::fsops::fs_of(&tmp) {
        Ok(t) if t == fs => tmp,
        _ => cwd,
    };
    Ok((fs, dir))
}

/// The file-system terms of `fs` under their plain names ("open" for "open@ext4"), so that
/// a price reads the figures of the file system its program used and no other.
pub fn alias_fs(units: &mut Units, fs: &str) {
    let suffix = format!("@{fs}");
    let found: Vec<(String, Unit)> = units
        .iter()
        .filter_map(|(k, u)| Some((k.strip_suffix(&suffix)?.to_string(), u.clone())))
        .collect();
    for t in unitcost::FS_TERMS {
        units.remove(t);
        units.remove(&format!("{t}/byte"));
        units.remove(&format!("{t}/entry"));
        units.retain(|k, _| !k.starts_with(&format!("{t}[")) || k.contains('@'));
    }
    units.extend(found);
}

/// The key a needed unit has in the history: a file-system term's carries the file system.
fn stored_key(unit: &str, fs: &str) -> String {
    if unitcost::FS_TERMS.contains(&unit) {
        format!("{unit}@{fs}")
    } else {
        unit.to_string()
    }
}

/// Measure the units the history lacks: cost terms, and s as the syscall lab measures it.
/// Returns the units, their rows (lab cost and syscall, stored with this run) and a note.
fn measure_units(
    missing: &[&str],
    ctx: &Ctx,
    scratch: &Path,
) -> Result<(Units, Vec<ResultRow>, String)> {
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
            match unitcost::measure_in(term, &ctx.spec, scratch) {
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
    ResultRow::new("cost", f.case(), f.metric, f.unit(), f.samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_of_a_revised_method_prices_only_at_the_current_revision() {
        let fork = |rev: Option<u64>| {
            let mut case = costlab_core::case! {"term" => "fork", "size" => 4096};
            if let Some(r) = rev {
                case.insert("rev".into(), serde_json::json!(r));
            }
            ResultRow::new("cost", case, "latency", "ns", vec![8000.0]).unwrap()
        };
        assert_eq!(unit_key(&fork(None)), None, "stored before the revision");
        assert_eq!(unit_key(&fork(Some(1))), None);
        assert_eq!(
            unit_key(&fork(unitcost::revision("fork"))).as_deref(),
            Some("fork")
        );
        // A term never revised is read as it always was.
        let stat = ResultRow::new(
            "cost",
            costlab_core::case! {"term" => "stat"},
            "latency",
            "ns",
            vec![900.0],
        )
        .unwrap();
        assert_eq!(unit_key(&stat).as_deref(), Some("stat"));
        // And a measured figure is stored with its revision.
        let f = unitcost::TermFigure {
            term: "fork",
            size: Some(4096),
            metric: "latency",
            samples: vec![1.0],
            fs: None,
        };
        assert_eq!(unit_key(&cost_row(f).unwrap()).as_deref(), Some("fork"));
    }

    #[test]
    fn a_file_system_term_is_read_for_the_programs_file_system_only() {
        let fs_row = |fs: &str, v: f64| {
            ResultRow::new(
                "cost",
                costlab_core::case! {"term" => "create", "fs" => fs, "rev" => 2u64},
                "latency",
                "ns",
                vec![v],
            )
            .unwrap()
        };
        assert_eq!(
            unit_key(&fs_row("ext4", 1.0)).as_deref(),
            Some("create@ext4")
        );
        let exit_base = ResultRow::new(
            "cost",
            costlab_core::case! {"term" => "exit", "size" => 4096u64, "rev" => unitcost::revision("exit")},
            "latency",
            "ns",
            vec![1.0],
        )
        .unwrap();
        assert_eq!(unit_key(&exit_base).as_deref(), Some("exit"));
        let mut units = Units::new();
        for (fs, v) in [("ext4", 90_000.0), ("tmpfs", 2_000.0)] {
            let r = fs_row(fs, v);
            units.insert(unit_key(&r).unwrap(), Unit::of_row(&r, "r"));
        }
        alias_fs(&mut units, "tmpfs");
        assert_eq!(units["create"].samples, vec![2_000.0]);
        alias_fs(&mut units, "xfs");
        assert!(
            !units.contains_key("create"),
            "an ext4 or tmpfs figure priced an xfs create"
        );
    }

    #[test]
    fn a_read_or_write_terms_page_figure_is_a_unit_of_its_own() {
        let at = |term: &str, size: u64, fs: Option<&str>| {
            let mut case = costlab_core::case! {"term" => term, "size" => size, "rev" => 2u64};
            if let Some(fs) = fs {
                case.insert("fs".into(), fs.into());
            }
            unit_key(&ResultRow::new("cost", case, "latency", "ns", vec![1.0]).unwrap())
        };
        assert_eq!(at("file-read", 64, None).as_deref(), Some("file-read"));
        assert_eq!(
            at("file-read", 4096, None).as_deref(),
            Some("file-read[4096]")
        );
        assert_eq!(
            at("file-write", 65536, Some("ext4")).as_deref(),
            Some("file-write[65536]@ext4")
        );
        let mut units = Units::new();
        let r = ResultRow::new(
            "cost",
            costlab_core::case! {"term" => "file-write", "size" => 4096u64, "rev" => 2u64, "fs" => "ext4"},
            "latency",
            "ns",
            vec![3800.0],
        )
        .unwrap();
        units.insert(unit_key(&r).unwrap(), Unit::of_row(&r, "r"));
        alias_fs(&mut units, "ext4");
        assert_eq!(units["file-write[4096]"].samples, vec![3800.0]);
        alias_fs(&mut units, "xfs");
        assert!(!units.contains_key("file-write[4096]"));
    }

    #[test]
    fn a_wake_up_terms_longer_idle_times_are_units_of_their_own() {
        let at = |term: &str, size: Option<u64>| {
            let mut case = costlab_core::case! {"term" => term, "rev" => 2u64};
            if let Some(size) = size {
                case.insert("size".into(), size.into());
            }
            unit_key(&ResultRow::new("cost", case, "latency", "ns", vec![1.0]).unwrap())
        };
        assert_eq!(at("wake-ipi", Some(50)).as_deref(), Some("wake-ipi"));
        assert_eq!(
            at("wake-halted", Some(1000)).as_deref(),
            Some("wake-halted[1000]")
        );
        // A run before the curve stored the term at 50 us without a size: the same unit.
        assert_eq!(at("wake-ipi", None).as_deref(), Some("wake-ipi"));
    }

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
