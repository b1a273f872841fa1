//! Tests of `beside`: the measured lines with their prices, and the readings.
use super::*;
use crate::pricing::Unit;

/// The tracer's own cost inside each line.
#[path = "beside_tracer_tests.rs"]
mod tracer;

fn line(class: &str, event: &str, count: u64, cpu: u64) -> Line {
    Line {
        class: class.into(),
        event: event.into(),
        count,
        cpu_ns: cpu,
        ..Line::default()
    }
}

fn priced(class: &str, event: &str, count: u64, unit: f64) -> Priced {
    Priced {
        class: class.into(),
        event: event.into(),
        count,
        unit: Some(Unit {
            samples: vec![unit],
            rows: Vec::new(),
            from: "test".into(),
        }),
        unit_name: "s".into(),
        how: String::new(),
    }
}

fn split() -> Split {
    Split {
        lines: vec![
            line("user", "user", 0, 500),
            line("syscall", "read", 10, 300),
            line("syscall", "pread64", 10, 100),
            line("syscall", "write", 10, 100),
            line("fault", "minor", 4, 40),
        ],
        usage_ns: 1040,
        ..Split::default()
    }
}

#[test]
fn fd_kinds_fold_onto_the_name_and_bytes_onto_the_family_by_count() {
    let s = split();
    let p = vec![
        priced("syscall", "read:file", 6, 10.0),
        priced("syscall", "read:pipe", 4, 5.0),
        priced("bytes", "read", 100, 1.0),
        priced("fault", "minor", 4, 10.0),
    ];
    let b = beside(&s, &p);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap();
    // read: 60 + 20 from its kinds, and half the 100 bytes (10 of the family's 20 calls).
    assert_eq!(of("read").priced_ns, Some(130.0));
    assert_eq!(of("pread64").priced_ns, Some(50.0));
    assert_eq!(of("write").priced_ns, None);
    assert_eq!(of("minor").ratio(), Some(1.0));
    assert_eq!(of("user").priced_ns, None);
}

/// Lines the split measures apart from their syscall's name: creates on their own line,
/// getdents64's entries on getdents64, an exit's unmapped pages on exit_group.
#[test]
fn creates_entries_and_unmapped_pages_meet_the_lines_that_hold_them() {
    let s = Split {
        lines: vec![
            line("syscall", "openat", 10, 1000),
            line("syscall", "openat:create", 2, 2000),
            line("syscall", "getdents64", 4, 400),
            line("syscall", "exit_group", 1, 300),
            line("syscall", "exit", 20, 300),
            line("syscall", "munmap", 2, 900),
        ],
        usage_ns: 4900,
        ..Split::default()
    };
    let p = vec![
        priced("syscall", "openat", 10, 100.0),
        priced("syscall", "openat:create", 2, 1000.0),
        priced("syscall", "getdents64", 4, 50.0),
        priced("bytes", "dirents", 480, 0.5),
        priced("bytes", "unmapped", 4096, 0.05),
        priced("syscall", "munmap", 2, 100.0),
        priced("bytes", "unmapped by munmap", 8192, 0.05),
        priced("bytes", "unmapped by munmap:file", 4096, 0.025),
        priced("vmas", "unmapped by munmap", 2, 50.0),
    ];
    let b = beside(&s, &p);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap();
    assert_eq!(of("openat").priced_ns, Some(1000.0));
    assert_eq!(of("openat:create").priced_ns, Some(2000.0));
    assert_eq!(of("getdents64").priced_ns, Some(200.0 + 240.0));
    assert_eq!(of("exit_group").priced_ns, Some(204.8));
    // The threads' own exits unmap nothing of the process's.
    assert_eq!(of("exit").priced_ns, None);
    // A munmap's pages and mappings are its own line's.
    assert_eq!(of("munmap").priced_ns, Some(200.0 + 409.6 + 102.4 + 100.0));
}

#[test]
fn the_evidence_names_what_supports_the_distance() {
    let s = split();
    let mut b = Beside {
        line: Line {
            waits: 3,
            wait_ns: 5000,
            ..line("syscall", "futex", 3, 1000)
        },
        priced_ns: Some(100.0),
        rows: Vec::new(),
        tracer_ns: 0.0,
        switch_ns: 0.0,
    };
    let ev = Evidence::default();
    let e = evidence(&s, &b, &ev);
    assert!(e[0].starts_with("it was switched out 3 times"), "{e:?}");
    assert!(
        e[1].contains("prices 33.3 ns an event; it would have to be 333.3 ns"),
        "{e:?}"
    );
    b.line.waits = 0;
    b.priced_ns = None;
    assert_eq!(
        evidence(&s, &b, &ev),
        ["nothing counted in this run explains it"]
    );
    let ev = Evidence {
        subsystems: vec![("futex".into(), 60.0), ("sched".into(), 30.0)],
        terms: Vec::new(),
        ..Evidence::default()
    };
    assert_eq!(
        evidence(&s, &b, &ev),
        ["the run's kernel samples: futex 60%, sched 30%"]
    );
}

#[test]
fn rows_follow_the_contract_and_render() {
    let s = split();
    let b = beside(&s, &[priced("syscall", "read", 10, 15.0)]);
    let mut o = Outcome::default();
    push_rows(&mut o, &s, &b, "dd", 0);
    let metrics = |c: &str, e: &str| -> Vec<String> {
        o.results
            .iter()
            .filter(|r| r.key("class") == c && r.key("event") == e)
            .map(|r| r.metric.clone())
            .collect()
    };
    assert_eq!(
        metrics("syscall", "read"),
        ["cpu_time", "wait_time", "per_event", "priced_ratio"]
    );
    assert_eq!(metrics("user", "user"), ["cpu_time"]);
    assert_eq!(
        metrics("program", "total"),
        ["cpu_usage", "attributed", "kernel_attributed"]
    );
    let ratio = o
        .results
        .iter()
        .find(|r| r.metric == "priced_ratio")
        .unwrap();
    assert_eq!(ratio.summary.median, 0.5);
    assert!(o.results.iter().all(|r| r.quality == Some(Quality::Ok)));
    let t = render(&o);
    assert!(
        t.contains("where the CPU time went") && t.contains("0.50"),
        "{t}"
    );
    let v = verdict(&s, &b, 0);
    assert!(
        v[0].contains("+0.00%") && v[0].contains("within 2%"),
        "{v:?}"
    );
}

#[test]
fn heavy_lines_outside_the_band_are_named_with_evidence_and_the_rest_left_out() {
    let s = Split {
        lines: vec![
            line("user", "user", 0, 5000),
            line("syscall", "openat", 10, 1000),
            line("syscall", "read", 10, 100),
            line("syscall", "execve", 1, 200),
            line("fault", "minor", 4, 40),
        ],
        usage_ns: 6340,
        ..Split::default()
    };
    let b = beside(
        &s,
        &[
            priced("syscall", "openat", 10, 10.0),
            priced("syscall", "read", 10, 10.0),
        ],
    );
    let ev = Evidence {
        subsystems: vec![("ext4".into(), 40.0)],
        terms: vec![("open".into(), 10.0), ("create".into(), 90.0)],
        ..Evidence::default()
    };
    let out: Vec<String> = outside(&s, &b, 1340.0, &ev)
        .iter()
        .map(Outside::text)
        .collect();
    // openat (0.10x, 75% of the kernel time) and execve (no term, 15%); read is within
    // the band, the minor faults under 5%.
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        out[0].starts_with("syscall openat:") && out[0].contains("(0.10x)"),
        "{}",
        out[0]
    );
    assert!(out[0].contains("nearer a create's"), "{}", out[0]);
    assert!(out[0].contains("would have to be 100.0 ns"), "{}", out[0]);
    assert!(out[0].contains("ext4 40%"), "{}", out[0]);
    assert!(
        out[1].starts_with("syscall execve:") && out[1].contains("no term"),
        "{}",
        out[1]
    );
}

#[test]
fn a_reading_cites_the_samples_taken_inside_its_own_line_and_what_they_mean() {
    let s = split();
    let b = Beside {
        line: line("syscall", "openat:create", 10, 100_000),
        priced_ns: Some(10_000.0),
        rows: Vec::new(),
        tracer_ns: 0.0,
        switch_ns: 0.0,
    };
    let mut ev = Evidence {
        subsystems: vec![("fs/VFS".into(), 60.0)],
        ..Evidence::default()
    };
    ev.inside.insert(
        "syscall openat".into(),
        crate::samples::Subsystem {
            samples: 20,
            top: vec![
                ("recently_deleted".into(), 9),
                ("find_get_block_common".into(), 7),
                ("memcpy".into(), 4),
            ],
        },
    );
    let e = evidence(&s, &b, &ev);
    let last = e.last().unwrap();
    assert!(
        last.starts_with("the 20 kernel samples inside openat calls (of every kind) stop most in recently_deleted 45%, find_get_block_common 35%, memcpy 20%"),
        "{e:?}"
    );
    assert!(last.contains("ext4 with no journal"), "{last}");
    // The run-wide subsystems only where the line has no samples of its own (or too few).
    assert!(!e.iter().any(|x| x.contains("the run's kernel samples")));
    ev.inside.get_mut("syscall openat").unwrap().samples = 4;
    let e = evidence(&s, &b, &ev);
    assert!(
        e.last()
            .unwrap()
            .contains("the run's kernel samples: fs/VFS 60%"),
        "{e:?}"
    );
}

#[test]
fn the_timer_line_says_how_many_of_its_interrupts_the_sampler_made() {
    let timer = line("irq", "local_timer", 300, 3_000_000);
    let mut s = split();
    s.lines.push(timer.clone());
    let b = Beside {
        line: timer,
        priced_ns: Some(600_000.0),
        rows: Vec::new(),
        tracer_ns: 0.0,
        switch_ns: 0.0,
    };
    let ev = Evidence {
        sampler_interrupts: 120,
        ..Evidence::default()
    };
    // usage_ns 1040 ns: no 4 ms of CPU, no split tick.
    let e = evidence(&s, &b, &ev);
    assert!(
        e[0].starts_with("of its 300 interrupts, 120 were the sampler's")
            && e[0].contains("about 0 the split's own")
            && e[0].contains("180 were the kernel's tick"),
        "{e:?}"
    );
    let long = Split {
        usage_ns: 400_000_000,
        ..s.clone()
    };
    let e = evidence(&long, &b, &ev);
    assert!(
        e[0].contains("about 100 the split's own") && e[0].contains("; 80 were the kernel's tick"),
        "{e:?}"
    );
}

/// The switches' price goes where the split saw the waits: on the lines that were switched
/// out inside, by their waits.
#[test]
fn the_switches_price_lands_on_the_lines_that_waited() {
    let s = Split {
        lines: vec![
            Line {
                waits: 3,
                ..line("syscall", "write", 10, 5000)
            },
            Line {
                waits: 1,
                ..line("syscall", "futex", 4, 800)
            },
            line("syscall", "read", 10, 300),
        ],
        usage_ns: 9000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("switch", "voluntary", 4, 100.0)]);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(of("write"), Some(300.0));
    assert_eq!(of("futex"), Some(100.0));
    assert_eq!(of("read"), None);
    let switch_of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().switch_ns;
    assert_eq!((switch_of("write"), switch_of("read")), (300.0, 0.0));
}

/// A heavy line priced only for the switches inside it is read as having no term.
#[test]
fn a_line_priced_only_for_its_switches_reads_as_no_term() {
    let s = Split {
        lines: vec![
            Line {
                waits: 2,
                ..line("syscall", "copy_file_range", 10, 5000)
            },
            line("user", "user", 0, 1000),
        ],
        usage_ns: 6000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("switch", "voluntary", 2, 100.0)]);
    let out = outside(&s, &b, 5000.0, &Evidence::default());
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].priced_ns, out[0].ratio), (None, None));
    assert!(out[0].text().contains("no term"), "{}", out[0].text());
}

/// A line measured as an estimate (the user-time ticks' kernel share) is not named outside
/// the band where its price lies inside its interval; outside it, its evidence gives the
/// interval.
#[test]
fn an_estimated_line_is_named_only_beyond_its_interval() {
    let tick_line = |ci: u64| Line {
        cpu_ci_ns: ci,
        ..line("kernel-other", "inside user time", 1, 4000)
    };
    for (ci, named) in [(3500, false), (1000, true)] {
        let s = Split {
            lines: vec![tick_line(ci), line("user", "user", 0, 6000)],
            usage_ns: 10_000,
            ..Split::default()
        };
        // Priced 1000 ns against 4000 measured: 0.25x.
        let b = beside(&s, &[priced("kernel-other", "inside user time", 1, 1000.0)]);
        let out = outside(&s, &b, 4000.0, &Evidence::default());
        assert_eq!(out.len(), usize::from(named), "ci {ci}");
        if named {
            let text = out[0].text();
            assert!(
                text.contains("an estimate") && text.contains("± 1.00 us"),
                "{text}"
            );
        }
    }
}

/// The page cache's work is priced on the lines the split saw it done in, by their share of
/// it; where no line holds any, on the calls that do it, by their count.
#[test]
fn the_page_caches_work_lands_where_the_split_saw_it_done() {
    let mut unlink = line("syscall", "unlink", 1, 1000);
    unlink.folios_dropped = 10;
    let mut fadvise = line("syscall", "fadvise64", 1, 3000);
    fadvise.folios_dropped = 30;
    let s = Split {
        lines: vec![
            unlink,
            fadvise,
            line("syscall", "ftruncate", 8, 800),
            line("syscall", "read", 10, 300),
            line("syscall", "pread64", 30, 300),
        ],
        usage_ns: 5400,
        ..Split::default()
    };
    let b = beside(
        &s,
        &[
            priced("folios", "dropped", 40, 100.0),
            priced("pages", "read in", 8, 50.0),
        ],
    );
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("unlink"), Some(1000.0));
    assert_eq!(on("fadvise64"), Some(3000.0));
    assert_eq!(on("ftruncate"), None);
    // No line holds pages read in: shared by the reads' count, 10 and 30.
    assert_eq!(on("read"), Some(100.0));
    assert_eq!(on("pread64"), Some(300.0));
    // No line holds pages read from small files either: on the reads by their count too.
    let small = [priced("pages", "read from small files", 40, 10.0)];
    let b = beside(&s, &small);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("read"), Some(100.0));
    assert_eq!(on("pread64"), Some(300.0));
    // Where the split saw them (a copy_file_range's, which is no read), there.
    let mut copy = line("syscall", "copy_file_range", 5, 4000);
    copy.small_pages = 30;
    let mut read = line("syscall", "read", 10, 300);
    read.small_pages = 10;
    let s = Split {
        lines: vec![copy, read, line("syscall", "pread64", 30, 300)],
        usage_ns: 4600,
        ..Split::default()
    };
    let b = beside(&s, &small);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("copy_file_range"), Some(300.0));
    assert_eq!(on("read"), Some(100.0));
    assert_eq!(on("pread64"), None);
}

/// The interrupts a call sent to another CPU are priced on the lines that sent them (a pipe
/// write waking its reader there, a futex wake), by their share; where no line holds any, on
/// the writes by their count.
#[test]
fn the_interrupts_sent_land_on_the_calls_that_sent_them() {
    let mut write = line("syscall", "write", 100, 700_000);
    write.ipis_sent = 90;
    let mut futex = line("syscall", "futex", 20, 140_000);
    futex.ipis_sent = 10;
    let s = Split {
        lines: vec![write, futex, line("syscall", "read", 100, 50_000)],
        usage_ns: 900_000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("ipi", "sent", 100, 7000.0)]);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("write"), Some(630_000.0));
    assert_eq!(on("futex"), Some(70_000.0));
    assert_eq!(on("read"), None);
    // Counted, but by no line (a counts file from before the field): on the writes.
    let s = Split {
        lines: vec![
            line("syscall", "write", 100, 700_000),
            line("syscall", "read", 100, 50_000),
        ],
        usage_ns: 750_000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("ipi", "sent", 100, 7000.0)]);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("write"), Some(700_000.0));
    assert_eq!(on("read"), None);
}

/// A fault line's interrupts are the fault's: the syscalls' interrupts stay on the syscalls,
/// and those sent inside faults land on the fault lines that sent them (on the copy on
/// write's line where no line holds any).
#[test]
fn the_interrupts_sent_in_faults_land_on_the_faults() {
    let mut write = line("syscall", "write", 100, 700_000);
    write.ipis_sent = 10;
    let mut cow = line("fault", "minor:cow", 400, 2_000_000);
    cow.ipis_sent = 300;
    let mut minor = line("fault", "minor", 400, 600_000);
    minor.ipis_sent = 100;
    let s = Split {
        lines: vec![write, cow, minor],
        usage_ns: 3_300_000,
        ..Split::default()
    };
    let b = beside(
        &s,
        &[
            priced("ipi", "sent", 10, 7000.0),
            priced("ipi", "in a fault", 400, 10_000.0),
        ],
    );
    let on = |c: &str, e: &str| {
        b.iter()
            .find(|x| x.line.class == c && x.line.event == e)
            .unwrap()
            .priced_ns
    };
    assert_eq!(on("syscall", "write"), Some(70_000.0));
    assert_eq!(on("fault", "minor:cow"), Some(3_000_000.0));
    assert_eq!(on("fault", "minor"), Some(1_000_000.0));
    // Counted, but by no line: on the copies on write.
    let s = Split {
        lines: vec![line("fault", "minor:cow", 400, 2_000_000)],
        usage_ns: 2_000_000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("ipi", "in a fault", 400, 10_000.0)]);
    assert_eq!(b[0].priced_ns, Some(4_000_000.0));
}

/// The wakee's side of a wake-up on a halted CPU lands on the calls the sleepers were in,
/// by their share; where no line holds any, on the lines that waited, by their waits.
#[test]
fn wake_ups_on_a_halted_cpu_land_on_the_calls_that_slept() {
    let mut read = line("syscall", "read", 100, 900_000);
    read.halted_in = 60;
    read.waits = 90;
    let mut futex = line("syscall", "futex", 10, 100_000);
    futex.waits = 10;
    let s = Split {
        lines: vec![read, futex],
        usage_ns: 1_000_000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("wakeup", "on a halted cpu", 60, 8000.0)]);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("read"), Some(480_000.0));
    assert_eq!(on("futex"), None);
    let mut s = s;
    s.lines[0].halted_in = 0;
    let b = beside(&s, &[priced("wakeup", "on a halted cpu", 60, 8000.0)]);
    let on = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(on("read"), Some(432_000.0));
    assert_eq!(on("futex"), Some(48_000.0));
}

#[test]
fn the_table_prices_a_line_on_its_own_time_less_the_tracers() {
    let s = split();
    let mut b = beside(&s, &[priced("syscall", "read", 10, 15.0)]);
    let t = crate::measured::TracerCost {
        syscall: 1.0,
        ..Default::default()
    };
    net_of_tracer(&mut b, &t);
    let read = b.iter().find(|x| x.line.event == "read").unwrap();
    assert!(read.tracer_ns > 0.0);
    let mut o = Outcome::default();
    push_rows(&mut o, &s, &b, "dd", 0);
    let get = |m: &str| {
        o.results
            .iter()
            .find(|r| r.key("event") == "read" && r.metric == m)
            .map(|r| r.summary.median)
    };
    assert_eq!(get("tracer_time"), Some(read.tracer_ns));
    // The ratio is the priced time over the line's own; the table's priced column is that
    // ratio times the own time, the priced time itself, not times the gross.
    let own = read.line.cpu_ns as f64 - read.tracer_ns;
    assert!((get("priced_ratio").unwrap() * own - read.priced_ns.unwrap()).abs() < 1e-9);
    let text = render(&o);
    let priced = costlab_core::measure::units::human_ns(read.priced_ns.unwrap());
    let row = text.lines().find(|l| l.contains(" read ")).unwrap();
    assert!(row.contains(&priced), "{row} lacks {priced}");
}

#[test]
fn faults_inside_syscalls_are_priced_on_the_lines_that_took_them() {
    let mut s = split();
    s.lines[1].kernel_faults = 30;
    s.lines[2].kernel_faults = 10;
    let b = beside(&s, &[priced("pages", "faulted in syscalls", 40, 5.0)]);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap();
    // 200 ns over the two reads by their faults: 150 and 50; none on write or the user faults.
    assert_eq!(of("read").priced_ns, Some(150.0));
    assert_eq!(of("pread64").priced_ns, Some(50.0));
    assert_eq!(of("write").priced_ns, None);
    assert_eq!(of("minor").priced_ns, None);
}

#[test]
fn a_file_fault_lines_reading_says_how_many_were_the_runs_first_on_their_range() {
    let s = Split {
        lines: vec![line("fault", "minor:file", 10, 50_000)],
        usage_ns: 60_000,
        ..Split::default()
    };
    let b = beside(&s, &[priced("fault", "minor:file", 10, 900.0)]);
    let ev = Evidence {
        terms: vec![
            ("fault-file".into(), 1500.0),
            ("fault-file-first".into(), 4500.0),
        ],
        file_firsts: 8,
        ..Evidence::default()
    };
    let e = evidence(&s, &b[0], &ev);
    assert!(
        e.iter()
            .any(|x| x.contains("8 of its 10 faults were the run's first")
                && x.contains(&format!(
                    "priced {} beyond the {}",
                    human_ns(4500.0),
                    human_ns(1500.0)
                ))),
        "{e:?}"
    );
    // Without first touches counted, no such clause.
    let plain = evidence(
        &s,
        &b[0],
        &Evidence {
            file_firsts: 0,
            ..ev
        },
    );
    assert!(
        !plain.iter().any(|x| x.contains("first on their")),
        "{plain:?}"
    );
}

/// A file's release runs inside the close that dropped its last descriptor: its price is
/// set on the close line, not beside the kernel's work inside user time.
#[test]
fn the_files_released_are_priced_on_the_close_line() {
    let s = Split {
        lines: vec![
            line("syscall", "close", 10, 3000),
            line("kernel-other", "inside user time", 1, 9000),
        ],
        ..Split::default()
    };
    let p = [
        priced("syscall", "close", 10, 250.0),
        priced("files", "released", 4, 750.0),
    ];
    let b = beside(&s, &p);
    let of = |e: &str| b.iter().find(|x| x.line.event == e).unwrap().priced_ns;
    assert_eq!(of("close"), Some(2500.0 + 3000.0));
    assert_eq!(of("inside user time"), None);
}
