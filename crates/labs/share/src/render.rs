//! The share lab's text: the cases table, the paired ratios, the USL table and the
//! core-to-core matrix.

use super::*;

/// The side-by-side ratio of two cases' throughput at the largest thread count both ran.
#[derive(Debug, Clone)]
pub struct Ratio {
    pub better: Variant,
    pub worse: Variant,
    pub threads: usize,
    pub summary: Summary,
    /// The two figures the ratio is taken from: its verdict is the worse of theirs.
    pub inputs: [ResultRow; 2],
}

pub(super) fn ratio(outcome: &Outcome, better: Variant, worse: Variant) -> Option<Ratio> {
    let a = curve(better, &outcome.results);
    let b = curve(worse, &outcome.results);
    let (t, ra, rb) = a
        .iter()
        .rev()
        .find_map(|(t, ra)| b.iter().find(|(u, _)| u == t).map(|(_, rb)| (*t, ra, rb)))?;
    let ratios = stats::paired_ratios(&ra.samples, &rb.samples);
    Some(Ratio {
        better,
        worse,
        threads: t,
        summary: Summary::of(&ratios)?,
        inputs: [ra.clone(), rb.clone()],
    })
}

pub(super) fn ratios(outcome: &Outcome) -> Vec<Ratio> {
    [
        (Variant::ArcPerThread, Variant::ArcShared),
        (Variant::AtomicPadded, Variant::AtomicFalseSharing),
    ]
    .into_iter()
    .filter_map(|(a, b)| ratio(outcome, a, b))
    .collect()
}

/// The c2c rows as (from, to, row).
pub(super) fn c2c_rows(outcome: &Outcome) -> Vec<(usize, usize, &ResultRow)> {
    outcome
        .results
        .iter()
        .filter(|r| r.metric == "latency" && r.case.contains_key("from"))
        .filter_map(|r| Some((r.key("from").parse().ok()?, r.key("to").parse().ok()?, r)))
        .collect()
}

/// The terminal rendering of a share or c2c outcome.
pub fn render(outcome: &Outcome) -> String {
    let mut s = String::new();
    let variants: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| !curve(*v, &outcome.results).is_empty())
        .collect();
    if !variants.is_empty() {
        s += &render_cases(outcome, &variants);
    }
    let pairs = c2c_rows(outcome);
    if !pairs.is_empty() {
        s += &render_c2c(&pairs);
    }
    s
}

pub(super) fn render_cases(outcome: &Outcome, variants: &[Variant]) -> String {
    let mut s = String::from(
        "share: T threads pinned one per CPU, started on a barrier, each running one op in a loop\n",
    );
    let mut rows = Vec::new();
    for &v in variants {
        let pts = curve(v, &outcome.results);
        let one = pts
            .iter()
            .find(|(t, _)| *t == 1)
            .map(|(_, r)| r.summary.median);
        for (t, r) in &pts {
            let lat = outcome
                .find(
                    "latency",
                    &costlab_core::case! {"variant" => v.name(), "threads" => *t},
                )
                .map_or("—".to_string(), |l| {
                    format!(
                        "{}{}",
                        l.summary.show(1),
                        costlab_history::report::verdict::mark(l)
                    )
                });
            let per = r.summary.median / *t as f64;
            let eff = one.map_or("—".to_string(), |x1| {
                format!("{:.0}%", 100.0 * r.summary.median / (*t as f64 * x1))
            });
            rows.push(vec![
                v.name().to_string(),
                t.to_string(),
                format!(
                    "{}{}",
                    r.summary.show(1),
                    costlab_history::report::verdict::mark(r)
                ),
                format!("{per:.1}"),
                lat,
                eff,
            ]);
        }
    }
    s += &table::render(
        &[
            "case",
            "threads",
            "total Mop/s (min–max)",
            "per thread Mop/s",
            "ns/op per thread (min–max)",
            "efficiency vs T=1",
        ],
        &rows,
    );
    s += "\n";
    for r in ratios(outcome) {
        // A ratio of figures that are not ok says so, naming them.
        let (q, why) = costlab_core::measure::quality::worst_of(&[&r.inputs[0], &r.inputs[1]]);
        s += &format!(
            "at T={}: {}\n",
            r.threads,
            costlab_core::measure::quality::quote(
                format!(
                    "{} runs {:.2}x{} the throughput of {} (paired samples, {})",
                    r.better.name(),
                    r.summary.median,
                    q.map_or("", |q| q.mark()),
                    r.worse.name(),
                    r.summary.show(2)
                ),
                q,
                &why
            )
        );
    }
    s += WHY;
    s += "\n";
    for &v in variants {
        s += &format!("  {}: {}\n", v.name(), v.why());
    }
    s += &render_usl(outcome);
    s
}

pub(super) fn param(m: &Model, key: &str) -> f64 {
    m.params
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

pub(super) fn render_usl(outcome: &Outcome) -> String {
    let models: Vec<&Model> = outcome
        .models
        .iter()
        .filter(|m| m.lab == LAB && m.name.starts_with("USL "))
        .collect();
    if models.is_empty() {
        return "\nUSL: one thread count per case, nothing to fit (two give bounds, three or more a fit)\n"
            .to_string();
    }
    let mut s = String::from(
        "\nUniversal Scalability Law, X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); sigma = contention, kappa = coherency\n",
    );
    let mut rows = Vec::new();
    for m in &models {
        let fit = usl::Fit {
            shape: usl::Shape::Full,
            lambda: param(m, "lambda_mops"),
            sigma: param(m, "sigma"),
            kappa: param(m, "kappa"),
            rel_rms: param(m, "rel_rms"),
        };
        let case = m.points.first().map_or(String::new(), |p| {
            p.case
                .get("variant")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        });
        let worst = m.points.iter().map(ModelPoint::error).fold(0.0f64, |a, e| {
            if e.abs() > a.abs() {
                e
            } else {
                a
            }
        });
        let mut row = vec![
            case,
            m.params
                .get("fit")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            format!("{:.1}", fit.lambda),
            format!("{:.4}", fit.sigma),
            format!("{:.5}", fit.kappa),
            fit.peak().map_or("none".to_string(), |p| format!("{p:.1}")),
            format!("{:+.1}%", worst * 100.0 + 0.0).replace("-0.0%", "+0.0%"),
        ];
        row.extend(
            usl::EXTRAPOLATE_TO
                .iter()
                .map(|&n| format!("{:.1}", fit.predict(n as f64))),
        );
        rows.push(row);
    }
    s += &table::render(
        &[
            "case",
            "fit",
            "lambda Mop/s",
            "sigma",
            "kappa",
            "peak T",
            "worst miss",
            "T=8 Mop/s*",
            "T=24*",
            "T=64*",
            "T=128*",
        ],
        &rows,
    );
    s += "\n* model extrapolation from the measured points, not a measurement.\n";
    let full: Vec<&&Model> = models
        .iter()
        .filter(|m| m.params.get("fit") == Some(&json!("full")))
        .collect();
    if !full.is_empty() {
        let rows: Vec<Vec<String>> = full
            .iter()
            .flat_map(|m| m.points.iter())
            .map(|p| {
                vec![
                    p.case
                        .get("variant")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    p.case
                        .get("threads")
                        .map_or(String::new(), Value::to_string),
                    format!("{:.1}", p.measured),
                    format!("{:.1}", p.predicted),
                    format!("{:+.1}%", 100.0 * p.error()),
                ]
            })
            .collect();
        s += "USL fit checked against the measurements:\n";
        s += &table::render(
            &["case", "threads", "measured Mop/s", "USL Mop/s", "miss"],
            &rows,
        );
        s += "\n";
    }
    for m in &models {
        for line in m.verdict.iter().skip(1) {
            s += &format!("model check: {line}\n");
        }
    }
    if models
        .iter()
        .any(|m| m.params.get("fit") != Some(&json!("full")))
    {
        s += "With two thread counts there is one equation for two unknowns: each case gets an upper bound (sigma-only) and a lower bound (kappa-only), not a fit.\n";
    }
    s
}

pub(super) fn render_c2c(pairs: &[(usize, usize, &ResultRow)]) -> String {
    let mut s = String::from(
        "\nshare c2c: one-way core-to-core latency (ns): a CAS ping-pong of one cache line, round trip / 2, median of samples\n",
    );
    let triples: Vec<(usize, usize, f64)> = pairs
        .iter()
        .map(|(a, b, r)| (*a, *b, r.summary.median))
        .collect();
    let m = c2c::Matrix::from_pairs(&triples);
    let head: Vec<String> = std::iter::once("from \\ to".to_string())
        .chain(m.cpus.iter().map(|c| format!("CPU {c}")))
        .collect();
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    s += &table::render(&head_refs, &m.rows(1));
    s += "\n";
    if pairs.len() <= 32 {
        let rows: Vec<Vec<String>> = pairs
            .iter()
            .map(|(a, b, r)| {
                vec![
                    a.to_string(),
                    b.to_string(),
                    format!("{:.1}", r.summary.median),
                    format!("{:.1}", r.summary.min),
                    format!("{:.1}", r.summary.max),
                    format!("{:.1}", r.summary.mad),
                    r.summary.n.to_string(),
                ]
            })
            .collect();
        s += &table::render(
            &[
                "from",
                "to",
                "median ns",
                "min ns",
                "max ns",
                "MAD ns",
                "samples",
            ],
            &rows,
        );
        s += "\n";
    }
    let levels = c2c::group(&m);
    if triples.len() < 2 {
        s += "groups: one pair only; grouping CPUs by distance needs three or more CPUs\n";
    } else if levels.is_empty() {
        let lo = triples.iter().map(|t| t.2).fold(f64::INFINITY, f64::min);
        let hi = triples.iter().map(|t| t.2).fold(0.0, f64::max);
        s += &format!(
            "groups: none visible: every pair is within {:.1}x of the others ({lo:.0}–{hi:.0} ns), so these CPUs are all the same distance apart\n",
            c2c::GAP
        );
    } else {
        for l in &levels {
            let names: Vec<String> = l
                .groups
                .iter()
                .map(|g| format!("{{{}}}", cpus::format_cpu_list(g)))
                .collect();
            s += &format!(
                "group at <= {:.0} ns: {} (at most {:.0} ns inside, {} between: likely a shared cache or core)\n",
                l.threshold,
                names.join(" "),
                l.inside_max,
                l.between_min
                    .map_or("—".to_string(), |x| format!("from {x:.0} ns"))
            );
        }
    }
    s += "why: every write to a line another core holds waits about this long for the line to come over; a shared refcount or counter pays it on nearly every op.\n";
    s
}
