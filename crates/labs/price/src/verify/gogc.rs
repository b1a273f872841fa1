//! The GOGC and GOMEMLIMIT model, from the program's own GC trace: each cycle's CPU (the
//! `ms cpu` part of a gctrace line: assists, background and idle mark workers, the pauses
//! times P), the heap at its start and its live heap after. The program's allocation is
//! replayed against another heap goal, with each cycle costing what a cycle of that live heap
//! cost here (a fixed part plus a part per live MiB, fitted to its own cycles), and the
//! program's measured GC CPU is scaled by the replay's ratio.
//!
//! A cycle the program forced (runtime.GC) stays where it was. What it leaves out, said with
//! its figure: the sweep's and the allocator's work outside the cycles (the GC's share scaled
//! is the samples' where they see it, sweep included), idle mark workers that fill more idle CPU when the mark runs longer, and a heap
//! that grows past what the trace saw.

/// One GC cycle as the runtime's gctrace printed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cycle {
    /// CPU of the cycle, ns (the `ms cpu` fields summed).
    pub cpu_ns: f64,
    /// Heap at the cycle's start, at its end, and live after it, MiB.
    pub start_mb: f64,
    pub end_mb: f64,
    pub live_mb: f64,
    /// Started by the program (runtime.GC, "(forced)"), not by its heap goal: it happens at
    /// the same point whatever the GOGC.
    pub forced: bool,
}

/// The cycles of a gctrace text (`gc 3 @0.1s 4%: ... ms clock, 0.1+0.2/0.3/0.4+0.05 ms cpu,
/// 4->5->2 MB, 5 MB goal, ...`); lines it cannot read are skipped.
pub fn cycles(stderr: &str) -> Vec<Cycle> {
    stderr.lines().filter_map(cycle).collect()
}

fn cycle(line: &str) -> Option<Cycle> {
    line.strip_prefix("gc ")?;
    let (_, rest) = line.split_once("ms clock, ")?;
    let (cpu, rest) = rest.split_once(" ms cpu, ")?;
    let cpu_ms: f64 = cpu
        .split(['+', '/'])
        .map(|x| x.trim().parse::<f64>().ok())
        .sum::<Option<f64>>()?;
    let heap = rest.split_whitespace().next()?;
    let mut h = heap.split("->").map(|x| x.parse::<f64>().ok());
    Some(Cycle {
        cpu_ns: cpu_ms * 1e6,
        start_mb: h.next()??,
        end_mb: h.next()??,
        live_mb: h.next()??,
        forced: line.trim_end().ends_with("(forced)"),
    })
}

/// The heap goal a runtime sets after a cycle with `live` MiB marked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// GOGC=g: live x (1 + g/100), at least the runtime's 4 MiB x g/100.
    Gogc(f64),
    /// GOGC=off with a memory limit of this many MiB of heap.
    Limit(f64),
}

impl Goal {
    fn after(self, live: f64) -> f64 {
        match self {
            Goal::Gogc(g) => (live * (1.0 + g / 100.0)).max(4.0 * g / 100.0),
            Goal::Limit(l) => l.max(live + 1.0),
        }
    }
}

/// Each cycle's cost as `fixed + per_mb x live`, least squares over the program's own cycles;
/// a flat mean where the live heap did not vary (or the slope came out negative).
pub fn fit(cycles: &[Cycle]) -> (f64, f64) {
    let n = cycles.len() as f64;
    if n == 0.0 {
        return (0.0, 0.0);
    }
    let mx = cycles.iter().map(|c| c.live_mb).sum::<f64>() / n;
    let my = cycles.iter().map(|c| c.cpu_ns).sum::<f64>() / n;
    let sxx: f64 = cycles.iter().map(|c| (c.live_mb - mx).powi(2)).sum();
    let sxy: f64 = cycles
        .iter()
        .map(|c| (c.live_mb - mx) * (c.cpu_ns - my))
        .sum();
    if sxx <= 0.0 || sxy <= 0.0 {
        return (my, 0.0);
    }
    let slope = sxy / sxx;
    let fixed = my - slope * mx;
    if fixed < 0.0 {
        return (0.0, my / mx.max(1e-9));
    }
    (fixed, slope)
}

/// The program's allocation as the trace shows it: (allocated MiB so far, live MiB) at each
/// cycle, the points (allocated MiB) where it forced a cycle, and the total.
fn allocation(cycles: &[Cycle]) -> (Vec<(f64, f64)>, Vec<f64>, f64) {
    let mut a = 0.0;
    let mut prev_live = 0.0;
    let mut curve = Vec::new();
    let mut forced = Vec::new();
    for c in cycles {
        a += (c.start_mb - prev_live).max(0.0);
        curve.push((a, c.live_mb));
        if c.forced {
            forced.push(a);
        }
        prev_live = c.live_mb;
    }
    let total = a + cycles
        .last()
        .map_or(0.0, |c| (c.end_mb - c.start_mb).max(0.0));
    (curve, forced, total)
}

/// The live heap after `a` MiB allocated: the trace's, linear between its cycles.
fn live_at(curve: &[(f64, f64)], a: f64) -> f64 {
    match curve.iter().position(|(x, _)| *x >= a) {
        Some(0) => curve[0].1 * (a / curve[0].0.max(1e-9)).min(1.0),
        Some(i) => {
            let ((x0, y0), (x1, y1)) = (curve[i - 1], curve[i]);
            y0 + (y1 - y0) * (a - x0) / (x1 - x0).max(1e-9)
        }
        None => curve.last().map_or(0.0, |c| c.1),
    }
}

/// The program's allocation replayed under a heap goal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replay {
    /// GC CPU, ns.
    pub cpu: f64,
    /// Cycles run.
    pub cycles: usize,
    /// The largest heap reached (live plus what was allocated since the last cycle), MiB.
    pub peak_mb: f64,
}

/// The program's allocation replayed under `goal`: its GC CPU, cycles and peak heap. A cycle
/// the program forced (runtime.GC) comes where it came in the trace, whatever the goal, and
/// the goal starts again from it.
pub fn replay(cycles: &[Cycle], goal: Goal) -> Replay {
    let (fixed, per_mb) = fit(cycles);
    let (curve, forced, total) = allocation(cycles);
    let (mut a, mut live, mut cpu, mut n, mut peak) = (0.0, 0.0, 0.0, 0, 0.0f64);
    let mut next_forced = forced.iter().copied().peekable();
    while n < 1_000_000 {
        let room = (goal.after(live) - live).max(0.01);
        let from = a;
        match next_forced.peek() {
            Some(&f) if f <= a + room => {
                a = f;
                next_forced.next();
            }
            _ => a += room,
        }
        if a > total {
            peak = peak.max(live + (total - from));
            break;
        }
        peak = peak.max(live + (a - from));
        live = live_at(&curve, a);
        cpu += fixed + per_mb * live;
        n += 1;
    }
    Replay {
        cpu,
        cycles: n,
        peak_mb: peak,
    }
}

/// The predicted GC CPU under `to`, ns: the measured `gc_ns` (at `from`) scaled by the
/// replay's ratio. None with fewer than two cycles to learn from, or a replay of none.
pub fn predict(cycles: &[Cycle], gc_ns: f64, from: Goal, to: Goal) -> Option<f64> {
    if cycles.len() < 2 {
        return None;
    }
    let (now, then) = (replay(cycles, from).cpu, replay(cycles, to).cpu);
    (now > 0.0).then(|| gc_ns * then / now)
}

/// What a larger heap costs in first touches: the replays' peaks at `from` and at `to`, the
/// pages of the difference (none where it shrinks) and their CPU at `fault_ns` a 4 KiB
/// first touch (the fault-4k term: an anonymous page faulted in and zeroed). The runtime
/// maps its heap as it grows, and each new page is faulted in once; the pages it returns
/// to the kernel (its scavenger) and touches again are not in it.
pub fn heap_faults(cycles: &[Cycle], from: Goal, to: Goal, fault_ns: f64) -> (f64, f64) {
    let grown = replay(cycles, to).peak_mb - replay(cycles, from).peak_mb;
    let pages = (grown.max(0.0) * 256.0).round();
    (pages, pages * fault_ns)
}

/// The fault-4k term's median, ns: what the larger heap's first touches are priced at.
pub fn fault_4k_ns(units: &crate::unit::Units) -> Option<f64> {
    units
        .get("fault-4k")
        .and_then(|u| u.summary())
        .map(|s| s.median)
}

/// The program's GC CPU, ns: its cycles' CPU summed.
pub fn gc_cpu(cycles: &[Cycle]) -> f64 {
    cycles.iter().map(|c| c.cpu_ns).sum()
}

/// The largest heap the trace saw, MiB.
pub fn peak_heap(cycles: &[Cycle]) -> f64 {
    cycles
        .iter()
        .map(|c| c.end_mb.max(c.start_mb))
        .fold(0.0, f64::max)
}

/// GOGC 2x and 4x from the program's own GC trace (`verify::gogc`): its cycles replayed at
/// each, the GC's share of its CPU scaled by the replay, less the larger heap's first
/// touches at `fault_ns` a page (the fault-4k term, where there is one), and the wall time
/// and throughput that the CPU saved would give at the CPUs it kept busy. None with fewer
/// than two cycles.
pub fn what_if(
    share_pct: f64,
    gogc: f64,
    cpu: &costlab_core::measure::Summary,
    wall_ns: Option<f64>,
    cycles: &[Cycle],
    fault_ns: Option<f64>,
) -> Option<crate::pricing::WhatIf> {
    let gc_ns = cpu.median * share_pct / 100.0;
    // The wall time the CPU saved would give back at the CPUs the program kept busy, and the
    // throughput of the same work in that time.
    let busy = wall_ns.filter(|w| *w > 0.0).map(|w| (cpu.median / w, w));
    let mut parts = Vec::new();
    let mut saved_2x = None;
    for k in [2.0, 4.0] {
        let then = predict(cycles, gc_ns, Goal::Gogc(gogc), Goal::Gogc(gogc * k))?;
        let (pages, heap_ns) = fault_ns.map_or((0.0, 0.0), |f| {
            heap_faults(cycles, Goal::Gogc(gogc), Goal::Gogc(gogc * k), f)
        });
        let saved = gc_ns - then - heap_ns;
        let heap = if pages > 0.0 {
            format!(
                ", of it {} more in faults for a heap {:.0} MiB larger",
                costlab_core::measure::units::human_ns(heap_ns),
                pages / 256.0
            )
        } else {
            String::new()
        };
        let throughput = busy.map_or(String::new(), |(b, w)| {
            let wall_saved = saved / b.max(1e-9);
            format!(
                ", throughput {:+.0}% if its {b:.2} busy CPUs were its limit",
                (w / (w - wall_saved).max(1.0) - 1.0) * 100.0
            )
        });
        parts.push(format!(
            "GOGC={:.0}: ~{:.1}% ({} less CPU{heap}{throughput})",
            gogc * k,
            share_pct * then / gc_ns.max(1.0),
            costlab_core::measure::units::human_ns(saved)
        ));
        saved_2x.get_or_insert(saved);
    }
    let saved = saved_2x?;
    Some(crate::pricing::WhatIf {
        what: "go-gogc",
        from: "its runtime's gctrace".into(),
        saved: vec![saved],
        after: 0,
        text: format!(
            "a Go program: its GC took {share_pct:.1}% of its CPU at GOGC={gogc:.0} over {} cycles; its cycles replayed at another heap goal give {}; less where it waited rather than computed",
            cycles.len(),
            parts.join(", ")
        ),
        rows: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "gc 1 @0.004s 3%: 0.009+0.39+0.005 ms clock, 0.019+0.10/0.33/0.19+0.010 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n\
        some output\n\
        gc 2 @0.010s 4%: 0.010+1.0+0.004 ms clock, 0.020+0.5/1.0/0.5+0.008 ms cpu, 4->5->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)\n";

    #[test]
    fn a_gctrace_line_gives_the_cycles_cpu_and_heap() {
        let c = cycles(TRACE);
        assert_eq!(c.len(), 2);
        assert!((c[0].cpu_ns - 0.649e6).abs() < 1.0, "{:?}", c[0]);
        assert_eq!((c[0].start_mb, c[0].end_mb, c[0].live_mb), (3.0, 4.0, 1.0));
        assert!((c[1].cpu_ns - 2.028e6).abs() < 1.0);
        assert!(cycles("gc 1 @0.1s 2%: garbled\n").is_empty());
        assert!(!c[0].forced);
    }

    /// gcbench's heap at GOGC=100 (go1.26 here): a build to 257 MiB live, a runtime.GC, then
    /// twice that allocated. At GOGC=400 the runtime ran 3 cycles (16, 80, then the forced
    /// one at 257 MiB live); the replay keeps the forced one where it was.
    #[test]
    fn a_forced_cycle_stays_where_the_program_forced_it() {
        let trace = "gc 1 @0.000s 5%: 0.04+3.5+0.009 ms clock, 0.04+1/1/1.5+0.01 ms cpu, 6->6->6 MB, 7 MB goal, 2 P
gc 2 @0.004s 41%: 0.03+13+0.05 ms clock, 0.03+4/4/5+0.05 ms cpu, 14->14->14 MB, 14 MB goal, 2 P
gc 3 @0.047s 21%: 0.04+8.8+0.05 ms clock, 0.04+3/3/2.8+0.05 ms cpu, 28->29->28 MB, 29 MB goal, 2 P
gc 4 @0.092s 16%: 0.04+14+0.03 ms clock, 0.04+5/5/4+0.03 ms cpu, 54->57->55 MB, 57 MB goal, 2 P
gc 5 @0.153s 14%: 0.03+35+0.06 ms clock, 0.03+12/12/11+0.06 ms cpu, 95->112->108 MB, 111 MB goal, 2 P
gc 6 @0.287s 15%: 0.08+82+0.06 ms clock, 0.08+30/30/22+0.06 ms cpu, 185->211->204 MB, 217 MB goal, 2 P
gc 7 @0.484s 13%: 0.04+90+0.005 ms clock, 0.09+0/44/123+0.008 ms cpu, 269->269->257 MB, 409 MB goal, 2 P (forced)
gc 8 @0.755s 22%: 0.09+232+0.06 ms clock, 0.25+108/98/0+0.13 ms cpu, 438->514->328 MB, 515 MB goal, 2 P
";
        let c = cycles(trace);
        assert_eq!(c.iter().filter(|x| x.forced).count(), 1);
        assert!(c[6].forced);
        let at_100 = replay(&c, Goal::Gogc(100.0)).cycles;
        let at_400 = replay(&c, Goal::Gogc(400.0)).cycles;
        assert_eq!(at_400, 3, "16, 80, then the forced one");
        assert!(at_100 >= 7, "{at_100}");
    }

    /// A steady program: 100 MiB live, 50 cycles at GOGC=100, 1 ms + 0.1 ms per live MiB each.
    fn steady() -> Vec<Cycle> {
        (0..50)
            .map(|_| Cycle {
                cpu_ns: 1e6 + 0.1e6 * 100.0,
                start_mb: 200.0,
                end_mb: 201.0,
                live_mb: 100.0,
                forced: false,
            })
            .collect()
    }

    #[test]
    fn a_steady_heap_at_twice_the_gogc_takes_half_the_cycles() {
        let c = steady();
        let (n1, n2) = (
            replay(&c, Goal::Gogc(100.0)).cycles,
            replay(&c, Goal::Gogc(200.0)).cycles,
        );
        // The runtime's first cycles come at its 4 MiB minimum heap, at either GOGC.
        assert!((n1 as f64 / n2 as f64 - 2.0).abs() < 0.2, "{n1} {n2}");
        let gc = gc_cpu(&c);
        let p = predict(&c, gc, Goal::Gogc(100.0), Goal::Gogc(200.0)).unwrap();
        assert!((p / gc - 0.5).abs() < 0.06, "{}", p / gc);
        // A limit of 4x the live heap with GOGC=off: room of 300 MiB a cycle, a third of them.
        let l = predict(&c, gc, Goal::Gogc(100.0), Goal::Limit(400.0)).unwrap();
        assert!((l / gc - 1.0 / 3.0).abs() < 0.08, "{}", l / gc);
    }

    /// 100 MiB live: a heap of 200 MiB at GOGC=100 and 300 at GOGC=200, so 100 MiB more
    /// first touched, 25600 pages; a limit below the heap it has grows nothing.
    #[test]
    fn a_larger_goal_faults_in_the_heap_it_adds() {
        let c = steady();
        let peak = |g| replay(&c, g).peak_mb;
        assert!(
            (peak(Goal::Gogc(100.0)) - 200.0).abs() < 1.5,
            "{}",
            peak(Goal::Gogc(100.0))
        );
        assert!((peak(Goal::Gogc(200.0)) - 300.0).abs() < 1.5);
        let (pages, ns) = heap_faults(&c, Goal::Gogc(100.0), Goal::Gogc(200.0), 1000.0);
        assert!((pages - 25600.0).abs() < 400.0, "{pages}");
        assert_eq!(ns, pages * 1000.0);
        assert_eq!(
            heap_faults(&c, Goal::Gogc(100.0), Goal::Limit(150.0), 1000.0),
            (0.0, 0.0)
        );
    }

    #[test]
    fn a_growing_heap_is_replayed_cycle_for_cycle() {
        // The live heap grows from 4 to 256 MiB: the early cycles come with the growth.
        let mut c = Vec::new();
        let mut live: f64 = 2.0;
        while live < 256.0 {
            let start = (live * 2.0).max(4.0);
            live = (live * 1.6).min(256.0);
            c.push(Cycle {
                cpu_ns: 0.5e6 + 0.05e6 * live,
                start_mb: start,
                end_mb: start,
                live_mb: live,
                forced: false,
            });
        }
        for _ in 0..5 {
            c.push(Cycle {
                cpu_ns: 0.5e6 + 0.05e6 * 256.0,
                start_mb: 512.0,
                end_mb: 512.0,
                live_mb: 256.0,
                forced: false,
            });
        }
        // Replayed at the GOGC it ran with, the trace gives back its own cycles.
        let n = replay(&c, Goal::Gogc(100.0)).cycles;
        assert!(n.abs_diff(c.len()) <= 2, "{n} of {}", c.len());
        let gc = gc_cpu(&c);
        let p = predict(&c, gc, Goal::Gogc(100.0), Goal::Gogc(200.0)).unwrap();
        assert!(p / gc > 0.3 && p / gc < 0.7, "{}", p / gc);
        assert!(predict(&c[..1], gc, Goal::Gogc(100.0), Goal::Gogc(200.0)).is_none());
    }

    #[test]
    fn the_plain_what_if_replays_the_trace_at_2x_and_4x() {
        let cpu = costlab_core::measure::Summary::of(&[1e9]).unwrap();
        let w = what_if(20.0, 100.0, &cpu, Some(1e9), &steady(), None).unwrap();
        assert_eq!(w.what, "go-gogc");
        // 20% of 1 s is GC; at GOGC=200 about half of it goes.
        assert!((w.saved[0] - 100e6).abs() < 15e6, "{:?}", w.saved);
        // With the heap's first touches priced: 100 MiB more heap, 25600 pages at 1 us.
        let f = what_if(20.0, 100.0, &cpu, Some(1e9), &steady(), Some(1000.0)).unwrap();
        assert!(
            (w.saved[0] - f.saved[0] - 25.6e6).abs() < 0.5e6,
            "{:?}",
            f.saved
        );
        assert!(
            f.text.contains("more in faults for a heap 100 MiB larger"),
            "{}",
            f.text
        );
        assert!(
            w.text.contains("GOGC=200: ~") && w.text.contains("GOGC=400: ~"),
            "{}",
            w.text
        );
        // 100 ms less of 1 s on one busy CPU: the same work in 0.9 s, 11% more throughput.
        assert!(
            w.text.contains("throughput +11% if its 1.00 busy CPUs"),
            "{}",
            w.text
        );
        assert!(what_if(20.0, 100.0, &cpu, None, &steady()[..1], None).is_none());
    }

    #[test]
    fn the_fit_is_a_fixed_part_and_a_part_per_live_mib() {
        let c: Vec<Cycle> = [10.0, 20.0, 40.0]
            .iter()
            .map(|&l| Cycle {
                cpu_ns: 2.0 + 3.0 * l,
                start_mb: 2.0 * l,
                end_mb: 2.0 * l,
                live_mb: l,
                forced: false,
            })
            .collect();
        let (f, s) = fit(&c);
        assert!((f - 2.0).abs() < 1e-6 && (s - 3.0).abs() < 1e-6, "{f} {s}");
        assert_eq!(fit(&steady()), (11e6, 0.0));
    }
}
