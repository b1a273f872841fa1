//! The CPU vulnerability mitigation state, printed next to s: mitigations are what makes a
//! syscall's switch cost 700 ns instead of 230 (the article's Xeon), so s means little
//! without it.

use std::path::Path;

/// The mitigation state in one line, read from /sys/devices/system/cpu/vulnerabilities/*
/// and /proc/cmdline. The one reader the lab uses: swap it for Machine's summary when the
/// machine probe has one.
pub fn mitigation_state() -> String {
    let vulns = read_vulnerabilities(Path::new("/sys/devices/system/cpu/vulnerabilities"));
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    summarize(&vulns, &cmdline)
}

/// (name, status) for each file of a vulnerabilities directory, sorted by name.
fn read_vulnerabilities(dir: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, String)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let status = std::fs::read_to_string(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                status.trim().to_string(),
            ))
        })
        .collect();
    v.sort();
    v
}

/// Kernel parameters that turn mitigations on or off.
fn is_mitigation_param(token: &str) -> bool {
    const KEYS: [&str; 16] = [
        "mitigations=",
        "pti=",
        "spectre_v2=",
        "spectre_v2_user=",
        "spectre_bhi=",
        "spec_store_bypass_disable=",
        "mds=",
        "tsx_async_abort=",
        "l1tf=",
        "retbleed=",
        "srbds=",
        "mmio_stale_data=",
        "gather_data_sampling=",
        "spec_rstack_overflow=",
        "reg_file_data_sampling=",
        "indirect_target_selection=",
    ];
    const FLAGS: [&str; 5] = [
        "nopti",
        "nospectre_v1",
        "nospectre_v2",
        "nospec_store_bypass_disable",
        "noibrs",
    ];
    KEYS.iter().any(|k| token.starts_with(k)) || FLAGS.contains(&token)
}

/// "mitigations=auto; mitigated: spectre_v1, spectre_v2 (Retpolines); vulnerable:
/// spec_store_bypass; 16 not affected".
pub fn summarize(vulns: &[(String, String)], cmdline: &str) -> String {
    // Arguments after "--" belong to init, not the kernel.
    let params: Vec<&str> = cmdline
        .split_whitespace()
        .take_while(|t| *t != "--")
        .filter(|t| is_mitigation_param(t))
        .collect();
    let mut parts = vec![if params.is_empty() {
        "kernel default mitigations".to_string()
    } else {
        params.join(" ")
    }];
    if vulns.is_empty() {
        parts.push(
            "vulnerability state not readable (no /sys/devices/system/cpu/vulnerabilities)".into(),
        );
        return parts.join("; ");
    }
    let mut mitigated = Vec::new();
    let mut vulnerable = Vec::new();
    let mut unaffected = 0;
    for (name, status) in vulns {
        if status.starts_with("Not affected") {
            unaffected += 1;
        } else if let Some(rest) = status.strip_prefix("Mitigation: ") {
            // The first clause names the technique ("Retpolines", "PTI"); the rest is detail.
            let how = rest.split([';', ',']).next().unwrap_or(rest).trim();
            mitigated.push(format!("{name} ({how})"));
        } else if status.starts_with("Vulnerable") {
            vulnerable.push(name.clone());
        } else {
            mitigated.push(format!("{name} ({status})"));
        }
    }
    if !mitigated.is_empty() {
        parts.push(format!("mitigated: {}", mitigated.join(", ")));
    }
    if !vulnerable.is_empty() {
        parts.push(format!("vulnerable: {}", vulnerable.join(", ")));
    }
    parts.push(format!("{unaffected} not affected"));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn summarises_sysfs_and_cmdline() {
        let vulns = v(&[
            ("meltdown", "Not affected"),
            ("spec_store_bypass", "Vulnerable"),
            (
                "spectre_v1",
                "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
            ),
            (
                "spectre_v2",
                "Mitigation: Retpolines; STIBP: disabled; RSB filling",
            ),
        ]);
        let s = summarize(
            &vulns,
            "mitigations=auto,nosmt console=ttyS0 nopti quiet -- --init nospectre_v2",
        );
        assert_eq!(
            s,
            "mitigations=auto,nosmt nopti; mitigated: spectre_v1 (usercopy/swapgs barriers and \
             __user pointer sanitization), spectre_v2 (Retpolines); vulnerable: \
             spec_store_bypass; 1 not affected"
        );
    }

    #[test]
    fn off_and_unreadable() {
        let s = summarize(
            &v(&[("mds", "Vulnerable: Clear CPU buffers attempted")]),
            "mitigations=off",
        );
        assert_eq!(s, "mitigations=off; vulnerable: mds; 0 not affected");
        let s = summarize(&[], "");
        assert!(s.starts_with("kernel default mitigations; vulnerability state not readable"));
        assert!(read_vulnerabilities(Path::new("/nonexistent")).is_empty());
    }
}
