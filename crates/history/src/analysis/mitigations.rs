//! What `costlab compare` says when two runs' machines ran under different CPU mitigations
//! (two boots of one machine, one with `mitigations=off`): which vulnerabilities' states and
//! which kernel command-line switches differ, and what that moved among the figures the
//! mitigations set: s (a null syscall), w (the kernel work of a 16-byte send and recv beyond
//! s), t(n) (an io_uring NOP per op at batch n) and the echo model's crossover batch.
//!
//! Read from the two stored documents only: the machine's `mitigations` (as
//! `machine::security` recorded it) and the syscall and echo labs' rows and models.

use serde_json::{json, Value};

use costlab_core::model::Doc;

use super::compare::{Comparison, Verdict};

/// One vulnerability whose state differs: its name and each side's line (None: absent).
#[derive(Debug, Clone, PartialEq)]
pub struct StateDiff {
    pub name: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

/// One figure the mitigations set, on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// "s", "w send", "w recv", "t(16)", "crossover (article's form)", "crossover (refined)".
    pub term: String,
    pub unit: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// The comparison's verdict on the figure it is read from, where it compared one.
    pub verdict: Option<Verdict>,
}

/// The mitigation difference between two runs' machines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MitigationDiff {
    /// The mitigation switches of each kernel command line (`mitigations=off`, `nopti`),
    /// when they differ.
    pub params: Option<(Vec<String>, Vec<String>)>,
    pub states: Vec<StateDiff>,
    pub moved: Vec<Moved>,
}

impl MitigationDiff {
    pub fn differ(&self) -> bool {
        self.params.is_some() || !self.states.is_empty()
    }
}

fn params(m: &Value) -> Vec<String> {
    let p = &m["mitigations"]["params"];
    match p.as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        // Documents that recorded only the `mitigations=` value.
        _ => m["mitigations"]["cmdline"]
            .as_str()
            .map(|c| vec![format!("mitigations={c}")])
            .unwrap_or_default(),
    }
}

/// The difference between the mitigations of machine documents `a` and `b`.
pub fn states_differ(a: &Value, b: &Value) -> MitigationDiff {
    let (pa, pb) = (params(a), params(b));
    let entries = |m: &Value| -> Vec<(String, String)> {
        m["mitigations"]["entries"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ea, eb) = (entries(a), entries(b));
    let mut names: Vec<&String> = ea.iter().chain(eb.iter()).map(|(k, _)| k).collect();
    names.sort();
    names.dedup();
    let get =
        |e: &[(String, String)], k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let states = names
        .into_iter()
        .filter_map(|n| {
            let (x, y) = (get(&ea, n), get(&eb, n));
            (x != y).then(|| StateDiff {
                name: n.clone(),
                a: x,
                b: y,
            })
        })
        .collect();
    MitigationDiff {
        params: (pa != pb).then_some((pa, pb)),
        states,
        moved: Vec::new(),
    }
}

/// The syscall lab's row of `call` at `batch` (unsized), if the run has it.
fn syscall_row<'a>(
    d: &'a Doc,
    call: &str,
    batch: u32,
) -> Option<&'a costlab_core::model::ResultRow> {
    d.results.iter().find(|r| {
        r.lab == "syscall"
            && r.metric == "latency"
            && r.key("call") == call
            && r.key("batch") == batch.to_string()
            && !r.case.contains_key("size")
    })
}

/// A parameter of the echo lab's refined model ("per-request server CPU"), if the run has it.
fn echo_param(d: &Doc, key: &str) -> Option<f64> {
    d.models
        .iter()
        .find(|m| m.lab == "echo" && m.name == "per-request server CPU")
        .and_then(|m| m.params.get(key))
        .and_then(Value::as_f64)
}

fn has_echo_model(d: &Doc) -> bool {
    d.models
        .iter()
        .any(|m| m.lab == "echo" && m.name == "per-request server CPU")
}

/// The comparison's verdict on a row's figure.
fn verdict_of(c: &Comparison, row: Option<&costlab_core::model::ResultRow>) -> Option<Verdict> {
    let id = row?.figure_id();
    c.changes
        .iter()
        .find(|ch| ch.figure == id)
        .map(|ch| ch.verdict.clone())
}

/// The mitigation difference between runs `a` and `b` and what it moved (see the module doc).
/// s and w are read from the syscall lab's rows, else from the echo model's terms; t(n) from
/// the syscall lab's io_uring NOP rows; the crossover from the echo model.
pub fn mitigation_difference(a: &Doc, b: &Doc, c: &Comparison) -> MitigationDiff {
    let mut d = states_differ(&a.machine, &b.machine);
    let s_row = |x: &Doc| syscall_row(x, "getppid", 1).map(|r| r.summary.median);
    let s = |x: &Doc| s_row(x).or_else(|| echo_param(x, "s_ns"));
    d.moved.push(Moved {
        term: "s".into(),
        unit: "ns".into(),
        a: s(a),
        b: s(b),
        verdict: verdict_of(c, syscall_row(b, "getppid", 1)),
    });
    for (what, call, param) in [
        ("w send", "tcp-send", "w_send_ns"),
        ("w recv", "tcp-recv", "w_recv_ns"),
    ] {
        let w = |x: &Doc| match (syscall_row(x, call, 1), s_row(x)) {
            (Some(r), Some(s)) => Some(r.summary.median - s),
            _ => echo_param(x, param),
        };
        d.moved.push(Moved {
            term: what.into(),
            unit: "ns".into(),
            a: w(a),
            b: w(b),
            verdict: verdict_of(c, syscall_row(b, call, 1)),
        });
    }
    let mut batches: Vec<u32> = a
        .results
        .iter()
        .chain(&b.results)
        .filter(|r| r.lab == "syscall" && r.key("call") == "uring-nop")
        .filter_map(|r| r.key("batch").parse().ok())
        .collect();
    batches.sort_unstable();
    batches.dedup();
    for n in batches {
        let t = |x: &Doc| syscall_row(x, "uring-nop", n).map(|r| r.summary.median);
        d.moved.push(Moved {
            term: format!("t({n})"),
            unit: "ns".into(),
            a: t(a),
            b: t(b),
            verdict: verdict_of(c, syscall_row(b, "uring-nop", n)),
        });
    }
    if has_echo_model(a) || has_echo_model(b) {
        for (what, key) in [
            ("crossover (article's form)", "crossover_article"),
            ("crossover (refined)", "crossover_refined"),
        ] {
            d.moved.push(Moved {
                term: what.into(),
                unit: "requests per enter".into(),
                a: echo_param(a, key),
                b: echo_param(b, key),
                verdict: None,
            });
        }
    }
    // A crossover stays when neither side has one: "none -> none" says io_uring overtook
    // epoll under neither state.
    d.moved
        .retain(|m| m.a.is_some() || m.b.is_some() || m.term.starts_with("crossover"));
    d
}

impl MitigationDiff {
    /// The difference as JSON for `compare --json` (`"differ": false` and nothing else when
    /// the mitigations are the same).
    pub fn to_json(&self) -> Value {
        if !self.differ() {
            return json!({"differ": false});
        }
        let num = |x: Option<f64>| x.map_or(Value::Null, |x| json!(x));
        json!({
            "differ": true,
            "params": self.params.as_ref().map(|(a, b)| json!({"a": a, "b": b})),
            "states": self.states.iter().map(|s| json!({"name": s.name, "a": s.a, "b": s.b})).collect::<Vec<_>>(),
            "moved": self.moved.iter().map(|m| json!({
                "term": m.term,
                "unit": m.unit,
                "a": num(m.a),
                "b": num(m.b),
                "change_pct": match (m.a, m.b) {
                    (Some(a), Some(b)) if a != 0.0 => json!((b - a) / a.abs() * 100.0),
                    _ => Value::Null,
                },
                "verdict": m.verdict.as_ref().map(|v| v.word()),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::compare;
    use crate::report::compare::mitigation_lines;
    use costlab_core::model::{Model, Outcome, RunInfo};

    /// A machine as `machine::security` records it: this host's default boot, or the same
    /// kernel booted with `mitigations=off` (the states the emulated machine reports).
    fn machine(off: bool) -> Value {
        let (v1, v2, params) = if off {
            (
                "Vulnerable: __user pointer sanitization and usercopy barriers only; no swapgs barriers",
                "Vulnerable; STIBP: disabled",
                json!(["mitigations=off"]),
            )
        } else {
            (
                "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
                "Mitigation: Retpolines; STIBP: disabled",
                json!([]),
            )
        };
        json!({"mitigations": {
            "entries": {"meltdown": "Not affected", "spectre_v1": v1, "spectre_v2": v2},
            "cmdline": if off { json!("off") } else { Value::Null },
            "params": params,
        }})
    }

    fn run(id: &str, off: bool, s: f64, echo: bool) -> Doc {
        let mut o = Outcome::default();
        let k = if off { 1.0 } else { 3.0 };
        let spread = |x: f64| (0..7).map(|i| x + f64::from(i)).collect::<Vec<f64>>();
        for (call, batch, x) in [
            ("getppid", 1u32, s),
            ("tcp-send", 1, s + 1000.0 * k),
            ("tcp-recv", 1, s + 300.0),
            ("uring-nop", 1, s + 200.0),
            ("uring-nop", 16, 40.0 * k),
        ] {
            o.push(
                "syscall",
                costlab_core::case! {"call" => call, "batch" => batch},
                "latency",
                "ns",
                spread(x),
            );
        }
        if echo {
            let mut params = serde_json::Map::new();
            params.insert(
                "crossover_article".into(),
                json!(if off { Value::Null } else { json!(2) }),
            );
            params.insert("crossover_refined".into(), json!(if off { 6 } else { 3 }));
            o.models.push(Model {
                lab: "echo".into(),
                name: "per-request server CPU".into(),
                params,
                points: Vec::new(),
                verdict: Vec::new(),
            });
        }
        let info = RunInfo {
            id: id.into(),
            started: "2026-11-26T08:00:00Z".into(),
            costlab: "0.1.0".into(),
            command: "costlab run".into(),
            complete: true,
        };
        Doc::new(info, machine(off), o)
    }

    #[test]
    fn two_boots_name_the_switch_the_states_and_what_moved() {
        let (a, b) = (run("a", false, 700.0, true), run("b", true, 230.0, true));
        let c = compare(&a, &b);
        let d = mitigation_difference(&a, &b, &c);
        assert!(d.differ());
        assert_eq!(
            d.params,
            Some((vec![], vec!["mitigations=off".to_string()]))
        );
        let names: Vec<&str> = d.states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["spectre_v1", "spectre_v2"]);
        let lines = mitigation_lines(&d);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with(
            "mitigations differ: kernel command line A: none (the kernel's default), B: mitigations=off; spectre_v1: A \"Mitigation: usercopy"
        ), "{}", lines[0]);
        assert!(lines[0].contains("spectre_v2: A \"Mitigation: Retpolines; STIBP: disabled\", B \"Vulnerable; STIBP: disabled\""), "{}", lines[0]);
        let moved = &lines[1];
        assert!(
            moved.starts_with("what they moved (A -> B): s 703.0 -> 233.0 ns (-66.9%, significant"),
            "{moved}"
        );
        assert!(
            moved.contains("w send 3000.0 -> 1000.0 ns (-66.7%"),
            "{moved}"
        );
        assert!(moved.contains("w recv 300.0 -> 300.0 ns (+0.0%"), "{moved}");
        assert!(
            moved.contains("t(1) 903.0 -> 433.0 ns") && moved.contains("t(16) 123.0 -> 43.0 ns"),
            "{moved}"
        );
        assert!(
            moved.contains("crossover (article's form) 2 -> none; crossover (refined) 3 -> 6"),
            "{moved}"
        );
        let j = d.to_json();
        assert_eq!(j["differ"], true);
        assert_eq!(j["params"]["b"][0], "mitigations=off");
        assert_eq!(j["states"][1]["name"], "spectre_v2");
        assert_eq!(j["moved"][0]["term"], "s");
        assert_eq!(j["moved"][0]["verdict"], "significant");
        let cross = j["moved"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["term"] == "crossover (article's form)")
            .unwrap();
        assert_eq!(cross["a"], 2.0);
        assert!(cross["b"].is_null());
    }

    #[test]
    fn the_same_mitigations_say_nothing_and_runs_without_terms_say_what_to_run() {
        let (a, b) = (run("a", false, 700.0, false), run("b", false, 690.0, false));
        let d = mitigation_difference(&a, &b, &compare(&a, &b));
        assert!(!d.differ());
        assert!(mitigation_lines(&d).is_empty());
        assert_eq!(d.to_json(), json!({"differ": false}));
        // No echo model: no crossover terms.
        let b = run("b", true, 230.0, false);
        let d = mitigation_difference(&a, &b, &compare(&a, &b));
        assert!(d.moved.iter().all(|m| !m.term.starts_with("crossover")));
        // A run of another lab: the difference is named, the terms are asked for.
        let mut other = run("c", true, 1.0, false);
        other.results.clear();
        let mut first = run("d", false, 1.0, false);
        first.results.clear();
        let d = mitigation_difference(&first, &other, &compare(&first, &other));
        assert!(
            mitigation_lines(&d)[1].contains("neither run has s, w, t(n)"),
            "{:?}",
            mitigation_lines(&d)
        );
        // Only `mitigations=` recorded (an older document): still named.
        let old = json!({"mitigations": {"entries": {}, "cmdline": "off"}});
        let new = json!({"mitigations": {"entries": {}, "cmdline": null}});
        assert_eq!(
            states_differ(&new, &old).params,
            Some((vec![], vec!["mitigations=off".to_string()]))
        );
    }
}
