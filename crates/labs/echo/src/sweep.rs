//! The experiment's plan and running it: the variants (engine plus features), the sweep over
//! clients, connections and sizes, interleaved repetitions, and what went wrong along the way.

use super::*;

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
    /// `--attribute`: the perf binary, for one more run per point with perf on the server
    /// (where its CPU per request goes).
    pub attribute: Option<std::path::PathBuf>,
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
    /// Only these (size, conns) points of the grid, where not empty: `costlab run` measures
    /// the three its sheet reads, not the whole cross product.
    pub only: Vec<(usize, usize)>,
}

impl Plan {
    /// Whether the grid point (size, conns) is measured.
    pub fn wants(&self, point: (usize, usize)) -> bool {
        self.only.is_empty() || self.only.contains(&point)
    }

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
            costlab_core::measure::units::parse_count(s, "connection count", 1, 1 << 20, "1,16,128")
                .map(|n| n as usize)
        })?;
        let mut clients = sizes::parse_list(&args.client, ClientKind::parse)?;
        let mut note = None;
        if clients == [ClientKind::DEFAULT] {
            (clients, note) = default_clients();
        }
        let engines = Engine::parse_list(&args.engine)?;
        super::check_depth(args.depth)?;
        if args.depth > 1 && clients.contains(&ClientKind::Blocking) {
            return Err(usage(format!(
                "--depth {}: --client blocking sends one request at a time per connection; drop --depth or blocking from --client",
                args.depth
            )));
        }
        if args.threads == Some(0) {
            return Err(usage(
                "--loader-threads 0: the loader needs at least one thread",
            ));
        }
        if args.sqpoll && !engines.contains(&Engine::Uring) {
            return Err(usage(
                "--sqpoll applies to the uring engine, which is not in --case",
            ));
        }
        let features = Features::parse(&args.features)?;
        if (args.ablate || features != Features::default()) && !engines.contains(&Engine::Uring) {
            return Err(usage(
                "--features and --ablate apply to the uring engine, which is not in --case",
            ));
        }
        let attribute = match args.attribute {
            false => None,
            true => Some(costlab_core::measure::perf::find().ok_or_else(|| {
                usage("--attribute samples the server with perf, which is not on PATH: install it (apt-get install linux-perf) or leave --attribute out")
            })?),
        };
        let (addr, remote) = remote::from_args(args, &mut conns)?;
        Ok(Plan {
            engines,
            clients,
            conns,
            sizes: parse_msg_sizes(&args.sizes)?,
            features,
            ablate: args.ablate,
            attribute,
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
            only: Vec::new(),
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
            attribute: None,
            duration: Duration::from_millis(700),
            reps: 3,
            depth: 1,
            threads: None,
            sqpoll: false,
            note,
            addr: "127.0.0.1:0".into(),
            remote: None,
            only: Vec::new(),
        }
    }
}

/// The default client, or the fallback (with a note saying why) where this process cannot
/// set up an io_uring.
pub(super) fn default_clients() -> (Vec<ClientKind>, Option<String>) {
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

/// One server the sweep runs: an engine and, for uring, the features it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub engine: Engine,
    pub features: Features,
    /// An ablation: the one technique switched off.
    pub off: Option<&'static str>,
}

impl Variant {
    pub fn plain(engine: Engine) -> Variant {
        Variant {
            engine,
            features: Features::default(),
            off: None,
        }
    }

    /// Whether this server does anything different from the plan's own at `size`: an
    /// ablation of a technique the server does not use at that size (the ring's buffer
    /// techniques on the hot path, the hot path below its threshold) would only measure the
    /// same server twice, so the sweep skips it.
    pub fn runs_at(&self, plan_features: &Features, size: usize) -> bool {
        self.off
            .is_none_or(|name| plan_features.matters_at(name, size as u64))
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
            off: None,
        });
        if plan.ablate {
            for name in features::NAMES {
                if plan.features.has(name) {
                    v.push(Variant {
                        engine,
                        features: plan.features.without(name),
                        off: Some(name),
                    });
                }
            }
        }
    }
    v
}

pub(super) fn point_case(
    plan: &Plan,
    v: &Variant,
    client: ClientKind,
    conns: usize,
    size: usize,
) -> Case {
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
pub(super) struct Point {
    pub(super) throughput: Vec<f64>,
    pub(super) p50: Vec<f64>,
    pub(super) p99: Vec<f64>,
    pub(super) p999: Vec<f64>,
    pub(super) cpu_per_req: Vec<f64>,
    pub(super) batch: Vec<f64>,
    pub(super) loader_cpu: Vec<f64>,
    pub(super) loader_per_req: Vec<f64>,
    /// Per run: the loader's sleeps per request answered (None where not counted).
    pub(super) loader_sleeps: Vec<Option<f64>>,
    pub(super) server: Option<ServerStats>,
    pub(super) trouble: Trouble,
}

impl Point {
    /// The loader's sleeps per request, averaged over the runs; None unless every run counted.
    pub(super) fn loader_sleeps_per_req(&self) -> Option<f64> {
        let all: Option<Vec<f64>> = self.loader_sleeps.iter().copied().collect();
        all.filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Run the sweep. Returns the figures and, for each sweep point, what the server counted
/// over all its repetitions: the `Observed` the cost model (model.rs) reads.
/// Keep the more disturbed of two repetitions' conditions for a point.
pub(super) fn keep_worst<K: Ord>(all: &mut BTreeMap<K, Conditions>, key: K, c: Conditions) {
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

/// A sweep point's place in the plan: indices of its size, conns, client and variant.
type Key = (usize, usize, usize, usize);

pub fn sweep(plan: &Plan) -> Result<(Outcome, Vec<(Case, Observed)>)> {
    let lay = layout();
    check_limits(plan)?;
    let vars = variants(plan);
    let mut notes: Vec<String> = Vec::new();
    notes.extend(lay.note.clone());
    notes.extend(plan.note.clone());
    let limit = plan.duration * 3 + Duration::from_secs(30);
    let (points, mut conditions) = run_points(plan, &lay, &vars, limit, &mut notes)?;
    let attributed = match &plan.attribute {
        Some(perf_bin) => attribute_points(plan, perf_bin, &lay, &vars, limit, &mut notes)?,
        None => Vec::new(),
    };
    let mut out = Outcome::default();
    let mut observed = Vec::new();
    for (key, p) in points {
        let cond = conditions.remove(&key);
        observed.extend(push_point(&mut out, &mut notes, plan, &vars, key, p, cond));
    }
    for (case, parts, cond) in attributed {
        let mark = out.results.len();
        for (part, ns) in parts {
            let mut c = case.clone();
            c.insert("part".into(), part.name().into());
            out.push(LAB, c, "server_cpu_part", "ns", vec![ns]);
        }
        out.attach_conditions(mark, cond);
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

/// Enough file descriptors for the most connections, and no thread per connection past 4000.
fn check_limits(plan: &Plan) -> Result<()> {
    let max_conns = plan.conns.iter().copied().max().unwrap_or(1);
    let blocking = plan.clients.contains(&ClientKind::Blocking);
    let need = max_conns as u64 + 64;
    listen::raise_nofile(need)?;
    if blocking && max_conns > 4000 {
        return Err(usage(
            "--client blocking starts a thread per connection; keep --conns at 4000 or below",
        ));
    }
    Ok(())
}

/// Every run of the plan: repetitions x sizes x conns x clients x the variants that run at
/// the size.
fn total_runs(plan: &Plan, vars: &[Variant]) -> usize {
    plan.sizes
        .iter()
        .flat_map(|&size| plan.conns.iter().map(move |&conns| (size, conns)))
        .filter(|&p| plan.wants(p))
        .map(|(size, _)| {
            vars.iter()
                .filter(|v| v.runs_at(&plan.features, size))
                .count()
        })
        .sum::<usize>()
        * plan.reps
        * plan.clients.len()
}

/// Run every point of the plan, repetition by repetition: a fresh server each, loaded
/// locally or from the remote hosts. Per point its figures and the conditions of its most
/// disturbed repetition (each repetition is a sample).
/// How many runs of one point may answer nothing before the sweep gives up on it.
const NO_ANSWER_TRIES: usize = 3;

fn run_points(
    plan: &Plan,
    lay: &Layout,
    vars: &[Variant],
    limit: Duration,
    notes: &mut Vec<String>,
) -> Result<(BTreeMap<Key, Point>, BTreeMap<Key, Conditions>)> {
    let mut points: BTreeMap<Key, Point> = BTreeMap::new();
    let mut conditions: BTreeMap<Key, Conditions> = BTreeMap::new();
    let bar = progress::bar(total_runs(plan, vars) as u64, "echo");
    let mut done = 0;
    for rep in 0..plan.reps {
        for (si, &size) in plan.sizes.iter().enumerate() {
            for (ci, &conns) in plan.conns.iter().enumerate() {
                if !plan.wants((size, conns)) {
                    continue;
                }
                for (ki, &client) in plan.clients.iter().enumerate() {
                    for (ei, v) in vars.iter().enumerate() {
                        if !v.runs_at(&plan.features, size) {
                            continue;
                        }
                        cancel::check()?;
                        progress::note(&format!(
                            "echo: {} {} client, {conns} conns, {} messages, run {}/{}",
                            v.label(),
                            client.name(),
                            sizes::human_size(size as u64),
                            rep + 1,
                            plan.reps
                        ));
                        let mut attempt = 1;
                        let (report, stats, cond) = loop {
                            let watch = Watch::start(&[]);
                            let server = ServerProcess::spawn(
                                v,
                                &plan.addr,
                                lay.server,
                                size,
                                plan.sqpoll,
                                limit,
                            )?;
                            let spec = point_load(plan, lay, server.addr, conns, size, client);
                            let report = match &plan.remote {
                                Some(r) => r.run(&spec, &point_case(plan, v, client, conns, size)),
                                None => load::run(&spec),
                            };
                            let stats = server.stop()?;
                            let report = report?;
                            let cond = watch.finish();
                            // Answers inside the measuring window: a run whose few answers
                            // all came in its warm-up has a throughput of 0 just the same.
                            if report.requests > 0 {
                                break (report, stats, cond);
                            }
                            // A run that got no answer in its window measured no throughput of 0:
                            // the server or the loader never got the CPU in the window (a
                            // busy host) or the server failed. Run it again, then give up
                            // with the point named rather than store a zero as a figure.
                            let at = format!(
                                "{} {} client, {conns} conns, {}",
                                v.label(),
                                client.name(),
                                sizes::human_size(size as u64)
                            );
                            if attempt >= NO_ANSWER_TRIES {
                                anyhow::bail!(
                                    "echo: {at}: no request answered inside the measuring window in {attempt} runs of {:?} (errors: {}); is the machine overloaded? retry with a longer --duration",
                                    plan.duration,
                                    report.errors.total()
                                );
                            }
                            notes.push(format!(
                                "{at}: a run answered no request inside its {:?} window and was run again",
                                plan.duration
                            ));
                            attempt += 1;
                        };
                        record(&mut points, (si, ci, ki, ei), &report, &stats);
                        keep_worst(&mut conditions, (si, ci, ki, ei), cond);
                        note_setup(notes, v, &stats);
                        done += 1;
                        bar.set_position(done);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    Ok((points, conditions))
}

/// One point's figures, its trouble notes and its conditions; what the server observed
/// there, for the model, where it reported it.
fn push_point(
    out: &mut Outcome,
    notes: &mut Vec<String>,
    plan: &Plan,
    vars: &[Variant],
    (si, ci, ki, ei): Key,
    p: Point,
    cond: Option<Conditions>,
) -> Option<(Case, Observed)> {
    let (size, conns, client, v) = (plan.sizes[si], plan.conns[ci], plan.clients[ki], &vars[ei]);
    let c = point_case(plan, v, client, conns, size);
    let at = format!(
        "{} {} client {conns} conns {}",
        v.label(),
        client.name(),
        sizes::human_size(size as u64)
    );
    notes.extend(p.trouble.notes(&at));
    let slept = p.loader_sleeps_per_req();
    let mark = out.results.len();
    out.push(LAB, c.clone(), "throughput", "req/s", p.throughput);
    out.push(LAB, c.clone(), "p50", "us", p.p50);
    out.push(LAB, c.clone(), "p99", "us", p.p99);
    out.push(LAB, c.clone(), "p999", "us", p.p999);
    out.push(LAB, c.clone(), "server_cpu_per_req", "ns", p.cpu_per_req);
    out.push(LAB, c.clone(), "batch", "n", p.batch);
    out.push(LAB, c.clone(), "loader_cpu", "%", p.loader_cpu);
    out.push(LAB, c.clone(), "loader_cpu_per_req", "ns", p.loader_per_req);
    if let Some(cond) = cond {
        out.attach_conditions(mark, cond);
    }
    let s = p.server?;
    let mut o = s.observed(conns as u32);
    o.loader_sleeps_per_req = slept;
    Some((c, o))
}

/// One attributed point: its case, each part's ns per request, the run's conditions.
type AttributedPoint = (Case, Vec<(attribute::Part, f64)>, Conditions);

/// The load of one sweep point against a server at `target`: the plan's duration and depth,
/// from the layout's loader CPUs.
fn point_load(
    plan: &Plan,
    lay: &Layout,
    target: SocketAddr,
    conns: usize,
    size: usize,
    client: ClientKind,
) -> LoadSpec {
    LoadSpec {
        target,
        conns,
        size,
        duration: plan.duration,
        depth: plan.depth,
        threads: plan.threads.unwrap_or(lay.loader.len()).max(1),
        rate: None,
        client,
        cpus: Some(lay.loader.clone()),
    }
}

/// `--attribute`: one more run per point, the server sampled by perf over the middle 60% of
/// the load, each part of its CPU per request in ns (that run's CPU per request times the
/// part's share of the samples).
/// Each point comes back with the conditions of its attributed run, so its parts carry that
/// run's verdict.
fn attribute_points(
    plan: &Plan,
    perf_bin: &std::path::Path,
    lay: &Layout,
    vars: &[Variant],
    limit: Duration,
    notes: &mut Vec<String>,
) -> Result<Vec<AttributedPoint>> {
    let mut out = Vec::new();
    let mut missed: BTreeMap<String, usize> = BTreeMap::new();
    for &size in &plan.sizes {
        for &conns in &plan.conns {
            for &client in &plan.clients {
                for v in vars.iter().filter(|v| v.runs_at(&plan.features, size)) {
                    cancel::check()?;
                    progress::note(&format!(
                        "echo: attributing {} {} client, {conns} conns, {} messages (perf on the server)",
                        v.label(),
                        client.name(),
                        sizes::human_size(size as u64)
                    ));
                    let watch = Watch::start(&[]);
                    let server =
                        ServerProcess::spawn(v, &plan.addr, lay.server, size, plan.sqpoll, limit)?;
                    let spec = point_load(plan, lay, server.addr, conns, size, client);
                    let case = point_case(plan, v, client, conns, size);
                    let (lead, span) = (plan.duration.mul_f64(0.2), plan.duration.mul_f64(0.6));
                    // perf attaches first (it can take a while on a busy machine), then the
                    // load starts: the window is the load's middle 60%.
                    let profile =
                        attribute::Profile::start(perf_bin, server.child.id(), lead, span)?;
                    let report = match &plan.remote {
                        Some(r) => r.run(&spec, &case),
                        None => load::run(&spec),
                    };
                    let profile = profile.finish();
                    let stats = server.stop()?;
                    report?;
                    let rows = profile?;
                    let (Some(shares), Some(cpu)) =
                        (attribute::shares(&rows), stats.cpu_per_request_ns())
                    else {
                        notes.push(format!(
                            "{} {conns} conns {}: no perf samples or no requests in the attributed run",
                            v.label(),
                            sizes::human_size(size as u64)
                        ));
                        continue;
                    };
                    if shares
                        .iter()
                        .any(|(p, x)| *p == attribute::Part::Other && *x > 0.1)
                    {
                        for s in attribute::top_other(&rows, 5) {
                            *missed.entry(s).or_default() += 1;
                        }
                    }
                    let parts = shares.into_iter().map(|(p, x)| (p, x * cpu)).collect();
                    out.push((case, parts, watch.finish()));
                }
            }
        }
    }
    notes.push(format!(
        "attribution: one extra run per point, the server sampled by perf (cpu-clock at {} Hz, no call graphs) over the middle 60% of the load; each part is that run's server CPU per request times the part's share of the samples, so the parts sum to that run's figure, not to the timed runs' median",
        costlab_core::measure::perf::rate(attribute::PERF_HZ)
    ));
    if !missed.is_empty() {
        let names: Vec<String> = missed.into_keys().take(8).collect();
        notes.push(format!(
            "attribution: 'other' took more than 10% somewhere; its largest symbols: {}",
            names.join(", ")
        ));
    }
    Ok(out)
}

pub(super) fn record(
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
    p.loader_sleeps
        .push(r.sleeps.map(|n| n as f64 / r.answered.max(1) as f64));
    match &mut p.server {
        Some(total) => total.add(s),
        None => p.server = Some(s.clone()),
    }
}

/// What went wrong at one sweep point over its repetitions, so that each kind of trouble
/// makes one note per point, not one per run.
#[derive(Debug, Default)]
pub(super) struct Trouble {
    pub(super) runs: usize,
    /// Runs with loader errors, and their errors summed.
    pub(super) error_runs: usize,
    pub(super) errors: Errors,
    /// The loader's busy share in each run where it may have been the bottleneck, and its CPUs
    /// (the same every run: the layout is fixed for the sweep).
    pub(super) loader_busy: Vec<f64>,
    pub(super) loader_cpus: usize,
    /// Runs where the provided-buffer ring ran dry, and how often in all.
    pub(super) enobufs_runs: usize,
    pub(super) enobufs: u64,
    /// Runs where uring's sends came back short (a peer slow to read), and how often.
    pub(super) short_runs: usize,
    pub(super) short_sends: u64,
}

impl Trouble {
    pub(super) fn add(&mut self, r: &LoadReport, s: &ServerStats) {
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
        if s.short_sends > 0 {
            self.short_runs += 1;
            self.short_sends += s.short_sends;
        }
    }

    /// One note per kind of trouble seen, each prefixed with `at` (the point).
    pub(super) fn notes(&self, at: &str) -> Vec<String> {
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
        if self.short_runs > 0 {
            notes.push(format!(
                "{at}: uring's sends came back short {} times{} (a peer slow to read; the rest went in a later send)",
                self.short_sends,
                self.in_runs(self.short_runs)
            ));
        }
        notes
    }

    /// In which runs something was seen: nothing for a single run, " over 5 runs" for all
    /// of them, " in 2 of 5 runs" otherwise.
    pub(super) fn in_runs(&self, seen: usize) -> String {
        match self.runs {
            0 | 1 => String::new(),
            n if seen == n => format!(" over {n} runs"),
            n => format!(" in {seen} of {n} runs"),
        }
    }
}

/// "105%" for one value (or values that round alike), "103–111%" for a spread; from shares.
pub(super) fn percent_range(shares: &[f64]) -> String {
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
pub(super) fn note_setup(notes: &mut Vec<String>, v: &Variant, s: &ServerStats) {
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
