//! Where the sweep runs things (which CPU serves, which load) and the server process it starts
//! for each engine: spawning `costlab echo serve`, reading its address, stopping it, and
//! reading its counts back.

use super::*;

/// Which CPU the server gets and which the loader gets.
pub(super) struct Layout {
    pub(super) server: usize,
    pub(super) loader: Vec<usize>,
    pub(super) note: Option<String>,
}

pub(super) fn layout() -> Layout {
    let allowed = cpus::allowed_cpus();
    let server = *allowed.last().unwrap_or(&0);
    if allowed.len() >= 2 {
        Layout {
            server,
            loader: allowed[..allowed.len() - 1].to_vec(),
            note: None,
        }
    } else {
        Layout {
            server,
            loader: allowed.clone(),
            note: Some(
                "only one CPU: server and loader share it, so throughput is the machine's, not the server's"
                    .into(),
            ),
        }
    }
}

/// A server child process; killed if dropped while running.
pub(super) struct ServerProcess {
    pub(super) child: Child,
    pub(super) lines: mpsc::Receiver<String>,
    pub(super) addr: SocketAddr,
}

impl ServerProcess {
    pub(super) fn spawn(
        v: &Variant,
        addr: &str,
        cpu: usize,
        size: usize,
        sqpoll: bool,
        limit: Duration,
    ) -> Result<Self> {
        let engine = v.engine;
        let exe = std::env::current_exe().context("finding costlab's own executable")?;
        let mut cmd = Command::new(exe);
        cmd.args(["echo", "serve", "--case", engine.name(), "--addr", addr])
            .args(["--cpus", &cpu.to_string(), "--sizes", &size.to_string()])
            .args(["--duration", &format!("{}ms", limit.as_millis())])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if sqpoll && engine == Engine::Uring {
            cmd.arg("--sqpoll");
        }
        if engine == Engine::Uring {
            cmd.args(["--features", &v.features.spec()]);
        }
        let mut child = cmd.spawn().context("starting the echo server process")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = ServerProcess {
            child,
            lines: rx,
            addr: "127.0.0.1:0".parse().expect("static address"),
        };
        let first = p.lines.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            let status = p.child.try_wait().ok().flatten();
            anyhow::anyhow!(
                "the {} server did not report its address{}",
                engine.name(),
                status.map_or(String::new(), |s| format!(" ({s})"))
            )
        })?;
        p.addr = first
            .trim()
            .parse()
            .with_context(|| format!("the server's first line '{first}' is not an address"))?;
        Ok(p)
    }

    /// SIGTERM, wait (bounded), read its counts.
    pub(super) fn stop(mut self) -> Result<ServerStats> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                anyhow::bail!("the echo server did not stop within 5 s of SIGTERM; killed it");
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let mut last = None;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            last = Some(line);
        }
        if !status.success() {
            anyhow::bail!("the echo server failed ({status})");
        }
        let line = last.context("the echo server printed no counts")?;
        serde_json::from_str(&line).with_context(|| format!("reading the server's counts '{line}'"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
