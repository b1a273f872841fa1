//! Measuring a plan: the model's terms first (a null syscall, a memcpy per payload size),
//! then every method x size on each link, each case's figures and its model point, and the
//! model checked against them.

use std::collections::BTreeSet;
use std::hint::black_box;

use anyhow::Result;
use serde_json::json;

use crate::model::{self, Costs, Method};
use crate::plan::{Link, Plan};
use crate::transfer::{self, Endpoint, Measured, SourceFile};
use crate::verdict::verdict;
use crate::{veth, LAB};
use costlab_core::case;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::{cpus, sample_fn, stats, syscost, SampleSpec};
use costlab_history::report::{progress, Model, ModelPoint, Outcome, ResultRow};
use costlab_lab::Ctx;

/// The model's terms, measured before the cases: a call's cost (ns) and a copy's cost per
/// byte at each payload size.
struct Terms {
    call_ns: f64,
    copy_cost: Vec<(u64, f64)>,
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
    let terms = measure_terms(plan, ctx)?;
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
    let mut said = BTreeSet::new();
    for &link in &plan.links {
        let Some((endpoint, _veth)) = endpoint_of(link, &mut out) else {
            bar.inc((plan.sizes.len() * plan.methods.len()) as u64);
            continue;
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
                push_case(&mut out, m, size, link, &r);
                out.attach_conditions(mark, w.finish());
                model_points.push(model_point(m, size, link, &r, &terms));
            }
        }
    }
    bar.finish_and_clear();
    drop(file);
    out.models.push(sender_model(&out, model_points, &terms));
    if plan.links.contains(&Link::Loopback) {
        out.notes.push(
            "loopback: the kernel copies zero-copy sends into the receiver's socket anyway (a local receiver cannot keep the sender's pages), and says so with SO_EE_CODE_ZEROCOPY_COPIED / IORING_NOTIF_USAGE_ZC_COPIED; the loopback receive path runs in softirq on the sending CPU, so part of the receive cost counts as the sender's"
                .into(),
        );
    }
    Ok(out)
}

fn measure_terms(plan: &Plan, ctx: &Ctx) -> Result<Terms> {
    let term_spec = SampleSpec {
        samples: ctx.spec.samples.min(5),
        ..SampleSpec::quick()
    };
    let call_ns = stats::median(&syscost::null_syscall(&term_spec)?);
    let mut copy_cost = Vec::new();
    for &size in &plan.sizes {
        copy_cost.push((size, copy_ns_per_byte(size as usize, &term_spec)?));
    }
    Ok(Terms { call_ns, copy_cost })
}

/// Where the receiver listens on `link`, and the veth pair kept for the link's cases; None
/// (with a note) where veth cannot be made.
fn endpoint_of(link: Link, out: &mut Outcome) -> Option<(Endpoint, Option<veth::Veth>)> {
    match link {
        Link::Loopback => Some((
            Endpoint {
                netns: None,
                ip: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            },
            None,
        )),
        Link::Veth => {
            let made = match veth::unavailable() {
                Some(why) => Err(anyhow::anyhow!(why)),
                None => veth::Veth::create(),
            };
            match made {
                Ok(v) => Some((
                    Endpoint {
                        netns: Some(v.netns.clone()),
                        ip: v.peer_ip,
                    },
                    Some(v),
                )),
                Err(e) => {
                    out.notes.push(format!("veth: not measured: {e:#}"));
                    None
                }
            }
        }
    }
}

/// One case's figures: throughput, each side's CPU per GB, calls per GB and, for the sends
/// that report it, the share not copied.
fn push_case(out: &mut Outcome, m: Method, size: u64, link: Link, r: &Measured) {
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
}

/// The model's prediction of the case's sender CPU beside the measured one.
fn model_point(m: Method, size: u64, link: Link, r: &Measured, terms: &Terms) -> ModelPoint {
    let zc = (!r.zerocopy_fraction.is_empty()).then(|| stats::median(&r.zerocopy_fraction));
    let calls = stats::median(&r.calls_per_gb);
    let costs = Costs {
        copy_ns_per_byte: terms
            .copy_cost
            .iter()
            .find(|c| c.0 == size)
            .map_or(0.0, |c| c.1),
        call_ns: terms.call_ns,
    };
    let copies = m.copies_per_byte(zc);
    ModelPoint {
        case: case! {"method" => m.name(), "size" => size, "link" => link.name()},
        predicted: model::predict_ms_per_gb(copies, calls, costs),
        measured: stats::median(&r.sender_ms_per_gb),
        unit: "ms/GB".into(),
    }
}

/// The sender-CPU model over every case, with its terms, its verdict and the quality of the
/// measurements it is checked against.
fn sender_model(out: &Outcome, points: Vec<ModelPoint>, terms: &Terms) -> Model {
    let mut params = serde_json::Map::new();
    params.insert("call_ns".into(), json!(terms.call_ns));
    for (size, c) in &terms.copy_cost {
        params.insert(format!("copy_ns_per_byte_{size}"), json!(c));
    }
    let verdict = verdict(out, &points, &terms.copy_cost, terms.call_ns);
    let mut m = Model {
        lab: LAB.into(),
        name: "sender CPU per GB = bytes copied x copy cost + calls x call cost (s)".into(),
        params,
        points,
        verdict,
    };
    // Checked against the measured sender CPU of every method and size.
    let measured: Vec<&ResultRow> = out
        .results
        .iter()
        .filter(|r| r.metric == "sender_cpu_per_gb")
        .collect();
    costlab_core::measure::quality::model_inherits(&mut m, &measured);
    m
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
