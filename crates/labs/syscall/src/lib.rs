//! The syscall lab: what a syscall costs (s), what send and recv cost in the kernel (w), what
//! io_uring costs per op at batch n (t(n)). The measurements live in `measure::syscost`
//! (the echo lab prices its servers with the same terms); this folder turns them into
//! figures, the "syscall cost terms" model, a table and the cost-sheet headlines.

pub mod args;
pub mod terms;

use costlab_core::measure::conditions::judged_case;
use costlab_history::report::ResultRow;
use std::time::Duration;

use anyhow::Result;

use args::SyscallArgs;
use costlab_core::error::usage;
use costlab_core::measure::counters::{self, Readings};
use costlab_core::measure::syscost::{self, CallFigure, Measurements, DEFAULT_BATCHES, MAX_BATCH};
use costlab_core::measure::units::human_ns;
use costlab_core::measure::{SampleSpec, Summary};
use costlab_history::report::{progress, table, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub const LAB: &str = "syscall";

/// The calls measured, in the order they are shown (the `call` case key's values).
pub const CALLS: [&str; 12] = [
    "getppid",
    "clock_gettime",
    "read-devzero",
    "write-devnull",
    "tcp-send",
    "tcp-recv",
    "tcp-recv-unaligned",
    "tcp-send-wake",
    "epoll-wait",
    "uring-nop",
    "uring-send",
    "uring-recv",
];

/// The batches of the quick plan (`costlab run`).
pub const QUICK_BATCHES: [u32; 5] = [1, 4, 16, 64, 256];

/// Parse `--batches`: a comma list of whole numbers from 1 to 4096.
pub fn parse_batches(text: &str) -> Result<Vec<u32>> {
    let mut v = costlab_core::measure::sizes::parse_list(text, |item| {
        costlab_core::measure::units::parse_count(item, "batch", 1, MAX_BATCH.into(), "1,4,16")
            .map(|n| n as u32)
    })
    .map_err(|e| usage(format!("--batches: {}", costlab_core::error::one_line(&e))))?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// What one run measures.
#[derive(Debug, Clone)]
pub struct Plan {
    pub batches: Vec<u32>,
    pub spec: SampleSpec,
}

/// `costlab syscall`.
pub fn run(args: &SyscallArgs, ctx: &Ctx) -> Result<Outcome> {
    let batches = match &args.batches {
        Some(text) => parse_batches(text)?,
        None if ctx.quick => QUICK_BATCHES.to_vec(),
        None => DEFAULT_BATCHES.to_vec(),
    };
    run_plan(
        &Plan {
            batches,
            spec: ctx.spec.clone(),
        },
        ctx,
    )
}

/// Measure the plan: every call, with progress and (with --counters) counters per case.
pub fn run_plan(plan: &Plan, ctx: &Ctx) -> Result<Outcome> {
    let steps =
        7 + syscost::PER_BYTE_SIZES.len() + syscost::EPOLL_EVENTS.len() + 2 * plan.batches.len();
    let bar = progress::bar(steps as u64, LAB);
    let mut readings: Vec<(Vec<(&'static str, u32)>, Readings)> = Vec::new();
    // Each step's figures, judged with their conditions (re-measured while disturbed).
    let mut judged: Vec<ResultRow> = Vec::new();
    let mut step_notes: Vec<String> = Vec::new();
    // The measuring thread is pinned to the last allowed CPU (measure::cpus::Pinned::last_allowed).
    let cpu: Vec<usize> = costlab_core::measure::cpus::allowed_cpus()
        .last()
        .copied()
        .into_iter()
        .collect();
    let mut runner =
        |label: &str, f: &mut dyn FnMut() -> Result<Vec<CallFigure>>| -> Result<Vec<CallFigure>> {
            bar.set_message(label.to_string());
            progress::note(&format!("syscall: {label}"));
            let mut step_readings = None;
            let o = judged_case(&format!("syscall {label}"), &cpu, &ctx.retry, || {
                let (figs, r) = counters::around(ctx.counters, &mut *f)?;
                let mut o = Outcome::default();
                for fig in &figs {
                    o.push(
                        LAB,
                        costlab_core::case! {"call" => fig.call, "batch" => fig.batch},
                        "latency",
                        "ns",
                        fig.samples.clone(),
                    );
                }
                step_readings = r.map(|r| (figs.iter().map(|f| (f.call, f.batch)).collect(), r));
                Ok(o)
            })?;
            if let Some(r) = step_readings {
                readings.push(r);
            }
            // The figures kept are the best attempt's: hand those samples on.
            let figs = o
                .results
                .iter()
                .filter_map(|r| {
                    let call = CALLS.iter().find(|c| **c == r.key("call"))?;
                    Some(CallFigure {
                        call,
                        batch: r.key("batch").parse().ok()?,
                        samples: r.samples.clone(),
                    })
                })
                .collect();
            judged.extend(o.results);
            step_notes.extend(o.notes);
            bar.inc(1);
            Ok(figs)
        };
    let m = syscost::measure_all(&plan.spec, &plan.batches, &mut runner)?;
    bar.finish_and_clear();
    let mut outcome = outcome_from(&m, &ctx.machine.mitigations.detail(), &judged)?;
    outcome.notes.extend(step_notes);
    for (keys, r) in &readings {
        for row in outcome.results.iter_mut() {
            if keys
                .iter()
                .any(|(c, b)| row.key("call") == *c && row.key("batch") == b.to_string())
            {
                r.attach(row);
            }
        }
    }
    Ok(outcome)
}

/// The outcome of a set of measurements: a latency row per call and batch, the "syscall
/// cost terms" model, and a note when io_uring could not be measured. Each row takes the
/// conditions and verdict of its figure in `judged` (the attempts kept), before the model is
/// built, so the model's terms carry their figures' verdicts.
pub fn outcome_from(m: &Measurements, mitigations: &str, judged: &[ResultRow]) -> Result<Outcome> {
    let mut o = Outcome::default();
    for f in &m.figures {
        o.push(
            LAB,
            costlab_core::case! {"call" => f.call, "batch" => f.batch},
            "latency",
            "ns",
            f.samples.clone(),
        );
    }
    for (call, size, samples) in &m.sized {
        o.push(
            LAB,
            costlab_core::case! {"call" => *call, "batch" => 1u32, "size" => *size},
            "latency",
            "ns",
            samples.clone(),
        );
    }
    for row in o.results.iter_mut() {
        if let Some(j) = judged
            .iter()
            .find(|j| j.case == row.case && j.samples == row.samples)
        {
            row.conditions = j.conditions.clone();
            row.quality = j.quality;
            row.quality_reasons = j.quality_reasons.clone();
        }
    }
    if let Some(note) = unaligned_note(m) {
        o.notes.push(note);
    }
    let terms = syscost::terms_from(m)?;
    o.models
        .push(terms::model(&terms, m, mitigations, &o.results));
    if let Some(why) = &m.uring_unsupported {
        o.notes
            .push(format!("io_uring figures unsupported here: {why}"));
    }
    Ok(o)
}

/// What receiving into a buffer off a cache line cost against the aligned recv of the same
/// size, when both were measured.
pub fn unaligned_note(m: &Measurements) -> Option<String> {
    let (size, off) = *m.by_size("tcp-recv-unaligned").first()?;
    let (_, aligned) = *m.by_size("tcp-recv").iter().find(|(b, _)| *b == size)?;
    if aligned <= 0.0 {
        return None;
    }
    Some(format!(
        "a {} recv into a buffer {} B past a cache line took {:.0} ns against {:.0} ns at the line ({:.2}x): where a buffer starts is a cost here, so every buffer costlab hands the kernel starts on a page",
        costlab_core::measure::sizes::human_size(size as u64),
        syscost::UNALIGNED_OFFSET,
        off,
        aligned,
        off / aligned
    ))
}

/// The term a row feeds, for the table.
fn term_of(call: &str) -> &'static str {
    match call {
        "getppid" => "s",
        "tcp-send" => "s + w_send",
        "tcp-recv" => "s + w_recv",
        "tcp-recv-unaligned" => "w_recv, buffer 16 B off",
        "tcp-send-wake" => "s + w_send + wake",
        "uring-nop" => "t(n)",
        "uring-send" | "uring-recv" => "per op at n",
        "epoll-wait" => "n = events",
        "clock_gettime" => "vDSO, no switch",
        _ => "",
    }
}

/// The table of calls, then the derived terms and the model's verdicts.
pub fn render(o: &Outcome) -> String {
    let mut ours: Vec<&costlab_history::report::ResultRow> =
        o.results.iter().filter(|r| r.lab == LAB).collect();
    // Calls in the order of the case-key list, each call's batches ascending.
    ours.sort_by_key(|r| {
        let call = r.key("call");
        let rank = CALLS.iter().position(|c| *c == call).unwrap_or(CALLS.len());
        let size = r.case.get("size").and_then(|v| v.as_u64()).unwrap_or(0);
        (rank, r.key("batch").parse::<u32>().unwrap_or(0), size)
    });
    let rows: Vec<Vec<String>> = ours
        .into_iter()
        .map(|r| {
            let s = &r.summary;
            let size = r
                .case
                .get("size")
                .and_then(|v| v.as_u64())
                .map_or("16".to_string(), costlab_core::measure::sizes::format_size);
            let size = if r.key("call").starts_with("tcp-") {
                size
            } else {
                "—".into()
            };
            vec![
                r.key("call"),
                r.key("batch"),
                size,
                format!(
                    "{:.1}{}",
                    s.median,
                    costlab_history::report::verdict::mark(r)
                ),
                format!("{:.1}–{:.1}", s.min, s.max),
                s.n.to_string(),
                term_of(&r.key("call")).to_string(),
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "call",
            "batch",
            "bytes",
            "ns per call",
            "min–max ns",
            "n",
            "term",
        ],
        &rows,
    );
    out.push('\n');
    for m in o.models.iter().filter(|m| m.lab == LAB) {
        out += &format!("{}:\n", m.name);
        for v in &m.verdict {
            out += &format!("  {v}\n");
        }
    }
    out
}

/// The quick plan's sampling: short samples, enough of them for a median.
fn quick_spec() -> SampleSpec {
    SampleSpec {
        samples: 9,
        min_sample: Duration::from_millis(25),
        warmup: Duration::from_millis(20),
    }
}

/// The syscall lab in `costlab run`.
pub struct SyscallLab;

impl Lab for SyscallLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<SyscallArgs>(
            "syscall",
            "What a syscall costs (s), what send/recv cost in the kernel (w), what io_uring costs per op at batch n (t)",
            "Examples:\n  costlab syscall\n  costlab syscall --batches 1,16,256 --samples 15\n  costlab syscall --cpus 1 --counters",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: SyscallArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }

    // `unavailable`: never. Every machine has syscalls; io_uring's absence is reported inside
    // the outcome.

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let plan = if full {
            Plan {
                batches: DEFAULT_BATCHES.to_vec(),
                spec: ctx.spec.clone(),
            }
        } else {
            Plan {
                batches: QUICK_BATCHES.to_vec(),
                spec: quick_spec(),
            }
        };
        run_plan(&plan, ctx)
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        headlines(o)
    }
}

fn row<'a>(
    o: &'a Outcome,
    call: &str,
    batch: u32,
) -> Option<&'a costlab_history::report::ResultRow> {
    o.find(
        "latency",
        &costlab_core::case! {"call" => call, "batch" => batch},
    )
}

/// The cost-sheet lines: s with the mitigation state, w send and recv, t at batch 1 and at
/// the largest batch, the vDSO clock_gettime.
pub fn headlines(o: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    let Some(s_row) = row(o, "getppid", 1) else {
        return h;
    };
    let s = s_row.summary;
    let mitig = o
        .models
        .iter()
        .find(|m| m.lab == LAB)
        .and_then(|m| m.params.get("mitigations"))
        .and_then(|v| v.as_str())
        .unwrap_or("mitigation state unknown");
    h.push(
        Headline {
            label: "syscall s (raw getppid)".into(),
            summary: s,
            unit: "ns".into(),
            reading: format!(
                "entering and leaving the kernel costs {} here, with {mitig}",
                human_ns(s.median)
            ),
            ..Default::default()
        }
        .judged_by(&[s_row]),
    );
    for (call, what) in [("tcp-send", "send"), ("tcp-recv", "recv")] {
        if let Some(r) = row(o, call, 1) {
            let w: Vec<f64> = r.samples.iter().map(|x| x - s.median).collect();
            if let Some(ws) = Summary::of(&w) {
                h.push(
                    Headline {
                        label: format!("w {what} (16 B loopback TCP, beyond s)"),
                        summary: ws,
                        unit: "ns".into(),
                        reading: format!(
                            "a 16-byte {what} does {} of kernel work beyond the switch, {:.1}x s",
                            human_ns(ws.median),
                            ws.median / s.median.max(1e-9)
                        ),
                        ..Default::default()
                    }
                    .judged_by(&[r, s_row]),
                );
            }
        }
    }
    let nops: Vec<&costlab_history::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.key("call") == "uring-nop")
        .collect();
    let by_batch =
        |r: &&&costlab_history::report::ResultRow| r.key("batch").parse::<u32>().unwrap_or(0);
    if let (Some(first), Some(last)) = (
        nops.iter().min_by_key(by_batch),
        nops.iter().max_by_key(by_batch),
    ) {
        let t1 = first.summary;
        h.push(
            Headline {
                label: format!("io_uring t({}) NOP per op", first.key("batch")),
                summary: t1,
                unit: "ns".into(),
                reading: format!(
                    "one NOP per io_uring_enter costs {}, {:.1}x a null syscall",
                    human_ns(t1.median),
                    t1.median / s.median.max(1e-9)
                ),
                ..Default::default()
            }
            .judged_by(&[first, s_row]),
        );
        if last.key("batch") != first.key("batch") {
            let tn = last.summary;
            h.push(
                Headline {
                    label: format!("io_uring t({}) NOP per op", last.key("batch")),
                    summary: tn,
                    unit: "ns".into(),
                    reading: format!(
                    "{} NOPs per enter cut the per-op cost to {}, {:.0}x less than one per enter",
                    last.key("batch"),
                    human_ns(tn.median),
                    t1.median / tn.median.max(1e-9)
                ),
                    ..Default::default()
                }
                .judged_by(&[last, first]),
            );
        }
    }
    if let Some(c) = row(o, "clock_gettime", 1) {
        h.push(
            Headline {
                label: "vDSO clock_gettime".into(),
                summary: c.summary,
                unit: "ns".into(),
                reading: format!(
                    "a vDSO call stays in user space: {}, {:.0}x cheaper than a null syscall",
                    human_ns(c.summary.median),
                    s.median / c.summary.median.max(1e-9)
                ),
                ..Default::default()
            }
            .judged_by(&[c, s_row]),
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;
    use costlab_core::measure::quality::Quality;

    #[test]
    fn batches_parse_and_bad_ones_exit_2() {
        assert_eq!(parse_batches("1,4,16").unwrap(), vec![1, 4, 16]);
        assert_eq!(parse_batches("256, 1,4").unwrap(), vec![1, 4, 256]);
        assert_eq!(parse_batches("4096").unwrap(), vec![4096]);
        for bad in [
            "0",
            "1,0",
            "x",
            "4097",
            "1,,2",
            "-1",
            "2.5",
            "",
            "256,1,4,4",
        ] {
            let e = parse_batches(bad).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{bad}");
            assert!(!e.to_string().contains('\n'), "{bad}");
        }
    }

    fn fake() -> Measurements {
        let mut m = Measurements::default();
        m.push("getppid", 1, vec![100.0, 90.0, 110.0]);
        m.push("clock_gettime", 1, vec![20.0, 20.0, 20.0]);
        m.push("read-devzero", 1, vec![150.0]);
        m.push("write-devnull", 1, vec![140.0]);
        m.push("tcp-send", 1, vec![1300.0, 1200.0, 1400.0]);
        m.push("tcp-recv", 1, vec![500.0, 600.0, 550.0]);
        m.push("epoll-wait", 1, vec![200.0]);
        for b in [1u32, 4, 16] {
            let f = f64::from(b);
            m.push("uring-nop", b, vec![50.0 + 400.0 / f]);
            m.push("uring-send", b, vec![900.0 + 400.0 / f]);
            m.push("uring-recv", b, vec![300.0 + 400.0 / f]);
        }
        m
    }

    #[test]
    fn the_unaligned_recv_is_set_against_the_aligned_one_of_its_size() {
        let mut m = fake();
        assert_eq!(unaligned_note(&m), None);
        m.sized
            .push(("tcp-recv", 65536, vec![10_000.0, 11_000.0, 12_000.0]));
        assert_eq!(unaligned_note(&m), None);
        m.sized.push((
            "tcp-recv-unaligned",
            65536,
            vec![44_000.0, 40_000.0, 48_000.0],
        ));
        let note = unaligned_note(&m).unwrap();
        assert!(note.contains("44000 ns against 11000 ns"), "{note}");
        assert!(note.contains("(4.00x)"), "{note}");
        let o = outcome_from(&m, "mitigations=off", &[]).unwrap();
        assert!(o.notes.iter().any(|n| n == &note));
    }

    #[test]
    fn a_disturbed_s_is_said_wherever_the_model_and_the_sheet_price_from_it() {
        let m = fake();
        let mut judged = outcome_from(&m, "mitigations=off", &[]).unwrap().results;
        let why = "other processes took 97% of CPU 1 during the samples";
        for r in judged.iter_mut() {
            let getppid = r.key("call") == "getppid";
            r.quality = Some(if getppid {
                Quality::Disturbed
            } else {
                Quality::Ok
            });
            r.quality_reasons = if getppid { vec![why.into()] } else { vec![] };
        }
        let o = outcome_from(&m, "mitigations=off", &judged).unwrap();
        let v = &o.models[0].verdict;
        let getppid = "syscall call=getppid batch=1 latency";
        // The model opens with what it is read from.
        assert!(
            v[0].starts_with("! disturbed: read from figures that are not ok")
                && v[0].contains(&format!("from its input {getppid}: disturbed ({why})")),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|l| l == &format!("s = 100.0 ns (disturbed: {why}) with mitigations=off")),
            "{v:?}"
        );
        // E is not read from s; the comparison with s quotes s with its verdict.
        let enter = v
            .iter()
            .find(|l| l.starts_with("an io_uring_enter costs"))
            .unwrap();
        assert!(
            enter.contains(&format!("a null syscall's s = 100 ns (disturbed: {why})")),
            "{enter}"
        );
        // w is derived from s: it names s as the input that disturbs it.
        let w = v.iter().find(|l| l.starts_with("w_send")).unwrap();
        assert!(
            w.contains(&format!(
                "(disturbed: from its input {getppid}: disturbed ({why}))"
            )),
            "{w}"
        );
        // The sheet: s is marked, every line read against s inherits and names it; t(16)
        // against t(1) is read from neither and stays ok.
        let mut h = headlines(&o);
        costlab_history::report::verdict::follow(&mut h, &o.results);
        for line in &h {
            let against_s = !line.label.starts_with("io_uring t(16)");
            assert_eq!(
                line.quality == Some(Quality::Disturbed),
                against_s,
                "{}",
                line.label
            );
            assert_eq!(line.reading.starts_with("not read: disturbed"), against_s);
        }
        assert_eq!(h[0].quality_reasons, vec![why.to_string()]);
        assert!(h[1].quality_reasons[0].starts_with(&format!("from its input {getppid}")));
    }

    #[test]
    fn outcome_model_and_headlines_from_fake_measurements() {
        let o = outcome_from(&fake(), "mitigations=off", &[]).unwrap();
        assert_eq!(o.results.len(), 16);
        assert!(o
            .results
            .iter()
            .all(|r| r.metric == "latency" && r.unit == "ns"));
        let m = &o.models[0];
        assert_eq!(m.name, "syscall cost terms");
        assert_eq!(m.params["s_ns"], 100.0);
        assert_eq!(m.params["w_send_ns"], 1200.0);
        assert_eq!(m.params["w_recv_ns"], 450.0);
        assert_eq!(m.params["t_nop_ns"]["4"], 150.0);
        assert_eq!(m.params["nop_per_op_ns"], 50.0);
        assert_eq!(m.params["nop_per_enter_ns"], 400.0);
        assert_eq!(m.points.len(), 9);
        assert!(m.verdict[0].contains("mitigations=off"));
        let h = headlines(&o);
        let labels: Vec<&str> = h.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(
            labels,
            vec![
                "syscall s (raw getppid)",
                "w send (16 B loopback TCP, beyond s)",
                "w recv (16 B loopback TCP, beyond s)",
                "io_uring t(1) NOP per op",
                "io_uring t(16) NOP per op",
                "vDSO clock_gettime",
            ]
        );
        assert!(h[0].reading.contains("mitigations=off"));
        assert_eq!(h[1].summary.median, 1200.0);
        let text = render(&o);
        assert!(text.contains("getppid") && text.contains("syscall cost terms"));
    }

    #[test]
    fn io_uring_refused_is_a_note_not_an_error() {
        let mut m = fake();
        m.figures.retain(|f| !f.call.starts_with("uring"));
        m.uring_unsupported = Some("io_uring_setup: EPERM".into());
        let o = outcome_from(&m, "x", &[]).unwrap();
        assert!(o.notes[0].contains("EPERM"));
        assert_eq!(
            o.models[0].params["uring_unsupported"],
            "io_uring_setup: EPERM"
        );
        assert_eq!(headlines(&o).len(), 4);
    }
}
