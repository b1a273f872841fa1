//! The embedded history: one SQLite file, in WAL mode with a busy timeout; every transaction
//! takes the write lock up front (IMMEDIATE), so two writers queue instead of failing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, TransactionBehavior};

use super::{guard, Backend, Dialect, Tx, Val};
use costlab_core::error::usage;

pub struct SqliteBackend {
    conn: Connection,
    path: PathBuf,
    /// Opened read-only (history, export, report, ...): transactions are deferred, nothing is
    /// written, a read-only file or mount reads as it is.
    read_only: bool,
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Val::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

/// `$1` becomes `?1`, SQLite's numbered parameter.
fn dialect_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

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

/// What is at `path` must be nothing (when creating), or a SQLite file. Checked before SQLite
/// opens it, so a wrong `--db` is named as such and left as it was.
pub fn check_path(path: &Path, create: bool) -> Result<()> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if create {
                Ok(())
            } else {
                Err(usage(format!(
                    "no history at {shown}: run a lab or `costlab run` first, or pass --db PATH"
                )))
            }
        }
        Err(e) => Err(usage(format!(
            "cannot read the history at {shown}: {e}; pass another --db"
        ))),
        Ok(m) if m.is_dir() => Err(usage(format!(
            "--db {shown} is a directory: give a file path inside it (e.g. {}/history.db)",
            path.display()
        ))),
        Ok(m) if !m.is_file() => Err(usage(format!(
            "--db {shown} is not a regular file: give a file path for the history"
        ))),
        Ok(m) if m.len() == 0 => Ok(()),
        Ok(_) => {
            let mut head = [0u8; 16];
            let n = std::io::Read::read(
                &mut std::fs::File::open(path)
                    .map_err(|e| usage(format!("cannot read the history at {shown}: {e}")))?,
                &mut head,
            )
            .unwrap_or(0);
            if n == 16 && &head == b"SQLite format 3\0" {
                Ok(())
            } else {
                Err(usage(format!(
                    "--db {shown} is not a costlab history (not a SQLite file): pass another --db"
                )))
            }
        }
    }
}

impl SqliteBackend {
    /// Open the history at `path` for storing runs (created if missing). What is there was
    /// checked first (`guard::inspect`): nothing, an empty file, or a costlab history.
    pub fn open(path: &Path) -> Result<SqliteBackend> {
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
        let mode = wal_mode(&conn).map_err(|e| {
            let e = guard::explain(path, e.into());
            if costlab_core::error::exit_code(&e) == 2 {
                return e;
            }
            usage(format!(
                "cannot use the history at {}: {}; pass another --db",
                path.display(),
                costlab_core::error::one_line(&e)
            ))
        })?;
        if !mode.eq_ignore_ascii_case("wal") {
            anyhow::bail!("{} cannot use WAL mode (got {mode})", path.display());
        }
        conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")
            .with_context(|| format!("setting up {}", path.display()))?;
        Ok(SqliteBackend {
            conn,
            path: path.to_path_buf(),
            read_only: false,
        })
    }

    /// Open the history at `path` for reading only: nothing in the file changes (no WAL
    /// switch, no migration), and a read-only file or mount reads as it is.
    ///
    /// Where costlab may write the file, it is opened read-write all the same (without a WAL
    /// switch or a migration), so that SQLite removes its WAL and shared-memory files on close
    /// as it does after a write; only `Deferred` transactions run on it, so nothing is written.
    pub fn open_read(path: &Path, found: &guard::Found) -> Result<SqliteBackend> {
        let conn = if found.read_only.is_none() && !found.full {
            let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
            Connection::open_with_flags(path, flags).map_err(|e| guard::explain(path, e.into()))?
        } else {
            guard::open_read_only(path, found.full)?
        };
        conn.busy_timeout(Duration::from_secs(30))?;
        Ok(SqliteBackend {
            conn,
            path: path.to_path_buf(),
            read_only: true,
        })
    }
}

struct SqliteTx<'a>(&'a rusqlite::Transaction<'a>);

fn val_of(v: ValueRef<'_>) -> Val {
    match v {
        ValueRef::Null => Val::Null,
        ValueRef::Integer(i) => Val::Int(i),
        ValueRef::Real(f) => Val::Text(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

impl Tx for SqliteTx<'_> {
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64> {
        let n = self
            .0
            .execute(&dialect_sql(sql), rusqlite::params_from_iter(params.iter()))?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>> {
        let mut st = self.0.prepare(&dialect_sql(sql))?;
        let cols = st.column_count();
        let rows = st.query_map(rusqlite::params_from_iter(params.iter()), |r| {
            (0..cols)
                .map(|i| r.get_ref(i).map(val_of))
                .collect::<rusqlite::Result<Vec<Val>>>()
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.0.execute_batch(sql)?;
        Ok(())
    }
}

impl Backend for SqliteBackend {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let behavior = if self.read_only {
            TransactionBehavior::Deferred
        } else {
            TransactionBehavior::Immediate
        };
        let mut run = || -> Result<()> {
            let tx = rusqlite::Transaction::new_unchecked(&self.conn, behavior)?;
            f(&mut SqliteTx(&tx))?;
            tx.commit()?;
            Ok(())
        };
        run().map_err(|e| guard::explain(&self.path, e))
    }

    fn missing_tables(&self) -> Result<Vec<&'static str>> {
        guard::missing_tables(&self.conn).map_err(|e| guard::explain(&self.path, e.into()))
    }

    fn probe(&self) -> Result<()> {
        guard::probe(&self.conn, &self.path)
    }

    fn integrity(&mut self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}
