//! Pricing's own tests (pricing.rs).

use super::*;
use crate::count::Counts;

/// The median priced of the row of `class` and `event`.
fn by(rows: &[Priced], class: &str, event: &str) -> Option<f64> {
    rows.iter()
        .find(|p| p.class == class && p.event == event)
        .and_then(|p| p.priced())
        .map(|s| s.median)
}

fn unit(x: f64) -> Unit {
    Unit {
        samples: vec![x],
        rows: Vec::new(),
        from: "test".into(),
    }
}

/// With the entries counted (bytes dirents), a getdents64 call is priced at its own
/// part, the term's call less its entries (a 2-entry directory with . and .., in two calls:
/// 2 a call), and the entries at the per-entry term by 48-byte records; without them, at the
/// whole call as before.
#[test]
fn getdents64_is_priced_by_call_and_entries_where_the_entries_were_counted() {
    let mut units: Units = [
        ("getdents64".to_string(), unit(10_000.0)),
        ("getdents64/entry".to_string(), unit(100.0)),
    ]
    .into();
    derive(&mut units);
    assert_eq!(
        units["getdents64-call"].samples,
        vec![10_000.0 - 2.0 * 100.0]
    );
    let mut counts = Counts::default();
    counts.syscalls.insert("getdents64".into(), 10);
    let whole = price(&counts, &units);
    assert_eq!(by(&whole, "syscall", "getdents64"), Some(100_000.0));
    counts
        .events
        .insert(("bytes".into(), "dirents".into()), 4800);
    let split = price(&counts, &units);
    assert_eq!(by(&split, "syscall", "getdents64"), Some(98_000.0));
    let entries = by(&split, "bytes", "dirents").unwrap();
    assert!((entries - 100.0 * 100.0).abs() < 1e-6, "{entries}");
}

/// With the components of the stats' paths counted, a stat is priced at its own part (the
/// term less its own path's components) and the components at the path-component term; a
/// stat by fd (no component) comes out at the call's own part, a five-component path above
/// the term; where the split put the stats by fd on a line of their own, at the fstat term.
/// Without them, every stat at the whole term.
#[test]
fn stats_are_priced_by_call_and_path_components_where_the_components_were_counted() {
    let mut units: Units = [
        ("stat".to_string(), unit(700.0)),
        ("path-component".to_string(), unit(100.0)),
    ]
    .into();
    derive(&mut units);
    let own = costlab_core::measure::unitcost::stat_path_components() as f64;
    assert!(own >= 1.0);
    assert_eq!(units["stat-call"].samples, vec![700.0 - own * 100.0]);
    let mut counts = Counts::default();
    counts.syscalls.insert("newfstatat".into(), 10);
    counts.syscalls.insert("statx".into(), 10);
    counts.syscalls.insert("readlink".into(), 1);
    let whole = price(&counts, &units);
    assert_eq!(by(&whole, "syscall", "statx"), Some(7000.0));
    // 10 stats by fd (newfstatat with AT_EMPTY_PATH) and 10 of five-component paths (statx).
    counts
        .events
        .insert(("path".into(), "components".into()), 50);
    let split = price(&counts, &units);
    let call = 700.0 - own * 100.0;
    assert_eq!(by(&split, "syscall", "newfstatat"), Some(10.0 * call));
    assert_eq!(by(&split, "syscall", "statx"), Some(10.0 * call));
    assert_eq!(by(&split, "path", "components"), Some(5000.0));
    // Not of the family: a readlink stays at the whole stat.
    assert_eq!(by(&split, "syscall", "readlink"), Some(700.0));
    // Where the split moved the stats by fd to their own line, they are priced at the fstat
    // term, not at a stat's own part.
    units.insert("fstat".into(), unit(250.0));
    counts.syscalls.insert("newfstatat:fd".into(), 4);
    let split = price(&counts, &units);
    assert_eq!(by(&split, "syscall", "newfstatat:fd"), Some(1000.0));
    assert_eq!(by(&split, "syscall", "newfstatat"), Some(10.0 * call));
}

/// A stat that finds an inode first costs the stat-distinct term beyond a stat of one file
/// again (its own part and the one component of its name): its own line, at the difference;
/// none below zero.
#[test]
fn first_touches_are_priced_at_a_stat_among_many_less_a_stat_again() {
    let mut units: Units = [
        ("stat".to_string(), unit(700.0)),
        ("path-component".to_string(), unit(100.0)),
        ("stat-distinct".to_string(), unit(1500.0)),
    ]
    .into();
    derive(&mut units);
    let own = costlab_core::measure::unitcost::stat_path_components() as f64;
    let first = 1500.0 - (700.0 - own * 100.0) - 100.0;
    assert_eq!(units["stat-first"].samples, vec![first]);
    let mut counts = Counts::default();
    counts.syscalls.insert("newfstatat".into(), 30);
    counts
        .events
        .insert(("stats".into(), "first touches".into()), 20);
    let priced = price(&counts, &units);
    assert_eq!(by(&priced, "stats", "first touches"), Some(20.0 * first));
    assert!(needed(&counts).contains(&"stat-distinct"));
    // A figure of many files below a stat of one again prices a first touch at nothing.
    units.insert("stat-distinct".into(), unit(100.0));
    derive(&mut units);
    assert_eq!(units["stat-first"].samples, vec![0.0]);
}

/// A file fault on a window new to the run costs the fault-file-cold term beyond the warm
/// fault-file term, on its own row; both measured terms are asked for; none below zero.
#[test]
fn a_file_faults_first_touch_is_priced_at_the_cold_fault_less_the_warm_one() {
    let mut units: Units = [
        ("fault-file".to_string(), unit(1500.0)),
        ("fault-file-cold".to_string(), unit(5000.0)),
    ]
    .into();
    derive(&mut units);
    assert_eq!(units["fault-file-first"].samples, vec![3500.0]);
    let mut counts = Counts::default();
    counts
        .events
        .insert(("fault".into(), "minor:file".into()), 40);
    counts
        .events
        .insert(("file faults".into(), "first touches".into()), 30);
    let priced = price(&counts, &units);
    assert_eq!(
        by(&priced, "file faults", "first touches"),
        Some(30.0 * 3500.0)
    );
    let wanted = needed(&counts);
    assert!(wanted.contains(&"fault-file-cold") && wanted.contains(&"fault-file"));
    units.insert("fault-file-cold".into(), unit(1000.0));
    derive(&mut units);
    assert_eq!(units["fault-file-first"].samples, vec![0.0]);
}

/// The faults a syscall took in the kernel are an event of their own, priced at fault-4k, and
/// come out of the minor faults (the counter counted them there); none below zero.
#[test]
fn faults_inside_syscalls_leave_the_minor_faults_and_are_priced_at_a_first_touch() {
    let line = |event: &str, kernel_faults: u64| crate::measured::Line {
        class: "syscall".into(),
        event: event.into(),
        count: 1,
        kernel_faults,
        ..Default::default()
    };
    let split = crate::measured::Split {
        lines: vec![line("read", 2000), line("pread64", 10), line("write", 0)],
        ..Default::default()
    };
    let mut counts = Counts::default();
    counts.events.insert(("fault".into(), "minor".into()), 2500);
    crate::count::kernel_fault_events(&mut counts.events, Some(&split));
    let get = |c: &Counts, class: &str, event: &str| {
        c.events
            .get(&(class.to_string(), event.to_string()))
            .copied()
    };
    assert_eq!(get(&counts, "pages", "faulted in syscalls"), Some(2010));
    assert_eq!(get(&counts, "fault", "minor"), Some(490));
    let units: Units = [("fault-4k".to_string(), unit(800.0))].into();
    let priced = price(&counts, &units);
    assert_eq!(
        by(&priced, "pages", "faulted in syscalls"),
        Some(2010.0 * 800.0)
    );
    assert!(needed(&counts).contains(&"fault-4k"));
    // Fewer minor faults than faults inside calls (a counter that missed some): none left.
    let mut few = Counts::default();
    few.events.insert(("fault".into(), "minor".into()), 5);
    crate::count::kernel_fault_events(&mut few.events, Some(&split));
    assert_eq!(get(&few, "fault", "minor"), Some(0));
    // No split, or none counted: nothing added.
    let mut none = Counts::default();
    crate::count::kernel_fault_events(&mut none.events, None);
    assert!(none.events.is_empty());
}

/// With the pages file faults mapped counted, a file fault is priced at its own part (the
/// term's 16-page fault less 16 pages) and the pages at the per-page part; without them, at
/// the whole fault.
#[test]
fn file_faults_are_priced_by_fault_and_pages_where_the_pages_were_counted() {
    let mut units: Units = [
        ("fault-file".to_string(), unit(3000.0)),
        ("fault-file/page".to_string(), unit(150.0)),
    ]
    .into();
    derive(&mut units);
    assert_eq!(
        units["fault-file-call"].samples,
        vec![3000.0 - 16.0 * 150.0]
    );
    let mut counts = Counts::default();
    counts
        .events
        .insert(("fault".into(), "minor:file".into()), 10);
    assert_eq!(
        by(&price(&counts, &units), "fault", "minor:file"),
        Some(30_000.0)
    );
    counts
        .events
        .insert(("pages".into(), "mapped by file faults".into()), 40);
    let split = price(&counts, &units);
    assert_eq!(by(&split, "fault", "minor:file"), Some(6_000.0));
    assert_eq!(by(&split, "pages", "mapped by file faults"), Some(6_000.0));
}

/// The pages a file fault's fault-around mapped are raised by the same share as the file
/// faults that mapped them, read on the fault curve at those faults' gaps: a python start's
/// fault-arounds of 14 pages cost 2.7-6.4 us each beside 1.4-1.6 us in a loop over one file
/// (bpftrace), and the pages are most of a fault-around.
#[test]
fn the_pages_a_file_fault_mapped_are_as_cold_as_the_fault() {
    let mut units: Units = [
        ("fault-file".to_string(), unit(3000.0)),
        ("fault-file/page".to_string(), unit(150.0)),
        (crate::cold::point(1 << 20), unit(1_000.0)),
        (format!("{}/ns", crate::cold::point(1 << 20)), unit(500.0)),
        (format!("{}/fault", crate::cold::point(1 << 20)), unit(1.0)),
    ]
    .into();
    derive(&mut units);
    let mut counts = Counts::default();
    counts
        .events
        .insert(("fault".into(), "minor:file".into()), 10);
    counts
        .events
        .insert(("pages".into(), "mapped by file faults".into()), 40);
    // Every fault long after the last: the curve's last point, twice the cost.
    let mut since = vec![[0u64; 2]; 7];
    since[6] = [10, 10 * 5_000_000];
    counts.measured = Some(crate::measured::Split {
        lines: vec![crate::measured::Line {
            class: "fault".into(),
            event: "minor:file".into(),
            count: 10,
            cpu_ns: 100_000,
            since_same: since,
            ..crate::measured::Line::default()
        }],
        ..crate::measured::Split::default()
    });
    let rows = price(&counts, &units);
    assert_eq!(by(&rows, "fault", "minor:file"), Some(12_000.0));
    assert_eq!(by(&rows, "pages", "mapped by file faults"), Some(12_000.0));
    // No gaps counted (an older counts file): neither is raised.
    counts.measured.as_mut().unwrap().lines[0]
        .since_same
        .clear();
    let rows = price(&counts, &units);
    assert_eq!(by(&rows, "pages", "mapped by file faults"), Some(6_000.0));
}

/// The local timer's interrupts the split counted are priced at the tick term, as any
/// counted event; no split, no line.
#[test]
fn the_timer_interrupts_the_split_counted_are_priced_per_tick() {
    let units: Units = [("tick".to_string(), unit(2000.0))].into();
    let mut counts = Counts::default();
    let none = price(&counts, &units);
    assert!(!none.iter().any(|p| p.class == "irq"));
    counts.measured = Some(crate::measured::Split {
        lines: vec![crate::measured::Line {
            class: "irq".into(),
            event: "local_timer".into(),
            count: 300,
            cpu_ns: 3_000_000,
            ..crate::measured::Line::default()
        }],
        ..crate::measured::Split::default()
    });
    let rows = price(&counts, &units);
    let tick = rows
        .iter()
        .find(|p| p.class == "irq" && p.event == "local_timer")
        .unwrap();
    assert_eq!(
        (tick.count, tick.priced().map(|s| s.median)),
        (300, Some(600_000.0))
    );
    // The tracers' own interrupts are not the program's: 40 samples, and a split tick each
    // 4 ms of the program's CPU (none at first, then 100 over 400 ms).
    counts.samples = Some(crate::samples::Samples {
        total: 40,
        ..Default::default()
    });
    let of = |counts: &Counts| {
        price(counts, &units)
            .into_iter()
            .find(|p| p.class == "irq")
            .map(|p| p.count)
    };
    assert_eq!(of(&counts), Some(260));
    counts.measured.as_mut().unwrap().usage_ns = 400_000_000;
    assert_eq!(of(&counts), Some(160));
}

/// A write to a file is priced at the file-write term, and the bytes written are shared out
/// by the writes' calls: the files' share at file-write's per-byte cost, the rest at half a
/// pipe pair's, with the character devices' share left out of the rest.
#[test]
fn writes_to_files_and_their_bytes_are_priced_at_the_file_write_term() {
    let units: Units = [
        ("file-write".to_string(), unit(2000.0)),
        ("file-write/byte".to_string(), unit(0.2)),
        ("pipe-rw".to_string(), unit(1000.0)),
        ("pipe-rw/byte".to_string(), unit(0.1)),
    ]
    .into();
    let mut counts = Counts::default();
    counts.syscalls.insert("write:file".into(), 30);
    counts.syscalls.insert("write:pipe".into(), 60);
    counts.syscalls.insert("write:dev".into(), 10);
    counts.wchar = 1_000_000;
    let rows = price(&counts, &units);
    let of = |c: &str, e: &str| rows.iter().find(|p| p.class == c && p.event == e).unwrap();
    assert_eq!(of("syscall", "write:file").unit_name, "file-write");
    assert_eq!(
        of("syscall", "write:file").priced().unwrap().median,
        60_000.0
    );
    // 30 of 100 calls on files: 300 000 bytes at 0.2; of the other 70, 10 on a device: the
    // rest, 700 000 bytes, shared 60 of 70.
    let files = of("bytes", "written:file");
    assert_eq!(files.count, 300_000);
    assert!((files.priced().unwrap().median - 60_000.0).abs() < 1e-6);
    assert_eq!(of("bytes", "written").count, 600_000);
    // No file-write term: every byte at the pipe's.
    let pipe_only: Units = [("pipe-rw/byte".to_string(), unit(0.1))].into();
    let rows = price(&counts, &pipe_only);
    assert!(!rows.iter().any(|p| p.event == "written:file"));
}

/// The page cache's counts become events (a zero left out) priced at their terms: a page read
/// in at a cold read's page less a cached read's share, a page of a small file read at
/// read-small, a folio dropped at page-drop, the bytes written back at writeback's per byte; pages a write made are priced with its bytes (0 here).
#[test]
fn the_page_caches_counts_are_priced_at_their_own_terms() {
    let mut units: Units = [
        ("read-cold".to_string(), unit(1000.0)),
        ("file-read".to_string(), unit(320.0)),
        ("file-read/byte".to_string(), unit(0.05)),
        ("page-drop".to_string(), unit(700.0)),
        ("writeback/byte".to_string(), unit(0.2)),
        ("read-small".to_string(), unit(300.0)),
    ]
    .into();
    derive(&mut units);
    // 1000 less a 64 KiB read's call over its 16 pages (20) and 4096 bytes (204.8).
    assert!((units["page-in"].samples[0] - 775.2).abs() < 1e-9);
    let mut counts = Counts::default();
    crate::count::page_events(
        &mut counts.events,
        &crate::measured::PageCounts {
            read: 100,
            write: 50,
            other: 0,
            dropped: 10,
            writeback_bytes: 4096,
            small: 40,
        },
    );
    assert!(!counts
        .events
        .contains_key(&("pages".to_string(), "faulted in".to_string())));
    let rows = price(&counts, &units);
    let of = |c: &str, e: &str| {
        rows.iter()
            .find(|p| p.class == c && p.event == e)
            .and_then(|p| p.priced())
            .map(|s| s.median)
    };
    assert!((of("pages", "read in").unwrap() - 77_520.0).abs() < 1e-6);
    assert_eq!(of("folios", "dropped"), Some(7_000.0));
    assert!((of("bytes", "written back").unwrap() - 819.2).abs() < 1e-6);
    assert_eq!(of("pages", "made by writes"), Some(0.0));
    // A page read from a small file at the read-small term, beyond its read's call and bytes.
    assert_eq!(of("pages", "read from small files"), Some(12_000.0));
}

/// The bytes read are shared out by the read calls as the bytes written are: the pipes' share
/// at half a pipe pair's per-byte cost, the rest at a cached file read's, the devices' share
/// of the rest left out.
#[test]
fn bytes_read_from_pipes_are_priced_at_the_pipes_per_byte_cost() {
    let units: Units = [
        ("file-read/byte".to_string(), unit(0.03)),
        ("pipe-rw/byte".to_string(), unit(0.2)),
    ]
    .into();
    let mut counts = Counts::default();
    counts.syscalls.insert("read:pipe".into(), 25);
    counts.syscalls.insert("read:file".into(), 50);
    counts.syscalls.insert("read:dev".into(), 25);
    counts.rchar = 1_000_000;
    let rows = price(&counts, &units);
    let of = |e: &str| rows.iter().find(|p| p.class == "bytes" && p.event == e);
    let pipes = of("read:pipe").unwrap();
    assert_eq!(pipes.count, 250_000);
    assert!((pipes.priced().unwrap().median - 25_000.0).abs() < 1e-6);
    // 750 000 left over 75 calls, 25 of them on a device: 500 000 at the file read's.
    assert_eq!(of("read").unwrap().count, 500_000);
}

/// Where the split kept the sampled calls' bytes by fd kind, they share rchar and wchar out,
/// not the calls' count: a compressor's 64 KiB pipe reads outweigh an archiver's small file
/// reads, call for call.
#[test]
fn the_sampled_bytes_share_rchar_and_wchar_by_fd_kind() {
    let units: Units = [
        ("file-read/byte".to_string(), unit(0.03)),
        ("pipe-rw/byte".to_string(), unit(0.2)),
        ("file-write/byte".to_string(), unit(0.5)),
    ]
    .into();
    let mut counts = Counts::default();
    counts.syscalls.insert("read:pipe".into(), 25);
    counts.syscalls.insert("read:file".into(), 75);
    counts.syscalls.insert("write:pipe".into(), 10);
    counts.syscalls.insert("write:dev".into(), 10);
    counts.rchar = 1_000_000;
    counts.wchar = 400_000;
    // Sampled: 3 pipe reads' bytes to each file read's; writes half to a device.
    counts.fd_bytes.insert("read:pipe".into(), 3 * 65536);
    counts.fd_bytes.insert("read:file".into(), 65536);
    counts.fd_bytes.insert("write:pipe".into(), 4096);
    counts.fd_bytes.insert("write:dev".into(), 4096);
    let rows = price(&counts, &units);
    let of = |e: &str| rows.iter().find(|p| p.class == "bytes" && p.event == e);
    assert_eq!(of("read:pipe").unwrap().count, 750_000);
    assert_eq!(of("read").unwrap().count, 250_000);
    let written = of("written").unwrap();
    assert_eq!(written.count, 200_000, "the device's half left out");
    assert!(
        written.how.contains("the bytes the sampled calls"),
        "{}",
        written.how
    );
    assert!(of("written:file").is_none(), "no bytes sampled on a file");
    // No sampled bytes: the calls' count shares them, as before.
    counts.fd_bytes.clear();
    let rows = price(&counts, &units);
    let of = |e: &str| rows.iter().find(|p| p.class == "bytes" && p.event == e);
    assert_eq!(of("read:pipe").unwrap().count, 250_000);
}

/// What munmap calls took out is priced as an exit's unmap: anonymous pages at the exit
/// term's per-byte part, file pages at exit-file's, mappings at exit-vma; the units are
/// asked for.
#[test]
fn pages_and_mappings_a_munmap_took_out_are_priced_as_an_exits() {
    let units: Units = [
        ("exit/byte".to_string(), unit(0.08)),
        ("exit-file/byte".to_string(), unit(0.05)),
        ("exit-vma".to_string(), unit(700.0)),
    ]
    .into();
    let mut counts = Counts::default();
    counts.syscalls.insert("munmap".into(), 3);
    for (class, event, n) in [
        ("bytes", "unmapped by munmap", 1_000_000),
        ("bytes", "unmapped by munmap:file", 100_000),
        ("vmas", "unmapped by munmap", 3),
    ] {
        counts.events.insert((class.into(), event.into()), n);
    }
    let need = needed(&counts);
    for term in ["exit", "exit-file", "exit-vma"] {
        assert!(need.contains(&term), "{term} in {need:?}");
    }
    let rows = price(&counts, &units);
    let of = |c: &str, e: &str| {
        rows.iter()
            .find(|p| p.class == c && p.event == e)
            .and_then(|p| p.priced())
            .map(|s| s.median)
    };
    assert_eq!(of("bytes", "unmapped by munmap"), Some(80_000.0));
    assert_eq!(of("bytes", "unmapped by munmap:file"), Some(5_000.0));
    assert_eq!(of("vmas", "unmapped by munmap"), Some(2_100.0));
}

/// The interrupts the split saw sent to other CPUs are an event of class ipi, priced at the
/// wake-ipi term each; none sent, no line.
#[test]
fn interrupts_sent_to_other_cpus_are_priced_at_the_wake_ipi_term() {
    let units: Units = [("wake-ipi".to_string(), unit(6500.0))].into();
    let mut counts = Counts::default();
    counts.events.insert(("ipi".into(), "sent".into()), 40);
    assert!(needed(&counts).contains(&"wake-ipi"));
    let rows = price(&counts, &units);
    let p = rows
        .iter()
        .find(|p| p.class == "ipi" && p.event == "sent")
        .unwrap();
    assert_eq!(p.unit_name, "wake-ipi");
    assert_eq!(p.priced().map(|s| s.median), Some(260_000.0));
}

/// A wake-up on a halted CPU is priced at the wakee's term less the switch its wait is
/// priced at already (a same-CPU hand-off less its futex calls); without the switch's terms,
/// at the whole term.
#[test]
fn a_wake_up_on_a_halted_cpu_is_priced_beyond_its_switch() {
    let mut units: Units = [
        ("wake-halted".to_string(), unit(9000.0)),
        ("switch-same-cpu".to_string(), unit(2000.0)),
        ("futex-wake".to_string(), unit(250.0)),
        ("futex-wait-eagain".to_string(), unit(300.0)),
    ]
    .into();
    derive(&mut units);
    assert_eq!(units["halt-in"].samples, vec![7550.0]);
    let mut counts = Counts::default();
    counts
        .events
        .insert(("wakeup".into(), "on a halted cpu".into()), 10);
    let needs = needed(&counts);
    for t in [
        "wake-halted",
        "switch-same-cpu",
        "futex-wake",
        "futex-wait-eagain",
    ] {
        assert!(needs.contains(&t), "{t}");
    }
    let rows = price(&counts, &units);
    let p = rows
        .iter()
        .find(|p| p.class == "wakeup" && p.event == "on a halted cpu")
        .unwrap();
    assert_eq!(p.priced().map(|s| s.median), Some(75_500.0));
    let mut alone: Units = [("wake-halted".to_string(), unit(9000.0))].into();
    derive(&mut alone);
    assert_eq!(alone["halt-in"].samples, vec![9000.0]);
}

/// The extended-attribute reads are priced at the getxattr term, which the price measures on
/// the program's file system.
#[test]
fn extended_attribute_reads_are_priced_at_the_getxattr_term() {
    for name in ["getxattr", "lgetxattr", "fgetxattr", "llistxattr"] {
        let p = syscall_pricing(name).unwrap();
        assert_eq!((p.unit, p.factor), ("getxattr", 1.0), "{name}");
    }
    let mut counts = Counts::default();
    counts.syscalls.insert("lgetxattr".into(), 3);
    assert!(needed(&counts).contains(&"getxattr"));
    assert!(costlab_core::measure::unitcost::FS_TERMS.contains(&"getxattr"));
}

/// The path lookups that are not a stat (readlink, access) are priced at the stat term, a
/// path lookup measured on the program's file system; none is left with no term.
#[test]
fn path_lookups_are_priced_at_the_stat_term() {
    for name in [
        "readlink",
        "readlinkat",
        "access",
        "faccessat",
        "faccessat2",
    ] {
        let p = syscall_pricing(name).unwrap();
        assert_eq!((p.unit, p.factor), ("stat", 1.0), "{name}");
    }
    let mut counts = Counts::default();
    counts.syscalls.insert("readlink".into(), 3);
    assert!(needed(&counts).contains(&"stat"));
}

/// An exit unmaps the anonymous pages its faults made (less the munmap calls' 16 each) at the
/// exit term's per-byte part, and the page-cache pages its file faults mapped (16 a fault) at
/// the exit-file term's: two rows, none without an exit.
#[test]
fn an_exits_pages_are_priced_by_kind() {
    let units: Units = [
        ("exit/byte".to_string(), unit(0.06)),
        ("exit-file/byte".to_string(), unit(0.01)),
    ]
    .into();
    let mut counts = Counts::default();
    for (e, n) in [("minor", 1000), ("minor:cow", 200), ("minor:file", 100)] {
        counts.events.insert(("fault".into(), e.into()), n);
    }
    counts.syscalls.insert("munmap".into(), 10);
    let by = |rows: &[Priced], e: &str| {
        rows.iter()
            .find(|p| p.class == "bytes" && p.event == e)
            .map(|p| (p.count, p.priced().map(|s| s.median)))
    };
    let none = price(&counts, &units);
    assert_eq!(by(&none, "unmapped"), None);
    counts.syscalls.insert("exit_group".into(), 1);
    let rows = price(&counts, &units);
    let anon = (1000 + 200 - 10 * 16) * 4096;
    let (n, p) = by(&rows, "unmapped").unwrap();
    assert_eq!(n, anon);
    assert!((p.unwrap() - anon as f64 * 0.06).abs() < 1e-6);
    let file = 100 * 16 * 4096;
    let (n, p) = by(&rows, "unmapped:file").unwrap();
    assert_eq!(n, file);
    assert!((p.unwrap() - file as f64 * 0.01).abs() < 1e-6);
}

/// A light call's line is told from a call with no term: by its name, with or without the
/// kind of fd it went to.
#[test]
fn light_calls_are_told_by_name_with_or_without_their_fd_kind() {
    use crate::terms_of::is_light;
    assert!(is_light("fcntl"));
    assert!(is_light("lseek:file"));
    assert!(!is_light("read:file"));
    assert!(!is_light("openat:create"));
    assert!(!is_light("ioctl"));
}

/// THP's what-if counts the anonymous first touches a syscall took in the kernel (a read into
/// a fresh buffer) with the minor faults: THP makes both fewer.
#[test]
fn thps_what_if_counts_the_faults_inside_syscalls() {
    let units: Units = [
        ("fault-4k".to_string(), unit(800.0)),
        ("fault-thp".to_string(), unit(100_000.0)),
    ]
    .into();
    let mut counts = Counts::default();
    counts
        .events
        .insert(("pages".into(), "faulted in syscalls".into()), 500);
    assert!(thp_what_if(&counts, &units).is_none(), "under 512 in all");
    counts.events.insert(("fault".into(), "minor".into()), 524);
    assert_eq!(counts.anon_faults(), 1024);
    let w = thp_what_if(&counts, &units).expect("1024 anonymous first touches");
    assert_eq!(w.after, 2);
    assert_eq!(w.saved, vec![1024.0 * 800.0 - 2.0 * 100_000.0]);
}

/// With close-dup measured, a close is priced at its call (close-dup) and the files it
/// released at the close term less close-dup, at most one a file the run made: find's dup'ed
/// directories close twice a file, and one of the two only frees a descriptor. Without it,
/// every close at the whole term.
#[test]
fn closes_are_priced_by_call_and_release_at_most_one_release_a_file_made() {
    let mut units: Units = [
        ("close".to_string(), unit(1000.0)),
        ("close-dup".to_string(), unit(250.0)),
    ]
    .into();
    let mut counts = Counts::default();
    counts.syscalls.insert("close".into(), 40);
    counts.syscalls.insert("openat".into(), 10);
    counts.syscalls.insert("pipe2".into(), 3);
    counts.syscalls.insert("fcntl".into(), 30);
    assert!(needed(&counts).contains(&"close-dup"));
    let mut whole = units.clone();
    whole.remove("close-dup");
    derive(&mut whole);
    let rows = price(&counts, &whole);
    assert_eq!(by(&rows, "syscall", "close"), Some(40_000.0));
    assert!(by(&rows, "files", "released").is_none());
    derive(&mut units);
    assert_eq!(units["close-release"].samples, vec![750.0]);
    let rows = price(&counts, &units);
    assert_eq!(by(&rows, "syscall", "close"), Some(40.0 * 250.0));
    // 10 opens and 3 pipes' 6 ends: 16 files made, 16 of the 40 closes released one.
    assert_eq!(crate::closes::made(&counts), 16);
    assert_eq!(by(&rows, "files", "released"), Some(16.0 * 750.0));
    // Fewer closes than files (the rest closed at exit): each close released one.
    counts.syscalls.insert("close".into(), 5);
    let rows = price(&counts, &units);
    assert_eq!(by(&rows, "files", "released"), Some(5.0 * 750.0));
}
