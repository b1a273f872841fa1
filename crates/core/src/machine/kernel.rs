//! Kernel facts: version, io_uring switch, perf access, hypervisor, NUMA sysctls.

use super::sysfs::Root;

pub fn read_kernel_version(root: &Root) -> String {
    root.value("proc/sys/kernel/osrelease").unwrap_or_default()
}

/// What kernel.io_uring_disabled says; None (file absent) means the kernel predates the
/// switch (before 6.6), where io_uring is on for everyone.
pub fn io_uring_meaning(disabled: Option<u8>) -> String {
    match disabled {
        None => "enabled (kernel has no io_uring_disabled switch)".to_string(),
        Some(0) => "enabled for all processes (io_uring_disabled = 0)".to_string(),
        Some(1) => "restricted: only CAP_SYS_ADMIN or kernel.io_uring_group members (io_uring_disabled = 1)".to_string(),
        Some(2) => "disabled for all processes (io_uring_disabled = 2)".to_string(),
        Some(n) => format!("unknown setting io_uring_disabled = {n}"),
    }
}

/// What kernel.perf_event_paranoid allows an unprivileged process.
pub fn paranoid_meaning(level: i32) -> &'static str {
    match level {
        i32::MIN..=-1 => "no restrictions",
        0 => "CPU-wide events allowed, no raw tracepoints",
        1 => "own-process user and kernel counting",
        2 => "own-process user-space counting only, without CAP_PERFMON",
        _ => "perf_event_open denied without CAP_PERFMON",
    }
}

/// Hypervisor from files: /sys/hypervisor/type (Xen), then the DMI vendor (QEMU, Amazon EC2,
/// Microsoft Corporation, VMware...), when the cpuinfo flag says there is one.
pub fn read_hypervisor(root: &Root, cpuinfo_flag: bool) -> Option<String> {
    let sys_type = root.value("sys/hypervisor/type");
    let dmi = root.value("sys/class/dmi/id/sys_vendor").map(|v| {
        match root.value("sys/class/dmi/id/product_name") {
            Some(p) => format!("{v} {p}"),
            None => v,
        }
    });
    match (sys_type, dmi, cpuinfo_flag) {
        (Some(t), _, _) => Some(t),
        (None, Some(d), true) => Some(d),
        (None, None, true) => Some("unknown hypervisor (cpuinfo 'hypervisor' flag)".to_string()),
        // A DMI vendor alone does not make a VM: bare metal reports its board maker there.
        (None, _, false) => None,
    }
}

/// The hypervisor's own name from CPUID leaf 0x4000_0000 ("KVMKVMKVM", "Microsoft Hv").
#[cfg(target_arch = "x86_64")]
pub fn cpuid_hypervisor() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 1 is always valid.
    #[allow(unused_unsafe)]
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    // SAFETY: with the hypervisor bit set, leaf 0x4000_0000 is defined by the hypervisor.
    #[allow(unused_unsafe)]
    let r = unsafe { __cpuid(0x4000_0000) };
    let mut bytes = Vec::with_capacity(12);
    for w in [r.ebx, r.ecx, r.edx] {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    let name = String::from_utf8_lossy(&bytes)
        .trim_matches(char::from(0))
        .trim()
        .to_string();
    (!name.is_empty()).then(|| match name.as_str() {
        "KVMKVMKVM" => "KVM".to_string(),
        "Microsoft Hv" => "Hyper-V".to_string(),
        "VMwareVMware" => "VMware".to_string(),
        "XenVMMXenVMM" => "Xen".to_string(),
        "TCGTCGTCGTCG" => "QEMU TCG".to_string(),
        _ => name,
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub fn cpuid_hypervisor() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meanings() {
        assert!(io_uring_meaning(None).starts_with("enabled"));
        assert!(io_uring_meaning(Some(2)).starts_with("disabled"));
        assert!(io_uring_meaning(Some(1)).starts_with("restricted"));
        assert_eq!(
            paranoid_meaning(2),
            "own-process user-space counting only, without CAP_PERFMON"
        );
    }
}
