//! The zero-copy lab's terminal table and its cost-sheet headlines.

use crate::model::Method;
use crate::verdict::median_of;
use crate::LAB;
use costlab_core::case;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::Summary;
use costlab_history::report::{table, Outcome};
use costlab_lab::Headline;

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
