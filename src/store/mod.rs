//! History: every run, stored in an embedded SQLite database, and the comparison of two runs.
//!
//! The database is opened in WAL mode with a busy timeout and every write is one IMMEDIATE
//! transaction, so two costlab processes writing at once both land (one waits for the other)
//! and a run cut short leaves whole labs or nothing of them.

pub mod commands;
pub mod compare;
pub mod mwu;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use crate::error::usage;
use crate::labs::Headline;
use crate::report::sheet::{LabSheet, LabStatus};
use crate::report::{Doc, Model, ResultRow, RunInfo};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    costlab TEXT NOT NULL,
    command TEXT NOT NULL,
    machine TEXT NOT NULL,
    machine_summary TEXT NOT NULL,
    complete INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    lab TEXT NOT NULL,
    figure_id TEXT NOT NULL,
    case_json TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    summary TEXT NOT NULL,
    samples TEXT NOT NULL,
    counters TEXT,
    unsupported_counters TEXT,
    verdict TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS results_figure ON results(figure_id);
CREATE TABLE IF NOT EXISTS models (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    lab TEXT NOT NULL,
    name TEXT NOT NULL,
    model TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS notes (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS labs (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    lab TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    headlines TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Switch to WAL. Two processes creating the database at the same moment can both try; the
/// switch needs an exclusive lock and SQLite reports "database is locked" at once rather than
/// waiting on the busy timeout, so retry for a bounded time.
fn wal_mode(conn: &Connection) -> rusqlite::Result<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Where the history lives: `--db`, else $COSTLAB_DB, else the user's data directory.
pub fn default_path(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("COSTLAB_DB").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let dir = dirs::data_dir().ok_or_else(|| {
        usage("no user data directory (HOME unset?): pass --db PATH or set COSTLAB_DB")
    })?;
    Ok(dir.join("costlab").join("history.db"))
}

/// One line of `costlab history`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub started: String,
    pub command: String,
    pub machine_summary: String,
    pub complete: bool,
    pub figures: usize,
}

/// The history database.
pub struct Store {
    conn: Connection,
}

/// "Intel Xeon ... · 2 CPUs · 6.1.0" from the machine JSON, whatever of it is known.
pub fn machine_summary(machine: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = machine
        .get("cpu_model")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(m.to_string());
    }
    if let Some(n) = machine.get("cpus_online").and_then(Value::as_u64) {
        parts.push(format!("{n} CPUs"));
    }
    if let Some(k) = machine
        .get("kernel")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(k.to_string());
    }
    if let Some(h) = machine.get("hypervisor").and_then(Value::as_str) {
        parts.push(format!("VM ({h})"));
    }
    if parts.is_empty() {
        "unknown machine".to_string()
    } else {
        parts.join(" · ")
    }
}

impl Store {
    /// Open (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                usage(format!(
                    "cannot create {} for the history database: {e}; pass --db PATH",
                    dir.display()
                ))
            })?;
        }
        let conn = Connection::open(path).map_err(|e| {
            usage(format!(
                "cannot open history database {}: {e}; pass --db PATH",
                path.display()
            ))
        })?;
        // A writer waits for another instead of failing: two runs at once both land.
        conn.busy_timeout(Duration::from_secs(30))?;
        let mode =
            wal_mode(&conn).with_context(|| format!("setting WAL mode on {}", path.display()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            anyhow::bail!("{} cannot use WAL mode (got {mode})", path.display());
        }
        conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")?;
        let store = Store { conn };
        store.write(|tx| {
            tx.execute_batch(SCHEMA)?;
            add_verdict_column(tx)
        })?;
        Ok(store)
    }

    /// Run `f` in one IMMEDIATE transaction: the write lock is taken up front, so two writers
    /// queue on the busy timeout instead of failing on a lock upgrade.
    fn write<T>(&self, f: impl FnOnce(&rusqlite::Transaction) -> Result<T>) -> Result<T> {
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Record a run as started (incomplete until `finish_run`).
    pub fn begin_run(&self, run: &RunInfo, machine: &Value) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO runs (id, started, costlab, command, machine, machine_summary, complete)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                params![
                    run.id,
                    run.started,
                    run.costlab,
                    run.command,
                    serde_json::to_string(machine)?,
                    machine_summary(machine)
                ],
            )?;
            Ok(())
        })
    }

    /// Add one lab's figures, models, status and headlines to a run, all or nothing.
    pub fn add_lab(
        &self,
        run_id: &str,
        sheet: &LabSheet,
        results: &[ResultRow],
        models: &[Model],
    ) -> Result<()> {
        self.write(|tx| {
            insert_results(tx, run_id, results)?;
            insert_models(tx, run_id, models)?;
            let seq = next_seq(tx, "labs", run_id)?;
            tx.execute(
                "INSERT INTO labs (run_id, seq, lab, status, reason, headlines)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run_id,
                    seq,
                    sheet.lab,
                    sheet.status.word(),
                    sheet.status.reason(),
                    serde_json::to_string(&sheet.headlines)?
                ],
            )?;
            Ok(())
        })
    }

    /// Close a run: its notes, and whether it is complete.
    pub fn finish_run(&self, run_id: &str, complete: bool, notes: &[String]) -> Result<()> {
        self.write(|tx| {
            insert_notes(tx, run_id, notes)?;
            tx.execute(
                "UPDATE runs SET complete = ?2 WHERE id = ?1",
                params![run_id, complete],
            )?;
            Ok(())
        })
    }

    /// Store a whole document at once (a lab run on its own), with its lab's sheet.
    pub fn save_doc(&self, doc: &Doc, sheets: &[LabSheet]) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO runs (id, started, costlab, command, machine, machine_summary, complete)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    doc.run.id,
                    doc.run.started,
                    doc.run.costlab,
                    doc.run.command,
                    serde_json::to_string(&doc.machine)?,
                    machine_summary(&doc.machine),
                    doc.run.complete
                ],
            )?;
            insert_results(tx, &doc.run.id, &doc.results)?;
            insert_models(tx, &doc.run.id, &doc.models)?;
            insert_notes(tx, &doc.run.id, &doc.notes)?;
            for (seq, s) in sheets.iter().enumerate() {
                tx.execute(
                    "INSERT INTO labs (run_id, seq, lab, status, reason, headlines)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        doc.run.id,
                        seq as i64,
                        s.lab,
                        s.status.word(),
                        s.status.reason(),
                        serde_json::to_string(&s.headlines)?
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare(
            "SELECT r.id, r.started, r.command, r.machine_summary, r.complete,
                    (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)
             FROM runs r ORDER BY r.started, r.rowid",
        )?;
        let rows = st.query_map([], |r| {
            Ok(RunRow {
                id: r.get(0)?,
                started: r.get(1)?,
                command: r.get(2)?,
                machine_summary: r.get(3)?,
                complete: r.get(4)?,
                figures: r.get::<_, i64>(5)? as usize,
            })
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(Into::into)
    }

    /// A run named by its id, a unique prefix of it, or `last`.
    pub fn resolve(&self, name: &str) -> Result<String> {
        if name == "last" {
            return self
                .conn
                .query_row(
                    "SELECT id FROM runs ORDER BY started DESC, rowid DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?
                .ok_or_else(|| usage("the history is empty: run a lab or `costlab run` first"));
        }
        let like = format!("{}%", name.replace(['%', '_'], ""));
        let mut st = self
            .conn
            .prepare("SELECT id FROM runs WHERE id = ?1 OR id LIKE ?2 ORDER BY rowid")?;
        let ids: Vec<String> = st
            .query_map(params![name, like], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if ids.iter().any(|i| i == name) {
            return Ok(name.to_string());
        }
        match ids.len() {
            0 => Err(usage(format!(
                "no run '{name}' in the history: see `costlab history` for ids (or use `last`)"
            ))),
            1 => Ok(ids[0].clone()),
            n => Err(usage(format!(
                "'{name}' matches {n} runs: give more of the id (see `costlab history`)"
            ))),
        }
    }

    /// A stored run as the document it was.
    pub fn load_doc(&self, id: &str) -> Result<Doc> {
        let (started, costlab, command, machine, complete): (String, String, String, String, bool) =
            self.conn
                .query_row(
                    "SELECT started, costlab, command, machine, complete FROM runs WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()?
                .ok_or_else(|| usage(format!("no run '{id}' in the history")))?;
        let mut st = self.conn.prepare(
            "SELECT lab, case_json, metric, unit, summary, samples, counters, unsupported_counters,
                    verdict
             FROM results WHERE run_id = ?1 ORDER BY seq",
        )?;
        let raw: Vec<[Option<String>; 9]> = st
            .query_map([id], |r| {
                Ok([
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ])
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut results = Vec::with_capacity(raw.len());
        for [lab, case, metric, unit, summary, samples, counters, unsupported, verdict] in raw {
            let text = |s: Option<String>| s.unwrap_or_default();
            let verdict: Verdict = verdict
                .map(|v| serde_json::from_str(&v))
                .transpose()?
                .unwrap_or_default();
            results.push(ResultRow {
                lab: text(lab),
                case: serde_json::from_str(&text(case))?,
                metric: text(metric),
                unit: text(unit),
                summary: serde_json::from_str(&text(summary))?,
                samples: serde_json::from_str(&text(samples))?,
                counters: counters.map(|c| serde_json::from_str(&c)).transpose()?,
                unsupported_counters: unsupported.map(|c| serde_json::from_str(&c)).transpose()?,
                conditions: verdict.conditions,
                quality: verdict.quality,
                quality_reasons: verdict.quality_reasons,
            });
        }
        let models: Vec<Model> = self
            .strings(
                "SELECT model FROM models WHERE run_id = ?1 ORDER BY seq",
                id,
            )?
            .iter()
            .map(|m| serde_json::from_str(m))
            .collect::<serde_json::Result<_>>()?;
        let notes = self.strings("SELECT text FROM notes WHERE run_id = ?1 ORDER BY seq", id)?;
        Ok(Doc {
            schema: crate::report::model::SCHEMA.to_string(),
            run: RunInfo {
                id: id.to_string(),
                started,
                costlab,
                command,
                complete,
            },
            machine: serde_json::from_str(&machine)?,
            results,
            models,
            notes,
        })
    }

    /// The cost sheet of a stored run.
    pub fn load_sheet(&self, id: &str) -> Result<Vec<LabSheet>> {
        let mut st = self.conn.prepare(
            "SELECT lab, status, reason, headlines FROM labs WHERE run_id = ?1 ORDER BY seq",
        )?;
        let raw: Vec<(String, String, Option<String>, String)> = st
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::new();
        for (lab, status, reason, headlines) in raw {
            let reason = reason.unwrap_or_default();
            let status = match status.as_str() {
                "skipped" => LabStatus::Skipped(reason),
                "failed" => LabStatus::Failed(reason),
                "interrupted" => LabStatus::Interrupted,
                _ => LabStatus::Ran,
            };
            let headlines: Vec<Headline> = serde_json::from_str(&headlines)?;
            out.push(LabSheet {
                lab,
                status,
                headlines,
            });
        }
        Ok(out)
    }

    fn strings(&self, sql: &str, id: &str) -> Result<Vec<String>> {
        let mut st = self.conn.prepare(sql)?;
        let v = st
            .query_map([id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(v)
    }

    /// SQLite's own check of the file (for tests and `history`): "ok" when sound.
    pub fn integrity(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}

/// A result's conditions and verdict, kept as one JSON column.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Verdict {
    #[serde(default)]
    conditions: Option<crate::measure::conditions::Conditions>,
    #[serde(default)]
    quality: Option<crate::report::model::Quality>,
    #[serde(default)]
    quality_reasons: Vec<String>,
}

/// Histories made before costlab judged its figures lack the `verdict` column: add it.
fn add_verdict_column(tx: &rusqlite::Transaction) -> Result<()> {
    let has: bool = tx
        .prepare("SELECT 1 FROM pragma_table_info('results') WHERE name = 'verdict'")?
        .exists([])?;
    if !has {
        tx.execute_batch("ALTER TABLE results ADD COLUMN verdict TEXT")?;
    }
    Ok(())
}

fn next_seq(tx: &rusqlite::Transaction, table: &str, run_id: &str) -> Result<i64> {
    Ok(tx.query_row(
        &format!("SELECT COALESCE(MAX(seq) + 1, 0) FROM {table} WHERE run_id = ?1"),
        [run_id],
        |r| r.get(0),
    )?)
}

fn insert_results(tx: &rusqlite::Transaction, run_id: &str, rows: &[ResultRow]) -> Result<()> {
    let first = next_seq(tx, "results", run_id)?;
    let mut st = tx.prepare(
        "INSERT INTO results (run_id, seq, lab, figure_id, case_json, metric, unit, summary,
                              samples, counters, unsupported_counters, verdict)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for (i, r) in rows.iter().enumerate() {
        st.execute(params![
            run_id,
            first + i as i64,
            r.lab,
            r.figure_id(),
            serde_json::to_string(&r.case)?,
            r.metric,
            r.unit,
            serde_json::to_string(&r.summary)?,
            serde_json::to_string(&r.samples)?,
            r.counters.as_ref().map(serde_json::to_string).transpose()?,
            r.unsupported_counters
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?,
            serde_json::to_string(&Verdict {
                conditions: r.conditions.clone(),
                quality: r.quality,
                quality_reasons: r.quality_reasons.clone(),
            })?,
        ])?;
    }
    Ok(())
}

fn insert_models(tx: &rusqlite::Transaction, run_id: &str, models: &[Model]) -> Result<()> {
    let first = next_seq(tx, "models", run_id)?;
    for (i, m) in models.iter().enumerate() {
        tx.execute(
            "INSERT INTO models (run_id, seq, lab, name, model) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                run_id,
                first + i as i64,
                m.lab,
                m.name,
                serde_json::to_string(m)?
            ],
        )?;
    }
    Ok(())
}

fn insert_notes(tx: &rusqlite::Transaction, run_id: &str, notes: &[String]) -> Result<()> {
    let first = next_seq(tx, "notes", run_id)?;
    for (i, n) in notes.iter().enumerate() {
        tx.execute(
            "INSERT INTO notes (run_id, seq, text) VALUES (?1, ?2, ?3)",
            params![run_id, first + i as i64, n],
        )?;
    }
    Ok(())
}
