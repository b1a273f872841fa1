//! `costlab price -- CMD`: what a program costs on this machine, priced in the units costlab
//! measures. It counts the program's events in the kernel (`count`), prices each class at
//! the unit cost measured here (`price`: the newest ok figures in the history, or measured
//! first), and sets the priced kernel time against the system time of an untraced run.

pub mod args;
pub mod bpf;
pub mod charts;
pub mod count;
pub mod fleet;
pub mod gowhatif;
pub mod pricing;
pub mod saved;
pub mod tracecost;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use costlab_core::error::usage;
use costlab_core::measure::quality::{self, Quality};
use costlab_core::measure::units::human_ns;
use costlab_core::measure::{unitcost, Summary};
use costlab_history::report::{table, Model, Outcome, ResultRow};
use costlab_lab::{Ctx, Headline, Lab};

pub use args::PriceArgs;
use count::{Stdio3, Times};
use pricing::{Priced, Unit, Units};

pub const LAB: &str = "price";

/// Pairs of getppid loops (counted, not) that measure the counting's cost per syscall.
const TRACING_PAIRS: usize = 7;

/// `costlab price`: count, look up or measure the unit costs, price, check.
pub fn run(args: &PriceArgs, ctx: &Ctx, db: Option<&Path>) -> Result<Outcome> {
    if args.runs == 0 && !args.once {
        return Err(usage(
            "--runs 0: give at least 1 untraced run, or --once to use the traced run's times",
        ));
    }
    // Bad input is found before anything runs: the machine --on names, the --from file, the
    // --save-counts path.
    let on = match &args.on {
        Some(name) => Some(fleet::resolve(
            &costlab_history::store::open(db)?,
            name,
            unit_key,
        )?),
        None => None,
    };
    if let Some(p) = &args.save_counts {
        check_writable(p)?;
    }
    let from = args
        .from
        .as_deref()
        .map(saved::SavedCounts::read)
        .transpose()?;
    let mut o = Outcome::default();
    // A Go program's GC share from its runtime (Some(None): Go, but no GC cycle ran).
    let mut go_gc: Option<Option<f64>> = None;
    let (counts, cmdline, untraced) = match (&from, args.pid, args.command.is_empty()) {
        (Some(s), _, _) => {
            o.notes.push(format!(
                "counts from {} ({}counted on {}), nothing run here",
                args.from.as_deref().unwrap_or(Path::new("")).display(),
                if s.complete { "" } else { "cut short when " },
                costlab_core::machine::machine_summary(&s.machine)
            ));
            let runs = if args.once {
                Vec::new()
            } else {
                s.untraced_times()
            };
            (s.counts(), s.command.clone(), runs)
        }
        (None, Some(pid), _) => {
            let d = costlab_core::measure::units::parse_duration(
                &args.duration,
                "--duration",
                Duration::ZERO,
                Duration::from_secs(3600),
            )?;
            let c = count::count_pid(pid, d)?;
            (c, format!("--pid {pid}"), Vec::new())
        }
        (None, None, true) => return Err(usage(
            "no command to price: give one after --, like costlab price -- ls -l (or --pid PID, or --from FILE)",
        )),
        (None, None, false) => {
            let c = count::count_command(&args.command)?;
            ctx.program_exit
                .store(c.exit_status, std::sync::atomic::Ordering::Relaxed);
            let path = count::program(&args.command)?;
            let mut runs = Vec::new();
            // Ctrl-C reached the program too: price what it did until then, from its own run.
            if !args.once && !costlab_core::measure::cancel::requested() {
                let go = gowhatif::is_go_program(&path);
                for i in 0..args.runs {
                    costlab_core::measure::cancel::check()?;
                    // A Go program's first untraced run also prints its runtime's GC trace.
                    let stdio = if go && i == 0 {
                        Stdio3::GcTrace
                    } else {
                        Stdio3::Null
                    };
                    runs.push(count::run_program(&path, &args.command, None, stdio)?.0);
                    if stdio == Stdio3::GcTrace {
                        let at = count::gctrace_path();
                        let text = std::fs::read_to_string(&at).unwrap_or_default();
                        let _ = std::fs::remove_file(&at);
                        go_gc = Some(gowhatif::gctrace_share(&text));
                    }
                }
            }
            (c, costlab_history::store::redact(&args.command.join(" ")), runs)
        }
    };
    if let Some(p) = &args.save_counts {
        saved::SavedCounts::of(
            &counts,
            &cmdline,
            serde_json::to_value(&ctx.machine)?,
            &untraced,
            !costlab_core::measure::cancel::requested(),
        )
        .write(p)?;
        o.notes.push(format!(
            "counts saved to {} (price them with --from)",
            p.display()
        ));
    }
    o.notes.extend(counts.notes.iter().cloned());
    let times: Vec<Times> = if untraced.is_empty() && from.is_some() {
        // Counted elsewhere: the counting's cost there is not known here, so none is taken out.
        o.notes.push(
            "times from the traced run as saved: its system time includes the counting's own cost there".into(),
        );
        vec![counts.times]
    } else if untraced.is_empty() {
        // The traced run's own times: take the counting's cost out of its system time.
        let whose = if args.pid.is_some() {
            "the process's CPU time while it was counted (/proc/PID/stat, clock ticks)"
        } else {
            "the traced run"
        };
        let cost = tracecost::per_syscall(TRACING_PAIRS)?;
        o.results.extend(ResultRow::new(
            LAB,
            costlab_core::case! {"class" => "tracing", "event" => "per-syscall", "command" => cmdline.as_str()},
            "latency",
            "ns",
            cost.clone(),
        ));
        match Summary::of(&cost) {
            Some(c) => {
                let (t, taken) = tracecost::untraced(&counts, &c);
                o.notes.push(format!(
                    "times from {whose}, less the counting's own cost: {} syscalls x {} each (the counter's cost per getppid, measured here now) = {} taken out of its system time",
                    tracecost::syscalls(&counts),
                    costlab_core::measure::units::human_ns(c.median),
                    costlab_core::measure::units::human_ns(taken)
                ));
                vec![t]
            }
            None => vec![counts.times],
        }
    } else {
        o.notes.push(format!(
            "times from {} untraced run(s) of the same command after the traced one (their stdin, stdout and stderr were /dev/null)",
            untraced.len()
        ));
        untraced
    };

    let mut units = units_from_history(db, ctx, args.terms.as_deref())?;
    if let Some(run) = &args.terms {
        o.notes.push(format!(
            "unit costs from run {run} only ({} of them); the others measured here now",
            units.len()
        ));
    }
    let missing: Vec<&'static str> = pricing::needed(&counts)
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
    let priced = pricing::price(&counts, &units);
    let cpu = Summary::of(
        &times
            .iter()
            .map(|t| t.user_ns + t.sys_ns)
            .collect::<Vec<_>>(),
    );
    push_price_rows(&mut o, &priced, &cmdline, cpu.map(|c| c.median));
    let go_what_if = match (go_gc, cpu.as_ref()) {
        (Some(Some(share)), Some(cpu)) => {
            let gogc = gowhatif::gogc(std::env::var("GOGC").ok().as_deref());
            gogc.and_then(|g| gowhatif::go_what_if(share, g, cpu, &units))
        }
        (Some(None), _) => {
            o.notes.push(
                "a Go program, but its runtime reported no GC cycle: nothing to say of GOGC".into(),
            );
            None
        }
        _ => None,
    };
    let what_ifs: Vec<pricing::WhatIf> = [
        pricing::thp_what_if(&counts, &units),
        pricing::uring_what_if(&counts, &units),
        go_what_if,
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut model = check(&mut o, &priced, &times, &cmdline, &what_ifs);
    if let Some(m) = &on {
        price_on(
            &mut o, &mut model, m, db, &counts, &priced, &units, &cmdline,
        )?;
    }
    for w in &what_ifs {
        let (q, why) = quality::worst_of(&w.rows.iter().collect::<Vec<_>>());
        for (metric, unit, samples) in [
            ("saved", "ns", w.saved.clone()),
            ("after", "events", vec![w.after as f64]),
        ] {
            if let Some(mut r) = ResultRow::new(
                LAB,
                costlab_core::case! {"what" => w.what, "from" => w.from, "command" => cmdline},
                metric,
                unit,
                samples,
            ) {
                r.quality = q.or(Some(Quality::Ok));
                r.quality_reasons = why.clone();
                o.results.push(r);
            }
        }
    }
    o.models.push(model);
    Ok(o)
}

/// The unit costs in the history: for each term, the newest ok figure of this machine's runs,
/// or (`--terms-run RUN`) the ok figures of that one run.
fn units_from_history(db: Option<&Path>, ctx: &Ctx, only: Option<&str>) -> Result<Units> {
    let store = costlab_history::store::open(db)?;
    let me = costlab_history::store::machine_id(&serde_json::to_value(&ctx.machine)?);
    let only = only.map(|r| store.resolve(r)).transpose()?;
    fleet::units_of(&store, &me, only.as_deref(), unit_key, has_every_term)
}

/// Whether `units` holds every term, the syscall lab's terms, s and an io_uring send: no
/// older run need be read.
fn has_every_term(units: &Units) -> bool {
    let have = |t: &&str| units.contains_key(*t);
    unitcost::TERMS.iter().all(have)
        && pricing::SYSCALL_TERMS.iter().all(have)
        && units.contains_key("s")
        && units.keys().any(|k| k.starts_with("uring-send("))
        && units.keys().any(|k| k.starts_with("gc-share("))
        && units.keys().any(|k| k.starts_with("t("))
        && units.contains_key("echo-batch")
}

/// `--on`: the same counts priced at `machine`'s stored unit costs, as rows with the case key
/// `on`, and the line that says how the two prices differ.
#[allow(clippy::too_many_arguments)]
fn price_on(
    o: &mut Outcome,
    model: &mut Model,
    machine: &fleet::Machine,
    db: Option<&Path>,
    counts: &count::Counts,
    here: &[Priced],
    units_here: &Units,
    cmd: &str,
) -> Result<()> {
    let store = costlab_history::store::open(db)?;
    let mut there_units = fleet::units_of(&store, &machine.id, None, unit_key, has_every_term)?;
    pricing::derive(&mut there_units);
    let there = pricing::price(counts, &there_units);
    for p in &there {
        let Some(u) = &p.unit else { continue };
        let case = costlab_core::case! {"class" => p.class, "event" => p.event, "command" => cmd, "on" => machine.id};
        let (q, why) = quality::worst_of(&u.rows.iter().collect::<Vec<_>>());
        for (metric, samples) in [
            ("unit_cost", u.samples.clone()),
            ("priced", p.priced_samples()),
        ] {
            if let Some(mut r) = ResultRow::new(LAB, case.clone(), metric, "ns", samples) {
                r.quality = q.or(Some(Quality::Ok));
                r.quality_reasons = why.clone();
                o.results.push(r);
            }
        }
    }
    let total = pricing::total(&there);
    let used: Vec<&ResultRow> = there
        .iter()
        .filter_map(|p| p.unit.as_ref())
        .flat_map(|u| u.rows.iter())
        .collect();
    let (q, why) = quality::worst_of(&used);
    if let Some(mut r) = ResultRow::new(
        LAB,
        costlab_core::case! {"class" => "program", "event" => "total", "command" => cmd, "on" => machine.id},
        "priced_kernel",
        "ns",
        vec![total.0, total.1, total.2],
    ) {
        r.quality = q.or(Some(Quality::Ok));
        r.quality_reasons = why;
        o.results.push(r);
    }
    o.notes.push(format!(
        "--on {}: {}; its unit costs are the newest ok figures of its runs in the history",
        machine.id, machine.summary
    ));
    model
        .params
        .insert("on_machine".into(), json!(machine.id.clone()));
    model
        .params
        .insert("on_priced_kernel_ns".into(), json!(total.1.round()));
    match fleet::compare_line(&machine.id, here, &there, units_here, &there_units) {
        Some((ratio, line)) => {
            model
                .params
                .insert("on_ratio".into(), json!((ratio * 100.0).round() / 100.0));
            model.verdict.push(line);
        }
        None => model.verdict.push(format!(
            "on {}: nothing is priced here to set it against",
            machine.id
        )),
    }
    Ok(())
}

/// `--save-counts FILE` must be writable before counting starts: its folder exists and it is
/// not a folder itself.
fn check_writable(p: &Path) -> Result<()> {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(usage(format!(
            "--save-counts {}: no folder {}; give a path in an existing folder",
            p.display(),
            dir.display()
        )));
    }
    if p.is_dir() {
        return Err(usage(format!(
            "--save-counts {} is a folder; give a file path",
            p.display()
        )));
    }
    Ok(())
}

/// The unit a stored figure gives, if any: a cost term (at its smallest size; its per-byte
/// part as "TERM/byte"), s, t(N), the echo lab's io_uring batch.
fn unit_key(row: &ResultRow) -> Option<String> {
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

/// Rows class/event/count/unit_cost/priced/share for each priced event.
fn push_price_rows(o: &mut Outcome, priced: &[Priced], cmd: &str, cpu_ns: Option<f64>) {
    for p in priced {
        let case = costlab_core::case! {"class" => p.class, "event" => p.event, "command" => cmd};
        let (q, why) = p
            .unit
            .as_ref()
            .map(|u| quality::worst_of(&u.rows.iter().collect::<Vec<_>>()))
            .unwrap_or((None, Vec::new()));
        let mut push = |metric: &str, unit: &str, samples: Vec<f64>, derived: bool| {
            if let Some(mut r) = ResultRow::new(LAB, case.clone(), metric, unit, samples) {
                r.quality = if derived {
                    q.or(Some(Quality::Ok))
                } else {
                    Some(Quality::Ok)
                };
                if derived {
                    r.quality_reasons = why.clone();
                }
                o.results.push(r);
            }
        };
        push("count", "events", vec![p.count as f64], false);
        if let Some(u) = &p.unit {
            push("unit_cost", "ns", u.samples.clone(), true);
            push("priced", "ns", p.priced_samples(), true);
            if let Some(cpu) = cpu_ns.filter(|c| *c > 0.0) {
                let share = p.priced_samples().iter().map(|x| 100.0 * x / cpu).collect();
                push("share", "%", share, true);
            }
        }
    }
}

/// The program's rows (times, priced kernel time, explained %) and the model that reads them.
fn check(
    o: &mut Outcome,
    priced: &[Priced],
    times: &[Times],
    cmd: &str,
    what_ifs: &[pricing::WhatIf],
) -> Model {
    let case = costlab_core::case! {"class" => "program", "event" => "total", "command" => cmd};
    let used: Vec<&ResultRow> = priced
        .iter()
        .filter_map(|p| p.unit.as_ref())
        .flat_map(|u| u.rows.iter())
        .collect();
    let (q, why) = quality::worst_of(&used);
    let mut push = |metric: &str, samples: Vec<f64>, derived: bool| {
        if let Some(mut r) = ResultRow::new(
            LAB,
            case.clone(),
            metric,
            if metric == "explained" { "%" } else { "ns" },
            samples,
        ) {
            r.quality = if derived {
                q.or(Some(Quality::Ok))
            } else {
                Some(Quality::Ok)
            };
            if derived {
                r.quality_reasons = why.clone();
            }
            o.results.push(r);
        }
    };
    let col = |f: fn(&Times) -> f64| times.iter().map(f).collect::<Vec<f64>>();
    push("user_time", col(|t| t.user_ns), false);
    push("sys_time", col(|t| t.sys_ns), false);
    push("wall_time", col(|t| t.wall_ns), false);
    let off: Vec<f64> = times.iter().filter_map(Times::off_cpu_ns).collect();
    push("off_cpu_time", off, false);
    let total = pricing::total(priced);
    push("priced_kernel", vec![total.0, total.1, total.2], true);
    let sys = pricing::sys_summary(times);
    let explained = sys.as_ref().and_then(|s| pricing::explained(total, s));
    if let Some(e) = explained {
        push("explained", vec![e.0, e.1, e.2], true);
    }

    let med = |v: Vec<f64>| Summary::of(&v).map_or(0.0, |s| s.median);
    let (user, sysm, wall) = (
        med(col(|t| t.user_ns)),
        med(col(|t| t.sys_ns)),
        med(col(|t| t.wall_ns)),
    );
    let mut verdict = vec![format!(
        "the program ran {} of wall time, {} on CPU, {} of it in the kernel",
        human_ns(wall),
        human_ns(user + sysm),
        human_ns(sysm)
    )];
    let priced_text = quality::quote(
        format!(
            "the counted events at their unit costs here price {} of kernel time ({}–{})",
            human_ns(total.1),
            human_ns(total.0),
            human_ns(total.2)
        ),
        q,
        &[],
    );
    verdict.push(priced_text);
    if !why.is_empty() {
        verdict.push(format!(
            "{} of the unit costs it uses are not ok: the footnote names them",
            why.len()
        ));
    }
    match explained {
        Some((lo, mid, hi)) if mid <= 100.0 => {
            verdict.push(format!(
                "that explains {mid:.0}% ({lo:.0}–{hi:.0}%) of its system time; the other {} is kernel work no term prices",
                human_ns((sysm - total.1).max(0.0))
            ));
        }
        Some((lo, mid, hi)) => verdict.push(format!(
            "the price is above the measured system time: {mid:.0}% ({lo:.0}–{hi:.0}%); a unit cost here is higher than what this program's events cost (warm caches, batched work) — a finding, not a rounding"
        )),
        None => verdict.push("no system time was measured: nothing to check the price against".into()),
    }
    let at_s: u64 = priced
        .iter()
        .filter(|p| p.how == "priced at s only")
        .map(|p| p.count)
        .sum();
    if at_s > 0 {
        verdict.push(format!(
            "{at_s} syscalls have no term of their own: priced at s only"
        ));
    }
    for w in what_ifs {
        verdict.push(format!("what if: {}", w.text));
    }
    let mut params = serde_json::Map::new();
    params.insert("priced_kernel_ns".into(), json!(total.1.round()));
    params.insert("sys_time_ns".into(), json!(sysm.round()));
    if let Some((_, mid, _)) = explained {
        params.insert("explained_pct".into(), json!((mid * 10.0).round() / 10.0));
    }
    Model {
        lab: LAB.into(),
        name: format!("price of {cmd}"),
        params,
        points: Vec::new(),
        verdict,
    }
}

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
    out.push('\n');
    for m in o.models.iter().filter(|m| m.lab == LAB) {
        for v in &m.verdict {
            out += &format!("{v}\n");
        }
    }
    out
}

/// `costlab price` as a lab: its rendering (it needs a command, so `costlab run` has no plan
/// for it).
pub struct PriceLab;

impl Lab for PriceLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![costlab_lab::args::command::<PriceArgs>(
            "price",
            "What a program costs here: its syscalls, faults and switches counted in the kernel, priced at the unit costs measured on this machine, checked against its system time",
            "Examples:\n  costlab price -- tar czf /tmp/x.tgz /usr/share/doc\n  costlab price --runs 3 --json price.json -- dd if=/dev/zero of=/dev/null bs=512 count=2M\n  costlab price --pid 1234 --duration 5s",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<costlab_lab::Invocation> {
        let args: PriceArgs = costlab_lab::args::parsed(m)?;
        Ok(
            costlab_lab::Invocation::measure(args.common.clone(), move |ctx| {
                run(&args, ctx, ctx.history.as_deref())
            })
            .program(),
        )
    }
    /// Price needs a program: it is reached through `costlab price`, never `costlab run`.
    fn in_run(&self) -> bool {
        false
    }
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        Some("costlab price needs a command: costlab price -- CMD".into())
    }
    fn run_plan(&self, _ctx: &Ctx, _full: bool) -> Result<Outcome> {
        Err(usage("costlab price needs a command: costlab price -- CMD"))
    }
    fn headlines(&self, _o: &Outcome) -> Vec<Headline> {
        Vec::new()
    }
    fn render(&self, o: &Outcome) -> String {
        render(o)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        charts::charts(doc)
    }
}
