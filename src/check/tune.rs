//! `check --tune`: the safe settings set for a command through the restore journal, so that
//! they come back even when costlab is killed.

use std::path::{Path, PathBuf};

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::machine::restore::{self, SettingGuard};

/// The safe settings `--tune` applies: governor performance, boost off, numa_balancing off.
/// Returns the guards (dropping them restores) and a note per change.
pub fn tune() -> Result<(Vec<SettingGuard>, Vec<String>)> {
    if !rustix::process::geteuid().is_root() {
        return Err(usage(
            "--tune changes system settings and needs root: run it as root, or drop --tune",
        ));
    }
    let mut guards = Vec::new();
    let mut notes = Vec::new();
    let mut set = |path: PathBuf, value: &str, what: String| -> Result<()> {
        if !path.exists() {
            return Ok(());
        }
        let old = restore::read_setting(&path)?;
        if old == value {
            return Ok(());
        }
        guards.push(restore::change_setting(&path, value, &what)?);
        notes.push(format!("{what}: {old} -> {value} for the command"));
        Ok(())
    };
    for c in 0..1024 {
        let p = PathBuf::from(format!(
            "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
        ));
        if !p.exists() {
            if !Path::new(&format!("/sys/devices/system/cpu/cpu{c}")).exists() {
                break;
            }
            continue;
        }
        set(p, "performance", format!("CPU {c} governor"))?;
    }
    set(
        PathBuf::from("/sys/devices/system/cpu/cpufreq/boost"),
        "0",
        "boost".into(),
    )?;
    set(
        PathBuf::from("/sys/devices/system/cpu/intel_pstate/no_turbo"),
        "1",
        "turbo (intel_pstate no_turbo)".into(),
    )?;
    set(
        PathBuf::from("/proc/sys/kernel/numa_balancing"),
        "0",
        "numa_balancing".into(),
    )?;
    if notes.is_empty() {
        notes.push(
            "tune: nothing to change here (no cpufreq governor or boost control exposed, numa_balancing already off or absent)"
                .to_string(),
        );
    }
    Ok((guards, notes))
}
