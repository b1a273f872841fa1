//! What is at a SQLite history path before costlab works with it, and SQLite's failures in
//! words a user can act on.
//!
//! costlab writes only into a history it created: a SQLite file with tables that are not
//! costlab's is refused before anything opens it for writing (switching a file to WAL rewrites
//! its header), so it is left byte for byte as it was. A file costlab cannot write (a read-only
//! mount, a file of another user) is refused to commands that store and read as it is by those
//! that only read. A damaged file (a malformed page, a missing table) and a full disk are named
//! with the history's path and what to do, before the work wherever they can be seen before.

use std::path::Path;

use anyhow::Result;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use costlab_core::error::usage;

/// The tables of costlab's schema, as the migrations make them.
pub const TABLES: [&str; 6] = [
    "schema_version",
    "runs",
    "results",
    "models",
    "notes",
    "labs",
];

/// The tables a history at the latest schema cannot be read without.
pub const NEEDED: [&str; 5] = ["runs", "results", "models", "notes", "labs"];

/// Less free space than this beside the history, and a run may not fit: refused before the
/// work (a run with its cost sheet is some 100 KiB; SQLite's WAL needs room of its own).
pub const MIN_FREE: u64 = 1 << 20;

/// What is at a history path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The schema version of a costlab history; None for nothing yet (no file, an empty file,
    /// a SQLite file with no tables).
    pub version: Option<i64>,
    /// Why costlab cannot write it (a read-only file system, no permission); None when it can.
    pub read_only: Option<String>,
    /// The disk under it is full: read it without SQLite's shared-memory file, which cannot
    /// be made there.
    pub full: bool,
}

/// The one line for a damaged history: its path, what is wrong, how to get its runs back.
pub fn damaged(path: &Path, what: &str) -> anyhow::Error {
    let p = path.display();
    usage(format!(
        "the history at {p} is damaged ({what}): recover its runs with \
         `sqlite3 {p} .recover | sqlite3 {p}.recovered` and pass --db {p}.recovered, \
         or pass another --db"
    ))
}

/// The one line for a history costlab may not write.
pub fn read_only(path: &Path, why: &str) -> anyhow::Error {
    usage(format!(
        "the history at {} cannot be written ({why}): pass --db a file costlab can write \
         (history, export, report, compare, trend and machines can still read this one)",
        path.display()
    ))
}

/// The one line for a full disk under the history.
pub fn full(path: &Path, free: Option<u64>) -> anyhow::Error {
    let left = free
        .map(|b| format!(" ({} KiB free)", b / 1024))
        .unwrap_or_default();
    usage(format!(
        "the disk holding the history at {} is full{left}: free some space there, or pass \
         another --db",
        path.display()
    ))
}

/// Why costlab cannot write the history at `path` (or create it), None when it can. The file
/// and its directory both count: SQLite keeps its WAL and shared-memory files beside it.
pub fn why_read_only(path: &Path) -> Option<String> {
    use rustix::fs::{access, Access};
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => std::path::PathBuf::from("."),
    };
    // The nearest directory that exists is where a missing history would be created.
    let dir = dir
        .ancestors()
        .find(|d| d.exists())
        .map(Path::to_path_buf)?;
    let file = path.exists().then_some(path);
    for p in file.into_iter().chain(std::iter::once(dir.as_path())) {
        match access(p, Access::WRITE_OK) {
            Ok(()) => {}
            Err(rustix::io::Errno::ROFS) => return Some("a read-only file system".into()),
            Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
                return Some(format!("no permission to write {}", p.display()))
            }
            Err(e) => return Some(format!("{}: {e}", p.display())),
        }
    }
    None
}

/// Free bytes on the file system that holds `path` (or would): what this user may use.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = dir.ancestors().find(|d| d.exists())?;
    let st = rustix::fs::statvfs(dir).ok()?;
    // Root may use the blocks kept back for it; others only the available ones.
    let blocks = if rustix::process::geteuid().is_root() {
        st.f_bfree
    } else {
        st.f_bavail
    };
    Some(blocks.saturating_mul(st.f_frsize))
}

/// A read-only connection that changes nothing in the file. A WAL history on a read-only mount
/// whose WAL files are gone cannot be opened so; it is then opened immutable (nothing can write
/// a read-only mount meanwhile).
pub fn open_read_only(path: &Path, immutable: bool) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let as_immutable = || {
        let uri = format!("file:{}?immutable=1", uri_path(path));
        Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
            .map_err(|e| explain(path, e.into()))
    };
    if immutable {
        return as_immutable();
    }
    let plain = Connection::open_with_flags(path, flags).and_then(|c| {
        c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |_| Ok(()))
            .map(|_| c)
    });
    match plain {
        Ok(c) => Ok(c),
        Err(e)
            if matches!(
                code(&e),
                Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::SystemIoFailure)
            ) =>
        {
            as_immutable()
        }
        Err(e) => Err(explain(path, e.into())),
    }
}

/// SQLite's write-ahead log beside `path`.
pub fn wal_of(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// A path as a `file:` URI's path: the characters a URI gives a meaning to are escaped.
fn uri_path(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for b in abs.as_os_str().as_encoded_bytes() {
        match b {
            b'%' | b'?' | b'#' => out.push_str(&format!("%{b:02X}")),
            _ if b.is_ascii() && !b.is_ascii_control() => out.push(*b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn code(e: &rusqlite::Error) -> Option<ErrorCode> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    }
}

/// What is at `path`, checked without writing a byte: a SQLite file with other tables than
/// costlab's, or a newer schema than this costlab knows, is refused; `write` refuses a file
/// costlab cannot write. The caller has checked that the path is a regular SQLite file (or
/// nothing, or empty).
pub fn inspect(path: &Path, write: bool, latest: i64) -> Result<Found> {
    let read_only = why_read_only(path);
    let free = free_bytes(path);
    let full_now = free.is_some_and(|b| b < MIN_FREE);
    if write {
        if let Some(why) = &read_only {
            return Err(self::read_only(path, why));
        }
        // Before SQLite creates its WAL and shared-memory files, which a full disk would leave
        // behind half made.
        if full_now {
            return Err(full(path, free));
        }
    }
    let present = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    if !present {
        return Ok(Found {
            version: None,
            read_only,
            full: full_now,
        });
    }
    // Immutable where no WAL file is there (nothing is left to read from one): a read-only
    // connection would leave a WAL and a shared-memory file beside another program's file.
    let conn = open_read_only(path, full_now || !wal_of(path).exists())?;
    let version = classify(&conn, path).map_err(|e| explain(path, e))?;
    if let Some(v) = version.filter(|v| *v > latest) {
        return Err(usage(format!(
            "the history at {} has schema version {v}, newer than this costlab knows \
             ({latest}): upgrade costlab, or pass another --db",
            path.display()
        )));
    }
    Ok(Found {
        version,
        read_only,
        full: full_now,
    })
}

fn names(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare(sql)?;
    let rows = st.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// The schema version of a costlab history, None for a file with no tables; a file with
/// tables that are not costlab's is refused (exit 2).
fn classify(conn: &Connection, path: &Path) -> Result<Option<i64>> {
    let tables = names(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )?;
    if tables.is_empty() {
        return Ok(None);
    }
    let columns = |t: &str| names(conn, &format!("SELECT name FROM pragma_table_info('{t}')"));
    let has = |t: &str| tables.iter().any(|x| x == t);
    let versioned = has("schema_version") && columns("schema_version")? == ["version"];
    let runs = has("runs") && {
        let c = columns("runs")?;
        ["id", "started", "costlab", "command", "machine"]
            .iter()
            .all(|k| c.iter().any(|x| x == k))
    };
    let strangers: Vec<&str> = tables
        .iter()
        .map(String::as_str)
        .filter(|t| !TABLES.contains(t))
        .collect();
    if !(versioned || runs) || !strangers.is_empty() {
        let shown: Vec<&str> = if strangers.is_empty() {
            tables.iter().map(String::as_str).take(5).collect()
        } else {
            strangers.into_iter().take(5).collect()
        };
        return Err(usage(format!(
            "--db {} is a SQLite file of another program (tables {}), not a costlab history: \
             costlab writes only into a history it created; pass another --db (a new file)",
            path.display(),
            shown.join(", ")
        )));
    }
    if versioned {
        let v: Option<i64> =
            conn.query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))?;
        if let Some(v) = v {
            return Ok(Some(v));
        }
    }
    if !runs {
        // Migrated down to nothing: costlab's, at version 0.
        return Ok(Some(0));
    }
    // Before versioning: recognised by its tables, as the migrations do.
    let verdict = !names(
        conn,
        "SELECT name FROM pragma_table_info('results') WHERE name = 'verdict'",
    )?
    .is_empty();
    Ok(Some(if verdict { 2 } else { 1 }))
}

/// The tables of the latest schema that a history lacks (a history whose table was dropped
/// is damaged, whatever its version table says).
pub fn missing_tables(conn: &Connection) -> rusqlite::Result<Vec<&'static str>> {
    let tables = names(conn, "SELECT name FROM sqlite_master WHERE type = 'table'")?;
    Ok(NEEDED
        .iter()
        .copied()
        .filter(|t| !tables.iter().any(|x| x == t))
        .collect())
}

/// A cheap check of the pages before the work: `PRAGMA quick_check` reads every page once
/// but skips the index-against-table comparison of `integrity_check` (0.3 s on a 100 MB
/// history of 2000 runs here, against 0.8 s); then the free space beside the file.
pub fn probe(conn: &Connection, path: &Path) -> Result<()> {
    let first: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| explain(path, e.into()))?;
    if first != "ok" {
        // SQLite's first finding, on one line ("*** in database main ***" is no news).
        let what: Vec<&str> = first
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("***"))
            .collect();
        return Err(damaged(path, &what.join("; ")));
    }
    match free_bytes(path) {
        Some(b) if b < MIN_FREE => Err(full(path, Some(b))),
        _ => Ok(()),
    }
}

/// SQLite's failure in words: a damaged file, a read-only one, a full disk and a missing
/// table get the history's path and what to do; anything else is passed on as it was.
pub fn explain(path: &Path, e: anyhow::Error) -> anyhow::Error {
    let Some(sql) = e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>()) else {
        return e;
    };
    let msg = sql.to_string();
    match code(sql) {
        Some(ErrorCode::DatabaseCorrupt) => damaged(path, "database disk image is malformed"),
        Some(ErrorCode::NotADatabase) => damaged(path, "not a database"),
        Some(ErrorCode::ReadOnly) => {
            read_only(path, "SQLite: attempt to write a read-only database")
        }
        Some(ErrorCode::DiskFull) => full(path, free_bytes(path)),
        // SQLite's shared-memory file cannot grow on a full disk: an I/O error, which is that.
        Some(ErrorCode::SystemIoFailure) if free_bytes(path).is_some_and(|b| b < MIN_FREE) => {
            full(path, free_bytes(path))
        }
        _ => match msg.strip_prefix("no such table: ") {
            Some(t) => damaged(path, &format!("it has no table {t}")),
            None => e,
        },
    }
}
