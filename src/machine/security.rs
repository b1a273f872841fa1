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
    Mitigations {
        entries,
        cmdline: root
            .value("proc/cmdline")
            .and_then(|c| cmdline_mitigations(&c)),
    }
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
        }
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
