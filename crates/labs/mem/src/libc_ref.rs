//! The C library references of the bandwidth lab: which method glibc's memcpy and memset
//! took at the sizes measured, read from the dynamic loader's tunables.

use std::path::Path;

use costlab_core::measure::sizes::format_size;

use super::plan::BandwidthPlan;

/// glibc's size thresholds for memcpy and memset, from the dynamic loader's tunables list
/// (glibc 2.33 and later): which method the reference cases took at a given size.
fn glibc_thresholds() -> Option<Vec<(String, u64)>> {
    let loader = [
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/ld-linux-aarch64.so.1",
        "/lib/ld-linux-x86-64.so.2",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())?;
    let out = std::process::Command::new(loader)
        .arg("--list-tunables")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let found: Vec<(String, u64)> = parse_tunables(&text);
    (!found.is_empty()).then_some(found)
}

/// The memcpy/memset thresholds of `ld.so --list-tunables` output, in bytes.
fn parse_tunables(text: &str) -> Vec<(String, u64)> {
    let wanted = [
        "x86_non_temporal_threshold",
        "x86_rep_movsb_threshold",
        "x86_rep_stosb_threshold",
    ];
    let mut found = Vec::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(short) = wanted.iter().find(|w| name.trim().ends_with(*w)) else {
            continue;
        };
        let value = rest.split_whitespace().next().unwrap_or("");
        let parsed = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        };
        if let Some(v) = parsed {
            found.push((short.to_string(), v));
        }
    }
    found
}

/// Say how glibc chose to copy and set at the sizes the reference cases used.
pub(super) fn note_libc(plan: &BandwidthPlan, notes: &mut Vec<String>) {
    // With --shared they are not run (see shared.rs).
    if plan.shared || !plan.ops.iter().any(|o| o.is_libc()) {
        return;
    }
    let mut note = "memcpy, memset: the C library's own, one call per pass over each thread's block (memcpy copies one half onto the other, counted as read + write); they are the reference that costlab's copy and write kernels are compared with".to_string();
    if let Some(t) = glibc_thresholds() {
        let get = |k: &str| t.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        if let Some(nt) = get("x86_non_temporal_threshold") {
            let calls: Vec<String> = plan
                .blocks
                .iter()
                .map(|&b| {
                    let half = b / 2;
                    format!(
                        "memcpy of {} takes {}",
                        format_size(half),
                        if half > nt {
                            "the streaming-store path"
                        } else {
                            "the regular-store path"
                        }
                    )
                })
                .collect();
            note += &format!(
                "; glibc here: streaming stores above {} (glibc.cpu.x86_non_temporal_threshold){}, so {}",
                format_size(nt),
                get("x86_rep_movsb_threshold")
                    .map_or(String::new(), |r| format!(", rep movsb from {}", format_size(r))),
                calls.join(", ")
            );
        }
    }
    notes.push(note);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_tunables_are_read() {
        let text = "glibc.cpu.x86_shared_cache_size: 0x10000000 (min: 0x0, max: 0xffffffffffffffff)\nglibc.cpu.x86_rep_movsb_threshold: 0x840 (min: 0x100, max: 0xffffffffffffffff)\nglibc.cpu.x86_non_temporal_threshold: 0xc000000 (min: 0x4040, max: 0xfffffffffffffff)\nglibc.cpu.x86_ibt:\nglibc.malloc.mxfast: 0x0 (min: 0x0, max: 0xffffffffffffffff)\n";
        assert_eq!(
            parse_tunables(text),
            vec![
                ("x86_rep_movsb_threshold".to_string(), 0x840),
                ("x86_non_temporal_threshold".to_string(), 192 << 20)
            ]
        );
    }
}
