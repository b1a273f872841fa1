//! The echo lab: io_uring vs epoll echo servers, a load generator, and the cost model.
//!
//! `costlab echo` runs the experiment: for each sweep point and repetition, each engine's
//! server runs in its own process (`costlab echo serve`) pinned to the last CPU, and the
//! loader runs in this process on the other CPUs. Repetitions are interleaved (all engines
//! at one point, then the next repetition) so engine ratios pair samples taken side by side.

pub mod args;
pub mod attribute;
pub mod charts;
pub mod epoll;
pub mod features;
pub mod listen;
pub mod load;
pub mod model;
pub mod remote;
pub mod ring;
pub mod server;
pub mod stats;
pub mod uring;
pub mod uring_basic;
mod uring_conn;
pub mod uring_hot;
mod uring_pool;

mod commands;
mod process;
mod render;
mod sweep;
#[cfg(test)]
mod tests;

use costlab_core::measure::conditions::{Conditions, Watch};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use args::{EchoArgs, EchoCommand, EchoLoadArgs, EchoRunArgs, EchoServeArgs};
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::measure::{
    cancel, cpus, sizes, stats::paired_ratios, syscost, SampleSpec, Summary,
};
use costlab_history::report::{model::Case, progress, table, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};
use features::Features;
use load::{ClientKind, Errors, LoadReport, LoadSpec};
use model::Observed;
use server::{Engine, ServeOpts};
use stats::ServerStats;

pub const LAB: &str = "echo";

pub use commands::{load_command, load_spec, serve_command};
use process::*;
use render::*;
pub use render::{cpu_ratios, reading, render, render_load, throughput_ratios};
pub use sweep::{sweep, variants, Plan, Variant};

/// Parse a duration: "2" (seconds), "2s", "500ms", "1.5s", from `MIN_RUN` to `MAX_RUN`.
pub fn parse_duration(text: &str, what: &str) -> Result<Duration> {
    costlab_core::measure::units::parse_duration(text, what, MIN_RUN, MAX_RUN)
}

/// The shortest run a `--duration` may ask for: a run's window is its middle 60%, and under
/// 60 ms a loaded 2-CPU machine may answer no request in it (a run of 5ms measured nothing
/// three times, then failed, before this limit).
const MIN_RUN: Duration = Duration::from_millis(100);

/// The longest run a `--duration` may ask for.
const MAX_RUN: Duration = Duration::from_secs(3600);

/// `--sizes B` of `echo serve` and `echo load`: one message size, 1 byte to 64M.
pub(crate) fn parse_msg_size(text: &str) -> Result<usize> {
    let text = costlab_lab::args::one(
        "--sizes",
        text,
        "one server or loader uses one message size",
    )?;
    msg_size("--sizes", text, text)
}

/// One message size of the flag `flag` whose whole value was `whole`; the message names both.
fn msg_size(flag: &str, whole: &str, text: &str) -> Result<usize> {
    let b = sizes::parse_size(text).map_err(|_| bad_msg_size(flag, whole, text))?;
    if b == 0 || b > 64 << 20 {
        return Err(bad_msg_size(flag, whole, text));
    }
    Ok(b as usize)
}

fn bad_msg_size(flag: &str, whole: &str, text: &str) -> anyhow::Error {
    let item = if whole.trim() == text.trim() {
        String::new()
    } else {
        format!(" ({text})")
    };
    usage(format!(
        "{flag} {whole}{item}: use message sizes from 1 byte up to 64M, like 16,4K,64K"
    ))
}

/// `--sizes 16,512,4K,16K,64K`: message sizes, each 1 B to 64M, in the order given.
pub(crate) fn parse_msg_sizes(text: &str) -> Result<Vec<usize>> {
    let mut v = sizes::parse_list(text, |item| msg_size("--sizes", text, item))?;
    v.dedup();
    Ok(v)
}

/// `--depth D`: requests in flight per connection, 1 to 4096 (checked before anything runs).
pub(crate) fn check_depth(depth: usize) -> Result<()> {
    if depth == 0 || depth > 4096 {
        return Err(usage(format!(
            "--depth {depth}: use 1 to 4096 requests in flight per connection"
        )));
    }
    Ok(())
}

/// `costlab echo`: the sweep, its figures and (at merge) the cost model.
pub fn run(args: &EchoRunArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::from_args(args, ctx)?;
    run_plan(&plan, ctx.quick, &ctx.machine.mitigations.detail())
}

/// The sweep, then its model; `mitigations` is the state the terms were measured under
/// (`Mitigations::detail`), which the model's reading states.
pub(crate) fn run_plan(plan: &Plan, quick: bool, mitigations: &str) -> Result<Outcome> {
    let (mut outcome, observed) = sweep(plan)?;
    add_model(&mut outcome, &observed, quick, mitigations)?;
    Ok(outcome)
}

/// Check the cost model against the sweep: measure s, w and t(n) here, on this machine, right
/// after the sweep (the same terms `costlab syscall` reports), then predict every point's
/// server CPU per request from the counts its server reported.
pub(crate) fn add_model(
    out: &mut Outcome,
    observed: &[(Case, Observed)],
    quick: bool,
    mitigations: &str,
) -> Result<()> {
    if observed.is_empty() {
        return Ok(());
    }
    let batches: &[u32] = if quick {
        &[1, 4, 16, 64, 256]
    } else {
        &syscost::DEFAULT_BATCHES
    };
    progress::note("echo: measuring the model's cost terms (s, w, t(n))");
    match syscost::measure_terms_at(&SampleSpec::quick(), batches) {
        Ok(terms) => {
            let points: Vec<Observed> = observed.iter().map(|(_, o)| o.clone()).collect();
            let mut refined = model::build_model_with_cases(&terms, observed);
            let mut article = model::build_article_model(&terms, &points);
            // Both models are checked against the server CPU the sweep measured: they are
            // read from those figures and carry their verdicts.
            let measured: Vec<&costlab_history::report::ResultRow> = out
                .results
                .iter()
                .filter(|r| {
                    r.metric == "server_cpu_per_req" && observed.iter().any(|(c, _)| r.matches(c))
                })
                .collect();
            costlab_core::measure::quality::model_inherits(&mut refined, &measured);
            costlab_core::measure::quality::model_inherits(&mut article, &measured);
            model::measured_under(&mut refined, mitigations);
            model::measured_under(&mut article, mitigations);
            out.models.push(refined);
            out.models.push(article);
        }
        Err(e) if costlab_core::measure::cancel::requested() => return Err(e),
        Err(e) => out.notes.push(format!(
            "cost model not checked: measuring its terms failed: {e:#}"
        )),
    }
    Ok(())
}

// ---------------------------------------------------------------- costlab run

pub struct EchoLab;

impl Lab for EchoLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<EchoArgs>(
            "echo",
            "Is io_uring faster than epoll here? Echo servers, a load generator and the experiment",
            "Examples:\n  costlab echo --conns 1,128 --duration 1s\n  costlab echo --loaders lg1,lg2 --addr 10.0.0.5 --conns 128,1000\n                 the load from two hosts over ssh, the servers here on 10.0.0.5\n  costlab echo --loaders me@lg1 --addr 10.0.0.5 --ssh \"ssh -F lab_ssh_config\" --loader-costlab /opt/costlab/bin/costlab\n  costlab echo serve --case uring --addr 127.0.0.1:9000\n  costlab echo load --target 127.0.0.1:9000 --conns 64 --samples 3",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: EchoArgs = parsed(m)?;
        Ok(match args.command {
            Some(EchoCommand::Serve(a)) => {
                serve_command(&a)?;
                Invocation::Done
            }
            // A loader host driven by `costlab echo --loaders` over ssh.
            Some(EchoCommand::Load(a)) if a.for_lead => {
                remote::serve_lead(&load_spec(&a)?)?;
                Invocation::Done
            }
            // The loader alone: its own table (no server side to show).
            Some(EchoCommand::Load(a)) => Invocation::measure_rendered(
                a.common.clone(),
                move |ctx| load_command(&a, ctx),
                render_load,
            ),
            None => Invocation::measure(args.run.common.clone(), move |ctx| run(&args.run, ctx)),
        })
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        charts::charts(doc)
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        if cpus::allowed_cpus().len() < 2 {
            return Some("needs two CPUs: one for the server, one for the loader".into());
        }
        None
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let mut plan = Plan::quick();
        if !full {
            // The quick plan's sheet compares io_uring with epoll; uring-basic (the
            // article's plain server) is the full plan's and `costlab echo`'s third engine.
            // Leaving it out keeps `costlab run` near its one-minute budget.
            plan.engines.retain(|&e| e != Engine::UringBasic);
            // The sheet reads 16 B at 1 and 128 connections and 16 KiB at the most.
            let most = plan.conns.iter().copied().max().unwrap_or(1);
            plan.only = plan
                .sizes
                .iter()
                .flat_map(|&size| plan.conns.iter().map(move |&c| (size, c)))
                .filter(|&(size, c)| size == 16 || c == most)
                .collect();
        }
        if full {
            plan.conns = vec![1, 16, 128, 1000];
            plan.sizes = vec![16, 4096, 16 * 1024, 64 * 1024];
            plan.duration = Duration::from_secs(2);
            plan.reps = ctx.spec.samples.clamp(3, 5);
        }
        run_plan(&plan, !full, &ctx.machine.mitigations.detail())
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        let mut out = Vec::new();
        let client = headline_client(o);
        let sizes_run = sizes_in(o);
        // The connection headlines read the smallest messages (16 B in the plans).
        let small = sizes_run.first().copied();
        for conns in [1usize, 128] {
            let Some(s) = Summary::of(&throughput_ratios(
                o,
                Engine::Uring,
                Engine::Epoll,
                client,
                conns,
                small,
            )) else {
                continue;
            };
            let mut want = case! {"engine" => "uring", "client" => client, "conns" => conns};
            if let Some(b) = small {
                want.insert("size".into(), b.into());
            }
            // The ratio is read from both engines' throughput at these connections.
            let sources: Vec<&costlab_history::report::ResultRow> = o
                .results
                .iter()
                .filter(|r| r.lab == LAB && r.metric == "throughput")
                .filter(|r| ["uring", "epoll"].contains(&r.key("engine").as_str()))
                .filter(|r| r.key("client") == client && num_key(r, "conns") as usize == conns)
                .filter(|r| small.is_none_or(|b| num_key(r, "size") == b as u64))
                .collect();
            out.push(
                Headline {
                    label: format!(
                        "echo io_uring/epoll throughput, {conns} conn{}",
                        if conns == 1 { "" } else { "s" }
                    ),
                    summary: s,
                    unit: "x".into(),
                    reading: reading(s, conns, o.find("batch", &want).map(|r| r.summary.median)),
                    ..Default::default()
                }
                .judged_by(&sources),
            );
        }
        if let Some(h) = headline_at_size(o, client, 16 * 1024) {
            out.push(h);
        }
        out
    }
}

/// The message sizes a run has, ascending.
pub(crate) fn sizes_in(o: &Outcome) -> Vec<usize> {
    let mut v: Vec<usize> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput")
        .filter_map(|r| r.case.get("size").and_then(|v| v.as_u64()))
        .map(|b| b as usize)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// "echo io_uring/epoll at 16 KiB": the throughput ratio at the most connections run at that
/// size, read with the server CPU per request of both.
pub(crate) fn headline_at_size(o: &Outcome, client: &str, size: usize) -> Option<Headline> {
    let conns = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput" && r.key("engine") == "epoll")
        .filter(|r| num_key(r, "size") == size as u64 && r.key("client") == client)
        .map(|r| num_key(r, "conns") as usize)
        .max()?;
    let s = Summary::of(&throughput_ratios(
        o,
        Engine::Uring,
        Engine::Epoll,
        client,
        conns,
        Some(size),
    ))?;
    let cpu = Summary::of(&cpu_ratios(
        o,
        Engine::Uring,
        Engine::Epoll,
        client,
        conns,
        Some(size),
    ));
    let cpu_text = cpu.map_or(String::new(), |c| {
        format!(
            "; epoll spends {:.2}x the server CPU per request that io_uring does",
            c.median
        )
    });
    let base = reading(s, conns, None);
    // The ratio is as good as the throughput figures it divides.
    let sources: Vec<&costlab_history::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput")
        .filter(|r| ["uring", "epoll"].contains(&r.key("engine").as_str()))
        .filter(|r| num_key(r, "size") == size as u64 && r.key("client") == client)
        .filter(|r| num_key(r, "conns") as usize == conns)
        .collect();
    Some(
        Headline {
            label: format!("echo io_uring/epoll at {}", sizes::human_size(size as u64)),
            summary: s,
            unit: "x".into(),
            reading: format!(
                "{} messages: {base}{cpu_text}",
                sizes::human_size(size as u64)
            ),
            ..Default::default()
        }
        .judged_by(&sources),
    )
}

/// The client whose figures the headlines read: the default one where the run has it, else
/// the first of the others it has.
pub(crate) fn headline_client(o: &Outcome) -> &'static str {
    let has = |c: ClientKind| {
        o.results
            .iter()
            .any(|r| r.metric == "throughput" && r.key("client") == c.name())
    };
    [ClientKind::DEFAULT, ClientKind::Uring, ClientKind::Event]
        .into_iter()
        .find(|&c| has(c))
        .unwrap_or(ClientKind::DEFAULT)
        .name()
}
