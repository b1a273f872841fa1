//! A run in Prometheus's text exposition format, as node_exporter's textfile collector reads
//! it (`costlab export --format prometheus`, `costlab run --metrics-file`).
//!
//! The naming rule (docs/src/contract.md): `costlab_<lab>_<metric>_<unit>`, in Prometheus's base units
//! (seconds, bytes, ratios; rates per second), every family a gauge with HELP and TYPE lines
//! and no sample timestamps (the collector refuses them). Each figure is four series: its
//! median under the plain name, and its spread under the same name with `_min`, `_max` or
//! `_mad` before the unit (`costlab_syscall_latency_seconds`,
//! `costlab_syscall_latency_min_seconds`, ...). Separate names rather than a `stat` label keep
//! the plain name a single value per figure, so a query or a dashboard reads the median
//! without a selector, and an alert pairs a median with a spread by name.
//!
//! Labels: the case keys (sanitised to Prometheus's label syntax; a key that clashes with one
//! below is written `case_<key>`), then `quality` (ok, noisy, disturbed; `unjudged` for runs
//! stored before costlab judged figures), `machine` (the stable machine id, as `costlab
//! machines` shows it) and `cpu_model`. The cost sheet's lines are exported too, as
//! `costlab_<lab>_sheet_<unit>` with the line's name in `figure`: the sheet is where the
//! derived figures live (the echo io_uring/epoll ratio, the huge-page cut), and where costlab
//! picks which row is "DRAM latency". The run itself is `costlab_run_start_time_seconds` (Unix
//! time) and `costlab_run_info` (1, with the run id, costlab's version and completeness).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use costlab_core::error::usage;
use costlab_core::machine::identity::machine_id_of;
use costlab_core::model::{Doc, LabSheet, Quality, Summary};

use crate::report::time::parse_rfc3339;

/// A costlab unit in Prometheus's base unit: the name's suffix, and the factor, as a power
/// of ten (`exp10`) and a binary multiple (`times`, for KiB and MiB). The power of ten is
/// applied to the number's decimal digits, not by a floating-point multiplication, so a
/// figure keeps the digits it had: 52.6784 ns is 5.26784e-8 s, not 5.2678400000000005e-8.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseUnit {
    pub suffix: &'static str,
    pub exp10: i32,
    pub times: f64,
}

impl BaseUnit {
    const fn new(suffix: &'static str, exp10: i32) -> BaseUnit {
        BaseUnit {
            suffix,
            exp10,
            times: 1.0,
        }
    }

    const fn binary(suffix: &'static str, times: f64) -> BaseUnit {
        BaseUnit {
            suffix,
            exp10: 0,
            times,
        }
    }

    pub fn convert(&self, v: f64) -> f64 {
        shift10(v * self.times, self.exp10)
    }
}

/// `v` times 10^`exp`, computed on its shortest decimal form (exact where the result is a
/// decimal number a double holds).
fn shift10(v: f64, exp: i32) -> f64 {
    if exp == 0 || !v.is_finite() {
        return v;
    }
    let text = format!("{v:e}");
    let (digits, e) = text.split_once('e').unwrap_or((&text, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{digits}e{}", e + exp).parse().unwrap_or(v)
}

/// The base unit of one of costlab's units; `None` for a unit this table does not know (it
/// is then written as it is, its value unchanged).
pub fn base_unit(unit: &str) -> Option<BaseUnit> {
    let u = unit.trim();
    // "ns per call", "ns per op": a time per something is still a time.
    let first = u.split_whitespace().next().unwrap_or("");
    let per_thing = u == first || u.starts_with(&format!("{first} per "));
    Some(match first {
        "ns" if per_thing => BaseUnit::new("seconds", -9),
        "us" | "µs" if per_thing => BaseUnit::new("seconds", -6),
        "ms" if per_thing => BaseUnit::new("seconds", -3),
        "s" if u == "s" => BaseUnit::new("seconds", 0),
        _ => match u {
            "GB/s" => BaseUnit::new("bytes_per_second", 9),
            "MB/s" => BaseUnit::new("bytes_per_second", 6),
            "B" | "bytes" => BaseUnit::new("bytes", 0),
            "KiB" => BaseUnit::binary("bytes", 1024.0),
            "MiB" => BaseUnit::binary("bytes", 1048576.0),
            "GiB" => BaseUnit::binary("bytes", 1073741824.0),
            "MB" => BaseUnit::new("bytes", 6),
            "GB" => BaseUnit::new("bytes", 9),
            "%" | "% of all CPU" => BaseUnit::new("ratio", -2),
            "x" | "fraction" | "ratio" => BaseUnit::new("ratio", 0),
            "req/s" => BaseUnit::new("requests_per_second", 0),
            "Mop/s" => BaseUnit::new("ops_per_second", 6),
            "Mloads/s" => BaseUnit::new("loads_per_second", 6),
            "per s" | "/s" => BaseUnit::new("per_second", 0),
            // Milliseconds of CPU per 10^9 bytes moved: seconds per byte.
            "ms/GB" => BaseUnit::new("seconds_per_byte", -12),
            "calls/GB" => BaseUnit::new("calls_per_byte", -9),
            // Counts carry no unit in their name.
            "" | "count" | "n" | "events" => BaseUnit::new("", 0),
            _ => return None,
        },
    })
}

/// `s` in Prometheus's name syntax: letters, digits and `_`, lower case, runs of anything
/// else as one `_`, none at either end.
fn snake(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// The family name of a figure: `costlab_<lab>_<metric>[_<stat>]_<unit>`.
pub fn metric_name(lab: &str, metric: &str, stat: Option<&str>, unit: &str) -> String {
    let suffix = match base_unit(unit) {
        Some(b) => b.suffix.to_string(),
        None => snake(unit),
    };
    let mut parts = vec!["costlab".to_string(), snake(lab), snake(metric)];
    parts.extend(stat.map(str::to_string));
    parts.push(suffix);
    parts.retain(|p| !p.is_empty());
    parts.join("_")
}

/// The labels costlab adds to every series; a case key with one of these names (or one
/// Prometheus sets on a scrape) is written `case_<key>`.
const OWN_LABELS: [&str; 6] = [
    "quality",
    "machine",
    "cpu_model",
    "figure",
    "job",
    "instance",
];

/// A case key as a label name: Prometheus's syntax (`[a-zA-Z_][a-zA-Z0-9_]*`, `__` reserved).
pub fn label_name(key: &str) -> String {
    let mut n: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) || n.starts_with("__") {
        n = format!("case_{n}");
    }
    if OWN_LABELS.contains(&n.as_str()) {
        n = format!("case_{n}");
    }
    n
}

/// A label value as the exposition format writes it between quotes.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: backslashes and newlines escaped (quotes stay as they are).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: the shortest text that reads back as the same number (plain decimals in
/// the usual range, an exponent for very small or large ones), `NaN` and `±Inf` as Prometheus
/// spells them.
pub fn value_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v == 0.0 || (1e-4..1e15).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

fn case_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn quality_word(q: Option<Quality>) -> &'static str {
    q.map_or("unjudged", Quality::word)
}

type Labels = Vec<(String, String)>;

struct Family {
    name: String,
    help: String,
    series: Vec<(Labels, f64)>,
}

/// The families in the order they were first met, each series once.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
    index: HashMap<String, usize>,
    seen: HashSet<String>,
}

impl Exposition {
    fn add(&mut self, name: &str, help: impl FnOnce() -> String, labels: Labels, value: f64) {
        let key = format!(
            "{name}{{{}}}",
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        // Two figures that map to one series (same case, same name) would make the collector
        // refuse the whole file: the first is kept.
        if !self.seen.insert(key) {
            return;
        }
        let i = *self.index.entry(name.to_string()).or_insert_with(|| {
            self.families.push(Family {
                name: name.to_string(),
                help: help(),
                series: Vec::new(),
            });
            self.families.len() - 1
        });
        self.families[i].series.push((labels, value));
    }

    /// A figure's four series: median, then min, max and MAD.
    fn figure(&mut self, names: [&str; 2], what: &str, unit: &str, labels: &Labels, s: &Summary) {
        let [lab, metric] = names;
        let base = base_unit(unit).unwrap_or(BaseUnit::new("", 0));
        let shown = if base.suffix.is_empty() {
            unit
        } else {
            base.suffix
        };
        for (stat, v) in [
            (None, s.median),
            (Some("min"), s.min),
            (Some("max"), s.max),
            (Some("mad"), s.mad),
        ] {
            let name = metric_name(lab, metric, stat, unit);
            let help = || {
                let of = match stat {
                    None => "median of the samples",
                    Some("min") => "smallest sample",
                    Some("max") => "largest sample",
                    _ => "median absolute deviation of the samples",
                };
                format!("costlab {what}: the {of}, in {shown} (costlab shows {unit})")
            };
            self.add(&name, help, labels.clone(), base.convert(v));
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {} gauge", f.name);
            for (labels, v) in &f.series {
                let l = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v)))
                    .collect::<Vec<_>>()
                    .join(",");
                let _ = writeln!(out, "{}{{{l}}} {}", f.name, value_text(*v));
            }
        }
        out
    }
}

/// The exposition format as an export format (`--format prometheus`).
pub struct Prometheus;

impl super::Exporter for Prometheus {
    fn name(&self) -> &'static str {
        "prometheus"
    }
    fn export(&self, run: &super::Run) -> anyhow::Result<String> {
        Ok(render(run.doc, run.sheet))
    }
}

/// The run `doc` and its cost sheet in the exposition format.
pub fn render(doc: &Doc, sheet: &[LabSheet]) -> String {
    let machine = vec![
        ("machine".to_string(), machine_id_of(&doc.machine)),
        (
            "cpu_model".to_string(),
            doc.machine
                .get("cpu_model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
    ];
    let mut e = Exposition::default();
    if let Some(t) = parse_rfc3339(&doc.run.started) {
        e.add(
            "costlab_run_start_time_seconds",
            || "When the costlab run these figures come from started (Unix time)".into(),
            machine.clone(),
            t as f64,
        );
    }
    let mut info = vec![
        ("run".to_string(), doc.run.id.clone()),
        ("version".to_string(), doc.run.costlab.clone()),
        ("complete".to_string(), doc.run.complete.to_string()),
    ];
    info.extend(machine.iter().cloned());
    e.add(
        "costlab_run_info",
        || "The costlab run these figures come from: its id, costlab's version, whether every lab finished (always 1)".into(),
        info,
        1.0,
    );
    for r in &doc.results {
        let mut labels: Labels = r
            .case
            .iter()
            .map(|(k, v)| (label_name(k), case_value(v)))
            .collect();
        labels.push(("quality".into(), quality_word(r.quality).into()));
        labels.extend(machine.iter().cloned());
        let what = format!("{} {}", r.lab, r.metric);
        e.figure([&r.lab, &r.metric], &what, &r.unit, &labels, &r.summary);
    }
    for lab in sheet {
        for h in &lab.headlines {
            let mut labels: Labels = vec![("figure".into(), h.label.clone())];
            labels.push(("quality".into(), quality_word(h.quality).into()));
            labels.extend(machine.iter().cloned());
            let what = format!(
                "cost sheet, {} lab (the line is in the figure label)",
                lab.lab
            );
            e.figure([&lab.lab, "sheet"], &what, &h.unit, &labels, &h.summary);
        }
    }
    e.render()
}

/// Check, before anything is measured, that `run --metrics-file` can write `path`: its
/// directory exists (a missing one is more likely a typo than a place to create: the
/// collector reads one directory it was given) and takes files.
pub fn check_destination(path: &Path) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(format!(
            "--metrics-file {}: {} is not a directory: give a file in node_exporter's textfile \
             directory (its --collector.textfile.directory), e.g. \
             /var/lib/prometheus/node-exporter/costlab.prom",
            path.display(),
            dir.display()
        )));
    }
    crate::report::dest::check_file("--metrics-file", &path.display().to_string())
}

/// Write `text` to `path` whole: to a temporary file beside it (named so the collector, which
/// reads only `*.prom`, skips it), flushed to disk, readable by node_exporter's own user, then
/// renamed over `path`. A scrape reads the old file or the new one, never part of one.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "metrics".into(), |n| n.to_string_lossy());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow::anyhow!(
            "writing --metrics-file {}: {e}",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::model::{Headline, LabStatus, Outcome, ResultRow, RunInfo};
    use serde_json::json;

    fn doc(rows: Vec<ResultRow>) -> Doc {
        Doc::new(
            RunInfo {
                id: "20261122T100000Z-abc123".into(),
                started: "2026-11-22T10:00:00Z".into(),
                costlab: "0.1.0".into(),
                command: "costlab run".into(),
                complete: true,
            },
            json!({"id": "0123456789abcdef", "cpu_model": "AMD \"EPYC\" 7B13\\x"}),
            Outcome {
                results: rows,
                ..Default::default()
            },
        )
    }

    fn row(lab: &str, case: Value, metric: &str, unit: &str, samples: &[f64]) -> ResultRow {
        let Value::Object(case) = case else { panic!() };
        ResultRow::new(lab, case, metric, unit, samples.to_vec()).unwrap()
    }

    #[test]
    fn the_file_is_replaced_whole_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("costlab.prom");
        std::fs::write(&f, "old 1\n").unwrap();
        write_file(&f, "new 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "new 2\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        check_destination(&f).unwrap();
        let e = check_destination(&dir.path().join("no/such.prom")).unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("--metrics-file"), "{e}");
        // A directory named as the file: refused at the rename, the temporary file removed.
        let d = dir.path().join("isdir.prom");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("keep"), "").unwrap();
        assert!(write_file(&d, "x 1\n").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn names_follow_lab_metric_unit_in_base_units() {
        assert_eq!(
            metric_name("syscall", "latency", None, "ns"),
            "costlab_syscall_latency_seconds"
        );
        assert_eq!(
            metric_name("mem", "bandwidth", Some("min"), "GB/s"),
            "costlab_mem_bandwidth_min_bytes_per_second"
        );
        assert_eq!(
            metric_name("share c2c", "latency", None, "ns"),
            "costlab_share_c2c_latency_seconds"
        );
        assert_eq!(
            metric_name("gc tax", "overhead", None, "%"),
            "costlab_gc_tax_overhead_ratio"
        );
        assert_eq!(
            metric_name("echo", "batch", Some("mad"), "n"),
            "costlab_echo_batch_mad"
        );
        assert_eq!(
            metric_name("echo", "sheet", None, "x"),
            "costlab_echo_sheet_ratio"
        );
        // A unit the table does not know is named as it is, its value unchanged.
        assert_eq!(
            metric_name("pin", "throughput", None, "widgets/h"),
            "costlab_pin_throughput_widgets_h"
        );
        assert_eq!(base_unit("widgets/h"), None);
    }

    #[test]
    fn units_convert_to_base_units_keeping_the_digits() {
        let v = |unit: &str, x: f64| base_unit(unit).unwrap().convert(x);
        assert_eq!(v("ns", 52.6784), 5.26784e-8);
        assert_eq!(v("ns per call", 167.0), 1.67e-7);
        assert_eq!(v("us", 42.9923), 4.29923e-5);
        assert_eq!(v("ms", 2.5), 0.0025);
        assert_eq!(v("GB/s", 16.9), 1.69e10);
        assert_eq!(v("%", 26.0), 0.26);
        assert_eq!(v("% of all CPU", 36.03), 0.3603);
        assert_eq!(v("x", 0.964), 0.964);
        assert_eq!(v("MiB", 2.0), 2097152.0);
        assert_eq!(v("Mop/s", 3.5), 3.5e6);
        assert_eq!(v("ms/GB", 296.0), 2.96e-10);
        assert_eq!(v("MB/s", 0.1), 1e5);
        assert_eq!(base_unit("count").unwrap().suffix, "");
        assert_eq!(base_unit("nsx"), None);
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label_value("two\nlines"), "two\\nlines");
        assert_eq!(escape_help("a\\b\nc \"q\""), "a\\\\b\\nc \"q\"");
        assert_eq!(label_name("load_threads"), "load_threads");
        assert_eq!(label_name("quality"), "case_quality");
        assert_eq!(label_name("machine"), "case_machine");
        assert_eq!(label_name("__x"), "case___x");
        assert_eq!(label_name("2nd"), "case_2nd");
        assert_eq!(label_name("of-all"), "of_all");
    }

    #[test]
    fn values_read_back_as_the_same_number() {
        for v in [0.0, 5.26784e-8, 1.0, 0.964, 1.7953416e9, 1e20, -3.5e-12] {
            assert_eq!(value_text(v).parse::<f64>().unwrap(), v, "{v}");
        }
        assert_eq!(value_text(1795341600.0), "1795341600");
        assert_eq!(value_text(f64::NAN), "NaN");
        assert_eq!(value_text(f64::INFINITY), "+Inf");
        assert_eq!(value_text(f64::NEG_INFINITY), "-Inf");
    }

    #[test]
    fn a_run_renders_as_gauges_with_its_spread_labels_and_start_time() {
        let mut s = row(
            "syscall",
            json!({"call": "getppid", "batch": 1}),
            "latency",
            "ns",
            &[52.0, 53.0, 54.0],
        );
        s.quality = Some(Quality::Noisy);
        let clash = row(
            "odd",
            json!({"machine": "other", "note": "say \"hi\""}),
            "latency",
            "ns",
            &[1.0],
        );
        // The same figure twice (same name and labels) is written once.
        let twice = s.clone();
        let d = doc(vec![s, clash, twice]);
        let sheet = vec![LabSheet {
            lab: "echo".into(),
            status: LabStatus::Ran,
            headlines: vec![Headline {
                label: "echo io_uring/epoll throughput, 1 conn".into(),
                summary: Summary::of(&[0.9, 0.95, 1.0]).unwrap(),
                unit: "x".into(),
                quality: Some(Quality::Ok),
                ..Default::default()
            }],
        }];
        let text = render(&d, &sheet);
        let m = r#"machine="0123456789abcdef",cpu_model="AMD \"EPYC\" 7B13\\x""#;
        for want in [
            "# TYPE costlab_run_start_time_seconds gauge\n",
            &format!("costlab_run_start_time_seconds{{{m}}} 1795341600\n"),
            &format!("costlab_run_info{{run=\"20261122T100000Z-abc123\",version=\"0.1.0\",complete=\"true\",{m}}} 1\n"),
            "# HELP costlab_syscall_latency_seconds costlab syscall latency: the median of the samples, in seconds (costlab shows ns)\n",
            "# TYPE costlab_syscall_latency_seconds gauge\n",
            &format!("costlab_syscall_latency_seconds{{call=\"getppid\",batch=\"1\",quality=\"noisy\",{m}}} 5.3e-8\n"),
            &format!("costlab_syscall_latency_min_seconds{{call=\"getppid\",batch=\"1\",quality=\"noisy\",{m}}} 5.2e-8\n"),
            &format!("costlab_syscall_latency_max_seconds{{call=\"getppid\",batch=\"1\",quality=\"noisy\",{m}}} 5.4e-8\n"),
            &format!("costlab_syscall_latency_mad_seconds{{call=\"getppid\",batch=\"1\",quality=\"noisy\",{m}}} 1e-9\n"),
            &format!("costlab_odd_latency_seconds{{case_machine=\"other\",note=\"say \\\"hi\\\"\",quality=\"unjudged\",{m}}} 1e-9\n"),
            &format!("costlab_echo_sheet_ratio{{figure=\"echo io_uring/epoll throughput, 1 conn\",quality=\"ok\",{m}}} 0.95\n"),
            &format!("costlab_echo_sheet_min_ratio{{figure=\"echo io_uring/epoll throughput, 1 conn\",quality=\"ok\",{m}}} 0.9\n"),
        ] {
            assert!(text.contains(want), "no {want:?} in:\n{text}");
        }
        // One HELP and TYPE per family, each family's series together, each series once.
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut unique = types.clone();
        unique.dedup();
        assert_eq!(types, unique);
        assert_eq!(
            text.matches("costlab_syscall_latency_seconds{").count(),
            1,
            "{text}"
        );
        assert_eq!(types.len(), 2 + 4 + 4 + 4, "{text}");
    }
}
