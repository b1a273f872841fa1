//! Naming a sample: a kernel stack's subsystem (from its leaf, then from the frames that called
//! it), a user sample's DSO and function, and the user classes the labs price (a Go runtime's
//! GC, memcpy/memset, the allocator, atomics and locks).

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

fn any(name: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| name.starts_with(p))
}

/// The leaf's own kind, where the function says it whatever called it.
fn leaf_kind(f: &str) -> Option<&'static str> {
    if any(
        f,
        &[
            "bpf_prog_",
            "bpf_trace_run",
            "__bpf_trace",
            "bpf_get_",
            "bpf_map_",
            "htab_",
            "percpu_array",
            "bpf_ktime",
            "bpf_probe_read",
            "__htab",
            "perf_swevent",
            "perf_event_",
            "__perf_event",
            "perf_prepare",
            "perf_output",
            "perf_callchain",
            "get_perf_callchain",
            "perf_tp_",
            "__perf_",
            "bpf_overflow",
        ],
    ) {
        return Some("tracing");
    }
    if any(
        f,
        &[
            "copy_user",
            "_copy_to_user",
            "_copy_from_user",
            "__copy_user",
            "rep_movs_alternative",
            "copy_page_to_iter",
            "copy_page_from_iter",
            "copyin",
            "copyout",
            "__get_user",
            "__put_user",
            "strncpy_from_user",
            "copy_to_user",
            "copy_from_user",
            "_copy_to_iter",
            "_copy_from_iter",
            "clear_user",
            "rep_stos_alternative",
        ],
    ) {
        return Some("user copies");
    }
    if f.contains("spin_lock")
        || f.contains("spin_unlock")
        || any(
            f,
            &[
                "queued_spin",
                "queued_read",
                "queued_write",
                "native_queued",
                "__pv_queued",
                "mutex_",
                "__mutex",
                "down_read",
                "down_write",
                "up_read",
                "up_write",
                "rwsem",
                "osq_lock",
                "_raw_",
                "__raw_",
                "rt_mutex",
            ],
        )
    {
        return Some("locks");
    }
    if any(
        f,
        &[
            "clear_page",
            "__clear_page",
            "zero_user",
            "folio_zero",
            "clear_huge_page",
            "clear_highpage",
        ],
    ) {
        return Some("mm");
    }
    if any(
        f,
        &[
            "__schedule",
            "schedule",
            "pick_next",
            "finish_task_switch",
            "__switch_to",
            "context_switch",
            "update_curr",
            "enqueue_",
            "dequeue_",
            "try_to_wake_up",
            "ttwu_",
            "select_task_rq",
            "update_load_avg",
            "set_next_entity",
            "put_prev",
            "sched_",
            "psi_",
            "native_sched_clock",
            "update_rq_clock",
        ],
    ) {
        return Some("scheduler");
    }
    if any(
        f,
        &[
            "entry_SYSCALL",
            "do_syscall_64",
            "syscall_exit_to_user_mode",
            "syscall_return_via_sysret",
            "entry_SYSRETQ",
            "__x64_sys_",
            "x64_sys_call",
            "syscall_enter_from_user_mode",
            "exit_to_user_mode",
            "irqentry_exit_to_user_mode",
            "swapgs",
            "restore_regs_and_return",
            "arch_exit_to_user_mode",
            "__rseq",
            "rseq_",
            "fpregs_",
            "switch_fpu",
            "error_entry",
            "error_return",
            "asm_exc_page_fault",
        ],
    ) {
        return Some("entry/exit");
    }
    None
}

/// The kind a calling frame gives the work under it.
fn context_kind(f: &str) -> Option<&'static str> {
    if any(
        f,
        &[
            "filemap_",
            "find_get_",
            "find_lock_",
            "pagecache_",
            "__filemap",
            "add_to_page_cache",
            "page_cache_",
            "readahead",
            "ondemand_readahead",
            "truncate_",
            "folio_mark",
            "__folio_",
            "mark_page_accessed",
            "folio_add_lru",
            "lru_add",
            "generic_perform_write",
            "balance_dirty",
            "writeback",
            "wb_",
            "mapping_",
        ],
    ) {
        return Some("page cache");
    }
    if any(
        f,
        &[
            "tcp_",
            "udp_",
            "sock_",
            "sk_",
            "__sk_",
            "inet_",
            "ip_",
            "ip6_",
            "__ip",
            "net_",
            "__netif",
            "netif_",
            "napi_",
            "skb_",
            "__skb",
            "unix_",
            "__sys_sendto",
            "__sys_recvfrom",
            "__sys_sendmsg",
            "__sys_recvmsg",
            "sock",
            "__sock",
            "dev_queue_xmit",
            "__dev_queue",
            "virtnet_",
            "loopback_",
            "nf_",
            "tcp",
            "__tcp",
            "__inet",
        ],
    ) {
        return Some("networking");
    }
    if any(
        f,
        &[
            "handle_mm_fault",
            "__handle_mm_fault",
            "do_anonymous_page",
            "do_fault",
            "do_read_fault",
            "do_cow_fault",
            "do_shared_fault",
            "do_wp_page",
            "wp_page",
            "exc_page_fault",
            "do_user_addr_fault",
            "do_huge_pmd",
            "__do_huge_pmd",
            "alloc_pages",
            "__alloc_pages",
            "alloc_anon_folio",
            "vma_alloc_folio",
            "folio_alloc",
            "get_page_from_freelist",
            "rmqueue",
            "free_pages",
            "__free_pages",
            "free_unref",
            "free_pcppages",
            "shrink_",
            "try_to_free",
            "kswapd",
            "do_try_to_free",
            "mmap_region",
            "do_mmap",
            "__do_munmap",
            "do_vmi",
            "vms_",
            "__vm_munmap",
            "unmap_",
            "zap_",
            "tlb_",
            "flush_tlb",
            "native_flush_tlb",
            "mprotect",
            "change_p",
            "vma_",
            "__vma",
            "pte_",
            "pmd_",
            "__pte",
            "__pmd",
            "page_remove_rmap",
            "folio_remove_rmap",
            "release_pages",
            "exit_mmap",
            "mm_",
            "__mm",
            "__split_huge",
            "khugepaged",
            "compact",
            "migrate_",
            "kmem_cache",
            "__kmem_cache",
            "kmalloc",
            "__kmalloc",
            "kfree",
            "slab_",
            "___slab",
            "__slab",
            "memcg_",
            "mem_cgroup",
            "__mem_cgroup",
            "__memcg",
            "do_brk",
            "brk",
            "dup_mm",
            "copy_page_range",
            "copy_pte",
            "wp_",
            "set_pte",
            "lock_vma",
            "percpu_counter",
        ],
    ) {
        return Some("mm");
    }
    if any(
        f,
        &[
            "vfs_",
            "ext4_",
            "xfs_",
            "btrfs_",
            "path_",
            "do_sys_open",
            "do_filp_open",
            "filename_",
            "getname",
            "link_path_walk",
            "lookup_",
            "walk_component",
            "d_",
            "__d_",
            "dput",
            "iput",
            "inode",
            "__inode",
            "generic_file",
            "generic_write",
            "ksys_",
            "new_sync",
            "fsnotify",
            "__fsnotify",
            "file_",
            "__fput",
            "fput",
            "iterate_dir",
            "dcache_",
            "filldir",
            "pipe_",
            "anon_pipe",
            "do_pipe",
            "jbd2",
            "__ext4",
            "ext4",
            "fat_",
            "tmpfs",
            "shmem_",
            "proc_",
            "seq_",
            "kernfs_",
            "sysfs_",
            "blkdev_",
            "block_",
            "bio_",
            "submit_bio",
            "blk_",
            "mpage_",
            "iomap_",
            "do_dentry_open",
            "chmod",
            "do_truncate",
            "notify_change",
            "security_file",
            "security_inode",
            "apparmor",
            "selinux",
            "may_open",
            "do_open",
            "open_last",
            "complete_walk",
            "terminate_walk",
            "step_into",
            "pick_link",
            "__lookup",
            "do_readlinkat",
            "do_statx",
            "cp_new_stat",
            "do_utimes",
            "fd_install",
            "alloc_fd",
            "close_fd",
            "__close_fd",
            "filp_close",
            "do_dup2",
            "ksys_dup",
            "__fget",
            "fget",
            "fdget",
            "__fdget",
            "epoll",
            "ep_",
            "do_epoll",
            "do_select",
            "do_sys_poll",
            "eventfd",
            "timerfd",
            "splice",
            "do_splice",
            "__splice",
            "io_uring",
            "io_",
            "do_iter",
            "rw_verify",
            "do_readv",
            "do_writev",
            "do_sendfile",
            "vfs",
            "generic_fillattr",
            "touch_atime",
            "atime_needs",
            "file_update_time",
            "__mark_inode",
            "mnt_",
            "__mnt",
            "setattr",
            "do_faccessat",
            "do_sys_ftruncate",
            "do_fchmodat",
            "chown",
            "do_unlinkat",
            "do_rmdir",
            "do_mkdirat",
            "do_renameat",
            "do_linkat",
            "do_symlinkat",
            "__x64_sys_getdents",
            "getdents",
            "ext4_readdir",
            "dx_",
            "htree",
            "crc32c",
            "ext4_getblk",
            "__ext4_find",
            "mb_",
            "ext4_mb",
        ],
    ) {
        return Some("fs/VFS");
    }
    if any(
        f,
        &[
            "schedule",
            "do_nanosleep",
            "hrtimer_nanosleep",
            "futex_wait",
            "do_wait",
            "kernel_wait",
            "wait_",
            "__wait",
            "do_sched_yield",
            "__x64_sys_sched_yield",
            "io_schedule",
        ],
    ) {
        return Some("scheduler");
    }
    if any(f, &["futex_", "__futex", "do_futex"]) {
        return Some("locks");
    }
    if any(
        f,
        &[
            "asm_sysvec",
            "sysvec_",
            "__sysvec",
            "asm_common_interrupt",
            "common_interrupt",
            "handle_irq",
            "__handle_irq",
            "handle_edge_irq",
            "handle_fasteoi",
            "irq_exit",
            "__irq_exit",
            "handle_softirqs",
            "__do_softirq",
            "do_softirq",
            "run_timer_softirq",
            "hrtimer_interrupt",
            "__hrtimer_run",
            "tick_",
            "update_process_times",
            "rcu_core",
            "rcu_do_batch",
            "smp_call_function",
            "generic_smp_call",
            "flush_smp_call",
        ],
    ) {
        return Some("interrupts");
    }
    if any(
        f,
        &[
            "do_execve",
            "do_execveat",
            "bprm_",
            "load_elf_binary",
            "begin_new_exec",
            "exec_",
            "kernel_clone",
            "copy_process",
            "do_exit",
            "do_group_exit",
            "release_task",
            "wake_up_new_task",
            "__x64_sys_clone",
            "__do_sys_clone",
            "ret_from_fork",
        ],
    ) {
        return Some("mm");
    }
    None
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

/// The priced class of a user sample's function, where it is one the labs price.
pub fn user_class(sym: &str, dso: &str) -> Option<&'static str> {
    let go = sym.starts_with("runtime.");
    if go
        && any(
            sym,
            &[
                "runtime.gcBgMarkWorker",
                "runtime.gcDrain",
                "runtime.scanobject",
                "runtime.scanblock",
                "runtime.greyobject",
                "runtime.markroot",
                "runtime.findObject",
                "runtime.heapBitsSetType",
                "runtime.(*gcWork)",
                "runtime.(*gcBits)",
                "runtime.(*mspan).sweep",
                "runtime.sweepone",
                "runtime.bgsweep",
                "runtime.gcMark",
                "runtime.gcmarknewobject",
                "runtime.wbBuf",
                "runtime.gcWriteBarrier",
                "runtime.bulkBarrier",
                "runtime.typePointers",
                "runtime.(*mheap).reclaim",
                "runtime.bgscavenge",
                "runtime.(*pageAlloc).scavenge",
                "runtime.spanOf",
                "runtime.gcStart",
                "runtime.gcBgMarkWorker",
                "runtime.scanstack",
                "runtime.scanframeworker",
                "runtime.(*stkframe)",
                "runtime.tryDeferToSpanScan",
                "runtime.scanSpan",
                "runtime.(*spanInlineMarkBits)",
            ],
        )
    {
        return Some("go-gc");
    }
    if any(
        sym,
        &[
            "__memmove",
            "__memcpy",
            "__memset",
            "memcpy",
            "memmove",
            "memset",
            "__mempcpy",
            "runtime.memmove",
            "runtime.memclrNoHeapPointers",
            "__memcmp",
            "bzero",
            "__bzero",
            "wmemset",
        ],
    ) {
        return Some("memcpy-memset");
    }
    if any(
        sym,
        &[
            "malloc",
            "free",
            "_int_malloc",
            "_int_free",
            "calloc",
            "realloc",
            "__libc_malloc",
            "__libc_free",
            "__libc_calloc",
            "__libc_realloc",
            "tcache_",
            "malloc_consolidate",
            "sysmalloc",
            "_int_realloc",
            "cfree",
            "je_",
            "tc_",
            "mi_",
            "runtime.mallocgc",
            "runtime.(*mcache)",
            "runtime.(*mcentral)",
            "runtime.(*mheap).alloc",
            "runtime.newobject",
            "runtime.makeslice",
            "runtime.growslice",
            "runtime.nextFreeFast",
            "runtime.(*mspan).nextFreeIndex",
            "PyObject_Malloc",
            "PyObject_Free",
            "_PyObject_Malloc",
            "_PyObject_Free",
            "pymalloc",
            "operator new",
            "operator delete",
        ],
    ) {
        return Some("allocator");
    }
    if any(
        sym,
        &[
            "pthread_mutex",
            "__pthread_mutex",
            "___pthread_mutex",
            "__lll_lock",
            "__lll_unlock",
            "pthread_spin",
            "pthread_rwlock",
            "__pthread_rwlock",
            "pthread_cond",
            "__pthread_cond",
            "sync.(*Mutex)",
            "sync.(*RWMutex)",
            "runtime.lock2",
            "runtime.unlock2",
            "runtime.lock",
            "runtime.unlock",
            "runtime.futex",
            "runtime/internal/atomic",
            "internal/runtime/atomic",
            "sync/atomic",
            "__atomic",
            "atomic_",
        ],
    ) {
        return Some("atomics-locks");
    }
    let _ = dso;
    None
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
        assert_eq!(user_class("runtime.scanobject", "x"), Some("go-gc"));
        assert_eq!(
            user_class("__memmove_avx_unaligned_erms", "libc.so.6"),
            Some("memcpy-memset")
        );
        assert_eq!(user_class("_int_malloc", "libc.so.6"), Some("allocator"));
        assert_eq!(user_class("runtime.mallocgc", "x"), Some("allocator"));
        assert_eq!(
            user_class("pthread_mutex_lock", "libc.so.6"),
            Some("atomics-locks")
        );
        assert_eq!(user_class("deflate_slow", "gzip"), None);
        assert_eq!(dso_name("/usr/lib/x86_64-linux-gnu/libc.so.6"), "libc.so.6");
    }
}
