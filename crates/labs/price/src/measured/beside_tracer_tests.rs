//! The tracer's own cost taken out of each line (`net_of_tracer`).

use super::*;

#[test]
fn a_lines_ratio_is_read_on_its_own_time_net_of_the_tracer_inside_it() {
    let s = Split {
        lines: vec![
            Line {
                waits: 2,
                ..line("syscall", "close", 10, 5000)
            },
            Line {
                lookups: 4,
                ..line("syscall", "read", 2, 2000)
            },
            line("syscall", "newfstatat", 3, 3000),
            line("syscall", "mmap", 2, 5000),
            line("syscall", "clone", 2, 30_000),
            line("syscall", "execve", 1, 90_000),
            line("syscall", "execve:failed", 1, 2000),
            line("fault", "minor", 4, 4000),
            line("fault", "minor:file", 5, 20_000),
            line("fault", "unfinished", 1, 100),
            line("irq", "local_timer", 3, 900),
            line("user", "user", 0, 9000),
        ],
        usage_ns: 171_000,
        ..Split::default()
    };
    let mut b = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    let t = crate::measured::TracerCost {
        syscall: 200.0,
        fault: 300.0,
        switch: 500.0,
        switch_local: None,
        tick_ns: 2000.0,
        touch: 0.0,
        lookup: 50.0,
        path: 70.0,
        mmap: 900.0,
        inode: 0.0,
        inodes: 0,
        windows: 0,
        file_fault: 0.0,
        exec: 0.0,
    };
    net_of_tracer(&mut b, &t);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap();
    // 3 stats at 200 and their paths read at 70.
    assert_eq!(of("newfstatat").tracer_ns, 810.0);
    // With 2 inodes found first at 300 each: the run's 600 on its only stat line.
    let mut with_inodes = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut with_inodes,
        &crate::measured::TracerCost {
            inode: 300.0,
            inodes: 2,
            ..t
        },
    );
    let stat = with_inodes
        .iter()
        .find(|x| x.line.event == "newfstatat")
        .unwrap();
    assert_eq!(stat.tracer_ns, 810.0 + 600.0);
    // With 3 file faults on a window new to the run too: their inserts on the file faults'
    // line, at the inode's cost, and none on the stats'.
    let mut with_windows = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut with_windows,
        &crate::measured::TracerCost {
            inode: 300.0,
            inodes: 2,
            windows: 3,
            ..t
        },
    );
    let of_w = |e: &str| with_windows.iter().find(|x| x.line.event == e).unwrap();
    assert_eq!(of_w("minor:file").tracer_ns, 5.0 * 300.0 + 3.0 * 300.0);
    // A file fault's own programs, 100 more each of the 5: on its line alone.
    let mut with_file = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut with_file,
        &crate::measured::TracerCost {
            file_fault: 100.0,
            ..t
        },
    );
    let of_f = |e: &str| with_file.iter().find(|x| x.line.event == e).unwrap();
    assert_eq!(of_f("minor:file").tracer_ns, 5.0 * (300.0 + 100.0));
    assert_eq!(of_f("minor").tracer_ns, 1200.0);
    assert_eq!(of_w("newfstatat").tracer_ns, 810.0 + 600.0);
    assert_eq!(of_w("minor").tracer_ns, 1200.0);
    // 10 calls at 200 and 2 switches at 500 inside close: 3000 of its 5000.
    assert_eq!(of("close").tracer_ns, 3000.0);
    assert_eq!(of("close").ratio(), Some(1000.0 / 2000.0));
    // 2 calls at 200 and their 4 page-cache lookups at 50.
    assert_eq!(of("read").tracer_ns, 600.0);
    // 2 mmaps at 200 and their side-band records at 900.
    assert_eq!(of("mmap").tracer_ns, 2200.0);
    assert_eq!(of("minor").tracer_ns, 1200.0);
    assert_eq!(of("unfinished").tracer_ns, 0.0);
    // A fork and exec at 20000 on the one execve that succeeded: the failed one is a syscall
    // alone, and the clones are syscalls.
    let mut with_tasks = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut with_tasks,
        &crate::measured::TracerCost {
            exec: 20_000.0,
            ..t
        },
    );
    let of_t = |e: &str| with_tasks.iter().find(|x| x.line.event == e).unwrap();
    assert_eq!(of_t("clone").tracer_ns, 400.0);
    assert_eq!(of_t("execve").tracer_ns, 200.0 + 20_000.0);
    assert_eq!(of_t("execve:failed").tracer_ns, 200.0);
    assert_eq!(of("clone").tracer_ns, 400.0);
    // Never more than the line holds.
    assert_eq!(of("local_timer").tracer_ns, 900.0);
    assert_eq!(of("user").tracer_ns, 0.0);
    let e = evidence(&s, of("close"), &Evidence::default());
    assert!(
        e.last().unwrap().contains(
            "it would have to be 200.0 ns (the line's 500.0 ns an event less the tracer's own 300.0 ns)"
        ),
        "{e:?}"
    );
}

/// A wait back on a CPU that had halted is taken out at the switch loop's cost, any other at
/// the local loop's; a price stored before the two were apart takes every wait at the first.
#[test]
fn a_wait_inside_the_cgroup_costs_the_tracer_the_local_switch() {
    let s = Split {
        lines: vec![Line {
            waits: 2,
            ..line("syscall", "close", 10, 5000)
        }],
        usage_ns: 5000,
        ..Split::default()
    };
    let t = crate::measured::TracerCost {
        syscall: 200.0,
        switch: 500.0,
        ..Default::default()
    };
    let close = |b: &[Beside]| {
        b.iter()
            .find(|x| x.line.event == "close")
            .unwrap()
            .tracer_ns
    };
    let mut old = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(&mut old, &t);
    assert_eq!(close(&old), 2000.0 + 2.0 * 500.0);
    // Measured apart, a wait inside the cgroup (neither came back on a halted CPU) costs the
    // local figure; one of two back on a halted CPU, the switch's.
    let mut local = beside(&s, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut local,
        &crate::measured::TracerCost {
            switch_local: Some(50.0),
            ..t
        },
    );
    let close = |b: &[Beside]| {
        b.iter()
            .find(|x| x.line.event == "close")
            .unwrap()
            .tracer_ns
    };
    assert_eq!(close(&local), 2000.0 + 2.0 * 50.0);
    let halted = Split {
        lines: vec![Line {
            waits: 2,
            halted_in: 1,
            ..line("syscall", "close", 10, 5000)
        }],
        ..s.clone()
    };
    let mut one = beside(&halted, &[priced("syscall", "close", 10, 100.0)]);
    net_of_tracer(
        &mut one,
        &crate::measured::TracerCost {
            switch_local: Some(50.0),
            ..t
        },
    );
    assert_eq!(close(&one), 2000.0 + 500.0 + 50.0);
}
