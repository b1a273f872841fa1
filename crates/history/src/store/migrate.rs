//! The history's schema, versioned. Each migration has an up and a down step (one SQL text for both backends);
//! `schema_version` holds the version a database is at. Opening a history applies what it
//! lacks, in one transaction; a history at a version newer than this costlab knows is refused
//! (its writer may store what this one cannot read).
//!
//! SQLite histories made before versioning (no `schema_version` table) are recognised by their
//! tables: with the `verdict` column they are at version 2, without it at version 1.

use anyhow::Result;

use super::{Dialect, Store, Tx};
use costlab_core::error::usage;

/// One step of the schema, the same SQL for both backends: the types are ones both read alike
/// (BIGINT is SQLite's INTEGER affinity, and no column is an `INTEGER PRIMARY KEY` rowid alias,
/// the one place SQLite tells the two spellings apart).
pub struct Migration {
    pub version: i64,
    pub what: &'static str,
    pub up: &'static str,
    pub down: &'static str,
}

/// Integers are BIGINT (what costlab binds in PostgreSQL), text is TEXT.
const V1: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    costlab TEXT NOT NULL,
    command TEXT NOT NULL,
    machine TEXT NOT NULL,
    machine_summary TEXT NOT NULL,
    complete BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    lab TEXT NOT NULL,
    figure_id TEXT NOT NULL,
    case_json TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    summary TEXT NOT NULL,
    samples TEXT NOT NULL,
    counters TEXT,
    unsupported_counters TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS results_figure ON results(figure_id);
CREATE TABLE IF NOT EXISTS models (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    lab TEXT NOT NULL,
    name TEXT NOT NULL,
    model TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS notes (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS labs (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    lab TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    headlines TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

const DROP_ALL: &str = "
DROP TABLE IF EXISTS labs;
DROP TABLE IF EXISTS notes;
DROP TABLE IF EXISTS models;
DROP TABLE IF EXISTS results;
DROP TABLE IF EXISTS runs;
";

pub const MIGRATIONS: [Migration; 3] = [
    Migration {
        version: 1,
        what: "runs, results, models, notes, labs",
        up: V1,
        down: DROP_ALL,
    },
    Migration {
        version: 2,
        what: "results.verdict: conditions, quality and its reasons (JSON)",
        up: "ALTER TABLE results ADD COLUMN verdict TEXT;",
        down: "ALTER TABLE results DROP COLUMN verdict;",
    },
    Migration {
        version: 3,
        what: "runs.machine_id: the machine's stable id, indexed",
        up: "ALTER TABLE runs ADD COLUMN machine_id TEXT;
             CREATE INDEX IF NOT EXISTS runs_machine ON runs(machine_id);",
        down: "DROP INDEX IF EXISTS runs_machine;
               ALTER TABLE runs DROP COLUMN machine_id;",
    },
];

pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// The version a database is at; None for an empty one.
fn current(tx: &mut dyn Tx, d: Dialect) -> Result<Option<i64>> {
    tx.batch("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")?;
    if let Some(r) = tx
        .query("SELECT MAX(version) FROM schema_version", &[])?
        .first()
    {
        if r[0] != super::Val::Null {
            return Ok(Some(r[0].int()));
        }
    }
    // Before versioning: a SQLite history with tables but no version.
    let (table, column) = match d {
        Dialect::Sqlite => (
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'",
            "SELECT 1 FROM pragma_table_info('results') WHERE name = 'verdict'",
        ),
        Dialect::Postgres => (
            "SELECT 1 FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_name = 'runs'",
            "SELECT 1 FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = 'results'
               AND column_name = 'verdict'",
        ),
    };
    if tx.query(table, &[])?.is_empty() {
        return Ok(None);
    }
    let v = if tx.query(column, &[])?.is_empty() {
        1
    } else {
        2
    };
    set_version(tx, v)?;
    Ok(Some(v))
}

fn set_version(tx: &mut dyn Tx, v: i64) -> Result<()> {
    tx.exec("DELETE FROM schema_version", &[])?;
    tx.exec(
        "INSERT INTO schema_version (version) VALUES ($1)",
        &[v.into()],
    )?;
    Ok(())
}

/// Only one process migrates a PostgreSQL database at a time: the others wait, then find it
/// done. (SQLite's write transaction already excludes other writers.)
fn lock(tx: &mut dyn Tx, d: Dialect) -> Result<()> {
    if d == Dialect::Postgres {
        tx.query("SELECT pg_advisory_xact_lock(7366231)", &[])?;
    }
    Ok(())
}

/// The version the store is at.
pub fn version(store: &Store) -> Result<i64> {
    let d = store.dialect();
    store.write(|tx| {
        lock(tx, d)?;
        Ok(current(tx, d)?.unwrap_or(0))
    })
}

/// Bring the store up to the latest schema (what `open` does).
pub fn up_to_latest(store: &Store) -> Result<()> {
    migrate_to(store, LATEST).map(|_| ())
}

/// Move the store to `target` (0: no tables), up or down, in one transaction. Returns the
/// version it was at. A version newer than this costlab knows is refused.
pub fn migrate_to(store: &Store, target: i64) -> Result<i64> {
    if !(0..=LATEST).contains(&target) {
        return Err(usage(format!(
            "schema version {target} is unknown: this costlab knows 0 to {LATEST}"
        )));
    }
    let d = store.dialect();
    let where_ = store.describe();
    store.write(|tx| {
        lock(tx, d)?;
        let at = current(tx, d)?.unwrap_or(0);
        if at > LATEST {
            return Err(usage(format!(
                "the history at {where_} has schema version {at}, newer than this costlab \
                 knows ({LATEST}): upgrade costlab, or pass another --db"
            )));
        }
        if at < target {
            for m in MIGRATIONS
                .iter()
                .filter(|m| m.version > at && m.version <= target)
            {
                tx.batch(m.up)?;
            }
        } else {
            for m in MIGRATIONS
                .iter()
                .rev()
                .filter(|m| m.version <= at && m.version > target)
            {
                tx.batch(m.down)?;
            }
        }
        if at != target {
            set_version(tx, target)?;
        }
        Ok(at)
    })
}
