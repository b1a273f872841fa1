//! Reading sysfs and procfs under a root, so that fixture trees of other machines parse
//! exactly as the live `/` does. Nothing here fails: a file that cannot be read is `None`.

use std::path::{Path, PathBuf};

/// A root directory holding `sys/` and `proc/` (the live `/` or a fixture tree).
#[derive(Debug, Clone)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(path: &Path) -> Root {
        Root(path.to_path_buf())
    }

    /// The path of `rel` ("sys/devices/system/cpu/online") under this root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    /// The whole text of a file (lossy UTF-8), or None.
    pub fn text(&self, rel: &str) -> Option<String> {
        let bytes = std::fs::read(self.path(rel)).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A one-value file, trimmed; None when absent or empty.
    pub fn value(&self, rel: &str) -> Option<String> {
        let t = self.text(rel)?.trim().to_string();
        (!t.is_empty()).then_some(t)
    }

    /// A one-number file.
    pub fn number<T: std::str::FromStr>(&self, rel: &str) -> Option<T> {
        self.value(rel)?.parse().ok()
    }

    /// A kernel CPU list file ("0-3,8"); None when absent or malformed.
    pub fn cpu_list(&self, rel: &str) -> Option<Vec<usize>> {
        let t = self.text(rel)?;
        crate::measure::cpus::parse_cpu_list(t.trim()).ok()
    }

    /// Names of the entries of a directory, sorted naturally (cpu2 before cpu10).
    pub fn entries(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.path(rel)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by_key(|n| natural_key(n));
        names
    }

    /// Numbered entries named `prefix<N>` ("node0", "index3"), as numbers in order.
    pub fn numbered(&self, rel: &str, prefix: &str) -> Vec<usize> {
        let mut ids: Vec<usize> = self
            .entries(rel)
            .iter()
            .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// Sort key splitting a trailing number off a name, so "cpu10" sorts after "cpu2".
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = name.split_at(name.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0))
}

/// A sysfs size in bytes (measure reads cache sizes too, so it lives there).
pub use crate::measure::cpus::parse_sysfs_size;

/// The value of `key` in a "Key:   value kB" file (meminfo, status), in bytes when it ends in kB.
pub fn kv_bytes(text: &str, key: &str) -> Option<u64> {
    let v = kv(text, key)?;
    let mut parts = v.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => n.checked_mul(1024),
        _ => Some(n),
    }
}

/// The raw value of `key` in a "Key: value" file.
pub fn kv<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_keys() {
        assert_eq!(parse_sysfs_size("32K"), Some(32 << 10));
        assert_eq!(parse_sysfs_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_sysfs_size("64"), Some(64));
        assert_eq!(parse_sysfs_size("x"), None);
        let meminfo = "MemTotal:       24684084 kB\nHugePages_Total:       0\n";
        assert_eq!(kv_bytes(meminfo, "MemTotal"), Some(24684084 * 1024));
        assert_eq!(kv_bytes(meminfo, "HugePages_Total"), Some(0));
        assert_eq!(kv(meminfo, "Nope"), None);
        assert!(natural_key("cpu10") > natural_key("cpu2"));
    }
}
