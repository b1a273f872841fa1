//! The pin lab's tables, readings (which placement won and why) and cost-sheet lines.

use super::plan::{Workload, WORKLOADS};
use costlab_core::measure::{cpus, stats, Summary};
use costlab_history::report::{table, Outcome, ResultRow};
use costlab_lab::Headline;

/// For each workload: which placement won, by how much over each other, and why (the
/// scheduler's counters).
pub fn readings(out: &Outcome) -> Vec<String> {
    let mut v = Vec::new();
    for w in WORKLOADS {
        let rows: Vec<_> = out
            .results
            .iter()
            .filter(|r| r.metric == "throughput" && r.key("workload") == w.name())
            .collect();
        let Some(best) = rows
            .iter()
            .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
        else {
            continue;
        };
        let counter = |r: &costlab_history::report::ResultRow, m: &str| {
            out.find(m, &r.case).map(|x| x.summary.median)
        };
        let others: Vec<String> = rows
            .iter()
            .filter(|r| r.case != best.case)
            .map(|r| {
                format!(
                    "{} {:.2}x ({} migrations/s, {} switches/s)",
                    r.key("placement"),
                    r.summary.median / best.summary.median,
                    counter(r, "migrations").map_or("?".into(), |x| format!("{x:.0}")),
                    counter(r, "context_switches").map_or("?".into(), |x| format!("{x:.0}")),
                )
            })
            .collect();
        let why = match (w, best.key("placement").as_str()) {
            (Workload::Memory, _) => "a dependent chase waits on DRAM for every step, so two chasers on one CPU split one core's time while a CPU per chaser overlaps their misses",
            (Workload::Sharing, "same-core") => "SMT siblings share one core's L1, so the shared line never leaves it while both threads still run",
            (Workload::Sharing, "stacked") => "on one CPU the shared line stays in one core's cache; spread out, every increment moves it between cores",
            (Workload::Sharing, _) => "spread over CPUs the increments run in parallel despite the line moving between cores",
            (Workload::Echo, "same-core") => "server and client on SMT siblings hand over through one core's caches, each with a hardware thread of its own",
            (Workload::Echo, "stacked") => "server and client on one CPU hand over without cross-CPU wakeups",
            (Workload::Echo, "free") => "free lets the scheduler put client and server on one CPU when one wakes the other (wake-affine), saving cross-CPU wakeups, and move them apart when both are busy; see where the threads ran",
            (Workload::Echo, _) => "server and client each keep a CPU, so neither waits for the other's time slice",
        };
        v.push(format!(
            "reading: {}: {} won ({} {}); others: {}; {why}",
            w.name(),
            best.key("placement"),
            table::figure(best.summary.median),
            best.unit,
            others.join(", ")
        ));
    }
    v
}

/// IPC where a PMU counted it, else why not ("unsupported: no PMU").
fn ipc_cell(r: &ResultRow) -> String {
    if let Some(v) = r.counters.as_ref().and_then(|c| c.get("IPC")) {
        return format!("{v:.2}");
    }
    match r.unsupported_counters.as_ref().and_then(|u| u.get("IPC")) {
        Some(why) if why.starts_with("no hardware PMU") => "unsupported: no PMU".into(),
        Some(why) => format!("unsupported: {why}"),
        None => "—".into(),
    }
}

/// Where each thread was seen running: "t0 0; t1 1" ("server thread 0" as s0, client as c).
fn ran_on_cell(r: &ResultRow) -> String {
    let Some(c) = r.conditions.as_ref().filter(|c| !c.ran_on.is_empty()) else {
        return "—".into();
    };
    c.ran_on
        .iter()
        .map(|(k, v)| {
            let short = if let Some(n) = k.strip_prefix("server thread ") {
                format!("s{n}")
            } else if let Some(n) = k.strip_prefix("thread ") {
                format!("t{n}")
            } else if k == "client" {
                "c".to_string()
            } else {
                k.clone()
            };
            format!("{short} {}", cpus::format_cpu_list(v))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn render(out: &Outcome) -> String {
    let rows: Vec<Vec<String>> = out
        .results
        .iter()
        .filter(|r| r.metric == "throughput")
        .map(|r| {
            let c = |m: &str| {
                out.find(m, &r.case)
                    .map_or("—".into(), |x| table::figure(x.summary.median))
            };
            vec![
                r.key("workload"),
                r.key("placement"),
                r.key("threads"),
                format!("{} {}", r.summary.show(2), r.unit),
                c("migrations"),
                c("context_switches"),
                ipc_cell(r),
                ran_on_cell(r),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    table::render(
        &[
            "workload",
            "placement",
            "threads",
            "throughput",
            "migrations/s",
            "context switches/s",
            "IPC",
            "ran on (thread: CPUs)",
        ],
        &rows,
    ) + "\n"
}

pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    let find = |w: &str, p: &str| {
        out.results
            .iter()
            .find(|r| r.metric == "throughput" && r.key("workload") == w && r.key("placement") == p)
    };
    for w in [Workload::Memory, Workload::Echo] {
        let (Some(pinned), Some(bad)) = (
            find(w.name(), "pinned"),
            find(
                w.name(),
                if w == Workload::Memory {
                    "stacked"
                } else {
                    "irq-cpu"
                },
            ),
        ) else {
            continue;
        };
        let ratios = stats::paired_ratios(&bad.samples, &pinned.samples);
        let Some(s) = Summary::of(&ratios) else {
            continue;
        };
        h.push(
            Headline {
                label: format!("{} {} vs pinned", w.name(), bad.key("placement")),
                summary: s,
                unit: "x".into(),
                reading: format!(
                    "{} {}: {:.2}x the pinned throughput ({} vs {} {})",
                    w.name(),
                    bad.key("placement"),
                    s.median,
                    table::figure(bad.summary.median),
                    table::figure(pinned.summary.median),
                    pinned.unit
                ),
                ..Default::default()
            }
            .judged_by(&[bad, pinned]),
        );
    }
    h
}
