//! The zero-copy lab: what moving bytes to a socket costs, by method and payload size. File to
//! socket (read+write, mmap+write, sendfile, splice through a pipe) and memory to socket
//! (send, MSG_ZEROCOPY, io_uring SEND and SEND_ZC), over loopback and, as root, a veth pair
//! into a network namespace. Throughput, the sender's and receiver's CPU per GB, calls per GB,
//! and for the zero-copy sends the share the kernel really did not copy.
//!
//! The model: sender CPU per GB = bytes copied x a copy's cost per byte (a memcpy at the
//! payload size, measured here) + calls x a call's cost (s, the null syscall). The payload
//! size from which each zero-copy method costs less sender CPU than its copying twin is read
//! from the measurements.

pub mod args;
pub mod completions;
pub mod model;
mod sender;
mod source;
pub mod transfer;
pub mod veth;

use std::hint::black_box;

use anyhow::Result;
use serde_json::json;

use args::ZerocopyArgs;
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::sizes::{human_size, parse_size_list};
use costlab_core::measure::{cpus, sample_fn, stats, syscost, SampleSpec, Summary};
use costlab_history::report::{progress, table, Model, ModelPoint, Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

use model::{Costs, Method};
use transfer::{Endpoint, SourceFile};

pub const LAB: &str = "zerocopy";

/// The default sweep: 4 KiB to 4 MiB by 4x.
pub const SIZES: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
const QUICK_SIZES: [u64; 2] = [64 << 10, 1 << 20];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Loopback,
    Veth,
}

impl Link {
    pub fn name(self) -> &'static str {
        match self {
            Link::Loopback => "loopback",
            Link::Veth => "veth",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub methods: Vec<Method>,
    pub sizes: Vec<u64>,
    pub links: Vec<Link>,
    /// veth was asked for by default rather than by name: skip it quietly (with a note) where
    /// it cannot be made.
    pub veth_optional: bool,
    pub dir: std::path::PathBuf,
}

impl Plan {
    pub fn parse(args: &ZerocopyArgs, quick: bool) -> Result<Plan> {
        let methods = match &args.methods {
            None => model::ALL.to_vec(),
            Some(t) => t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Method::parse(s).ok_or_else(|| {
                        usage(format!(
                            "unknown method '{s}' in --case: use {}",
                            model::ALL.map(Method::name).join(", ")
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        };
        if methods.is_empty() {
            return Err(usage(
                "--case is empty: give a comma list such as sendfile,send",
            ));
        }
        let sizes = match &args.sizes {
            Some(t) => parse_size_list(t)?,
            None if quick => QUICK_SIZES.to_vec(),
            None => SIZES.to_vec(),
        };
        if let Some(&bad) = sizes.iter().find(|&&s| !(1..=(64 << 20)).contains(&s)) {
            return Err(usage(format!(
                "payload {bad} bytes in --sizes is out of range: use 1 byte to 64M, like 4K,64K,1M"
            )));
        }
        let links = match &args.link {
            None => vec![Link::Loopback, Link::Veth],
            Some(t) => t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| match s {
                    "loopback" => Ok(Link::Loopback),
                    "veth" => Ok(Link::Veth),
                    _ => Err(usage(format!(
                        "unknown link '{s}' in --link: use loopback, veth or both"
                    ))),
                })
                .collect::<Result<Vec<_>>>()?,
        };
        if links.is_empty() {
            return Err(usage("--link is empty: give loopback, veth or both"));
        }
        Ok(Plan {
            methods,
            sizes,
            links,
            veth_optional: args.link.is_none(),
            dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
        })
    }
}

/// `costlab zerocopy`.
pub fn run(args: &ZerocopyArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::parse(args, ctx.quick)?;
    if !plan.veth_optional && plan.links.contains(&Link::Veth) {
        if let Some(why) = veth::unavailable() {
            return Err(usage(why));
        }
    }
    if !plan.dir.is_dir() {
        return Err(usage(format!(
            "--dir {} is not a directory: give one where a scratch file may be written",
            plan.dir.display()
        )));
    }
    execute(&plan, ctx)
}

/// ns per byte of a memcpy of `size` bytes (source and destination each `size`): the fastest
/// sample, the copy's own cost without whatever else shared the CPU.
fn copy_ns_per_byte(size: usize, spec: &SampleSpec) -> Result<f64> {
    let src = vec![7u8; size];
    let mut dst = vec![0u8; size];
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        }
    })?;
    let v: Vec<f64> = samples
        .iter()
        .map(|s| s.ns_per_iter() / size as f64)
        .collect();
    Ok(v.iter().copied().fold(f64::INFINITY, f64::min))
}

/// An unavailable case, for the table and the notes.
fn unavailable_note(m: Method, link: Link, why: &str) -> String {
    format!("unavailable: {} on {}: {why}", m.name(), link.name())
}

pub fn execute(plan: &Plan, ctx: &Ctx) -> Result<Outcome> {
    let mut out = Outcome::default();
    let allowed = cpus::allowed_cpus();
    let sender_cpu = allowed[0];
    let receiver_cpu = *allowed.get(1).unwrap_or(&allowed[0]);
    if sender_cpu == receiver_cpu {
        out.notes.push(
            "one CPU only: sender and receiver share it, so each one's CPU time includes waiting for the other's turn"
                .into(),
        );
    }
    // The model's terms, measured before the cases.
    let term_spec = SampleSpec {
        samples: ctx.spec.samples.min(5),
        ..SampleSpec::quick()
    };
    let call_ns = stats::median(&syscost::null_syscall(&term_spec)?);
    let mut copy_cost = Vec::new();
    for &size in &plan.sizes {
        copy_cost.push((size, copy_ns_per_byte(size as usize, &term_spec)?));
    }
    let largest = plan.sizes.iter().copied().max().unwrap_or(1 << 20) as usize;
    let file = if plan.methods.iter().any(|m| m.from_file()) {
        let len = (64usize << 20).max(largest * 4);
        Some(SourceFile::create(&plan.dir, len)?)
    } else {
        None
    };

    let total = (plan.links.len() * plan.sizes.len() * plan.methods.len()) as u64;
    let bar = progress::bar(total, "zerocopy");
    let mut model_points = Vec::new();
    let mut said = std::collections::BTreeSet::new();
    for &link in &plan.links {
        let (endpoint, _veth) = match link {
            Link::Loopback => (
                Endpoint {
                    netns: None,
                    ip: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                },
                None,
            ),
            Link::Veth => {
                let made = match veth::unavailable() {
                    Some(why) => Err(anyhow::anyhow!(why)),
                    None => veth::Veth::create(),
                };
                match made {
                    Ok(v) => (
                        Endpoint {
                            netns: Some(v.netns.clone()),
                            ip: v.peer_ip,
                        },
                        Some(v),
                    ),
                    Err(e) => {
                        out.notes.push(format!("veth: not measured: {e:#}"));
                        bar.inc((plan.sizes.len() * plan.methods.len()) as u64);
                        continue;
                    }
                }
            }
        };
        for &size in &plan.sizes {
            for &m in &plan.methods {
                costlab_core::measure::cancel::check()?;
                bar.set_message(format!("{} {} {}", link.name(), m.name(), human_size(size)));
                let mark = out.results.len();
                let w = Watch::start(&[sender_cpu, receiver_cpu]);
                let measured = transfer::measure(
                    m,
                    size as usize,
                    &endpoint,
                    file.as_ref(),
                    sender_cpu,
                    receiver_cpu,
                    &ctx.spec,
                );
                bar.inc(1);
                let r = match measured {
                    Ok(r) => r,
                    Err(e) => {
                        costlab_core::measure::cancel::check()?;
                        let why = format!("{e:#}");
                        if said.insert((m.name(), link.name(), why.clone())) {
                            out.notes.push(unavailable_note(m, link, &why));
                        }
                        continue;
                    }
                };
                let case = || case! {"method" => m.name(), "size" => size, "link" => link.name()};
                out.push(LAB, case(), "throughput", "GB/s", r.throughput_gbps.clone());
                out.push(
                    LAB,
                    case(),
                    "sender_cpu_per_gb",
                    "ms/GB",
                    r.sender_ms_per_gb.clone(),
                );
                out.push(
                    LAB,
                    case(),
                    "receiver_cpu_per_gb",
                    "ms/GB",
                    r.receiver_ms_per_gb.clone(),
                );
                out.push(
                    LAB,
                    case(),
                    "calls_per_gb",
                    "calls/GB",
                    r.calls_per_gb.clone(),
                );
                if m.reports_zerocopy() {
                    out.push(
                        LAB,
                        case(),
                        "zerocopy_fraction",
                        "fraction",
                        r.zerocopy_fraction.clone(),
                    );
                }
                out.attach_conditions(mark, w.finish());
                let zc =
                    (!r.zerocopy_fraction.is_empty()).then(|| stats::median(&r.zerocopy_fraction));
                let calls = stats::median(&r.calls_per_gb);
                let costs = Costs {
                    copy_ns_per_byte: copy_cost.iter().find(|c| c.0 == size).map_or(0.0, |c| c.1),
                    call_ns,
                };
                let copies = m.copies_per_byte(zc);
                model_points.push(ModelPoint {
                    case: case(),
                    predicted: model::predict_ms_per_gb(copies, calls, costs),
                    measured: stats::median(&r.sender_ms_per_gb),
                    unit: "ms/GB".into(),
                });
            }
        }
    }
    bar.finish_and_clear();
    drop(file);

    let mut params = serde_json::Map::new();
    params.insert("call_ns".into(), json!(call_ns));
    for (size, c) in &copy_cost {
        params.insert(format!("copy_ns_per_byte_{size}"), json!(c));
    }
    let verdict = verdict(&out, &model_points, &copy_cost, call_ns);
    let mut m = Model {
        lab: LAB.into(),
        name: "sender CPU per GB = bytes copied x copy cost + calls x call cost (s)".into(),
        params,
        points: model_points,
        verdict,
    };
    // Checked against the measured sender CPU of every method and size.
    let measured: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.metric == "sender_cpu_per_gb")
        .collect();
    costlab_core::measure::quality::model_inherits(&mut m, &measured);
    out.models.push(m);
    if plan.links.contains(&Link::Loopback) {
        out.notes.push(
            "loopback: the kernel copies zero-copy sends into the receiver's socket anyway (a local receiver cannot keep the sender's pages), and says so with SO_EE_CODE_ZEROCOPY_COPIED / IORING_NOTIF_USAGE_ZC_COPIED; the loopback receive path runs in softirq on the sending CPU, so part of the receive cost counts as the sender's"
                .into(),
        );
    }
    Ok(out)
}

fn median_of(out: &Outcome, metric: &str, m: Method, size: u64, link: &str) -> Option<f64> {
    out.find(
        metric,
        &case! {"method" => m.name(), "size" => size, "link" => link},
    )
    .map(|r| r.summary.median)
}

/// The model's reading: where each zero-copy method starts to pay, whether the kernel really
/// did not copy, and which term the measurement disagrees with.
fn verdict(out: &Outcome, points: &[ModelPoint], copy: &[(u64, f64)], call_ns: f64) -> Vec<String> {
    let mut v = Vec::new();
    let mut sizes: Vec<u64> = out
        .results
        .iter()
        .filter_map(|r| r.case.get("size")?.as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut links: Vec<String> = out.results.iter().map(|r| r.key("link")).collect();
    links.dedup();
    for link in &links {
        for m in model::ALL {
            let Some(base) = m.baseline() else { continue };
            let pts: Vec<(u64, f64, f64)> = sizes
                .iter()
                .filter_map(|&s| {
                    Some((
                        s,
                        median_of(out, "sender_cpu_per_gb", m, s, link)?,
                        median_of(out, "sender_cpu_per_gb", base, s, link)?,
                    ))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            v.push(match model::pays_from(&pts) {
                Some(s) => format!(
                    "{link}: {} costs the sender less CPU per GB than {} from {} payloads up",
                    m.name(),
                    base.name(),
                    human_size(s)
                ),
                None => format!(
                    "{link}: {} never costs the sender less CPU per GB than {} at the sizes measured",
                    m.name(),
                    base.name()
                ),
            });
            if m.reports_zerocopy() {
                let fr: Vec<f64> = sizes
                    .iter()
                    .filter_map(|&s| median_of(out, "zerocopy_fraction", m, s, link))
                    .collect();
                if !fr.is_empty() {
                    let mean = fr.iter().sum::<f64>() / fr.len() as f64;
                    v.push(format!(
                        "{link}: {}: the kernel reported {:.0}% of sends sent without a copy{}",
                        m.name(),
                        mean * 100.0,
                        if mean < 0.01 {
                            " - zero copy did not happen here (it copied, and said so)"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
    // Which term disagrees: the largest share of the measurement neither term explains.
    if let Some(worst) = points
        .iter()
        .filter(|p| p.measured > 0.0)
        .max_by(|a, b| (a.measured - a.predicted).total_cmp(&(b.measured - b.predicted)))
    {
        let size = worst.case.get("size").and_then(|s| s.as_u64()).unwrap_or(0);
        let c = copy.iter().find(|c| c.0 == size).map_or(0.0, |c| c.1);
        v.push(format!(
            "the model leaves out the TCP/IP stack's own work (segments, ACKs, skb allocation, page pinning): it under-predicts most for {} {} at {}, {:.0} of {:.0} ms/GB unexplained (copy {:.3} ns/byte, call {:.0} ns)",
            worst.case.get("link").and_then(|x| x.as_str()).unwrap_or(""),
            worst.case.get("method").and_then(|x| x.as_str()).unwrap_or(""),
            human_size(size),
            worst.measured - worst.predicted,
            worst.measured,
            c,
            call_ns
        ));
    }
    v
}

fn fmt(x: f64) -> String {
    table::figure(x)
}

pub fn render(out: &Outcome) -> String {
    let mut rows = Vec::new();
    let model = out.models.iter().find(|m| m.lab == LAB);
    for r in out.results.iter().filter(|r| r.metric == "throughput") {
        let (m, size, link) = (
            r.key("method"),
            r.case["size"].as_u64().unwrap_or(0),
            r.key("link"),
        );
        let Some(method) = Method::parse(&m) else {
            continue;
        };
        let get = |metric: &str| median_of(out, metric, method, size, &link);
        let predicted = model
            .and_then(|md| md.points.iter().find(|p| p.case == r.case))
            .map_or("—".to_string(), |p| fmt(p.predicted));
        rows.push(vec![
            link.clone(),
            m.clone(),
            human_size(size),
            r.summary.show(2),
            get("sender_cpu_per_gb").map_or("—".into(), fmt),
            predicted,
            get("receiver_cpu_per_gb").map_or("—".into(), fmt),
            get("calls_per_gb").map_or("—".into(), fmt),
            get("zerocopy_fraction").map_or("—".into(), |f| format!("{:.0}%", f * 100.0)),
        ]);
    }
    let mut text = String::new();
    if !rows.is_empty() {
        text.push_str(&table::render(
            &[
                "link",
                "method",
                "payload",
                "throughput GB/s",
                "sender ms/GB",
                "model ms/GB",
                "receiver ms/GB",
                "calls/GB",
                "not copied",
            ],
            &rows,
        ));
        text.push('\n');
    }
    if let Some(m) = model {
        for line in &m.verdict {
            text.push_str(&format!("{line}\n"));
        }
    }
    text
}

/// The figures behind the cost sheet's zero-copy lines.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    let link = "loopback";
    let mut sizes: Vec<u64> = out
        .results
        .iter()
        .filter_map(|r| r.case.get("size")?.as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    // The size closest to 1 MiB.
    if let Some(&size) = sizes
        .iter()
        .min_by_key(|&&s| (s as i64 - (1 << 20)).unsigned_abs())
    {
        let row = |m: Method| {
            out.find(
                "sender_cpu_per_gb",
                &case! {"method" => m.name(), "size" => size, "link" => link},
            )
        };
        if let (Some(sf), Some(rw)) = (row(Method::Sendfile), row(Method::ReadWrite)) {
            h.push(Headline {
                label: format!("sendfile sender CPU ({} payloads)", human_size(size)),
                summary: sf.summary,
                unit: "ms/GB".into(),
                reading: format!(
                    "read+write costs {:.2}x the sender CPU of sendfile ({:.0} vs {:.0} ms/GB over loopback)",
                    rw.summary.median / sf.summary.median,
                    rw.summary.median,
                    sf.summary.median
                ),
                ..Default::default()
            }
            // The reading is the ratio of the two methods: both are inputs.
            .judged_by(&[sf, rw]));
        }
    }
    for m in [Method::MsgZerocopy, Method::UringSendZc] {
        let rows: Vec<_> = out
            .results
            .iter()
            .filter(|r| r.metric == "zerocopy_fraction" && r.key("method") == m.name())
            .collect();
        let Some(first) = rows.first() else { continue };
        let all: Vec<f64> = rows
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect();
        let Some(s) = Summary::of(&all) else { continue };
        let mut links: Vec<String> = rows.iter().map(|r| r.key("link")).collect();
        links.dedup();
        h.push(
            Headline {
                label: format!("{} sent without a copy", m.name()),
                summary: s,
                unit: "fraction".into(),
                reading: format!(
                    "on {}: the kernel {} ({})",
                    links.join(" and "),
                    if s.max < 0.01 {
                        "copied every send and said so"
                    } else {
                        "kept the sender's pages for part of the sends"
                    },
                    if m == Method::MsgZerocopy {
                        "SO_EE_CODE_ZEROCOPY_COPIED"
                    } else {
                        "IORING_NOTIF_USAGE_ZC_COPIED"
                    }
                ),
                ..Default::default()
            }
            // Pooled over every link's samples: each link's figure is an input.
            .judged_by(&rows),
        );
        let _ = first;
    }
    h
}

pub struct ZerocopyLab;

impl Lab for ZerocopyLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<ZerocopyArgs>(
            "zerocopy",
            "What moving bytes to a socket costs: read+write, mmap, sendfile, splice, send, MSG_ZEROCOPY, io_uring SEND and SEND_ZC, by payload size, over loopback and veth",
            "Examples:\n  costlab zerocopy\n  costlab zerocopy --case read-write,sendfile --sizes 64K,1M --link loopback",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: ZerocopyArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let plan = Plan {
            methods: model::ALL.to_vec(),
            sizes: if full {
                SIZES.to_vec()
            } else {
                QUICK_SIZES.to_vec()
            },
            // Quick: loopback only, to stay within a few seconds; `costlab zerocopy` adds veth.
            links: if full {
                vec![Link::Loopback, Link::Veth]
            } else {
                vec![Link::Loopback]
            },
            veth_optional: true,
            dir: std::env::temp_dir(),
        };
        execute(&plan, ctx)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}
