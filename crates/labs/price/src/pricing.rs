//! The price: each counted event class times its unit cost measured here, the unit's spread
//! carried into an interval on the total, and the total of the kernel's share set against the
//! program's measured system time.

use std::collections::BTreeMap;

use costlab_core::measure::Summary;
use costlab_history::report::ResultRow;

use super::count::{Counts, Times};

pub use crate::unit::{Unit, Units};

/// Terms the syscall lab measures (its `call`s at batch 1, 16 B) that price calls here.
pub const SYSCALL_TERMS: [&str; 4] = ["read-devzero", "write-devnull", "tcp-send", "tcp-recv"];

pub use crate::terms_of::{
    base_name, event_pricing, syscall_pricing, timer_parts, Pricing, LIGHT, LIGHT_HOW, READS,
    WRITES,
};

/// A light call's pricing beside a split, which finds its entry and exit inside user time.
pub const LIGHT_SPLIT_HOW: &str =
    "a light call: its cost is the entry and exit, priced on the line inside user time";

/// The stat family: where the split counted their paths' components, priced at a stat's own
/// part and the components apart.
pub const STATS: [&str; 4] = ["stat", "lstat", "newfstatat", "statx"];
/// The split's mmap lines: anonymous mappings and mappings of a file.
pub const MMAPS: [&str; 2] = ["mmap", "mmap:file"];
/// The execs that succeeded.
pub const EXECS: [&str; 2] = ["execve", "execveat"];

/// What a line no term prices is, in words ("no term" and why).
pub const NO_TERM: &str = "no term: costlab measures no unit cost for this call";

/// One priced row.
#[derive(Debug, Clone)]
pub struct Priced {
    pub class: String,
    pub event: String,
    pub count: u64,
    /// The unit used (scaled by the factor), None where no term prices the event.
    pub unit: Option<Unit>,
    /// The unit's name ("s", "fault-4k", "file-read/byte"), "" where no term prices it.
    pub unit_name: String,
    pub how: String,
}

impl Priced {
    /// ns, one per unit sample: count × unit.
    pub fn priced_samples(&self) -> Vec<f64> {
        self.unit
            .as_ref()
            .map(|u| u.samples.iter().map(|x| x * self.count as f64).collect())
            .unwrap_or_default()
    }

    pub fn priced(&self) -> Option<Summary> {
        Summary::of(&self.priced_samples())
    }
}

/// Units derived from the measured ones: "switch" (a hand-off without its futex calls), and
/// "none" for a call whose work another row prices.
pub fn derive(units: &mut Units) {
    if let (Some(h), Some(w), Some(e)) = (
        units.get("switch-same-cpu"),
        units.get("futex-wake"),
        units.get("futex-wait-eagain"),
    ) {
        let d = h.minus(&[w, e]);
        units.insert("switch".into(), d);
    }
    if let Some(h) = crate::waits::halt_in(units) {
        units.insert("halt-in".into(), h);
    }
    // A getdents64 call's own part: the term reads a DIR_ENTRIES[0]-entry directory through
    // in two calls (the entries with . and .., then the empty one), so each call holds half
    // its entries.
    if let (Some(call), Some(entry)) = (units.get("getdents64"), units.get("getdents64/entry")) {
        let per_call = (costlab_core::measure::unitcost::fsops::DIR_ENTRIES[0] + 2) as f64 / 2.0;
        let d = call.minus(&[&entry.scaled(per_call)]);
        units.insert("getdents64-call".into(), d);
    }
    // A stat call's own part: the stat term less the components of the path it stats, each
    // at the path-component term; the components a program's stats walked are priced on
    // path components.
    if let (Some(stat), Some(comp)) = (units.get("stat"), units.get("path-component")) {
        let own = costlab_core::measure::unitcost::stat_path_components() as f64;
        let d = stat.minus(&[&comp.scaled(own)]);
        units.insert("stat-call".into(), d);
    }
    // A stat that finds an inode first, beyond a stat of a file again: the stat-distinct term
    // (a name under a directory's fd: one component) less a stat's own part and that one
    // component at the path-component term.
    if let (Some(distinct), Some(call), Some(comp)) = (
        units.get("stat-distinct"),
        units.get("stat-call"),
        units.get("path-component"),
    ) {
        let d = distinct.minus(&[call, comp]);
        units.insert("stat-first".into(), d);
    }
    // A file fault's own part: the term's fault maps FAULT_AROUND pages, each at its per-page
    // part; the pages a program's faults mapped are priced on a line of their own.
    if let (Some(fault), Some(page)) = (units.get("fault-file"), units.get("fault-file/page")) {
        let pages = costlab_core::measure::unitcost::FAULT_AROUND as f64;
        let d = fault.minus(&[&page.scaled(pages)]);
        units.insert("fault-file-call".into(), d);
    }
    // A file fault on a range no fault of the run had mapped, beyond one on a range in the
    // CPU's caches: the same 16-page fault after a sweep of memory less the warm one.
    if let (Some(cold), Some(warm)) = (units.get("fault-file-cold"), units.get("fault-file")) {
        let d = cold.minus(&[warm]);
        units.insert("fault-file-first".into(), d);
    }
    // A file released by its last close: the close term (a file just opened, closed) less a
    // close that only frees a descriptor (`closes`).
    if let (Some(close), Some(dup)) = (units.get("close"), units.get("close-dup")) {
        let d = close.minus(&[dup]);
        units.insert(crate::closes::RELEASE.into(), d);
    }
    // A page read in: a cold read's CPU per page less what a cached read of it costs (a
    // 64 KiB pread's fixed part over its 16 pages, and 4096 bytes), which the read calls and
    // the bytes read price already.
    if let (Some(cold), Some(call), Some(byte)) = (
        units.get("read-cold"),
        units.get("file-read"),
        units.get("file-read/byte"),
    ) {
        let d = cold.minus(&[&call.scaled(1.0 / 16.0), &byte.scaled(4096.0)]);
        units.insert("page-in".into(), d);
    }
    units.insert(
        "none".into(),
        Unit {
            samples: vec![0.0],
            rows: Vec::new(),
            from: "not priced on its own".into(),
        },
    );
}

/// The unit names a set of counts needs (before derivation: the measured terms).
pub fn needed(counts: &Counts) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = vec!["s"];
    let mut add = |u: &'static str| {
        let measured: &[&'static str] = match u {
            "switch" => &["switch-same-cpu", "futex-wake", "futex-wait-eagain"],
            "exit/byte" => &["exit"],
            "exit-file/byte" => &["exit-file"],
            "exit-shared/byte" => &["exit-shared"],
            "fault-file/page" | "fault-file-call" => &["fault-file"],
            "fault-file-first" => &["fault-file-cold", "fault-file"],
            "stat-first" => &["stat-distinct", "stat", "path-component"],
            "fork/byte" => &["fork"],
            "writeback/byte" => &["writeback"],
            "page-in" => &["read-cold", "file-read"],
            crate::closes::RELEASE => &["close", "close-dup"],
            "halt-in" => &[
                "wake-halted",
                "switch-same-cpu",
                "futex-wake",
                "futex-wait-eagain",
            ],
            "none" | "s" => &[],
            other => match costlab_core::measure::unitcost::TERMS
                .iter()
                .chain(SYSCALL_TERMS.iter())
                .find(|t| **t == other)
            {
                Some(t) => std::slice::from_ref(t),
                None => &[],
            },
        };
        for m in measured {
            if !v.contains(m) {
                v.push(m);
            }
        }
    };
    for name in counts.syscalls.keys() {
        if let Some(p) = syscall_pricing(name) {
            add(p.unit);
        }
        if name == "close" {
            add(crate::closes::RELEASE);
        }
    }
    for (class, event) in counts.events.keys() {
        if let Some(p) = event_pricing(class, event) {
            add(p.unit);
        }
    }
    if counts.anon_faults() > 0 {
        add("fault-thp");
    }
    if counts
        .measured
        .as_ref()
        .is_some_and(|s| s.lines.iter().any(|l| !l.since_same.is_empty()))
    {
        add(crate::cold::TERM);
    }
    if crate::sizing::pipes_crossed(counts) {
        add("pipe-cross");
    }
    if ["exit_group", "exit"]
        .iter()
        .any(|n| counts.syscalls.contains_key(*n))
    {
        add("exit/byte");
        // File pages at exit are reckoned from file faults where the split did not count
        // them (a counted `bytes unmapped:file` asks for its unit above).
        if counts
            .events
            .contains_key(&("fault".to_string(), "minor:file".to_string()))
        {
            add("exit-file/byte");
        }
    }
    v
}

/// Price every count at its unit. Bytes are priced as rows of class `bytes`.
pub fn price(counts: &Counts, units: &Units) -> Vec<Priced> {
    let sized = crate::sizing::at_program_sizes(counts, units);
    let (sized, _) = crate::waits::at_program_waits(counts, &sized);
    let units = &sized;
    let mut rows = Vec::new();
    let unit_for = |p: &Pricing| units.get(p.unit).map(|u| u.scaled(p.factor));
    // Beside a split, the entry and exit of every call and fault is priced on the line that
    // holds it (inside user time), so a light call's own line carries nothing.
    let split_entry = counts
        .measured
        .as_ref()
        .is_some_and(|s| s.line("kernel-other", "inside user time").is_some());
    // Where the split counted the entries getdents64 returned, its calls are priced at their
    // own part and the entries on a line of their own.
    let entries_counted = counts
        .events
        .contains_key(&("bytes".to_string(), "dirents".to_string()))
        && units.contains_key("getdents64-call");
    // Where the split counted the components of the stats' paths, the same.
    let components_counted = counts
        .events
        .contains_key(&("path".to_string(), "components".to_string()))
        && units.contains_key("stat-call");
    // A close's call and its file's release, priced apart where both terms are measured.
    let close_apart = crate::closes::call_pricing(units);
    for (name, &n) in &counts.syscalls {
        let p = syscall_pricing(name).map(|p| match p.how {
            LIGHT_HOW if split_entry => Pricing {
                unit: "none",
                factor: 0.0,
                how: LIGHT_SPLIT_HOW,
            },
            _ if p.unit == "stat" && STATS.contains(&base_name(name)) && components_counted => Pricing {
                unit: "stat-call",
                factor: 1.0,
                how: "a stat's own part (the stat term less its path's components at the path-component term); the components this program's paths walked are priced on path components",
            },
            _ if name == "close" => close_apart.clone().unwrap_or(p),
            _ if p.unit == "getdents64" && entries_counted => Pricing {
                unit: "getdents64-call",
                factor: 1.0,
                how: "a getdents64 call's own part (the term's call less the entries it returned); the entries this program was returned are priced on bytes dirents",
            },
            _ => p,
        });
        let cold = p
            .as_ref()
            .filter(|p| !p.unit.starts_with("exit"))
            .and_then(|p| crate::cold::extra_of(counts, units, "syscall", name, p.unit));
        rows.push(Priced {
            class: "syscall".into(),
            event: name.clone(),
            count: n,
            unit: p.as_ref().and_then(unit_for).map(|u| match cold {
                Some(c) => crate::cold::raised(&u, units, &c),
                None => u,
            }),
            unit_name: p.as_ref().map_or("", |p| p.unit).into(),
            how: p.map_or(NO_TERM, |p| p.how).into(),
        });
    }
    rows.extend(release_row(counts, units));
    rows.extend(unmapped_at_exit(counts, units));
    if split_entry {
        rows.extend(entry_exit(counts, units));
    }
    // The local timer's interrupts the split counted that were the kernel's own tick (a
    // count, not a time: priced as any counted event is).
    let ticks = counts.measured.as_ref().map_or(0, |s| {
        timer_parts(s, counts.samples.as_ref().map_or(0, |x| x.total)).ticks
    });
    // Where the split counted the pages file faults mapped, a fault is priced at its own
    // part and the pages on a line of their own.
    let file_pages_counted = counts
        .events
        .contains_key(&("pages".to_string(), "mapped by file faults".to_string()))
        && units.contains_key("fault-file-call");
    let mut events = counts.events.clone();
    if ticks > 0 {
        events
            .entry(("irq".into(), "local_timer".into()))
            .or_insert(ticks);
    }
    for ((class, event), &n) in &events {
        if (class.as_str(), event.as_str()) == ("uring_submit", "submit") {
            rows.push(uring_submissions(counts, n, units));
            continue;
        }
        let p = match (class.as_str(), event.as_str()) {
            ("fault", "minor:file") if file_pages_counted => Some(Pricing {
                unit: "fault-file-call",
                factor: 1.0,
                how: "a file fault's own part: the fault-file term less the 16 pages its fault maps at the term's per-page part; the pages this program's faults mapped are priced on pages mapped by file faults",
            }),
            _ => event_pricing(class, event),
        };
        // The pages a fault-around maps are part of the file faults that mapped them: their
        // struct pages and page-cache entries are as cold as those faults found the rest.
        let cold = match (class.as_str(), event.as_str()) {
            ("fault", _) => crate::cold::extra_of(counts, units, class, event, ""),
            ("pages", "mapped by file faults") => {
                crate::cold::extra_of(counts, units, "fault", "minor:file", "")
            }
            _ => None,
        };
        rows.push(Priced {
            class: class.clone(),
            event: event.clone(),
            count: n,
            unit: p.as_ref().and_then(unit_for).map(|u| match cold {
                Some(c) => crate::cold::raised(&u, units, &c),
                None => u,
            }),
            unit_name: p.as_ref().map_or("", |p| p.unit).into(),
            how: p
                .map_or(
                    "no term: costlab measures no unit cost for this event",
                    |p| p.how,
                )
                .into(),
        });
    }
    rows.extend(bytes_rows(counts, units));
    rows
}

/// The row of the files the closes released, at `close-release`, where the close line is
/// priced at its call alone (`closes`).
fn release_row(counts: &Counts, units: &Units) -> Option<Priced> {
    crate::closes::call_pricing(units)?;
    let (closes, n) = crate::closes::released(counts);
    (closes > 0).then(|| Priced {
        class: "files".into(),
        event: "released".into(),
        count: n,
        unit: units.get(crate::closes::RELEASE).cloned(),
        unit_name: crate::closes::RELEASE.into(),
        how: format!(
            "files released by the last close of their descriptors (the close term less close-dup): {n} of the {closes} closes, at most one a file the run's calls made ({} made)",
            crate::closes::made(counts)
        ),
    })
}

/// The bytes read and written (rchar, wchar), priced as rows of class `bytes`: the bytes
/// written to files at the file-write term's per-byte cost, those read from pipes at half a
/// pipe pair's, the rest at a cached file read's and a pipe's; the share on character devices
/// left out (the device's own work). The kernel keeps rchar and wchar per task, not per fd:
/// they are shared out by fd kind (`kind_weights`).
fn bytes_rows(counts: &Counts, units: &Units) -> Vec<Priced> {
    let (reads, by_bytes) = kind_weights(counts, &READS);
    let (writes, _) = kind_weights(counts, &WRITES);
    // `bytes` times the share of `kind` in `weights`.
    let part = |weights: &BTreeMap<String, u64>, kind: &str, bytes: u64| -> u64 {
        let all: u64 = weights.values().sum();
        let of = weights.get(kind).copied().unwrap_or(0);
        if all == 0 {
            return 0;
        }
        (bytes as f64 * of as f64 / all as f64).round() as u64
    };
    let to_files = if units.contains_key("file-write/byte") {
        part(&writes, "file", counts.wchar)
    } else {
        0
    };
    let from_pipes = if units.contains_key("pipe-rw/byte") {
        part(&reads, "pipe", counts.rchar)
    } else {
        0
    };
    let (to_devs, from_devs) = (
        part(&writes, "dev", counts.wchar),
        part(&reads, "dev", counts.rchar),
    );
    let shared = if by_bytes {
        "by the bytes the sampled calls on each kind of fd returned"
    } else {
        "by the calls' count on each kind of fd"
    };
    let mut rows = Vec::new();
    for (event, bytes, devs, unit, factor, how) in [
        (
            "read",
            counts.rchar.saturating_sub(from_pipes + from_devs),
            from_devs,
            "file-read/byte",
            1.0,
            "bytes read (rchar; from pipes apart, where they were told) at a cached file read's per-byte cost",
        ),
        (
            "read:pipe",
            from_pipes,
            0,
            "pipe-rw/byte",
            0.5,
            "bytes read from pipes (rchar's share on pipe fds) at half a pipe write+read's per-byte cost",
        ),
        (
            "written:file",
            to_files,
            0,
            "file-write/byte",
            1.0,
            "bytes written to files (wchar's share on file fds) at the per-byte cost of a write that extends a file",
        ),
        (
            "written",
            counts.wchar.saturating_sub(to_files + to_devs),
            to_devs,
            "pipe-rw/byte",
            0.5,
            "bytes written (wchar; to files apart, where they were told) at half a pipe write+read's per-byte cost",
        ),
    ] {
        if bytes == 0 {
            continue;
        }
        // Bytes through character devices are the device's own work, not priced.
        let how = if devs > 0 {
            format!("{how}; shared {shared}, the {devs} bytes on character devices left out")
        } else {
            format!("{how}; shared {shared}")
        };
        rows.push(Priced {
            class: "bytes".into(),
            event: event.into(),
            count: bytes,
            unit: units.get(unit).map(|u| u.scaled(factor)),
            unit_name: unit.into(),
            how,
        });
    }
    rows
}

/// What shares a family's bytes (rchar for the reads, wchar for the writes) out by fd kind
/// ("pipe", "file", "dev"...; "" for fds never seen), and whether it is bytes: the bytes the
/// split's sampled calls returned on each kind, where it kept them; else the calls' count on
/// each (a pipe's 64 KiB reads and a file's 4 KiB ones then weigh the same a call).
pub fn kind_weights(counts: &Counts, family: &[&str]) -> (BTreeMap<String, u64>, bool) {
    let of = |m: &BTreeMap<String, u64>| {
        let mut out = BTreeMap::new();
        for (n, &c) in m.iter().filter(|(n, _)| family.contains(&base_name(n))) {
            let kind = n.split_once(':').map_or("", |(_, k)| k);
            *out.entry(kind.to_string()).or_insert(0u64) += c;
        }
        out
    };
    let bytes = of(&counts.fd_bytes);
    if bytes.values().sum::<u64>() > 0 {
        (bytes, true)
    } else {
        (of(&counts.syscalls), false)
    }
}

/// The kernel's entry and exit paths of every syscall and user fault, which the split finds
/// inside user time (the cpu-clock ticks that land there in kernel mode): each at s, the
/// null call's round trip, which is almost all entry and exit.
fn entry_exit(counts: &Counts, units: &Units) -> Option<Priced> {
    let calls: u64 = counts.syscalls.values().sum();
    let faults = counts.class_total("fault");
    (calls + faults > 0).then(|| Priced {
        class: "kernel-other".into(),
        event: "inside user time".into(),
        count: calls + faults,
        unit: units.get("s").cloned(),
        unit_name: "s".into(),
        how: format!("the entry and exit paths of {calls} syscalls and {faults} user faults, each at s (a null call's round trip)"),
    })
}

/// The bytes a program's exits unmap, two rows: the anonymous pages it faulted in (minor,
/// copy-on-write and major faults) less the 16 of each munmap, at the exit term's per-byte
/// part; and the page-cache pages its file faults mapped, `FAULT_AROUND` a fault (the most a
/// fault-around maps: an upper bound), at the exit-file term's (a page-cache page is only let
/// go, not freed). None without an exit, or where the split counted the pages each process
/// still mapped at its exit (events `bytes unmapped` and `unmapped:file`).
fn unmapped_at_exit(counts: &Counts, units: &Units) -> Vec<Priced> {
    use costlab_core::measure::unitcost::{FAULT_AROUND, MUNMAP_PAGES};
    let exits: u64 = ["exit_group", "exit"]
        .iter()
        .filter_map(|n| counts.syscalls.get(*n))
        .sum();
    let counted = |e: &str| {
        counts
            .events
            .contains_key(&("bytes".to_string(), e.to_string()))
    };
    if exits == 0 || counted("unmapped") || counted("unmapped:file") {
        // No exit, or the split read the pages mapped at exit: priced as counted events.
        return Vec::new();
    }
    let fault = |e: &str| {
        counts
            .events
            .get(&("fault".to_string(), e.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let munmapped = counts.syscalls.get("munmap").copied().unwrap_or(0) * MUNMAP_PAGES as u64;
    let pages = (fault("minor") + fault("minor:cow") + fault("major")).saturating_sub(munmapped);
    let file_pages = fault("minor:file") * FAULT_AROUND as u64;
    let mut rows = Vec::new();
    if pages > 0 {
        rows.push(Priced {
            class: "bytes".into(),
            event: "unmapped".into(),
            count: pages * 4096,
            unit: units.get("exit/byte").cloned(),
            unit_name: "exit/byte".into(),
            how: format!("the {pages} anonymous pages faulted in (minor, copy-on-write and major faults) less the {munmapped} of the munmap calls, unmapped at exit at its per-byte cost"),
        });
    }
    if file_pages > 0 {
        rows.push(Priced {
            class: "bytes".into(),
            event: "unmapped:file".into(),
            count: file_pages * 4096,
            unit: units.get("exit-file/byte").cloned(),
            unit_name: "exit-file/byte".into(),
            how: format!("the page-cache pages {} file faults mapped, {FAULT_AROUND} a fault at most, let go at exit at the exit-file term's per-byte cost", fault("minor:file")),
        });
    }
    rows
}

/// io_uring submissions priced at the syscall lab's 16-byte send and recv through io_uring,
/// per op, at the measured batch nearest the program's own (submissions per
/// `io_uring_enter`), without the switch (s / n), which the enters price as syscalls.
fn uring_submissions(counts: &Counts, n: u64, units: &Units) -> Priced {
    let enters = counts
        .syscalls
        .iter()
        .filter(|(k, _)| base_name(k) == "io_uring_enter")
        .map(|(_, c)| *c)
        .sum::<u64>()
        .max(1);
    let achieved = n as f64 / enters as f64;
    let measured = units.iter().filter_map(|(k, u)| {
        let b: f64 = k
            .strip_prefix("uring-send(")?
            .strip_suffix(')')?
            .parse()
            .ok()?;
        Some((b, u, units.get(&format!("uring-recv({b})"))?))
    });
    let nearest = measured.min_by(|a, b| (a.0 - achieved).abs().total_cmp(&(b.0 - achieved).abs()));
    let (unit, how) = match (nearest, units.get("s")) {
        (Some((b, send, recv)), Some(sys)) => {
            // One sample per sample of the longest of the three, each read round-robin.
            let n = send
                .samples
                .len()
                .max(recv.samples.len())
                .max(sys.samples.len());
            let at = |v: &[f64], i: usize| v[i % v.len().max(1)];
            let samples = (0..n)
                .map(|i| {
                    let (x, r, s) = (
                        at(&send.samples, i),
                        at(&recv.samples, i),
                        at(&sys.samples, i),
                    );
                    ((x + r) / 2.0 - s / b).max(0.0)
                })
                .collect();
            (
                Some(Unit {
                    samples,
                    rows: [send.rows.clone(), recv.rows.clone(), sys.rows.clone()].concat(),
                    from: format!("{} and {}", send.from, recv.from),
                }),
                format!(
                    "an op through io_uring at batch {b} (the syscall lab's 16-B send and recv, less s/{b}: the enters are priced as syscalls); this program's batch is {achieved:.1}"
                ),
            )
        }
        _ => (
            None,
            "no term prices it: run `costlab syscall` to measure io_uring's send and recv"
                .to_string(),
        ),
    };
    Priced {
        class: "uring_submit".into(),
        event: "submit".into(),
        count: n,
        unit,
        unit_name: "uring-op".into(),
        how,
    }
}

/// The priced total: (min, median, max) ns, the sums of every row's bounds.
pub fn total(rows: &[Priced]) -> (f64, f64, f64) {
    rows.iter()
        .filter_map(|r| r.priced())
        .fold((0.0, 0.0, 0.0), |(a, b, c), s| {
            (a + s.min, b + s.median, c + s.max)
        })
}

/// The share of the measured system time the price explains, %: (low, mid, high), the
/// price's bounds over the system time's (its slowest run bounds the low end).
pub fn explained(total: (f64, f64, f64), sys: &Summary) -> Option<(f64, f64, f64)> {
    if sys.min <= 0.0 {
        return None;
    }
    Some((
        100.0 * total.0 / sys.max,
        100.0 * total.1 / sys.median,
        100.0 * total.2 / sys.min,
    ))
}

/// A what-if: what it is, the figure it uses, ns saved (bounds) and the count it assumes.
#[derive(Debug, Clone)]
pub struct WhatIf {
    pub what: &'static str,
    pub from: String,
    pub saved: Vec<f64>,
    pub after: u64,
    pub text: String,
    pub rows: Vec<ResultRow>,
}

/// Faults with THP: the anonymous first touches (minor faults, and faults inside syscalls) /
/// 512 at the THP fault's cost, against their count at the 4 KiB fault's. Nothing under 512
/// faults, or without both figures.
pub fn thp_what_if(counts: &Counts, units: &Units) -> Option<WhatIf> {
    let f = counts.anon_faults();
    if f < 512 {
        return None;
    }
    let (small, huge) = (units.get("fault-4k")?, units.get("fault-thp")?);
    let after = f.div_ceil(512);
    let saved: Vec<f64> = small
        .samples
        .iter()
        .enumerate()
        .map(|(i, x)| f as f64 * x - after as f64 * huge.samples[i % huge.samples.len()])
        .collect();
    let s = Summary::of(&saved)?;
    Some(WhatIf {
        what: "thp",
        from: huge.from.clone(),
        after,
        text: format!(
            "with THP the {f} faults would be ~{after}: about {} less kernel time (from {})",
            costlab_core::measure::units::human_ns(s.median),
            huge.from
        ),
        saved,
        rows: [small.rows.clone(), huge.rows.clone()].concat(),
    })
}

/// The syscalls io_uring could batch.
pub const BATCHABLE: [&str; 14] = [
    "read", "write", "pread64", "pwrite64", "readv", "writev", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "accept", "accept4", "send", "recv",
];

/// Syscalls io_uring could batch, at the echo lab's best batch n: count × (s - t(n)). Needs
/// s, the echo lab's batch ("echo-batch") and t at a measured batch nearest it.
pub fn uring_what_if(counts: &Counts, units: &Units) -> Option<WhatIf> {
    let c: u64 = BATCHABLE
        .iter()
        .flat_map(|b| {
            counts
                .syscalls
                .iter()
                .filter(move |(n, _)| base_name(n) == *b)
                .map(|(_, c)| *c)
        })
        .sum();
    if c == 0 {
        return None;
    }
    let s = units.get("s")?;
    let batch = units.get("echo-batch")?.summary()?.median;
    let (n, t) = units
        .iter()
        .filter_map(|(k, u)| {
            let n: f64 = k.strip_prefix("t(")?.strip_suffix(')')?.parse().ok()?;
            Some((n, u))
        })
        .min_by(|a, b| (a.0 - batch).abs().total_cmp(&(b.0 - batch).abs()))?;
    let saved: Vec<f64> = s
        .samples
        .iter()
        .enumerate()
        .map(|(i, x)| c as f64 * (x - t.samples[i % t.samples.len()]))
        .collect();
    let m = Summary::of(&saved)?;
    if m.median <= 0.0 {
        return None;
    }
    Some(WhatIf {
        what: "uring-batch",
        from: t.from.clone(),
        after: c,
        text: format!(
            "{c} read/write/send/recv calls through io_uring at batch {n} (the echo lab's) would cost about {} less (s - t({n}), from {} and {})",
            costlab_core::measure::units::human_ns(m.median),
            s.from,
            t.from
        ),
        saved,
        rows: [s.rows.clone(), t.rows.clone()].concat(),
    })
}

/// The times the price is checked against: the untraced runs', or the traced run's.
pub fn sys_summary(runs: &[Times]) -> Option<Summary> {
    Summary::of(&runs.iter().map(|t| t.sys_ns).collect::<Vec<_>>())
}

#[cfg(test)]
#[path = "pricing_tests.rs"]
mod tests;
