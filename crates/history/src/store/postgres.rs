//! The shared history: a PostgreSQL database, through the `postgres` crate (the synchronous
//! face of tokio-postgres: costlab is a synchronous program and writes a run in a handful of
//! short transactions, so an async runtime would add nothing but weight).
//!
//! Connection settings follow libpq where the crate allows: a `postgres://` URL or a
//! `key=value` string; what they leave out comes from PGHOST, PGPORT, PGUSER, PGPASSWORD,
//! PGDATABASE, PGSSLMODE, PGCONNECT_TIMEOUT, and the password file (PGPASSFILE or ~/.pgpass,
//! ignored as libpq ignores it when group or others can read it). `sslmode` takes libpq's
//! words: disable, allow and prefer (TLS if the server offers it, certificate not checked),
//! require (TLS, certificate not checked, as libpq), verify-ca (chain checked against
//! `sslrootcert` or the system roots) and verify-full (chain and host name checked). Not
//! supported: client certificates (sslcert/sslkey), service files, GSS.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use postgres::config::{Host, SslMode};
use postgres::types::{ToSql, Type};
use postgres::{Client, Config};

use super::{redact, Backend, Dialect, Tx, Val};
use costlab_core::error::usage;

pub struct PgBackend {
    client: Client,
    shown: String,
}

/// How to treat the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    None,
    Chain,
    Full,
}

/// Settings costlab handles itself (the crate rejects them): taken out of the string.
#[derive(Debug, Default, PartialEq)]
struct Extra {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
}

const OURS: [&str; 2] = ["sslmode", "sslrootcert"];

fn split_extra(target: &str) -> (String, Extra) {
    let mut extra = Extra::default();
    let mut take = |k: &str, v: &str| match k {
        "sslmode" => extra.sslmode = Some(v.to_string()),
        "sslrootcert" => extra.sslrootcert = Some(v.to_string()),
        _ => {}
    };
    if target.contains("://") {
        let Some((base, query)) = target.split_once('?') else {
            return (target.to_string(), extra);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if OURS.contains(&k) {
                take(k, &percent_decode(v));
            } else {
                kept.push(pair);
            }
        }
        let s = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        (s, extra)
    } else {
        let mut kept = Vec::new();
        for word in target.split_whitespace() {
            match word.split_once('=') {
                Some((k, v)) if OURS.contains(&k.trim()) => take(k.trim(), v.trim_matches('\'')),
                _ => kept.push(word),
            }
        }
        (kept.join(" "), extra)
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The login name of this process's user (libpq's default user).
fn os_user() -> String {
    env("USER").unwrap_or_else(|| {
        let uid = rustix::process::getuid().as_raw();
        // SAFETY: getpwuid returns a pointer into static storage or null; read at once.
        unsafe {
            let pw = libc::getpwuid(uid);
            if pw.is_null() {
                return "postgres".to_string();
            }
            std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned()
        }
    })
}

/// One line of a password file: host:port:db:user:password, `*` matching anything, `\:` and
/// `\\` escaped.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().unwrap().push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// The password file's password for this connection, as libpq finds it (first match wins).
pub fn pgpass_lookup(text: &str, host: &str, port: u16, db: &str, user: &str) -> Option<String> {
    let port = port.to_string();
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f = pgpass_fields(line);
        if f.len() != 5 {
            continue;
        }
        let m = |pat: &str, v: &str| pat == "*" || pat == v;
        if m(&f[0], host) && m(&f[1], &port) && m(&f[2], db) && m(&f[3], user) {
            return Some(f[4].clone());
        }
    }
    None
}

fn pgpass_path() -> Option<PathBuf> {
    env("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".pgpass")))
}

/// The password file's text, unless group or others may read it (libpq ignores it then).
fn read_pgpass() -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = pgpass_path()?;
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.permissions().mode() & 0o077 != 0 {
        eprintln!(
            "costlab: ignoring {}: group or others can read it (chmod 600 it, as libpq asks)",
            path.display()
        );
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The configuration for `target` with libpq's defaults and environment filled in, and how to
/// check the server's certificate.
fn config_for(target: &str) -> Result<(Config, Verify, Option<String>)> {
    let shown = redact(target);
    let (rest, extra) = split_extra(target);
    let mut cfg: Config = rest.parse().map_err(|e: postgres::Error| {
        usage(format!(
            "bad PostgreSQL URL {shown}: {}; write postgres://USER@HOST[:PORT]/DB \
             (password from PGPASSWORD or ~/.pgpass)",
            redact(&e.to_string())
        ))
    })?;
    if cfg.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(h) if h.starts_with('/') => {
                cfg.host_path(h);
            }
            Some(h) => {
                cfg.host(&h);
            }
            None if std::path::Path::new("/var/run/postgresql").is_dir() => {
                cfg.host_path("/var/run/postgresql");
            }
            None => {
                cfg.host("localhost");
            }
        }
    }
    if cfg.get_ports().is_empty() {
        let port = match env("PGPORT") {
            Some(p) => p.parse::<u16>().map_err(|_| {
                usage(format!(
                    "PGPORT={p} is not a port number: set it to one (e.g. 5432) or unset it"
                ))
            })?,
            None => 5432,
        };
        cfg.port(port);
    }
    if cfg.get_user().is_none() {
        cfg.user(&env("PGUSER").unwrap_or_else(os_user));
    }
    if cfg.get_dbname().is_none() {
        let db = env("PGDATABASE").unwrap_or_else(|| cfg.get_user().unwrap_or("").to_string());
        cfg.dbname(&db);
    }
    if cfg.get_password().is_none() {
        if let Some(p) = env("PGPASSWORD") {
            cfg.password(p);
        } else if let Some(text) = read_pgpass() {
            let host = match &cfg.get_hosts()[0] {
                Host::Tcp(h) => h.clone(),
                // libpq matches a socket connection against "localhost".
                Host::Unix(_) => "localhost".to_string(),
            };
            let port = cfg.get_ports()[0];
            let (db, user) = (
                cfg.get_dbname().unwrap_or("").to_string(),
                cfg.get_user().unwrap_or("").to_string(),
            );
            if let Some(p) = pgpass_lookup(&text, &host, port, &db, &user) {
                cfg.password(p);
            }
        }
    }
    if cfg.get_connect_timeout().is_none() {
        let secs = env("PGCONNECT_TIMEOUT")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(10)
            .max(2);
        cfg.connect_timeout(Duration::from_secs(secs));
    }
    cfg.application_name("costlab");
    let mode = extra.sslmode.or_else(|| env("PGSSLMODE"));
    let verify = match mode.as_deref().unwrap_or("prefer") {
        "disable" => {
            cfg.ssl_mode(SslMode::Disable);
            Verify::None
        }
        "allow" | "prefer" => {
            cfg.ssl_mode(SslMode::Prefer);
            Verify::None
        }
        "require" => {
            cfg.ssl_mode(SslMode::Require);
            Verify::None
        }
        "verify-ca" => {
            cfg.ssl_mode(SslMode::Require);
            Verify::Chain
        }
        "verify-full" => {
            cfg.ssl_mode(SslMode::Require);
            Verify::Full
        }
        other => {
            return Err(usage(format!(
                "sslmode '{other}' is not one of libpq's: use disable, allow, prefer, require, \
                 verify-ca or verify-full"
            )))
        }
    };
    let root = extra.sslrootcert.or_else(|| env("PGSSLROOTCERT"));
    Ok((cfg, verify, root))
}

fn tls(verify: Verify, root: Option<&str>) -> Result<postgres_native_tls::MakeTlsConnector> {
    let mut b = native_tls::TlsConnector::builder();
    match verify {
        Verify::None => {
            b.danger_accept_invalid_certs(true);
            b.danger_accept_invalid_hostnames(true);
        }
        Verify::Chain => {
            b.danger_accept_invalid_hostnames(true);
        }
        Verify::Full => {}
    }
    if let Some(path) = root.filter(|_| verify != Verify::None) {
        let pem = std::fs::read(path).map_err(|e| {
            usage(format!(
                "cannot read sslrootcert {path}: {e}; give the server's CA certificate (PEM)"
            ))
        })?;
        let cert = native_tls::Certificate::from_pem(&pem)
            .map_err(|e| usage(format!("sslrootcert {path} is not a PEM certificate: {e}")))?;
        b.add_root_certificate(cert);
    }
    let c = b
        .build()
        .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?;
    Ok(postgres_native_tls::MakeTlsConnector::new(c))
}

/// A connection failure as one line with its cause and a fix.
fn connect_error(shown: &str, user: &str, e: &postgres::Error) -> anyhow::Error {
    use postgres::error::SqlState;
    let cause = redact(&costlab_core::error::one_line(&anyhow::Error::new(
        std::io::Error::other(e.to_string()),
    )));
    let mut full = cause.clone();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        full.push_str(": ");
        full.push_str(&redact(&s.to_string()));
        src = s.source();
    }
    let full = full.replace('\n', " ");
    let fix = match e.code() {
        Some(c) if *c == SqlState::INVALID_PASSWORD => {
            format!("wrong password for user '{user}': fix it in the URL, PGPASSWORD or ~/.pgpass")
        }
        Some(c) if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            format!("the server refuses user '{user}' (pg_hba.conf or no such role): ask its admin")
        }
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => {
            "no such database: create it (createdb NAME) or name another in the URL".to_string()
        }
        _ if full.contains("password missing") => format!(
            "the server wants a password for user '{user}': set PGPASSWORD or add it to ~/.pgpass"
        ),
        _ => "check that the server is up and the host and port are right".to_string(),
    };
    usage(format!(
        "cannot connect to PostgreSQL at {shown}: {full}; {fix}"
    ))
}

impl PgBackend {
    pub fn connect(target: &str) -> Result<PgBackend> {
        let shown = redact(target);
        let (cfg, verify, root) = config_for(target)?;
        let user = cfg.get_user().unwrap_or("").to_string();
        let client = cfg
            .connect(tls(verify, root.as_deref())?)
            .map_err(|e| connect_error(&shown, &user, &e))?;
        Ok(PgBackend { client, shown })
    }
}

/// A parameter as the crate binds it.
fn bind(v: &Val) -> &(dyn ToSql + Sync) {
    const NULL: Option<&str> = None;
    match v {
        Val::Null => &NULL,
        Val::Int(i) => i,
        Val::Text(s) => s,
    }
}

fn val_of(row: &postgres::Row, i: usize) -> Result<Val> {
    let t = row.columns()[i].type_();
    Ok(if *t == Type::INT8 {
        row.get::<_, Option<i64>>(i)
            .map(Val::Int)
            .unwrap_or(Val::Null)
    } else if *t == Type::INT4 {
        row.get::<_, Option<i32>>(i)
            .map(|v| Val::Int(v.into()))
            .unwrap_or(Val::Null)
    } else if *t == Type::BOOL {
        row.get::<_, Option<bool>>(i)
            .map(|v| Val::Int(v.into()))
            .unwrap_or(Val::Null)
    } else if *t == Type::VOID {
        Val::Null
    } else {
        row.try_get::<_, Option<String>>(i)?
            .map(Val::Text)
            .unwrap_or(Val::Null)
    })
}

struct PgTx<'a, 'b>(&'a mut postgres::Transaction<'b>);

impl Tx for PgTx<'_, '_> {
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64> {
        let p: Vec<&(dyn ToSql + Sync)> = params.iter().map(bind).collect();
        Ok(self.0.execute(sql, &p)?)
    }

    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>> {
        let p: Vec<&(dyn ToSql + Sync)> = params.iter().map(bind).collect();
        let rows = self.0.query(sql, &p)?;
        rows.iter()
            .map(|r| (0..r.len()).map(|i| val_of(r, i)).collect())
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.0.batch_execute(sql)?;
        Ok(())
    }
}

impl Backend for PgBackend {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Tx) -> Result<()>) -> Result<()> {
        let mut tx = self.client.transaction()?;
        f(&mut PgTx(&mut tx))?;
        tx.commit()?;
        Ok(())
    }

    fn integrity(&mut self) -> Result<String> {
        self.client.simple_query("SELECT 1")?;
        Ok("ok".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_matches_as_libpq_does() {
        let text = "# comment\n\
                    db.example:5432:costlab:ann:first\n\
                    *:*:*:ann:any\\:thing\n\
                    localhost:5433:*:bob:bobs\n";
        assert_eq!(
            pgpass_lookup(text, "db.example", 5432, "costlab", "ann").as_deref(),
            Some("first")
        );
        assert_eq!(
            pgpass_lookup(text, "other", 1, "x", "ann").as_deref(),
            Some("any:thing")
        );
        assert_eq!(
            pgpass_lookup(text, "localhost", 5433, "x", "bob").as_deref(),
            Some("bobs")
        );
        assert_eq!(pgpass_lookup(text, "localhost", 5432, "x", "bob"), None);
    }

    #[test]
    fn sslmode_and_rootcert_are_taken_out_of_urls_and_key_values() {
        let (s, e) = split_extra("postgres://a@h/d?sslmode=verify-full&sslrootcert=%2Fca.pem&x=1");
        assert_eq!(s, "postgres://a@h/d?x=1");
        assert_eq!(e.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(e.sslrootcert.as_deref(), Some("/ca.pem"));
        let (s, e) = split_extra("host=h sslmode=require dbname=d");
        assert_eq!(s, "host=h dbname=d");
        assert_eq!(e.sslmode.as_deref(), Some("require"));
        let (s, e) = split_extra("postgres://a@h/d");
        assert_eq!((s.as_str(), e), ("postgres://a@h/d", Extra::default()));
    }

    #[test]
    fn bad_urls_and_sslmodes_are_usage_errors_without_the_password() {
        let e = config_for("postgres://ann:secret@h:notaport/d")
            .err()
            .unwrap();
        let line = costlab_core::error::one_line(&e);
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(!line.contains("secret"), "{line}");
        assert!(line.contains("bad PostgreSQL URL"), "{line}");
        let e = config_for("postgres://ann:secret@h/d?sslmode=sometimes")
            .err()
            .unwrap();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(costlab_core::error::one_line(&e).contains("verify-full"));
    }
}
