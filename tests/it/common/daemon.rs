//! Real servers for a test (Prometheus, node_exporter): started on 127.0.0.1 on a free port,
//! killed and reaped when the test lets go of them; a bounded wait for something to hold; a
//! plain HTTP GET against them; the Debian tools a test needs, or a skip naming the package.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A spawned server, killed (and reaped) on drop, whatever the test did.
pub struct Daemon {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Start `cmd`, its output into `log`.
    pub fn start(name: &'static str, cmd: &mut Command, log: PathBuf) -> Daemon {
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        Daemon { name, child, log }
    }

    /// Its output so far, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics with its log when it has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("{} exited ({st}):\n{}", self.name, self.log());
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Try `f` every 200 ms until it gives a value or `limit` has passed.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `GET path` from 127.0.0.1:`port`: the body of a 200 response, else `None` (not up yet,
/// refused, another status).
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.")
        .then_some(())
        .filter(|_| head.split_whitespace().nth(1) == Some("200"))?;
    Some(body.to_string())
}

/// `s` percent-encoded for a URL's query string.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The program `name` on PATH (or /usr/sbin, /sbin), if installed.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file());
    found
}
