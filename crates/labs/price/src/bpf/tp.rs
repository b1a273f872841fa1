//! The scheduler's and the task tracker's tracepoints (switches, task starts, wake-ups, TLB
//! flushes), counted by small BPF programs on their raw tracepoints.
//!
//! A perf counter on a tracepoint counts as cheaply, but closing the last one of a tracepoint
//! makes the kernel wait for RCU grace periods (perf_trace_destroy ->
//! tracepoint_synchronize_unregister), 25-90 ms a tracepoint here and one tracepoint after
//! another under the kernel's event_mutex: a tenth to a third of a second at the end of every
//! run. A raw tracepoint's BPF link is released without that wait (about 0.2 ms).
//!
//! One program a tracepoint, each filtered to the counted tasks (`Whose`: the current task's
//! cgroup, or its tgid) and adding one to slot 0 or 1 of its own per-CPU array. The two slots
//! split a tracepoint by one of its arguments, as the ftrace filters of the perf counters did:
//!
//! | tracepoint    | raw arguments (TP_PROTO)                          | slot 0    | slot 1      |
//! |---------------|---------------------------------------------------|-----------|-------------|
//! | sched_switch  | bool preempt, task *prev, task *next, uint state  | voluntary | involuntary |
//! | task_newtask  | task *task, u64 clone_flags                       | thread    | process     |
//! | sched_waking  | task *p                                           | made      | -           |
//! | tlb_flush     | int reason, unsigned long pages                   | flush     | -           |
//!
//! A switch is voluntary where the task was not preempted and left the CPU in a state other
//! than running: the kernel's own rule for a task's nvcsw (kernel/sched/core.c, __schedule).
//! The state handed to the tracepoint is the one the switch used (set back to running where a
//! signal kept the task from sleeping). A task's last switch, dead, is voluntary, as the
//! tracepoint's `prev_state & 127` filter has it (its exit_state is reported there). A new
//! task is a thread where its clone flags hold CLONE_THREAD. A wake-up is counted at
//! sched_waking, which runs in the waker; sched_wakeup runs on the wakee's CPU when that CPU
//! is idle (the wake-up queued to it), so counted there it missed a counted task's wake-ups
//! of a task on another, idle CPU (tar with gzip: 218 counted of thousands).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::{add_one, array, filter, load_and_attach, read_slot, Whose};
use costlab_bpf::{Asm, Attached as Program, Insn, Map, R0, R1, R2, R6};

/// How a tracepoint's hits are parted between the two slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Split {
    /// Every hit in slot 0.
    None,
    /// sched_switch: voluntary (0) or involuntary (1).
    Switch,
    /// task_newtask: a thread (0) or a process (1).
    NewTask,
}

/// One counted tracepoint: its tracefs `sys/name`, its raw tracepoint's name, the split, its
/// class and the event of each slot (None: the slot is never written).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracepoint {
    pub path: &'static str,
    pub raw: &'static str,
    pub split: Split,
    pub class: &'static str,
    pub events: [Option<&'static str>; 2],
}

impl Tracepoint {
    /// The (class, event) counted in `slot`.
    pub fn key(&self, slot: usize) -> Option<(&'static str, &'static str)> {
        Some((self.class, self.events.get(slot).copied().flatten()?))
    }

    /// "switch voluntary, switch involuntary": what a note about it names.
    fn names(&self) -> String {
        (0..2)
            .filter_map(|s| self.key(s))
            .map(|(c, e)| format!("{c} {e}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every tracepoint this module counts.
pub const TRACEPOINTS: [Tracepoint; 4] = [
    Tracepoint {
        path: "sched/sched_switch",
        raw: "sched_switch",
        split: Split::Switch,
        class: "switch",
        events: [Some("voluntary"), Some("involuntary")],
    },
    Tracepoint {
        path: "task/task_newtask",
        raw: "task_newtask",
        split: Split::NewTask,
        class: "spawn",
        events: [Some("thread"), Some("process")],
    },
    Tracepoint {
        path: "sched/sched_waking",
        raw: "sched_waking",
        split: Split::None,
        class: "wakeup",
        events: [Some("made"), None],
    },
    Tracepoint {
        path: "tlb/tlb_flush",
        raw: "tlb_flush",
        split: Split::None,
        class: "tlb_flush",
        events: [Some("flush"), None],
    },
];

/// The tracepoints of `TRACEPOINTS` that the tracefs tree at `tracefs` has (tlb_flush is
/// x86's; a kernel built without one lacks it): only those are attached.
pub fn present(tracefs: &Path) -> Vec<&'static Tracepoint> {
    TRACEPOINTS
        .iter()
        .filter(|t| tracefs.join("events").join(t.path).is_dir())
        .collect()
}

/// CLONE_THREAD (include/uapi/linux/sched.h).
pub const CLONE_THREAD: i32 = 0x10000;

/// The counting program of `tp` for `whose`, as named instructions (its `listing()` is what a
/// reviewer reads).
pub fn program_asm(tp: &Tracepoint, whose: Whose, map_fd: i32) -> Asm {
    let mut a = Asm::new();
    a.mov(R6, R1)
        .note("r6 = the tracepoint's raw arguments, u64 each");
    filter(&mut a, whose);
    match tp.split {
        Split::None => {
            a.mov_imm(R1, 0).note("slot 0");
        }
        Split::Switch => {
            a.mov_imm(R1, 1)
                .note("slot 1, involuntary, unless shown voluntary");
            a.ldx_dw(R2, R6, 0).note("r2 = args[0], preempt");
            a.jne_imm(R2, 0, "count").note("preempted: involuntary");
            a.ldx_dw(R2, R6, 24).note("r2 = args[3], prev_state");
            a.jeq_imm(R2, 0, "count")
                .note("left the CPU still running: involuntary");
            a.mov_imm(R1, 0)
                .note("slot 0, voluntary: it sleeps, waits or dies");
        }
        Split::NewTask => {
            a.mov_imm(R1, 0)
                .note("slot 0, a thread, unless shown a process");
            a.ldx_dw(R2, R6, 8).note("r2 = args[1], clone_flags");
            a.jset_imm(R2, CLONE_THREAD, "count")
                .note("CLONE_THREAD: a thread");
            a.mov_imm(R1, 1).note("slot 1, a process");
        }
    }
    a.label("count");
    add_one(&mut a, map_fd);
    a.label("exit");
    a.mov_imm(R0, 0);
    a.exit();
    a
}

/// The program's instructions (see `program_asm`).
pub fn program(tp: &Tracepoint, whose: Whose, map_fd: i32) -> Vec<Insn> {
    program_asm(tp, whose, map_fd)
        .finish()
        .expect("a tracepoint program's labels are all placed")
}

/// One tracepoint's program while attached; detached (without a grace period to wait for)
/// when dropped.
struct Attached {
    tp: &'static Tracepoint,
    map: Map,
    _prog: Program,
}

/// The tracepoints counted for one run.
pub struct TracepointCounter {
    attached: Vec<Attached>,
}

impl TracepointCounter {
    /// Attach a program to each tracepoint the tracefs tree has. One that fails to load or
    /// attach is left out and said in `notes`; only the possible-CPU count (which sizes every
    /// array) unread is an error.
    pub fn attach(
        tracefs: &Path,
        whose: Whose,
        notes: &mut Vec<String>,
    ) -> Result<TracepointCounter> {
        // The one error: the possible CPUs, which size every array, unread.
        costlab_bpf::cpus::possible()?;
        let mut attached = Vec::new();
        for tp in present(tracefs) {
            let one = array(2).and_then(|map| {
                let prog = load_and_attach(&program(tp, whose, map.fd()), tp.raw)?;
                Ok(Attached {
                    tp,
                    map,
                    _prog: prog,
                })
            });
            match one {
                Ok(a) => attached.push(a),
                Err(e) => notes.push(format!("{} not counted: {e}", tp.names())),
            }
        }
        Ok(TracepointCounter { attached })
    }

    /// Counts so far by (class, event), zeros left out; a tracepoint whose array cannot be
    /// read is said in `notes`.
    pub fn read(&self, notes: &mut Vec<String>) -> BTreeMap<(String, String), u64> {
        let mut out = BTreeMap::new();
        for a in &self.attached {
            for slot in 0..2 {
                let Some((class, event)) = a.tp.key(slot) else {
                    continue;
                };
                match read_slot(&a.map, slot as u32) {
                    Ok(0) => {}
                    Ok(n) => {
                        out.insert((class.to_string(), event.to_string()), n);
                    }
                    Err(e) => notes.push(format!("{class} {event} not counted: {e}")),
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_bpf::insn;
    use costlab_bpf::uapi::{BPF_JEQ, BPF_JMP, BPF_JNE, BPF_JSET, BPF_K};
    use costlab_bpf::{Helper, FP};

    fn tp(raw: &str) -> &'static Tracepoint {
        TRACEPOINTS.iter().find(|t| t.raw == raw).unwrap()
    }

    /// (index of each conditional jump, where it lands).
    fn jumps(p: &[Insn]) -> Vec<(usize, usize)> {
        (0..p.len())
            .filter_map(|i| Some((i, p[i].target(i)?)))
            .collect()
    }

    #[test]
    fn every_program_filters_first_and_ends_in_a_return_every_jump_stays_inside() {
        for t in &TRACEPOINTS {
            for whose in [Whose::Cgroup(0x1_0000_002a), Whose::Process(4242)] {
                let a = program_asm(t, whose, 7);
                let p = a.finish().unwrap();
                let exit = p.len() - 2;
                assert_eq!(p[exit], insn::mov_imm(R0, 0), "{}", a.listing());
                assert!(p[exit + 1].is_exit());
                // The filter's helper call comes right after the arguments are kept.
                let helper = match whose {
                    Whose::Cgroup(_) => Helper::GetCurrentCgroupId,
                    Whose::Process(_) => Helper::GetCurrentPidTgid,
                };
                assert_eq!(p[1], insn::call(helper));
                for (j, to) in jumps(&p) {
                    assert!(to <= exit, "jump at {j} to {to}:\n{}", a.listing());
                }
                // One array, the one given.
                let maps: Vec<i32> = p.iter().filter_map(Insn::map_fd).collect();
                assert_eq!(maps, vec![7]);
                // Every comment-worthy line has one: the listing reads as the table above.
                assert!(a
                    .listing()
                    .contains("; r6 = the tracepoint's raw arguments"));
            }
        }
    }

    #[test]
    fn a_switch_is_voluntary_only_unpreempted_and_not_running() {
        let p = program(tp("sched_switch"), Whose::Process(1), 3);
        // preempt is args[0], prev_state args[3] (btf_trace_sched_switch: bool, task *,
        // task *, unsigned int).
        let preempt = p
            .iter()
            .position(|i| *i == insn::ldx_dw(R2, R6, 0))
            .unwrap();
        let state = p
            .iter()
            .position(|i| *i == insn::ldx_dw(R2, R6, 24))
            .unwrap();
        assert!(preempt < state);
        // Slot 1 first; both tests jump past the move to slot 0, to the count.
        assert_eq!(p[preempt - 1], insn::mov_imm(R1, 1));
        assert_eq!(
            p[preempt + 1].code,
            BPF_JMP | BPF_JNE | BPF_K,
            "jne preempt, 0"
        );
        assert_eq!(
            p[state + 1].code,
            BPF_JMP | BPF_JEQ | BPF_K,
            "jeq prev_state, 0"
        );
        let voluntary = state + 2;
        assert_eq!(p[voluntary], insn::mov_imm(R1, 0));
        let count = voluntary + 1;
        let js = jumps(&p);
        assert!(js.contains(&(preempt + 1, count)));
        assert!(js.contains(&(state + 1, count)));
        // The count stores r1 as the key.
        assert_eq!(p[count], insn::stx_w(FP, -4, R1));
    }

    #[test]
    fn the_switch_programs_listing_names_each_argument_and_slot() {
        let l = program_asm(tp("sched_switch"), Whose::Cgroup(5), 3).listing();
        for want in [
            "args[0], preempt",
            "args[3], prev_state",
            "slot 0, voluntary",
            "not the counted cgroup",
            "count:",
            "exit:",
        ] {
            assert!(l.contains(want), "no {want:?} in\n{l}");
        }
    }

    #[test]
    fn a_new_task_is_a_thread_by_its_clone_thread_flag() {
        let p = program(tp("task_newtask"), Whose::Cgroup(9), 3);
        let flags = p
            .iter()
            .position(|i| *i == insn::ldx_dw(R2, R6, 8))
            .unwrap();
        assert_eq!(p[flags - 1], insn::mov_imm(R1, 0));
        assert_eq!(p[flags + 1].code, BPF_JMP | BPF_JSET | BPF_K, "jset");
        assert_eq!(p[flags + 1].imm, CLONE_THREAD);
        assert_eq!(p[flags + 2], insn::mov_imm(R1, 1));
        assert!(jumps(&p).contains(&(flags + 1, flags + 3)));
    }

    #[test]
    fn the_unsplit_ones_count_in_slot_zero_and_name_one_event() {
        for raw in ["sched_waking", "tlb_flush"] {
            let t = tp(raw);
            let p = program(t, Whose::Process(1), 3);
            assert!(p.contains(&insn::mov_imm(R1, 0)));
            // r1 = 1 only as the increment, never as a slot.
            let ones = p.iter().filter(|i| **i == insn::mov_imm(R1, 1)).count();
            assert_eq!(ones, 1);
            assert!(t.key(0).is_some() && t.key(1).is_none());
        }
        assert_eq!(tp("sched_waking").key(0), Some(("wakeup", "made")));
        assert_eq!(tp("tlb_flush").key(0), Some(("tlb_flush", "flush")));
        assert_eq!(tp("sched_switch").key(1), Some(("switch", "involuntary")));
        assert_eq!(tp("task_newtask").key(0), Some(("spawn", "thread")));
        assert_eq!(
            tp("sched_switch").names(),
            "switch voluntary, switch involuntary"
        );
    }
}
