//! perf(1) as a sampler: where it is, whether it may sample here, a `perf record` of a
//! running process for a fixed time (cpu-clock, a software event, so it works without a
//! PMU) with the samples per symbol read back from `perf report`, and a `perf record` of a
//! program that turns sampling on and off itself (control fifos) with its samples streamed
//! back from `perf script`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

/// The perf binary on PATH, if any.
pub fn find() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("perf"))
            .find(|p| p.is_file())
    })
}

/// The sampling rate asked for, capped by what the kernel allows
/// (/proc/sys/kernel/perf_event_max_sample_rate).
pub fn rate(want: u64) -> u64 {
    let max = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(want);
    want.min(max).max(1)
}

/// Samples of one symbol: its name, whether it is the kernel's, and how many samples hit it.
#[derive(Debug, Clone, PartialEq)]
pub struct SymbolSamples {
    pub symbol: String,
    pub kernel: bool,
    pub samples: u64,
}

/// A `perf record` of another process, started and not yet finished.
pub struct Recording {
    child: std::process::Child,
}

/// Start sampling every thread of process `pid` on cpu-clock at `hz` into `data`: samples
/// are kept from `delay` after this call until `delay + time`. Returns once perf has attached
/// (its `sleep` workload, which perf releases only once the events are on, has started), so
/// the window is timed from the return, however long perf took to set up.
pub fn start_record(
    perf: &Path,
    pid: u32,
    hz: u64,
    delay: Duration,
    time: Duration,
    data: &Path,
) -> Result<Recording> {
    let mut child = Command::new(perf)
        .args(["record", "-q", "--no-bpf-event", "-e", "cpu-clock", "-F"])
        .arg(hz.to_string())
        .args(["-D", &delay.as_millis().max(1).to_string()])
        .args(["-p", &pid.to_string(), "-o"])
        .arg(data)
        .args([
            "--",
            "sleep",
            &format!("{:.3}", (delay + time).as_secs_f64()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting perf record")?;
    let t0 = std::time::Instant::now();
    while !attached(child.id(), data) {
        if let Some(status) = child.try_wait()? {
            return Err(record_failed(status, child));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("perf record did not start within 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(Recording { child })
}

/// Whether perf `pid` has its events on: its workload child has become `sleep`. Where the
/// kernel does not list children (no CONFIG_PROC_CHILDREN), once the data file exists.
fn attached(pid: u32, data: &Path) -> bool {
    let list = format!("/proc/{pid}/task/{pid}/children");
    match std::fs::read_to_string(&list) {
        Ok(children) => children.split_whitespace().any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "sleep")
        }),
        Err(_) => data.is_file(),
    }
}

impl Recording {
    /// Wait for the recording to end.
    pub fn finish(mut self) -> Result<()> {
        let status = self.child.wait().context("waiting for perf record")?;
        if !status.success() {
            return Err(record_failed(status, self.child));
        }
        Ok(())
    }
}

fn record_failed(
    status: std::process::ExitStatus,
    mut child: std::process::Child,
) -> anyhow::Error {
    let mut why = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut why);
    }
    anyhow::anyhow!(
        "perf record failed ({status}): {}; see /proc/sys/kernel/perf_event_paranoid",
        why.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .trim()
    )
}

/// Whether `perf record` may sample here at `hz`: a probe recording of `true`. The reason
/// when it may not.
pub fn probe(perf: &Path, hz: u64) -> std::result::Result<(), String> {
    let dir = std::env::temp_dir().join(format!("costlab-perf-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let out = Command::new(perf)
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            &hz.to_string(),
            "-o",
        ])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "perf record failed here ({}); see /proc/sys/kernel/perf_event_paranoid",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim()
        )),
        Err(e) => Err(format!("perf did not start ({e})")),
    }
}

/// A scratch folder for one recording that its program controls: the control and
/// acknowledgement fifos (`perf record --control fifo:CTL,ACK`) and the data file. Removed
/// on drop.
pub struct Controlled {
    dir: PathBuf,
    pub ctl: PathBuf,
    pub ack: PathBuf,
    pub data: PathBuf,
}

impl Controlled {
    /// A fresh folder under the temp dir, with its two fifos made.
    pub fn new() -> Result<Controlled> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "costlab-perf-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let c = Controlled {
            ctl: dir.join("ctl"),
            ack: dir.join("ack"),
            data: dir.join("perf.data"),
            dir,
        };
        for f in [&c.ctl, &c.ack] {
            rustix::fs::mkfifoat(rustix::fs::CWD, f, rustix::fs::Mode::from_raw_mode(0o600))
                .with_context(|| format!("mkfifo {}", f.display()))?;
        }
        Ok(c)
    }

    /// perf's arguments for a recording of the command that follows them: cpu-clock at
    /// `hz`, frame-pointer user call chains (a kernel-mode sample is kernel time whatever it
    /// did there, and perf's cpumode says which it was), events off until the program turns
    /// them on through `ctl` (`-D -1`). Ends with `--`: append the program and its arguments.
    pub fn record_args(&self, hz: u64) -> Vec<String> {
        [
            "record",
            "-q",
            // No records of BPF programs loaded meanwhile (a price running beside loads
            // some): they name no sample of a user program, and a recording with them failed
            // `perf script` (exit 242) twice in CI; that they were the cause is not proven.
            "--no-bpf-event",
            "-e",
            "cpu-clock",
            "-F",
            &hz.to_string(),
            "--call-graph",
            "fp",
            "--user-callchains",
            "--control",
            &format!("fifo:{},{}", self.ctl.display(), self.ack.display()),
            "-D",
            "-1",
            "-o",
            &self.data.display().to_string(),
            "--",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Stream the recording's samples (`perf script -F misc,period,ip,sym,symoff
    /// --no-inline`: cpumode, period and the call chain) to `read`, then check perf's exit.
    pub fn script<T>(
        &self,
        perf: &Path,
        read: impl FnOnce(std::io::BufReader<std::process::ChildStdout>) -> T,
    ) -> Result<T> {
        let mut child = Command::new(perf)
            .args([
                "script",
                "-F",
                "misc,period,ip,sym,symoff",
                "--no-inline",
                "-i",
            ])
            .arg(&self.data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // To a file, not a pipe: nothing reads it while the samples stream, and a full
            // pipe would stop perf; its end goes into the error where perf fails.
            .stderr(
                std::fs::File::create(self.dir.join("script.err"))
                    .context("creating perf script's error file")?,
            )
            .spawn()
            .context("starting perf script")?;
        let out = read(std::io::BufReader::new(
            child.stdout.take().context("perf script's output")?,
        ));
        let status = child.wait()?;
        if !status.success() {
            let err = std::fs::read_to_string(self.dir.join("script.err")).unwrap_or_default();
            let lines: Vec<&str> = err.trim().lines().collect();
            let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
            anyhow::bail!(
                "perf script -i {} failed ({status}){}",
                self.data.display(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            );
        }
        Ok(out)
    }
}

impl Drop for Controlled {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Samples per symbol in a perf.data file, most first.
pub fn symbols(perf: &Path, data: &Path) -> Result<Vec<SymbolSamples>> {
    let out = Command::new(perf)
        .args(["report", "--no-children", "--sort", "sym", "--stdio"])
        .args(["-F", "sample,sym", "-i"])
        .arg(data)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("starting perf report")?;
    if !out.status.success() {
        anyhow::bail!("perf report -i {} failed ({})", data.display(), out.status);
    }
    Ok(parse_report(&String::from_utf8_lossy(&out.stdout)))
}

/// The rows of `perf report --sort sym -F sample,sym --stdio`: `<samples>  [k] <symbol>`
/// (`[.]` for user space). Headers, blank lines and call-graph lines are left out.
pub fn parse_report(text: &str) -> Vec<SymbolSamples> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('#') {
            continue;
        }
        let mut parts = t.splitn(2, char::is_whitespace);
        let (Some(n), Some(rest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(samples) = n.parse::<u64>() else {
            continue;
        };
        let rest = rest.trim_start();
        let (kernel, symbol) = if let Some(s) = rest.strip_prefix("[k]") {
            (true, s)
        } else if let Some(s) = rest.strip_prefix("[.]") {
            (false, s)
        } else {
            continue;
        };
        let symbol = symbol.trim();
        if symbol.is_empty() {
            continue;
        }
        rows.push(SymbolSamples {
            symbol: symbol.to_string(),
            kernel,
            samples,
        });
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.samples));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rows_parse_and_headers_do_not() {
        let text = "# To display the perf.data header info, please use --header/--header-only options.\n#\n# Samples: 3K of event 'cpu-clock:ppp'\n#\n# Samples  Symbol\n# .......  ......\n#\n      412  [k] _copy_from_iter\n      677  [k] _copy_to_iter\n       31  [.] costlab::labs::echo::uring::Server::send_queued\n        2  [k] 0xffffffff8a2001c0\n\n#\n# (Cannot load tips.txt file, please install perf!)\n#\n";
        let rows = parse_report(text);
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0],
            SymbolSamples {
                symbol: "_copy_to_iter".into(),
                kernel: true,
                samples: 677
            }
        );
        assert_eq!(
            rows[2].symbol,
            "costlab::labs::echo::uring::Server::send_queued"
        );
        assert!(!rows[2].kernel);
        assert_eq!(rows.iter().map(|r| r.samples).sum::<u64>(), 1122);
    }

    #[test]
    fn rates_are_capped_and_above_zero() {
        assert!(rate(999) >= 1 && rate(999) <= 999);
        assert_eq!(rate(0), 1);
    }
}
