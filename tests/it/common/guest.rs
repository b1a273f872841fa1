//! An emulated machine for the tests: virtme-ng boots Debian's kernel under QEMU without KVM
//! (the host's root shared read-only, /tmp an overlay the host does not see) and runs a shell
//! script there. Checks placement and output, never costs: the emulator times nothing as
//! hardware would.
//!
//! Needs what scripts/install-deps.sh installs (qemu-system-x86, linux-image-amd64,
//! busybox-static, virtme-ng in /opt/virtme-ng). A test asks `cannot_boot` first and skips with
//! its reason (failing under CI=true) where the guest cannot boot.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// virtme-ng's `vng`: /opt/virtme-ng/bin/vng, else on PATH.
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

/// The newest /boot/vmlinuz-*.
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

/// Why the guest cannot be booted here, or None. `tools`: (command, Debian package) the
/// guest's script needs beyond vng, a kernel, QEMU and busybox.
pub fn cannot_boot(tools: &[(&str, &str)]) -> Option<String> {
    if vng().is_none() {
        return Some(
            "no vng (pip install virtme-ng into /opt/virtme-ng; scripts/install-deps.sh does)"
                .into(),
        );
    }
    if kernel().is_none() {
        return Some("no /boot/vmlinuz-* (apt-get install linux-image-amd64)".into());
    }
    let base = [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
    ];
    for (cmd, pkg) in base.iter().chain(tools) {
        if !on_path(cmd) {
            return Some(format!("no {cmd} (apt-get install {pkg})"));
        }
    }
    None
}

/// One boot: its options beyond vng's defaults and the script it runs.
pub struct Boot<'a> {
    /// vng's options: `--cpus`, `--memory`, `--numa`, `--append`, `--rwdir` ...
    pub options: Vec<String>,
    pub script: &'a str,
    /// The whole run's limit (the guest is killed after it).
    pub timeout_s: u32,
}

/// Boot the guest and run its script: (stdout without carriage returns, the whole output).
pub fn boot(b: &Boot) -> (String, Output) {
    let (vng, kernel) = (vng().expect("vng"), kernel().expect("a kernel"));
    let bin_dir = vng.parent().unwrap_or(Path::new("/")).to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .arg(b.timeout_s.to_string())
        .arg(&vng)
        .arg("--run")
        .arg(&kernel)
        .arg("--disable-kvm")
        .args(&b.options)
        .arg("--exec")
        .arg(b.script)
        .env("PATH", path)
        .output()
        .expect("running vng");
    let stdout = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    (stdout, out)
}

/// The last few lines of a boot's stderr, on one line (why it did not boot).
pub fn stderr_tail(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    tail.reverse();
    format!("status {:?}: {}", out.status.code(), tail.join(" | "))
}

/// The text between the marker line `==name` and the next marker.
pub fn section<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    let start = out.find(&format!("=={name}\n"))? + name.len() + 3;
    let rest = &out[start..];
    let end = rest.find("\n==").map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}

/// The JSON object in a section.
pub fn json_in(text: &str) -> Value {
    let from = text.find('{').expect("no JSON in the section");
    let to = text.rfind('}').expect("no JSON end in the section");
    serde_json::from_str(&text[from..=to]).expect("the section's JSON parses")
}
