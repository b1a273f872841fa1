//! CPU vulnerability mitigations: what the kernel pays on every syscall and context switch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sysfs::Root;

/// Each /sys/devices/system/cpu/vulnerabilities entry and the boot-time switch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Mitigations {
    /// Entry name -> the kernel's status line ("Mitigation: Retpolines; ...", "Not affected").
    pub entries: BTreeMap<String, String>,
    /// The `mitigations=` value on the kernel command line, if any ("off", "auto,nosmt").
    pub cmdline: Option<String>,
    /// Every kernel command-line switch that turns mitigations on or off (`mitigations=`,
    /// `pti=`, `nopti`, `spectre_v2=` ...), in command-line order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<String>,
}

pub fn read_mitigations(root: &Root) -> Mitigations {
    let dir = "sys/devices/system/cpu/vulnerabilities";
    let entries = root
        .entries(dir)
        .into_iter()
        .filter_map(|name| {
            let v = root.value(&format!("{dir}/{name}"))?;
            Some((name, v))
        })
        .collect();
    let cmdline = root.value("proc/cmdline").unwrap_or_default();
    Mitigations {
        entries,
        cmdline: cmdline_mitigations(&cmdline),
        params: mitigation_params(&cmdline),
    }
}

/// The switches of a kernel command line that turn mitigations on or off (arguments after
/// `--` belong to init, not the kernel).
pub fn mitigation_params(cmdline: &str) -> Vec<String> {
    cmdline
        .split_whitespace()
        .take_while(|t| *t != "--")
        .filter(|t| is_mitigation_param(t))
        .map(str::to_string)
        .collect()
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

/// The value of `mitigations=` in a kernel command line (stops at `--`, where init's own
/// arguments begin).
pub fn cmdline_mitigations(cmdline: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter_map(|w| w.strip_prefix("mitigations="))
        .last()
        .map(str::to_string)
}

impl Mitigations {
    /// The longer line the syscall lab prints next to s: "mitigations=auto; mitigated:
    /// spectre_v1, spectre_v2 (Retpolines); vulnerable: spec_store_bypass; 16 not affected".
    pub fn detail(&self) -> String {
        let mut parts = vec![if self.params.is_empty() {
            "kernel default mitigations".to_string()
        } else {
            self.params.join(" ")
        }];
        if self.entries.is_empty() {
            parts.push(
                "vulnerability state not readable (no /sys/devices/system/cpu/vulnerabilities)"
                    .into(),
            );
            return parts.join("; ");
        }
        let mut mitigated = Vec::new();
        let mut vulnerable = Vec::new();
        let mut unaffected = 0;
        for (name, status) in &self.entries {
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

    /// One line a syscall figure can be read against: "on (spectre_v2: Retpolines; ...)",
    /// "off (mitigations=off)", "none needed (CPU not affected)".
    pub fn summary(&self) -> String {
        if self.cmdline.as_deref() == Some("off") {
            return "off (mitigations=off)".to_string();
        }
        if self.entries.is_empty() {
            return "unknown (no vulnerabilities directory in sysfs)".to_string();
        }
        let mitigated: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(k, v)| {
                let m = v.strip_prefix("Mitigation:")?;
                let first = m.split(';').next().unwrap_or(m).trim();
                Some(format!("{k}: {first}"))
            })
            .collect();
        let vulnerable: Vec<&str> = self
            .entries
            .iter()
            .filter(|(_, v)| v.starts_with("Vulnerable"))
            .map(|(k, _)| k.as_str())
            .collect();
        let vul = if vulnerable.is_empty() {
            String::new()
        } else {
            format!("vulnerable: {}", vulnerable.join(", "))
        };
        if !mitigated.is_empty() {
            let mut parts = mitigated;
            if !vul.is_empty() {
                parts.push(vul);
            }
            format!("on ({})", parts.join("; "))
        } else if !vul.is_empty() {
            format!("off ({vul})")
        } else {
            "none needed (CPU not affected)".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(entries: &[(&str, &str)], cmdline: Option<&str>) -> Mitigations {
        Mitigations {
            entries: entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cmdline: cmdline.map(str::to_string),
            params: Vec::new(),
        }
    }

    fn detailed(entries: &[(&str, &str)], cmdline: &str) -> String {
        Mitigations {
            params: mitigation_params(cmdline),
            ..m(entries, cmdline_mitigations(cmdline).as_deref())
        }
        .detail()
    }

    #[test]
    fn details_sysfs_and_cmdline() {
        let vulns = [
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
        ];
        let s = detailed(
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
    fn details_off_and_unreadable() {
        let s = detailed(
            &[("mds", "Vulnerable: Clear CPU buffers attempted")],
            "mitigations=off",
        );
        assert_eq!(s, "mitigations=off; vulnerable: mds; 0 not affected");
        let s = detailed(&[], "");
        assert!(s.starts_with("kernel default mitigations; vulnerability state not readable"));
    }

    #[test]
    fn summaries() {
        let on = m(
            &[
                ("meltdown", "Not affected"),
                ("spectre_v2", "Mitigation: Retpolines; STIBP: disabled"),
                ("spec_store_bypass", "Vulnerable"),
            ],
            Some("auto"),
        );
        assert_eq!(
            on.summary(),
            "on (spectre_v2: Retpolines; vulnerable: spec_store_bypass)"
        );
        assert_eq!(
            m(&[("spectre_v2", "Vulnerable")], Some("off")).summary(),
            "off (mitigations=off)"
        );
        assert_eq!(
            m(&[("mds", "Not affected")], None).summary(),
            "none needed (CPU not affected)"
        );
        assert_eq!(
            m(&[("mds", "Vulnerable: no microcode")], None).summary(),
            "off (vulnerable: mds)"
        );
        assert!(m(&[], None).summary().starts_with("unknown"));
    }

    #[test]
    fn cmdline_switch() {
        assert_eq!(
            cmdline_mitigations("ro mitigations=auto,nosmt quiet").as_deref(),
            Some("auto,nosmt")
        );
        assert_eq!(cmdline_mitigations("ro -- mitigations=off"), None);
        assert_eq!(cmdline_mitigations("ro quiet"), None);
    }
}
