//! The tracer's own cost per event (`verify::overhead`'s loops: about 30-50 s of attaches,
//! detaches and loops), kept in the history with the run that measured it and reused while it
//! is fresh: the same machine, the same kernel, the same costlab build, the same tracer (the
//! split alone, or with the sampler) and measured within a day. A price or a `--verify` then
//! takes the stored figures out and names their run and age; `--recalibrate` measures them
//! again.
//!
//! The figures are rows of the price run that measured them: class `tracer`, one per event
//! (metric `tracer_cost`, ns an event; `tick`'s is the timer's share of the CPU, a ratio),
//! their samples one per round of the loops.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;

use costlab_core::measure::quality::Quality;
use costlab_history::report::ResultRow;
use costlab_lab::Ctx;

use super::overhead::{Overhead, EVENTS};
use crate::LAB;

/// Rounds of the loops, each figure their median. Paid once a day, so more than a price
/// could pay on every run: six recalibrations each way, alternated, on the quiet 2-vCPU guest
/// here, gave a fault's cost 342-572 ns with 3 rounds and 397-512 with 7, an mmap's 479-1000
/// and 748-1010, a stat's path 201-421 and 201-350, a switch's 7.97-10.10 us and 8.66-10.19
/// (a syscall's 246-272 and 247-257 ns); 7 rounds took 24 s, 3 took 10.4-11.0 s.
pub const ROUNDS: usize = 7;

/// How long a stored calibration is reused: a day. Over longer the host's load and the
/// guest's placement move it more than its own spread (the syscall's cost read 240-330 ns
/// over a week here).
pub const FRESH_S: i64 = 24 * 3600;

/// The metric of a calibration's rows.
pub const METRIC: &str = "tracer_cost";

/// The tracer's cost per event, and where it came from.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub overhead: Overhead,
    /// Where it comes from, for the note: measured now, or the run and its age.
    pub origin: String,
    /// Its rows, to be stored with this run: only where it was measured now.
    pub rows: Vec<ResultRow>,
}

/// What a stored calibration must match to be reused.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub tracer: &'static str,
    pub kernel: String,
    pub build: String,
}

impl Key {
    /// This machine's key now, for the split alone or with the sampler.
    pub fn here(sampler: bool) -> Key {
        Key {
            tracer: tracer_word(sampler),
            kernel: rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned(),
            build: build_id(),
        }
    }

    fn matches(&self, row: &ResultRow) -> bool {
        row.key("class") == "tracer"
            && row.key("tracer") == self.tracer
            && row.key("kernel") == self.kernel
            && row.key("build") == self.build
    }
}

fn tracer_word(sampler: bool) -> &'static str {
    if sampler {
        "split+sampler"
    } else {
        "split"
    }
}

/// This costlab build: its version and its executable's size and modification time (a
/// rebuilt binary, whose tracer programs may differ, is another build).
pub fn build_id() -> String {
    let meta = std::fs::metadata("/proc/self/exe").ok();
    let stamp = meta.map(|m| {
        use std::os::unix::fs::MetadataExt;
        format!("{}.{}.{}", m.size(), m.mtime(), m.mtime_nsec())
    });
    let hash = stamp.map_or("unknown".into(), |s| {
        // FNV-1a: a short stable name, not a secret.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    });
    format!("{}+{hash}", env!("CARGO_PKG_VERSION"))
}

/// The tracer's cost per event: the history's fresh figures (unless `again`), else measured
/// now in `rounds` rounds.
pub fn get(ctx: &Ctx, rounds: usize, sampler: bool, again: bool) -> Result<Calibration> {
    let key = Key::here(sampler);
    let mut why_not = None;
    if !again {
        match stored(ctx, &key, now_s()) {
            Ok(Ok(c)) => return Ok(c),
            Ok(Err(why)) => why_not = Some(why),
            Err(e) => {
                why_not = Some(format!(
                    "the history could not be read for it ({})",
                    costlab_core::error::one_line(&e)
                ))
            }
        }
    }
    let (overhead, per_round) = Overhead::measure(rounds, sampler)?;
    let mut rows: Vec<ResultRow> = per_round
        .into_iter()
        .filter_map(|(event, samples)| row(&key, event, samples))
        .collect();
    costlab_core::measure::quality::judge_rows(&mut rows);
    let origin = match (again, why_not) {
        (true, _) => "measured here now (--recalibrate) and stored with this run".to_string(),
        (false, Some(why)) => format!("measured here now and stored with this run: {why}"),
        (false, None) => "measured here now and stored with this run".to_string(),
    };
    Ok(Calibration {
        overhead,
        origin,
        rows,
    })
}

/// One event's row. A loop that made none of its events (the lookups on a tmpfs) has no
/// samples: its cost is counted as 0, and stored as one sample of 0.
fn row(key: &Key, event: &'static str, samples: Vec<f64>) -> Option<ResultRow> {
    let samples = if samples.is_empty() {
        vec![0.0]
    } else {
        samples
    };
    ResultRow::new(
        LAB,
        costlab_core::case! {
            "class" => "tracer",
            "event" => event,
            "tracer" => key.tracer,
            "kernel" => key.kernel.as_str(),
            "build" => key.build.as_str(),
        },
        METRIC,
        if event == "tick" { "ratio" } else { "ns" },
        samples,
    )
}

/// The newest stored calibration matching `key` (every event's row, none disturbed), if it is
/// fresh at `now` (seconds since the epoch); else why none is used.
fn stored(ctx: &Ctx, key: &Key, now: i64) -> Result<std::result::Result<Calibration, String>> {
    let store = ctx.history()?;
    let me = costlab_history::store::machine_id(&serde_json::to_value(&ctx.machine)?);
    let found = store.figures_of(LAB, METRIC, &me)?;
    Ok(newest(&found, key, now))
}

/// `stored`'s choice among `found` (run id, start time, row; newest run first).
pub fn newest(
    found: &[(String, String, ResultRow)],
    key: &Key,
    now: i64,
) -> std::result::Result<Calibration, String> {
    let mut older = None;
    let mut run_ids: Vec<&str> = Vec::new();
    for (id, _, _) in found {
        if !run_ids.contains(&id.as_str()) {
            run_ids.push(id);
        }
    }
    for id in run_ids {
        let rows: Vec<&(String, String, ResultRow)> = found
            .iter()
            .filter(|(r, _, row)| r == id && key.matches(row))
            .collect();
        let Some((_, started, _)) = rows.first() else {
            continue;
        };
        let complete = EVENTS
            .iter()
            .all(|e| rows.iter().any(|(_, _, r)| r.key("event") == *e));
        let disturbed = rows
            .iter()
            .any(|(_, _, r)| r.quality == Some(Quality::Disturbed));
        if !complete || disturbed {
            continue;
        }
        let Some(at) = costlab_history::report::time::parse_rfc3339(started) else {
            continue;
        };
        let age = now - at;
        if !(0..=FRESH_S).contains(&age) {
            older.get_or_insert((id.to_string(), age));
            continue;
        }
        let mut overhead = Overhead {
            sampler: key.tracer == tracer_word(true),
            ..Overhead::default()
        };
        for (_, _, r) in &rows {
            overhead.set(&r.key("event"), r.summary.median);
        }
        return Ok(Calibration {
            overhead,
            origin: format!(
                "stored {} ago by run {id} for this machine, kernel and costlab build, and reused; --recalibrate measures it again",
                age_words(age)
            ),
            rows: Vec::new(),
        });
    }
    Err(match older {
        Some((id, age)) => format!(
            "the newest stored one (run {id}) is {} old, past a day",
            age_words(age)
        ),
        None => "the history holds none for this kernel and costlab build".into(),
    })
}

/// "40 s", "12 min", "3.5 h", "2.0 days".
pub fn age_words(s: i64) -> String {
    let s = s.max(0) as f64;
    if s < 60.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 48.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86400.0)
    }
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            tracer: "split+sampler",
            kernel: "6.18.0".into(),
            build: "0.1.0+abc".into(),
        }
    }

    fn rows_of(id: &str, started: &str, k: &Key, v: f64) -> Vec<(String, String, ResultRow)> {
        EVENTS
            .iter()
            .map(|e| {
                (
                    id.to_string(),
                    started.to_string(),
                    row(k, e, vec![v, v + 1.0, v + 2.0]).unwrap(),
                )
            })
            .collect()
    }

    const NOW: &str = "2026-12-06T12:00:00Z";

    fn now() -> i64 {
        costlab_history::report::time::parse_rfc3339(NOW).unwrap()
    }

    #[test]
    fn the_newest_fresh_calibration_of_the_same_kernel_and_build_is_reused() {
        let mut found = rows_of("new", "2026-12-06T11:00:00Z", &key(), 100.0);
        found.extend(rows_of("old", "2026-12-06T10:00:00Z", &key(), 500.0));
        let c = newest(&found, &key(), now()).unwrap();
        assert_eq!(c.overhead.syscall, 101.0);
        assert_eq!(c.overhead.per_cpu, 101.0);
        assert!(c.overhead.sampler);
        assert!(c.origin.contains("run new"), "{}", c.origin);
        assert!(c.origin.contains("1.0 h ago"), "{}", c.origin);
        assert!(c.rows.is_empty());
    }

    #[test]
    fn another_kernel_build_or_tracer_is_not_reused() {
        for k in [
            Key {
                kernel: "6.19.0".into(),
                ..key()
            },
            Key {
                build: "0.1.0+def".into(),
                ..key()
            },
            Key {
                tracer: "split",
                ..key()
            },
        ] {
            let found = rows_of("r", "2026-12-06T11:00:00Z", &k, 100.0);
            let why = newest(&found, &key(), now()).unwrap_err();
            assert!(why.contains("holds none"), "{why}");
        }
    }

    #[test]
    fn a_calibration_older_than_a_day_is_measured_again_and_said_so() {
        let found = rows_of("r", "2026-12-05T11:00:00Z", &key(), 100.0);
        let why = newest(&found, &key(), now()).unwrap_err();
        assert!(why.contains("run r") && why.contains("25.0 h old"), "{why}");
    }

    #[test]
    fn an_incomplete_or_disturbed_calibration_is_passed_over_for_an_older_one() {
        let mut found = rows_of("partial", "2026-12-06T11:30:00Z", &key(), 1.0);
        found.retain(|(_, _, r)| r.key("event") != "tick");
        let mut disturbed = rows_of("disturbed", "2026-12-06T11:20:00Z", &key(), 2.0);
        disturbed[0].2.quality = Some(Quality::Disturbed);
        found.extend(disturbed);
        found.extend(rows_of("good", "2026-12-06T11:00:00Z", &key(), 300.0));
        let c = newest(&found, &key(), now()).unwrap();
        assert_eq!(c.overhead.fault, 301.0);
        assert!(c.origin.contains("run good"), "{}", c.origin);
    }

    #[test]
    fn a_loop_without_events_is_stored_as_free() {
        let r = row(&key(), "lookup", Vec::new()).unwrap();
        assert_eq!(r.samples, vec![0.0]);
        assert_eq!(r.unit, "ns");
        assert_eq!(row(&key(), "tick", vec![0.01]).unwrap().unit, "ratio");
    }

    #[test]
    fn the_build_id_names_the_version_and_is_stable() {
        let a = build_id();
        assert!(a.starts_with(env!("CARGO_PKG_VERSION")), "{a}");
        assert_eq!(a, build_id());
    }
}
