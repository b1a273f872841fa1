//! Booting an emulated machine with virtme-ng (QEMU without KVM, Debian's kernel, the host's
//! root read-only, /tmp writable) and reading what a guest script printed: each command's
//! output between `==name` marker lines. Used by the tests that need what this machine lacks
//! (two NUMA nodes, SMT siblings).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub fn vng() -> Option<PathBuf> {
    let opt = PathBuf::from("/opt/virtme-ng/bin/vng");
    if opt.exists() {
        return Some(opt);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("vng"))
            .find(|f| f.exists())
    })
}

pub fn kernel() -> Option<PathBuf> {
    let mut k: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    k.sort();
    k.pop()
}

fn on_path(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the guest cannot be booted here, or None.
pub fn cannot_boot() -> Option<String> {
    if vng().is_none() {
        return Some(
            "no vng (pip install virtme-ng into /opt/virtme-ng; scripts/install-deps.sh does)"
                .into(),
        );
    }
    if kernel().is_none() {
        return Some("no /boot/vmlinuz-* (apt-get install linux-image-amd64)".into());
    }
    for (cmd, pkg) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("numactl", "numactl"),
        ("perf", "linux-perf"),
    ] {
        if !on_path(cmd) {
            return Some(format!("no {cmd} (apt-get install {pkg})"));
        }
    }
    None
}

/// What a guest printed.
pub struct Guest {
    pub stdout: String,
    pub stderr: String,
    pub status: Option<i32>,
    pub secs: f64,
}

/// The first line of every guest's script: keep the kernel's perf static keys on for the whole
/// boot. One task holds the software events costlab opens (context switches, migrations, page
/// faults) from before the script's first step.
///
/// Each costlab command opens and closes those events, and the first open or last close of one
/// patches the kernel's text (a static key: int3, an IPI to every CPU, the new bytes). Under
/// TCG that patching livelocks the guest now and then. Read through QEMU's monitor, hung
/// guests had a vCPU looping in `exc_int3` (once at a patched site in `__schedule`), another
/// waiting in `smp_call_function_many_cond` for the IPI, and the rest spinning on a lock. No
/// step's own timeout can end that, and the boot runs out its ten minutes (CI, stop 62, in
/// two_node's pin step; here 3 of about 70 pin runs, most beside 3 CPU hogs). A guest that
/// opened and closed the events in a loop beside the pin lab hung within 3 pin runs; with
/// this holder, 40 pin runs with 150 opens beside them, and 90 pin runs beside the CPU hogs,
/// finished. The hang is the emulator's, not costlab's: on hardware, or under KVM, the patch
/// takes microseconds.
const HOLD_PERF_KEYS: &str = include_str!("../../../scripts/hold-perf-keys.sh");

/// Boot the guest with vng's `machine` arguments (--cpus, --memory, --numa, --qemu-opts ...),
/// run `script` in it, and return what it printed. At most ten minutes a boot.
///
/// The script goes in a file the guest reads through the host's root (shared read-only), not
/// on the command line: vng hands `--exec` to the guest on the kernel's command line, whose
/// 2048 bytes a long script overflows, and the guest then hangs in its init.
///
/// A guest whose script has not started [`START_SECS`] after the boot began is stopped and
/// booted once more: in one CI run (stop 69, the suite twice as slow as here) two_node's guest
/// printed nothing in its ten minutes, not even the shell's first line, where a boot alone
/// reaches its script in 15 s (two_node here, alone). The guest stamps on stderr when its shell
/// starts (`==shell`) and when the perf holder is up (`==held`), so a guest that never
/// started says which of the two it missed.
pub fn boot(machine: &[&str], script: &str) -> Guest {
    // One emulated guest at a time: three TCG guests of 2-4 vCPUs each on a 2-CPU host (the
    // mitigations test's two beside two_node's one), under the rest of the suite, starved
    // two_node's guest past its ten minutes in one CI run; alone it runs in under a minute.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let dir =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory for the script");
    let file = dir.path().join("guest.sh");
    std::fs::write(
        &file,
        format!("{STAMP}\nstamp shell\n{HOLD_PERF_KEYS}\nstamp held\n{script}"),
    )
    .expect("writing the guest script");
    let first = boot_once(machine, &file, Some(START_SECS));
    if first.stderr.contains("==held at") || first.status != Some(STOPPED) {
        return first;
    }
    eprintln!(
        "vng: the guest's script had not started after {START_SECS} s (stamps: {}); booting it again",
        first.stamps()
    );
    let mut again = boot_once(machine, &file, None);
    again.secs += first.secs;
    again.stderr = format!(
        "(a first boot was stopped after {:.0} s, stamps: {})\n{}",
        first.secs,
        first.stamps(),
        again.stderr
    );
    again
}

/// How long a guest may take to reach its script before it is booted again.
const START_SECS: u64 = 240;

/// The status [`boot_once`] gives a guest it stopped for not starting.
const STOPPED: i32 = -2;

/// The guest's stamp function: `stamp NAME` writes `==NAME at UPTIME s` to stderr.
const STAMP: &str = "stamp() { echo \"==$1 at $(cut -d' ' -f1 /proc/uptime) s\" >&2; }";

/// One boot, at most ten minutes; where `start` is given, stopped (status [`STOPPED`]) if the
/// guest has not stamped `==held` by then.
fn boot_once(machine: &[&str], file: &Path, start: Option<u64>) -> Guest {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let (vng, kernel) = (vng().unwrap(), kernel().unwrap());
    let bin_dir = vng.parent().unwrap_or(Path::new("/")).to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = std::time::Instant::now();
    let mut child = Command::new("timeout")
        .arg("600")
        .arg(&vng)
        .arg("--run")
        .arg(&kernel)
        .arg("--disable-kvm")
        .args(machine)
        .arg("--exec")
        .arg(format!("sh {}", file.display()))
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running vng");
    let pipe = |mut r: Box<dyn Read + Send>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b = Arc::clone(&buf);
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        (buf, reader)
    };
    let (out, out_reader) = pipe(Box::new(child.stdout.take().unwrap()));
    let (err, err_reader) = pipe(Box::new(child.stderr.take().unwrap()));
    let mut stopped = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for vng") {
            break s;
        }
        let late = start.is_some_and(|s| started.elapsed().as_secs() >= s);
        if late && !stopped && !String::from_utf8_lossy(&err.lock().unwrap()).contains("==held at")
        {
            // SIGTERM to timeout, which hands it to QEMU (a SIGKILL would orphan QEMU).
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            stopped = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let _ = (out_reader.join(), err_reader.join());
    let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
    Guest {
        stdout: text(&out).replace('\r', ""),
        stderr: text(&err),
        status: if stopped {
            Some(STOPPED)
        } else {
            status.code()
        },
        secs: started.elapsed().as_secs_f64(),
    }
}

impl Guest {
    /// The stamps the guest wrote on stderr (`shell at 3.2 s, held at 4.0 s, ...`).
    pub fn stamps(&self) -> String {
        let s: Vec<&str> = self
            .stderr
            .lines()
            .filter_map(|l| l.strip_prefix("=="))
            .filter(|l| l.ends_with(" s") && l.contains(" at "))
            .collect();
        if s.is_empty() {
            "none".into()
        } else {
            s.join(", ")
        }
    }

    /// The last lines of stderr, for a message saying why the guest did not run.
    pub fn tail(&self) -> String {
        self.stderr
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// The text between `==name` and the next marker line.
pub fn section<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    let start = out.find(&format!("=={name}\n"))? + name.len() + 3;
    let rest = &out[start..];
    // A step that printed nothing is followed at once by the next marker.
    if rest.starts_with("==") {
        return Some("");
    }
    let end = rest.find("\n==").map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}

/// The JSON document in a section (from its first `{` to its last `}`).
pub fn json_in(text: &str) -> Value {
    let from = text.find('{').expect("no JSON in the section");
    let to = text.rfind('}').expect("no JSON end in the section");
    serde_json::from_str(&text[from..=to]).expect("the section's JSON parses")
}
