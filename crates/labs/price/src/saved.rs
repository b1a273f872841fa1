//! Counts saved to a file and read back (`--save-counts FILE`, `--from FILE`): what a program
//! did on the machine it was counted on, so that it can be priced later, or elsewhere, without
//! running it again.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use costlab_core::error::usage;

use super::count::{Counts, Times};

/// The version of the file's layout: add fields, never rename.
pub const SCHEMA: &str = "costlab-counts/1";

/// A program's times in a saved file, ns (the rusage of its whole tree).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SavedTimes {
    pub user_ns: f64,
    pub sys_ns: f64,
    pub wall_ns: f64,
}

impl From<Times> for SavedTimes {
    fn from(t: Times) -> Self {
        SavedTimes {
            user_ns: t.user_ns,
            sys_ns: t.sys_ns,
            wall_ns: t.wall_ns,
        }
    }
}

impl From<SavedTimes> for Times {
    fn from(t: SavedTimes) -> Self {
        Times {
            user_ns: t.user_ns,
            sys_ns: t.sys_ns,
            wall_ns: t.wall_ns,
        }
    }
}

/// One counted event: its class (syscall, fault, switch, ...), its name, how many.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SavedEvent {
    pub class: String,
    pub event: String,
    pub count: u64,
}

/// What `--save-counts` writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SavedCounts {
    pub schema: String,
    /// The counted command line (redacted), or `--pid PID`.
    pub command: String,
    /// The machine it was counted on, as a run's `machine` field has it.
    pub machine: Value,
    /// False when the counting was cut short (Ctrl-C, a PID that exited).
    pub complete: bool,
    /// The traced run's times (tracing included in its system time).
    pub traced: SavedTimes,
    /// The untraced runs' times, the ones the price is checked against (none with --once or
    /// --pid).
    #[serde(default)]
    pub untraced: Vec<SavedTimes>,
    /// Every counted event; syscalls are class `syscall`, named.
    pub events: Vec<SavedEvent>,
    /// Bytes read and written through syscalls (rchar, wchar of the tree).
    #[serde(default)]
    pub rchar: u64,
    #[serde(default)]
    pub wchar: u64,
    /// The largest resident set of one of the tree's processes, bytes (absent in older
    /// files: 0, not known).
    #[serde(default)]
    pub max_rss: u64,
    /// The sampled read/write calls' bytes by name and fd kind, which share rchar and wchar
    /// out (`Counts::fd_bytes`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fd_bytes: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    pub exit_status: i32,
    #[serde(default)]
    pub notes: Vec<String>,
    /// The CPU time split at the kernel's transitions, where it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<crate::measured::Split>,
    /// The samples taken beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<crate::samples::Samples>,
    /// The split's own cost in the traced run, ns (measured beside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracer_ns: Option<f64>,
    /// The same per event, by kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracer_per_event: Option<crate::measured::TracerCost>,
}

impl SavedCounts {
    /// The file's contents for `counts`.
    pub fn of(
        counts: &Counts,
        command: &str,
        machine: Value,
        untraced: &[Times],
        complete: bool,
    ) -> SavedCounts {
        let mut events: Vec<SavedEvent> = counts
            .syscalls
            .iter()
            .map(|(name, &n)| SavedEvent {
                class: "syscall".into(),
                event: name.clone(),
                count: n,
            })
            .collect();
        events.extend(counts.events.iter().map(|((c, e), &n)| SavedEvent {
            class: c.clone(),
            event: e.clone(),
            count: n,
        }));
        SavedCounts {
            schema: SCHEMA.into(),
            command: command.into(),
            machine,
            complete,
            traced: counts.times.into(),
            untraced: untraced.iter().map(|t| (*t).into()).collect(),
            events,
            rchar: counts.rchar,
            wchar: counts.wchar,
            max_rss: counts.max_rss,
            fd_bytes: counts.fd_bytes.clone(),
            exit_status: counts.exit_status.shell_status().into(),
            notes: counts.notes.clone(),
            measured: counts.measured.clone(),
            samples: counts.samples.clone(),
            tracer_ns: counts.tracer_ns,
            tracer_per_event: counts.tracer_per_event,
        }
    }

    /// The counts as counting returned them.
    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            times: self.traced.into(),
            rchar: self.rchar,
            wchar: self.wchar,
            max_rss: self.max_rss,
            fd_bytes: self.fd_bytes.clone(),
            exit_status: costlab_core::error::ProgramEnd::Exited(
                u8::try_from(self.exit_status).unwrap_or(1),
            ),
            notes: self.notes.clone(),
            measured: self.measured.clone(),
            samples: self.samples.clone(),
            tracer_ns: self.tracer_ns,
            tracer_per_event: self.tracer_per_event,
            ..Default::default()
        };
        for e in &self.events {
            if e.class == "syscall" {
                *c.syscalls.entry(e.event.clone()).or_default() += e.count;
            } else {
                *c.events
                    .entry((e.class.clone(), e.event.clone()))
                    .or_default() += e.count;
            }
        }
        c
    }

    pub fn untraced_times(&self) -> Vec<Times> {
        self.untraced.iter().map(|t| (*t).into()).collect()
    }

    /// Write the file (pretty JSON, one trailing newline).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(path, text).map_err(|e| {
            usage(format!(
                "cannot write --save-counts {}: {e}; give a writable path",
                path.display()
            ))
        })
    }

    /// Read and check a file written by `--save-counts`; any fault is one usage line.
    pub fn read(path: &Path) -> Result<SavedCounts> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            usage(format!(
                "cannot read --from {}: {}; give a file written by costlab price --save-counts FILE",
                path.display(),
                io_words(&e)
            ))
        })?;
        SavedCounts::parse(&text).map_err(|why| {
            usage(format!(
                "--from {} is not a costlab counts file ({why}); give a file written by costlab price --save-counts FILE",
                path.display()
            ))
        })
    }

    /// Parse and check the text of a counts file; the reason it is not one otherwise.
    pub fn parse(text: &str) -> std::result::Result<SavedCounts, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("schema").and_then(Value::as_str) {
            Some(SCHEMA) => {}
            Some(other) => return Err(format!("schema '{other}', not '{SCHEMA}'")),
            None => return Err(format!("no \"schema\": \"{SCHEMA}\"")),
        }
        let saved: SavedCounts = serde_json::from_value(v).map_err(|e| e.to_string())?;
        let times = [saved.traced]
            .iter()
            .chain(&saved.untraced)
            .flat_map(|t| [t.user_ns, t.sys_ns, t.wall_ns])
            .collect::<Vec<f64>>();
        if times.iter().any(|t| !t.is_finite() || *t < 0.0) {
            return Err("a time is negative or not a number".into());
        }
        if let Some(e) = saved
            .events
            .iter()
            .find(|e| e.class.trim().is_empty() || e.event.trim().is_empty())
        {
            return Err(format!("an event with no class or name ({e:?})"));
        }
        Ok(saved)
    }

    /// The events as a map, for comparing two files.
    pub fn by_event(&self) -> BTreeMap<(String, String), u64> {
        self.events
            .iter()
            .map(|e| ((e.class.clone(), e.event.clone()), e.count))
            .collect()
    }
}

/// An I/O error in words without the "(os error 2)" tail.
fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> Counts {
        let mut c = Counts::default();
        c.syscalls.insert("getppid".into(), 1000);
        c.events.insert(("fault".into(), "minor".into()), 80);
        c.times = Times {
            user_ns: 1.0,
            sys_ns: 2.0,
            wall_ns: 4.0,
        };
        c.rchar = 10;
        c.fd_bytes.insert("read:pipe".into(), 8);
        c
    }

    #[test]
    fn counts_come_back_as_they_were_saved() {
        let s = SavedCounts::of(&counts(), "x", Value::Null, &[], true);
        let text = serde_json::to_string(&s).unwrap();
        let back = SavedCounts::parse(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.counts(), counts());
    }

    #[test]
    fn a_file_that_is_not_a_counts_file_says_why() {
        assert!(SavedCounts::parse("{").unwrap_err().contains("not JSON"));
        assert!(SavedCounts::parse("{}")
            .unwrap_err()
            .contains("no \"schema\""));
        let s = SavedCounts::of(&counts(), "x", Value::Null, &[], true);
        let mut v = serde_json::to_value(&s).unwrap();
        v["schema"] = "costlab/1".into();
        assert!(SavedCounts::parse(&v.to_string())
            .unwrap_err()
            .contains("schema 'costlab/1'"));
        let mut v = serde_json::to_value(&s).unwrap();
        v["events"][0]["count"] = (-1).into();
        assert!(SavedCounts::parse(&v.to_string()).is_err());
    }
}
