//! The per-task speculation controls: what `prctl(PR_GET_SPECULATION_CTRL)` and
//! /proc/self/status say of store bypass and indirect branch speculation, and whether the
//! kernel lets a task force each on or off (`PR_SPEC_PRCTL`). Where it does not, the control is
//! set at boot (`mitigations=`, `spec_store_bypass_disable=`, `spectre_v2_user=`) and can be
//! compared only across boots.
//!
//! Reading only; setting a control belongs to the process that is to run under it (the
//! mitigations lab sets it in a child between fork and exec).

use serde::{Deserialize, Serialize};

/// A speculation control a task may be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// Speculative store bypass (Spectre v4): SSBD.
    StoreBypass,
    /// Indirect branch speculation (Spectre v2 user-to-user): STIBP/IBPB.
    IndirectBranch,
}

impl Control {
    pub const ALL: [Control; 2] = [Control::StoreBypass, Control::IndirectBranch];

    /// The name in case keys and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Control::StoreBypass => "store-bypass",
            Control::IndirectBranch => "indirect-branch",
        }
    }

    pub fn of(name: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.name() == name)
    }

    /// prctl's `which` argument.
    pub fn which(self) -> libc::c_ulong {
        match self {
            Control::StoreBypass => libc::PR_SPEC_STORE_BYPASS as libc::c_ulong,
            Control::IndirectBranch => libc::PR_SPEC_INDIRECT_BRANCH as libc::c_ulong,
        }
    }

    /// The prctl constant's name, for messages.
    pub fn which_name(self) -> &'static str {
        match self {
            Control::StoreBypass => "PR_SPEC_STORE_BYPASS",
            Control::IndirectBranch => "PR_SPEC_INDIRECT_BRANCH",
        }
    }

    /// Its line's key in /proc/PID/status.
    pub fn status_key(self) -> &'static str {
        match self {
            Control::StoreBypass => "Speculation_Store_Bypass",
            Control::IndirectBranch => "SpeculationIndirectBranch",
        }
    }

    /// Its entry in /sys/devices/system/cpu/vulnerabilities.
    pub fn vulnerability(self) -> &'static str {
        match self {
            Control::StoreBypass => "spec_store_bypass",
            Control::IndirectBranch => "spectre_v2",
        }
    }
}

/// The flags `PR_GET_SPECULATION_CTRL` returns, read apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flags(pub u32);

impl Flags {
    /// The task may change the control (`PR_SPEC_PRCTL`).
    pub fn per_task(self) -> bool {
        self.0 & libc::PR_SPEC_PRCTL != 0
    }
    /// The CPU is not affected (no bit set: `PR_SPEC_NOT_AFFECTED`).
    pub fn not_affected(self) -> bool {
        self.0 == 0
    }
    /// Speculation allowed: the mitigation is off for this task.
    pub fn enabled(self) -> bool {
        self.0 & libc::PR_SPEC_ENABLE != 0
    }
    /// Speculation disabled: the mitigation is on for this task.
    pub fn disabled(self) -> bool {
        self.0 & (libc::PR_SPEC_DISABLE | libc::PR_SPEC_FORCE_DISABLE) != 0
    }
    pub fn forced(self) -> bool {
        self.0 & libc::PR_SPEC_FORCE_DISABLE != 0
    }

    /// The bits by their prctl names: "PR_SPEC_PRCTL | PR_SPEC_ENABLE", "PR_SPEC_NOT_AFFECTED".
    pub fn names(self) -> String {
        if self.not_affected() {
            return "PR_SPEC_NOT_AFFECTED".into();
        }
        let bits = [
            (libc::PR_SPEC_PRCTL, "PR_SPEC_PRCTL"),
            (libc::PR_SPEC_ENABLE, "PR_SPEC_ENABLE"),
            (libc::PR_SPEC_DISABLE, "PR_SPEC_DISABLE"),
            (libc::PR_SPEC_FORCE_DISABLE, "PR_SPEC_FORCE_DISABLE"),
            (libc::PR_SPEC_DISABLE_NOEXEC, "PR_SPEC_DISABLE_NOEXEC"),
        ];
        let mut known = 0u32;
        let mut names: Vec<String> = Vec::new();
        for (bit, name) in bits {
            known |= bit;
            if self.0 & bit != 0 {
                names.push(name.into());
            }
        }
        if self.0 & !known != 0 {
            names.push(format!("0x{:x}", self.0 & !known));
        }
        names.join(" | ")
    }
}

/// What a task is offered for one control, as read now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub control: Control,
    /// `PR_GET_SPECULATION_CTRL`'s flags, or the errno name it failed with (EINVAL: a kernel
    /// or architecture without the control).
    pub prctl: Result<Flags, String>,
    /// The control's line in /proc/self/status ("vulnerable", "always enabled"), if any.
    pub status: Option<String>,
    /// The control's /sys/devices/system/cpu/vulnerabilities entry, if any.
    pub vulnerability: Option<String>,
}

/// What to do where a control is boot-time only.
pub const BOOT_WORKFLOW: &str = "boot-time only here: boot once with `mitigations=off` on the \
     kernel command line and once without, `costlab run` on each boot, then `costlab compare \
     RUN_A RUN_B` names the difference and what it moved";

impl Offer {
    /// The task may force the control on and off.
    pub fn per_task(&self) -> bool {
        matches!(self.prctl, Ok(f) if f.per_task())
    }

    /// What the kernel reports, in one clause: "prctl(PR_GET_SPECULATION_CTRL,
    /// PR_SPEC_STORE_BYPASS) = PR_SPEC_ENABLE; /proc/self/status Speculation_Store_Bypass:
    /// vulnerable; spec_store_bypass: Vulnerable".
    pub fn reported(&self) -> String {
        let prctl = match &self.prctl {
            Ok(f) => f.names(),
            Err(e) => format!("failed: {e}"),
        };
        let mut s = format!(
            "prctl(PR_GET_SPECULATION_CTRL, {}) = {prctl}",
            self.control.which_name()
        );
        if let Some(st) = &self.status {
            s.push_str(&format!(
                "; /proc/self/status {}: {st}",
                self.control.status_key()
            ));
        }
        if let Some(v) = &self.vulnerability {
            s.push_str(&format!("; {}: {v}", self.control.vulnerability()));
        }
        s
    }

    /// Why this control cannot be measured on and off here, in one line; None where it can.
    pub fn why_not(&self) -> Option<String> {
        let name = self.control.name();
        let reported = self.reported();
        match &self.prctl {
            Ok(f) if f.per_task() => None,
            Ok(f) if f.not_affected() => Some(format!(
                "{name}: the CPU is not affected, nothing to force on or off ({reported})"
            )),
            Ok(f) => {
                let state = if f.disabled() {
                    "speculation always disabled (mitigated)"
                } else {
                    "speculation always enabled"
                };
                Some(format!(
                    "{name}: no per-task control, {state} for every task ({reported}; no PR_SPEC_PRCTL): {BOOT_WORKFLOW}"
                ))
            }
            Err(_) => Some(format!(
                "{name}: this kernel offers no speculation control ({reported}): {BOOT_WORKFLOW}"
            )),
        }
    }
}

/// The speculation lines of a /proc/PID/status text, as (key, value).
pub fn status_lines(status: &str) -> Vec<(String, String)> {
    status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.starts_with("Speculation"))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// An offer from what was read: the prctl result (flags, or a negative return with its errno),
/// the status text, the vulnerability entry.
pub fn offer_from(
    control: Control,
    prctl: Result<i32, i32>,
    status: &str,
    vulnerability: Option<String>,
) -> Offer {
    let prctl = match prctl {
        Ok(flags) => Ok(Flags(flags as u32)),
        Err(errno) => Err(errno_name(errno)),
    };
    let status = status_lines(status)
        .into_iter()
        .find(|(k, _)| k == control.status_key())
        .map(|(_, v)| v);
    Offer {
        control,
        prctl,
        status,
        vulnerability,
    }
}

fn errno_name(errno: i32) -> String {
    match errno {
        libc::EINVAL => "EINVAL".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::EPERM => "EPERM".into(),
        libc::ENXIO => "ENXIO".into(),
        e => std::io::Error::from_raw_os_error(e).to_string(),
    }
}

/// `PR_GET_SPECULATION_CTRL` for `control` in this task: its flags, or the errno.
pub fn get(control: Control) -> Result<i32, i32> {
    // SAFETY: PR_GET_SPECULATION_CTRL reads the calling task's state; the unused arguments
    // must be zero.
    let r = unsafe {
        libc::prctl(
            libc::PR_GET_SPECULATION_CTRL,
            control.which(),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

/// What this task is offered for `control`, read now.
pub fn offer(control: Control) -> Offer {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let vuln = std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/vulnerabilities/{}",
        control.vulnerability()
    ))
    .ok()
    .map(|s| s.trim().to_string());
    offer_from(control, get(control), &status, vuln)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's /proc/self/status (a Firecracker guest, Linux 6.18), trimmed.
    const STATUS_HERE: &str = "Name:\tcat\nSeccomp:\t0\nSeccomp_filters:\t0\n\
        Speculation_Store_Bypass:\tvulnerable\nSpeculationIndirectBranch:\talways enabled\n\
        Cpus_allowed:\t3\n";

    /// A host booted with spec_store_bypass_disable=prctl and spectre_v2_user=prctl, after the
    /// task forced SSBD on.
    const STATUS_PRCTL: &str = "Speculation_Store_Bypass:\tthread force mitigated\n\
        SpeculationIndirectBranch:\tconditional enabled\n";

    #[test]
    fn this_machine_offers_no_per_task_control_and_says_why_in_one_line() {
        // PR_GET returned 2 (PR_SPEC_ENABLE) for both here.
        let o = offer_from(
            Control::StoreBypass,
            Ok(2),
            STATUS_HERE,
            Some("Vulnerable".into()),
        );
        assert!(!o.per_task());
        assert_eq!(o.status.as_deref(), Some("vulnerable"));
        let line = o.why_not().unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(
            line,
            format!(
                "store-bypass: no per-task control, speculation always enabled for every task \
                 (prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS) = PR_SPEC_ENABLE; \
                 /proc/self/status Speculation_Store_Bypass: vulnerable; spec_store_bypass: \
                 Vulnerable; no PR_SPEC_PRCTL): {BOOT_WORKFLOW}"
            )
        );
        let ib = offer_from(Control::IndirectBranch, Ok(2), STATUS_HERE, None);
        assert_eq!(ib.status.as_deref(), Some("always enabled"));
        assert!(ib
            .why_not()
            .unwrap()
            .contains("SpeculationIndirectBranch: always enabled"));
    }

    #[test]
    fn a_prctl_mode_kernel_offers_the_control() {
        let flags = (libc::PR_SPEC_PRCTL | libc::PR_SPEC_FORCE_DISABLE) as i32;
        let o = offer_from(Control::StoreBypass, Ok(flags), STATUS_PRCTL, None);
        assert!(o.per_task());
        assert_eq!(o.why_not(), None);
        let Ok(f) = o.prctl else { panic!() };
        assert!(f.disabled() && f.forced() && !f.enabled());
        assert_eq!(f.names(), "PR_SPEC_PRCTL | PR_SPEC_FORCE_DISABLE");
        assert_eq!(o.status.as_deref(), Some("thread force mitigated"));
        let ib = offer_from(
            Control::IndirectBranch,
            Ok((libc::PR_SPEC_PRCTL | libc::PR_SPEC_ENABLE) as i32),
            STATUS_PRCTL,
            None,
        );
        assert!(ib.per_task());
        assert_eq!(ib.status.as_deref(), Some("conditional enabled"));
    }

    #[test]
    fn not_affected_always_on_and_no_prctl_read_apart() {
        let na = offer_from(Control::StoreBypass, Ok(0), "", None);
        assert!(na.why_not().unwrap().contains("not affected"));
        assert_eq!(na.status, None);
        let always = offer_from(
            Control::IndirectBranch,
            Ok(libc::PR_SPEC_FORCE_DISABLE as i32),
            "SpeculationIndirectBranch:\talways disabled\n",
            None,
        );
        let line = always.why_not().unwrap();
        assert!(
            line.contains("speculation always disabled (mitigated)")
                && line.contains("always disabled"),
            "{line}"
        );
        let none = offer_from(Control::StoreBypass, Err(libc::EINVAL), "", None);
        let line = none.why_not().unwrap();
        assert!(
            line.contains("failed: EINVAL") && line.contains("mitigations=off"),
            "{line}"
        );
        assert_eq!(Flags(0x40 | 2).names(), "PR_SPEC_ENABLE | 0x40");
        assert_eq!(
            Control::of("indirect-branch"),
            Some(Control::IndirectBranch)
        );
        assert_eq!(Control::of("mds"), None);
    }

    #[test]
    fn the_live_reading_parses() {
        for c in Control::ALL {
            let o = offer(c);
            // Per task or not, the reading is one line either way.
            assert!(o.why_not().is_none_or(|l| !l.contains('\n')));
        }
    }
}
