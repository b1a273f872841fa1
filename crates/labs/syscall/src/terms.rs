//! The "syscall cost terms" model: the derived terms s, w_send, w_recv, t(n) as params, and
//! the io_uring per-op costs checked against a per-op cost plus an enter cost shared by the
//! batch, u(n) = a + E / n, fitted by least squares in 1/n.

use serde_json::{json, Map, Value};

use costlab_core::measure::quality;
use costlab_core::measure::syscost::{CostTerms, Measurements, PerByte};
use costlab_history::report::{Model, ModelPoint, ResultRow};

/// Least-squares fit of y = a + b / n over (n, y); None with fewer than two distinct n.
pub fn fit_amortized(points: &[(u32, f64)]) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(n, y)| *n > 0 && y.is_finite())
        .map(|(n, y)| (1.0 / f64::from(*n), *y))
        .collect();
    costlab_core::measure::stats::fit_line(&pts)
}

fn r1(x: f64) -> Value {
    json!((x * 10.0).round() / 10.0)
}

/// {"1": 450.2, "2": ...} of a batched term's medians.
fn by_batch(v: &[(u32, costlab_core::measure::Summary)]) -> Value {
    let m: Map<String, Value> = v
        .iter()
        .map(|(n, s)| (n.to_string(), r1(s.median)))
        .collect();
    Value::Object(m)
}

/// The model: params (the terms), points (io_uring per-op cost by batch, fitted beside
/// measured), verdicts (the fits in words, E against s).
///
/// `rows` are the judged figures the terms come from: a term quoted from a figure (or derived
/// from figures) that is not ok says so where it is quoted, and the model's first verdict line
/// names the inputs that are not ok (`measure::quality`).
pub fn model(terms: &CostTerms, m: &Measurements, mitigations: &str, rows: &[ResultRow]) -> Model {
    let inputs = Inputs::new(rows);
    let mut p = base_params(terms, m, mitigations);
    let mut points = Vec::new();
    let mut verdict = term_verdicts(terms, &inputs, mitigations, &mut p);
    for (call, v) in [
        ("uring-nop", &terms.t_nop_ns),
        ("uring-send", &terms.uring_send_ns),
        ("uring-recv", &terms.uring_recv_ns),
    ] {
        let fit = Fit {
            p: &mut p,
            points: &mut points,
            verdict: &mut verdict,
        };
        amortized_fit(call, v, terms.s(), &inputs, fit);
    }
    for (call, per_byte) in [
        ("tcp-send", &terms.send_bytes),
        ("tcp-recv", &terms.recv_bytes),
    ] {
        let Some(f) = per_byte else { continue };
        let fit = Fit {
            p: &mut p,
            points: &mut points,
            verdict: &mut verdict,
        };
        byte_fit(call, f, rows, fit);
    }
    let mut model = Model {
        lab: "syscall".into(),
        name: "syscall cost terms".into(),
        params: p,
        points,
        verdict,
    };
    quality::model_inherits(&mut model, &rows.iter().collect::<Vec<_>>());
    model
}

/// The judged figures the terms come from, found by call (and batch).
struct Inputs<'a> {
    rows: &'a [ResultRow],
    /// The getppid figure s itself.
    s_rows: Vec<&'a ResultRow>,
}

impl<'a> Inputs<'a> {
    fn new(rows: &'a [ResultRow]) -> Inputs<'a> {
        let mut inputs = Inputs {
            rows,
            s_rows: Vec::new(),
        };
        inputs.s_rows = inputs.of("getppid", Some(1));
        inputs
    }

    /// The unsized figures of `call`, at `batch` when given.
    fn of(&self, call: &str, batch: Option<u32>) -> Vec<&'a ResultRow> {
        self.rows
            .iter()
            .filter(|r| {
                r.key("call") == call
                    && !r.case.contains_key("size")
                    && batch.is_none_or(|b| r.key("batch") == b.to_string())
            })
            .collect()
    }

    /// `of(call, batch)` with s's figure: for a term derived beyond s.
    fn with_s(&self, call: &str, batch: Option<u32>) -> Vec<&'a ResultRow> {
        self.s_rows
            .iter()
            .copied()
            .chain(self.of(call, batch))
            .collect()
    }

    /// "s = ..." quoted with s's own verdict; `digits` after the point.
    fn s_text(&self, s: f64, digits: usize) -> String {
        let text = format!("s = {s:.digits$} ns");
        match self.s_rows.first() {
            Some(r) => quality::quote_row(text, r),
            None => text,
        }
    }
}

/// A term derived from figures: quoted with their worst verdict, naming them.
fn say(text: String, inputs: &[&ResultRow]) -> String {
    let (q, why) = quality::worst_of(inputs);
    quality::quote(text, q, &why)
}

/// Where a fit writes: the params, the model's points and its verdict lines.
struct Fit<'a> {
    p: &'a mut Map<String, Value>,
    points: &'a mut Vec<ModelPoint>,
    verdict: &'a mut Vec<String>,
}

/// The terms as params, before any fit: s, the mitigations, clock_gettime, w, t and the
/// batched io_uring and epoll terms.
fn base_params(terms: &CostTerms, m: &Measurements, mitigations: &str) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("s_ns".into(), r1(terms.s()));
    p.insert("mitigations".into(), json!(mitigations));
    if let Some(c) = m
        .get("clock_gettime", 1)
        .and_then(costlab_core::measure::Summary::of)
    {
        p.insert("clock_gettime_ns".into(), r1(c.median));
    }
    p.insert("w_send_ns".into(), r1(terms.w_send_ns.median));
    p.insert("w_recv_ns".into(), r1(terms.w_recv_ns.median));
    p.insert("w_ns".into(), r1(terms.w()));
    if let Some(t) = terms.article_t() {
        p.insert("t_ns".into(), r1(t));
    }
    p.insert("t_nop_ns".into(), by_batch(&terms.t_nop_ns));
    p.insert("uring_send_ns".into(), by_batch(&terms.uring_send_ns));
    p.insert("uring_recv_ns".into(), by_batch(&terms.uring_recv_ns));
    p.insert("epoll_wait_ns".into(), by_batch(&terms.epoll_wait_ns));
    if let Some(why) = &terms.uring_unsupported {
        p.insert("uring_unsupported".into(), json!(why));
    }
    p
}

/// The verdict lines of the derived terms: s, w, the wake-up and t; wake_ns joins the params.
fn term_verdicts(
    terms: &CostTerms,
    inputs: &Inputs,
    mitigations: &str,
    p: &mut Map<String, Value>,
) -> Vec<String> {
    // s is the getppid figure itself: quoted with its own verdict.
    let mut verdict = vec![format!(
        "{} with {mitigations}",
        inputs.s_text(terms.s(), 1)
    )];
    verdict.push(format!(
        "{}: a 16-byte loopback send and recv cost s + w each",
        say(
            format!(
                "w_send = {:.0} ns, w_recv = {:.0} ns",
                terms.w_send_ns.median, terms.w_recv_ns.median
            ),
            &[
                inputs.with_s("tcp-send", Some(1)),
                inputs.of("tcp-recv", Some(1))
            ]
            .concat()
        )
    ));
    if let Some(w) = &terms.wake_ns {
        p.insert("wake_ns".into(), r1(w.median));
        verdict.push(format!(
            "waking a peer asleep in recv adds {} to a send (tcp-send-wake - tcp-send)",
            say(
                format!("{:.0} ns", w.median),
                &[
                    inputs.of("tcp-send-wake", None),
                    inputs.of("tcp-send", Some(1))
                ]
                .concat()
            )
        ));
    }
    if let Some(t) = terms.article_t() {
        verdict.push(format!(
            "t (article's sense: a recv and a send through io_uring at batch 1, beyond s) = {}",
            say(
                format!("{t:.0} ns"),
                &[
                    inputs.with_s("uring-send", Some(1)),
                    inputs.of("uring-recv", Some(1))
                ]
                .concat()
            )
        ));
    }
    verdict
}

/// One io_uring call's per-op cost by batch against a + E / n: its params, points and verdict
/// (for uring-nop, the enter cost set against s).
fn amortized_fit(
    call: &str,
    v: &[(u32, costlab_core::measure::Summary)],
    s: f64,
    inputs: &Inputs,
    fit: Fit,
) {
    let meds: Vec<(u32, f64)> = v.iter().map(|(n, s)| (*n, s.median)).collect();
    let Some((a, e)) = fit_amortized(&meds) else {
        return;
    };
    let key = call.trim_start_matches("uring-");
    fit.p.insert(format!("{key}_per_op_ns"), r1(a));
    fit.p.insert(format!("{key}_per_enter_ns"), r1(e));
    let mut worst = 0f64;
    // A point the line misses by less than its own min–max spread is missed by noise.
    let mut beyond_spread = 0;
    for ((n, y), (_, sm)) in meds.iter().zip(v.iter()) {
        let pred = a + e / f64::from(*n);
        worst = worst.max(((pred - y) / y).abs());
        if pred < sm.min || pred > sm.max {
            beyond_spread += 1;
        }
        fit.points.push(ModelPoint {
            case: costlab_core::case! {"call" => call, "batch" => *n},
            predicted: pred,
            measured: *y,
            unit: "ns".into(),
        });
    }
    let fits = if worst <= 0.25 {
        "holds".to_string()
    } else if beyond_spread == 0 {
        "off, but every batch's measured spread covers the line: too noisy to judge".to_string()
    } else {
        format!(
            "does not hold at {beyond_spread} of {} batches: the per-op cost itself changes with the batch",
            meds.len()
        )
    };
    let fitted = inputs.of(call, None);
    fit.verdict.push(format!(
        "{call}: {}; worst batch off by {:.0}%: {fits}",
        say(
            format!("{a:.0} ns per op + {e:.0} ns per enter / n"),
            &fitted
        ),
        worst * 100.0
    ));
    if call == "uring-nop" {
        fit.verdict.push(format!(
            "an io_uring_enter costs {}, {:.1}x a null syscall's {} \
             (the switch plus io_uring's own fixed work)",
            say(format!("{e:.0} ns"), &fitted),
            e / s.max(1e-9),
            inputs.s_text(s, 0)
        ));
    }
}

/// A TCP call's cost by payload size against fixed + per-byte x B: its params, points and
/// verdict.
fn byte_fit(call: &str, f: &PerByte, rows: &[ResultRow], fit: Fit) {
    let key = call.trim_start_matches("tcp-");
    fit.p.insert(format!("{key}_fixed_ns"), r1(f.fixed_ns));
    fit.p.insert(
        format!("{key}_per_byte_ns"),
        json!((f.per_byte_ns * 1e4).round() / 1e4),
    );
    for (b, y) in &f.points {
        fit.points.push(ModelPoint {
            case: costlab_core::case! {"call" => call, "size" => *b as u64},
            predicted: f.at(*b),
            measured: *y,
            unit: "ns".into(),
        });
    }
    let worst = f.worst_miss();
    let sized: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| r.key("call") == call && r.case.contains_key("size"))
        .collect();
    fit.verdict.push(format!(
        "{call} of B bytes: {} ({:.1} GB/s of copy and stack), fitted over {} sizes; worst size off by {:.0}%{}",
        say(
            format!("{:.0} ns + {:.3} ns/B x B", f.fixed_ns, f.per_byte_ns),
            &sized
        ),
        1.0 / f.per_byte_ns.max(1e-9),
        f.points.len(),
        worst * 100.0,
        if worst <= 0.25 { ": holds" } else { ": the cost is not a straight line in B here (caches, segmenting)" }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_byte_fit_recovers_fixed_and_per_byte_costs() {
        use costlab_core::measure::syscost::PerByte;
        // 900 ns + 0.05 ns/B, exact: the fit gives both back.
        let pts: Vec<(f64, f64)> = costlab_core::measure::syscost::PER_BYTE_SIZES
            .iter()
            .map(|&b| (b as f64, 900.0 + 0.05 * b as f64))
            .collect();
        let f = PerByte::fit(&pts).unwrap();
        assert!((f.fixed_ns - 900.0).abs() < 1e-6, "{f:?}");
        assert!((f.per_byte_ns - 0.05).abs() < 1e-9, "{f:?}");
        assert!(f.worst_miss() < 1e-9);
        assert!((f.at(8192.0) - (900.0 + 409.6)).abs() < 1e-6);
        // Noise of +-10 ns alternating: the least-squares line stays within a few ns.
        let noisy: Vec<(f64, f64)> = pts
            .iter()
            .enumerate()
            .map(|(i, (x, y))| (*x, y + if i % 2 == 0 { 10.0 } else { -10.0 }))
            .collect();
        let g = PerByte::fit(&noisy).unwrap();
        assert!((g.fixed_ns - 900.0).abs() < 15.0, "{g:?}");
        assert!((g.per_byte_ns - 0.05).abs() < 0.001, "{g:?}");
        // One size, or one size twice, gives no line.
        assert!(PerByte::fit(&pts[..1]).is_none());
        assert!(PerByte::fit(&[(16.0, 1.0), (16.0, 2.0)]).is_none());
    }

    #[test]
    fn fit_recovers_op_and_enter_costs() {
        let pts: Vec<(u32, f64)> = [1u32, 2, 4, 8, 256]
            .iter()
            .map(|&n| (n, 40.0 + 360.0 / f64::from(n)))
            .collect();
        let (a, e) = fit_amortized(&pts).unwrap();
        assert!(
            (a - 40.0).abs() < 1e-9 && (e - 360.0).abs() < 1e-9,
            "{a} {e}"
        );
        assert_eq!(fit_amortized(&[(4, 1.0)]), None);
        assert_eq!(fit_amortized(&[(4, 1.0), (4, 2.0)]), None);
    }

    fn spread(median: f64, half: f64) -> costlab_core::measure::Summary {
        costlab_core::measure::Summary {
            median,
            min: median - half,
            max: median + half,
            mad: half / 2.0,
            n: 5,
        }
    }

    fn terms_with_nop(nop: Vec<(u32, costlab_core::measure::Summary)>) -> CostTerms {
        CostTerms {
            s_ns: spread(100.0, 0.0),
            w_send_ns: spread(1000.0, 0.0),
            w_recv_ns: spread(400.0, 0.0),
            t_nop_ns: nop,
            uring_sendrecv_ns: vec![],
            uring_send_ns: vec![],
            uring_recv_ns: vec![],
            epoll_wait_ns: vec![],
            wake_ns: None,
            uring_unsupported: None,
            send_bytes: None,
            recv_bytes: None,
        }
    }

    #[test]
    fn fit_verdicts_tell_noise_from_a_miss() {
        let m = Measurements::default();
        // A kink no a + E/n line follows: 500, 100, 300 at 1, 4, 16.
        let kinked = vec![
            (1, spread(500.0, 5.0)),
            (4, spread(100.0, 5.0)),
            (16, spread(300.0, 5.0)),
        ];
        let v = model(&terms_with_nop(kinked.clone()), &m, "x", &[]).verdict;
        assert!(v.iter().any(|l| l.contains("does not hold at")), "{v:?}");
        // The same medians with spreads wider than the miss: noise, said so.
        let noisy: Vec<_> = kinked
            .iter()
            .map(|(n, s)| (*n, spread(s.median, 400.0)))
            .collect();
        let v = model(&terms_with_nop(noisy), &m, "x", &[]).verdict;
        assert!(v.iter().any(|l| l.contains("too noisy to judge")), "{v:?}");
        // On the line: holds, and E is compared with s.
        let line = [1u32, 4, 16]
            .iter()
            .map(|&n| (n, spread(40.0 + 360.0 / f64::from(n), 1.0)))
            .collect();
        let model = model(&terms_with_nop(line), &m, "x", &[]);
        assert!(model.verdict.iter().any(|l| l.contains("holds")));
        assert!(model.verdict.iter().any(|l| l.contains("360 ns, 3.6x")));
        assert_eq!(model.points.len(), 3);
    }
}
