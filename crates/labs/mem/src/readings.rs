//! The readings a bandwidth run adds to its notes and tables: each kernel against the C
//! library, what the write-allocate read costs, where bandwidth stops growing with threads,
//! and Little's law for a read stream that falls behind a copy.

use serde_json::Value;

use costlab_core::case;
use costlab_core::measure::sizes::format_size;
use costlab_history::report::{Model, ModelPoint, ResultRow};

use super::plan::Op;
use super::{block_of, LAB};

/// The block a row asked for (its block, unless it was shrunk to fit memory).
pub(super) fn asked_block_of(r: &ResultRow) -> u64 {
    r.case
        .get("block_asked")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| block_of(r))
}

/// "1 thread", "16 threads".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub(super) fn threads_of(r: &ResultRow) -> usize {
    r.key("threads").parse().unwrap_or(0)
}

/// The bandwidth row of `op` beside `r` (same pattern, block asked, threads, pages, sharing).
fn sibling<'a>(rows: &'a [ResultRow], r: &ResultRow, op: &str) -> Option<&'a ResultRow> {
    rows.iter().find(|x| {
        x.metric == "bandwidth"
            && x.key("op") == op
            && x.key("pattern") == r.key("pattern")
            && asked_block_of(x) == asked_block_of(r)
            && x.key("threads") == r.key("threads")
            && x.key("pages") == r.key("pages")
            && x.key("shared") == r.key("shared")
    })
}

/// "0.97x memcpy": a kernel's median against its C library reference, where both were measured.
pub(super) fn versus_libc(rows: &[ResultRow], r: &ResultRow) -> Option<String> {
    let op = Op::parse(&r.key("op")).ok()?;
    let reference = op.reference()?;
    let x = sibling(rows, r, reference.name())?;
    (x.summary.median > 0.0).then(|| {
        format!(
            "{:.2}x {}",
            r.summary.median / x.summary.median,
            reference.name()
        )
    })
}

/// The readings a bandwidth run adds to its notes: kernels against the C library, what the
/// write-allocate read costs, read against copy-nt at the most threads, and where bandwidth
/// stops growing with threads.
pub(super) fn bandwidth_readings(rows: &[ResultRow]) -> Vec<String> {
    let bw: Vec<&ResultRow> = rows.iter().filter(|r| r.metric == "bandwidth").collect();
    let mut notes = Vec::new();
    let tag = |r: &ResultRow| {
        format!(
            "{} {}, {}, {}",
            r.key("pattern"),
            format_size(asked_block_of(r)),
            plural(threads_of(r), "thread"),
            r.key("pages")
        )
    };
    let refs: Vec<String> = bw
        .iter()
        .filter(|r| r.key("pattern") == "seq")
        .filter_map(|r| versus_libc(rows, r).map(|v| format!("{} = {v} ({})", r.key("op"), tag(r))))
        .collect();
    if !refs.is_empty() {
        notes.push(format!(
            "against the C library (1.00x = as fast as libc): {}",
            refs.join("; ")
        ));
    }
    for r in bw.iter().filter(|r| r.key("op") == "copy") {
        let Some(nt) = sibling(rows, r, "copy-nt") else {
            continue;
        };
        let (c, n) = (r.summary.median, nt.summary.median);
        if n <= 0.0 {
            continue;
        }
        notes.push(if c < n {
            format!(
                "write-allocate ({}): copy with regular stores reads each destination line before it overwrites it, so it moves 3 bytes over the memory bus for every 2 counted; here it gives {c:.1} GB/s against copy-nt's {n:.1}: the write-allocate read costs {:.0}% of the copy rate",
                tag(r),
                (1.0 - c / n) * 100.0
            )
        } else {
            format!(
                "write-allocate ({}): copy with regular stores ({c:.1} GB/s) is not slower than copy-nt ({n:.1}): at this size the destination stays in cache, where streaming stores only add the trip to memory",
                tag(r)
            )
        });
    }
    let most = bw.iter().map(|r| threads_of(r)).max().unwrap_or(0);
    if most > 1 {
        for r in bw
            .iter()
            .filter(|r| r.key("op") == "read" && threads_of(r) == most)
        {
            if let Some(nt) = sibling(rows, r, "copy-nt") {
                let (a, b) = (r.summary.median, nt.summary.median);
                notes.push(format!(
                    "read vs copy-nt at {most} threads ({}): {a:.1} vs {b:.1} GB/s ({:.2}x){}",
                    tag(r),
                    a / b.max(1e-9),
                    if a >= b {
                        String::new()
                    } else {
                        format!("; the memory bus carried {b:.1} GB/s for copy-nt, so the read stream is held back by its cores, not by the bus: a core's loads wait for every line, streaming stores wait for none (the Little's-law model, where the latency was measured, says how far)")
                    }
                ));
            }
        }
    }
    notes.extend(scaling_readings(&bw));
    notes
}

/// The smallest block that is about memory, not the caches: twice the last-level cache where
/// the machine says its size, else 64 MiB.
pub(super) fn beyond_caches(m: &costlab_core::machine::Machine) -> u64 {
    (1..=4)
        .rev()
        .find_map(|l| m.cache_size(l))
        .map_or(64 << 20, |c| 2 * c)
}

/// The read row at the most threads (more than one) whose copy-nt beside it moved more: the
/// case where a read-only stream fell behind a copy, which `little_reading` explains.
/// Only blocks of at least `min_block` count (beyond the caches: see `beyond_caches`).
pub(super) fn read_below_copy_nt(
    rows: &[ResultRow],
    min_block: u64,
) -> Option<(&ResultRow, &ResultRow)> {
    let reads = rows.iter().filter(|r| {
        r.metric == "bandwidth"
            && r.key("op") == "read"
            && r.key("pattern") == "seq"
            && block_of(r) >= min_block
    });
    let most = reads.clone().map(threads_of).max().filter(|&n| n > 1)?;
    reads
        .filter(|r| threads_of(r) == most)
        .filter_map(|r| Some((r, sibling(rows, r, "copy-nt")?)))
        .find(|(r, nt)| r.summary.median < nt.summary.median)
}

/// Little's law for the read stream, where read at the most threads fell below copy-nt and
/// the loaded-latency points (idle, and the heaviest load) were measured in the same run. A
/// core's loads wait for each line, so its read rate is the lines it keeps in flight times
/// 64 bytes over the latency. One thread's read at the idle latency gives (at least) those
/// lines; with the other CPUs loading, the latency rises, and the model predicts each
/// thread's read at the most threads from that latency, beside what each thread read.
/// Streaming stores wait for no reply, so a copy adds its writes to the bus beside its reads.
pub(super) fn little_model(rows: &[ResultRow], min_block: u64) -> Option<Model> {
    let (rn, nt) = read_below_copy_nt(rows, min_block)?;
    let n = threads_of(rn);
    let r1 = rows.iter().find(|x| {
        x.metric == "bandwidth"
            && x.key("op") == "read"
            && x.key("pattern") == "seq"
            && threads_of(x) == 1
            && asked_block_of(x) == asked_block_of(rn)
            && x.key("pages") == rn.key("pages")
    })?;
    let (idle, heavy, heavy_bw) =
        super::loaded::idle_and_heaviest(rows, super::loaded::Traffic::Read.name())?;
    let (l0, lh, bh) = (
        idle.summary.median,
        heavy.summary.median,
        heavy_bw.summary.median,
    );
    let (g1, gn, gc) = (r1.summary.median, rn.summary.median, nt.summary.median);
    if l0 <= 0.0 || lh <= 0.0 || g1 <= 0.0 || gn <= 0.0 {
        return None;
    }
    // GB/s x ns = bytes in flight.
    let lines = g1 * l0 / 64.0;
    let point = ModelPoint {
        case: case! {
            "op" => "read", "pattern" => "seq", "block" => asked_block_of(rn),
            "pages" => rn.key("pages"), "threads" => n, "per" => "thread"
        },
        predicted: lines * 64.0 / lh,
        measured: gn / n as f64,
        unit: "GB/s".into(),
    };
    let others = heavy
        .case
        .get("load_threads")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let err = point.error();
    let mut params = serde_json::Map::new();
    params.insert("lines_in_flight".into(), Value::from(lines));
    params.insert("idle_latency_ns".into(), Value::from(l0));
    params.insert("loaded_latency_ns".into(), Value::from(lh));
    let verdict = vec![
        format!(
            "one thread read {g1:.1} GB/s at an idle latency of {l0:.0} ns: it kept at least {lines:.0} lines in flight; with {} reading {bh:.1} GB/s the latency was {lh:.0} ns ({:.2}x idle), so each of {n} threads should read {:.1} GB/s with as many lines in flight: it read {:.1} (prediction {:+.0}%): {}",
            plural(others, "other CPU"),
            lh / l0,
            point.predicted,
            point.measured,
            err * 100.0,
            if lh < l0 {
                format!(
                    "not read: the latency under load came out below idle ({lh:.0} vs {l0:.0} ns), so the host's drift between the points is larger than the load's effect; run again on a quiet machine"
                )
            } else if err.abs() <= 0.25 {
                "holds: the read stream is bounded by the lines each core keeps in flight and by the latency the load adds".to_string()
            } else {
                format!(
                    "disagrees: the latency point had {bh:.1} GB/s of load, the {n} threads read {gn:.1} GB/s together; for the law to hold at their load the latency would have to be {:.0} ns ({:.2}x idle)",
                    lines * 64.0 / point.measured,
                    lines * 64.0 / point.measured / l0
                )
            },
        ),
        format!(
            "the bus carried {gc:.1} GB/s for copy-nt, whose streaming stores wait for no reply: read ({gn:.1} GB/s at {n} threads) below copy-nt is the cores' limit, not the bus's; read reaches copy-nt where the bus fills first (many cores per memory channel)"
        ),
    ];
    let mut m = Model {
        lab: LAB.into(),
        name: "read per thread = lines in flight x 64 B / latency (Little's law)".into(),
        params,
        points: vec![point],
        verdict,
    };
    // Every term is a measured figure: one thread's and n threads' read, copy-nt, the idle and
    // the loaded latency and the load's bandwidth.
    costlab_core::measure::quality::model_inherits(&mut m, &[r1, rn, nt, idle, heavy, heavy_bw]);
    Some(m)
}

/// One op's bandwidth by thread count, for the scaling table and its reading.
type Curve = Vec<(usize, f64)>;

/// The thread-scaling curves: per (op, pattern, block asked, pages), the median by threads.
pub(super) fn scaling_curves(bw: &[&ResultRow]) -> Vec<(String, Curve)> {
    let mut curves: Vec<(String, Curve)> = Vec::new();
    for r in bw {
        if r.key("shared") == "true" {
            continue;
        }
        let name = format!(
            "{} {} {} {}",
            r.key("op"),
            r.key("pattern"),
            format_size(asked_block_of(r)),
            r.key("pages")
        );
        let point = (threads_of(r), r.summary.median);
        match curves.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => c.push(point),
            None => curves.push((name, vec![point])),
        }
    }
    for (_, c) in &mut curves {
        c.sort_by_key(|p| p.0);
        c.dedup_by_key(|p| p.0);
    }
    curves.retain(|(_, c)| c.len() > 1);
    curves
}

/// Where a curve stops growing: the first step between thread counts that gains less than a
/// quarter of what proportional scaling would (e.g. 8 -> 16 threads: +6%, proportional +100%).
fn stops_growing(curve: &[(usize, f64)]) -> Option<(usize, usize, f64, f64)> {
    curve.windows(2).find_map(|w| {
        let ((t1, b1), (t2, b2)) = (w[0], w[1]);
        if b1 <= 0.0 || t1 == 0 {
            return None;
        }
        let gain = b2 / b1 - 1.0;
        let ideal = t2 as f64 / t1 as f64 - 1.0;
        (gain < ideal / 4.0).then_some((t1, t2, gain * 100.0, ideal * 100.0))
    })
}

fn scaling_readings(bw: &[&ResultRow]) -> Vec<String> {
    scaling_curves(bw)
        .into_iter()
        .map(|(name, c)| match stops_growing(&c) {
            Some((t1, t2, gain, ideal)) => format!(
                "scaling {name}: bandwidth stops growing at {} ({t1} -> {t2} threads: {gain:+.0}%, proportional would be {ideal:+.0}%): from there a shared resource is the limit, not the thread count (the memory channels for a block beyond the caches; SMT siblings, a shared cache or a busy host for one inside them)",
                plural(t1, "thread")
            ),
            None => {
                let (t0, b0) = c[0];
                let (tn, bn) = c[c.len() - 1];
                format!(
                    "scaling {name}: still growing at {tn} threads ({t0} -> {tn}: {:.2}x); more threads may give more",
                    bn / b0.max(1e-9)
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::render;
    use costlab_history::report::Outcome;

    fn bw(op: &str, threads: usize, gbs: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {"op" => op, "pattern" => "seq", "pages" => "4k", "block" => 1u64 << 30, "threads" => threads},
            "bandwidth",
            "GB/s",
            vec![gbs; 5],
        )
        .unwrap()
    }

    fn loaded_row(delay: Option<u64>, metric: &str, v: f64) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {
                "op" => "loaded", "traffic" => "read",
                "load_threads" => if delay.is_some() { 1 } else { 0 },
                "delay" => delay.map_or(Value::Null, Value::from),
                "block" => 256u64 << 20, "pages" => "thp"
            },
            metric,
            if metric == "latency" { "ns" } else { "GB/s" },
            vec![v; 5],
        )
        .unwrap()
    }

    #[test]
    fn littles_law_explains_read_below_copy_nt() {
        let g = 1u64 << 30;
        let mut rows = vec![
            bw("read", 1, 14.8),
            bw("read", 2, 21.2),
            bw("copy-nt", 1, 17.0),
            bw("copy-nt", 2, 27.4),
        ];
        // Without the latency points there is nothing to predict from.
        assert!(read_below_copy_nt(&rows, 64 << 20).is_some());
        assert!(little_model(&rows, 64 << 20).is_none());
        rows.extend([
            loaded_row(None, "latency", 186.0),
            loaded_row(None, "bandwidth", 0.0),
            loaded_row(Some(0), "latency", 253.0),
            loaded_row(Some(0), "bandwidth", 10.8),
        ]);
        let m = little_model(&rows, 64 << 20).expect("a model");
        let p = &m.points[0];
        // 14.8 GB/s x 186 ns = 2752.8 bytes = 43.0 lines; 43.0 x 64 / 253 = 10.88 GB/s.
        assert!((m.params["lines_in_flight"].as_f64().unwrap() - 43.01).abs() < 0.01);
        assert!((p.predicted - 10.881).abs() < 0.01, "{}", p.predicted);
        assert!((p.measured - 10.6).abs() < 1e-9);
        assert_eq!(p.case["threads"], Value::from(2));
        let text = m.verdict.join("\n");
        assert!(text.contains("holds"), "{text}");
        assert!(
            text.contains("with 1 other CPU reading 10.8 GB/s"),
            "{text}"
        );
        assert!(text.contains("the cores' limit, not the bus's"), "{text}");
        // A block inside the caches is not about memory: no model.
        assert!(little_model(&rows, 2 * g).is_none());
        // Read at or above copy-nt needs no explaining.
        rows[1] = bw("read", 2, 30.0);
        assert!(read_below_copy_nt(&rows, 64 << 20).is_none());
        assert!(little_model(&rows, 64 << 20).is_none());
        // Latency under load below idle is noise, not a reading.
        let mut noisy = rows.clone();
        noisy[1] = bw("read", 2, 21.2);
        noisy[4] = loaded_row(None, "latency", 260.0);
        let m = little_model(&noisy, 64 << 20).unwrap();
        assert!(m.verdict[0].contains("not read"), "{:?}", m.verdict);
        // A prediction far off is said to disagree.
        rows[1] = bw("read", 2, 12.0);
        let m = little_model(&rows, 64 << 20).unwrap();
        assert!(m.verdict[0].contains("disagrees"), "{:?}", m.verdict);
        // 43.0 lines x 64 B / 6.0 GB/s per thread = 459 ns.
        assert!(
            m.verdict[0].contains("the latency would have to be 459 ns (2.47x idle)"),
            "{:?}",
            m.verdict
        );
    }

    #[test]
    fn readings_compare_with_libc_write_allocate_and_scaling() {
        let rows = vec![
            bw("read", 1, 20.0),
            bw("copy", 1, 15.0),
            bw("copy-nt", 1, 19.4),
            bw("memcpy", 1, 20.0),
            bw("read", 8, 100.0),
            bw("copy-nt", 8, 90.0),
            bw("memcpy", 8, 92.0),
            bw("read", 16, 104.0),
            bw("copy-nt", 16, 95.0),
            bw("memcpy", 16, 96.0),
        ];
        assert_eq!(
            versus_libc(&rows, &rows[2]).as_deref(),
            Some("0.97x memcpy")
        );
        assert_eq!(versus_libc(&rows, &rows[0]), None);
        let notes = bandwidth_readings(&rows);
        let all = notes.join("\n");
        assert!(
            all.contains("copy-nt = 0.97x memcpy (seq 1G, 1 thread, 4k)"),
            "{all}"
        );
        assert!(all.contains("write-allocate read costs 23%"), "{all}");
        assert!(all.contains("read vs copy-nt at 16 threads"), "{all}");
        assert!(!all.contains("suspect"), "{all}");
        assert!(
            all.contains("scaling read seq 1G 4k: bandwidth stops growing at 8 threads (8 -> 16 threads: +4%"),
            "{all}"
        );
        assert_eq!(stops_growing(&[(1, 10.0), (2, 19.0), (4, 30.0)]), None);
        let text = render(&Outcome {
            results: rows,
            ..Default::default()
        });
        assert!(text.contains("scaling with threads"), "{text}");
        assert!(text.contains("0.97x memcpy"), "{text}");
    }
}
