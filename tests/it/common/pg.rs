//! A throwaway PostgreSQL cluster from Debian's `postgresql` package, for the tests: initdb in
//! a temporary directory (as `nobody` when the tests run as root: the server refuses root),
//! listening only on a unix socket in that directory, password authentication (scram) for a
//! superuser `costlab`. One cluster per test binary; a watchdog stops it and removes the
//! directory when the test process ends, however it ends.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

pub const PASSWORD: &str = "costlab-test-pw";

pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
}

fn pg_bin(name: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL's {name} not found under /usr/lib/postgresql: run scripts/install-deps.sh \
             (installs Debian's postgresql)"
        )
    })
}

/// `cmd` as the unprivileged user that owns the cluster.
fn as_owner(bin: &Path) -> Command {
    if super::is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

fn start() -> Cluster {
    let dir = tempfile::Builder::new()
        .prefix("costlab-pg-")
        .tempdir()
        .unwrap()
        .keep();
    let data = dir.join("data");
    let pwfile = dir.join("pw");
    std::fs::write(&pwfile, PASSWORD).unwrap();
    if super::is_root() {
        let st = Command::new("chown")
            .args(["-R", "nobody"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let out = as_owner(&pg_bin("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", "costlab", "--auth=scram-sha-256", "--no-sync"])
        .arg(format!("--pwfile={}", pwfile.display()))
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A port number only names the socket file; it is in our own directory.
    let port = 20000 + (std::process::id() % 20000) as u16;
    let cluster = Cluster { dir, port };
    cluster.start_server();
    let Cluster { dir, port } = cluster;
    // The watchdog: when this test process is gone, stop the server and remove the directory.
    let stop = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {runas} {pg_ctl} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        runas = if super::is_root() { "runuser -u nobody --" } else { "" },
        pg_ctl = pg_bin("pg_ctl").display(),
        data = data.display(),
        dir = dir.display()
    );
    // Not waited for: it outlives the tests on purpose (it waits for this process to end).
    #[allow(clippy::zombie_processes)]
    Command::new("setsid")
        .args(["sh", "-c", &stop])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Cluster { dir, port }
}

/// A cluster of the test's own, apart from the shared one: for a test that stops the server.
pub fn own_cluster() -> Cluster {
    start()
}

pub fn cluster() -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(start)
}

impl Cluster {
    fn pg_ctl(&self, args: &[&str]) -> std::process::Output {
        as_owner(&pg_bin("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(args)
            .output()
            .unwrap()
    }

    /// Start the server (again, after `stop_now`).
    pub fn start_server(&self) {
        let opts = format!(
            "-k {} -c listen_addresses='' -p {} -c fsync=off -c max_connections=60",
            self.dir.display(),
            self.port
        );
        let log = self.dir.join("log").display().to_string();
        let out = self.pg_ctl(&["-o", &opts, "-w", "-t", "60", "-l", &log, "start"]);
        assert!(
            out.status.success(),
            "pg_ctl start: {} {}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stop the server as a crash would: connections cut, no shutdown checkpoint.
    pub fn stop_now(&self) {
        let out = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A URL for `db` on this cluster, password in it.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://costlab:{PASSWORD}@localhost/{db}?host={}&port={}",
            self.dir.display(),
            self.port
        )
    }

    /// A URL without the password (for PGPASSWORD / .pgpass tests).
    pub fn url_without_password(&self, db: &str) -> String {
        format!(
            "postgres://costlab@localhost/{db}?host={}&port={}",
            self.dir.display(),
            self.port
        )
    }

    /// A new, empty database; its URL.
    pub fn fresh(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let mut c = postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        self.url(&name)
    }
}
