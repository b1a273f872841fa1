//! The per-request cost model of an echo server: the article's epoll = s + w and
//! io_uring = (t + s) / n, refined where it misses. Pure arithmetic over measured terms.
//!
//! # The article's form
//!
//! - epoll:    s + w            (one syscall switch s, the kernel work w of a recv and a send)
//! - io_uring: (t + s) / n      (the io_uring work t and one switch, shared by a batch of n)
//!
//! with s the null-syscall cost (raw getppid), w = w_recv + w_send (loopback TCP, 16 bytes,
//! each measured minus s) and t the kernel work of one recv plus one send submitted through
//! io_uring at batch 1, beyond the switch: t = U_send(1) + U_recv(1) - 2s, where U_op(n) is
//! the measured per-op cost of n such ops in one `submit_and_wait(n)`. The article's n is the
//! number of requests one `io_uring_enter` serves (requests / enters).
//!
//! # Where it misses, and the refined form
//!
//! The article charges epoll one syscall per request. An epoll server pays a `recv` and a
//! `send` per request, the `recv` that returns EAGAIN when it reads until the socket is
//! drained, and an `epoll_wait` whose cost is shared by the events it returned. And it lets
//! io_uring's whole work t shrink with n, when only the entry into the kernel is shared: each
//! recv and send still does its own socket work. The refined model counts what the servers
//! actually did (their `Observed` counts) and prices each count with a measured term:
//!
//! - epoll per request    = (syscalls / request) x s + w_recv + w_send
//!   + (epoll_waits / request) x e(k)
//!
//!   where e(k) is the kernel work of an `epoll_wait` that returns k ready events, beyond s,
//!   measured at a few k and interpolated at the achieved k = events / waits.
//! - io_uring per request = (enters / request) x s + p_recv(n) + p_send(n)
//!
//!   + (completions / request - 2) x (p_recv(n) - w_recv)
//!
//!   (any other syscall the server counts is priced at s with its enters), where n is the
//!   achieved batch (completions per enter) and p_op(n) = U_op(n) - s/n is the
//!   per-op cost of a recv or a send through io_uring at batch n without the switch,
//!   interpolated linearly in 1/n between the measured batches (a per-op cost plus a per-enter
//!   cost shared by n is a straight line in 1/n) and held at the nearest measured batch
//!   outside their range. Completions beyond a recv and a send per request (the hot path's
//!   poll wakeups and recvs that find nothing, a large message taken in two recvs) are each
//!   priced at io_uring's own share of an op: its recv op minus a plain recv's socket work.
//!
//! Neither form counts user-space work (the server's own loop, parsing, copying between its
//! buffers) or the wakeup of the peer a send delivers to; when the measured server CPU per
//! request (user + sys) is off by more than 25%, the verdict names the term that would have
//! to change to close the gap, and how much is left for such uncounted work, sized in wakes
//! of a sleeping peer (a loopback send that wakes a thread asleep in recv, minus a plain
//! send, measured beside the other terms). Both forms charge w_recv and w_send once per
//! request: one message per recv, as with a client that waits for each echo.
//!
//! The crossover (the batch from which io_uring is cheaper than epoll) is computed for both
//! forms from the terms alone: the article's as the smallest n with (t + s) / n < s + w; the
//! refined one as the smallest k (requests per turn of either loop) with
//! s/k + p_recv(2k) + p_send(2k) < 2s + w_recv + w_send + (s + e(k)) / k, that is epoll doing
//! one `epoll_wait` returning k events and one recv and one send per event, io_uring one
//! enter reaping 2k completions (a recv and a send per request).

use serde_json::{json, Map, Value};

use costlab_core::measure::syscost::CostTerms;
use costlab_core::measure::Summary;
use costlab_history::report::{Case, Model, ModelPoint};
/// What an echo server reported for one sweep point (per request figures are totals / requests).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    /// "epoll", "uring" or "uring-basic".
    pub engine: String,
    pub conns: u32,
    /// The message size, bytes (0 in counts written before sizes were swept: read as 16).
    #[serde(default)]
    pub size: u64,
    pub requests: u64,
    /// Syscalls the server made (epoll_wait + recv + send, or io_uring_enter).
    pub syscalls: u64,
    /// io_uring: io_uring_enter calls; 0 for epoll.
    pub enters: u64,
    /// io_uring: completions reaped; 0 for epoll.
    pub completions: u64,
    /// epoll: epoll_wait calls and events they returned; 0 for io_uring.
    pub epoll_waits: u64,
    pub epoll_events: u64,
    /// The server's own CPU time (user + sys) over the point, ns.
    pub cpu_ns: u64,
    /// Times the (local) loader slept per request answered: each sleep was ended by one of the
    /// server's sends, which paid for the wakeup. None where not counted (remote loaders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader_sleeps_per_req: Option<f64>,
}

impl Observed {
    /// Measured server CPU per request, ns; None without requests.
    pub fn measured_ns(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.cpu_ns as f64 / self.requests as f64)
    }
}

/// Which of the two forms of server an engine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Epoll,
    Uring,
}

impl Engine {
    /// "epoll" is epoll; "uring" and "uring-basic" (any "uring…") are io_uring.
    pub fn of(name: &str) -> Option<Engine> {
        if name == "epoll" {
            Some(Engine::Epoll)
        } else if name.starts_with("uring") {
            Some(Engine::Uring)
        } else {
            None
        }
    }
}

/// One priced term of a prediction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Term {
    /// Short name used in verdicts and params ("w_send", "syscalls x s").
    pub name: String,
    /// ns per request.
    pub ns: f64,
}

/// A prediction as a sum of terms.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Breakdown {
    pub terms: Vec<Term>,
}

impl Breakdown {
    fn push(&mut self, name: impl Into<String>, ns: f64) {
        self.terms.push(Term {
            name: name.into(),
            ns,
        });
    }

    pub fn total(&self) -> f64 {
        self.terms.iter().map(|t| t.ns).sum()
    }

    /// "2 x s 190 + w_recv 450 + w_send 1100 = 1740 ns".
    pub fn show(&self) -> String {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| format!("{} {:.0}", t.name, t.ns))
            .collect();
        format!("{} = {:.0} ns", parts.join(" + "), self.total())
    }

    /// The largest term (the one whose error moves the total most).
    fn largest(&self) -> Option<&Term> {
        self.terms.iter().max_by(|a, b| a.ns.total_cmp(&b.ns))
    }
}

/// Both forms' predictions of server CPU per request for one sweep point.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// The article's form at the achieved n (requests per enter for io_uring).
    pub article: Breakdown,
    /// The refined form from the point's counts.
    pub refined: Breakdown,
    /// The achieved batch: completions per enter (io_uring) or events per epoll_wait (epoll).
    pub batch: f64,
    /// Observed.cpu_ns / requests.
    pub measured: Option<f64>,
}

/// When io_uring becomes cheaper than epoll, in requests per turn of the loop.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Crossover {
    /// The article's form: smallest n with (t + s) / n < s + w.
    pub article: Option<u32>,
    /// The refined form (see the module doc), searched up to `searched_to`.
    pub refined: Option<u32>,
    pub searched_to: u32,
}

/// Median of a term.
fn med(s: &Summary) -> f64 {
    s.median
}
/// The article's epoll cost: s + w.
pub fn article_epoll(s: f64, w: f64) -> f64 {
    s + w
}

/// The article's io_uring cost at batch n: (t + s) / n.
pub fn article_uring(t: f64, s: f64, n: f64) -> f64 {
    (t + s) / n.max(1e-9)
}

/// The smallest whole n with (t + s) / n < s + w; None when s + w is not positive.
pub fn article_crossover(t: f64, s: f64, w: f64) -> Option<u32> {
    let epoll = article_epoll(s, w);
    if epoll <= 0.0 || !(t + s).is_finite() {
        return None;
    }
    let n = ((t + s) / epoll).floor().max(0.0) + 1.0;
    (n <= u32::MAX as f64).then_some(n as u32)
}

/// Per-request ratio of a count, 0 without requests.
fn per_req(count: u64, requests: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        count as f64 / requests as f64
    }
}

/// Predict server CPU per request for one sweep point, in both forms, with the breakdown.
/// Err says why not (unknown engine, io_uring terms missing, no requests).
pub fn predict(terms: &CostTerms, obs: &Observed) -> Result<Prediction, String> {
    let engine = Engine::of(&obs.engine)
        .ok_or_else(|| format!("unknown engine '{}': expected epoll or uring", obs.engine))?;
    if obs.requests == 0 {
        return Err(format!(
            "{} {} conns: no requests served",
            obs.engine, obs.conns
        ));
    }
    let s = terms.s();
    let mut article = Breakdown::default();
    let mut refined = Breakdown::default();
    let batch;
    match engine {
        Engine::Epoll => {
            article.push("s", s);
            article.push("w", terms.w());
            refined.push("syscalls x s", per_req(obs.syscalls, obs.requests) * s);
            refined.push("w_recv", med(&terms.w_recv_ns));
            refined.push("w_send", med(&terms.w_send_ns));
            batch = if obs.epoll_waits > 0 {
                obs.epoll_events as f64 / obs.epoll_waits as f64
            } else {
                0.0
            };
            if obs.epoll_waits > 0 {
                if let Some(e) = terms.epoll_wait_work(batch) {
                    refined.push(
                        "epoll_wait work",
                        per_req(obs.epoll_waits, obs.requests) * e,
                    );
                }
            }
        }
        Engine::Uring => {
            let why = || {
                format!(
                    "no io_uring terms to price {}: {}",
                    obs.engine,
                    terms
                        .uring_unsupported
                        .as_deref()
                        .unwrap_or("io_uring send/recv were not measured")
                )
            };
            let t = terms.article_t().ok_or_else(why)?;
            // A server that counts only syscalls: those are its enters.
            let enters = if obs.enters > 0 {
                obs.enters
            } else {
                obs.syscalls
            };
            // Any syscall it counts beyond its enters pays the switch too.
            let switches = obs.enters.max(obs.syscalls);
            let req_per_enter = if enters > 0 {
                obs.requests as f64 / enters as f64
            } else {
                1.0
            };
            article.push("t/n", t / req_per_enter);
            article.push("s/n", s / req_per_enter);
            batch = if enters > 0 {
                obs.completions as f64 / enters as f64
            } else {
                1.0
            };
            let (p_send, p_recv) = terms.uring_ops_at(batch.max(1.0)).ok_or_else(why)?;
            refined.push("enters x s", per_req(switches, obs.requests) * s);
            refined.push("uring recv op", p_recv);
            refined.push("uring send op", p_send);
            // Completions beyond one recv and one send (a poll's wakeup, a recv that found
            // nothing, a message taken in two recvs) each pay io_uring's own share of an op:
            // its recv op minus a plain recv's socket work (the bytes are priced apart).
            let extra = per_req(obs.completions, obs.requests) - 2.0;
            let overhead = (p_recv - med(&terms.w_recv_ns)).max(0.0);
            if extra > 0.0 && overhead > 0.0 {
                refined.push("extra completions x op overhead", extra * overhead);
            }
        }
    }
    if let Some(b) = terms.bytes_beyond_16(obs.size) {
        refined.push("bytes x per-byte", b);
    }
    // Each sleep of the loader ended with one of the server's sends waking it, which costs
    // the server a wakeup on top of the send (measured beside the other terms).
    if let (Some(k), Some(w)) = (obs.loader_sleeps_per_req, &terms.wake_ns) {
        if k > 0.0 {
            refined.push("peer wakes x wake", k * med(w));
        }
    }
    Ok(Prediction {
        article,
        refined,
        batch,
        measured: obs.measured_ns(),
    })
}

/// The verdict on one point: holds within 25%, or names the term that disagrees. `wake_ns`
/// (what waking a sleeping peer adds to a send) sizes a gap no term explains.
pub fn verdict(
    label: &str,
    b: &Breakdown,
    measured: f64,
    wake_ns: Option<f64>,
    slept: Option<f64>,
) -> String {
    let predicted = b.total();
    if measured <= 0.0 {
        return format!("{label}: nothing measured to check {predicted:.0} ns against");
    }
    let err = (predicted - measured) / measured;
    let head = format!(
        "{label}: predicted {predicted:.0} ns, measured {measured:.0} ns ({:+.0}%)",
        err * 100.0
    );
    if err.abs() <= 0.25 {
        return format!("{head}: holds");
    }
    let Some(big) = b.largest() else {
        return format!("{head}: the model has no terms");
    };
    let gap = measured - predicted;
    if gap > 0.0 {
        let wakes = match (wake_ns, slept) {
            // The loader's sleeps were counted and priced: wakes are not the gap.
            (_, Some(k)) => format!(
                "; not the peer's wakeups: the loader slept {k:.3} times per request, and those are priced"
            ),
            (Some(w), None) if w > 0.0 => format!(
                "; that is {:.1} wakes of a sleeping peer at the measured {w:.0} ns each",
                gap / w
            ),
            _ => String::new(),
        };
        let uncounted = if slept.is_some() {
            "user-space loop, softirq, notifying a peer that is awake"
        } else {
            "user-space loop, waking the peer, softirq"
        };
        format!(
            "{head}: disagrees; {} would have to be {:.1}x its {:.0} ns, or {:.0} ns per request \
             is work no term counts ({uncounted}){wakes}",
            big.name,
            (big.ns + gap) / big.ns.max(1e-9),
            big.ns,
            gap
        )
    } else if big.ns + gap > 0.0 {
        format!(
            "{head}: disagrees; {} would have to be {:.0}% smaller than its {:.0} ns",
            big.name,
            -gap / big.ns * 100.0,
            big.ns
        )
    } else {
        format!(
            "{head}: disagrees; the terms overstate this engine by more than its largest term \
             ({} {:.0} ns): the microbenchmark costs do not hold inside this server",
            big.name, big.ns
        )
    }
}

/// A point's case: engine and conns.
fn case_of(obs: &Observed) -> Case {
    costlab_core::case! {"engine" => obs.engine.as_str(), "conns" => obs.conns}
}

/// The terms as model params.
pub fn params(terms: &CostTerms) -> Map<String, Value> {
    let mut p = Map::new();
    let r = |x: f64| (x * 10.0).round() / 10.0;
    p.insert("s_ns".into(), json!(r(terms.s())));
    p.insert("w_send_ns".into(), json!(r(med(&terms.w_send_ns))));
    p.insert("w_recv_ns".into(), json!(r(med(&terms.w_recv_ns))));
    p.insert("w_ns".into(), json!(r(terms.w())));
    match terms.article_t() {
        Some(t) => p.insert("t_ns".into(), json!(r(t))),
        None => p.insert(
            "uring_unsupported".into(),
            json!(terms
                .uring_unsupported
                .clone()
                .unwrap_or_else(|| "not measured".into())),
        ),
    };
    if let Some(w) = &terms.wake_ns {
        p.insert("wake_ns".into(), json!(r(w.median)));
    }
    for (key, fit) in [("send", &terms.send_bytes), ("recv", &terms.recv_bytes)] {
        if let Some(f) = fit {
            p.insert(format!("{key}_fixed_ns"), json!(r(f.fixed_ns)));
            p.insert(
                format!("{key}_per_byte_ns"),
                json!((f.per_byte_ns * 1e4).round() / 1e4),
            );
        }
    }
    let c = crossover(terms);
    p.insert("crossover_article".into(), json!(c.article));
    p.insert("crossover_refined".into(), json!(c.refined));
    p
}

/// Build a model of one form from the points; `pick` chooses the form's breakdown.
fn build(
    name: &str,
    terms: &CostTerms,
    points: &[(Case, Observed)],
    pick: fn(&Prediction) -> &Breakdown,
) -> Model {
    let mut model = Model {
        lab: "echo".into(),
        name: name.into(),
        params: params(terms),
        points: Vec::new(),
        verdict: Vec::new(),
    };
    for (case, obs) in points {
        let label = point_label(case, obs);
        match predict(terms, obs) {
            Ok(pred) => {
                let b = pick(&pred);
                let measured = pred.measured.unwrap_or(0.0);
                model.points.push(ModelPoint {
                    case: case.clone(),
                    predicted: b.total(),
                    measured,
                    unit: "ns".into(),
                });
                let wake = terms.wake_ns.map(|w| w.median);
                model.verdict.push(verdict(
                    &label,
                    b,
                    measured,
                    wake,
                    obs.loader_sleeps_per_req,
                ));
            }
            Err(why) => model.verdict.push(format!("{label}: not predicted: {why}")),
        }
    }
    model.verdict.push(crossover_line(&crossover(terms)));
    model.verdict.extend(size_crossovers(terms, points));
    model
}

/// State the mitigations the terms were measured under, as a parameter and a reading line: s
/// and w are the kernel's entry and exit work, which the mitigations set, so the article found
/// io_uring winning under one state and not under another. The crossover holds for this state.
pub fn measured_under(model: &mut Model, mitigations: &str) {
    model
        .params
        .insert("mitigations".into(), Value::String(mitigations.to_string()));
    model.verdict.push(format!(
        "measured under {mitigations}: s and w carry the kernel's entry and exit work, which the \
         mitigations set, so the crossover above holds for this state; a run under another \
         (`costlab compare` of the two) shows what it moves"
    ));
}

/// "uring 128 conns 16384 B" (with the features where a point has them and they are not all).
fn point_label(case: &Case, obs: &Observed) -> String {
    let feats = case
        .get("features")
        .and_then(|v| v.as_str())
        .filter(|f| *f != "all")
        .map_or(String::new(), |f| format!(" {f}"));
    let size = if obs.size > 0 {
        format!(" {} B", obs.size)
    } else {
        String::new()
    };
    format!("{}{feats} {} conns{size}", obs.engine, obs.conns)
}

/// Where, along message size, one engine overtakes the other: from the differences
/// uring - epoll at each size (ns per request), ascending in size. A sign change between two
/// sizes is placed by linear interpolation in log2(size).
pub fn size_crossing(diffs: &[(u64, f64)]) -> String {
    let human = |b: f64| costlab_core::measure::sizes::human_size(b.round().max(1.0) as u64);
    let (Some(first), Some(last)) = (diffs.first(), diffs.last()) else {
        return "no sizes to compare".into();
    };
    let span = format!("{}–{}", human(first.0 as f64), human(last.0 as f64));
    if diffs.iter().all(|(_, d)| *d < 0.0) {
        return format!("uring is cheaper at every size run ({span})");
    }
    if diffs.iter().all(|(_, d)| *d > 0.0) {
        return format!("epoll is cheaper at every size run ({span})");
    }
    let mut parts = Vec::new();
    for w in diffs.windows(2) {
        let ((b0, d0), (b1, d1)) = (w[0], w[1]);
        if (d0 < 0.0) == (d1 < 0.0) || d0 == d1 {
            continue;
        }
        let (x0, x1) = ((b0 as f64).log2(), (b1 as f64).log2());
        let x = x0 + (0.0 - d0) / (d1 - d0) * (x1 - x0);
        let who = if d1 < 0.0 {
            "uring overtakes epoll"
        } else {
            "epoll overtakes uring"
        };
        parts.push(format!("{who} at about {}", human(x.exp2())));
    }
    if parts.is_empty() {
        format!("the engines are level somewhere in {span}")
    } else {
        parts.join(", then ")
    }
}

/// One line per (client, conns) with more than one size: where the model, and the
/// measurement, put the size at which uring and epoll change places.
pub fn size_crossovers(terms: &CostTerms, points: &[(Case, Observed)]) -> Vec<String> {
    use std::collections::BTreeMap;
    // (client, conns) -> size -> (uring (predicted, measured), epoll (predicted, measured)).
    type Both = (f64, f64);
    type Pair = (Option<Both>, Option<Both>);
    let mut groups: BTreeMap<(String, u32), BTreeMap<u64, Pair>> = BTreeMap::new();
    for (case, obs) in points {
        if obs.size == 0 || (obs.engine != "uring" && obs.engine != "epoll") {
            continue;
        }
        let Ok(p) = predict(terms, obs) else { continue };
        let Some(m) = p.measured else { continue };
        let client = case
            .get("client")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let slot = groups
            .entry((client, obs.conns))
            .or_default()
            .entry(obs.size)
            .or_default();
        let v = (p.refined.total(), m);
        // The first uring point at a size is the plan's own features (ablations follow).
        if obs.engine == "uring" {
            slot.0.get_or_insert(v);
        } else {
            slot.1.get_or_insert(v);
        }
    }
    let mut out = Vec::new();
    for ((client, conns), by_size) in groups {
        let both: Vec<(u64, Both, Both)> = by_size
            .into_iter()
            .filter_map(|(b, (u, e))| Some((b, u?, e?)))
            .collect();
        if both.len() < 2 {
            continue;
        }
        let pred: Vec<(u64, f64)> = both.iter().map(|(b, u, e)| (*b, u.0 - e.0)).collect();
        let meas: Vec<(u64, f64)> = both.iter().map(|(b, u, e)| (*b, u.1 - e.1)).collect();
        let client = if client.is_empty() {
            String::new()
        } else {
            format!(" {client} client")
        };
        out.push(format!(
            "by size,{client} {conns} conns: the model says {}; measured: {}",
            size_crossing(&pred),
            size_crossing(&meas)
        ));
    }
    out
}

/// The refined model ("per-request server CPU"): predicted beside measured for every point,
/// with a verdict line per point. The case of each point is {engine, conns}.
pub fn build_model(terms: &CostTerms, points: &[Observed]) -> Model {
    let pts: Vec<(Case, Observed)> = points.iter().map(|o| (case_of(o), o.clone())).collect();
    build_model_with_cases(terms, &pts)
}

/// As `build_model`, with the caller's case for each point (to add client, size, ...).
pub fn build_model_with_cases(terms: &CostTerms, points: &[(Case, Observed)]) -> Model {
    build("per-request server CPU", terms, points, |p| &p.refined)
}

/// The article's form over the same points, to show where it misses.
pub fn build_article_model(terms: &CostTerms, points: &[Observed]) -> Model {
    let pts: Vec<(Case, Observed)> = points.iter().map(|o| (case_of(o), o.clone())).collect();
    build(
        "per-request server CPU (article's form)",
        terms,
        &pts,
        |p| &p.article,
    )
}

/// The batch from which io_uring is cheaper than epoll, in both forms (see the module doc).
pub fn crossover(terms: &CostTerms) -> Crossover {
    let s = terms.s();
    let article = terms
        .article_t()
        .and_then(|t| article_crossover(t, s, terms.w()));
    let searched_to = (terms.max_uring_batch() / 2).max(1);
    let epoll_at = |k: f64| 2.0 * s + terms.w() + (s + terms.epoll_wait_work(k).unwrap_or(0.0)) / k;
    let refined = (1..=searched_to).find(|&k| {
        let k = f64::from(k);
        terms
            .uring_ops_at(2.0 * k)
            .is_some_and(|(send, recv)| s / k + send + recv < epoll_at(k))
    });
    Crossover {
        article,
        refined: if terms.max_uring_batch() == 0 {
            None
        } else {
            refined
        },
        searched_to,
    }
}

/// One line on the crossover.
pub fn crossover_line(c: &Crossover) -> String {
    let article = match c.article {
        Some(n) => {
            format!("article's form: io_uring overtakes epoll from n = {n} requests per enter")
        }
        None => "article's form: no crossover (io_uring terms missing)".to_string(),
    };
    let refined = match c.refined {
        Some(k) => format!(
            "refined: from {k} requests per turn ({} completions per enter)",
            2 * k
        ),
        None => format!(
            "refined: io_uring does not overtake epoll up to {} requests per turn here",
            c.searched_to
        ),
    };
    format!("crossover: {article}; {refined}")
}

/// A terminal rendering: per point, measured beside both forms, the refined breakdown, the
/// verdicts and the crossover.
pub fn render(terms: &CostTerms, points: &[Observed]) -> String {
    let pct = |p: f64, m: Option<f64>| match m {
        Some(m) if m > 0.0 => format!("{p:.0} ({:+.0}%)", (p - m) / m * 100.0),
        _ => format!("{p:.0}"),
    };
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for obs in points {
        match predict(terms, obs) {
            Ok(p) => {
                rows.push(vec![
                    obs.engine.clone(),
                    obs.conns.to_string(),
                    format!("{:.1}", p.batch),
                    p.measured.map_or("—".into(), |m| format!("{m:.0}")),
                    pct(p.article.total(), p.measured),
                    pct(p.refined.total(), p.measured),
                ]);
                lines.push(format!(
                    "  {} {}: {}",
                    obs.engine,
                    obs.conns,
                    p.refined.show()
                ));
            }
            Err(why) => lines.push(format!("  {} {}: {why}", obs.engine, obs.conns)),
        }
    }
    let mut out = String::from("server CPU per request: measured beside the model\n");
    out += &costlab_history::report::table::render(
        &[
            "engine",
            "conns",
            "batch n",
            "measured ns",
            "article ns",
            "refined ns",
        ],
        &rows,
    );
    out += "\nrefined terms (ns per request):\n";
    for l in lines {
        out += &l;
        out.push('\n');
    }
    for v in build_model(terms, points).verdict {
        out += &v;
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::measure::syscost::{interpolate, PerByte};

    fn fixed(x: f64) -> Summary {
        Summary {
            median: x,
            min: x,
            max: x,
            mad: 0.0,
            n: 1,
        }
    }

    /// Terms with per-op io_uring costs of a fixed per-op work plus an enter cost shared by n.
    fn terms(s: f64, w_send: f64, w_recv: f64, op: f64, enter: f64) -> CostTerms {
        let batches = [1u32, 2, 4, 8, 16, 32, 64, 128, 256];
        let at = |n: u32| fixed(op + enter / f64::from(n));
        CostTerms {
            s_ns: fixed(s),
            w_send_ns: fixed(w_send),
            w_recv_ns: fixed(w_recv),
            t_nop_ns: batches.iter().map(|&n| (n, at(n))).collect(),
            uring_sendrecv_ns: batches.iter().map(|&n| (n, at(n))).collect(),
            uring_send_ns: batches.iter().map(|&n| (n, at(n))).collect(),
            uring_recv_ns: batches.iter().map(|&n| (n, at(n))).collect(),
            epoll_wait_ns: vec![(1, fixed(s + 100.0)), (32, fixed(s + 100.0 + 31.0 * 20.0))],
            wake_ns: Some(fixed(3000.0)),
            uring_unsupported: None,
            send_bytes: None,
            recv_bytes: None,
        }
    }

    #[test]
    fn the_articles_numbers_cross_at_two() {
        // s = 700, w = 1500, t = 1900: (1900 + 700) / n < 2200 first at n = 2.
        assert_eq!(article_crossover(1900.0, 700.0, 1500.0), Some(2));
        assert_eq!(article_epoll(700.0, 1500.0), 2200.0);
        assert!((article_uring(1900.0, 700.0, 2.0) - 1300.0).abs() < 1e-9);
        // Equality is not overtaking: (t + s) / n == s + w at n = 2 needs n = 3.
        assert_eq!(article_crossover(3700.0, 700.0, 1500.0), Some(3));
        assert_eq!(article_crossover(100.0, 700.0, 1500.0), Some(1));
        assert_eq!(article_crossover(1.0, 0.0, 0.0), None);
    }

    #[test]
    fn article_t_is_the_batch_one_work_beyond_two_switches() {
        // U(1) = 1000 + 800 = 1800 per op; t = 2 x 1800 - 2 x 700 = 2200.
        let t = terms(700.0, 800.0, 700.0, 1000.0, 800.0);
        assert!((t.article_t().unwrap() - 2200.0).abs() < 1e-9);
        assert!((t.w() - 1500.0).abs() < 1e-9);
        let c = crossover(&t);
        // (2200 + 700) / n < 2200 first at n = 2.
        assert_eq!(c.article, Some(2));
    }

    #[test]
    fn interpolation_is_exact_for_op_plus_enter_over_n() {
        let pts: Vec<(u32, f64)> = [1u32, 4, 16]
            .iter()
            .map(|&n| (n, 50.0 + 400.0 / f64::from(n)))
            .collect();
        for n in [1.0, 2.0, 3.0, 7.5, 16.0] {
            let y = interpolate(&pts, n).unwrap();
            assert!((y - (50.0 + 400.0 / n)).abs() < 1e-9, "{n}: {y}");
        }
        // Held at the ends.
        assert_eq!(interpolate(&pts, 0.5), Some(450.0));
        assert_eq!(interpolate(&pts, 64.0), Some(75.0));
        assert_eq!(interpolate(&[], 2.0), None);
    }

    /// 1000 requests: 1000 recv + 1000 send + 500 EAGAIN recv + 100 epoll_wait = 2600
    /// syscalls; 100 waits returned 1000 events (k = 10).
    fn epoll_1000() -> Observed {
        Observed {
            engine: "epoll".into(),
            conns: 16,
            requests: 1000,
            syscalls: 2600,
            epoll_waits: 100,
            epoll_events: 1000,
            cpu_ns: 4_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn refined_epoll_prices_every_syscall_and_shares_epoll_wait() {
        let t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        let obs = epoll_1000();
        let p = predict(&t, &obs).unwrap();
        assert!((p.batch - 10.0).abs() < 1e-9);
        assert!((p.article.total() - 1700.0).abs() < 1e-9);
        // e(10) = 100 + 9 x 20 = 280; shared by 10 events -> 28 per request.
        // 2.6 x 100 + 400 + 1200 + 28 = 1888.
        assert!((p.refined.total() - 1888.0).abs() < 1e-9, "{:?}", p.refined);
        assert_eq!(p.measured, Some(4000.0));
    }

    #[test]
    fn refined_uring_prices_enters_and_ops_at_the_achieved_batch() {
        let (s, op, enter) = (100.0, 300.0, 500.0);
        let t = terms(s, 1200.0, 400.0, op, enter);
        // 1000 requests, 125 enters, 2000 completions: n = 16, 8 requests per enter.
        let obs = Observed {
            engine: "uring".into(),
            conns: 128,
            requests: 1000,
            syscalls: 125,
            enters: 125,
            completions: 2000,
            cpu_ns: 1_000_000,
            ..Default::default()
        };
        let p = predict(&t, &obs).unwrap();
        assert!((p.batch - 16.0).abs() < 1e-9);
        // p(16) = 300 + (500 - 100) / 16 = 325 per op; 0.125 x 100 + 2 x 325 = 662.5.
        assert!((p.refined.total() - 662.5).abs() < 1e-9, "{:?}", p.refined);
        // Article: t = 2 x 800 - 200 = 1400; (1400 + 100) / 8 = 187.5.
        assert!((p.article.total() - 187.5).abs() < 1e-9);
        // The hot path: a poll and a recv that found nothing beside each recv and send, 4
        // completions a request (250 enters keep n at 16). Each extra completion pays the op's
        // io_uring share, p(16) - w_recv: 325 - 400 is below 0, so nothing here; with w_recv
        // 200 it is 125. 0.25 x 100 + 2 x 325 = 675, plus 2 x 125.
        let hot = Observed {
            completions: 4000,
            enters: 250,
            syscalls: 250,
            ..obs.clone()
        };
        let p = predict(&t, &hot).unwrap();
        assert!((p.refined.total() - 675.0).abs() < 1e-9, "{:?}", p.refined);
        let t2 = terms(s, 1200.0, 200.0, op, enter);
        let p2 = predict(&t2, &hot).unwrap();
        assert!(
            (p2.refined.total() - 925.0).abs() < 1e-9,
            "{:?}",
            p2.refined
        );
    }

    #[test]
    fn verdicts_hold_within_a_quarter_and_name_a_term_beyond() {
        let mut b = Breakdown::default();
        b.push("syscalls x s", 200.0);
        b.push("w_send", 1000.0);
        assert!(verdict("epoll 1 conns", &b, 1100.0, None, None).ends_with("holds"));
        let under = verdict("epoll 1 conns", &b, 2000.0, Some(400.0), None);
        assert!(under.contains("w_send would have to be 1.8x"), "{under}");
        assert!(under.contains("800 ns per request"), "{under}");
        assert!(
            under.contains("2.0 wakes of a sleeping peer at the measured 400 ns"),
            "{under}"
        );
        let over = verdict("epoll 1 conns", &b, 600.0, None, None);
        assert!(
            over.contains("w_send would have to be 60% smaller"),
            "{over}"
        );
        let way_over = verdict("epoll 1 conns", &b, 100.0, None, None);
        assert!(way_over.contains("overstate"), "{way_over}");
        // With the loader's sleeps counted (and priced), the gap is not put on wakeups.
        let counted = verdict("epoll 1 conns", &b, 2000.0, Some(400.0), Some(0.001));
        assert!(
            counted.contains("not the peer's wakeups: the loader slept 0.001 times per request"),
            "{counted}"
        );
        assert!(!counted.contains("wakes of a sleeping peer"), "{counted}");
    }

    #[test]
    fn the_loaders_sleeps_are_priced_as_wakes_the_server_pays() {
        let t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        let mut obs = epoll_1000();
        let without = predict(&t, &obs).unwrap().refined.total();
        // Half the requests ended a sleep of the loader: 0.5 x the 3000 ns wake term.
        obs.loader_sleeps_per_req = Some(0.5);
        let with = predict(&t, &obs).unwrap();
        assert!((with.refined.total() - without - 1500.0).abs() < 1e-9);
        assert!(
            with.refined.show().contains("peer wakes x wake"),
            "{}",
            with.refined.show()
        );
        // Not counted (remote loaders) or zero: no term.
        obs.loader_sleeps_per_req = Some(0.0);
        assert!((predict(&t, &obs).unwrap().refined.total() - without).abs() < 1e-9);
    }

    #[test]
    fn the_reading_states_the_mitigations_it_was_measured_under() {
        let mut m = build_model(&terms(100.0, 1200.0, 400.0, 300.0, 500.0), &[]);
        measured_under(&mut m, "mitigations=off; vulnerable: mds");
        assert_eq!(m.params["mitigations"], "mitigations=off; vulnerable: mds");
        let last = m.verdict.last().unwrap();
        assert!(
            last.starts_with("measured under mitigations=off; vulnerable: mds: s and w"),
            "{last}"
        );
    }

    #[test]
    fn model_has_a_point_and_a_verdict_per_observation() {
        let t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        let obs = vec![
            Observed {
                engine: "epoll".into(),
                conns: 1,
                requests: 100,
                syscalls: 300,
                epoll_waits: 100,
                epoll_events: 100,
                cpu_ns: 200_000,
                ..Default::default()
            },
            Observed {
                engine: "uring-basic".into(),
                conns: 1,
                requests: 100,
                enters: 100,
                completions: 200,
                cpu_ns: 150_000,
                ..Default::default()
            },
            Observed {
                engine: "kqueue".into(),
                requests: 1,
                ..Default::default()
            },
        ];
        let m = build_model(&t, &obs);
        assert_eq!(m.points.len(), 2);
        assert_eq!(m.points[0].case["engine"], "epoll");
        assert_eq!(m.points[0].measured, 2000.0);
        assert_eq!(m.verdict.len(), 4);
        assert!(m.verdict[2].contains("unknown engine"));
        assert!(m.verdict[3].starts_with("crossover"));
        assert!(m.params.contains_key("s_ns"));
        let a = build_article_model(&t, &obs);
        assert_eq!(a.points[0].predicted, 1700.0);
        let text = render(&t, &obs);
        assert!(text.contains("refined") && text.contains("uring-basic"));
    }

    #[test]
    fn the_byte_term_prices_what_the_16_byte_terms_leave_out() {
        let mut t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        let line = |fixed: f64, per: f64| {
            PerByte::fit(&[(16.0, fixed + 16.0 * per), (65536.0, fixed + 65536.0 * per)])
        };
        t.send_bytes = line(1300.0, 0.1);
        t.recv_bytes = line(500.0, 0.15);
        let obs = |engine: &str, size: u64| Observed {
            engine: engine.into(),
            conns: 16,
            size,
            requests: 1000,
            syscalls: 2600,
            enters: if engine == "uring" { 125 } else { 0 },
            completions: if engine == "uring" { 2000 } else { 0 },
            epoll_waits: if engine == "epoll" { 100 } else { 0 },
            epoll_events: if engine == "epoll" { 1000 } else { 0 },
            cpu_ns: 4_000_000,
            loader_sleeps_per_req: None,
        };
        // 16 B: no byte term; 16 KiB: (16384 - 16) x 0.25 = 4092 ns more, for either engine.
        for engine in ["epoll", "uring"] {
            let small = predict(&t, &obs(engine, 16)).unwrap().refined.total();
            let big = predict(&t, &obs(engine, 16384)).unwrap().refined;
            assert!(
                (big.total() - small - 4092.0).abs() < 1e-6,
                "{engine}: {big:?}"
            );
            assert!(
                big.show().contains("bytes x per-byte 4092"),
                "{}",
                big.show()
            );
        }
        // Without the fits there is no byte term (and no guess).
        let plain = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        assert_eq!(plain.bytes_beyond_16(16384), None);
        let p = params(&t);
        assert_eq!(p["send_per_byte_ns"], 0.1);
        assert_eq!(p["recv_fixed_ns"], 500.0);
    }

    #[test]
    fn size_crossings_are_placed_in_log_size() {
        // uring dearer at 1 KiB by 100, cheaper at 4 KiB by 100: level at 2 KiB.
        assert_eq!(
            size_crossing(&[(1024, 100.0), (4096, -100.0)]),
            "uring overtakes epoll at about 2 KiB"
        );
        assert_eq!(
            size_crossing(&[(16, -5.0), (65536, -1.0)]),
            "uring is cheaper at every size run (16 B–64 KiB)"
        );
        assert!(size_crossing(&[(16, 1.0), (512, 2.0)]).starts_with("epoll is cheaper"));
        assert_eq!(
            size_crossing(&[(16, -1.0), (256, 1.0)]),
            "epoll overtakes uring at about 64 B"
        );
        // A model over two sizes gets one line per conns, model beside measured.
        let t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        let mk = |engine: &str, size: u64, cpu_ns: u64| {
            let o = Observed {
                engine: engine.into(),
                conns: 16,
                size,
                requests: 1000,
                syscalls: 2000,
                enters: if engine == "uring" { 1000 } else { 0 },
                completions: if engine == "uring" { 2000 } else { 0 },
                epoll_waits: if engine == "epoll" { 1000 } else { 0 },
                epoll_events: if engine == "epoll" { 1000 } else { 0 },
                cpu_ns,
                loader_sleeps_per_req: None,
            };
            (
                costlab_core::case! {"engine" => engine, "conns" => 16u32, "size" => size},
                o,
            )
        };
        let pts = vec![
            mk("epoll", 16, 2_000_000),
            mk("uring", 16, 3_000_000),
            mk("epoll", 4096, 5_000_000),
            mk("uring", 4096, 4_000_000),
        ];
        let lines = size_crossovers(&t, &pts);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("by size, 16 conns: the model says"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("measured: uring overtakes epoll at about 256 B"),
            "{}",
            lines[0]
        );
        let m = build_model_with_cases(&t, &pts);
        assert!(m.verdict.iter().any(|v| v.starts_with("by size")));
        assert!(
            m.verdict[0].starts_with("epoll 16 conns 16 B"),
            "{}",
            m.verdict[0]
        );
    }

    #[test]
    fn refined_crossover_from_terms() {
        // Cheap io_uring ops: epoll(k) = 200 + 1600 + (100 + e(k)) / k is always above
        // 100/k + 2 x (300 + 400/(2k)) = 600 + 500/k, so io_uring wins from k = 1.
        let t = terms(100.0, 1200.0, 400.0, 300.0, 500.0);
        assert_eq!(crossover(&t).refined, Some(1));
        // Dear io_uring ops: 2 x 1000 per request never beats epoll's 1800 + shared wait.
        let dear = terms(100.0, 1200.0, 400.0, 1000.0, 500.0);
        let c = crossover(&dear);
        assert_eq!(c.refined, None);
        assert_eq!(c.searched_to, 128);
        assert!(crossover_line(&c).contains("does not overtake"));
        // No io_uring figures: no crossover, and predictions say why.
        let mut none = t.clone();
        none.uring_send_ns.clear();
        none.uring_recv_ns.clear();
        none.uring_sendrecv_ns.clear();
        none.uring_unsupported = Some("io_uring_setup: EPERM".into());
        assert_eq!(crossover(&none).article, None);
        // Without batch 1 there is no article's t (it is not guessed from other batches).
        let mut no_one = t.clone();
        no_one.uring_send_ns.retain(|(n, _)| *n != 1);
        assert_eq!(no_one.article_t(), None);
        assert_eq!(crossover(&none).refined, None);
        let obs = Observed {
            engine: "uring".into(),
            requests: 1,
            ..Default::default()
        };
        assert!(predict(&none, &obs).unwrap_err().contains("EPERM"));
    }
}
