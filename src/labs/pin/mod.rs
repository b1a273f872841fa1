//! The pin lab: what thread placement costs. Three workloads, each under the placements that
//! apply to it:
//! - memory: a dependent chase per thread over its own region larger than the last-level
//!   cache (each step waits for DRAM, so two threads on one CPU split one core's time);
//! - sharing: every thread increments one shared atomic (the line moves between cores);
//! - echo: the echo server (`costlab echo serve`, a child process) and a ping-pong client.
//!
//! Placements: pinned (one thread per CPU; the server away from the network interrupts),
//! free (no affinity), stacked (two busy threads on one CPU), irq-cpu (the server on the CPU
//! that takes the NIC's or virtio's interrupts, from the machine's IRQ table). Each figure
//! comes with the scheduler's counters (CPU migrations, context switches, per second) and
//! where each thread was seen running (sampled from /proc/.../task/*/stat).

pub mod args;
pub mod placement;

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::case;
use crate::error::usage;
use crate::labs::args::{command, parsed, Invocation};
use crate::labs::{Ctx, Headline, Lab};
use crate::measure::conditions::Watch;
use crate::measure::counters::Scheduling;
use crate::measure::{cancel, cpus, cycle, procstat, stats, Summary};
use crate::report::{progress, table, Outcome};
use args::PinArgs;

use placement::Placement;

pub const LAB: &str = "pin";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Memory,
    Sharing,
    Echo,
}

pub const WORKLOADS: [Workload; 3] = [Workload::Memory, Workload::Sharing, Workload::Echo];

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Memory => "memory",
            Workload::Sharing => "sharing",
            Workload::Echo => "echo",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Memory => "Mloads/s",
            Workload::Sharing => "Mop/s",
            Workload::Echo => "req/s",
        }
    }

    /// Placements that mean something for the workload: irq-cpu is about the server.
    pub fn placements(self) -> &'static [Placement] {
        match self {
            Workload::Echo => &placement::ALL,
            _ => &[Placement::Pinned, Placement::Free, Placement::Stacked],
        }
    }
}

/// Each memory thread's chase region (4-byte indices): larger than any last-level cache here.
const CHASE_BYTES: usize = 64 << 20;

pub struct Plan {
    pub workloads: Vec<Workload>,
    pub placements: Vec<Placement>,
    /// Length of each placement's run, split into `samples` runs.
    pub duration: Duration,
}

fn parse_list<T>(
    text: &Option<String>,
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
    names: &str,
) -> Result<Vec<T>>
where
    T: Copy,
{
    match text {
        None => Ok(all.to_vec()),
        Some(t) => {
            let v = t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    parse(s).ok_or_else(|| usage(format!("unknown {what} '{s}': use {names}")))
                })
                .collect::<Result<Vec<T>>>()?;
            if v.is_empty() {
                return Err(usage(format!("--{what} is empty: give {names}")));
            }
            Ok(v)
        }
    }
}

pub fn run(args: &PinArgs, ctx: &Ctx) -> Result<Outcome> {
    let workloads = parse_list(
        &args.workload,
        &WORKLOADS,
        |s| WORKLOADS.into_iter().find(|w| w.name() == s),
        "workload",
        "memory, sharing, echo",
    )?;
    let placements = parse_list(
        &args.placement,
        &placement::ALL,
        Placement::parse,
        "placement",
        "pinned, free, stacked, irq-cpu",
    )?;
    let duration = match &args.duration {
        Some(d) => parse_duration(d)?,
        None if ctx.quick => Duration::from_millis(500),
        None => Duration::from_secs(2),
    };
    execute(
        &Plan {
            workloads,
            placements,
            duration,
        },
        ctx,
    )
}

/// "2", "2s", "500ms".
fn parse_duration(t: &str) -> Result<Duration> {
    let t = t.trim();
    let bad = || {
        usage(format!(
            "bad --duration '{t}': use seconds or ms, like 2s or 500ms"
        ))
    };
    let d = if let Some(ms) = t.strip_suffix("ms") {
        Duration::from_millis(ms.trim().parse().map_err(|_| bad())?)
    } else {
        let s: f64 = t
            .strip_suffix('s')
            .unwrap_or(t)
            .trim()
            .parse()
            .map_err(|_| bad())?;
        if !(s.is_finite() && s > 0.0) {
            return Err(bad());
        }
        Duration::from_secs_f64(s)
    };
    if d < Duration::from_millis(50) || d > Duration::from_secs(600) {
        return Err(usage(format!(
            "--duration {t} is out of range: use 50ms to 600s"
        )));
    }
    Ok(d)
}

/// One run's figures.
struct Run {
    per_s: f64,
    migrations_per_s: Option<f64>,
    switches_per_s: Option<f64>,
    /// Thread label -> CPUs it was seen on.
    seen: BTreeMap<String, BTreeSet<usize>>,
    why_no_counters: Option<String>,
}

/// The CPU each of these tasks is on now (field 39 of /proc/PID/task/TID/stat).
fn where_now(tasks: &[(String, String)], seen: &mut BTreeMap<String, BTreeSet<usize>>) {
    for (label, path) in tasks {
        if let Some(cpu) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| procstat::parse_pid_stat(&t))
            .and_then(|s| s.processor)
        {
            seen.entry(label.clone()).or_default().insert(cpu);
        }
    }
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn pin_to(set: &[usize], allowed: &[usize]) -> Result<()> {
    if set.is_empty() {
        cpus::pin_current_to(allowed)
    } else {
        cpus::pin_current_to(set)
    }
}

/// Run `threads` busy workers (memory or sharing) placed per `sets` for `len`.
fn run_workers(
    w: Workload,
    sets: &[Vec<usize>],
    allowed: &[usize],
    chains: &[Vec<u32>],
    len: Duration,
) -> Result<Run> {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let shared = AtomicU64::new(0);
    let tids: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let mut sched = Scheduling::start();
    let (m0, s0) = sched.read();
    let mut seen = BTreeMap::new();
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            let (stop, done, shared, tids) = (&stop, &done, &shared, &tids);
            let chain = &chains[i % chains.len().max(1)];
            handles.push(scope.spawn(move || -> Result<()> {
                pin_to(set, allowed)?;
                tids.lock().unwrap().push((
                    format!("thread {i}"),
                    format!("/proc/self/task/{}/stat", gettid()),
                ));
                let mut n = 0u64;
                let mut p = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match w {
                        Workload::Memory => {
                            for _ in 0..256 {
                                p = chain[p as usize];
                            }
                            black_box(p);
                        }
                        _ => {
                            for _ in 0..256 {
                                shared.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    n += 256;
                }
                done.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }));
        }
        while t0.elapsed() < len {
            std::thread::sleep(Duration::from_millis(5));
            where_now(&tids.lock().unwrap(), &mut seen);
        }
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().map_err(|_| anyhow!("a worker panicked"))??;
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let (m1, s1) = sched.read();
    Ok(Run {
        per_s: done.load(Ordering::Relaxed) as f64 / secs / 1e6,
        migrations_per_s: m0.zip(m1).map(|(a, b)| (b - a) as f64 / secs),
        switches_per_s: s0.zip(s1).map(|(a, b)| (b - a) as f64 / secs),
        seen,
        why_no_counters: sched.why.take(),
    })
}

/// Start `costlab echo serve` (epoll), pinned to `cpu` if given; returns it and its address.
fn start_server(cpu: Option<usize>, len: Duration) -> Result<(Child, String)> {
    let exe = std::env::current_exe().context("finding the costlab binary")?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "echo",
        "serve",
        "--engine",
        "epoll",
        "--addr",
        "127.0.0.1:0",
    ])
    .args([
        "--duration",
        &format!("{}ms", (len + Duration::from_secs(5)).as_millis()),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(c) = cpu {
        cmd.args(["--cpu", &c.to_string()]);
    }
    let mut child = cmd.spawn().context("starting costlab echo serve")?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let addr = line.trim().to_string();
    if addr.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(anyhow!("the echo server printed no address"));
    }
    Ok((child, addr))
}

fn stop_server(child: &mut Child) {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

/// Connections the echo client keeps in flight (a request each, ping-pong).
const ECHO_CONNS: usize = 8;
const ECHO_MSG: usize = 16;

fn run_echo(sets: &[Vec<usize>], allowed: &[usize], len: Duration) -> Result<Run> {
    let mut sched = Scheduling::start();
    let (m0, s0) = sched.read();
    let server_cpu = sets[0].first().copied();
    let (mut child, addr) = start_server(server_cpu, len)?;
    let mut seen = BTreeMap::new();
    let result = (|| -> Result<(u64, f64)> {
        let mut conns: Vec<TcpStream> = (0..ECHO_CONNS)
            .map(|_| TcpStream::connect(&addr))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("connecting to the echo server at {addr}"))?;
        for c in &conns {
            c.set_nodelay(true)?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
        }
        let pid = child.id();
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let count = std::thread::scope(|scope| -> Result<u64> {
            let stop = &stop;
            let client_set = sets.get(1).cloned().unwrap_or_default();
            let conns = &mut conns;
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let h = scope.spawn(move || -> Result<u64> {
                pin_to(&client_set, allowed)?;
                let _ = tid_tx.send(gettid());
                let msg = [7u8; ECHO_MSG];
                let mut back = [0u8; ECHO_MSG];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for c in conns.iter_mut() {
                        c.write_all(&msg)?;
                    }
                    for c in conns.iter_mut() {
                        c.read_exact(&mut back)?;
                        if back != msg {
                            return Err(anyhow!("the echo server sent back other bytes"));
                        }
                    }
                    n += ECHO_CONNS as u64;
                }
                Ok(n)
            });
            let mut tasks = Vec::new();
            if let Ok(tid) = tid_rx.recv_timeout(Duration::from_secs(1)) {
                tasks.push(("client".to_string(), format!("/proc/self/task/{tid}/stat")));
            }
            if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                let mut tids: Vec<u64> = rd
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                tids.sort_unstable();
                // By position, so runs (a fresh server each) add up: thread 0 is its main one.
                for (i, tid) in tids.iter().enumerate() {
                    tasks.push((
                        format!("server thread {i}"),
                        format!("/proc/{pid}/task/{tid}/stat"),
                    ));
                }
            }
            while t0.elapsed() < len {
                std::thread::sleep(Duration::from_millis(5));
                where_now(&tasks, &mut seen);
            }
            stop.store(true, Ordering::Relaxed);
            h.join().map_err(|_| anyhow!("the echo client panicked"))?
        })?;
        Ok((count, t0.elapsed().as_secs_f64()))
    })();
    stop_server(&mut child);
    let (count, secs) = result?;
    // The server has exited and been waited for, so its counts are in the inherited totals.
    let (m1, s1) = sched.read();
    Ok(Run {
        per_s: count as f64 / secs,
        migrations_per_s: m0.zip(m1).map(|(a, b)| (b - a) as f64 / secs),
        switches_per_s: s0.zip(s1).map(|(a, b)| (b - a) as f64 / secs),
        seen,
        why_no_counters: sched.why.take(),
    })
}

fn describe_seen(seen: &BTreeMap<String, BTreeSet<usize>>) -> String {
    seen.iter()
        .map(|(k, v)| {
            format!(
                "{k} on CPU {}",
                v.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn execute(plan: &Plan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    if allowed.len() < 2 {
        return Err(usage(
            "pin needs two CPUs or more to compare placements: allow more CPUs (taskset)",
        ));
    }
    let irqs = placement::net_irqs(&ctx.machine.net);
    let mut out = Outcome::default();
    let threads = 2usize;
    // Chase chains, built once (a random cycle through CHASE_BYTES of u32 indices).
    // Built in parallel, one thread per chain: a 64 MiB cycle takes a while to shuffle.
    let chains: Vec<Vec<u32>> = if plan.workloads.contains(&Workload::Memory) {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|i| s.spawn(move || cycle::sattolo(CHASE_BYTES / 4, 0x9e37 + i as u64)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("building a chase panicked")))
                .collect::<Result<Vec<_>>>()
        })?
    } else {
        Vec::new()
    };
    let runs = ctx.spec.samples.max(1);
    let each = plan.duration / runs as u32;
    let total: usize = plan
        .workloads
        .iter()
        .map(|w| {
            w.placements()
                .iter()
                .filter(|p| plan.placements.contains(p))
                .count()
        })
        .sum();
    let bar = progress::bar(total as u64, "pin");
    for &w in &plan.workloads {
        for &p in w
            .placements()
            .iter()
            .filter(|p| plan.placements.contains(p))
        {
            cancel::check()?;
            bar.set_message(format!("{} {}", w.name(), p.name()));
            let sets = match placement::assign(p, threads, &allowed, &irqs) {
                Ok(s) => s,
                Err(why) => {
                    out.notes
                        .push(format!("{} {}: not measured: {why}", w.name(), p.name()));
                    bar.inc(1);
                    continue;
                }
            };
            let mark = out.results.len();
            // Watch the CPUs the placement uses: a stacked pair on one CPU leaves the other
            // idle, and ours is not someone else's time there.
            let mut used: Vec<usize> = sets.iter().flatten().copied().collect();
            used.sort_unstable();
            used.dedup();
            let watch = Watch::start(&used);
            let mut per_s = Vec::new();
            let mut migr = Vec::new();
            let mut sw = Vec::new();
            let mut seen: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
            let mut why = None;
            for _ in 0..runs {
                cancel::check()?;
                let r = match w {
                    Workload::Echo => run_echo(&sets, &allowed, each)?,
                    _ => run_workers(w, &sets, &allowed, &chains, each)?,
                };
                per_s.push(r.per_s);
                migr.extend(r.migrations_per_s);
                sw.extend(r.switches_per_s);
                for (k, v) in r.seen {
                    seen.entry(k).or_default().extend(v);
                }
                why = why.or(r.why_no_counters);
            }
            bar.inc(1);
            let case =
                || case! {"workload" => w.name(), "placement" => p.name(), "threads" => threads};
            out.push(LAB, case(), "throughput", w.unit(), per_s);
            out.push(LAB, case(), "migrations", "per s", migr);
            out.push(LAB, case(), "context_switches", "per s", sw);
            out.attach_conditions(mark, watch.finish());
            let placed = sets
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        "free".to_string()
                    } else {
                        cpus::format_cpu_list(s)
                    }
                })
                .collect::<Vec<_>>()
                .join(" + ");
            out.notes.push(format!(
                "{} {}: placed on {placed}; seen running: {}",
                w.name(),
                p.name(),
                describe_seen(&seen)
            ));
            if let Some(why) = why {
                out.notes.push(format!("counters: {why}"));
            }
        }
    }
    bar.finish_and_clear();
    if let Some(cpu) = placement::irq_cpu(&irqs, &allowed) {
        out.notes.push(format!(
            "network interrupts: CPU {cpu} takes the most ({}); loopback traffic raises none of them, so irq-cpu here measures sharing that CPU with the device's background interrupts",
            irqs.get(&cpu).copied().unwrap_or(0)
        ));
    }
    out.notes.extend(readings(&out));
    out.notes.dedup();
    Ok(out)
}

/// For each workload: which placement won, by how much over each other, and why (the
/// scheduler's counters).
pub fn readings(out: &Outcome) -> Vec<String> {
    let mut v = Vec::new();
    for w in WORKLOADS {
        let rows: Vec<_> = out
            .results
            .iter()
            .filter(|r| r.metric == "throughput" && r.key("workload") == w.name())
            .collect();
        let Some(best) = rows
            .iter()
            .max_by(|a, b| a.summary.median.total_cmp(&b.summary.median))
        else {
            continue;
        };
        let counter =
            |r: &crate::report::ResultRow, m: &str| out.find(m, &r.case).map(|x| x.summary.median);
        let others: Vec<String> = rows
            .iter()
            .filter(|r| r.case != best.case)
            .map(|r| {
                format!(
                    "{} {:.2}x ({} migrations/s, {} switches/s)",
                    r.key("placement"),
                    r.summary.median / best.summary.median,
                    counter(r, "migrations").map_or("?".into(), |x| format!("{x:.0}")),
                    counter(r, "context_switches").map_or("?".into(), |x| format!("{x:.0}")),
                )
            })
            .collect();
        let why = match (w, best.key("placement").as_str()) {
            (Workload::Memory, _) => "a dependent chase waits on DRAM for every step, so two chasers on one CPU split one core's time while a CPU per chaser overlaps their misses",
            (Workload::Sharing, "stacked") => "on one CPU the shared line stays in one core's cache; spread out, every increment moves it between cores",
            (Workload::Sharing, _) => "spread over CPUs the increments run in parallel despite the line moving between cores",
            (Workload::Echo, "stacked") => "server and client on one CPU hand over without cross-CPU wakeups",
            (Workload::Echo, "free") => "free lets the scheduler put client and server on one CPU when one wakes the other (wake-affine), saving cross-CPU wakeups, and move them apart when both are busy; see where the threads ran",
            (Workload::Echo, _) => "server and client each keep a CPU, so neither waits for the other's time slice",
        };
        v.push(format!(
            "reading: {}: {} won ({} {}); others: {}; {why}",
            w.name(),
            best.key("placement"),
            table::figure(best.summary.median),
            best.unit,
            others.join(", ")
        ));
    }
    v
}

pub fn render(out: &Outcome) -> String {
    let rows: Vec<Vec<String>> = out
        .results
        .iter()
        .filter(|r| r.metric == "throughput")
        .map(|r| {
            let c = |m: &str| {
                out.find(m, &r.case)
                    .map_or("—".into(), |x| table::figure(x.summary.median))
            };
            vec![
                r.key("workload"),
                r.key("placement"),
                format!("{} {}", r.summary.show(2), r.unit),
                c("migrations"),
                c("context_switches"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    table::render(
        &[
            "workload",
            "placement",
            "throughput",
            "migrations/s",
            "context switches/s",
        ],
        &rows,
    ) + "\n"
}

pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let mut h = Vec::new();
    let find = |w: &str, p: &str| {
        out.results
            .iter()
            .find(|r| r.metric == "throughput" && r.key("workload") == w && r.key("placement") == p)
    };
    for w in [Workload::Memory, Workload::Echo] {
        let (Some(pinned), Some(bad)) = (
            find(w.name(), "pinned"),
            find(
                w.name(),
                if w == Workload::Memory {
                    "stacked"
                } else {
                    "irq-cpu"
                },
            ),
        ) else {
            continue;
        };
        let ratios = stats::paired_ratios(&bad.samples, &pinned.samples);
        let Some(s) = Summary::of(&ratios) else {
            continue;
        };
        h.push(
            Headline {
                label: format!("{} {} vs pinned", w.name(), bad.key("placement")),
                summary: s,
                unit: "x".into(),
                reading: format!(
                    "{} {}: {:.2}x the pinned throughput ({} vs {} {})",
                    w.name(),
                    bad.key("placement"),
                    s.median,
                    table::figure(bad.summary.median),
                    table::figure(pinned.summary.median),
                    pinned.unit
                ),
                ..Default::default()
            }
            .judged_by(&[bad, pinned]),
        );
    }
    h
}

pub struct PinLab;

impl Lab for PinLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<PinArgs>(
            "pin",
            "Pinned vs free-running vs badly placed threads (two on one CPU, on the IRQ CPU)",
            "Examples:\n  costlab pin\n  costlab pin --workload memory --placement pinned,free,stacked",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: PinArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        (cpus::allowed_cpus().len() < 2).then(|| "one CPU: no placements to compare".into())
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        execute(
            &Plan {
                // Quick: the two workloads of the cost sheet, a few seconds in all.
                workloads: if full {
                    WORKLOADS.to_vec()
                } else {
                    vec![Workload::Memory, Workload::Echo]
                },
                placements: if full {
                    placement::ALL.to_vec()
                } else {
                    vec![Placement::Pinned, Placement::Stacked, Placement::IrqCpu]
                },
                duration: if full {
                    Duration::from_secs(2)
                } else {
                    Duration::from_millis(300)
                },
            },
            ctx,
        )
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}
