use super::*;
use costlab_core::model::Quality;

fn line(class: &str, event: &str, cpu: u64) -> Line {
    Line {
        class: class.into(),
        event: event.into(),
        count: 1,
        cpu_ns: cpu,
        ..Line::default()
    }
}

#[test]
fn what_is_missing_is_one_line_with_the_version_that_has_it() {
    assert_eq!(missing("6.18.44", true), None);
    let old = missing("5.4.0-100-generic", true).unwrap();
    assert!(old.contains("5.5 or later") && !old.contains('\n'));
    let nobtf = missing("6.1.0", false).unwrap();
    assert!(nobtf.contains("CONFIG_DEBUG_INFO_BTF") && !nobtf.contains('\n'));
    assert!(missing("junk", true).unwrap().contains("version"));
}

#[test]
fn a_processs_cpu_clock_and_times_are_read_and_differenced() {
    assert_eq!(parse_schedstat("123456 789 10\n"), Some(123456));
    assert_eq!(parse_schedstat(""), None);
    let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 0\n";
    assert_eq!(parse_stat_times(stat), Some((250, 75)));
    let before = ProcessCpu {
        cpu_ns: 1500,
        user_ns: 10,
        system_ns: 5,
    };
    let after = ProcessCpu {
        cpu_ns: 2400,
        user_ns: 30,
        system_ns: 6,
    };
    assert_eq!(after.since(&before), (900, 20, 1));
    // This process's own clock: read, and moving.
    let me = ProcessCpu::read(std::process::id()).unwrap();
    let mut x = 0u64;
    for i in 0..2_000_000u64 {
        x = std::hint::black_box(x.wrapping_add(i));
    }
    assert!(ProcessCpu::read(std::process::id()).unwrap().cpu_ns > me.cpu_ns);
}

#[test]
fn the_other_tasks_cost_is_noted_above_five_percent_of_their_time() {
    let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
    let hz = costlab_core::measure::procstat::ticks_per_second();
    assert_eq!(machine_busy_ns(stat), Some(150 * 1_000_000_000 / hz));
    let mut s = Split {
        usage_ns: 1_000_000,
        others_syscalls: 100_000,
        ..Split::default()
    };
    // 100000 calls x 100 ns = 10 ms of 101 - 1 = 100 ms: 10%.
    s.note_others(100.0, Some(101_000_000));
    assert!(
        s.notes[0].contains("10.0% of the 100.0 ms") && s.notes[0].contains("above 5%"),
        "{:?}",
        s.notes
    );
    let mut s = Split {
        usage_ns: 1_000_000,
        others_syscalls: 1_000,
        ..Split::default()
    };
    s.note_others(100.0, Some(101_000_000));
    assert!(s.notes[0].contains("0.1% of") && !s.notes[0].contains("above 5%"));
    let mut none = Split::default();
    none.note_others(100.0, Some(1));
    assert!(none.notes.is_empty());
}

#[test]
fn cpu_stat_and_interrupts_parse() {
    let s = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
    assert_eq!(parse_cpu_stat(s), Some((1_500_000, 1_000_000, 500_000)));
    assert_eq!(parse_cpu_stat("nr_periods 0\n"), None);
    let i = "           CPU0       CPU1\n  4:        120          0  IO-APIC   4-edge      ttyS0\n NMI:          0          0   Non-maskable interrupts\n 24:  5  6  PCI-MSI 49152-edge      virtio0-input.0\n";
    let m = parse_interrupts(i);
    assert_eq!(m.get(&4).map(String::as_str), Some("ttyS0"));
    assert_eq!(m.get(&24).map(String::as_str), Some("virtio0-input.0"));
    assert_eq!(m.len(), 2);
}

#[test]
fn slots_are_named_for_their_class() {
    let sys: BTreeMap<u32, String> = [(0, "read".to_string())].into();
    let irq: BTreeMap<u32, String> = [(4, "ttyS0".to_string())].into();
    assert_eq!(slot_name(0, &sys, &irq), ("syscall", "read".into()));
    assert_eq!(slot_name(7, &sys, &irq), ("syscall", "syscall_7".into()));
    assert_eq!(slot_name(prog::USER, &sys, &irq).0, "user");
    assert_eq!(
        slot_name(prog::MMAP_FILE, &sys, &irq),
        ("syscall", "mmap:file".into())
    );
    assert_eq!(
        slot_name(prog::FAULT_MAJOR, &sys, &irq),
        ("fault", "major".into())
    );
    assert_eq!(
        slot_name(prog::SOFTIRQ_BASE + 3, &sys, &irq),
        ("softirq", "net_rx".into())
    );
    assert_eq!(
        slot_name(prog::VEC_BASE, &sys, &irq),
        ("irq", "local_timer".into())
    );
    assert_eq!(
        slot_name(prog::IRQ_BASE + 4, &sys, &irq),
        ("irq", "4:ttyS0".into())
    );
}

#[test]
fn the_sum_check_and_the_attributed_shares() {
    let s = Split {
        lines: vec![
            line("user", "user", 600),
            line("syscall", "read", 300),
            line("fault", "minor", 50),
            line("kernel-other", "unmeasured", 50),
        ],
        usage_ns: 1000,
        ..Split::default()
    };
    let c = s.check().unwrap();
    assert_eq!(c.measured_ns, 950);
    assert!((c.diff_pct + 5.0).abs() < 1e-9);
    assert!(!c.holds());
    assert_eq!(s.unnamed_kernel_ns(), 50);
    let (all, kernel) = s.attributed(0).unwrap();
    assert!((all - 95.0).abs() < 1e-9);
    assert!((kernel - 350.0 / 400.0 * 100.0).abs() < 1e-9);
    // Samples naming 20 ns of the unmeasured 50.
    let (all, _) = s.attributed(20).unwrap();
    assert!((all - 97.0).abs() < 1e-9);
    // A split that passes its usage names everything.
    let over = Split {
        lines: vec![line("user", "user", 1010)],
        usage_ns: 1000,
        ..Split::default()
    };
    assert!(over.check().unwrap().holds());
    assert_eq!(over.attributed(0).unwrap().0, 100.0);
    assert!(Split::default().check().is_none());
    // Ticks share user time: a quarter of its ticks in kernel mode, (25 + 1/2) / 101 of
    // it by Jeffreys' estimate.
    let mut s = Split {
        lines: vec![line("user", "user", 800), line("syscall", "read", 200)],
        usage_ns: 1000,
        ..Split::default()
    };
    s.share_user(25, 75);
    assert_eq!(s.class_ns("user"), 599);
    assert_eq!(
        s.line("kernel-other", "inside user time").unwrap().cpu_ns,
        201
    );
    assert_eq!(s.measured_ns(), 1000);
    assert_eq!(s.unnamed_kernel_ns(), 201);
    // Its 95% interval: 800 x 1.96 x sqrt(p (1 - p) / 101), p = 25.5 / 101.
    let p = 25.5 / 101.0;
    let want = (800.0 * 1.96 * (p * (1.0 - p) / 101.0_f64).sqrt()) as u64;
    assert_eq!(
        s.line("kernel-other", "inside user time")
            .unwrap()
            .cpu_ci_ns,
        want
    );
    assert_eq!(want, 67);
    let (all, kernel) = s.attributed(0).unwrap();
    assert!((all - 79.9).abs() < 1e-9 && (kernel - 200.0 / 401.0 * 100.0).abs() < 1e-9);
    // Three ticks, all in the kernel: 3.5 / 4 of user time is kernel, not all of it.
    let mut s = Split {
        lines: vec![line("user", "user", 800)],
        usage_ns: 800,
        ..Split::default()
    };
    s.share_user(3, 0);
    assert_eq!(s.class_ns("user"), 100);
}

/// A line above the cgroup's usage (a difference gone below zero, read unsigned) makes
/// the split not ok and fails its sum check, which sums the printed lines without
/// wrapping; unmeasured time past 1% of the usage makes it disturbed, with the dropped
/// differences counted on the unmeasured line.
#[test]
fn an_impossible_line_is_not_ok_and_unmeasured_past_one_percent_is_disturbed() {
    let wrapped = Split {
        lines: vec![
            line("user", "user", 600),
            line("syscall", "rt_sigaction", u64::MAX - 400),
            line("syscall", "read", 800),
        ],
        usage_ns: 1000,
        ..Split::default()
    };
    assert_eq!(wrapped.impossible().len(), 1);
    assert_eq!(wrapped.measured_ns(), u64::MAX);
    assert!(!wrapped.check().unwrap().holds());
    let (q, why) = wrapped.quality();
    assert_eq!(q, Quality::Disturbed);
    assert!(
        why[0].contains("rt_sigaction") && why[0].contains("not ok"),
        "{why:?}"
    );

    let mut s = Split {
        lines: vec![line("user", "user", 700), line("syscall", "read", 285)],
        usage_ns: 1000,
        dropped: 3,
        ..Split::default()
    };
    s.close();
    let u = s.line("kernel-other", "unmeasured").unwrap();
    assert_eq!((u.count, u.cpu_ns), (3, 15));
    assert!(s.notes.iter().any(|n| n.starts_with("3 differences")));
    let (q, why) = s.quality();
    assert_eq!(q, Quality::Disturbed, "{why:?}");
    assert!(why[0].contains("1.5% of the usage is unmeasured (3 clock differences dropped)"));
    // Within 1%: ok, the dropped differences still shown.
    let mut s = Split {
        lines: vec![line("user", "user", 700), line("syscall", "read", 295)],
        usage_ns: 1000,
        dropped: 2,
        ..Split::default()
    };
    s.close();
    assert_eq!(s.quality(), (Quality::Ok, vec![]));
    assert_eq!(s.line("kernel-other", "unmeasured").unwrap().count, 2);
    // Time charged before the first sight: out of the usage, said, and no unmeasured line.
    let mut s = Split {
        lines: vec![line("user", "user", 700), line("syscall", "read", 280)],
        usage_ns: 1000,
        ..Split::default()
    };
    s.leave_out_before_join(20);
    s.close();
    assert_eq!((s.usage_ns, s.joined_before_ns), (980, 20));
    assert!(s.line("kernel-other", "unmeasured").is_none());
    assert!(
        s.notes
            .iter()
            .any(|x| x.starts_with("the cgroup's usage less 20.0 ns")),
        "{:?}",
        s.notes
    );
    // A task taken up late: said, once or n times, its lost time on the unmeasured line.
    for (n, said) in [(1, "once a tracked task"), (4, "4 times a tracked task")] {
        let mut s = Split {
            lines: vec![line("user", "user", 700), line("syscall", "read", 280)],
            usage_ns: 1000,
            late_joins: n,
            ..Split::default()
        };
        s.close();
        assert!(s.notes.iter().any(|x| x.starts_with(said)), "{:?}", s.notes);
        assert_eq!(s.line("kernel-other", "unmeasured").unwrap().cpu_ns, 20);
    }
}

/// A sampled split: 100 of 1600 reads timed, 200 ns each with a spread, scaled to all
/// 1600; the untimed calls' time that stayed in user comes out of it; the ticks' kernel
/// share is taken of user as it was, less what the estimate took; the sum is kept.
#[test]
fn a_sampled_split_is_scaled_with_an_interval_and_keeps_its_sum() {
    let mut s = Split {
        lines: vec![
            Line {
                timed: 100,
                wait_ns: 10,
                ..line("syscall", "read", 20_000)
            },
            line("user", "user", 800_000),
        ],
        usage_ns: 820_000,
        sample_period: 16,
        ..Split::default()
    };
    s.lines[0].count = 1600;
    let before = s.measured_ns();
    // Each timed call 200 ns ± 50 (var 2500): squares = n (mean² + var).
    let sq: BTreeMap<String, u64> = [("read".to_string(), 100 * (40_000 + 2_500))].into();
    let extra = s.estimate(&sq);
    assert_eq!(extra, 300_000);
    let r = s.line("syscall", "read").unwrap();
    assert_eq!((r.cpu_ns, r.wait_ns), (320_000, 160));
    // sd 50, n 100 of 1600: 1600 * 50 / 10 * sqrt(1 - 1/16) * 1.96.
    let ci = 1.96 * 1600.0 * 5.0 * (15.0f64 / 16.0).sqrt();
    assert!((r.cpu_ci_ns as f64 - ci).abs() < 2.0, "{}", r.cpu_ci_ns);
    assert_eq!(s.class_ns("user"), 500_000);
    assert_eq!(s.measured_ns(), before);
    // Half the ticks in kernel mode: half of user as it was (400 us) is kernel, of which
    // the estimate took 300.
    s.share_user_less(50, 50, extra);
    assert_eq!(s.class_ns("user"), 400_000);
    // An estimate that wants more than user holds is scaled down to it: no line passes
    // the usage, the sum is kept.
    let mut over = Split {
        lines: vec![
            Line {
                timed: 10,
                count: 160,
                ..line("syscall", "read", 10_000)
            },
            line("user", "user", 50_000),
        ],
        usage_ns: 60_000,
        sample_period: 16,
        ..Split::default()
    };
    assert_eq!(over.estimate(&BTreeMap::new()), 50_000);
    assert_eq!(over.line("syscall", "read").unwrap().cpu_ns, 60_000);
    assert_eq!(over.class_ns("user"), 0);
    assert!(over.notes[0].contains("scaled down"));
    assert_eq!(
        s.line("kernel-other", "inside user time").unwrap().cpu_ns,
        100_000
    );
    assert_eq!(s.measured_ns(), before);
    s.close();
    assert!(s
        .notes
        .iter()
        .any(|n| n.starts_with("an estimate: one syscall in 16")));
    assert!(s
        .notes
        .iter()
        .any(|n| n.starts_with("estimate: syscall read 0.320 ms ±")
            && n.contains("100 of 1600 calls timed")));
}

/// A real run of dd in a fresh cgroup: its reads and writes, user time, the sum check.
/// Needs root and BPF: skipped with the reason where they are missing.
#[test]
fn a_real_run_is_split_and_adds_up() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: the measured split needs root");
        return;
    }
    let argv: Vec<String> = "dd if=/dev/zero of=/dev/null bs=512 count=200000"
        .split(' ')
        .map(String::from)
        .collect();
    let (split, _, status) = match measure_command(&argv, Stdio3::Null) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    for l in &split.lines {
        eprintln!("{l:?}");
    }
    eprintln!("{:?} notes {:?}", split.check(), split.notes);
    assert!(!status.failed(), "{}", status.line());
    let read = split.line("syscall", "read").expect("dd's reads");
    assert!(read.count >= 200_000 && read.cpu_ns > 0);
    assert!(split.line("syscall", "write").unwrap().count >= 200_000);
    assert!(split.class_ns("user") > 0);
    let c = split.check().expect("cpu.stat read");
    assert!(c.diff_pct.abs() < 10.0, "{c:?}");
}

#[test]
fn the_tick_period_gives_a_short_program_enough_ticks_and_a_long_one_the_longest() {
    let longest = prog::USER_TICK_PERIOD_NS;
    assert_eq!(tick_period_for(None), longest);
    assert_eq!(tick_period_for(Some(0)), longest);
    // A 15 ms program: 200 ticks would be 75 us apart, below the shortest.
    assert_eq!(tick_period_for(Some(15_000_000)), SHORTEST_TICK_NS);
    // 170 ms: 850 us, in whole 50 us.
    assert_eq!(tick_period_for(Some(170_000_000)), 850_000);
    assert_eq!(tick_period_for(Some(10_000_000_000)), longest);
    // The local timer's interrupts the split's own ticks made follow the period it ran at,
    // and counts saved before the period was chosen read at the longest.
    let mut s = Split {
        lines: vec![Line {
            count: 200,
            ..line("irq", "local_timer", 2_000_000)
        }],
        usage_ns: 80_000_000,
        tick_period_ns: 500_000,
        ..Split::default()
    };
    let t = crate::terms_of::timer_parts(&s, 10);
    assert_eq!((t.split, t.sampler, t.ticks), (160, 10, 30));
    s.tick_period_ns = 0;
    assert_eq!(crate::terms_of::timer_parts(&s, 10).split, 20);
    let old: Split =
        serde_json::from_str(r#"{"lines":[],"usage_ns":1,"stat_user_ns":0,"stat_system_ns":0}"#)
            .unwrap();
    assert_eq!(old.tick_period(), longest);
}

/// The kernel time's interval is the user class's estimates': the ticks' kernel-other and a
/// sampled split's untimed calls, independent, by their root sum of squares.
#[test]
fn the_kernel_times_interval_is_its_estimates() {
    let line = |class: &str, event: &str, ci: u64| Line {
        class: class.into(),
        event: event.into(),
        cpu_ns: 1_000_000,
        cpu_ci_ns: ci,
        ..Line::default()
    };
    let mut s = Split {
        lines: vec![line("user", "user", 3000), line("syscall", "read", 0)],
        usage_ns: 3_000_000,
        ..Split::default()
    };
    assert_eq!(s.kernel_ci_ns(), 3000);
    s.lines.push(line("kernel-other", "inside user time", 4000));
    assert_eq!(s.kernel_ci_ns(), 5000);
    s.lines[0].cpu_ci_ns = 0;
    assert_eq!(s.kernel_ci_ns(), 4000);
}
