//! The kernel's functions by area. A row's tier says where it decides: a `Leaf` row names the
//! function's own work whatever called it (a copy to user space, a spin lock, the scheduler's
//! switch); a `Caller` row names the work under a calling frame (under `tcp_sendmsg` the
//! work is networking). A lab that sees only leaves (echo) reads both tiers of its one frame;
//! price reads the leaf's leaf rows, then every frame's caller rows, leaf first.

/// Where a kernel function's time goes, fine enough that each lab can map it to its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    /// BPF programs, their helpers and maps, perf's sampling.
    Tracing,
    /// Copying data out to user space on the data path (reads, receives).
    CopyOut,
    /// Copying data in from user space on the data path (writes, sends).
    CopyIn,
    /// Other user-space accesses: single values, strings, clears, the copy loop itself.
    UserCopy,
    /// Hardened usercopy's checks of the kernel buffer.
    UserCopyCheck,
    /// Spin locks, mutexes, rw-semaphores.
    Locks,
    /// Zeroing pages.
    PageZero,
    /// The scheduler's switch, wake-up and accounting.
    SchedCore,
    /// Entering and leaving the kernel.
    SyscallEntry,
    /// The page cache: lookups, readahead, dirtying, writeback.
    PageCache,
    /// The poll callbacks of sockets (what epoll runs).
    NetPoll,
    /// TCP, UDP, IP, sockets, skbs, devices, netfilter.
    Net,
    /// The page allocator.
    PageAlloc,
    /// The slab allocator.
    Slab,
    /// Memory cgroup accounting.
    Memcg,
    /// Virtual memory: faults, mappings, TLB flushes, reclaim, compaction.
    Vm,
    /// io_uring.
    Uring,
    /// epoll.
    Epoll,
    /// The file calls every read and write goes through: vfs_*, fd lookups.
    FileCalls,
    /// File systems, path lookup, pipes, block I/O, select and poll.
    Fs,
    /// Sleeping and waiting.
    SchedWait,
    /// Futexes.
    Futex,
    /// The timer interrupt and the timer softirq.
    TimerIrq,
    /// Hardware interrupts, IPIs, ticks, RCU callbacks.
    Irq,
    /// Softirq processing (where the network's receive side runs).
    Softirq,
    /// Arming and cancelling timers.
    Timer,
    /// exec, fork, exit.
    Process,
}

impl Area {
    pub const ALL: [Area; 27] = [
        Area::Tracing,
        Area::CopyOut,
        Area::CopyIn,
        Area::UserCopy,
        Area::UserCopyCheck,
        Area::Locks,
        Area::PageZero,
        Area::SchedCore,
        Area::SyscallEntry,
        Area::PageCache,
        Area::NetPoll,
        Area::Net,
        Area::PageAlloc,
        Area::Slab,
        Area::Memcg,
        Area::Vm,
        Area::Uring,
        Area::Epoll,
        Area::FileCalls,
        Area::Fs,
        Area::SchedWait,
        Area::Futex,
        Area::TimerIrq,
        Area::Irq,
        Area::Softirq,
        Area::Timer,
        Area::Process,
    ];
}

/// Where a row decides (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Leaf,
    Caller,
}

/// The table, in the order rows are tried within a tier.
pub const RULES: &[(Tier, Area, &[&str])] = &[
    (Tier::Leaf, Area::Tracing, TRACING),
    (Tier::Leaf, Area::CopyOut, COPY_OUT),
    (Tier::Leaf, Area::CopyIn, COPY_IN),
    (Tier::Leaf, Area::UserCopy, USER_COPY),
    (Tier::Leaf, Area::UserCopyCheck, USER_COPY_CHECK),
    (Tier::Leaf, Area::Locks, LOCKS),
    (Tier::Leaf, Area::PageZero, PAGE_ZERO),
    (Tier::Leaf, Area::SchedCore, SCHED_CORE),
    (
        Tier::Leaf,
        Area::Uring,
        &["=__x64_sys_io_uring_enter", "=__do_sys_io_uring_enter"],
    ),
    (
        Tier::Leaf,
        Area::Epoll,
        &["__x64_sys_epoll", "__do_sys_epoll"],
    ),
    (Tier::Leaf, Area::SyscallEntry, SYSCALL_ENTRY),
    (Tier::Caller, Area::PageCache, PAGE_CACHE),
    (Tier::Caller, Area::NetPoll, &["=sock_poll", "=tcp_poll"]),
    (Tier::Caller, Area::Net, NET),
    (Tier::Caller, Area::PageAlloc, PAGE_ALLOC),
    (Tier::Caller, Area::Slab, SLAB),
    (Tier::Caller, Area::Memcg, MEMCG),
    (Tier::Caller, Area::Vm, VM),
    (Tier::Caller, Area::Uring, URING),
    (Tier::Caller, Area::Epoll, EPOLL),
    (Tier::Caller, Area::FileCalls, FILE_CALLS),
    (Tier::Caller, Area::Fs, FS),
    (Tier::Caller, Area::SchedWait, SCHED_WAIT),
    (
        Tier::Caller,
        Area::Futex,
        &["futex_", "__futex", "do_futex"],
    ),
    (Tier::Caller, Area::TimerIrq, TIMER_IRQ),
    (Tier::Caller, Area::Irq, IRQ),
    (Tier::Caller, Area::Softirq, SOFTIRQ),
    (Tier::Caller, Area::Timer, TIMER),
    (Tier::Caller, Area::Process, PROCESS),
];

/// The area a function names by the rows of one tier, the first row that matches.
pub fn area_in(tier: Tier, sym: &str) -> Option<Area> {
    RULES
        .iter()
        .find(|(t, _, pats)| *t == tier && super::any(pats, sym))
        .map(|(_, a, _)| *a)
}

/// A function's area on its own: its leaf rows, else its caller rows.
pub fn area(sym: &str) -> Option<Area> {
    area_in(Tier::Leaf, sym).or_else(|| area_in(Tier::Caller, sym))
}

const TRACING: &[&str] = &[
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
    // A BPF hash map's own helpers (kernel/bpf/hashtab.c), named for no map word: the
    // split's sets and counters, before fs's "lookup_" takes them.
    "=lookup_nulls_elem_raw",
    "=lookup_elem_raw",
    "=alloc_htab_elem",
    "=free_htab_elem",
    "pcpu_freelist_",
    "__pcpu_freelist_",
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
];

const COPY_OUT: &[&str] = &[
    "_copy_to_iter",
    "copy_page_to_iter",
    "copyout",
    "=__skb_datagram_iter",
    "=skb_copy_datagram_iter",
    "=simple_copy_to_iter",
];

const COPY_IN: &[&str] = &[
    "_copy_from_iter",
    "copy_from_iter",
    "copy_page_from_iter",
    "copyin",
    "skb_copy_to_page",
    "=skb_do_copy_data_nocache",
];

const USER_COPY: &[&str] = &[
    "copy_user",
    "_copy_to_user",
    "_copy_from_user",
    "__copy_user",
    "rep_movs_alternative",
    "__get_user",
    "__put_user",
    "strncpy_from_user",
    "copy_to_user",
    "copy_from_user",
    "clear_user",
    "rep_stos_alternative",
];

const USER_COPY_CHECK: &[&str] = &[
    "__check_object_size",
    "check_heap_object",
    "__virt_addr_valid",
    "__check_heap",
];

const LOCKS: &[&str] = &[
    "*spin_lock",
    "*spin_unlock",
    "*spin_trylock",
    "queued_",
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
];

const PAGE_ZERO: &[&str] = &[
    "clear_page",
    "__clear_page",
    "zero_user",
    "folio_zero",
    "clear_huge_page",
    "clear_highpage",
];

const SCHED_CORE: &[&str] = &[
    "__schedule",
    "schedule",
    "pick_next",
    "finish_task_switch",
    "prepare_task_switch",
    "__switch_to",
    "switch_mm",
    "context_switch",
    "update_curr",
    "enqueue_",
    "dequeue_",
    "try_to_wake_up",
    "ttwu_",
    "__wake_up",
    "wake_up",
    "autoremove_wake",
    "select_task",
    "update_load",
    "set_next",
    "put_prev",
    "sched_",
    "psi_",
    "native_sched",
    "update_rq_clock",
];

const SYSCALL_ENTRY: &[&str] = &[
    "entry_SYSCALL",
    "do_syscall",
    "syscall_",
    "entry_SYSRETQ",
    "__x64_sys_",
    "x64_sys_call",
    "exit_to_user",
    "irqentry_exit_to_user_mode",
    "arch_exit_to_user_mode",
    "swapgs",
    "restore_regs",
    "__rseq",
    "rseq_",
    "fpregs_",
    "switch_fpu",
    "error_entry",
    "error_return",
    "asm_exc_page_fault",
];

const PAGE_CACHE: &[&str] = &[
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
];

const NET: &[&str] = &[
    "tcp",
    "__tcp",
    "udp_",
    "sock",
    "__sock",
    "sk_",
    "__sk_",
    "inet_",
    "__inet",
    "ip_",
    "__ip",
    "ip6_",
    "ipv4_",
    "net_",
    "__net",
    "netif_",
    "__netif",
    "napi_",
    "skb_",
    "__skb",
    "kfree_skb",
    "__kfree_skb",
    "consume_skb",
    "alloc_skb",
    "__alloc_skb",
    "release_sock",
    "__release_sock",
    "lock_sock",
    "unix_",
    "__sys_send",
    "__sys_recv",
    "security_sock",
    "dev_",
    "__dev_",
    "virtnet_",
    "loopback_",
    "validate_xmit",
    "eth_",
    "process_backlog",
    "rps_",
    "dst_",
    "nf_",
    "raw_",
    "bbr_",
    "minmax_",
];

const PAGE_ALLOC: &[&str] = &[
    "alloc_pages",
    "__alloc_pages",
    "alloc_frozen_pages",
    "__alloc_frozen_pages",
    "folio_alloc",
    "get_page_from_freelist",
    "rmqueue",
    "__rmqueue",
    "free_pages",
    "__free_pages",
    "free_unref",
    "free_pcppages",
    "page_frag",
    "__page_frag",
];

const SLAB: &[&str] = &[
    "kmem_cache",
    "__kmem_cache",
    "kmalloc",
    "__kmalloc",
    "kfree",
    "__kfree",
    "slab_",
    "___slab",
    "__slab",
];

const MEMCG: &[&str] = &[
    "memcg_",
    "__memcg",
    "mem_cgroup",
    "__mem_cgroup",
    "__mod_memcg",
];

const VM: &[&str] = &[
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
    "alloc_anon_folio",
    "vma_alloc_folio",
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
    "do_brk",
    "brk",
    "dup_mm",
    "copy_page_range",
    "copy_pte",
    "wp_",
    "set_pte",
    "lock_vma",
    "percpu_counter",
];

const URING: &[&str] = &[
    "io_",
    "__io_",
    "tctx_task_work",
    "=llist_reverse_order",
    "=task_work_run",
];

const EPOLL: &[&str] = &["epoll", "ep_", "do_epoll"];

const FILE_CALLS: &[&str] = &[
    "vfs",
    "ksys_",
    "rw_verify",
    "__fget",
    "fget",
    "fdget",
    "__fdget",
    "__fput",
    "fput",
];

const FS: &[&str] = &[
    "ext4",
    "__ext4",
    "xfs_",
    "btrfs_",
    "jbd2",
    "fat_",
    "tmpfs",
    "shmem_",
    "proc_",
    "seq_",
    "kernfs_",
    "sysfs_",
    "path_",
    "do_sys_open",
    "do_filp_open",
    "filename_",
    "getname",
    "link_path_walk",
    "lookup_",
    "__lookup",
    "walk_component",
    "d_",
    "__d_",
    "dput",
    "iput",
    "inode",
    "__inode",
    "generic_file",
    "generic_write",
    "generic_fillattr",
    "new_sync",
    "fsnotify",
    "__fsnotify",
    "file_",
    "iterate_dir",
    "dcache_",
    "filldir",
    "getdents",
    "pipe_",
    "anon_pipe",
    "do_pipe",
    "blkdev_",
    "block_",
    "bio_",
    "submit_bio",
    "blk_",
    "mpage_",
    "iomap_",
    "do_dentry_open",
    "chmod",
    "chown",
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
    "do_select",
    "do_sys_poll",
    "eventfd",
    "timerfd",
    "splice",
    "do_splice",
    "__splice",
    "do_iter",
    "do_readv",
    "do_writev",
    "do_sendfile",
    "touch_atime",
    "atime_needs",
    "__mark_inode",
    "mnt_",
    "__mnt",
    "setattr",
    "do_faccessat",
    "do_sys_ftruncate",
    "do_fchmodat",
    "do_unlinkat",
    "do_rmdir",
    "do_mkdirat",
    "do_renameat",
    "do_linkat",
    "do_symlinkat",
    "dx_",
    "htree",
    "crc32c",
    "mb_",
];

const SCHED_WAIT: &[&str] = &[
    "schedule",
    "do_nanosleep",
    "hrtimer_nanosleep",
    "futex_wait",
    "do_wait",
    "kernel_wait",
    "wait_",
    "__wait",
    "do_sched_yield",
    "=__x64_sys_sched_yield",
];

const TIMER_IRQ: &[&str] = &["hrtimer_interrupt", "__hrtimer_run", "run_timer_softirq"];

const IRQ: &[&str] = &[
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
    "tick_",
    "update_process_times",
    "rcu_core",
    "rcu_do_batch",
    "smp_call_function",
    "generic_smp_call",
    "flush_smp_call",
];

const SOFTIRQ: &[&str] = &[
    "handle_softirqs",
    "__do_softirq",
    "do_softirq",
    "__local_bh",
];

const TIMER: &[&str] = &["hrtimer_", "__hrtimer", "timerqueue_"];

const PROCESS: &[&str] = &[
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
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_names_its_own_work_and_a_caller_the_work_under_it() {
        let cases = [
            ("_copy_to_iter", Some(Area::CopyOut)),
            ("skb_copy_datagram_iter", Some(Area::CopyOut)),
            ("_copy_from_iter", Some(Area::CopyIn)),
            ("rep_movs_alternative", Some(Area::UserCopy)),
            ("__check_object_size", Some(Area::UserCopyCheck)),
            ("_raw_spin_lock_irqsave", Some(Area::Locks)),
            ("__pv_queued_spin_lock_slowpath", Some(Area::Locks)),
            ("clear_page_erms", Some(Area::PageZero)),
            ("finish_task_switch.isra.0", Some(Area::SchedCore)),
            ("__x64_sys_io_uring_enter", Some(Area::Uring)),
            ("__x64_sys_epoll_wait", Some(Area::Epoll)),
            ("__x64_sys_read", Some(Area::SyscallEntry)),
            ("do_syscall_64", Some(Area::SyscallEntry)),
            ("filemap_get_entry", Some(Area::PageCache)),
            ("tcp_poll", Some(Area::NetPoll)),
            ("tcp_sendmsg_locked", Some(Area::Net)),
            ("kfree_skb_reason", Some(Area::Net)),
            ("get_page_from_freelist", Some(Area::PageAlloc)),
            ("kmem_cache_alloc_node_noprof", Some(Area::Slab)),
            ("__mod_memcg_state", Some(Area::Memcg)),
            ("do_anonymous_page", Some(Area::Vm)),
            ("io_recv", Some(Area::Uring)),
            ("ep_send_events", Some(Area::Epoll)),
            ("vfs_read", Some(Area::FileCalls)),
            ("fdget", Some(Area::FileCalls)),
            ("ext4_file_read_iter", Some(Area::Fs)),
            ("do_nanosleep", Some(Area::SchedWait)),
            ("futex_wake", Some(Area::Futex)),
            ("hrtimer_interrupt", Some(Area::TimerIrq)),
            ("sysvec_apic_timer_interrupt", Some(Area::Irq)),
            ("handle_softirqs", Some(Area::Softirq)),
            ("hrtimer_start_range_ns", Some(Area::Timer)),
            ("copy_process", Some(Area::Process)),
            ("lookup_nulls_elem_raw", Some(Area::Tracing)),
            ("__pcpu_freelist_pop", Some(Area::Tracing)),
            ("lookup_fast", Some(Area::Fs)),
            ("mystery_fn", None),
        ];
        for (sym, want) in cases {
            assert_eq!(area(sym), want, "{sym}");
        }
        // A leaf row is not read as a caller row, and the other way round.
        assert_eq!(area_in(Tier::Caller, "_raw_spin_lock"), None);
        assert_eq!(area_in(Tier::Leaf, "tcp_sendmsg"), None);
    }

    #[test]
    fn every_area_has_a_row() {
        for a in Area::ALL {
            assert!(RULES.iter().any(|(_, r, _)| *r == a), "{a:?}");
        }
    }
}
