//! The result model: the JSON contract every lab writes and every reader (report, store,
//! compare, export) reads. Field names are the contract (docs/src/contract.md); add, never rename.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::conditions::Conditions;
use super::quality::Quality;
use super::summary::Summary;

pub const SCHEMA: &str = "costlab/1";

/// A case: the parameters that identify a result within its lab, in insertion order.
pub type Case = Map<String, Value>;

/// Build a `Case` from `key => value` pairs: `case!{"op" => "read", "threads" => 1}`.
#[macro_export]
macro_rules! case {
    ($($k:expr => $v:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut m = $crate::model::Case::new();
        $( m.insert($k.to_string(), serde_json::json!($v)); )*
        m
    }};
}

/// One figure: a lab's case, a metric in a unit, its samples and their summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResultRow {
    pub lab: String,
    pub case: Case,
    pub metric: String,
    pub unit: String,
    pub summary: Summary,
    /// A sample that is not a number (a repetition that served no request has no latency)
    /// is written as null, and reads back as NaN: every document costlab writes reads back.
    #[serde(deserialize_with = "samples_read")]
    pub samples: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_counters: Option<BTreeMap<String, String>>,
    /// What else happened on the machine while the samples were taken (absent in runs made
    /// before costlab recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Conditions>,
    /// The verdict on this figure: ok, noisy (spread too wide for its reading) or disturbed
    /// (interference during the samples, or the condition the case depends on not met).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    /// Why the verdict is not ok, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quality_reasons: Vec<String>,
}

fn samples_read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Option<f64>> = Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

/// Samples stored as a JSON array (the history's column), nulls read as NaN as in a document.
pub fn samples_from_json(text: &str) -> serde_json::Result<Vec<f64>> {
    let v: Vec<Option<f64>> = serde_json::from_str(text)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

impl ResultRow {
    /// A row from samples; `None` when there are no (finite) samples to summarise.
    pub fn new(lab: &str, case: Case, metric: &str, unit: &str, samples: Vec<f64>) -> Option<Self> {
        let summary = Summary::of(&samples)?;
        Some(ResultRow {
            lab: lab.to_string(),
            case,
            metric: metric.to_string(),
            unit: unit.to_string(),
            summary,
            samples,
            counters: None,
            unsupported_counters: None,
            conditions: None,
            quality: None,
            quality_reasons: Vec::new(),
        })
    }

    /// The case value under `key` as a string ("4k"), number rendered plainly.
    pub fn key(&self, key: &str) -> String {
        match self.case.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    }

    /// True when every (key, value) in `want` matches this row's case.
    pub fn matches(&self, want: &Case) -> bool {
        want.iter().all(|(k, v)| self.case.get(k) == Some(v))
    }

    /// A short name for the figure in prose and footnotes: lab, case values in the lab's
    /// order, metric ("mem op=chase pattern=rand pages=4k block=268435456 threads=1 latency").
    pub fn name(&self) -> String {
        format!("{} {} {}", self.lab, case_text(&self.case), self.metric)
    }

    /// A stable text id for the figure: lab, case in key order, metric.
    pub fn figure_id(&self) -> String {
        let mut keys: Vec<(&String, &Value)> = self.case.iter().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        format!("{} {} {}", self.lab, pairs_text(keys), self.metric)
    }
}

/// The case as "op=read pattern=seq block=1073741824", in the lab's key order.
pub fn case_text(case: &Case) -> String {
    pairs_text(case.iter())
}

/// `key=value` pairs joined by spaces; strings bare, other values as JSON.
fn pairs_text<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a Value)>) -> String {
    pairs
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A model's prediction beside the measurement, for one case.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelPoint {
    pub case: Case,
    pub predicted: f64,
    pub measured: f64,
    pub unit: String,
}

impl ModelPoint {
    /// (predicted - measured) / measured.
    pub fn error(&self) -> f64 {
        if self.measured == 0.0 {
            f64::INFINITY
        } else {
            (self.predicted - self.measured) / self.measured
        }
    }
}

/// A model: its fitted or measured parameters and its points.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Model {
    pub lab: String,
    pub name: String,
    pub params: Map<String, Value>,
    pub points: Vec<ModelPoint>,
    /// What the model says in words: where it holds, which term disagrees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdict: Vec<String>,
}

/// What a lab returns: its figures, its models, its notes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcome {
    pub results: Vec<ResultRow>,
    pub models: Vec<Model>,
    pub notes: Vec<String>,
}

impl Outcome {
    /// Add a row built from samples (skipped when there are none).
    pub fn push(&mut self, lab: &str, case: Case, metric: &str, unit: &str, samples: Vec<f64>) {
        if let Some(r) = ResultRow::new(lab, case, metric, unit, samples) {
            self.results.push(r);
        }
    }

    /// The first row of `metric` whose case matches `want`.
    pub fn find(&self, metric: &str, want: &Case) -> Option<&ResultRow> {
        self.results
            .iter()
            .find(|r| r.metric == metric && r.matches(want))
    }

    pub fn extend(&mut self, other: Outcome) {
        self.results.extend(other.results);
        self.models.extend(other.models);
        self.notes.extend(other.notes);
    }
}

/// Identity of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub id: String,
    pub started: String,
    pub costlab: String,
    pub command: String,
    pub complete: bool,
}

/// The whole document a measuring command writes with `--json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Doc {
    pub schema: String,
    pub run: RunInfo,
    pub machine: Value,
    pub results: Vec<ResultRow>,
    pub models: Vec<Model>,
    pub notes: Vec<String>,
}

impl Doc {
    pub fn new(run: RunInfo, machine: Value, outcome: Outcome) -> Doc {
        Doc {
            schema: SCHEMA.to_string(),
            run,
            machine,
            results: outcome.results,
            models: outcome.models,
            notes: outcome.notes,
        }
    }

    /// Parse a document, refusing other schemas.
    pub fn from_json(text: &str) -> anyhow::Result<Doc> {
        let doc: Doc = serde_json::from_str(text)?;
        if doc.schema != SCHEMA {
            anyhow::bail!("schema '{}' is not {SCHEMA}", doc.schema);
        }
        Ok(doc)
    }
}

/// One line of the cost sheet: a headline figure with its spread and what it means.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Headline {
    /// What the figure is: "syscall s (getppid)".
    pub label: String,
    pub summary: Summary,
    pub unit: String,
    /// One line reading of it: "huge pages cut random DRAM latency by 34% here".
    pub reading: String,
    /// The verdict on the figure (the worst of the figures it is read from); the reading
    /// follows it (`report::verdict::follow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quality_reasons: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_that_is_not_a_number_is_written_as_null_and_reads_back() {
        let mut o = Outcome::default();
        o.push(
            "echo",
            crate::case! {"engine" => "uring"},
            "p50",
            "us",
            vec![f64::NAN, 12.5],
        );
        let run = RunInfo {
            id: "x".into(),
            started: "2026-11-26T08:00:00Z".into(),
            costlab: "0".into(),
            command: "costlab echo".into(),
            complete: true,
        };
        let text = serde_json::to_string(&Doc::new(run, Value::Null, o)).unwrap();
        assert!(text.contains("\"samples\":[null,12.5]"), "{text}");
        let back = Doc::from_json(&text).unwrap();
        let s = &back.results[0].samples;
        assert!(s[0].is_nan() && s[1] == 12.5);
        assert_eq!(back.results[0].summary.median, 12.5);
    }

    #[test]
    fn rows_round_trip_and_keep_case_order() {
        let mut o = Outcome::default();
        o.push(
            "mem",
            crate::case! {"op" => "read", "block" => 1u64 << 30, "threads" => 1},
            "bandwidth",
            "GB/s",
            vec![3.0, 1.0, 2.0],
        );
        o.push(
            "mem",
            crate::case! {"op" => "none"},
            "bandwidth",
            "GB/s",
            vec![],
        );
        assert_eq!(o.results.len(), 1);
        let run = RunInfo {
            id: "x".into(),
            started: "2026-11-22T10:00:00Z".into(),
            costlab: "0.1.0".into(),
            command: "costlab mem".into(),
            complete: true,
        };
        let doc = Doc::new(run, serde_json::json!({"cpus_online": 2}), o);
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.find("\"op\"").unwrap() < text.find("\"block\"").unwrap());
        assert!(!text.contains("counters"));
        let back = Doc::from_json(&text).unwrap();
        assert_eq!(back, doc);
        assert_eq!(back.results[0].summary.median, 2.0);
        assert_eq!(back.results[0].key("op"), "read");
        assert_eq!(back.results[0].key("threads"), "1");
        assert_eq!(
            back.results[0].figure_id(),
            "mem block=1073741824 op=read threads=1 bandwidth"
        );
    }

    #[test]
    fn other_schemas_are_refused() {
        let text = r#"{"schema":"other/9","run":{"id":"","started":"","costlab":"","command":"","complete":true},"machine":{},"results":[],"models":[],"notes":[]}"#;
        assert!(Doc::from_json(text).is_err());
    }
}
