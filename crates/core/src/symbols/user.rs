//! User-space functions the labs class: the Go runtime's collector, write barriers and stack
//! growth (`go_runtime`), and the copies, allocators and locks of libc, other allocators and
//! Go's runtime (`user_role`).
//!
//! The Go lists are read from the runtime's own sources (Go 1.26, src/runtime): every
//! function and type of the collector's files (mgc.go, mgcmark.go and its greenteagc and
//! nogreenteagc halves, mgcsweep.go, mgcwork.go, mgcscavenge.go, mgcpacer.go, mgcstack.go,
//! mgclimit.go, mcheckmark.go), and from the files they share with the allocator what only
//! the collector runs: mbitmap.go's mark bits, `findObject`, the scanning iterator
//! (`typePointers`) and the heap-bit writers an allocation runs for the collector's sake;
//! mheap.go's `gcBits` and `reclaim`. The write barrier is mbarrier.go's and mwbbuf.go's
//! barrier functions, the `gcWriteBarrier` stubs of asm_amd64.s and mbitmap.go's bulk
//! barriers; `typedmemmove` and its kin are copies (their barrier is `bulkBarrierPreWrite`).
//! Older runtimes' names both labs knew stay (`scanobject`, `heapBitsSetType`,
//! `(*mspan).sweep`), and a `runtime.gc...` name this table does not hold yet is the
//! collector's, but the four that are not (`gcallers`, `gcd`, `gcount`, `gcstopm`).

/// What a Go runtime function is, for the labs that take its time apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GoRuntime {
    /// The collector: marking, sweeping, scavenging, pacing, its work buffers and bitmaps.
    Gc,
    /// The write barrier: the stubs, the buffer's flush, the bulk barriers.
    WriteBarrier,
    /// Growing a goroutine's stack: morestack and newstack.
    StackGrowth,
}

/// The class a user-space function gets in a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserRole {
    Go(GoRuntime),
    /// memcpy, memmove, memset and their kin.
    MemCopy,
    /// malloc and free, other allocators, Go's and Python's.
    Alloc,
    /// Mutexes, rwlocks, condition variables, atomics.
    Locks,
}

/// The collector's entry points: a user-mode sample with one of them on its stack is GC work
/// whatever its leaf (memclr, spanOf, a map of the heap's bits).
pub const GO_GC_ENTRIES: [&str; 12] = [
    "runtime.gcBgMarkWorker",
    "runtime.gcAssistAlloc",
    "runtime.gcAssistAlloc1",
    "runtime.bgsweep",
    "runtime.sweepone",
    "runtime.deductSweepCredit",
    "runtime.gcMarkDone",
    "runtime.gcMarkTermination",
    "runtime.gcStart",
    "runtime.markroot",
    "runtime.gcDrain",
    "runtime.gcDrainN",
];

/// Whether `sym` is one of the collector's entry points.
pub fn go_gc_entry(sym: &str) -> bool {
    GO_GC_ENTRIES.contains(&sym)
}

/// What a Go runtime function is; None for one outside the runtime or none of these.
pub fn go_runtime(sym: &str) -> Option<GoRuntime> {
    let r = sym.strip_prefix("runtime.")?;
    if WRITE_BARRIER.iter().any(|p| r.starts_with(p)) {
        return Some(GoRuntime::WriteBarrier);
    }
    if r.starts_with("morestack") || r == "newstack" {
        return Some(GoRuntime::StackGrowth);
    }
    let gc = if let Some(m) = r.strip_prefix("(*") {
        // A method on a pointer: `(*T).name`, its closures `(*T).name.func1`.
        let ty = m.split(')').next().unwrap_or("");
        let method = r.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
        GC_TYPES.contains(&ty) || GC_METHODS.contains(&method.as_str())
    } else {
        // A function, its closures (`gcStart.func1`), or a method on a value (`gcTrigger.test`).
        let head = r.split('.').next().unwrap_or("");
        GC_FUNCTIONS.contains(&head)
            || GC_TYPES.contains(&head)
            || head.starts_with("gc") && !NOT_GC.contains(&head)
    };
    gc.then_some(GoRuntime::Gc)
}

/// The class of a user-space function, where it is one the labs name.
pub fn user_role(sym: &str) -> Option<UserRole> {
    if let Some(g) = go_runtime(sym) {
        return Some(UserRole::Go(g));
    }
    [
        (UserRole::MemCopy, MEM_COPY),
        (UserRole::Alloc, ALLOC),
        (UserRole::Locks, LOCKS),
    ]
    .into_iter()
    .find(|(_, pats)| super::any(pats, sym))
    .map(|(role, _)| role)
}

/// The write barrier's functions, by the start of their name after `runtime.`.
const WRITE_BARRIER: &[&str] = &[
    "gcWriteBarrier",
    "wbBufFlush",
    "(*wbBuf)",
    "wbZero",
    "wbMove",
    "bulkBarrier",
    "typeBitsBulkBarrier",
];

/// `runtime.gc...` names that are not the collector's: the profiler's callers, a gcd, the
/// goroutine count, the scheduler's stop for any stop-the-world.
const NOT_GC: &[&str] = &["gcallers", "gcd", "gcount", "gcstopm"];

/// The collector's functions by name (a closure of one, `name.func1`, is the same work).
const GC_FUNCTIONS: &[&str] = &[
    "GC",
    "allGsSnapshotSortedForGC",
    "badPointer",
    "bgscavenge",
    "bgsweep",
    "checkFinalizersAndCleanups",
    "clearpools",
    "clobberfree",
    "deductSweepCredit",
    "dumpScanStats",
    "endCheckmarks",
    "extractHeapBitsSmall",
    "fillAligned",
    "findGoroutineLeaks",
    "findMaybeRunnableGoroutines",
    "findObject",
    "finishsweep_m",
    "forEachSpecial",
    "freeDeadSpanSPMCs",
    "freeSomeWbufs",
    "gcAssistAlloc",
    "gcAssistAlloc1",
    "gcBeginWork",
    "gcBgMarkPrepare",
    "gcBgMarkStartWorkers",
    "gcBgMarkWorker",
    "gcControllerCommit",
    "gcDrain",
    "gcDrainMarkWorkerDedicated",
    "gcDrainMarkWorkerFractional",
    "gcDrainMarkWorkerIdle",
    "gcDrainN",
    "gcDumpObject",
    "gcEndWork",
    "gcFlushBgCredit",
    "gcIsMarkDone",
    "gcMark",
    "gcMarkDone",
    "gcMarkRootCheck",
    "gcMarkTermination",
    "gcMarkTinyAllocs",
    "gcMarkWorkAvailable",
    "gcNextMarkRoot",
    "gcPaceScavenger",
    "gcPaceSweeper",
    "gcParkAssist",
    "gcPrepareMarkRoots",
    "gcResetMarkState",
    "gcRestoreSyncObjects",
    "gcScanCleanup",
    "gcScanFinalizer",
    "gcShouldScheduleWorker",
    "gcStart",
    "gcSweep",
    "gcTestIsReachable",
    "gcTestMoveStackOnNextCall",
    "gcTestPointerClass",
    "gcUsesSpanInlineMarkBits",
    "gcWaitOnMark",
    "gcWakeAllAssists",
    "gcenable",
    "gcinit",
    "gcmarknewobject",
    "getCheckmark",
    "getempty",
    "goroutineLeakGC",
    "greyobject",
    "handoff",
    "heapBitsSetType",
    "heapObjectsCanMove",
    "heapRetained",
    "heapSetTypeLarge",
    "heapSetTypeNoHeader",
    "heapSetTypeSmallHeader",
    "isMarkedOrNotInHeap",
    "isSweepDone",
    "makeLimiterEventStamp",
    "makeObjPtr",
    "markBitsForAddr",
    "markBitsForSpan",
    "markroot",
    "markrootBlock",
    "markrootFreeGStacks",
    "markrootSpans",
    "newAllocBits",
    "newMarkBits",
    "newSpanSPMC",
    "nextMarkBitArenaEpoch",
    "pollFractionalWorkerExit",
    "prepareFreeWorkbufs",
    "printScavTrace",
    "putempty",
    "putfull",
    "runCheckmark",
    "scanConservative",
    "scanObject",
    "scanObjectSmall",
    "scanObjectsSmall",
    "scanSpan",
    "scanblock",
    "scanframeworker",
    "scanobject",
    "scanstack",
    "setCheckmark",
    "setGCPercent",
    "setGCPhase",
    "setMemoryLimit",
    "setSyncObjectsUntraceable",
    "shade",
    "spanInlineMarkBitsFromBase",
    "spanPtrMaskUnsafe",
    "spanSetScans",
    "startCheckmarks",
    "sweepone",
    "tryDeferToSpanScan",
    "trygetfull",
    "unpackScavChunkData",
];

/// The collector's types: every method of one is GC work (`(*gcWork).tryGet`, `gcTrigger.test`).
const GC_TYPES: &[&str] = &[
    "activeSweep",
    "atomicScavChunkData",
    "checkmarksMap",
    "gcBgMarkWorkerNode",
    "gcBgMarkWorkerNodePadded",
    "gcBits",
    "gcBitsArena",
    "gcCPULimiterState",
    "gcControllerState",
    "gcDrainFlags",
    "gcMarkWorkerMode",
    "gcMode",
    "gcTrigger",
    "gcTriggerKind",
    "gcWork",
    "limiterEvent",
    "limiterEventStamp",
    "limiterEventType",
    "markBits",
    "objptr",
    "piController",
    "scavChunkData",
    "scavChunkFlags",
    "scavengeIndex",
    "scavengerState",
    "sizeClassScanStats",
    "spanInlineMarkBits",
    "spanQueue",
    "spanSPMC",
    "spanScanOwnership",
    "stackObject",
    "stackObjectBuf",
    "stackObjectBufHdr",
    "stackScanState",
    "stackWorkBuf",
    "stackWorkBufHdr",
    "sweepClass",
    "sweepLocked",
    "sweepLocker",
    "sweepdata",
    "typePointers",
    "workType",
    "workbuf",
    "workbufhdr",
];

/// The collector's methods on the heap's and the allocator's types.
const GC_METHODS: &[&str] = &[
    "(*mheap).nextSpanForSweep",
    "(*mheap).reclaim",
    "(*mheap).reclaimChunk",
    "(*mspan).ensureSwept",
    "(*mspan).heapBitsSmallForAddr",
    "(*mspan).initHeapBits",
    "(*mspan).initInlineMarkBits",
    "(*mspan).inlineMarkBits",
    "(*mspan).markBitsForBase",
    "(*mspan).markBitsForIndex",
    "(*mspan).moveInlineMarks",
    "(*mspan).reportZombies",
    "(*mspan).scannedBitsForIndex",
    "(*mspan).sweep",
    "(*mspan).typePointersOf",
    "(*mspan).typePointersOfType",
    "(*mspan).typePointersOfUnchecked",
    "(*mspan).writeHeapBitsSmall",
    "(*pageAlloc).scavenge",
    "(*pageAlloc).scavengeOne",
    "(*pallocData).findScavengeCandidate",
];

const MEM_COPY: &[&str] = &[
    "__memmove",
    "__memcpy",
    "__memset",
    "memcpy",
    "memmove",
    "memset",
    "__mempcpy",
    "runtime.memmove",
    "runtime.memclrNoHeapPointers",
    "runtime.memclrHasPointers",
    "runtime.typedmemmove",
    "runtime.typedslicecopy",
    "runtime.typedmemclr",
    "__memcmp",
    "bzero",
    "__bzero",
    "wmemset",
];

const ALLOC: &[&str] = &[
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
];

const LOCKS: &[&str] = &[
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
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collectors_functions_types_methods_and_closures_are_gc() {
        for sym in [
            "runtime.gcBgMarkWorker",
            "runtime.gcBgMarkWorker.func2",
            "runtime.gcAssistAlloc1",
            "runtime.gcFlushBgCredit",
            "runtime.scanobject",
            "runtime.scanObject",
            "runtime.scanConservative",
            "runtime.markrootSpans",
            "runtime.(*gcWork).tryGet",
            "runtime.(*gcControllerState).enlistWorker",
            "runtime.gcTrigger.test",
            "runtime.(*sweepLocked).sweep",
            "runtime.(*mspan).sweep",
            "runtime.(*pageAlloc).scavenge",
            "runtime.bgscavenge",
            "runtime.(*stackScanState).putPtr",
            "runtime.(*spanQueue).put",
            "runtime.trygetfull",
            "runtime.findObject",
            "runtime.(*mspan).typePointersOf",
            "runtime.typePointers.next",
            "runtime.heapBitsSetType",
            "runtime.(*gcBits).bitp",
            "runtime.markBits.setMarked",
            "runtime.(*mheap).reclaim",
            "runtime.gcSomethingNewer",
        ] {
            assert_eq!(go_runtime(sym), Some(GoRuntime::Gc), "{sym}");
        }
        for sym in [
            "runtime.gcWriteBarrier2",
            "runtime.wbBufFlush1",
            "runtime.(*wbBuf).reset",
            "runtime.bulkBarrierPreWrite",
            "runtime.wbMove",
        ] {
            assert_eq!(go_runtime(sym), Some(GoRuntime::WriteBarrier), "{sym}");
        }
        assert_eq!(
            go_runtime("runtime.morestack_noctxt"),
            Some(GoRuntime::StackGrowth)
        );
        assert_eq!(go_runtime("runtime.newstack"), Some(GoRuntime::StackGrowth));
        for sym in [
            "runtime.gcallers",
            "runtime.gcount",
            "runtime.gcstopm",
            "runtime.mallocgc",
            "runtime.spanOf",
            "runtime.(*mspan).nextFreeIndex",
            "runtime.(*stkframe).getStackMap",
            "main.gcLike",
            "gcDrain",
        ] {
            assert_eq!(go_runtime(sym), None, "{sym}");
        }
    }

    #[test]
    fn user_functions_get_their_roles() {
        assert_eq!(
            user_role("runtime.scanobject"),
            Some(UserRole::Go(GoRuntime::Gc))
        );
        assert_eq!(
            user_role("__memmove_avx_unaligned_erms"),
            Some(UserRole::MemCopy)
        );
        assert_eq!(user_role("runtime.typedmemmove"), Some(UserRole::MemCopy));
        assert_eq!(user_role("_int_malloc"), Some(UserRole::Alloc));
        assert_eq!(user_role("runtime.mallocgc"), Some(UserRole::Alloc));
        assert_eq!(user_role("pthread_mutex_lock"), Some(UserRole::Locks));
        assert_eq!(user_role("deflate_slow"), None);
        assert!(go_gc_entry("runtime.gcDrainN"));
        assert!(!go_gc_entry("runtime.scanobject"));
    }

    #[test]
    fn the_name_lists_hold_no_duplicate() {
        for list in [GC_FUNCTIONS, GC_TYPES, GC_METHODS] {
            let mut v = list.to_vec();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), list.len());
        }
    }
}
