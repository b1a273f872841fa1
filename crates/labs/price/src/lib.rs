//! `costlab price -- CMD`: what a program costs on this machine, priced in the units costlab
//! measures. It counts the program's events in the kernel (`count`), prices each class at
//! the unit cost measured here (`price`: the newest ok figures in the history, or measured
//! first), and sets the priced kernel time against the system time of an untraced run.

mod argcheck;
pub mod args;
pub mod bpf;
pub mod charts;
mod closes;
mod cold;
pub mod count;
pub mod fleet;
pub mod gowhatif;
pub mod measured;
mod passes;
pub mod pricing;
mod render;
pub mod report;
mod rows;
pub mod samples;
pub mod saved;
pub mod sizing;
mod source;
pub mod terms_of;
mod times;
pub mod tracecost;
mod tracer;
mod unit;
mod units;
pub mod verify;
mod waits;

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use costlab_core::error::usage;
use costlab_core::measure::quality::{self, Quality};
use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;
use costlab_history::report::{Model, Outcome, ResultRow};
use costlab_lab::{Ctx, Headline, Lab};

pub use args::PriceArgs;
use count::Times;
use pricing::{Priced, Units};
pub use render::render;
pub use units::cost_row;
use units::{has_every_term, unit_key};

pub const LAB: &str = "price";

/// getppid loops of each kind (counted, not) that measure the counting's cost per syscall
/// (short loops, so more of them: `tracecost::CALLS`).
const TRACING_PAIRS: usize = 15;

/// `costlab price`: count, look up or measure the unit costs (from the history the command
/// opened, `Ctx::history`), price, check.
pub fn run(args: &PriceArgs, ctx: &Ctx) -> Result<Outcome> {
    argcheck::check_runs(args)?;
    argcheck::check_duration(args)?;
    argcheck::check_verify(args)?;
    argcheck::check_sampling(args)?;
    verify::Printed::of(args.rate.as_deref(), args.work.as_deref())?;
    argcheck::check_pid(args)?;
    // Bad input is found before anything runs: the machine --on names, the run --terms-run
    // names, the --from file, the --save-counts path.
    let on = match &args.on {
        Some(name) => Some(fleet::resolve(&*ctx.history()?, name, unit_key)?),
        None => None,
    };
    if let Some(run) = &args.terms {
        units::check_terms_run(ctx, run)?;
    }
    if let Some(p) = &args.save_counts {
        argcheck::check_writable(p)?;
    }
    let from = args
        .from
        .as_deref()
        .map(saved::SavedCounts::read)
        .transpose()?;
    let mut o = Outcome::default();
    let mut counted = source::count(args, ctx, from.as_ref(), &mut o)?;
    // The tracer's own cost in the traced run, measured now beside it (kept with saved counts,
    // so a price --from them takes out the same).
    if let (Some(s), None, None) = (&counted.counts.measured, &from, args.pid) {
        if !costlab_core::measure::cancel::requested() {
            if let Some((ns, t)) =
                tracer::tracer_cost(ctx, args.recalibrate, s, &counted.counts, &mut o)
            {
                counted.counts.tracer_ns = Some(ns);
                counted.counts.tracer_per_event = Some(t);
            }
            let ns = passes::count(&mut counted.counts, &mut o.notes);
            counted.counts.tracer_ns = counted.counts.tracer_ns.map(|t| t + ns);
        }
    }
    if let Some(p) = &args.save_counts {
        save_counts(p, &counted, ctx, &mut o)?;
    }
    let (counts, cmdline) = (&counted.counts, counted.cmdline.as_str());
    o.notes.extend(counts.notes.iter().cloned());
    if from.is_none() {
        damon_note(counts, &mut o);
    }
    // The unit costs first: reading them from the history takes longer than the RCU grace
    // period that the tracing-cost calibration's attach (in `times_for`) would otherwise
    // wait for after the counting detached from sys_enter (`tracecost::per_syscall`).
    let units = units::units_for(ctx, args, counts, &mut o)?;
    let times = times::times_for(args, from.is_some(), &counted, &mut o)?;
    let priced = pricing::price(counts, &units);
    o.notes.extend(sizing::crossed_note(counts, &units));
    o.notes.extend(waits::at_program_waits(counts, &units).1);
    o.notes.extend(cold::note(counts, &units));
    let cpu = Summary::of(
        &times
            .iter()
            .map(|t| t.user_ns + t.sys_ns)
            .collect::<Vec<_>>(),
    );
    rows::push_price_rows(&mut o, &priced, cmdline, cpu.map(|c| c.median));
    let split = counts.measured.as_ref();
    let measured = split.map(|s| {
        let mut lines = measured::beside::beside(s, &priced);
        if let Some(t) = &counts.tracer_per_event {
            measured::beside::net_of_tracer(&mut lines, t);
        }
        lines
    });
    // The kernel time no transition names, named by samples in the share of kernel samples
    // that name a subsystem.
    let sampled_named = match (split, &counts.samples) {
        (Some(s), Some(smp)) => (s.unnamed_kernel_ns() as f64 * smp.kernel_named_share()) as u64,
        _ => 0,
    };
    if let (Some(s), Some(lines)) = (split, &measured) {
        measured::beside::push_rows(&mut o, s, lines, cmdline, sampled_named);
    }
    if let Some(smp) = &counts.samples {
        samples::push_rows(&mut o, smp, cmdline);
    }
    let what_ifs = what_ifs(counts, &units, &counted, &times, cpu.as_ref(), &mut o);
    let tried = match args.verify && !costlab_core::measure::cancel::requested() {
        true => Some(try_what_ifs(args, ctx, counts, &units, &what_ifs, &mut o)?),
        false => None,
    };
    // A what-if its trial did not confirm is never printed as advice.
    let advice: Vec<pricing::WhatIf> = what_ifs
        .iter()
        .filter(|w| {
            tried.as_ref().is_none_or(|t| {
                let same: Vec<&verify::Tried> = t
                    .iter()
                    .filter(|x| x.what == w.what && x.verdict != verify::verdict::Verdict::NotTried)
                    .collect();
                same.is_empty() || same.iter().any(|x| x.verdict.advice())
            })
        })
        .cloned()
        .collect();
    let tracer = counts.tracer_ns;
    let kernel = split.map(|s| Kernel {
        split_ns: s.kernel_ns() as f64,
        ci_ns: s.kernel_ci_ns() as f64,
        tracer_ns: tracer.unwrap_or(0.0),
        tracer_measured: tracer.is_some(),
        usage_ns: s.usage_ns as f64,
        halted: s.lines.iter().map(|l| l.halted_in).sum(),
    });
    let untraced = !counted.untraced.is_empty();
    let mut model = check(
        &mut o,
        &priced,
        (&times, untraced),
        cmdline,
        &advice,
        kernel.as_ref(),
    );
    if let (Some(s), Some(lines)) = (split, &measured) {
        let net = kernel.as_ref().map_or(0.0, Kernel::net);
        let ev = evidence(counts, &units);
        split_lines(&mut model, s, lines, net, &ev, sampled_named)?;
    }
    if from.is_none() && args.pid.is_none() {
        let end = counted.counts.exit_status;
        model.params.insert("ended".into(), json!(end.line()));
        model
            .params
            .insert("exit_status".into(), json!(end.shell_status()));
    }
    if let Some(m) = &on {
        price_on(&mut o, &mut model, m, ctx, counts, &priced, &units, cmdline)?;
    }
    if let Some(smp) = &counts.samples {
        model.verdict.extend(samples::verdict(smp));
    }
    rows::push_what_if_rows(&mut o, &what_ifs, cmdline);
    o.models.push(model);
    if let Some(t) = &tried {
        verify::rows::push(&mut o, t, cmdline);
    }
    Ok(o)
}

/// The model's lines and parameters from the measured split: its own check, the syscalls no
/// term prices, the heavy lines outside the band with their evidence (`outside`), what is
/// attributed. `net`: the kernel time less the tracer's own cost.
fn split_lines(
    model: &mut Model,
    s: &measured::Split,
    lines: &[measured::beside::Beside],
    net: f64,
    ev: &measured::beside::Evidence,
    sampled_named: u64,
) -> Result<()> {
    model
        .verdict
        .extend(measured::beside::verdict(s, lines, sampled_named));
    let no_term: Vec<&measured::beside::Beside> = lines
        .iter()
        .filter(|b| {
            // Priced by its waits' switches alone, a call still has no term of its own. A
            // light call has one: its entry and exit, priced on the line inside user time.
            b.priced_ns.is_none_or(|p| p <= b.switch_ns)
                && b.line.class == "syscall"
                && !terms_of::is_light(&b.line.event)
                && b.own_ns() > 0.0
        })
        .collect();
    if !no_term.is_empty() && net > 0.0 {
        // Each line's own time: what the tracer spent in it is not the call's.
        let sum: f64 = no_term.iter().map(|b| b.own_ns()).sum();
        let mut top = no_term.clone();
        top.sort_by(|a, b| b.own_ns().total_cmp(&a.own_ns()));
        let names: Vec<String> = top
            .iter()
            .take(6)
            .map(|b| format!("{} {}", b.line.event, human_ns(b.own_ns())))
            .collect();
        model.verdict.push(format!(
            "no term: {} syscalls with no unit cost of their own took {} ({:.1}% of the kernel time), 0 in the price beyond the switches inside them: {}",
            no_term.len(),
            human_ns(sum),
            100.0 * sum / net,
            names.join(", ")
        ));
    }
    let outside = measured::beside::outside(s, lines, net, ev);
    for o in &outside {
        model
            .verdict
            .push(format!("outside 0.67-1.5x: {}", o.text()));
    }
    if !outside.is_empty() {
        model
            .params
            .insert("outside".into(), serde_json::to_value(&outside)?);
    }
    if let Some((all, kernel)) = s.attributed(sampled_named) {
        model
            .params
            .insert("cpu_usage_ns".into(), json!(s.usage_ns));
        model
            .params
            .insert("attributed_pct".into(), json!((all * 10.0).round() / 10.0));
        model.params.insert(
            "kernel_attributed_pct".into(),
            json!((kernel * 10.0).round() / 10.0),
        );
    }
    Ok(())
}

/// `--verify`: each what-if whose remedy can be set from outside, tried in --runs rounds.
fn try_what_ifs(
    args: &PriceArgs,
    ctx: &Ctx,
    counts: &count::Counts,
    units: &Units,
    what_ifs: &[pricing::WhatIf],
    o: &mut Outcome,
) -> Result<Vec<verify::Tried>> {
    let path = count::program(&args.command)?;
    let pairs = if args.runs < 2 {
        let n = if args.common.quick { 2 } else { 3 };
        o.notes.push(format!(
            "--verify with --runs {}: {n} rounds (a spread needs more than one pair)",
            args.runs
        ));
        n
    } else {
        args.runs
    };
    let t = verify::verify(
        &verify::Inputs {
            path: &path,
            argv: &args.command,
            counts,
            units,
            what_ifs,
            pairs,
            rate: args.rate.as_deref(),
            work: args.work.as_deref(),
            reserve_hugepages: args.reserve_hugepages,
            ctx,
            recalibrate: args.recalibrate,
        },
        &mut o.notes,
    )?;
    o.results.extend(t.calibration);
    // A program that failed in both arms of a trial gives the command its status.
    if let Some(end) = t
        .failed
        .filter(|_| ctx.program_end().is_none_or(|e| !e.failed()))
    {
        ctx.program_ended(end);
    }
    Ok(t.tried)
}

/// Where the traced run read pages in from disk and the machine pages memory out on its own
/// (DAMON), say so: the program's files were cached, then taken back while it was idle.
fn damon_note(counts: &count::Counts, o: &mut Outcome) {
    let read_in = counts
        .events
        .get(&("pages".to_string(), "read in".to_string()))
        .copied()
        .unwrap_or(0);
    if read_in == 0 {
        return;
    }
    let root = costlab_core::machine::sysfs::Root::new(Path::new("/"));
    for d in costlab_core::machine::pages::damon_pageout(&root) {
        o.notes.push(format!(
            "{read_in} pages were read in from disk (cold reads, priced at read-cold); this machine's {d}, so a program's files are cold again in a run further apart than that from the last"
        ));
    }
}

/// `--save-counts`: what was counted, with this machine and the untraced times, to price
/// later with --from.
fn save_counts(p: &Path, counted: &source::Counted, ctx: &Ctx, o: &mut Outcome) -> Result<()> {
    saved::SavedCounts::of(
        &counted.counts,
        &counted.cmdline,
        serde_json::to_value(&ctx.machine)?,
        &counted.untraced,
        !costlab_core::measure::cancel::requested(),
    )
    .write(p)?;
    o.notes.push(format!(
        "counts saved to {} (price them with --from)",
        p.display()
    ));
    Ok(())
}

/// What would change with THP, io_uring and (for a Go program) another GOGC. A model that
/// cannot know (THP for a program that returns memory) withdraws itself in a note.
fn what_ifs(
    counts: &count::Counts,
    units: &Units,
    counted: &source::Counted,
    times: &[Times],
    cpu: Option<&Summary>,
    o: &mut Outcome,
) -> Vec<pricing::WhatIf> {
    let go_what_if = match (counted.go_gc, cpu) {
        (Some(Some(gctrace)), Some(cpu)) => {
            let gogc = gowhatif::gogc(std::env::var("GOGC").ok().as_deref());
            let (share, whose) =
                gowhatif::share_to_scale(gctrace, gowhatif::sampled_share(counts.samples.as_ref()));
            gogc.and_then(|g| {
                let wall = Summary::of(&times.iter().map(|t| t.wall_ns).collect::<Vec<_>>());
                let fault = verify::gogc::fault_4k_ns(units);
                let wall = wall.map(|w| w.median);
                verify::gogc::what_if(share, g, cpu, wall, &counted.go_cycles, fault)
                    .or_else(|| gowhatif::go_what_if(share, g, cpu, units))
                    .map(|mut w| {
                        w.text = format!("{w} (the GC's share: {whose})", w = w.text);
                        w
                    })
            })
        }
        (Some(None), _) => {
            o.notes.push(
                "a Go program, but its runtime reported no GC cycle: nothing to say of GOGC".into(),
            );
            None
        }
        _ => None,
    };
    let thp = match verify::thp::predict(counts, units, counted.go_gc.is_some()) {
        verify::thp::Prediction::Saves(..) => pricing::thp_what_if(counts, units),
        verify::thp::Prediction::Withdrawn(why) => {
            if pricing::thp_what_if(counts, units).is_some() {
                o.notes.push(format!(
                    "what if THP: withdrawn, {why}; try it with costlab price --verify"
                ));
            }
            None
        }
    };
    [thp, pricing::uring_what_if(counts, units), go_what_if]
        .into_iter()
        .flatten()
        .collect()
}

/// `--on`: the same counts priced at `machine`'s stored unit costs, as rows with the case key
/// `on`, and the line that says how the two prices differ.
#[allow(clippy::too_many_arguments)]
fn price_on(
    o: &mut Outcome,
    model: &mut Model,
    machine: &fleet::Machine,
    ctx: &Ctx,
    counts: &count::Counts,
    here: &[Priced],
    units_here: &Units,
    cmd: &str,
) -> Result<()> {
    let store = ctx.history()?;
    let mut there_units = fleet::units_of(&store, &machine.id, None, unit_key, has_every_term)?;
    if let Ok((fs, _)) = units::program_fs() {
        units::alias_fs(&mut there_units, &fs);
    }
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

/// The kernel time of a traced run: the split's, and the tracer's own cost in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kernel {
    pub split_ns: f64,
    /// The 95% interval's half-width of the split's kernel time (its estimates: the
    /// kernel-other the ticks found inside user time, a sampled split's untimed calls).
    pub ci_ns: f64,
    pub tracer_ns: f64,
    /// Whether the tracer's cost was measured (else it is 0, and said so).
    pub tracer_measured: bool,
    pub usage_ns: f64,
    /// The waits that ended on a CPU woken from a halt (the split's `halted_in`).
    pub halted: u64,
}

impl Kernel {
    /// The traced run's figures net of the tracer, for the check against the untraced runs:
    /// its kernel time `net`, its CPU time (the cgroup's usage less the tracer's cost).
    fn traced(&self, net: f64) -> times::Traced {
        times::Traced {
            kernel_ns: net,
            cpu_ns: (self.usage_ns - self.tracer_ns).max(0.0),
            halted: self.halted,
        }
    }

    /// The kernel time the program would have had untraced: the split's less the tracer's.
    pub fn net(&self) -> f64 {
        (self.split_ns - self.tracer_ns).max(0.0)
    }
}

/// What the readings of lines outside the band may cite: the run's kernel samples by
/// subsystem, and the terms they compare with.
fn evidence(counts: &count::Counts, units: &Units) -> measured::beside::Evidence {
    let mut ev = measured::beside::Evidence::default();
    if let Some(smp) = &counts.samples {
        let all = smp.kernel_total().max(1) as f64;
        let mut subs: Vec<(String, f64)> = smp
            .kernel
            .iter()
            .filter(|(n, _)| n.as_str() != "other")
            .map(|(n, s)| (n.clone(), 100.0 * s.samples as f64 / all))
            .collect();
        subs.sort_by(|a, b| b.1.total_cmp(&a.1));
        ev.subsystems = subs;
        ev.inside = smp.inside.clone();
        ev.sampler_interrupts = smp.total;
    }
    ev.file_firsts = counts.event("file faults", "first touches");
    for t in [
        "open",
        "create",
        "getdents64/entry",
        "fault-file",
        "fault-file-first",
    ] {
        if let Some(m) = units.get(t).and_then(|u| u.summary()) {
            ev.terms.push((t.to_string(), m.median));
        }
    }
    ev
}

/// The verdict's first line: the program's wall time, its CPU and kernel time, the traced
/// run's where the split ran (the split's kernel time less the tracer's own), else the
/// untraced runs'.
fn ran_line(kernel: Option<&Kernel>, net: Option<f64>, wall: f64, user: f64, sys: f64) -> String {
    match (kernel, net) {
        (Some(k), Some(net)) => format!(
            "the program ran {} of wall time (untraced); traced, {} on CPU and {} of it in the kernel: the split's {}, less the tracer's own {}{}",
            human_ns(wall),
            human_ns((k.usage_ns - k.tracer_ns).max(0.0)),
            human_ns(net),
            human_ns(k.split_ns),
            human_ns(k.tracer_ns),
            if k.tracer_measured { "" } else { " (not measured)" }
        ),
        _ => format!(
            "the program ran {} of wall time, {} on CPU, {} of it in the kernel (system time from the timer's ticks: no split ran)",
            human_ns(wall),
            human_ns(user + sys),
            human_ns(sys)
        ),
    }
}

/// The program's rows (times, priced kernel time, explained %) and the model that reads them.
/// With a split, its kernel time (net of the tracer's own cost) is the one kernel total;
/// without, the untraced runs' system time, and the verdict says which.
fn check(
    o: &mut Outcome,
    priced: &[Priced],
    (times, untraced): (&[Times], bool),
    cmd: &str,
    what_ifs: &[pricing::WhatIf],
    kernel: Option<&Kernel>,
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
            match metric {
                "explained" => "%",
                "traced_to_untraced" | "traced_to_untraced_cpu" => "ratio",
                _ => "ns",
            },
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
    // With the measured split, explained is priced ÷ the kernel time measured in the traced run
    // itself (usage less user); without it, priced ÷ the untraced runs' system time.
    let kernel_ns = kernel.map(Kernel::net).filter(|k| *k > 0.0);
    // Its interval: the priced total's (the units' spread) over the kernel time's own (an
    // estimate where ticks shared it), the low end over the high and the high over the low.
    let ci = kernel.map_or(0.0, |k| k.ci_ns);
    let explained = match kernel_ns {
        Some(k) => Some((
            100.0 * total.0 / (k + ci),
            100.0 * total.1 / k,
            100.0 * total.2 / (k - ci).max(k / 2.0), // at most doubled
        )),
        None => sys.as_ref().and_then(|s| pricing::explained(total, s)),
    };
    let sysm_for_rest = kernel_ns;
    if let Some(e) = explained {
        push("explained", vec![e.0, e.1, e.2], true);
    }

    let med = |v: Vec<f64>| Summary::of(&v).map_or(0.0, |s| s.median);
    let (user, sysm, wall) = (
        med(col(|t| t.user_ns)),
        med(col(|t| t.sys_ns)),
        med(col(|t| t.wall_ns)),
    );
    let mut verdict = vec![ran_line(kernel, kernel_ns, wall, user, sysm)];
    if let (true, Some(net), Some(k)) = (untraced, kernel_ns, kernel) {
        let c = times::untraced_check(
            k.traced(net),
            &col(|t| t.sys_ns),
            &col(|t| t.user_ns + t.sys_ns),
        );
        push("traced_to_untraced", vec![c.kernel_ratio], false);
        push("traced_to_untraced_cpu", vec![c.cpu_ratio], false);
        verdict.push(c.text);
    }
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
                "explained: {mid:.0}% ({lo:.0}–{hi:.0}%) of its {} (priced ÷ measured {:.2}); the other {} is kernel work no term prices",
                if sysm_for_rest.is_some() { "kernel time" } else { "system time" },
                mid / 100.0,
                human_ns((sysm_for_rest.unwrap_or(sysm) - total.1).max(0.0))
            ));
        }
        Some((lo, mid, hi)) => verdict.push(format!(
            "explained: {mid:.0}% ({lo:.0}–{hi:.0}%): the price is above the measured {} (priced ÷ measured {:.2}); a unit cost here is higher than what this program's events cost (warm caches, batched work) — a finding, not a rounding",
            if sysm_for_rest.is_some() { "kernel time" } else { "system time" },
            mid / 100.0
        )),
        None => verdict.push("no system time was measured: nothing to check the price against".into()),
    }
    if let (Some(k), true) = (kernel_ns, ci > 0.05 * kernel_ns.unwrap_or(0.0)) {
        verdict.push(format!("the kernel time is {} ± {} (95%): an estimate in part (the kernel-other the cpu-clock ticks found inside user time, from few ticks; in a sampled split, the untimed calls), and explained's interval holds it", human_ns(k), human_ns(ci)));
    }
    let no_term: u64 = priced
        .iter()
        .filter(|p| p.class == "syscall" && p.unit.is_none())
        .map(|p| p.count)
        .sum();
    if no_term > 0 && kernel.is_none() {
        verdict.push(format!(
            "no term: {no_term} syscalls have no unit cost of their own, 0 in the price"
        ));
    }
    for w in what_ifs {
        verdict.push(format!("what if: {}", w.text));
    }
    let mut params = serde_json::Map::new();
    params.insert("priced_kernel_ns".into(), json!(total.1.round()));
    params.insert("sys_time_ns".into(), json!(sysm.round()));
    if let (Some(k), Some(net)) = (kernel, kernel_ns) {
        params.insert("kernel_ns".into(), json!(net.round()));
        params.insert("tracer_ns".into(), json!(k.tracer_ns.round()));
    }
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
            "Examples:\n  costlab price -- tar czf /tmp/x.tgz /usr/share/doc\n  costlab price --verify --runs 5 --rate '([0-9.]+) ops/s' -- ./server-bench\n  costlab price --runs 3 --json price.json -- dd if=/dev/zero of=/dev/null bs=512 count=2M\n  costlab price --pid 1234 --duration 5s\n\nExit status: 0 the program exited 0; the program's own when it failed (128 + the signal\nthat killed it), after one line saying so. costlab's own keep out of its way, as timeout's\ndo: 124 --strict and a figure not ok or a what-if refuted; 125 costlab refused (bad input,\na missing prerequisite) or failed; 126 the program cannot be executed; 127 no such\nprogram; 130 Ctrl-C.",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<costlab_lab::Invocation> {
        let args: PriceArgs = costlab_lab::args::parsed(m)?;
        Ok(
            costlab_lab::Invocation::measure(args.common.clone(), move |ctx| run(&args, ctx))
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
    /// A price's report leads with the program, where its time went and its what-ifs.
    fn lead(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Option<costlab_history::report::html::Lead> {
        report::lead(doc)
    }
    /// A what-if its trial refuted (`--verify`) fails `--strict` like a figure not ok.
    fn strict_lines(&self, rows: &[ResultRow]) -> Vec<String> {
        verify::rows::refuted_lines(rows)
    }
    /// Two verified prices: each what-if's verdict in both.
    fn compare_lines(
        &self,
        a: &costlab_history::report::Doc,
        b: &costlab_history::report::Doc,
    ) -> Vec<String> {
        verify::rows::compare_lines(a, b)
    }
    /// `costlab price -- CMD` runs the user's program and exits with its status.
    fn runs_a_program(&self, _name: &str) -> bool {
        true
    }
}
