//! Naming a sample: a kernel stack's subsystem (from its leaf, then from the frames that called
//! it), a user sample's DSO and function, and the user classes the labs price (a Go runtime's
//! GC, memcpy/memset, the allocator, atomics and locks). What each function is comes from
//! `costlab_core::symbols`; this file says it in price's words.

use costlab_core::symbols::{self, kernel, Area, GoRuntime, Tier, UserRole};

/// One frame: its function ("" where perf could not name it) and its DSO.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub ip: u64,
    pub sym: String,
    pub dso: String,
}

impl Frame {
    /// In the kernel's half of the address space (its JIT-ed BPF programs included).
    pub fn is_kernel(&self) -> bool {
        self.ip >= 0xffff_8000_0000_0000 || self.dso.starts_with("[kernel")
    }
    pub fn named(&self) -> bool {
        !self.sym.is_empty() && self.sym != "[unknown]"
    }
}

/// The event a kernel sample ran inside, as the split names its lines: the innermost of an
/// interrupt ("irq local_timer", "irq other"), a page fault ("fault"), a syscall ("syscall
/// openat", from its `__x64_sys_` entry frame), read from the leaf outward.
pub fn inside_event(frames: &[Frame]) -> Option<String> {
    for f in frames.iter().filter(|f| f.is_kernel()) {
        let s = f.sym.as_str();
        if s == "sysvec_apic_timer_interrupt" || s == "asm_sysvec_apic_timer_interrupt" {
            return Some("irq local_timer".into());
        }
        if s.starts_with("sysvec_") || s.starts_with("common_interrupt") {
            return Some("irq other".into());
        }
        if s == "exc_page_fault" || s == "asm_exc_page_fault" {
            return Some("fault".into());
        }
        // `ksys_read` and the like: the syscall's own wrapper inlined into the dispatcher.
        for prefix in [
            "__x64_sys_",
            "__ia32_sys_",
            "__do_sys_",
            "__se_sys_",
            "ksys_",
        ] {
            if let Some(name) = s.strip_prefix(prefix) {
                return Some(format!("syscall {name}"));
            }
        }
    }
    None
}

/// What a few kernel functions that a sample inside a slow call may name are doing, in
/// words, for a reading.
pub fn meaning(func: &str) -> Option<&'static str> {
    // The few whose meaning is the function's own, then the symbol table's areas.
    let own = match func {
        "recently_deleted" | "find_inode_bit" => {
            Some("ext4 with no journal passing over inodes deleted in the last seconds to find a free one (a create right after many deletions)")
        }
        "native_write_msr" => Some("a timer reprogrammed (an MSR write: a VM exit on a guest)"),
        "smp_call_function_many_cond" => {
            Some("waiting on other CPUs (an IPI: a TLB shootdown or a cross-CPU call)")
        }
        "_raw_spin_unlock_irqrestore" | "_raw_spin_unlock_irq" | "finish_task_switch.isra.0" => {
            Some("interrupts enabled again after a lock or a switch: time the guest's pending interrupts land on")
        }
        _ => None,
    };
    own.or_else(|| match kernel::area(func)? {
        Area::PageZero => Some("zeroing new pages"),
        Area::CopyOut | Area::CopyIn | Area::UserCopy => Some("copying to or from user memory"),
        _ => None,
    })
}

pub const SUBSYSTEMS: [&str; 11] = [
    "fs/VFS",
    "user copies",
    "page cache",
    "networking",
    "mm",
    "scheduler",
    "locks",
    "entry/exit",
    "interrupts",
    "tracing",
    "other",
];

/// Price's subsystem for a kernel area; None where the area does not decide by itself (a
/// timer being armed: the frames that called it say what for).
pub fn subsystem(area: Area) -> Option<&'static str> {
    Some(match area {
        Area::Tracing => "tracing",
        Area::CopyOut | Area::CopyIn | Area::UserCopy | Area::UserCopyCheck => "user copies",
        Area::Locks | Area::Futex => "locks",
        Area::PageZero | Area::PageAlloc | Area::Slab | Area::Memcg | Area::Vm | Area::Process => {
            "mm"
        }
        Area::SchedCore | Area::SchedWait => "scheduler",
        Area::SyscallEntry => "entry/exit",
        Area::PageCache => "page cache",
        Area::NetPoll | Area::Net => "networking",
        Area::Uring | Area::Epoll | Area::FileCalls | Area::Fs => "fs/VFS",
        Area::TimerIrq | Area::Irq | Area::Softirq => "interrupts",
        Area::Timer => return None,
    })
}

/// The leaf's own kind, where the function says it whatever called it.
fn leaf_kind(f: &str) -> Option<&'static str> {
    kernel::area_in(Tier::Leaf, f).and_then(subsystem)
}

/// The kind a calling frame gives the work under it.
fn context_kind(f: &str) -> Option<&'static str> {
    kernel::area_in(Tier::Caller, f).and_then(subsystem)
}

/// The subsystem of a kernel stack (`frames` leaf first, kernel frames only matter).
pub fn kernel_subsystem(frames: &[Frame]) -> &'static str {
    let kernel: Vec<&Frame> = frames.iter().take_while(|f| f.is_kernel()).collect();
    let Some(leaf) = kernel.first() else {
        return "other";
    };
    if let Some(k) = leaf_kind(&leaf.sym) {
        // Interrupt entry code under a leaf of its own says interrupts, not entry.
        if k == "entry/exit"
            && kernel
                .iter()
                .any(|f| context_kind(&f.sym) == Some("interrupts"))
        {
            return "interrupts";
        }
        return k;
    }
    kernel
        .iter()
        .find_map(|f| context_kind(&f.sym))
        .or_else(|| kernel.iter().skip(1).find_map(|f| leaf_kind(&f.sym)))
        .unwrap_or("other")
}

/// Price's class for a user role: the Go collector and its write barrier are one priced class.
pub fn priced_class(role: UserRole) -> Option<&'static str> {
    match role {
        UserRole::Go(GoRuntime::Gc | GoRuntime::WriteBarrier) => Some("go-gc"),
        UserRole::Go(GoRuntime::StackGrowth) => None,
        UserRole::MemCopy => Some("memcpy-memset"),
        UserRole::Alloc => Some("allocator"),
        UserRole::Locks => Some("atomics-locks"),
    }
}

/// The priced class of a user sample's function, where it is one the labs price.
pub fn user_class(sym: &str) -> Option<&'static str> {
    symbols::user::user_role(sym).and_then(priced_class)
}

/// A DSO's short name: the file name of its path.
pub fn dso_name(dso: &str) -> &str {
    let d = dso.trim_start_matches('(').trim_end_matches(')');
    d.rsplit('/').next().unwrap_or(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(syms: &[&str]) -> Vec<Frame> {
        syms.iter()
            .map(|s| Frame {
                ip: 0xffff_ffff_8100_0000,
                sym: s.to_string(),
                dso: "[kernel.kallsyms]".into(),
            })
            .collect()
    }

    #[test]
    fn a_kernel_sample_is_placed_in_the_innermost_event_it_ran_inside() {
        let inside = |syms: &[&str]| inside_event(&k(syms));
        assert_eq!(
            inside(&[
                "recently_deleted",
                "__ext4_new_inode",
                "__x64_sys_openat",
                "do_syscall_64"
            ])
            .as_deref(),
            Some("syscall openat")
        );
        // The wrapper inlined into the dispatcher: ksys_read is read's own frame.
        assert_eq!(
            inside(&["_copy_to_iter", "ksys_read", "do_syscall_64"]).as_deref(),
            Some("syscall read")
        );
        assert_eq!(
            inside(&["__do_sys_newfstatat", "do_syscall_64"]).as_deref(),
            Some("syscall newfstatat")
        );
        // A fault taken inside a syscall is the fault's; a tick inside either is the tick's.
        assert_eq!(
            inside(&["clear_page_erms", "exc_page_fault", "ksys_read"]).as_deref(),
            Some("fault")
        );
        assert_eq!(
            inside(&[
                "native_write_msr",
                "sysvec_apic_timer_interrupt",
                "exc_page_fault"
            ])
            .as_deref(),
            Some("irq local_timer")
        );
        assert_eq!(inside(&["schedule", "worker_thread"]), None);
        assert!(meaning("recently_deleted").unwrap().contains("no journal"));
        assert_eq!(meaning("memcpy"), None);
        // The generic ones come from the symbol table's areas.
        assert_eq!(meaning("clear_page_erms"), Some("zeroing new pages"));
        for f in ["_copy_to_iter", "_copy_from_iter", "rep_movs_alternative"] {
            assert_eq!(meaning(f), Some("copying to or from user memory"), "{f}");
        }
    }

    #[test]
    fn kernel_stacks_are_classed_by_leaf_then_by_caller() {
        assert_eq!(
            kernel_subsystem(&k(&[
                "__d_lookup_rcu",
                "lookup_fast",
                "walk_component",
                "path_lookupat",
                "vfs_statx",
                "do_syscall_64"
            ])),
            "fs/VFS"
        );
        assert_eq!(
            kernel_subsystem(&k(&[
                "rep_movs_alternative",
                "_copy_to_iter",
                "filemap_read",
                "vfs_read"
            ])),
            "user copies"
        );
        assert_eq!(
            kernel_subsystem(&k(&[
                "xas_load",
                "filemap_get_entry",
                "filemap_read",
                "vfs_read"
            ])),
            "page cache"
        );
        assert_eq!(
            kernel_subsystem(&k(&[
                "clear_page_erms",
                "alloc_anon_folio",
                "do_anonymous_page",
                "handle_mm_fault"
            ])),
            "mm"
        );
        assert_eq!(
            kernel_subsystem(&k(&["_raw_spin_lock", "tcp_sendmsg"])),
            "locks"
        );
        assert_eq!(
            kernel_subsystem(&k(&["finish_task_switch", "__schedule", "schedule"])),
            "scheduler"
        );
        assert_eq!(
            kernel_subsystem(&k(&["tcp_ack", "tcp_rcv_established"])),
            "networking"
        );
        assert_eq!(kernel_subsystem(&k(&["entry_SYSCALL_64"])), "entry/exit");
        assert_eq!(kernel_subsystem(&k(&["mystery_fn"])), "other");
        assert_eq!(
            kernel_subsystem(&k(&["bpf_prog_63a6171a84543127", "bpf_trace_run2"])),
            "tracing"
        );
        assert_eq!(kernel_subsystem(&[]), "other");
    }

    #[test]
    fn user_functions_in_the_priced_classes() {
        assert_eq!(user_class("runtime.scanobject"), Some("go-gc"));
        assert_eq!(
            user_class("__memmove_avx_unaligned_erms"),
            Some("memcpy-memset")
        );
        assert_eq!(user_class("_int_malloc"), Some("allocator"));
        assert_eq!(user_class("runtime.mallocgc"), Some("allocator"));
        assert_eq!(user_class("pthread_mutex_lock"), Some("atomics-locks"));
        assert_eq!(user_class("deflate_slow"), None);
        assert_eq!(dso_name("/usr/lib/x86_64-linux-gnu/libc.so.6"), "libc.so.6");
    }
}
