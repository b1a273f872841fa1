//! The echo lab: io_uring vs epoll echo servers, a load generator, and the cost model.
//!
//! `costlab echo` runs the experiment: for each sweep point and repetition, each engine's
//! server runs in its own process (`costlab echo serve`) pinned to the last CPU, and the
//! loader runs in this process on the other CPUs. Repetitions are interleaved (all engines
//! at one point, then the next repetition) so engine ratios pair samples taken side by side.

pub mod epoll;
pub mod features;
pub mod listen;
pub mod load;
pub mod model;
pub mod remote;
pub mod server;
pub mod stats;
pub mod uring;
pub mod uring_basic;

use crate::measure::conditions::{Conditions, Watch};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::case;
use crate::cli::{EchoLoadArgs, EchoRunArgs, EchoServeArgs};
use crate::error::usage;
use crate::labs::{Ctx, Headline, Lab};
use crate::measure::{cancel, cpus, sizes, stats::paired_ratios, syscost, SampleSpec, Summary};
use crate::report::{model::Case, progress, table, Outcome};
use features::Features;
use load::{ClientKind, Errors, LoadReport, LoadSpec};
use model::Observed;
use server::{Engine, ServeOpts};
use stats::ServerStats;

pub const LAB: &str = "echo";

/// Parse a duration: "2" (seconds), "2s", "500ms", "1.5s".
pub fn parse_duration(text: &str, what: &str) -> Result<Duration> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let secs = num
        .trim()
        .parse::<f64>()
        .ok()
        .map(|x| x * scale)
        .filter(|x| x.is_finite() && *x > 0.0 && *x <= 3600.0)
        .ok_or_else(|| {
            usage(format!(
                "bad {what} '{text}': use a time above zero and at most 1h, like 2s or 500ms"
            ))
        })?;
    Ok(Duration::from_secs_f64(secs))
}

fn parse_msg_size(text: &str) -> Result<usize> {
    let b = sizes::parse_size(text)?;
    if b == 0 || b > 64 << 20 {
        return Err(usage(format!(
            "--size {text}: use a message size from 1 byte up to 64M"
        )));
    }
    Ok(b as usize)
}

/// `--sizes 16,512,4K,16K,64K`: message sizes, each 1 B to 64M, in the order given.
fn parse_msg_sizes(text: &str) -> Result<Vec<usize>> {
    let mut v = sizes::parse_list(text, parse_msg_size)?;
    v.dedup();
    Ok(v)
}

// ---------------------------------------------------------------- serve and load commands

/// `costlab echo serve`: the address as the first line, the counts as one JSON line at exit.
pub fn serve_command(args: &EchoServeArgs) -> Result<()> {
    let opts = ServeOpts {
        engine: Engine::parse(&args.engine)?,
        addr: server::parse_addr(&args.addr, "--addr")?,
        cpu: args.cpu,
        duration: args
            .duration
            .as_deref()
            .map(|d| parse_duration(d, "--duration"))
            .transpose()?,
        size: parse_msg_size(&args.size)? as u64,
        sqpoll: args.sqpoll,
        features: Features::parse(&args.features)?,
    };
    if opts.sqpoll && opts.engine != Engine::Uring {
        return Err(usage("--sqpoll applies to --engine uring only"));
    }
    if opts.features != Features::default() && opts.engine != Engine::Uring {
        return Err(usage("--features applies to --engine uring only"));
    }
    let stats = server::serve(&opts, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{addr}");
        let _ = out.flush();
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&stats)?)?;
    out.flush()?;
    Ok(())
}

/// `costlab echo load`: one run against a server somewhere.
pub fn load_command(args: &EchoLoadArgs, _ctx: &Ctx) -> Result<Outcome> {
    let spec = load_spec(args)?;
    let client = spec.client;
    load_runs(args, spec, client)
}

/// The load `costlab echo load` asks for (also what a loader host runs for a lead).
pub fn load_spec(args: &EchoLoadArgs) -> Result<LoadSpec> {
    let cpus = match &args.common.cpus {
        Some(list) => {
            let c = cpus::parse_cpu_list(list)?;
            cpus::check_cpus(&c, &cpus::allowed_cpus())?;
            Some(c)
        }
        None => None,
    };
    let ncpus = cpus.as_ref().map_or(cpus::allowed_cpus().len(), Vec::len);
    // The same default as `costlab echo` (uring); an open loop needs the event client.
    let default_client = if args.rate.is_some() {
        "event"
    } else {
        "uring"
    };
    let client = ClientKind::parse(args.client.as_deref().unwrap_or(default_client))?;
    let spec = LoadSpec {
        target: server::parse_addr(&args.target, "--target")?,
        conns: args.conns,
        size: parse_msg_size(&args.size)?,
        duration: parse_duration(&args.duration, "--duration")?,
        depth: args.depth,
        threads: args.threads.unwrap_or(ncpus).max(1),
        rate: args.rate,
        client,
        cpus,
    };
    if args.threads == Some(0) {
        return Err(usage("--threads 0: the loader needs at least one thread"));
    }
    Ok(spec)
}

fn load_runs(args: &EchoLoadArgs, spec: LoadSpec, client: ClientKind) -> Result<Outcome> {
    // `--samples N`: N runs of --duration each, one sample per run for every figure.
    let n = args.common.samples.unwrap_or(1).max(1);
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        crate::measure::cancel::check()?;
        runs.push(load::run(&spec)?);
    }
    let answered: u64 = runs.iter().map(|r| r.answered).sum();
    let mut errors = load::Errors::default();
    for r in &runs {
        errors.add(&r.errors);
    }
    if answered == 0 {
        // A throughput of 0 and a CPU cost per request divided by nothing are not figures.
        return Err(anyhow::anyhow!(
            "{} answered no request byte-exact in {} run(s) of {}: errors: mismatch {}, reset {}, timeout {}, connect {}{}; is it an echo server, and listening?",
            spec.target,
            n,
            args.duration,
            errors.mismatch,
            errors.reset,
            errors.timeout,
            errors.connect,
            runs.iter()
                .flat_map(|r| r.first_mismatches.iter())
                .next()
                .map(|m| format!("; first mismatch: {m}"))
                .unwrap_or_default()
        ));
    }
    let r = runs.last().expect("at least one run");
    let mut o = Outcome::default();
    let c = case! {
        "target" => spec.target.to_string(), "client" => client.name(),
        "conns" => spec.conns, "size" => spec.size, "depth" => spec.depth
    };
    let each = |f: &dyn Fn(&load::LoadReport) -> Option<f64>| -> Vec<f64> {
        runs.iter().filter_map(f).collect()
    };
    o.push(
        LAB,
        c.clone(),
        "throughput",
        "req/s",
        each(&|r| Some(r.throughput())),
    );
    for (metric, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        let v = each(&|r| r.latency_us(q));
        if !v.is_empty() {
            o.push(LAB, c.clone(), metric, "us", v);
        }
    }
    let v = each(&|r| r.max_us());
    if !v.is_empty() {
        o.push(LAB, c.clone(), "max", "us", v);
    }
    o.push(
        LAB,
        c.clone(),
        "errors",
        "count",
        each(&|r| Some(r.errors.total() as f64)),
    );
    o.push(
        LAB,
        c,
        "loader_cpu_per_req",
        "ns",
        each(&|r| (r.answered > 0).then(|| r.cpu_ns as f64 / r.answered as f64)),
    );
    o.notes.push(format!(
        "answered {} requests byte-exact over {} run(s); errors: mismatch {}, reset {}, timeout {}, connect {}",
        answered, n, errors.mismatch, errors.reset, errors.timeout, errors.connect
    ));
    let firsts: Vec<&String> = runs
        .iter()
        .flat_map(|r| r.first_mismatches.iter())
        .collect();
    if !firsts.is_empty() {
        const SHOWN: usize = 8;
        let mut line = format!(
            "first mismatch on {} connection(s): {}",
            firsts.len(),
            firsts
                .iter()
                .take(SHOWN)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
        if firsts.len() > SHOWN {
            line.push_str(&format!("; and {} more", firsts.len() - SHOWN));
        }
        o.notes.push(line);
    }
    o.notes.push(format!(
        "loader CPU {:.0}% of its {} CPU(s){}",
        r.busy() * 100.0,
        r.cpus,
        if spec.rate.is_some() {
            "; open loop: latency from the intended send time"
        } else {
            ""
        }
    ));
    if let Some(n) = r.bottleneck_note() {
        o.notes.push(n);
    }
    Ok(o)
}

pub fn render_load(o: &Outcome) -> String {
    let rows: Vec<Vec<String>> = o
        .results
        .iter()
        .map(|r| {
            vec![
                r.metric.clone(),
                format!("{:.1}", r.summary.median),
                r.unit.clone(),
            ]
        })
        .collect();
    table::render(&["metric", "value", "unit"], &rows) + "\n"
}

// ---------------------------------------------------------------- the experiment

/// What the experiment runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub engines: Vec<Engine>,
    pub clients: Vec<ClientKind>,
    pub conns: Vec<usize>,
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// What the uring engine uses.
    pub features: Features,
    /// Also run uring with each of its features switched off in turn.
    pub ablate: bool,
    pub duration: Duration,
    pub reps: usize,
    pub depth: usize,
    pub threads: Option<usize>,
    pub sqpoll: bool,
    /// Said with the figures (the default client was unavailable and replaced).
    pub note: Option<String>,
    /// Where the servers listen (IP:PORT, port 0 for any).
    pub addr: String,
    /// The load from other hosts over ssh (`--loaders`), instead of from here.
    pub remote: Option<remote::Loaders>,
}

impl Plan {
    pub fn from_args(args: &EchoRunArgs, ctx: &Ctx) -> Result<Plan> {
        // --quick shrinks what the user left at its default: two points, 1 s each.
        let quick_default = |given: &str, default: &str, quick: &str| {
            if ctx.quick && given == default {
                quick.to_string()
            } else {
                given.to_string()
            }
        };
        let conns_text = quick_default(&args.conns, "1,16,128,1000", "1,128");
        let duration_text = quick_default(&args.duration, "2s", "1s");
        let mut conns = sizes::parse_list(&conns_text, |s| {
            s.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                usage(format!(
                    "bad connection count '{s}': use whole numbers above zero, like 1,16,128"
                ))
            })
        })?;
        let mut clients = sizes::parse_list(&args.client, ClientKind::parse)?;
        let mut note = None;
        if clients == [ClientKind::DEFAULT] {
            (clients, note) = default_clients();
        }
        let engines = Engine::parse_list(&args.engine)?;
        if args.threads == Some(0) {
            return Err(usage("--threads 0: the loader needs at least one thread"));
        }
        if args.sqpoll && !engines.contains(&Engine::Uring) {
            return Err(usage(
                "--sqpoll applies to the uring engine, which is not in --engine",
            ));
        }
        let features = Features::parse(&args.features)?;
        if (args.ablate || features != Features::default()) && !engines.contains(&Engine::Uring) {
            return Err(usage(
                "--features and --ablate apply to the uring engine, which is not in --engine",
            ));
        }
        let (addr, remote) = remote::from_args(args, &mut conns)?;
        Ok(Plan {
            engines,
            clients,
            conns,
            sizes: parse_msg_sizes(&args.sizes)?,
            features,
            ablate: args.ablate,
            duration: parse_duration(&duration_text, "--duration")?,
            reps: if ctx.quick {
                2
            } else {
                ctx.spec.samples.clamp(1, 3)
            }
            .max(args.common.samples.unwrap_or(0)),
            depth: args.depth,
            threads: args.threads,
            sqpoll: args.sqpoll,
            note,
            addr,
            remote,
        })
    }

    /// The plan `costlab run` uses: about 30 s on two cores.
    pub fn quick() -> Plan {
        let (clients, note) = default_clients();
        Plan {
            engines: Engine::ALL.to_vec(),
            clients,
            conns: vec![1, 128],
            sizes: vec![16, 16 * 1024],
            features: Features::default(),
            ablate: false,
            duration: Duration::from_millis(700),
            reps: 3,
            depth: 1,
            threads: None,
            sqpoll: false,
            note,
            addr: "127.0.0.1:0".into(),
            remote: None,
        }
    }
}

/// The default client, or the fallback (with a note saying why) where this process cannot
/// set up an io_uring.
fn default_clients() -> (Vec<ClientKind>, Option<String>) {
    if ClientKind::DEFAULT != ClientKind::Uring {
        return (vec![ClientKind::DEFAULT], None);
    }
    match load::uring_unavailable() {
        None => (vec![ClientKind::DEFAULT], None),
        Some(why) => (
            vec![ClientKind::FALLBACK],
            Some(format!(
                "loader: io_uring is unavailable here ({why}); used the {} client",
                ClientKind::FALLBACK.name()
            )),
        ),
    }
}

/// Which CPU the server gets and which the loader gets.
struct Layout {
    server: usize,
    loader: Vec<usize>,
    note: Option<String>,
}

fn layout() -> Layout {
    let allowed = cpus::allowed_cpus();
    let server = *allowed.last().unwrap_or(&0);
    if allowed.len() >= 2 {
        Layout {
            server,
            loader: allowed[..allowed.len() - 1].to_vec(),
            note: None,
        }
    } else {
        Layout {
            server,
            loader: allowed.clone(),
            note: Some(
                "only one CPU: server and loader share it, so throughput is the machine's, not the server's"
                    .into(),
            ),
        }
    }
}

/// A server child process; killed if dropped while running.
struct ServerProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    addr: SocketAddr,
}

impl ServerProcess {
    fn spawn(
        v: &Variant,
        addr: &str,
        cpu: usize,
        size: usize,
        sqpoll: bool,
        limit: Duration,
    ) -> Result<Self> {
        let engine = v.engine;
        let exe = std::env::current_exe().context("finding costlab's own executable")?;
        let mut cmd = Command::new(exe);
        cmd.args(["echo", "serve", "--engine", engine.name(), "--addr", addr])
            .args(["--cpu", &cpu.to_string(), "--size", &size.to_string()])
            .args(["--duration", &format!("{}ms", limit.as_millis())])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if sqpoll && engine == Engine::Uring {
            cmd.arg("--sqpoll");
        }
        if engine == Engine::Uring {
            cmd.args(["--features", &v.features.spec()]);
        }
        let mut child = cmd.spawn().context("starting the echo server process")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = ServerProcess {
            child,
            lines: rx,
            addr: "127.0.0.1:0".parse().expect("static address"),
        };
        let first = p.lines.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            let status = p.child.try_wait().ok().flatten();
            anyhow::anyhow!(
                "the {} server did not report its address{}",
                engine.name(),
                status.map_or(String::new(), |s| format!(" ({s})"))
            )
        })?;
        p.addr = first
            .trim()
            .parse()
            .with_context(|| format!("the server's first line '{first}' is not an address"))?;
        Ok(p)
    }

    /// SIGTERM, wait (bounded), read its counts.
    fn stop(mut self) -> Result<ServerStats> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                anyhow::bail!("the echo server did not stop within 5 s of SIGTERM; killed it");
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let mut last = None;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            last = Some(line);
        }
        if !status.success() {
            anyhow::bail!("the echo server failed ({status})");
        }
        let line = last.context("the echo server printed no counts")?;
        serde_json::from_str(&line).with_context(|| format!("reading the server's counts '{line}'"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One server the sweep runs: an engine and, for uring, the features it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub engine: Engine,
    pub features: Features,
}

impl Variant {
    pub fn plain(engine: Engine) -> Variant {
        Variant {
            engine,
            features: Features::default(),
        }
    }

    /// "epoll", "uring", "uring -bundle".
    pub fn label(&self) -> String {
        match (self.engine, self.features.spec()) {
            (Engine::Uring, spec) if spec != "all" => format!("uring {spec}"),
            (e, _) => e.name().to_string(),
        }
    }
}

/// The servers a plan runs: its engines, uring with the plan's features, and with --ablate
/// uring again with each of those features switched off in turn.
pub fn variants(plan: &Plan) -> Vec<Variant> {
    let mut v = Vec::new();
    for &engine in &plan.engines {
        if engine != Engine::Uring {
            v.push(Variant::plain(engine));
            continue;
        }
        v.push(Variant {
            engine,
            features: plan.features,
        });
        if plan.ablate {
            for name in features::NAMES {
                if plan.features.has(name) {
                    v.push(Variant {
                        engine,
                        features: plan.features.without(name),
                    });
                }
            }
        }
    }
    v
}

fn point_case(plan: &Plan, v: &Variant, client: ClientKind, conns: usize, size: usize) -> Case {
    let mut c = case! {"engine" => v.engine.name(), "client" => client.name(), "conns" => conns, "size" => size};
    if v.engine == Engine::Uring {
        c.insert("features".into(), v.features.spec().into());
    }
    if let Some(r) = &plan.remote {
        r.tag(&mut c);
    }
    c
}

/// The figures of one sweep point over its repetitions.
#[derive(Default)]
struct Point {
    throughput: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    p999: Vec<f64>,
    cpu_per_req: Vec<f64>,
    batch: Vec<f64>,
    loader_cpu: Vec<f64>,
    loader_per_req: Vec<f64>,
    server: Option<ServerStats>,
    trouble: Trouble,
}

/// Run the sweep. Returns the figures and, for each sweep point, what the server counted
/// over all its repetitions: the `Observed` the cost model (model.rs) reads.
/// Keep the more disturbed of two repetitions' conditions for a point.
fn keep_worst<K: Ord>(all: &mut BTreeMap<K, Conditions>, key: K, c: Conditions) {
    let worse = |c: &Conditions| {
        (
            c.other_cpu_max_pct.unwrap_or(0.0),
            c.steal_pct.unwrap_or(0.0),
        )
    };
    match all.get(&key) {
        Some(old) if worse(old) >= worse(&c) => {}
        _ => {
            all.insert(key, c);
        }
    }
}

pub fn sweep(plan: &Plan) -> Result<(Outcome, Vec<(Case, Observed)>)> {
    let lay = layout();
    let max_conns = plan.conns.iter().copied().max().unwrap_or(1);
    let blocking = plan.clients.contains(&ClientKind::Blocking);
    let need = max_conns as u64 + 64;
    listen::raise_nofile(need)?;
    if blocking && max_conns > 4000 {
        return Err(usage(
            "--client blocking starts a thread per connection; keep --conns at 4000 or below",
        ));
    }
    let vars = variants(plan);
    let mut points: BTreeMap<(usize, usize, usize, usize), Point> = BTreeMap::new();
    // Per point, the conditions of its most disturbed repetition (each repetition is a sample).
    let mut conditions: BTreeMap<(usize, usize, usize, usize), Conditions> = BTreeMap::new();
    let mut notes: Vec<String> = Vec::new();
    notes.extend(lay.note.clone());
    notes.extend(plan.note.clone());
    let total = plan.reps * plan.sizes.len() * plan.conns.len() * plan.clients.len() * vars.len();
    let bar = progress::bar(total as u64, "echo");
    let limit = plan.duration * 3 + Duration::from_secs(30);
    let mut done = 0;
    for rep in 0..plan.reps {
        for (si, &size) in plan.sizes.iter().enumerate() {
            for (ci, &conns) in plan.conns.iter().enumerate() {
                for (ki, &client) in plan.clients.iter().enumerate() {
                    for (ei, v) in vars.iter().enumerate() {
                        cancel::check()?;
                        progress::note(&format!(
                            "echo: {} {} client, {conns} conns, {} messages, run {}/{}",
                            v.label(),
                            client.name(),
                            sizes::human_size(size as u64),
                            rep + 1,
                            plan.reps
                        ));
                        let watch = Watch::start(&[]);
                        let server = ServerProcess::spawn(
                            v,
                            &plan.addr,
                            lay.server,
                            size,
                            plan.sqpoll,
                            limit,
                        )?;
                        let spec = LoadSpec {
                            target: server.addr,
                            conns,
                            size,
                            duration: plan.duration,
                            depth: plan.depth,
                            threads: plan.threads.unwrap_or(lay.loader.len()).max(1),
                            rate: None,
                            client,
                            cpus: Some(lay.loader.clone()),
                        };
                        let report = match &plan.remote {
                            Some(r) => r.run(&spec, &point_case(plan, v, client, conns, size)),
                            None => load::run(&spec),
                        };
                        let stats = server.stop()?;
                        let report = report?;
                        record(&mut points, (si, ci, ki, ei), &report, &stats);
                        keep_worst(&mut conditions, (si, ci, ki, ei), watch.finish());
                        note_setup(&mut notes, v, &stats);
                        done += 1;
                        bar.set_position(done);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    let mut out = Outcome::default();
    let mut observed = Vec::new();
    for ((si, ci, ki, ei), p) in points {
        let (size, conns, client, v) =
            (plan.sizes[si], plan.conns[ci], plan.clients[ki], &vars[ei]);
        let c = point_case(plan, v, client, conns, size);
        let at = format!(
            "{} {} client {conns} conns {}",
            v.label(),
            client.name(),
            sizes::human_size(size as u64)
        );
        notes.extend(p.trouble.notes(&at));
        let mark = out.results.len();
        out.push(LAB, c.clone(), "throughput", "req/s", p.throughput);
        out.push(LAB, c.clone(), "p50", "us", p.p50);
        out.push(LAB, c.clone(), "p99", "us", p.p99);
        out.push(LAB, c.clone(), "p999", "us", p.p999);
        out.push(LAB, c.clone(), "server_cpu_per_req", "ns", p.cpu_per_req);
        out.push(LAB, c.clone(), "batch", "n", p.batch);
        out.push(LAB, c.clone(), "loader_cpu", "%", p.loader_cpu);
        out.push(LAB, c.clone(), "loader_cpu_per_req", "ns", p.loader_per_req);
        if let Some(cond) = conditions.remove(&(si, ci, ki, ei)) {
            out.attach_conditions(mark, cond);
        }
        if let Some(s) = p.server {
            observed.push((c, s.observed(conns as u32)));
        }
    }
    out.notes = notes;
    let loader_at = match &plan.remote {
        Some(r) => format!("loaders on {} over ssh", r.hosts.join(", ")),
        None => format!("loader on CPU {}", cpus::format_cpu_list(&lay.loader)),
    };
    out.notes.push(format!(
        "server on CPU {}, {loader_at}; requests = bytes echoed / the message size; batch = completions per io_uring_enter (uring), events per epoll_wait (epoll)",
        lay.server,
    ));
    if let Some(r) = &plan.remote {
        r.push_rows(LAB, &mut out);
    }
    Ok((out, observed))
}

fn record(
    points: &mut BTreeMap<(usize, usize, usize, usize), Point>,
    key: (usize, usize, usize, usize),
    r: &LoadReport,
    s: &ServerStats,
) {
    let p = points.entry(key).or_default();
    p.throughput.push(r.throughput());
    let q = |x: f64| r.latency_us(x).unwrap_or(f64::NAN);
    p.p50.push(q(0.5));
    p.p99.push(q(0.99));
    p.p999.push(q(0.999));
    p.cpu_per_req
        .push(s.cpu_per_request_ns().unwrap_or(f64::NAN));
    p.batch.push(s.batch().unwrap_or(f64::NAN));
    p.trouble.add(r, s);
    p.loader_cpu.push(r.busy() * 100.0);
    p.loader_per_req
        .push(r.cpu_ns as f64 / r.answered.max(1) as f64);
    match &mut p.server {
        Some(total) => total.add(s),
        None => p.server = Some(s.clone()),
    }
}

/// What went wrong at one sweep point over its repetitions, so that each kind of trouble
/// makes one note per point, not one per run.
#[derive(Debug, Default)]
struct Trouble {
    runs: usize,
    /// Runs with loader errors, and their errors summed.
    error_runs: usize,
    errors: Errors,
    /// The loader's busy share in each run where it may have been the bottleneck, and its CPUs
    /// (the same every run: the layout is fixed for the sweep).
    loader_busy: Vec<f64>,
    loader_cpus: usize,
    /// Runs where the provided-buffer ring ran dry, and how often in all.
    enobufs_runs: usize,
    enobufs: u64,
}

impl Trouble {
    fn add(&mut self, r: &LoadReport, s: &ServerStats) {
        self.runs += 1;
        if r.errors.total() > 0 {
            self.error_runs += 1;
            self.errors.add(&r.errors);
        }
        if r.loader_bound() {
            self.loader_busy.push(r.busy());
            self.loader_cpus = r.cpus;
        }
        if s.enobufs > 0 {
            self.enobufs_runs += 1;
            self.enobufs += s.enobufs;
        }
    }

    /// One note per kind of trouble seen, each prefixed with `at` (the point).
    fn notes(&self, at: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if self.error_runs > 0 {
            let e = &self.errors;
            notes.push(format!(
                "{at}: loader errors{}: mismatch {}, reset {}, timeout {}, connect {}",
                self.in_runs(self.error_runs),
                e.mismatch,
                e.reset,
                e.timeout,
                e.connect
            ));
        }
        if !self.loader_busy.is_empty() {
            let busy = percent_range(&self.loader_busy);
            let runs = self.in_runs(self.loader_busy.len());
            notes.push(format!(
                "{at}: {}",
                load::loader_bound_note(self.loader_cpus, &busy, &runs)
            ));
        }
        if self.enobufs_runs > 0 {
            notes.push(format!(
                "{at}: the provided-buffer ring ran dry {} times{} (recv re-armed as sends completed)",
                self.enobufs,
                self.in_runs(self.enobufs_runs)
            ));
        }
        notes
    }

    /// In which runs something was seen: nothing for a single run, " over 5 runs" for all
    /// of them, " in 2 of 5 runs" otherwise.
    fn in_runs(&self, seen: usize) -> String {
        match self.runs {
            0 | 1 => String::new(),
            n if seen == n => format!(" over {n} runs"),
            n => format!(" in {seen} of {n} runs"),
        }
    }
}

/// "105%" for one value (or values that round alike), "103–111%" for a spread; from shares.
fn percent_range(shares: &[f64]) -> String {
    let lo = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = shares.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (format!("{:.0}", lo * 100.0), format!("{:.0}", hi * 100.0));
    if lo == hi {
        format!("{lo}%")
    } else {
        format!("{lo}–{hi}%")
    }
}

/// A note that does not depend on the point: said once, however many points and runs see it.
fn note_setup(notes: &mut Vec<String>, v: &Variant, s: &ServerStats) {
    if v.engine != Engine::Uring {
        return;
    }
    let mut add = |n: String| {
        if !notes.contains(&n) {
            notes.push(n);
        }
    };
    if s.setup != "single_issuer+defer_taskrun" {
        add(format!("uring ring setup fell back to '{}'", s.setup));
    }
    add(format!(
        "{}: features on: {}",
        v.label(),
        if s.features.is_empty() {
            "?"
        } else {
            &s.features
        }
    ));
    for off in &s.features_off {
        add(format!("{}: {off}", v.label()));
    }
}

/// `costlab echo`: the sweep, its figures and (at merge) the cost model.
pub fn run(args: &EchoRunArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::from_args(args, ctx)?;
    run_plan(&plan, ctx.quick)
}

fn run_plan(plan: &Plan, quick: bool) -> Result<Outcome> {
    let (mut outcome, observed) = sweep(plan)?;
    add_model(&mut outcome, &observed, quick)?;
    Ok(outcome)
}

/// Check the cost model against the sweep: measure s, w and t(n) here, on this machine, right
/// after the sweep (the same terms `costlab syscall` reports), then predict every point's
/// server CPU per request from the counts its server reported.
fn add_model(out: &mut Outcome, observed: &[(Case, Observed)], quick: bool) -> Result<()> {
    if observed.is_empty() {
        return Ok(());
    }
    let batches: &[u32] = if quick {
        &[1, 4, 16, 64, 256]
    } else {
        &syscost::DEFAULT_BATCHES
    };
    progress::note("echo: measuring the model's cost terms (s, w, t(n))");
    match syscost::measure_terms_at(&SampleSpec::quick(), batches) {
        Ok(terms) => {
            let points: Vec<Observed> = observed.iter().map(|(_, o)| o.clone()).collect();
            out.models
                .push(model::build_model_with_cases(&terms, observed));
            out.models.push(model::build_article_model(&terms, &points));
        }
        Err(e) if crate::measure::cancel::requested() => return Err(e),
        Err(e) => out.notes.push(format!(
            "cost model not checked: measuring its terms failed: {e:#}"
        )),
    }
    Ok(())
}

/// The samples of `metric` at one point for `engine` (its first row: the plan's own uring
/// features come before the ablated ones). `size` None: the first size that has the point.
fn point_samples(
    o: &Outcome,
    metric: &str,
    engine: &str,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Option<Vec<f64>> {
    let mut want = case! {"engine" => engine, "client" => client, "conns" => conns};
    if let Some(b) = size {
        want.insert("size".into(), b.into());
    }
    o.find(metric, &want).map(|r| r.samples.clone())
}

/// Paired throughput ratios a/b at one (client, conns, size), one per repetition.
pub fn throughput_ratios(
    o: &Outcome,
    a: Engine,
    b: Engine,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Vec<f64> {
    let find = |e: Engine| point_samples(o, "throughput", e.name(), client, conns, size);
    match (find(a), find(b)) {
        (Some(x), Some(y)) => paired_ratios(&x, &y),
        _ => Vec::new(),
    }
}

/// Paired server-CPU ratios b/a (ns per request of b over a's: above 1, a is the cheaper).
pub fn cpu_ratios(
    o: &Outcome,
    a: Engine,
    b: Engine,
    client: &str,
    conns: usize,
    size: Option<usize>,
) -> Vec<f64> {
    let find = |e: Engine| point_samples(o, "server_cpu_per_req", e.name(), client, conns, size);
    match (find(a), find(b)) {
        (Some(x), Some(y)) => paired_ratios(&y, &x),
        _ => Vec::new(),
    }
}

/// A loader's throughput over the blocking loader's, against one engine at one point.
fn client_ratios(o: &Outcome, client: &str, engine: &str, conns: usize, size: usize) -> Vec<f64> {
    let find = |c: &str| point_samples(o, "throughput", engine, c, conns, Some(size));
    match (find(client), find("blocking")) {
        (Some(x), Some(y)) => paired_ratios(&x, &y),
        _ => Vec::new(),
    }
}

/// "uring", "uring -bundle", "epoll": the server of a row.
fn row_label(r: &crate::report::ResultRow) -> String {
    let f = r.key("features");
    if r.key("engine") == "uring" && !f.is_empty() && f != "all" {
        format!("uring {f}")
    } else {
        r.key("engine")
    }
}

fn num_key(r: &crate::report::ResultRow, key: &str) -> u64 {
    r.case.get(key).and_then(|v| v.as_u64()).unwrap_or(0)
}

pub fn render(o: &Outcome) -> String {
    let mut rows = Vec::new();
    let mut keys: Vec<(String, u64, u64)> = Vec::new();
    for r in o.results.iter().filter(|r| r.metric == "throughput") {
        let get = |m: &str| {
            o.find(m, &r.case)
                .map_or("—".to_string(), |x| format!("{:.1}", x.summary.median))
        };
        let conns = num_key(r, "conns");
        let size = num_key(r, "size");
        keys.push((r.key("client"), size, conns));
        rows.push(vec![
            row_label(r),
            r.key("client"),
            conns.to_string(),
            sizes::format_size(size),
            r.summary.show(0),
            get("p50"),
            get("p99"),
            get("p999"),
            get("server_cpu_per_req"),
            o.find("batch", &r.case)
                .map_or("—".into(), |x| format!("{:.2}", x.summary.median)),
            o.find("loader_cpu", &r.case)
                .map_or("—".into(), |x| format!("{:.0}", x.summary.median)),
            get("loader_cpu_per_req"),
        ]);
    }
    let mut text = table::render(
        &[
            "engine",
            "client",
            "conns",
            "size",
            "req/s (min–max)",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "server CPU ns/req",
            "batch n",
            "loader CPU %",
            "loader ns/req",
        ],
        &rows,
    );
    text.push('\n');
    keys.sort();
    keys.dedup();
    let mut ratio_rows = Vec::new();
    for (client, size, conns) in &keys {
        let show = |v: Vec<f64>| Summary::of(&v).map_or("—".to_string(), |s| s.show(2));
        let (conns, size) = (*conns as usize, Some(*size as usize));
        let (u, e, b) = (Engine::Uring, Engine::Epoll, Engine::UringBasic);
        ratio_rows.push(vec![
            client.clone(),
            sizes::format_size(*size.as_ref().unwrap() as u64),
            conns.to_string(),
            show(throughput_ratios(o, u, e, client, conns, size)),
            show(cpu_ratios(o, u, e, client, conns, size)),
            show(throughput_ratios(o, u, b, client, conns, size)),
            show(cpu_ratios(o, u, b, client, conns, size)),
            if client != "blocking" {
                show(client_ratios(o, client, "uring", conns, size.unwrap_or(0)))
            } else {
                "—".into()
            },
        ]);
    }
    if !ratio_rows.is_empty() {
        text.push_str(&table::render(
            &[
                "client",
                "size",
                "conns",
                "req/s uring÷epoll",
                "CPU/req epoll÷uring",
                "req/s uring÷basic",
                "CPU/req basic÷uring",
                "client/blocking (uring)",
            ],
            &ratio_rows,
        ));
        text.push_str(
            "\n(ratios above 1 favour uring: more requests, or less server CPU per request)\n\n",
        );
    }
    let ablation = ablation_rows(o);
    if !ablation.is_empty() {
        text.push_str("what each uring technique is worth (uring with all its features against uring with one switched off):\n");
        text.push_str(&table::render(
            &[
                "switched off",
                "client",
                "size",
                "conns",
                "req/s uring÷without",
                "CPU/req without÷uring",
            ],
            &ablation,
        ));
        text.push('\n');
    }
    for m in o.models.iter().filter(|m| m.lab == LAB) {
        text.push_str(&table::render_model(m));
    }
    text
}

/// One row per ablated uring point: the full-featured uring over it, paired by repetition.
fn ablation_rows(o: &Outcome) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let uring: Vec<&crate::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.metric == "throughput" && r.key("engine") == "uring")
        .collect();
    let show = |v: Vec<f64>| Summary::of(&v).map_or("—".to_string(), |s| s.show(2));
    for r in &uring {
        let (client, conns, size) = (r.key("client"), num_key(r, "conns"), num_key(r, "size"));
        // The plan's own uring is the first uring row at this point.
        let Some(full) = uring.iter().find(|x| {
            x.key("client") == client && num_key(x, "conns") == conns && num_key(x, "size") == size
        }) else {
            continue;
        };
        if std::ptr::eq(*full, *r) {
            continue;
        }
        let cpu = |row: &crate::report::ResultRow| {
            o.find("server_cpu_per_req", &row.case)
                .map(|x| x.samples.clone())
                .unwrap_or_default()
        };
        let off = r.key("features");
        out.push(vec![
            off,
            client,
            sizes::format_size(size),
            conns.to_string(),
            show(paired_ratios(&full.samples, &r.samples)),
            show(paired_ratios(&cpu(r), &cpu(full))),
        ]);
    }
    out
}

// ---------------------------------------------------------------- costlab run

pub struct EchoLab;

impl Lab for EchoLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(&self, doc: &crate::report::Doc) -> Vec<crate::report::charts::Chart> {
        crate::report::charts::echo::charts(doc)
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        if cpus::allowed_cpus().len() < 2 {
            return Some("needs two CPUs: one for the server, one for the loader".into());
        }
        None
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let mut plan = Plan::quick();
        if full {
            plan.conns = vec![1, 16, 128, 1000];
            plan.sizes = vec![16, 4096, 16 * 1024, 64 * 1024];
            plan.duration = Duration::from_secs(2);
            plan.reps = ctx.spec.samples.clamp(3, 5);
        }
        run_plan(&plan, !full)
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        let mut out = Vec::new();
        let client = headline_client(o);
        let sizes_run = sizes_in(o);
        // The connection headlines read the smallest messages (16 B in the plans).
        let small = sizes_run.first().copied();
        for conns in [1usize, 128] {
            let Some(s) = Summary::of(&throughput_ratios(
                o,
                Engine::Uring,
                Engine::Epoll,
                client,
                conns,
                small,
            )) else {
                continue;
            };
            let mut want = case! {"engine" => "uring", "client" => client, "conns" => conns};
            if let Some(b) = small {
                want.insert("size".into(), b.into());
            }
            out.push(Headline {
                label: format!(
                    "echo io_uring/epoll throughput, {conns} conn{}",
                    if conns == 1 { "" } else { "s" }
                ),
                summary: s,
                unit: "x".into(),
                reading: reading(s, conns, o.find("batch", &want).map(|r| r.summary.median)),
                ..Default::default()
            });
        }
        if let Some(h) = headline_at_size(o, client, 16 * 1024) {
            out.push(h);
        }
        out
    }
}

/// The message sizes a run has, ascending.
fn sizes_in(o: &Outcome) -> Vec<usize> {
    let mut v: Vec<usize> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput")
        .filter_map(|r| r.case.get("size").and_then(|v| v.as_u64()))
        .map(|b| b as usize)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// "echo io_uring/epoll at 16 KiB": the throughput ratio at the most connections run at that
/// size, read with the server CPU per request of both.
fn headline_at_size(o: &Outcome, client: &str, size: usize) -> Option<Headline> {
    let conns = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput" && r.key("engine") == "epoll")
        .filter(|r| num_key(r, "size") == size as u64 && r.key("client") == client)
        .map(|r| num_key(r, "conns") as usize)
        .max()?;
    let s = Summary::of(&throughput_ratios(
        o,
        Engine::Uring,
        Engine::Epoll,
        client,
        conns,
        Some(size),
    ))?;
    let cpu = Summary::of(&cpu_ratios(
        o,
        Engine::Uring,
        Engine::Epoll,
        client,
        conns,
        Some(size),
    ));
    let cpu_text = cpu.map_or(String::new(), |c| {
        format!(
            "; epoll spends {:.2}x the server CPU per request that io_uring does",
            c.median
        )
    });
    let base = reading(s, conns, None);
    // The ratio is as good as the throughput figures it divides.
    let sources: Vec<&crate::report::ResultRow> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB && r.metric == "throughput")
        .filter(|r| num_key(r, "size") == size as u64 && r.key("client") == client)
        .filter(|r| num_key(r, "conns") as usize == conns)
        .collect();
    Some(
        Headline {
            label: format!("echo io_uring/epoll at {}", sizes::human_size(size as u64)),
            summary: s,
            unit: "x".into(),
            reading: format!(
                "{} messages: {base}{cpu_text}",
                sizes::human_size(size as u64)
            ),
            ..Default::default()
        }
        .judged_by(&sources),
    )
}

/// The client whose figures the headlines read: the default one where the run has it, else
/// the first of the others it has.
fn headline_client(o: &Outcome) -> &'static str {
    let has = |c: ClientKind| {
        o.results
            .iter()
            .any(|r| r.metric == "throughput" && r.key("client") == c.name())
    };
    [ClientKind::DEFAULT, ClientKind::Uring, ClientKind::Event]
        .into_iter()
        .find(|&c| has(c))
        .unwrap_or(ClientKind::DEFAULT)
        .name()
}

/// One line saying what a uring/epoll ratio means, with the batch io_uring reached.
pub fn reading(s: Summary, conns: usize, batch: Option<f64>) -> String {
    let pct = (s.median - 1.0) * 100.0;
    let clear = s.min > 1.0 || s.max < 1.0;
    let at = format!("at {conns} connection{}", if conns == 1 { "" } else { "s" });
    let n = batch.map_or(String::new(), |b| {
        format!(" (io_uring reaped {b:.1} completions per enter)")
    });
    if !clear {
        format!(
            "io_uring and epoll are level {at} here: ratio {:.2}, spread crosses 1{n}",
            s.median
        )
    } else if pct > 0.0 {
        format!("io_uring serves {pct:.0}% more requests than epoll {at}{n}")
    } else {
        format!(
            "io_uring serves {:.0}% fewer requests than epoll {at}{n}: its per-op cost is not repaid by batching",
            -pct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    #[test]
    fn durations_parse() {
        assert_eq!(
            parse_duration("2", "--duration").unwrap(),
            Duration::from_secs(2)
        );
        assert_eq!(
            parse_duration("2s", "--duration").unwrap(),
            Duration::from_secs(2)
        );
        assert_eq!(
            parse_duration("500ms", "--duration").unwrap(),
            Duration::from_millis(500)
        );
        for bad in ["0", "-1s", "abc", "2h", ""] {
            assert_eq!(
                exit_code(&parse_duration(bad, "--duration").unwrap_err()),
                2,
                "{bad}"
            );
        }
    }

    #[test]
    fn ratios_pair_repetitions_and_headlines_read_them() {
        let mut o = Outcome::default();
        let uring = Variant::plain(Engine::Uring);
        let no_bundle = Variant {
            engine: Engine::Uring,
            features: Features::default().without("bundle"),
        };
        let epoll = Variant::plain(Engine::Epoll);
        for (v, size, tput, cpu) in [
            (epoll, 16, vec![100.0, 200.0], vec![1000.0, 1000.0]),
            (uring, 16, vec![150.0, 240.0], vec![800.0, 500.0]),
            (epoll, 16384, vec![50.0, 50.0], vec![4000.0, 4000.0]),
            (uring, 16384, vec![100.0, 75.0], vec![2000.0, 2000.0]),
            (no_bundle, 16384, vec![50.0, 50.0], vec![3000.0, 4000.0]),
        ] {
            let c = point_case(&Plan::quick(), &v, ClientKind::Event, 128, size);
            o.push(LAB, c.clone(), "throughput", "req/s", tput);
            o.push(LAB, c, "server_cpu_per_req", "ns", cpu);
        }
        assert_eq!(
            throughput_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16)),
            vec![1.5, 1.2]
        );
        assert_eq!(
            cpu_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16)),
            vec![1.25, 2.0]
        );
        // The plan's own uring, not the ablated one, is what the ratios read.
        assert_eq!(
            throughput_ratios(&o, Engine::Uring, Engine::Epoll, "event", 128, Some(16384)),
            vec![2.0, 1.5]
        );
        let h = EchoLab.headlines(&o);
        assert_eq!(h.len(), 2, "{h:?}");
        assert!((h[0].summary.median - 1.35).abs() < 1e-9);
        assert!(h[0].reading.contains("more requests"), "{}", h[0].reading);
        assert_eq!(h[1].label, "echo io_uring/epoll at 16 KiB");
        assert!((h[1].summary.median - 1.75).abs() < 1e-9);
        assert!(
            h[1].reading.contains("2.00x the server CPU"),
            "{}",
            h[1].reading
        );
        let text = render(&o);
        assert!(
            text.contains("uring÷epoll") && text.contains("1.35"),
            "{text}"
        );
        // Switching bundles off: uring/without 2.0 and 1.5, CPU without/uring 1.5 and 2.0.
        let abl = ablation_rows(&o);
        assert_eq!(abl.len(), 1, "{abl:?}");
        assert_eq!(abl[0][0], "-bundle");
        assert_eq!(abl[0][4], "1.75 (1.50–2.00)");
        assert_eq!(abl[0][5], "1.75 (1.50–2.00)");
        assert!(
            text.contains("what each uring technique is worth"),
            "{text}"
        );
    }

    #[test]
    fn variants_ablate_each_feature_that_is_on() {
        let (clients, _) = default_clients();
        let mut plan = Plan::quick();
        plan.clients = clients;
        assert_eq!(variants(&plan).len(), 3);
        plan.ablate = true;
        plan.features = Features::parse("-fixed").unwrap();
        let v = variants(&plan);
        let labels: Vec<String> = v.iter().map(Variant::label).collect();
        assert_eq!(
            labels,
            vec![
                "epoll",
                "uring -fixed",
                "uring -big,-fixed",
                "uring -bundle,-fixed",
                "uring -inc,-fixed",
                "uring -sendmsg,-fixed",
                "uring-basic"
            ]
        );
        assert_eq!(parse_msg_sizes("16,512,4K,16K,64K").unwrap()[4], 65536);
        assert_eq!(exit_code(&parse_msg_sizes("0").unwrap_err()), 2);
        assert_eq!(exit_code(&parse_msg_sizes("128M").unwrap_err()), 2);
    }

    /// One run's loader report: `busy` share of its one CPU, `timeouts` errors.
    fn load_report(busy: f64, timeouts: u64) -> LoadReport {
        let mut r = LoadReport::empty(1);
        r.window = Duration::from_secs(1);
        r.cpu_ns = (busy * 1e9) as u64;
        r.errors.timeout = timeouts;
        r
    }

    fn server_stats(enobufs: u64) -> ServerStats {
        ServerStats {
            enobufs,
            ..ServerStats::new("uring", "single_issuer+defer_taskrun", 16)
        }
    }

    #[test]
    fn trouble_makes_one_note_per_point_over_its_runs() {
        let at = "epoll event client 128 conns";
        let mut t = Trouble::default();
        for (busy, timeouts, enobufs) in [(1.05, 0, 2), (1.11, 3, 0), (1.03, 1, 5)] {
            t.add(&load_report(busy, timeouts), &server_stats(enobufs));
        }
        let notes = t.notes(at);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            notes[0],
            format!(
                "{at}: loader errors in 2 of 3 runs: mismatch 0, reset 0, timeout 4, connect 0"
            )
        );
        assert_eq!(
            notes[1],
            format!("{at}: the loader kept its 1 CPU(s) 103–111% busy over 3 runs: the client may be the bottleneck, not the server")
        );
        assert_eq!(
            notes[2],
            format!("{at}: the provided-buffer ring ran dry 7 times in 2 of 3 runs (recv re-armed as sends completed)")
        );
    }

    #[test]
    fn one_run_reads_as_before_and_a_quiet_point_says_nothing() {
        let at = "uring blocking client 1 conns";
        let mut t = Trouble::default();
        t.add(&load_report(0.95, 2), &server_stats(0));
        let r = load_report(0.95, 2);
        assert_eq!(
            t.notes(at),
            vec![
                format!("{at}: loader errors: mismatch 0, reset 0, timeout 2, connect 0"),
                format!("{at}: {}", r.bottleneck_note().unwrap()),
            ]
        );
        let mut quiet = Trouble::default();
        for _ in 0..5 {
            quiet.add(&load_report(0.5, 0), &server_stats(0));
        }
        assert!(quiet.notes(at).is_empty());
        // Shares that round to the same percent read as one figure.
        assert_eq!(percent_range(&[1.051, 1.049]), "105%");
        assert_eq!(percent_range(&[0.92]), "92%");
    }

    #[test]
    fn readings_say_level_when_the_spread_crosses_one() {
        let s = Summary::of(&[0.9, 1.0, 1.1]).unwrap();
        assert!(reading(s, 1, None).contains("level"));
        let s = Summary::of(&[0.8, 0.85, 0.9]).unwrap();
        assert!(reading(s, 1, Some(2.0)).contains("fewer"));
        assert!(reading(s, 1, Some(2.0)).contains("2.0 completions per enter"));
    }
}
