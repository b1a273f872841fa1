//! Syscall ids and names: the kernel's uapi header read for this architecture, the syscalls
//! tracefs can trace, and counts by id turned into counts by name.

use std::collections::BTreeMap;
use std::path::Path;

/// Syscall numbers to names for this architecture, read from the kernel's uapi header under
/// `root` ("/" on the machine, a fixture tree in tests). tracefs's `sys_enter_*` formats name
/// a `__syscall_nr` field but not its value, so the numbers come from the header.
pub fn syscall_names(root: &Path) -> BTreeMap<u32, String> {
    let candidates = [
        "usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "usr/include/asm/unistd_64.h",
        "usr/include/aarch64-linux-gnu/asm/unistd.h",
        "usr/include/asm-generic/unistd.h",
    ];
    for c in candidates {
        if let Ok(text) = std::fs::read_to_string(root.join(c)) {
            let names = parse_unistd(&text);
            if !names.is_empty() {
                return names;
            }
        }
    }
    BTreeMap::new()
}

/// `#define __NR_getppid 110` lines to {110: "getppid"}.
pub fn parse_unistd(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            if f.next()? != "#define" {
                return None;
            }
            let name = f.next()?.strip_prefix("__NR_")?;
            let nr: u32 = f.next()?.parse().ok()?;
            Some((nr, name.to_string()))
        })
        .collect()
}

/// The names of the syscalls this kernel can trace, from a tracefs tree's
/// `events/syscalls/sys_enter_*` directories.
pub fn traced_syscalls(tracefs: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(tracefs.join("events/syscalls"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("sys_enter_")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// Name syscall ids.
pub fn named(ids: &BTreeMap<u32, u64>, names: &BTreeMap<u32, String>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (id, n) in ids {
        let name = names
            .get(id)
            .cloned()
            .unwrap_or_else(|| format!("syscall_{id}"));
        *out.entry(name).or_insert(0) += n;
    }
    out
}
