//! History: every run, stored in an embedded SQLite file (the default) or a shared PostgreSQL
//! database (`--db postgres://...`). It stores and loads; comparing runs is `analysis`, drawing
//! them is `report`.
//!
//! Both backends sit behind one trait (`Backend`, `Tx`): the run logic below is written once,
//! with `$1`-style parameters, and each backend (`sqlite.rs`, `postgres.rs`) runs it in its own
//! transactions. The schema is the same on both and versioned (`migrate.rs`): a history made by
//! an older costlab is brought up to date on open, one made by a newer costlab is refused.
//!
//! Every write is one transaction and a run is written in one, so two costlab processes writing
//! at once both land and a write cut short (a server stopped, a full disk) leaves nothing of
//! the run: SQLite takes its write lock up front (WAL, IMMEDIATE, a busy timeout); PostgreSQL
//! runs each in its own transaction.

pub mod guard;
pub mod migrate;
pub mod policy;
pub mod postgres;
pub mod redact;
pub mod series;
pub mod sqlite;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use costlab_core::error::usage;
use costlab_core::machine::machine_summary;
use costlab_core::model::{Doc, Headline, LabSheet, LabStatus, Model, ResultRow, RunInfo};

pub use costlab_core::machine::identity::machine_id_of as machine_id;
pub use policy::{not_saved, record};
pub use redact::redact;

/// A value passed to or read from either backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Text(String),
}

impl Val {
    pub fn text(&self) -> Option<String> {
        match self {
            Val::Text(s) => Some(s.clone()),
            Val::Int(i) => Some(i.to_string()),
            Val::Null => None,
        }
    }
    pub fn int(&self) -> i64 {
        match self {
            Val::Int(i) => *i,
            Val::Text(s) => s.parse().unwrap_or(0),
            Val::Null => 0,
        }
    }
}

impl From<&str> for Val {
    fn from(s: &str) -> Val {
        Val::Text(s.to_string())
    }
}
impl From<String> for Val {
    fn from(s: String) -> Val {
        Val::Text(s)
    }
}
impl From<&String> for Val {
    fn from(s: &String) -> Val {
        Val::Text(s.clone())
    }
}
impl From<i64> for Val {
    fn from(i: i64) -> Val {
        Val::Int(i)
    }
}
impl From<bool> for Val {
    fn from(b: bool) -> Val {
        Val::Int(i64::from(b))
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(o: Option<T>) -> Val {
        o.map(Into::into).unwrap_or(Val::Null)
    }
}

/// Which SQL a backend speaks, where the two differ (catalog queries, DDL types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One open transaction. SQL uses `$1`, `$2`, ... for parameters on both backends.
pub trait Tx {
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64>;
    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>>;
    /// Several statements without parameters (DDL).
    fn batch(&mut self, sql: &str) -> Result<()>;
}

/// A history database. `Send`, so that a lab's context (`Ctx`, shared with the lab's threads)
/// can hold the opened history behind a lock.
pub trait Backend: Send {
    fn dialect(&self) -> Dialect;
    /// Where it is, with any password redacted.
    fn describe(&self) -> String;
    /// Run `f` in one transaction: committed when it returns Ok, rolled back otherwise.
    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()>;
    /// The backend's own check of its storage: "ok" when sound.
    fn integrity(&mut self) -> Result<String>;
    /// The tables of the latest schema it lacks.
    fn missing_tables(&self) -> Result<Vec<&'static str>> {
        Ok(Vec::new())
    }
    /// A cheap check before a run's work (pages sound, room to store it).
    fn probe(&self) -> Result<()> {
        Ok(())
    }
}

/// Whether `--db` (or COSTLAB_DB) names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres(target: &str) -> bool {
    let t = target.trim_start();
    t.starts_with("postgres://")
        || t.starts_with("postgresql://")
        || (t.contains('=') && !t.contains('/') && t.contains("dbname"))
}

/// A `--db` that looks like a URL must name a backend costlab has: anything else (`mysql://`,
/// a typo such as `postgress://`) would otherwise be taken for a SQLite file path and created,
/// directories and password included, in the working directory.
fn check_scheme(target: &str) -> Result<()> {
    let t = target.trim_start();
    let Some(end) = t.find("://") else {
        return Ok(());
    };
    let scheme = &t[..end];
    let looks_like_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !looks_like_scheme || is_postgres(t) {
        return Ok(());
    }
    Err(usage(format!(
        "costlab has no '{scheme}' history ({}): give a SQLite file path or a \
         postgres://USER@HOST[:PORT]/DB URL",
        redact(t)
    )))
}

/// Open the history for writing (created if missing).
pub fn open(db: Option<&Path>) -> Result<Store> {
    Store::open(&default_path(db)?)
}

/// Open the history for storing a run about to be measured: opened as `open` does, then
/// checked as cheaply as it can be (`Store::probe`) so that a damaged history or a full disk is
/// found before the work, not after it.
pub fn open_for_run(db: Option<&Path>) -> Result<Store> {
    let store = open(db)?;
    store.probe()?;
    Ok(store)
}

/// Open the history for reading: a missing SQLite file is an error and nothing is created; a
/// SQLite history is opened read-only (a read-only file or mount reads as it is).
pub fn open_existing(db: Option<&Path>) -> Result<Store> {
    Store::open_existing(&default_path(db)?)
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
    pub machine_id: String,
    pub complete: bool,
    pub figures: usize,
}

/// The history database.
pub struct Store {
    db: RefCell<Box<dyn Backend>>,
}

fn bad_json(what: &str, e: serde_json::Error) -> anyhow::Error {
    anyhow::anyhow!("the history holds a malformed {what} ({e})")
}

impl Store {
    /// Open (creating if needed) the history named by `target`: a SQLite file, or a
    /// `postgres://` URL (libpq's key=value form works too). The schema is brought up to date.
    pub fn open(target: &Path) -> Result<Store> {
        Store::open_with(target, true)
    }

    /// Open an existing history for reading: a missing SQLite file is an error, nothing is
    /// created.
    pub fn open_existing(target: &Path) -> Result<Store> {
        Store::open_with(target, false)
    }

    fn open_with(target: &Path, create: bool) -> Result<Store> {
        let text = target.to_string_lossy();
        check_scheme(&text)?;
        if is_postgres(&text) {
            let store = Store::of(Box::new(postgres::PgBackend::connect(&text)?));
            store.migrate()?;
            return Ok(store);
        }
        sqlite::check_path(target, create)?;
        let found = guard::inspect(target, create, migrate::LATEST)?;
        // Reading an older history that can be written brings it up to date first, as storing
        // into it would; one that cannot be written is read only at the latest schema.
        let write = create || (found.read_only.is_none() && found.version != Some(migrate::LATEST));
        let store = if write {
            let store = Store::of(Box::new(sqlite::SqliteBackend::open(target)?));
            store.migrate()?;
            store
        } else {
            if let Some(why) = &found.read_only {
                if found.version != Some(migrate::LATEST) {
                    let at = found.version.unwrap_or(0);
                    return Err(usage(format!(
                        "the history at {} cannot be written ({why}) and is at schema version \
                         {at}, older than this costlab reads ({}): copy it where it can be \
                         written (cp {} /tmp/history.db) and pass --db /tmp/history.db",
                        target.display(),
                        migrate::LATEST,
                        target.display()
                    )));
                }
            }
            Store::of(Box::new(sqlite::SqliteBackend::open_read(target, &found)?))
        };
        store.check_tables(target)?;
        Ok(store)
    }

    fn of(backend: Box<dyn Backend>) -> Store {
        Store {
            db: RefCell::new(backend),
        }
    }

    /// Bring the schema up to date; a failure is bad input with the history named.
    fn migrate(&self) -> Result<()> {
        let describe = self.describe();
        migrate::up_to_latest(self).map_err(|e| {
            if costlab_core::error::exit_code(&e) == 2 {
                e
            } else {
                usage(format!(
                    "cannot set up the history at {describe}: {}; pass another --db",
                    redact(&costlab_core::error::one_line(&e))
                ))
            }
        })
    }

    /// A history that lacks one of the schema's tables is damaged: said now, with its path,
    /// rather than as SQL's "no such table" halfway through a command.
    fn check_tables(&self, path: &Path) -> Result<()> {
        let missing = self.db.borrow().missing_tables()?;
        match missing.first() {
            None => Ok(()),
            Some(t) => Err(guard::damaged(path, &format!("it has no table {t}"))),
        }
    }

    /// The cheap check before measuring (SQLite: `PRAGMA quick_check` and the free space
    /// beside the file): a damaged history or a full disk is bad input, found before the work.
    pub fn probe(&self) -> Result<()> {
        self.db.borrow().probe()
    }

    pub fn dialect(&self) -> Dialect {
        self.db.borrow().dialect()
    }

    /// Where the history is, password redacted.
    pub fn describe(&self) -> String {
        self.db.borrow().describe()
    }

    /// Run `f` in one transaction.
    pub fn write<T>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<T>) -> Result<T> {
        let mut f = Some(f);
        let mut out = None;
        self.db.borrow_mut().transaction(&mut |tx| {
            let f = f.take().expect("a transaction runs its body once");
            out = Some(f(tx)?);
            Ok(())
        })?;
        Ok(out.expect("a committed transaction has run its body"))
    }

    fn read(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>> {
        let mut rows = Vec::new();
        self.db.borrow_mut().transaction(&mut |tx| {
            rows = tx.query(sql, params)?;
            Ok(())
        })?;
        Ok(rows)
    }

    /// Rows of a query without parameters (for the reports over the whole history).
    pub fn read_rows(&self, sql: &str) -> Result<Vec<Vec<Val>>> {
        self.read(sql, &[])
    }

    /// Store a whole run at once, with its cost sheet: the only way a run is written, so the
    /// history holds each run whole or not at all.
    pub fn save_doc(&self, doc: &Doc, sheets: &[LabSheet]) -> Result<()> {
        self.write(|tx| insert_doc(tx, doc, sheets))
    }

    /// Store a whole document unless its run id is already present (import, push): true when
    /// stored, false when skipped. One transaction: a failure leaves no part of the run.
    pub fn save_doc_if_new(&self, doc: &Doc, sheets: &[LabSheet]) -> Result<bool> {
        self.write(|tx| {
            if run_exists(tx, &doc.run.id)? {
                return Ok(false);
            }
            insert_doc(tx, doc, sheets)?;
            Ok(true)
        })
    }

    /// Whether a run with this exact id is stored.
    pub fn has_run(&self, id: &str) -> Result<bool> {
        self.write(|tx| run_exists(tx, id))
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let rows = self.read(
            "SELECT r.id, r.started, r.command, r.machine_summary, r.complete,
                    (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id), r.machine_id
             FROM runs r ORDER BY r.started, r.id",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| RunRow {
                id: r[0].text().unwrap_or_default(),
                started: r[1].text().unwrap_or_default(),
                command: r[2].text().unwrap_or_default(),
                machine_summary: r[3].text().unwrap_or_default(),
                complete: r[4].int() != 0,
                figures: r[5].int() as usize,
                machine_id: r[6].text().unwrap_or_default(),
            })
            .collect())
    }

    /// A run named by its id, a unique prefix of it, or `last`.
    pub fn resolve(&self, name: &str) -> Result<String> {
        if name == "last" {
            let rows = self.read(
                "SELECT id FROM runs ORDER BY started DESC, id DESC LIMIT 1",
                &[],
            )?;
            return rows
                .first()
                .and_then(|r| r[0].text())
                .ok_or_else(|| usage("the history is empty: run a lab or `costlab run` first"));
        }
        let like = format!("{}%", name.replace(['%', '_', '\\'], ""));
        let ids: Vec<String> = self
            .read(
                "SELECT id FROM runs WHERE id = $1 OR id LIKE $2 ORDER BY id",
                &[name.into(), like.into()],
            )?
            .into_iter()
            .filter_map(|r| r[0].text())
            .collect();
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

    /// The figures of one lab and metric that a machine's runs hold, newest run first: each
    /// with its run's id and start time. Only those rows are read, not the runs' documents.
    pub fn figures_of(
        &self,
        lab: &str,
        metric: &str,
        machine_id: &str,
    ) -> Result<Vec<(String, String, ResultRow)>> {
        let raw = self.read(
            "SELECT x.lab, x.case_json, x.metric, x.unit, x.summary, x.samples, x.counters,
                    x.unsupported_counters, x.verdict, x.run_id, r.started
             FROM results x JOIN runs r ON r.id = x.run_id
             WHERE x.lab = $1 AND x.metric = $2 AND r.machine_id = $3
             ORDER BY r.started DESC, r.id DESC, x.seq",
            &[lab.into(), metric.into(), machine_id.into()],
        )?;
        raw.iter()
            .map(|r| {
                let text = |v: &Val| v.text().unwrap_or_default();
                Ok((text(&r[9]), text(&r[10]), result_row(r)?))
            })
            .collect()
    }

    /// A stored run as the document it was.
    pub fn load_doc(&self, id: &str) -> Result<Doc> {
        let run = self.read(
            "SELECT started, costlab, command, machine, complete FROM runs WHERE id = $1",
            &[id.into()],
        )?;
        let run = run
            .first()
            .ok_or_else(|| usage(format!("no run '{id}' in the history")))?;
        let text = |v: &Val| v.text().unwrap_or_default();
        let raw = self.read(
            "SELECT lab, case_json, metric, unit, summary, samples, counters, unsupported_counters,
                    verdict
             FROM results WHERE run_id = $1 ORDER BY seq",
            &[id.into()],
        )?;
        let results = raw
            .iter()
            .map(|r| result_row(r))
            .collect::<Result<Vec<_>>>()?;
        let models: Vec<Model> = self
            .strings(
                "SELECT model FROM models WHERE run_id = $1 ORDER BY seq",
                id,
            )?
            .iter()
            .map(|m| serde_json::from_str(m))
            .collect::<serde_json::Result<_>>()
            .map_err(|e| bad_json("model", e))?;
        let notes = self.strings("SELECT text FROM notes WHERE run_id = $1 ORDER BY seq", id)?;
        Ok(Doc {
            schema: costlab_core::model::SCHEMA.to_string(),
            run: RunInfo {
                id: id.to_string(),
                started: text(&run[0]),
                costlab: text(&run[1]),
                command: text(&run[2]),
                complete: run[4].int() != 0,
            },
            machine: serde_json::from_str(&text(&run[3])).map_err(|e| bad_json("machine", e))?,
            results,
            models,
            notes,
        })
    }

    /// The cost sheet of a stored run.
    pub fn load_sheet(&self, id: &str) -> Result<Vec<LabSheet>> {
        let raw = self.read(
            "SELECT lab, status, reason, headlines FROM labs WHERE run_id = $1 ORDER BY seq",
            &[id.into()],
        )?;
        let mut out = Vec::new();
        for r in raw {
            let reason = r[2].text().unwrap_or_default();
            let status = match r[1].text().unwrap_or_default().as_str() {
                "skipped" => LabStatus::Skipped(reason),
                "failed" => LabStatus::Failed(reason),
                "interrupted" => LabStatus::Interrupted,
                _ => LabStatus::Ran,
            };
            let headlines: Vec<Headline> = serde_json::from_str(&r[3].text().unwrap_or_default())
                .map_err(|e| bad_json("headline", e))?;
            out.push(LabSheet {
                lab: r[0].text().unwrap_or_default(),
                status,
                headlines,
            });
        }
        Ok(out)
    }

    fn strings(&self, sql: &str, id: &str) -> Result<Vec<String>> {
        Ok(self
            .read(sql, &[id.into()])?
            .into_iter()
            .filter_map(|r| r[0].text())
            .collect())
    }

    /// The backend's own check of its storage (for tests and `history`): "ok" when sound.
    pub fn integrity(&self) -> Result<String> {
        self.db.borrow_mut().integrity()
    }
}

/// A result's conditions and verdict, kept as one JSON column.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Verdict {
    #[serde(default)]
    conditions: Option<costlab_core::model::Conditions>,
    #[serde(default)]
    quality: Option<costlab_core::model::Quality>,
    #[serde(default)]
    quality_reasons: Vec<String>,
}

fn run_exists(tx: &mut dyn Tx, id: &str) -> Result<bool> {
    Ok(!tx
        .query("SELECT 1 FROM runs WHERE id = $1", &[id.into()])?
        .is_empty())
}

fn insert_run(tx: &mut dyn Tx, run: &RunInfo, machine: &Value, complete: bool) -> Result<()> {
    tx.exec(
        "INSERT INTO runs (id, started, costlab, command, machine, machine_summary, complete,
                           machine_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            (&run.id).into(),
            (&run.started).into(),
            (&run.costlab).into(),
            redact(&run.command).into(),
            redact(&serde_json::to_string(machine)?).into(),
            machine_summary(machine).into(),
            complete.into(),
            machine_id(machine).into(),
        ],
    )?;
    Ok(())
}

fn insert_doc(tx: &mut dyn Tx, doc: &Doc, sheets: &[LabSheet]) -> Result<()> {
    insert_run(tx, &doc.run, &doc.machine, doc.run.complete)?;
    insert_results(tx, &doc.run.id, &doc.results)?;
    insert_models(tx, &doc.run.id, &doc.models)?;
    insert_notes(tx, &doc.run.id, &doc.notes)?;
    for (seq, s) in sheets.iter().enumerate() {
        insert_sheet(tx, &doc.run.id, seq as i64, s)?;
    }
    Ok(())
}

fn insert_sheet(tx: &mut dyn Tx, run_id: &str, seq: i64, sheet: &LabSheet) -> Result<()> {
    tx.exec(
        "INSERT INTO labs (run_id, seq, lab, status, reason, headlines)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            run_id.into(),
            seq.into(),
            (&sheet.lab).into(),
            sheet.status.word().into(),
            sheet.status.reason().map(redact).into(),
            serde_json::to_string(&sheet.headlines)?.into(),
        ],
    )?;
    Ok(())
}

fn next_seq(tx: &mut dyn Tx, table: &str, run_id: &str) -> Result<i64> {
    let rows = tx.query(
        &format!("SELECT COALESCE(MAX(seq) + 1, 0) FROM {table} WHERE run_id = $1"),
        &[run_id.into()],
    )?;
    Ok(rows.first().map(|r| r[0].int()).unwrap_or(0))
}

fn insert_results(tx: &mut dyn Tx, run_id: &str, rows: &[ResultRow]) -> Result<()> {
    let first = next_seq(tx, "results", run_id)?;
    for (i, r) in rows.iter().enumerate() {
        tx.exec(
            "INSERT INTO results (run_id, seq, lab, figure_id, case_json, metric, unit, summary,
                                  samples, counters, unsupported_counters, verdict)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            &[
                run_id.into(),
                (first + i as i64).into(),
                (&r.lab).into(),
                r.figure_id().into(),
                serde_json::to_string(&r.case)?.into(),
                (&r.metric).into(),
                (&r.unit).into(),
                serde_json::to_string(&r.summary)?.into(),
                serde_json::to_string(&r.samples)?.into(),
                r.counters
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()?
                    .into(),
                r.unsupported_counters
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()?
                    .into(),
                serde_json::to_string(&Verdict {
                    conditions: r.conditions.clone(),
                    quality: r.quality,
                    quality_reasons: r.quality_reasons.clone(),
                })?
                .into(),
            ],
        )?;
    }
    Ok(())
}

fn insert_models(tx: &mut dyn Tx, run_id: &str, models: &[Model]) -> Result<()> {
    let first = next_seq(tx, "models", run_id)?;
    for (i, m) in models.iter().enumerate() {
        tx.exec(
            "INSERT INTO models (run_id, seq, lab, name, model) VALUES ($1, $2, $3, $4, $5)",
            &[
                run_id.into(),
                (first + i as i64).into(),
                (&m.lab).into(),
                (&m.name).into(),
                serde_json::to_string(m)?.into(),
            ],
        )?;
    }
    Ok(())
}

fn insert_notes(tx: &mut dyn Tx, run_id: &str, notes: &[String]) -> Result<()> {
    let first = next_seq(tx, "notes", run_id)?;
    for (i, n) in notes.iter().enumerate() {
        tx.exec(
            "INSERT INTO notes (run_id, seq, text) VALUES ($1, $2, $3)",
            &[run_id.into(), (first + i as i64).into(), redact(n).into()],
        )?;
    }
    Ok(())
}

/// A result row from a `results` row read as lab, case_json, metric, unit, summary, samples,
/// counters, unsupported_counters, verdict.
fn result_row(r: &[Val]) -> Result<ResultRow> {
    let text = |v: &Val| v.text().unwrap_or_default();
    let verdict: Verdict = r[8]
        .text()
        .map(|v| serde_json::from_str(&v))
        .transpose()
        .map_err(|e| bad_json("verdict", e))?
        .unwrap_or_default();
    Ok(ResultRow {
        lab: text(&r[0]),
        case: serde_json::from_str(&text(&r[1])).map_err(|e| bad_json("case", e))?,
        metric: text(&r[2]),
        unit: text(&r[3]),
        summary: serde_json::from_str(&text(&r[4])).map_err(|e| bad_json("summary", e))?,
        samples: costlab_core::model::result::samples_from_json(&text(&r[5]))
            .map_err(|e| bad_json("samples", e))?,
        counters: r[6]
            .text()
            .map(|c| serde_json::from_str(&c))
            .transpose()
            .map_err(|e| bad_json("counters", e))?,
        unsupported_counters: r[7]
            .text()
            .map(|c| serde_json::from_str(&c))
            .transpose()
            .map_err(|e| bad_json("counters", e))?,
        conditions: verdict.conditions,
        quality: verdict.quality,
        quality_reasons: verdict.quality_reasons,
    })
}
