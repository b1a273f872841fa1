//! One symbol, one class: price's sample classifier, echo's attribution and the gc lab's
//! instruction classes all read `costlab_core::symbols`, so each names a symbol from the same
//! row. Checked here, where the three labs meet.

use costlab_core::symbols::{kernel, user, Area, GoRuntime, UserRole};
use costlab_echo::attribute::Part;
use costlab_gc::attrib::{whole_class, Class};
use costlab_price::samples::classify::{kernel_subsystem, subsystem, user_class, Frame};

/// Kernel functions from real profiles of price's and echo's workloads, one or more per area.
const KERNEL: &[&str] = &[
    "_copy_to_iter",
    "skb_copy_datagram_iter",
    "__skb_datagram_iter",
    "_copy_from_iter",
    "skb_do_copy_data_nocache",
    "rep_movs_alternative",
    "__check_object_size",
    "_raw_spin_lock",
    "_raw_spin_unlock_irqrestore",
    "__pv_queued_spin_lock_slowpath",
    "mutex_lock",
    "clear_page_erms",
    "finish_task_switch.isra.0",
    "try_to_wake_up",
    "__x64_sys_io_uring_enter",
    "__x64_sys_epoll_wait",
    "__x64_sys_read",
    "do_syscall_64",
    "entry_SYSCALL_64",
    "filemap_read",
    "tcp_poll",
    "sock_poll",
    "tcp_sendmsg_locked",
    "__tcp_transmit_skb",
    "loopback_xmit",
    "kfree_skb_reason",
    "get_page_from_freelist",
    "kmem_cache_alloc_node_noprof",
    "__mod_memcg_state",
    "do_anonymous_page",
    "io_recv",
    "__io_issue_sqe",
    "ep_send_events",
    "vfs_read",
    "fdget",
    "ext4_file_read_iter",
    "do_nanosleep",
    "futex_wake",
    "hrtimer_interrupt",
    "sysvec_apic_timer_interrupt",
    "handle_softirqs",
    "hrtimer_start_range_ns",
    "copy_process",
    "bpf_prog_63a6171a84543127",
    "mystery_fn",
];

fn one_frame(sym: &str) -> Vec<Frame> {
    vec![Frame {
        ip: 0xffff_ffff_8100_0000,
        sym: sym.into(),
        dso: "[kernel.kallsyms]".into(),
    }]
}

#[test]
fn a_kernel_function_gets_its_areas_class_in_price_and_echo() {
    for &sym in KERNEL {
        let area = kernel::area(sym);
        let echo = area.map_or(Part::Other, Part::of_area);
        assert_eq!(Part::of(sym, true), echo, "{sym}: echo");
        // A frame alone: its area decides price's subsystem unless the area leaves it to the
        // callers (a timer armed), and there are none.
        let price = area.and_then(subsystem).unwrap_or("other");
        assert_eq!(kernel_subsystem(&one_frame(sym)), price, "{sym}: price");
    }
}

#[test]
fn every_kernel_area_has_a_word_in_each_lab() {
    // `subsystem` and `Part::of_area` match every area; this says which words they give, so a
    // new area gets its words decided, not defaulted.
    for a in Area::ALL {
        let p = subsystem(a);
        let e = Part::of_area(a);
        match a {
            Area::CopyOut => assert_eq!((p, e), (Some("user copies"), Part::RecvCopy)),
            Area::CopyIn => assert_eq!((p, e), (Some("user copies"), Part::SendCopy)),
            Area::Net => assert_eq!((p, e), (Some("networking"), Part::Stack)),
            Area::Uring => assert_eq!((p, e), (Some("fs/VFS"), Part::Uring)),
            Area::Epoll => assert_eq!((p, e), (Some("fs/VFS"), Part::Epoll)),
            Area::Locks => assert_eq!((p, e), (Some("locks"), Part::Locks)),
            Area::Slab => assert_eq!((p, e), (Some("mm"), Part::Alloc)),
            Area::SchedCore => assert_eq!((p, e), (Some("scheduler"), Part::Sched)),
            Area::SyscallEntry => assert_eq!((p, e), (Some("entry/exit"), Part::Entry)),
            Area::Timer => assert_eq!((p, e), (None, Part::Sched)),
            _ => assert!(p.is_some(), "{a:?}"),
        }
    }
}

/// Go runtime functions both labs meet: the collector (old and new names), the write barrier,
/// stack growth, the allocator.
const GO: &[&str] = &[
    "runtime.gcBgMarkWorker",
    "runtime.gcDrain",
    "runtime.gcAssistAlloc1",
    "runtime.scanobject",
    "runtime.scanObject",
    "runtime.greyobject",
    "runtime.markroot",
    "runtime.(*gcWork).tryGet",
    "runtime.(*sweepLocked).sweep",
    "runtime.bgsweep",
    "runtime.bgscavenge",
    "runtime.(*pageAlloc).scavenge",
    "runtime.heapBitsSetType",
    "runtime.findObject",
    "runtime.typePointers.next",
    "runtime.gcWriteBarrier2",
    "runtime.wbBufFlush1",
    "runtime.bulkBarrierPreWrite",
    "runtime.morestack",
    "runtime.newstack",
    "runtime.mallocgc",
    "runtime.memmove",
    "runtime.spanOf",
    "main.main",
];

#[test]
fn a_go_runtime_function_gets_one_class_in_price_and_the_gc_lab() {
    for &sym in GO {
        let go = user::go_runtime(sym);
        let gc = whole_class(sym);
        let price = user_class(sym);
        match go {
            Some(GoRuntime::Gc) => {
                assert_eq!(gc, Some(Class::Gc), "{sym}: gc lab");
                assert_eq!(price, Some("go-gc"), "{sym}: price");
            }
            Some(GoRuntime::WriteBarrier) => {
                assert_eq!(gc, Some(Class::WriteBarrier), "{sym}: gc lab");
                assert_eq!(price, Some("go-gc"), "{sym}: price");
            }
            Some(GoRuntime::StackGrowth) => {
                assert_eq!(gc, Some(Class::Prologue), "{sym}: gc lab");
                assert_eq!(price, None, "{sym}: price");
            }
            None => {
                assert_eq!(gc, None, "{sym}: gc lab");
                assert_ne!(price, Some("go-gc"), "{sym}: price");
                assert!(
                    !matches!(user::user_role(sym), Some(UserRole::Go(_))),
                    "{sym}"
                );
            }
        }
    }
    assert_eq!(user_class("runtime.mallocgc"), Some("allocator"));
    assert_eq!(user_class("runtime.memmove"), Some("memcpy-memset"));
}
