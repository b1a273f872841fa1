//! Load from other hosts: `costlab echo --loaders HOST,HOST --addr IP` runs the load
//! generator on each host over ssh while the servers run here, so that a server is not
//! measured against a loader that shares its machine (on 2 CPUs the loader saturates long
//! before an io_uring server does).
//!
//! The user's own ssh runs every connection as it is configured (config, keys, agent,
//! known_hosts): costlab only adds `-o BatchMode=yes` (never prompt: a prompt would hang a
//! measurement) and `-T`. Host keys are checked as ssh checks them; nothing here turns that off.
//!
//! Each run: one `ssh HOST costlab echo load --for-lead ...` per host, each connects, prints
//! `ready`, waits for the lead's `go` (so the loads start together, not one ssh handshake
//! apart), runs, and prints one JSON line: its counts, its CPU and its latency histogram
//! serialized (HdrHistogram V2, deflated, hex). The lead merges them: request counts add up,
//! percentiles are read from the merged histogram (never averaged), and each host's CPU is
//! kept as its own figure, so a user sees whether the loaders or the server saturate.
//!
//! wire.rs holds the report's format and the merge, args.rs the options; this file runs the
//! hosts over ssh.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::load::{LoadReport, LoadSpec};
use costlab_core::error::usage;
use costlab_core::measure::stats::median;
use costlab_history::report::{model::Case, Outcome};

mod args;
mod wire;

use args::shell_word;
pub use args::{from_args, parse_bind, parse_hosts, share};
pub use wire::{
    decode_histogram, encode_histogram, merge, serve_lead, LoaderReport, WireErrors, FORMAT,
    VERSION,
};

/// How long a host may take to connect, start costlab and say it is ready.
/// How long a host may take to connect, start costlab and say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long past the run's own length a host may take to send its report.
const REPORT_SLACK: Duration = Duration::from_secs(30);

/// The loader hosts and how to reach them.
#[derive(Debug, Clone)]
pub struct Loaders {
    pub hosts: Vec<String>,
    /// The ssh command, as words.
    ssh: Vec<String>,
    /// costlab on the loader hosts.
    costlab: String,
    /// Loader threads, when the user said (otherwise each host uses one per CPU).
    threads: Option<usize>,
    /// Where to keep each loader's raw report.
    keep: Option<PathBuf>,
    seen: Arc<Mutex<Seen>>,
}

/// What the runs saw, per sweep point.
#[derive(Debug, Default)]
struct Seen {
    runs: usize,
    points: Vec<PointSeen>,
}

#[derive(Debug)]
struct PointSeen {
    case: Case,
    /// Per host: requests and CPU % of each run.
    requests: Vec<Vec<f64>>,
    cpu_pct: Vec<Vec<f64>>,
    cpus: Vec<usize>,
    /// The merged request count of each run.
    merged: Vec<f64>,
}

impl Loaders {
    pub fn new(
        hosts: Vec<String>,
        ssh: &str,
        costlab: &str,
        threads: Option<usize>,
        keep: Option<&Path>,
    ) -> Result<Loaders> {
        let ssh: Vec<String> = ssh.split_whitespace().map(String::from).collect();
        if ssh.is_empty() {
            return Err(usage(
                "--ssh is empty: give the ssh command, like \"ssh\" or \"ssh -F ~/lab/ssh_config\"",
            ));
        }
        if costlab.trim().is_empty() {
            return Err(usage(
                "--loader-costlab is empty: give costlab's name or path on the loader hosts",
            ));
        }
        if let Some(dir) = keep {
            std::fs::create_dir_all(dir).map_err(|e| {
                usage(format!(
                    "--loader-reports {}: cannot create it ({e}); give a directory you can write",
                    dir.display()
                ))
            })?;
        }
        Ok(Loaders {
            hosts,
            ssh,
            costlab: costlab.trim().to_string(),
            threads,
            keep: keep.map(Path::to_path_buf),
            seen: Arc::default(),
        })
    }

    /// The check that each connection count can be split: every host gets at least one.
    pub fn check_conns(&self, conns: &[usize]) -> Result<()> {
        let n = self.hosts.len();
        if let Some(c) = conns.iter().find(|c| **c < n) {
            return Err(usage(format!(
                "--conns {c} with {n} loader hosts: each host needs at least one connection; use --conns {n} or more"
            )));
        }
        Ok(())
    }

    /// `ssh -o BatchMode=yes -T HOST -- COMMAND...`, its three streams piped.
    fn ssh(&self, host: &str, words: &[String]) -> Command {
        let mut cmd = Command::new(&self.ssh[0]);
        cmd.args(&self.ssh[1..])
            .args(["-o", "BatchMode=yes", "-T", host, "--"])
            .arg(
                words
                    .iter()
                    .map(|w| shell_word(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn spawn(&self, host: &str, words: &[String]) -> Result<Child> {
        self.ssh(host, words).spawn().map_err(|e| {
            usage(format!(
                "cannot run '{}' ({e}): install openssh-client, or name the ssh command with --ssh",
                self.ssh[0]
            ))
        })
    }

    /// Before measuring anything: every host answers over ssh and runs this costlab version.
    pub fn check(&self) -> Result<()> {
        let words = vec![self.costlab.clone(), "--version".to_string()];
        let mut children = Vec::new();
        for h in &self.hosts {
            let mut c = self.spawn(h, &words)?;
            drop(c.stdin.take());
            children.push(Guard::new(h.clone(), c));
        }
        for g in &mut children {
            let (status, out, err) = g.finish(READY_WITHIN)?;
            let got = out.trim();
            if !status.success() {
                return Err(self.failure(&g.host, status, &err));
            }
            let want = format!("costlab {VERSION}");
            if got != want {
                return Err(usage(format!(
                    "loader {}: '{}' says '{}', this is {want}: install costlab {VERSION} there (the loader's report format is this version's)",
                    g.host,
                    self.costlab,
                    first_line(got)
                )));
            }
        }
        Ok(())
    }

    /// Why a host failed, as one line naming the fix.
    fn failure(&self, host: &str, status: ExitStatus, stderr: &str) -> anyhow::Error {
        let last = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("")
            .to_string();
        let code = status.code();
        if code == Some(255) {
            let fix = if stderr.contains("Host key verification failed")
                || stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
                || stderr.contains("No ED25519 host key is known")
                || stderr.contains("host key is known")
            {
                format!("the host key of {host} is not in known_hosts or has changed: check its fingerprint and add it (ssh {host} once); costlab never turns host key checking off")
            } else if stderr.contains("Permission denied") {
                format!("{host} refused the login: set up a key or an agent so that `ssh {host}` logs in without a prompt (ssh-copy-id {host})")
            } else {
                format!("check that `ssh {host} true` works from here (host name, port, sshd running, firewall)")
            };
            return usage(format!(
                "loader {host}: ssh failed: {}; {fix}",
                if last.is_empty() { "no message" } else { &last }
            ));
        }
        if code == Some(127)
            || code == Some(126)
            || last.contains("not found")
            || last.contains("No such file")
        {
            return usage(format!(
                "loader {host}: costlab is not there as '{}' ({}): install costlab {VERSION} on {host}, or give its path there with --loader-costlab",
                self.costlab,
                if last.is_empty() { "not found" } else { &last }
            ));
        }
        let said = last.strip_prefix("costlab: ").unwrap_or(&last);
        usage(format!(
            "loader {host}: costlab failed ({status}): {}",
            if said.is_empty() { "no message" } else { said }
        ))
    }

    /// The command a host runs for `spec`, host `i`'s share of the connections.
    fn load_words(&self, spec: &LoadSpec, i: usize) -> Vec<String> {
        let mut w: Vec<String> = [
            self.costlab.as_str(),
            "echo",
            "load",
            "--for-lead",
            "--target",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        w.push(spec.target.to_string());
        w.push("--conns".into());
        w.push(share(spec.conns, self.hosts.len(), i).to_string());
        w.push("--sizes".into());
        w.push(spec.size.to_string());
        w.push("--duration".into());
        w.push(format!("{}ms", spec.duration.as_millis().max(1)));
        w.push("--depth".into());
        w.push(spec.depth.to_string());
        w.push("--client".into());
        w.push(spec.client.name().into());
        if let Some(t) = self.threads {
            w.push("--loader-threads".into());
            w.push(t.to_string());
        }
        w
    }

    /// One run from every host at once, merged. `case` names the sweep point (for the
    /// per-host figures and the kept reports).
    pub fn run(&self, spec: &LoadSpec, case: &Case) -> Result<LoadReport> {
        let mut guards = Vec::with_capacity(self.hosts.len());
        let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
        for (i, h) in self.hosts.iter().enumerate() {
            let mut child = self.spawn(h, &self.load_words(spec, i))?;
            let stdout = child.stdout.take().context("ssh stdout")?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send((i, Some(line))).is_err() {
                        return;
                    }
                }
                let _ = tx.send((i, None));
            });
            guards.push(Guard::new(h.clone(), child));
        }
        drop(tx);
        // Every host ready (connected, costlab started, spec accepted), then go together.
        self.wait_lines(&mut guards, &rx, READY_WITHIN, |l| l.starts_with("ready "))?;
        for g in &mut guards {
            let sent = g
                .stdin
                .as_mut()
                .map(|s| s.write_all(b"go\n").and_then(|_| s.flush()));
            if !matches!(sent, Some(Ok(()))) {
                let (status, _, err) = g.finish(Duration::from_secs(5))?;
                return Err(self.failure(&g.host, status, &err));
            }
        }
        let within = spec.duration + spec.grace() + REPORT_SLACK;
        let lines = self.wait_lines(&mut guards, &rx, within, |l| l.starts_with('{'))?;
        let mut wires = Vec::with_capacity(lines.len());
        for (g, line) in guards.iter().zip(&lines) {
            let wire: LoaderReport = serde_json::from_str(line)
                .with_context(|| format!("loader {}: its report is not {FORMAT} JSON", g.host))?;
            anyhow::ensure!(
                wire.format == FORMAT,
                "loader {}: report format '{}', expected '{FORMAT}'",
                g.host,
                wire.format
            );
            wires.push(wire);
        }
        for g in &mut guards {
            let _ = g.finish(Duration::from_secs(5));
        }
        let parts = wires
            .iter()
            .zip(&self.hosts)
            .map(|(w, h)| w.to_load().with_context(|| format!("loader {h}")))
            .collect::<Result<Vec<_>>>()?;
        let merged = merge(&parts)?;
        self.record(case, spec, &wires, &merged)?;
        Ok(merged)
    }

    /// Wait until each host printed a line that `want` accepts; a host that ends first is
    /// an error naming its cause.
    fn wait_lines(
        &self,
        guards: &mut [Guard],
        rx: &mpsc::Receiver<(usize, Option<String>)>,
        within: Duration,
        want: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>> {
        let mut got: Vec<Option<String>> = vec![None; guards.len()];
        let end = Instant::now() + within;
        while got.iter().any(Option::is_none) {
            costlab_core::measure::cancel::check()?;
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let late: Vec<&str> = guards
                    .iter()
                    .zip(&got)
                    .filter(|(_, g)| g.is_none())
                    .map(|(g, _)| g.host.as_str())
                    .collect();
                return Err(usage(format!(
                    "loader {}: no answer within {} s; check that `ssh HOST true` is quick and the host is not overloaded",
                    late.join(", "),
                    within.as_secs()
                )));
            }
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok((i, Some(line))) if got[i].is_none() && want(line.trim()) => {
                    got[i] = Some(line.trim().to_string())
                }
                Ok((_, Some(_))) => {}
                Ok((i, None)) if got[i].is_none() => {
                    let (status, _, err) = guards[i].finish(Duration::from_secs(5))?;
                    return Err(self.failure(&guards[i].host, status, &err));
                }
                Ok((_, None)) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    anyhow::bail!("lost every loader's output")
                }
            }
        }
        Ok(got.into_iter().map(|g| g.unwrap_or_default()).collect())
    }

    fn record(
        &self,
        case: &Case,
        spec: &LoadSpec,
        wires: &[LoaderReport],
        merged: &LoadReport,
    ) -> Result<()> {
        let mut seen = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let run = seen.runs;
        seen.runs += 1;
        if let Some(dir) = &self.keep {
            for (i, (w, h)) in wires.iter().zip(&self.hosts).enumerate() {
                let doc = serde_json::json!({
                    "run": run, "host": h, "case": case,
                    "conns": share(spec.conns, self.hosts.len(), i), "report": w,
                });
                let file = dir.join(format!("run{run:04}-{}.json", file_safe(h)));
                std::fs::write(&file, serde_json::to_string_pretty(&doc)? + "\n")
                    .with_context(|| format!("writing {}", file.display()))?;
            }
        }
        let n = self.hosts.len();
        let at = match seen.points.iter().position(|p| &p.case == case) {
            Some(at) => at,
            None => {
                seen.points.push(PointSeen {
                    case: case.clone(),
                    requests: vec![Vec::new(); n],
                    cpu_pct: vec![Vec::new(); n],
                    cpus: vec![0; n],
                    merged: Vec::new(),
                });
                seen.points.len() - 1
            }
        };
        let p = &mut seen.points[at];
        for (i, w) in wires.iter().enumerate() {
            p.requests[i].push(w.requests as f64);
            p.cpu_pct[i].push(w.cpu_pct());
            p.cpus[i] = w.cpus;
        }
        p.merged.push(merged.requests as f64);
        Ok(())
    }

    /// Mark a sweep point's case as loaded from these hosts.
    pub fn tag(&self, case: &mut Case) {
        case.insert("loaders".into(), self.hosts.join(",").into());
    }

    /// The figures only remote loading has: the merged request count of each run, and per
    /// host its request count and CPU (case key `loader`); one note per point saying how
    /// busy each host was.
    pub fn push_rows(&self, lab: &str, out: &mut Outcome) {
        let Ok(seen) = self.seen.lock() else { return };
        for p in &seen.points {
            out.push(lab, p.case.clone(), "requests", "count", p.merged.clone());
            let mut busy = Vec::new();
            for (i, h) in self.hosts.iter().enumerate() {
                let mut c = p.case.clone();
                c.insert("loader".into(), h.clone().into());
                out.push(
                    lab,
                    c.clone(),
                    "loader_host_requests",
                    "count",
                    p.requests[i].clone(),
                );
                out.push(lab, c, "loader_host_cpu", "%", p.cpu_pct[i].clone());
                busy.push(format!(
                    "{h} {:.0}% of {} CPU(s)",
                    median(&p.cpu_pct[i]),
                    p.cpus[i]
                ));
            }
            out.notes.push(format!(
                "{}: loader hosts busy (median over runs): {}",
                describe(&p.case),
                busy.join(", ")
            ));
        }
        out.notes.push(format!(
            "load from {} host(s) over ssh: {}; requests summed over the hosts, latency percentiles read from their merged HdrHistograms (not averaged)",
            self.hosts.len(),
            self.hosts.join(", ")
        ));
    }
}

fn describe(c: &Case) -> String {
    let g = |k: &str| {
        c.get(k)
            .map(|v| v.as_str().map_or(v.to_string(), String::from))
            .unwrap_or_default()
    };
    format!(
        "{} {} client {} conns {} B",
        g("engine"),
        g("client"),
        g("conns"),
        g("size")
    )
}

fn file_safe(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("nothing")
}

/// An ssh child: killed if still running when dropped; its stderr collected.
struct Guard {
    host: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<String>>,
    stdout_rest: Option<std::process::ChildStdout>,
}

impl Guard {
    fn new(host: String, mut child: Child) -> Guard {
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut e) = child.stderr.take() {
            let buf = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = e.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut b) = buf.lock() {
                        // Keep the tail: the cause is in the last lines.
                        b.push_str(&String::from_utf8_lossy(&chunk[..n]));
                        if b.len() > 16 * 1024 {
                            let cut = b.len() - 8 * 1024;
                            let cut = (cut..b.len()).find(|i| b.is_char_boundary(*i)).unwrap_or(0);
                            b.drain(..cut);
                        }
                    }
                }
            });
        }
        let stdin = child.stdin.take();
        let stdout_rest = child.stdout.take();
        Guard {
            host,
            child,
            stdin,
            stderr,
            stdout_rest,
        }
    }

    /// Close its stdin, wait for it to end (killed past `within`), and return its status,
    /// stdout (when not read elsewhere) and stderr.
    fn finish(&mut self, within: Duration) -> Result<(ExitStatus, String, String)> {
        drop(self.stdin.take());
        let mut out = String::new();
        let reader = self.stdout_rest.take().map(|mut s| {
            std::thread::spawn(move || {
                let mut o = String::new();
                let _ = s.read_to_string(&mut o);
                o
            })
        });
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if t0.elapsed() > within {
                let _ = self.child.kill();
                break self.child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(r) = reader {
            out = r.join().unwrap_or_default();
        }
        // Let the stderr reader catch the last bytes.
        std::thread::sleep(Duration::from_millis(20));
        let err = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        Ok((status, out, err))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The point's per-host samples, for tests.
#[cfg(test)]
impl Loaders {
    fn seen_points(&self) -> usize {
        self.seen.lock().map(|s| s.points.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;
    use costlab_core::error::exit_code;

    #[test]
    fn connections_split_evenly_and_every_host_gets_one() {
        assert_eq!(
            (0..3).map(|i| share(10, 3, i)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..2).map(|i| share(2, 2, i)).sum::<usize>(), 2);
        for conns in 1..50 {
            for n in 1..=conns.min(7) {
                assert_eq!((0..n).map(|i| share(conns, n, i)).sum::<usize>(), conns);
                assert!((0..n).all(|i| share(conns, n, i) >= 1));
            }
        }
        let l = Loaders::new(vec!["a".into(), "b".into()], "ssh", "costlab", None, None).unwrap();
        assert!(l.check_conns(&[2, 128]).is_ok());
        assert_eq!(exit_code(&l.check_conns(&[1, 128]).unwrap_err()), 2);
        assert_eq!(l.seen_points(), 0);
    }

    #[test]
    fn remote_words_are_quoted_for_the_shell() {
        assert_eq!(shell_word("costlab"), "'costlab'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        let l = Loaders::new(
            vec!["a".into(), "b".into()],
            "ssh -F x",
            "/opt/cost lab",
            Some(2),
            None,
        )
        .unwrap();
        let spec = LoadSpec {
            target: "10.0.0.5:7000".parse().unwrap(),
            conns: 5,
            size: 16,
            duration: Duration::from_millis(300),
            depth: 1,
            threads: 1,
            rate: None,
            client: load::ClientKind::Event,
            cpus: None,
        };
        let w = l.load_words(&spec, 0);
        assert_eq!(w[0], "/opt/cost lab");
        let joined = w.join(" ");
        assert!(
            joined.contains(
                "--for-lead --target 10.0.0.5:7000 --conns 3 --sizes 16 --duration 300ms"
            ),
            "{joined}"
        );
        assert!(
            joined.ends_with("--client event --loader-threads 2"),
            "{joined}"
        );
        assert!(l.load_words(&spec, 1).join(" ").contains("--conns 2"));
        let cmd = l.ssh("a", &w);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into()).collect();
        assert_eq!(&args[..6], ["-F", "x", "-o", "BatchMode=yes", "-T", "a"]);
        assert_eq!(args[6], "--");
        assert!(
            args[7].starts_with("'/opt/cost lab' 'echo' 'load'"),
            "{}",
            args[7]
        );
        assert!(!args.iter().any(|a| a.contains("StrictHostKeyChecking")));
    }
}
