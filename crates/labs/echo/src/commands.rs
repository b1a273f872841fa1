//! The `echo serve` and `echo load` commands: one server, or one load run against a server
//! already running (here or on another host), with their own table.

use super::*;

/// `costlab echo serve`: the address as the first line, the counts as one JSON line at exit.
pub fn serve_command(args: &EchoServeArgs) -> Result<()> {
    let opts = ServeOpts {
        engine: Engine::parse(costlab_lab::args::one(
            "--case",
            &args.engine,
            "one server runs one engine",
        )?)?,
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
        return Err(usage("--sqpoll applies to --case uring only"));
    }
    if opts.features != Features::default() && opts.engine != Engine::Uring {
        return Err(usage("--features applies to --case uring only"));
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
        return Err(usage(
            "--loader-threads 0: the loader needs at least one thread",
        ));
    }
    Ok(spec)
}

pub(super) fn load_runs(
    args: &EchoLoadArgs,
    spec: LoadSpec,
    client: ClientKind,
) -> Result<Outcome> {
    // `--samples N`: N runs of --duration each, one sample per run for every figure.
    let n = args.common.samples.unwrap_or(1).max(1);
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        costlab_core::measure::cancel::check()?;
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
