//! Each measured line beside its price: the priced lines mapped onto the measured ones (a
//! syscall's fd kinds onto its name, bytes read and written onto the read and write family's
//! calls by their counts), the ratio priced ÷ measured, and the evidence the same run gives
//! for a heavy line outside the band (`evidence`). Then the rows the contract names (docs/src/contract.md, "price, measured") and the table.

use std::collections::BTreeMap;

use costlab_core::measure::quality::{self, Quality};
use costlab_core::measure::units::human_ns;
use costlab_history::report::{table, Outcome, ResultRow};

use super::{Line, Split};
use crate::pricing::Priced;
use crate::terms_of::{READS, WRITES};
use crate::LAB;

const SPAWNS: [&str; 4] = ["clone", "clone3", "fork", "vfork"];

/// One measured line with its price.
#[derive(Debug, Clone, PartialEq)]
pub struct Beside {
    pub line: Line,
    /// ns priced for it (median), None where no term prices any of its events.
    pub priced_ns: Option<f64>,
    /// The unit rows its price came from (their worst verdict is the ratio's).
    pub rows: Vec<ResultRow>,
    /// The tracer's own cost inside this line (its calibrated cost per event times the
    /// line's events), ns: 0 where it was not measured.
    pub tracer_ns: f64,
    /// Of `priced_ns`, the switches' price placed on it (for its waits): a line priced by
    /// nothing else has no term of its own.
    pub switch_ns: f64,
}

/// A stored line's priced ns: its ratio (priced ÷ its own time) times its own time, its CPU
/// time less the tracer's inside it (`tracer_time`, absent where none).
pub fn priced_of_rows(ratio: f64, cpu_ns: f64, tracer_ns: Option<f64>) -> f64 {
    ratio * (cpu_ns - tracer_ns.unwrap_or(0.0)).max(0.0)
}

impl Beside {
    /// The line's own time: its CPU time less the tracer's inside it.
    pub fn own_ns(&self) -> f64 {
        (self.line.cpu_ns as f64 - self.tracer_ns).max(0.0)
    }

    /// priced ÷ measured (the line's own time, net of the tracer's).
    pub fn ratio(&self) -> Option<f64> {
        let own = self.own_ns();
        self.priced_ns.filter(|_| own > 0.0).map(|p| p / own)
    }
}

/// Put the tracer's own cost on the lines it was paid in, so each line's ratio is read on
/// the program's own time, as the total is.
pub fn net_of_tracer(lines: &mut [Beside], t: &super::TracerCost) {
    // The inodes found first are counted for the run, not by line: their inserts are shared
    // over the stat lines by their counts, as their price is.
    let stats = |b: &Beside| {
        b.line.class == "syscall" && crate::pricing::STATS.contains(&b.line.event.as_str())
    };
    let stat_calls: u64 = lines
        .iter()
        .filter(|b| stats(b))
        .map(|b| b.line.count)
        .sum();
    let per_stat = if stat_calls > 0 {
        t.inodes as f64 * t.inode / stat_calls as f64
    } else {
        0.0
    };
    for b in lines {
        let l = &b.line;
        let ns = match (l.class.as_str(), l.event.as_str()) {
            ("syscall", _) => {
                l.count as f64 * t.syscall
                    + l.halted_in.min(l.waits) as f64 * t.switch
                    + (l.waits - l.halted_in.min(l.waits)) as f64
                        * t.switch_local.unwrap_or(t.switch)
                    + l.inode_touches as f64 * t.touch
                    + l.lookups as f64 * t.lookup
                    // A stat by fd (newfstatat:fd) reads a one-byte path: the calibrated
                    // path read (a whole path's bytes and components) is not taken out of it.
                    + if crate::pricing::STATS.contains(&l.event.as_str()) {
                        l.count as f64 * (t.path + per_stat)
                    } else {
                        0.0
                    }
                    + if crate::pricing::MMAPS.contains(&l.event.as_str()) {
                        l.count as f64 * t.mmap
                    } else {
                        0.0
                    }
                    + if crate::pricing::EXECS.contains(&l.event.as_str()) {
                        l.count as f64 * t.exec
                    } else {
                        0.0
                    }
            }
            ("fault", "unfinished") => 0.0,
            ("fault", "minor:file") => {
                l.count as f64 * (t.fault + t.file_fault) + t.windows as f64 * t.inode
            }
            ("fault", _) => l.count as f64 * t.fault,
            ("irq", "local_timer") => t.tick_ns,
            _ => 0.0,
        };
        b.tracer_ns = ns.min(l.cpu_ns as f64);
    }
}

/// The calls that take folios out of the page cache, and the calls that write back.
const DROPS: [&str; 8] = [
    "unlink",
    "unlinkat",
    "truncate",
    "ftruncate",
    "fadvise64",
    "rename",
    "renameat",
    "renameat2",
];
const SYNCS: [&str; 6] = [
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
    "syncfs",
    "sync",
];

/// Where a priced line's time belongs among the measured ones: (class, event) and its share.
fn targets(p: &Priced, split: &Split) -> Vec<((String, String), f64)> {
    // The lines `take` picks, each with its share of what `weight` gives them all.
    let shared = |take: &dyn Fn(&Line) -> bool, weight: fn(&Line) -> u64| {
        let lines: Vec<&Line> = split.lines.iter().filter(|l| take(l)).collect();
        let all: u64 = lines.iter().map(|l| weight(l)).sum();
        lines
            .iter()
            .filter(|l| all > 0 && weight(l) > 0)
            .map(|l| {
                (
                    (l.class.clone(), l.event.clone()),
                    weight(l) as f64 / all as f64,
                )
            })
            .collect::<Vec<_>>()
    };
    let family = |names: &[&str]| {
        shared(
            &|l: &Line| l.class == "syscall" && names.contains(&l.event.as_str()),
            |l| l.count,
        )
    };
    let where_done = |work: fn(&Line) -> u64, calls: &[&str]| {
        let seen = shared(&|l: &Line| work(l) > 0, work);
        if seen.is_empty() {
            family(calls)
        } else {
            seen
        }
    };
    // A switch's work (switching out, and the wake-up back in) runs inside the call or the
    // fault that waited: the split counts those waits on their lines.
    let waited = || shared(&|_: &Line| true, |l| l.waits);
    match (p.class.as_str(), p.event.as_str()) {
        ("switch", _) if split.lines.iter().any(|l| l.waits > 0) => waited(),
        // A line of its own where the split measured one (openat:create), else the
        // syscall's (read:file is measured as read).
        ("syscall", e)
            if split
                .lines
                .iter()
                .any(|l| l.class == "syscall" && l.event == e) =>
        {
            vec![(("syscall".into(), e.to_string()), 1.0)]
        }
        ("syscall", e) => {
            let base = e.split(':').next().unwrap_or(e).to_string();
            vec![(("syscall".into(), base), 1.0)]
        }
        ("bytes", "read" | "read:pipe") => family(&READS),
        ("bytes", "written" | "written:file") => family(&WRITES),
        ("bytes", "dirents") => vec![(("syscall".into(), "getdents64".into()), 1.0)],
        // A file's release runs inside the close that dropped its last descriptor.
        ("files", "released") => family(&["close"]),
        // The components are walked inside the stats: on the lines the split counted them in.
        ("path", "components") => where_done(|l| l.path_components, &crate::pricing::STATS),
        // The first touches are counted for the run, not by line: shared by the stats' counts.
        ("stats", "first touches") => family(&crate::pricing::STATS),
        ("pages", "mapped by file faults") | ("file faults", "first touches") => {
            vec![(("fault".into(), "minor:file".into()), 1.0)]
        }
        // A fault the kernel took inside a call runs on that call's line.
        ("pages", "faulted in syscalls") => {
            shared(&|l: &Line| l.kernel_faults > 0, |l| l.kernel_faults)
        }
        // The pages an exit unmaps are its work, measured inside exit_group (or exit).
        // A process's pages are unmapped once, by its exit (exit_group, where the split puts a
        // killed thread's teardown too); only without one, by the threads' own exits.
        ("bytes", "unmapped" | "unmapped:file") | ("vmas", "unmapped at exit") => {
            let group = family(&["exit_group"]);
            if group.is_empty() {
                family(&["exit"])
            } else {
                group
            }
        }
        // A task is made, and a fork's pages copied, inside the call that asked for it: the
        // clone family's lines, by their counts.
        ("spawn", _) | ("bytes" | "vmas", "copied at fork") => family(&SPAWNS),
        // The old address space goes inside the exec that leaves it.
        ("bytes" | "vmas", "unmapped at exec") => family(&["execve"]),
        // A munmap's pages and mappings go inside it.
        ("bytes", "unmapped by munmap" | "unmapped by munmap:file")
        | ("vmas", "unmapped by munmap") => family(&["munmap"]),
        // The page cache's work runs inside the calls that asked for it: on the lines the
        // split saw it in, by their share of it; where it was not told by call, shared by
        // the count of the calls that do it (the reads, the unlinks and truncates, the syncs).
        ("pages", "read in") => where_done(|l| l.pages_in, &READS),
        ("pages", "read from small files") => where_done(|l| l.small_pages, &READS),
        ("folios", "dropped") => where_done(|l| l.folios_dropped, &DROPS),
        ("inodes", "passed over") => where_done(|l| l.inodes_passed, &["openat", "mkdir"]),
        ("bytes", "written back") => where_done(|l| l.written_back, &SYNCS),
        // Interrupts sent inside syscalls are counted on their lines (and a fault's on its
        // kind's line): each on the lines of its own side.
        ("ipi", "sent") => {
            let seen = shared(&|l: &Line| l.class == "syscall", |l| l.ipis_sent);
            if seen.is_empty() {
                family(&WRITES)
            } else {
                seen
            }
        }
        ("ipi", "in a fault") => {
            let seen = shared(&|l: &Line| l.class == "fault", |l| l.ipis_sent);
            if seen.is_empty() {
                vec![(("fault".into(), "minor:cow".into()), 1.0)]
            } else {
                seen
            }
        }
        // The wakee's side runs in the call it slept in: on the lines the split saw it in.
        ("wakeup", "on a halted cpu") => {
            let seen = shared(&|l: &Line| l.halted_in > 0, |l| l.halted_in);
            if seen.is_empty() {
                waited()
            } else {
                seen
            }
        }
        (c, e) => vec![((c.to_string(), e.to_string()), 1.0)],
    }
}

/// Every measured line with what the price puts on it.
pub fn beside(split: &Split, priced: &[Priced]) -> Vec<Beside> {
    let mut on: BTreeMap<(String, String), (f64, Vec<ResultRow>)> = BTreeMap::new();
    let mut switches: BTreeMap<(String, String), f64> = BTreeMap::new();
    for p in priced {
        let (Some(s), Some(u)) = (p.priced(), &p.unit) else {
            continue;
        };
        for (key, share) in targets(p, split) {
            if p.class == "switch" {
                *switches.entry(key.clone()).or_default() += s.median * share;
            }
            let e = on.entry(key).or_default();
            e.0 += s.median * share;
            e.1.extend(u.rows.iter().cloned());
        }
    }
    split
        .lines
        .iter()
        .map(|l| {
            let got = on.get(&(l.class.clone(), l.event.clone()));
            Beside {
                line: l.clone(),
                priced_ns: got.map(|g| g.0),
                rows: got.map(|g| g.1.clone()).unwrap_or_default(),
                tracer_ns: 0.0,
                switch_ns: switches
                    .get(&(l.class.clone(), l.event.clone()))
                    .copied()
                    .unwrap_or(0.0),
            }
        })
        .collect()
}

fn row(case: &costlab_core::model::Case, metric: &str, unit: &str, v: f64) -> Option<ResultRow> {
    ResultRow::new(LAB, case.clone(), metric, unit, vec![v])
}

/// The rows: per line cpu_time, wait_time, per_event, priced_ratio; for the program its
/// cpu_usage, attributed and kernel_attributed. `sampled_named_ns`: the unmeasured kernel
/// time that samples name (0 without samples).
pub fn push_rows(
    o: &mut Outcome,
    split: &Split,
    lines: &[Beside],
    cmd: &str,
    sampled_named_ns: u64,
) {
    let (q, why) = split.quality();
    let mark = |r: &mut ResultRow| {
        r.quality = Some(q);
        r.quality_reasons = why.clone();
    };
    for b in lines {
        let l = &b.line;
        let case = costlab_core::case! {"class" => l.class, "event" => l.event, "command" => cmd};
        let mut put = |metric: &str, unit: &str, v: f64| {
            if let Some(mut r) = row(&case, metric, unit, v) {
                mark(&mut r);
                o.results.push(r);
            }
        };
        put("cpu_time", "ns", l.cpu_ns as f64);
        if matches!(l.class.as_str(), "syscall" | "fault") {
            put("wait_time", "ns", l.wait_ns as f64);
        }
        if l.count > 0 {
            put("per_event", "ns", l.cpu_ns as f64 / l.count as f64);
        }
        if b.tracer_ns > 0.0 {
            put("tracer_time", "ns", b.tracer_ns);
        }
        if let Some(ratio) = b.ratio() {
            if let Some(mut r) = row(&case, "priced_ratio", "ratio", ratio) {
                let (q, why) = quality::worst_of(&b.rows.iter().collect::<Vec<_>>());
                mark(&mut r);
                if q.is_some() && q != Some(Quality::Ok) {
                    r.quality = q;
                    r.quality_reasons.extend(why);
                }
                o.results.push(r);
            }
        }
    }
    let case = costlab_core::case! {"class" => "program", "event" => "total", "command" => cmd};
    if split.usage_ns > 0 {
        if let Some(mut r) = row(&case, "cpu_usage", "ns", split.usage_ns as f64) {
            r.quality = Some(Quality::Ok);
            o.results.push(r);
        }
    }
    if let Some((all, kernel)) = split.attributed(sampled_named_ns) {
        for (metric, v) in [("attributed", all), ("kernel_attributed", kernel)] {
            if let Some(mut r) = row(&case, metric, "%", v) {
                mark(&mut r);
                o.results.push(r);
            }
        }
    }
}

/// The verdict's lines on the split: the sum check, the shares named, priced ÷ measured.
pub fn verdict(split: &Split, lines: &[Beside], sampled_named_ns: u64) -> Vec<String> {
    let mut v = Vec::new();
    match split.check() {
        Some(c) => v.push(format!(
            "measured at the kernel's transitions, the classes add up to {} of the cgroup's {} CPU usage (cpu.stat): {:+.2}%, {}",
            human_ns(c.measured_ns as f64),
            human_ns(c.usage_ns as f64),
            c.diff_pct,
            if c.holds() { "within 2%" } else { "NOT within 2%: read the split with care" }
        )),
        None => v.push("no cgroup usage was read: the split is not checked".into()),
    }
    if let Some((all, kernel)) = split.attributed(sampled_named_ns) {
        v.push(format!(
            "attributed: {all:.1}% of the CPU usage is named (user, syscalls, faults, interrupts); {kernel:.1}% of its {} in the kernel",
            human_ns(split.kernel_ns() as f64)
        ));
    }
    let priced: f64 = lines.iter().filter_map(|b| b.priced_ns).sum();
    let measured: u64 = lines
        .iter()
        .filter(|b| b.priced_ns.is_some())
        .map(|b| b.line.cpu_ns)
        .sum();
    if measured > 0 {
        v.push(format!(
            "the lines a term prices: {} priced where they measured {} ({:.2}x)",
            human_ns(priced),
            human_ns(measured as f64),
            priced / measured as f64,
        ));
    }
    v.extend(split.notes.iter().cloned());
    v
}

/// The band a line's priced ÷ measured must stay in, and the share of the kernel time above
/// which a line outside it must be explained.
pub const BAND: (f64, f64) = (0.67, 1.5);
pub const HEAVY_SHARE: f64 = 0.05;

/// Evidence from the same run a reading can cite.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Kernel sample subsystems, (name, share of kernel samples %), most first.
    pub subsystems: Vec<(String, f64)>,
    /// Per-event cost of the terms a reading compares with: ("create", ns).
    pub terms: Vec<(String, f64)>,
    /// Kernel samples by the event they ran inside ("syscall openat", "fault", "irq
    /// local_timer"), with their top leaf functions.
    pub inside: BTreeMap<String, crate::samples::Subsystem>,
    /// The sampler's own interrupts in the run (one per sample of the tree).
    pub sampler_interrupts: u64,
    /// The run's file faults on a 64 KiB window of a file new to it (`file faults first
    /// touches`).
    pub file_firsts: u64,
}

/// The key of a line's samples in `Evidence::inside`.
fn inside_key(class: &str, event: &str) -> String {
    match class {
        "syscall" => format!("syscall {}", event.split(':').next().unwrap_or(event)),
        "fault" => "fault".into(),
        _ => format!("{class} {event}"),
    }
}

/// What the samples taken inside a line say, where there are enough of them to say anything:
/// its top leaf functions by share, and what the known ones do.
fn sampled_inside(ev: &Evidence, class: &str, event: &str) -> Option<String> {
    let s = ev.inside.get(&inside_key(class, event))?;
    if s.samples < 5 {
        return None;
    }
    let top: Vec<String> = s
        .top
        .iter()
        .take(3)
        .map(|(f, n)| format!("{f} {:.0}%", 100.0 * *n as f64 / s.samples as f64))
        .collect();
    // A sample names the syscall, not the kind of call (an openat's create or open, a read's
    // fd): those lines share their syscall's samples, and say so.
    let whose = match class {
        "syscall" => format!(
            "inside {} calls (of every kind)",
            event.split(':').next().unwrap_or(event)
        ),
        "fault" => "inside user faults (of every kind)".to_string(),
        _ => format!("inside the {class} {event} line"),
    };
    let mut line = format!(
        "the {} kernel samples {whose} stop most in {}",
        s.samples,
        top.join(", ")
    );
    let mut said = Vec::new();
    for (f, n) in s.top.iter().take(3) {
        if let Some(m) = crate::samples::classify::meaning(f) {
            if 4 * n >= s.samples && !said.contains(&m) {
                said.push(m);
            }
        }
    }
    if !said.is_empty() {
        line.push_str(&format!(": {}", said.join("; ")));
    }
    Some(line)
}

/// A heavy line outside the band, with the evidence the same run gives for it: what the text's
/// verdict, the JSON's `outside` parameter and the report all say of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outside {
    pub class: String,
    pub event: String,
    pub measured_ns: f64,
    /// Its share of the kernel time, %.
    pub share_pct: f64,
    pub count: u64,
    /// priced ns, None where no term prices it.
    pub priced_ns: Option<f64>,
    /// priced ÷ measured, None where no term prices it.
    pub ratio: Option<f64>,
    pub evidence: Vec<String>,
}

impl Outside {
    /// The line as the text's verdict says it.
    pub fn text(&self) -> String {
        format!(
            "{} {}: {} measured ({:.0}% of the kernel time){}; {}: {}",
            self.class,
            self.event,
            human_ns(self.measured_ns),
            self.share_pct,
            if self.count > 0 {
                format!(
                    ", {} events at {} each",
                    self.count,
                    human_ns(self.measured_ns / self.count as f64)
                )
            } else {
                String::new()
            },
            match (self.ratio, self.priced_ns) {
                (Some(r), Some(p)) => format!("priced {} ({r:.2}x)", human_ns(p)),
                _ => "no term".into(),
            },
            self.evidence.join("; ")
        )
    }
}

/// Every line carrying `HEAVY_SHARE` or more of `kernel_ns` whose priced ÷ measured is outside
/// `BAND` (or that no term prices), with its `evidence`.
pub fn outside(split: &Split, lines: &[Beside], kernel_ns: f64, ev: &Evidence) -> Vec<Outside> {
    let mut out = Vec::new();
    for b in lines {
        let l = &b.line;
        if l.class == "user" || kernel_ns <= 0.0 || b.own_ns() < HEAVY_SHARE * kernel_ns {
            continue;
        }
        // A line priced only for the switches inside it has no term of its own.
        let ratio = b.ratio().filter(|_| b.priced_ns > Some(b.switch_ns));
        if ratio.is_some_and(|r| (BAND.0..=BAND.1).contains(&r)) {
            continue;
        }
        // A line measured as an estimate (the ticks' share of user time, a sampled call)
        // whose price lies inside its 95% interval is not told apart from it.
        let ci = l.cpu_ci_ns as f64;
        if ratio.is_some() && ci > 0.0 && b.priced_ns.is_some_and(|p| (p - b.own_ns()).abs() <= ci)
        {
            continue;
        }
        out.push(Outside {
            class: l.class.clone(),
            event: l.event.clone(),
            measured_ns: b.own_ns(),
            share_pct: 100.0 * b.own_ns() / kernel_ns,
            count: l.count,
            priced_ns: b.priced_ns.filter(|_| ratio.is_some()),
            ratio,
            evidence: evidence(split, b, ev),
        });
    }
    out
}

/// The evidence in the same run for one line's distance from its price, most specific first:
/// where it waited, the faults, the signals, the per-event cost the term would need, the
/// kernel's sampled subsystems. The one place it is gathered (the text, the JSON and the
/// report read it through `outside`).
pub fn evidence(split: &Split, b: &Beside, ev: &Evidence) -> Vec<String> {
    let l = &b.line;
    let per = if l.count > 0 {
        b.own_ns() / l.count as f64
    } else {
        0.0
    };
    let term = |t: &str| ev.terms.iter().find(|(n, _)| n == t).map(|(_, v)| *v);
    let sigreturns = split.line("syscall", "rt_sigreturn").map_or(0, |x| x.count);
    let mut why = Vec::new();
    if l.cpu_ci_ns > 0 {
        why.push(format!(
            "measured as an estimate, {} ± {} (95%){}",
            human_ns(l.cpu_ns as f64),
            human_ns(l.cpu_ci_ns as f64),
            if (l.class.as_str(), l.event.as_str()) == ("kernel-other", "inside user time") {
                format!(
                    ": {} of the cpu-clock ticks in user time found the task in the kernel",
                    l.count
                )
            } else {
                String::new()
            }
        ));
    }
    if l.waits > 0 {
        why.push(format!(
            "it was switched out {} times inside ({} off CPU): lock or I/O waits, whose wake-ups and switches run inside it",
            l.waits,
            human_ns(l.wait_ns as f64)
        ));
    }
    let major = split.line("fault", "major").map_or(0, |m| m.count);
    if major > 0 && (l.class == "fault" || READS.contains(&l.event.as_str())) {
        why.push(format!(
            "a cold page cache: {major} major faults in the run"
        ));
    }
    match (l.class.as_str(), l.event.as_str()) {
        ("syscall", "open" | "openat" | "openat2") => {
            if let (Some(o), Some(c)) = (term("open"), term("create")) {
                if (per - c).abs() < (per - o).abs() {
                    why.push(format!(
                        "its {} a call is nearer a create's {} than an open's {} here, though the creates (O_CREAT) are on openat:create: long paths, cold directory entries, or opens that truncate",
                        human_ns(per), human_ns(c), human_ns(o)
                    ));
                }
            }
        }
        ("syscall", "getdents64" | "getdents") => {
            if let Some(e) = term("getdents64/entry") {
                why.push(format!(
                    "about {:.0} entries a call at {} an entry (where the split counted the entries' bytes, they are priced on bytes dirents at 48 bytes an entry: shorter names make more entries than that)",
                    per / e.max(1.0),
                    human_ns(e)
                ));
            }
        }
        ("fault", "unfinished") | ("kernel-other", "inside user time") if sigreturns > 0 => {
            why.push(format!(
                "{sigreturns} signals handled (rt_sigreturn calls) in the run: a fault that raises a signal (a JVM's null check or safepoint poll, a Go preemption) runs on through the signal's delivery to the handler"
            ));
        }
        ("irq", "local_timer") => {
            let t = crate::pricing::timer_parts(split, ev.sampler_interrupts);
            why.push(format!(
                "of its {} interrupts, {} were the sampler's (perf's cpu-clock: one a sample, with a stack walk) and about {} the split's own cpu-clock (one each {} of the program's CPU): their cost, measured beside the run, is taken out of this line and the total; {} were the kernel's tick, the only ones priced, each at what a spinning task loses to one (in a VM that includes the host's exit before the guest's handler runs, which this line, timed from the handler's entry to its exit, does not hold)",
                t.all, t.sampler, t.split, human_ns(split.tick_period() as f64), t.ticks
            ));
        }
        ("fault", "minor:file") if ev.file_firsts > 0 => {
            if let (Some(warm), Some(first)) = (term("fault-file"), term("fault-file-first")) {
                why.push(format!(
                    "{} of its {} faults were the run's first on their 64 KiB of a file, each priced {} beyond the {} of a fault whose pages are in the CPU's caches (fault-file-cold, out of every cache, less fault-file): first ones that found their pages warmer (mapped moments before by another run or program) make it priced over, repeats that found them cold make it priced under",
                    ev.file_firsts.min(l.count),
                    l.count,
                    human_ns(first),
                    human_ns(warm)
                ));
            }
        }
        ("fault", "unfinished") => why.push(
            "faults whose end the split did not see: one that raised a signal (SIGSEGV, SIGBUS) or failed; they run on until the next transition".into(),
        ),
        _ => {}
    }
    if let (Some(p), true) = (b.priced_ns, l.count > 0) {
        let unit = p / l.count as f64;
        let net = if b.tracer_ns > 0.0 {
            format!(
                " (the line's {} an event less the tracer's own {})",
                human_ns(l.cpu_ns as f64 / l.count as f64),
                human_ns(b.tracer_ns / l.count as f64)
            )
        } else {
            String::new()
        };
        why.push(format!(
            "its term prices {} an event; it would have to be {}{net}",
            human_ns(unit),
            human_ns(per)
        ));
    }
    if let Some(line) = sampled_inside(ev, &l.class, &l.event) {
        why.push(line);
    } else if !ev.subsystems.is_empty() && l.class != "irq" {
        let top: Vec<String> = ev
            .subsystems
            .iter()
            .take(3)
            .map(|(n, p)| format!("{n} {p:.0}%"))
            .collect();
        why.push(format!("the run's kernel samples: {}", top.join(", ")));
    }
    if why.is_empty() {
        why.push("nothing counted in this run explains it".into());
    }
    why
}

/// The measured table from a result's rows (so that a stored run renders it too): the top
/// lines by CPU time, the rest summed.
pub fn render(o: &Outcome) -> String {
    let ours: Vec<&ResultRow> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && !r.case.contains_key("on"))
        .collect();
    let get = |c: &str, e: &str, m: &str| {
        ours.iter()
            .find(|r| r.key("class") == c && r.key("event") == e && r.metric == m)
            .map(|r| r.summary.median)
    };
    let mut keys: Vec<(String, String, f64)> = ours
        .iter()
        .filter(|r| r.metric == "cpu_time")
        .map(|r| (r.key("class"), r.key("event"), r.summary.median))
        .collect();
    if keys.is_empty() {
        return String::new();
    }
    keys.sort_by(|a, b| b.2.total_cmp(&a.2));
    let usage = get("program", "total", "cpu_usage").unwrap_or(0.0);
    let top = 15;
    let mut rows: Vec<Vec<String>> = keys
        .iter()
        .take(top)
        .map(|(c, e, cpu)| {
            let ratio = get(c, e, "priced_ratio");
            let priced = ratio.map(|r| priced_of_rows(r, *cpu, get(c, e, "tracer_time")));
            vec![
                c.clone(),
                e.clone(),
                human_ns(*cpu),
                if usage > 0.0 {
                    format!("{:.1}%", 100.0 * cpu / usage)
                } else {
                    "—".into()
                },
                get(c, e, "per_event").map_or("—".into(), |p| format!("{p:.0}")),
                get(c, e, "wait_time")
                    .filter(|w| *w > 0.0)
                    .map_or("—".into(), human_ns),
                match priced {
                    Some(p) => human_ns(p),
                    // Its entry and exit, priced on the line inside user time.
                    None if c == "syscall" && crate::terms_of::is_light(e) => "entry+exit".into(),
                    None => "—".into(),
                },
                ratio.map_or("—".into(), |r| format!("{r:.2}")),
            ]
        })
        .collect();
    if keys.len() > top {
        let rest: f64 = keys[top..].iter().map(|k| k.2).sum();
        rows.push(vec![
            format!("{} more", keys.len() - top),
            String::new(),
            human_ns(rest),
            if usage > 0.0 {
                format!("{:.1}%", 100.0 * rest / usage)
            } else {
                "—".into()
            },
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    let head = [
        "class",
        "event",
        "on CPU",
        "of usage",
        "ns/event",
        "waited",
        "priced",
        "priced/measured",
    ];
    format!(
        "\nwhere the CPU time went, measured:\n{}priced/measured: the priced time ÷ the line's own, its time on CPU less the tracer's own cost inside it\n",
        table::render(&head, &rows)
    )
}

#[cfg(test)]
#[path = "beside_tests.rs"]
mod tests;
