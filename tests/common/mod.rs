//! Shared by the integration tests: the fixture document and a cost sheet for it.
#![allow(dead_code)]

use costlab::labs::Headline;
use costlab::measure::Summary;
use costlab::report::sheet::{LabSheet, LabStatus};
use costlab::report::Doc;

pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/results-fixture-all-labs.json"
);

/// The hand-made fixture (made-up figures, for tests only).
pub fn fixture() -> Doc {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture readable");
    Doc::from_json(&text).expect("fixture parses")
}

/// Every chart id the report draws for the fixture (two models in it).
pub const CHART_IDS: [&str; 11] = [
    "chart-mem-bandwidth-seq",
    "chart-mem-bandwidth-rand",
    "chart-mem-latency",
    "chart-echo-throughput",
    "chart-echo-p99",
    "chart-model-0",
    "chart-model-1",
    "chart-share-scaling",
    "chart-c2c",
    "chart-gc-headroom",
    "chart-mem-loaded",
];

/// A sheet for the fixture: headlines read off its rows, one skipped lab.
pub fn fixture_sheet(doc: &Doc) -> Vec<LabSheet> {
    let h = |lab: &str, metric: &str, label: &str, reading: &str| {
        let r = doc
            .results
            .iter()
            .find(|r| r.lab == lab && r.metric == metric)
            .expect("row in fixture");
        Headline {
            label: label.into(),
            summary: Summary::of(&r.samples).unwrap(),
            unit: r.unit.clone(),
            reading: reading.into(),
            ..Default::default()
        }
    };
    vec![
        LabSheet {
            lab: "mem".into(),
            status: LabStatus::Ran,
            headlines: vec![h(
                "mem",
                "bandwidth",
                "seq read bandwidth, 16K",
                "fixture reading",
            )],
        },
        LabSheet {
            lab: "syscall".into(),
            status: LabStatus::Ran,
            headlines: vec![h(
                "syscall",
                "latency",
                "syscall s (getppid)",
                "fixture reading",
            )],
        },
        LabSheet {
            lab: "numa".into(),
            status: LabStatus::Skipped("one NUMA node: nothing to compare".into()),
            headlines: vec![],
        },
    ]
}
pub mod fake;
pub mod pg;
