//! The split's programs, assembled: each ends in exit, jumps inside, uses the maps and
//! offsets given, and does what its comment says (prog.rs).

use super::*;
use costlab_bpf::{insn, Insn};

const M: Maps = Maps {
    slots: 3,
    state: 4,
    tasks: 5,
    work: 7,
    by_fd: Some(ByFd { calls: 6, bytes: 9 }),
    seen: 8,
};
const T: Target = Target {
    who: Who::Cgroup(0x1_0000_0042),
    pid_offset: 2480,
    period: 1,
    tick_ns: USER_TICK_PERIOD_NS,
    rss: None,
};
const SAMPLED: Target = Target { period: 16, ..T };
const WITH_RSS: Target = Target {
    rss: Some(RSS),
    ..T
};

/// Where a fixture kernel keeps an mm's counters.
const RSS: RssAt = RssAt {
    mm: 2000,
    rss_stat: 900,
    count: 8,
    stride: 40,
    map_count: Some(120),
    users: Some(60),
};

fn all() -> Vec<(&'static str, Asm)> {
    vec![
        ("sys_enter", sys_enter(&M, &T)),
        ("sys_exit", sys_exit(&M, &T)),
        ("sys_enter sampled", sys_enter(&M, &SAMPLED)),
        (
            "sys_enter with an exec's old address space",
            sys_enter(&M, &WITH_RSS),
        ),
        ("sys_exit sampled", sys_exit(&M, &SAMPLED)),
        (
            "sys_exit with an exec's old address space",
            sys_exit(&M, &WITH_RSS),
        ),
        ("sched_switch", sched_switch(&M, &T)),
        ("fork", sched_process_fork(&M, &T)),
        ("fault_begin", fault_begin(&M, &T)),
        ("fault_end", fault_end(&M, FAULT_MINOR)),
        ("fault_from_page_cache", fault_from_page_cache(&M)),
        ("fault_around", fault_around(&M)),
        ("irq", irq_enter(&M, &T, IrqSlot::Numbered)),
        ("softirq", irq_enter(&M, &T, IrqSlot::Softirq)),
        ("timer", irq_enter(&M, &T, IrqSlot::Fixed(VEC_BASE))),
        ("irq_exit", irq_exit(&M, false)),
        ("user_tick", user_tick(&M)),
        ("softirq_exit", irq_exit(&M, true)),
        ("task_exit", task_exit(&M, None)),
        ("task_exit with pages", task_exit(&M, Some(RSS))),
        ("fork with pages", sched_process_fork(&M, &WITH_RSS)),
        ("ipi_sent", pages::ipi_sent(&M)),
        ("kernel_fault", pages::kernel_fault(&M)),
        ("idle", wake::idle(&M)),
        ("woken", wake::woken(&M, 2480)),
        ("first_charge", join::first_charge(&M)),
        ("inode request", inodes::request(&M)),
        ("inode allocate", inodes::allocate(&M)),
        ("inode touch", inodes::touch(&M)),
    ]
}

#[test]
fn every_program_assembles_ends_in_exit_and_jumps_inside() {
    for (name, a) in all() {
        let p = a.finish().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(p.last().unwrap().is_exit(), "{name}");
        for (i, insn) in p.iter().enumerate() {
            if insn.is_jump() {
                let to = i as i64 + 1 + insn.off as i64;
                assert!(
                    to > i as i64 && (to as usize) < p.len(),
                    "{name}: jump at {i}"
                );
            }
        }
        assert!(p.len() < 4096, "{name}");
    }
}

#[test]
fn the_programs_use_the_maps_and_offsets_given() {
    let l = sched_switch(&M, &T).listing();
    assert!(l.contains("&next->pid"));
    let p = sched_switch(&M, &T).finish().unwrap();
    assert!(p.iter().any(|i| *i == insn::add_imm(R3, 2480)));
    let maps: Vec<i32> = p.iter().filter_map(Insn::map_fd).collect();
    assert!(maps.contains(&3) && maps.contains(&4) && maps.contains(&5));
    let p = sys_enter(&M, &T).finish().unwrap();
    let wide = p.iter().position(Insn::is_ld_imm64).unwrap();
    assert_eq!(p[wide].imm as u32, 0x42);
    assert_eq!(p[wide + 1].imm as u32, 1);
}

/// sys_enter counts each call in its number's slot and, with a by-fd map, samples the
/// read/write family by (number, fd) as the separate counter did: 1 in SAMPLE, fd from
/// regs->di, key number * FDS + fd; without one, it reads no argument.
#[test]
fn sys_enter_counts_and_samples_by_fd() {
    use crate::bpf::{FDS, PT_REGS_DI, SAMPLE};
    let p = sys_enter(&M, &T).finish().unwrap();
    let reads_after = |p: &[Insn], what: Insn| {
        p.windows(2)
            .filter(|w| w[0] == what && w[1].is_call(Helper::ProbeReadKernel))
            .count()
    };
    assert_eq!(
        reads_after(&p, insn::add_imm(R3, PT_REGS_DI)),
        1,
        "the fd is read"
    );
    assert!(p
        .iter()
        .any(|i| *i == insn::and_imm(R1, (SAMPLE - 1) as i32)));
    assert!(p
        .iter()
        .any(|i| *i == insn::lsh_imm(R2, FDS.trailing_zeros() as i32)));
    let maps: Vec<i32> = p.iter().filter_map(Insn::map_fd).collect();
    assert!(maps.contains(&6), "{maps:?}");
    let l = sys_enter(&M, &T).listing();
    assert!(l.contains("not this call's turn") && l.contains("the fd"));
    let bare = Maps { by_fd: None, ..M };
    let p = sys_enter(&bare, &T).finish().unwrap();
    assert_eq!(reads_after(&p, insn::add_imm(R3, PT_REGS_DI)), 0);
}

/// With the by-fd sample, sys_enter clears the state's open sample on every call and keeps a
/// sampled call's slot (plus one) there; sys_exit adds the bytes returned (args[1]) to that
/// slot of the bytes map; a switch keeps the open sample in the task's value (@24) and takes
/// it up again, and clears the state for the next task. Without the sample, nothing of it.
#[test]
fn a_sampled_calls_bytes_are_added_at_its_exit() {
    let enter = sys_enter(&M, &T).finish().unwrap();
    assert!(enter.contains(&insn::st_w(R9, ST_FD, 0)));
    assert!(enter.contains(&insn::stx_w(R9, ST_FD, R2)));
    let exit = sys_exit(&M, &T).finish().unwrap();
    let maps: Vec<i32> = exit.iter().filter_map(Insn::map_fd).collect();
    assert!(maps.contains(&9), "{maps:?}");
    let open = exit
        .iter()
        .position(|i| *i == insn::ldx_w(R1, R9, ST_FD))
        .expect("the exit reads the open sample");
    let ret = exit[open..]
        .iter()
        .position(|i| *i == insn::ldx_dw(R1, R6, 8))
        .expect("and what the call returned");
    assert!(exit[open + ret..]
        .iter()
        .any(|i| i.is_jump() && i.dst == R1.0 && i.imm == 1));
    let switch = sched_switch(&M, &T).finish().unwrap();
    assert!(switch.contains(&insn::stx_w(FP, FP_TASK + 24, R1)));
    assert!(switch.contains(&insn::st_w(R9, ST_FD, 0)));
    assert!(switch.contains(&insn::ldx_w(R3, R0, 24)));
    let bare = Maps { by_fd: None, ..M };
    let exit = sys_exit(&bare, &T).finish().unwrap();
    assert!(!exit.contains(&insn::ldx_w(R1, R9, ST_FD)));
    assert_eq!(
        TASK_SIZE as i16,
        -FP_TASK - 8,
        "the value ends where the key starts"
    );
}

/// Every sys_enter, sampled or not, with or without the by-fd sample, reads openat's
/// flags (and only openat's) and sends O_CREAT to the create slot.
#[test]
fn sys_enter_tells_creates_from_opens() {
    let bare = Maps { by_fd: None, ..M };
    for (m, t) in [(&M, &T), (&M, &SAMPLED), (&bare, &T), (&bare, &SAMPLED)] {
        let p = sys_enter(m, t).finish().unwrap();
        let flags = p
            .windows(2)
            .position(|w| {
                w[0] == insn::add_imm(R3, PT_REGS_DX) && w[1].is_call(Helper::ProbeReadKernel)
            })
            .expect("openat's flags are read");
        assert!(
            p[..flags]
                .iter()
                .any(|i| i.is_jump() && i.dst == R1.0 && i.imm == NR_OPENAT),
            "only openat goes on to the flags"
        );
        assert!(p[flags..].iter().any(|i| *i == insn::and_imm(R2, O_CREAT)));
        assert!(p[flags..]
            .iter()
            .any(|i| *i == insn::mov_imm(R1, OPEN_CREATE as i32)));
    }
}

/// Every sys_enter moves a newfstatat with an empty path (glibc's fstat) to its own
/// slot before the call's slot is kept for its exit and its class: a stat by fd is timed and
/// counted on its own line.
#[test]
fn sys_enter_moves_stats_by_fd_to_their_own_slot_before_keeping_it() {
    let bare = Maps { by_fd: None, ..M };
    for (m, t) in [(&M, &T), (&M, &SAMPLED), (&bare, &T), (&bare, &SAMPLED)] {
        let p = sys_enter(m, t).finish().unwrap();
        let moved = p
            .iter()
            .position(|i| *i == insn::st_w(FP, FP_NR, paths::NEWFSTATAT_FD as i32))
            .expect("a stat by fd is moved");
        let kept = p
            .iter()
            .position(|i| *i == insn::stx_w(R9, ST_NR, R1))
            .expect("the call's slot is kept");
        assert!(moved < kept, "moved at {moved}, kept at {kept}");
        assert!(p[..moved]
            .iter()
            .any(|i| i.is_jump() && i.dst == R1.0 && i.imm == paths::NR_NEWFSTATAT));
    }
}

/// Every charge and the switch's wait drop a difference below zero (a signed test) and
/// count it in DROPPED, never adding it.
#[test]
fn differences_below_zero_are_dropped_and_counted() {
    use costlab_bpf::uapi::{BPF_JMP, BPF_JSLT, BPF_K};
    for (name, a) in all() {
        let l = a.listing();
        let p = a.finish().unwrap();
        let signed = p
            .iter()
            .filter(|i| i.code == BPF_JMP | BPF_JSLT | BPF_K && i.imm == 0)
            .count();
        let charges = l.matches("below zero: not a time, dropped").count();
        assert_eq!(signed, charges, "{name}");
        if charges > 0 {
            assert!(
                p.iter().any(|i| *i == insn::mov_imm(R1, DROPPED as i32)),
                "{name}"
            );
        }
    }
    assert_eq!(
        sched_switch(&M, &T).listing().matches("below zero").count(),
        2,
        "the charge and the wait"
    );
}

/// Sampled, an untimed call reads no clock: sys_exit tests the mark before any clock
/// read, and sys_enter reads the clock only after the turn test; every call is counted.
#[test]
fn a_sampled_split_reads_the_clock_only_for_timed_calls() {
    let p = sys_exit(&M, &SAMPLED).finish().unwrap();
    let clock = p
        .iter()
        .position(|i| i.is_call(Helper::KtimeGetNs))
        .unwrap();
    let skip = p
        .iter()
        .position(|i| *i == insn::st_w(R9, ST_SKIP, 0))
        .unwrap();
    assert!(skip < clock);
    let l = sys_enter(&M, &SAMPLED).listing();
    let turn = l.find("this number's turn to be timed").unwrap();
    let counted = l.find("the number's count before this call").unwrap();
    assert!(counted < turn);
    let p = sys_enter(&M, &SAMPLED).finish().unwrap();
    assert!(p.iter().any(|i| *i == insn::and_imm(R1, 15)));
    // The clock is read on the join path and the timed path only.
    assert_eq!(
        p.iter().filter(|i| i.is_call(Helper::KtimeGetNs)).count(),
        2
    );
    // Every call timed: no mark, no mask.
    let p = sys_exit(&M, &T).finish().unwrap();
    assert!(!p.iter().any(|i| *i == insn::st_w(R9, ST_SKIP, 1)));
}

/// With the mm's counters in BTF, a munmap adds its address space's counts to the MUNMAP_*
/// slots as it enters and takes them off as it leaves (the difference: what it unmapped),
/// sampled or not; its exit takes them off once (the call's slot is cleared). Without BTF's
/// counters, neither program reads them.
#[test]
fn a_munmap_counts_what_it_took_out_of_the_address_space() {
    let slots_of = |a: Asm| -> Vec<i32> {
        let p = a.finish().unwrap();
        [MUNMAP_FILE_PAGES, MUNMAP_ANON_PAGES, MUNMAP_VMAS]
            .iter()
            .map(|s| {
                p.iter()
                    .filter(|i| **i == insn::mov_imm(R1, *s as i32))
                    .count() as i32
            })
            .collect()
    };
    let sampled_rss = Target {
        period: 16,
        ..WITH_RSS
    };
    for t in [&WITH_RSS, &sampled_rss] {
        assert_eq!(slots_of(sys_enter(&M, t)), [1, 1, 1]);
        assert_eq!(slots_of(sys_exit(&M, t)), [1, 1, 1]);
        let enter = sys_enter(&M, t).finish().unwrap();
        let exit = sys_exit(&M, t).finish().unwrap();
        let adds = |p: &[Insn]| p.iter().filter(|i| **i == insn::add(R1, R2)).count();
        let subs = |p: &[Insn]| p.iter().filter(|i| **i == insn::sub(R1, R2)).count();
        assert!(subs(&exit) >= 3, "the exit takes the counts off");
        assert!(adds(&enter) >= 3, "the entry adds them");
        assert!(exit.contains(&insn::st_w(R9, ST_NR, SYS_OTHER as i32)));
    }
    assert_eq!(slots_of(sys_enter(&M, &T)), [0, 0, 0]);
    assert_eq!(slots_of(sys_exit(&M, &T)), [0, 0, 0]);
}

/// sys_enter counts the syscalls of tasks outside the cgroup in OTHERS; sys_exit does not.
#[test]
fn other_tasks_syscalls_are_counted_on_enter_only() {
    let others = |a: Asm| {
        a.finish()
            .unwrap()
            .iter()
            .any(|i| *i == insn::mov_imm(R1, OTHERS as i32))
    };
    assert!(others(sys_enter(&M, &T)) && others(sys_enter(&M, &SAMPLED)));
    assert!(!others(sys_exit(&M, &T)));
}

/// Every call timed, sys_exit moves a failed execve to EXEC_FAILED (its count and its
/// class); sampled, it leaves execve alone (its timed calls' estimate stays whole).
#[test]
fn sys_exit_tells_failed_execs_every_call_timed_only() {
    let moves = |t: &Target| {
        sys_exit(&M, t)
            .finish()
            .unwrap()
            .iter()
            .any(|i| *i == insn::mov_imm(R1, EXEC_FAILED as i32))
    };
    assert!(moves(&T));
    assert!(!moves(&SAMPLED));
}

/// The idle loop keeps when it left a halt (@48 of the state: 1 inside a halt, 0 after a
/// poll, the clock read only on the way out of a halt); sched_switch takes and clears it, and
/// starts a tracked wakee's stretch there only past both guards (the halt ended after the
/// wakee left, and before this switch's own clock read).
#[test]
fn a_wakee_runs_from_the_halts_exit_on() {
    let p = wake::idle(&M).finish().unwrap();
    let clock = p
        .iter()
        .position(|i| *i == insn::call(Helper::KtimeGetNs))
        .expect("the idle program reads the clock");
    assert_eq!(
        p.iter()
            .filter(|i| **i == insn::call(Helper::KtimeGetNs))
            .count(),
        1
    );
    assert_eq!(p[clock + 1], insn::stx_dw(R9, 48, R0));
    assert!(p[..clock].contains(&insn::st_dw(R9, 48, 1)));
    assert!(p[..clock].contains(&insn::st_dw(R9, 48, 0)));
    let s = sched_switch(&M, &T);
    let l = s.listing();
    let moved = l
        .find("next's stretch starts where the halt ended")
        .unwrap();
    let left = l.find("the halt ended after next left").unwrap();
    let clock = l.find("after this switch's clock").unwrap();
    assert!(left < clock && clock < moved);
    assert!(
        l.find("the time away").unwrap() > moved,
        "the wait ends there too"
    );
    let p = s.finish().unwrap();
    assert!(p.contains(&insn::st_dw(R9, 48, 0)), "taken, and cleared");
    assert_eq!(
        p.iter().filter(|i| **i == insn::stx_dw(R9, 8, R7)).count(),
        3,
        "since: now after prev's charge and for next, or the halt's exit"
    );
}

/// A wake-up keeps the low 32 bits of its clock in the task's value (never 0), which its
/// switch out and its fork clear; a task switched in from the idle task starts at it, before
/// its wait is reckoned, where it came after the task left.
#[test]
fn a_wakee_switched_in_from_idle_runs_from_its_wake_up_on() {
    let p = wake::woken(&M, 2480).finish().unwrap();
    assert!(p.contains(&insn::add_imm(R3, 2480)), "&p->pid");
    let clock = p
        .iter()
        .position(|i| *i == insn::call(Helper::KtimeGetNs))
        .expect("the wake-up reads the clock");
    let read = p
        .iter()
        .position(|i| *i == insn::call(Helper::ProbeReadKernel))
        .unwrap();
    assert!(clock < read, "the clock first");
    assert!(p[clock..].contains(&insn::stx_w(R0, wake::TASK_WOKE, R7)));
    assert!(p[clock..].contains(&insn::mov_imm(R7, 1)), "never 0");
    let l = sched_switch(&M, &T).listing();
    let idle = l.find("prev was not the idle task").unwrap();
    let from = l.find("next's stretch starts at its wake-up").unwrap();
    assert!(idle < from);
    assert!(
        l.find("before it left: not this stretch's wake-up")
            .unwrap()
            < from
    );
    assert!(
        l.find("the time away").unwrap() > from,
        "the wait ends there"
    );
    assert!(l.contains("not woken yet"), "a switch out clears it");
    let f = sched_process_fork(&M, &T).listing();
    assert!(f.contains("not woken yet"), "so does a fork");
}

/// A first sight marks the CPU's state with its clock (a late join clears the mark); the
/// kernel's next charge of that task adds what it charged beyond the split's time since to
/// JOINED_BEFORE, and clears the mark.
#[test]
fn what_the_kernel_charged_before_a_first_sight_is_counted_apart() {
    let p = sys_exit(&M, &T).finish().unwrap();
    assert!(p.contains(&insn::stx_dw(R9, 72, R7)), "first sight marks");
    assert!(p.contains(&insn::st_dw(R9, 72, 0)), "a late join clears");
    let c = join::first_charge(&M);
    let l = c.listing();
    assert!(l.contains("args[1], the run time charged"));
    assert!(l.contains("charged before the split saw it"));
    let p = c.finish().unwrap();
    assert!(p.contains(&insn::st_dw(R9, 72, 0)), "the mark is taken");
    assert!(p.contains(&insn::mov_imm(R1, JOINED_BEFORE as i32)));
}

/// A task of the cgroup that its CPU does not name joins at a syscall's enter or exit, a user
/// fault or an interrupt's entry, and takes up from the switched-out hash (the tasks map,
/// fd 5) the class it left with, counted in LATE_JOINS; the switch, the fault's end and the
/// interrupt's exit leave it alone.
#[test]
fn a_task_whose_switch_in_was_not_traced_joins_at_its_next_event() {
    let late = |a: Asm| {
        let p = a.finish().unwrap();
        let counts = p.iter().any(|i| *i == insn::mov_imm(R1, LATE_JOINS as i32));
        let hash = p.iter().filter_map(Insn::map_fd).any(|fd| fd == 5);
        assert_eq!(counts, hash, "a late join reads the hash and counts");
        counts
    };
    assert!(late(sys_enter(&M, &T)));
    assert!(late(sys_exit(&M, &T)));
    assert!(late(fault_begin(&M, &T)));
    for which in [
        IrqSlot::Numbered,
        IrqSlot::Softirq,
        IrqSlot::Fixed(VEC_BASE),
    ] {
        assert!(late(irq_enter(&M, &T, which)));
    }
    assert!(!late(fault_end(&M, FAULT_MINOR)));
    assert!(!late(irq_exit(&M, false)));
    let l = sys_exit(&M, &T).listing();
    assert!(l.contains("its class when it left"), "{l}");
}

/// Every call's entry counts the time since the last call of its kind on its CPU in its
/// bucket, timed every call or sampled (the timed calls, the gap shifted down by the period's
/// power of two): the slot's last time read and set to now, a first call's counted from the
/// split's start, each bound compared once, the bucket's count and sum written past the six
/// words every slot has.
#[test]
fn sys_enter_counts_the_time_since_the_last_call_of_its_kind() {
    // BPF_JMP | BPF_JLT | BPF_K; BPF_ALU64 | BPF_RSH | BPF_K.
    const JLT_K: u8 = 0xa5;
    const RSH_K: u8 = 0x77;
    for t in [T, SAMPLED] {
        let p = sys_enter(&M, &t).finish().unwrap();
        for b in gaps::BOUNDS {
            assert_eq!(
                p.iter()
                    .filter(|i| i.code == JLT_K && i.dst == 2 && i.imm == b as i32)
                    .count(),
                1,
                "bound {b}"
            );
        }
        assert!(p.contains(&insn::ldx_dw(R4, R9, gaps::ST_IDLE)));
        assert!(p.contains(&insn::ldx_dw(R2, R0, gaps::SLOT_LAST)));
        assert!(p.contains(&insn::stx_dw(R0, gaps::SLOT_LAST, R3)));
        assert!(p.contains(&insn::ldx_dw(R2, R9, ST_START)));
        assert!(p
            .iter()
            .any(|i| *i == insn::stx_dw(R3, gaps::SLOT_GAPS, R4)));
        assert!(p
            .iter()
            .any(|i| *i == insn::stx_dw(R3, gaps::SLOT_GAPS + 8, R4)));
        let shifts: Vec<i32> = p
            .iter()
            .filter(|i| i.code == RSH_K && i.dst == 2)
            .map(|i| i.imm)
            .collect();
        match t.period {
            1 => assert!(shifts.is_empty(), "{shifts:?}"),
            n => assert_eq!(shifts, vec![n.trailing_zeros() as i32]),
        }
    }
    // The slot's last time sits past its buckets, inside the slot.
    assert_eq!(
        gaps::SLOT_LAST as u32,
        gaps::SLOT_GAPS as u32 + gaps::GAPS_SIZE
    );
    assert_eq!(SLOT_SIZE, gaps::SLOT_LAST as u32 + 8);
}

/// A minor fault counts, at its end, the time since the last fault of its kind on its CPU in
/// its kind's bucket; a major fault counts none.
#[test]
fn a_minor_fault_counts_the_time_since_the_last_of_its_kind() {
    let minor = fault_end(&M, FAULT_MINOR).finish().unwrap();
    assert!(minor.contains(&insn::stx_dw(R0, gaps::SLOT_LAST, R3)));
    assert!(minor.contains(&insn::stx_dw(R3, gaps::SLOT_GAPS, R4)));
    let major = fault_end(&M, FAULT_MAJOR).finish().unwrap();
    assert!(!major.contains(&insn::stx_dw(R0, gaps::SLOT_LAST, R3)));
}

/// Every switch keeps its time; one out of the idle task adds the idle task's run since the
/// last switch to the CPU's idle time (a call's gap is the CPU's busy time), before the switch
/// looks at prev.
#[test]
fn a_switch_out_of_the_idle_task_adds_its_run_to_the_cpus_idle_time() {
    let p = sched_switch(&M, &T).finish().unwrap();
    let kept = p
        .iter()
        .position(|i| *i == insn::stx_dw(R9, gaps::ST_SWITCHED, R7))
        .expect("the switch's time kept");
    let added = p
        .iter()
        .position(|i| *i == insn::stx_dw(R9, gaps::ST_IDLE, R3))
        .expect("the idle time added");
    assert!(kept < added);
    assert!(p[kept..added]
        .iter()
        .any(|i| i.is_jump() && i.dst == R8.0 && i.imm == 0));
    // Both inside the state.
    assert!(gaps::ST_IDLE as u32 + 8 <= STATE_SIZE);
}
