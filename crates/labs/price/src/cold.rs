//! Calls priced cold: a syscall (or a minor fault) that other work came before finds the
//! kernel's code and data for it out of the CPU's caches, and costs more than the same call in
//! the loop its term was timed in. The split counts each call by the time since the last call
//! of its kind on its CPU, by bucket (`prog::gaps`). The `cold-call` term is a curve: at each
//! of a few sweep sizes, the time the sweep took (its `latency`) and the extra ns a syscall
//! just after it costs over the same call in a loop (`extra_ns`). A bucket's calls are read on
//! that curve at their mean gap: no extra at no gap, straight between two measured sweeps,
//! and the largest sweep's extra beyond it. A line's unit is raised by its calls' mean extra.
//! A fault has a curve of its own, a factor (`per_ns_fault`): most of its cost is the page it
//! zeroes, which no cache holds either way, so it climbs less.
//!
//! The curve reads work as a sweep that takes as long, and work that keeps to a small set of
//! memory pushes out less than a sweep of new memory does: gzip compresses for about a
//! millisecond between two 32 KiB reads (a 32 MiB sweep's time) in a resident set of 2-3 MiB,
//! and its reads cost what they cost in a loop, where the whole curve priced them 4 us a call
//! more (2.09x; 2026-12-07, the 2-vCPU EPYC guest). The work between two calls can have
//! touched at most the memory of the process that made them: the curve is cut at the largest
//! resident set of the program's processes (`Counts::max_rss`), its extra flat past the
//! largest sweep within it (the smallest sweep where the resident set is smaller still).

use costlab_core::measure::units::human_ns;

use crate::measured::prog::gaps::BOUNDS;
use crate::measured::Split;
use crate::unit::{Unit, Units};

/// The cost term, and the name a price asks for it by.
pub const TERM: &str = "cold-call";

/// The unit name of the curve's point at a sweep of `size` bytes (its `latency`; its
/// `extra_ns` is this with "/ns", its `per_ns_fault` with "/fault").
pub fn point(size: u64) -> String {
    format!("{TERM}({size})")
}

/// Which calls a curve is of: the syscalls ("/ns": extra ns a call) or the minor faults
/// ("/fault": extra ns per ns of the fault in a loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    Calls,
    Faults,
    /// The syscalls after as long in the basket's other syscalls (`after_calls_ns`).
    AfterCalls,
}

impl Of {
    fn suffix(self) -> &'static str {
        match self {
            Of::Calls => "/ns",
            Of::Faults => "/fault",
            Of::AfterCalls => "/calls",
        }
    }

    /// The curve a line of `class` ("fault" or a syscall's) is read on.
    fn for_class(class: &str) -> Of {
        if class == "fault" {
            Of::Faults
        } else {
            Of::Calls
        }
    }
}

/// The curve: (the sweep's median ns, the extra's samples), in order of the sweep's time.
pub struct Curve {
    points: Vec<(f64, Vec<f64>)>,
    /// Where its figures come from, for the note: "run ...".
    from: String,
}

impl Curve {
    /// The curve of `of` in `units`: each point whose sweep and extra are both there.
    pub fn of(units: &Units, of: Of) -> Option<Curve> {
        Curve::within(units, of, 0)
    }

    /// The same, cut at `footprint` bytes (0: not cut): only the points whose sweep is no
    /// larger, or the smallest one where none is.
    pub fn within(units: &Units, of: Of, footprint: u64) -> Option<Curve> {
        let mut points = Vec::new();
        let mut from = String::new();
        for (k, u) in units {
            if !k.starts_with(&format!("{TERM}(")) || !k.ends_with(')') {
                continue;
            }
            let (Some(t), Some(e)) = (u.summary(), units.get(&format!("{k}{}", of.suffix())))
            else {
                continue;
            };
            if t.median > 0.0 && !e.samples.is_empty() {
                points.push((size_of(k), t.median, e.samples.clone()));
                from.clone_from(&e.from);
            }
        }
        points.sort_by(|a, b| a.1.total_cmp(&b.1));
        if footprint > 0 {
            let smallest = points.iter().map(|p| p.0).min().unwrap_or(0);
            points.retain(|p| p.0 <= footprint.max(smallest));
        }
        let points: Vec<(f64, Vec<f64>)> = points.into_iter().map(|(_, t, e)| (t, e)).collect();
        (!points.is_empty()).then_some(Curve { points, from })
    }

    /// The extra a call costs after `gap` ns of other work (ns, or per ns of the same call in
    /// a loop, as the curve is): sample `i` of each point's extra (cycled).
    pub fn extra_at(&self, gap: f64, i: usize) -> f64 {
        let at = |e: &Vec<f64>| e[i % e.len()];
        let (mut t0, mut e0) = (0.0, 0.0);
        for (t, e) in &self.points {
            let e1 = at(e);
            if gap <= *t {
                return e0 + (e1 - e0) * (gap - t0).max(0.0) / (t - t0).max(1e-9);
            }
            (t0, e0) = (*t, e1);
        }
        e0
    }

    /// The samples the extra has: the most any point has.
    fn samples(&self) -> usize {
        self.points.iter().map(|p| p.1.len()).max().unwrap_or(1)
    }

    /// A line's calls' mean extra as `mean_extra`, each gap read in two parts: `share` of it
    /// spent in the program's syscalls, read on `calls` (the extra after as long in other
    /// calls), and the rest on this curve (a sweep), the two added, at most the larger of the
    /// two curves' extra at the whole gap (neither kind of work can push out more than all of
    /// it). None without calls.
    pub fn mean_extra_split(
        &self,
        calls: &Curve,
        share: f64,
        gaps: &[[u64; 2]],
    ) -> Option<Vec<f64>> {
        let share = share.clamp(0.0, 1.0);
        let samples = self.samples().max(calls.samples());
        bucket_mean(gaps, samples, |g, i| {
            let whole = self.extra_at(g, i).max(calls.extra_at(g, i));
            (self.extra_at(g * (1.0 - share), i) + calls.extra_at(g * share, i)).min(whole)
        })
    }

    /// A line's calls' mean extra by their gaps' buckets (each at its mean gap), one for each
    /// sample of the curve; None without calls.
    pub fn mean_extra(&self, gaps: &[[u64; 2]]) -> Option<Vec<f64>> {
        bucket_mean(gaps, self.samples(), |g, i| self.extra_at(g, i))
    }
}

/// The calls' mean of `extra(gap, sample)` over the buckets of `gaps` ([calls, sum of their
/// gaps] each, read at its mean gap), one for each of `samples`; None without calls.
fn bucket_mean(
    gaps: &[[u64; 2]],
    samples: usize,
    extra: impl Fn(f64, usize) -> f64,
) -> Option<Vec<f64>> {
    let calls: u64 = gaps.iter().map(|g| g[0]).sum();
    if calls == 0 {
        return None;
    }
    Some(
        (0..samples)
            .map(|i| {
                gaps.iter()
                    .filter(|g| g[0] > 0)
                    .map(|&[n, sum]| n as f64 * extra(sum as f64 / n as f64, i))
                    .sum::<f64>()
                    / calls as f64
            })
            .collect(),
    )
}

/// The sweep size a point's unit name says (`cold-call(1048576)`), 0 where it says none.
fn size_of(key: &str) -> u64 {
    key.strip_prefix(&format!("{TERM}("))
        .and_then(|k| k.strip_suffix(')'))
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

/// Whether `units` hold the curve (at least one point whole).
pub fn has_curve(units: &Units) -> bool {
    Curve::of(units, Of::Calls).is_some()
}

/// Name the curve's points as the term too (`TERM`), so a price that needs the term finds it:
/// their rows together, a not-ok one first (the quality a note reads is the first row's).
pub fn alias(units: &mut Units) {
    if units.contains_key(TERM) {
        return;
    }
    let Some(curve) = Curve::of(units, Of::Calls) else {
        return;
    };
    let mut rows: Vec<_> = units
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{TERM}(")))
        .flat_map(|(_, u)| u.rows.iter().cloned())
        .collect();
    rows.sort_by_key(|r| r.quality == Some(costlab_core::measure::quality::Quality::Ok));
    units.insert(
        TERM.into(),
        Unit {
            samples: vec![curve.points.last().map_or(0.0, |p| p.0)],
            rows,
            from: curve.from,
        },
    );
}

/// The split's buckets for a priced syscall or fault (by its name, or a call's without its fd
/// kind).
fn gaps_of<'a>(split: &'a Split, class: &str, name: &str) -> Option<&'a [[u64; 2]]> {
    let of = |e: &str| {
        split
            .lines
            .iter()
            .find(|l| l.class == class && l.event == e && !l.since_same.is_empty())
    };
    // A call's name without the kind of fd its calls went to (`read:file` is a `read`).
    let base = name.split_once(':').map_or(name, |(b, _)| b);
    of(name)
        .or_else(|| of(base))
        .map(|l| l.since_same.as_slice())
}

/// What a line's calls cost more for the work between them: their mean extra, one for each
/// sample of the curve, in ns a call (`add`) or per ns of the unit.
pub struct Cold {
    pub extra: Vec<f64>,
    pub add: bool,
}

/// The mean extra of a syscall's calls or a minor fault kind's faults (`class` syscall or
/// fault), where the split counted their gaps and the term is in `units`. A syscall priced at
/// no unit of its own (`unit` "none": another line prices its work) has none.
///
/// An exec is a syscall here too, its extra added: read on the faults' curve as a factor
/// instead, `true`'s one exec (75 us in the loop) priced 400 us where it took 234 us, and a
/// shell loop's 252 us where they took 143 us (2026-12-07, the Xeon guest).
pub fn extra_of(
    counts: &crate::count::Counts,
    units: &Units,
    class: &str,
    name: &str,
    unit: &str,
) -> Option<Cold> {
    if unit == "none" {
        return None;
    }
    let of = Of::for_class(class);
    let split = counts.measured.as_ref()?;
    let sweep = Curve::within(units, of, counts.max_rss)?;
    let gaps = gaps_of(split, class, name)?;
    let extra = match Curve::of(units, Of::AfterCalls).filter(|_| of == Of::Calls) {
        Some(calls) => sweep.mean_extra_split(&calls, call_share(split), gaps)?,
        None => sweep.mean_extra(gaps)?,
    };
    Some(Cold {
        extra,
        add: of == Of::Calls,
    })
}

/// The share of the program's CPU time the split measured inside its syscalls: the part of a
/// gap between two calls of a kind taken, on the whole, by its other calls.
pub fn call_share(split: &Split) -> f64 {
    let all: u64 = split.lines.iter().map(|l| l.cpu_ns).sum();
    let calls: u64 = split
        .lines
        .iter()
        .filter(|l| l.class == "syscall")
        .map(|l| l.cpu_ns)
        .sum();
    if all == 0 {
        0.0
    } else {
        calls as f64 / all as f64
    }
}

/// `unit` raised by a line's `cold`: each sample plus its extra ns, or times one plus its
/// extra; the term's figures joining the unit's.
pub fn raised(unit: &Unit, units: &Units, cold: &Cold) -> Unit {
    let mut u = unit.clone();
    let extra = &cold.extra;
    if extra.is_empty() {
        return u;
    }
    for (i, x) in u.samples.iter_mut().enumerate() {
        let e = extra[i % extra.len()];
        *x = if cold.add { *x + e } else { *x * (1.0 + e) };
    }
    let mean = extra.iter().sum::<f64>() / extra.len() as f64;
    if let Some(t) = units.get(TERM) {
        u.rows.extend(t.rows.iter().cloned());
    }
    let by = if cold.add {
        format!("{} a call", human_ns(mean))
    } else {
        format!("{:.0}%", mean * 100.0)
    };
    u.from = format!(
        "{}, raised {by} for the work between its calls (cost term {TERM})",
        u.from
    );
    u
}

/// The note that says what the cold calls added: the calls the split saw, the curve, and their
/// mean extra.
pub fn note(counts: &crate::count::Counts, units: &Units) -> Option<String> {
    let split = counts.measured.as_ref()?;
    let footprint = counts.max_rss;
    let curves = [Of::Calls, Of::Faults].map(|of| Curve::within(units, of, footprint));
    let (mut calls, mut cold) = (0u64, 0u64);
    for l in split
        .lines
        .iter()
        .filter(|l| l.class == "syscall" || l.class == "fault")
    {
        let n: u64 = l.since_same.iter().map(|g| g[0]).sum();
        if n > 0 {
            calls += n;
            // The calls 2^16 ns (65.5 us) or more after the last of their kind, the last two
            // buckets (`skip`: a counts file given by hand may hold fewer).
            cold += l
                .since_same
                .iter()
                .skip(BOUNDS.len() - 2)
                .map(|g| g[0])
                .sum::<u64>();
        }
    }
    let said = |c: &Option<Curve>, add: bool| {
        c.as_ref().map_or("not measured".to_string(), |c| {
            c.points
                .iter()
                .map(|(t, e)| {
                    let mut e = e.clone();
                    e.sort_by(f64::total_cmp);
                    let m = e[e.len() / 2];
                    match add {
                        true => format!("+{} after {}", human_ns(m), human_ns(*t)),
                        false => format!("{:.2}x after {}", 1.0 + m, human_ns(*t)),
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let from = curves[0]
        .as_ref()?
        .from
        .trim_start_matches("run ")
        .to_string();
    let after_calls = match Curve::of(units, Of::AfterCalls) {
        Some(c) => format!(
            "; a syscall's gap is read in two parts, {:.0}% of it (the program's CPU time in its syscalls) on the same calls after as long in their other calls, {}, and the rest on the sweeps",
            call_share(split) * 100.0,
            said(&Some(c), true)
        ),
        None => format!(
            "; the cold-call figures have no curve after other calls (after_calls_ns, measured since 2026-12-07: costlab cost --terms {TERM}), so a syscall's whole gap is read on the sweeps"
        ),
    };
    (calls > 0).then(|| {
        format!(
            "calls after other work: the split timed, for each of {calls} syscalls and minor faults, the time since the last of its kind on its CPU ({:.0}% of them came 65 us or more after it); against the same call in a loop, a syscall costs {} of work, a fault {} (cost term {TERM}: getppid, stat, open and close, mmap and munmap, a 4 KiB pread, and a fault of a fresh page, each after a sweep of memory){after_calls}; each line's unit is raised by its own calls' gaps read on those curves{} ({from})",
            cold as f64 / calls as f64 * 100.0,
            said(&curves[0], true),
            said(&curves[1], false),
            if footprint > 0 {
                format!(
                    ", cut at the sweeps within the largest resident set of its processes, {} (work between two calls touches at most that)",
                    costlab_core::measure::sizes::human_size(footprint)
                )
            } else {
                String::new()
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: Vec<f64>, from: &str) -> Unit {
        Unit {
            samples: v,
            rows: Vec::new(),
            from: from.into(),
        }
    }

    /// A curve of two points: 1 us of sweep gives +0.5, 10 us gives +3.
    fn two_points() -> Units {
        let mut units = Units::new();
        units.insert(point(1 << 20), unit(vec![1_000.0], "run r1"));
        units.insert(format!("{}/ns", point(1 << 20)), unit(vec![0.5], "run r1"));
        units.insert(point(8 << 20), unit(vec![10_000.0], "run r1"));
        units.insert(format!("{}/ns", point(8 << 20)), unit(vec![3.0], "run r1"));
        units
    }

    #[test]
    fn the_curve_is_straight_between_its_points_and_flat_past_the_last() {
        let c = Curve::of(&two_points(), Of::Calls).unwrap();
        assert_eq!(c.extra_at(0.0, 0), 0.0);
        assert!((c.extra_at(500.0, 0) - 0.25).abs() < 1e-9);
        assert!((c.extra_at(1_000.0, 0) - 0.5).abs() < 1e-9);
        assert!((c.extra_at(5_500.0, 0) - 1.75).abs() < 1e-9);
        assert_eq!(c.extra_at(1e9, 0), 3.0);
    }

    /// Cut at a resident set of 2 MiB, the 8 MiB sweep is past what the work between two
    /// calls can have touched: the curve stays flat at the 1 MiB point's extra. A resident set
    /// below the smallest sweep keeps that one; none known (0), the whole curve.
    #[test]
    fn the_curve_is_cut_at_the_largest_resident_set() {
        let units = two_points();
        assert_eq!(size_of(&point(8 << 20)), 8 << 20);
        assert_eq!(size_of(TERM), 0);
        let cut = Curve::within(&units, Of::Calls, 2 << 20).unwrap();
        assert_eq!(cut.extra_at(1e9, 0), 0.5);
        assert!((cut.extra_at(500.0, 0) - 0.25).abs() < 1e-9);
        let small = Curve::within(&units, Of::Calls, 4096).unwrap();
        assert_eq!(small.extra_at(1e9, 0), 0.5);
        assert_eq!(
            Curve::within(&units, Of::Calls, 0)
                .unwrap()
                .extra_at(1e9, 0),
            3.0
        );
        assert_eq!(
            Curve::within(&units, Of::Calls, 8 << 20)
                .unwrap()
                .extra_at(1e9, 0),
            3.0
        );
    }

    #[test]
    fn a_lines_extra_is_its_buckets_read_at_their_mean_gaps() {
        let c = Curve::of(&two_points(), Of::Calls).unwrap();
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        // Ten calls with no gap to speak of, ten at 5.5 us, ten long after.
        g[0] = [10, 0];
        g[3] = [10, 55_000];
        g[6] = [10, 10 * 5_000_000];
        let e = c.mean_extra(&g).unwrap();
        assert!((e[0] - (0.0 + 1.75 + 3.0) / 3.0).abs() < 1e-9, "{e:?}");
        assert_eq!(c.mean_extra(&[[0, 0]; 7]), None);
    }

    /// The sweeps' curve of `two_points` and an after-calls curve a fifth as steep: 1 us of
    /// other calls gives +0.1, 10 us +0.6.
    fn with_calls() -> Units {
        let mut units = two_points();
        units.insert(
            format!("{}/calls", point(1 << 20)),
            unit(vec![0.1], "run r1"),
        );
        units.insert(
            format!("{}/calls", point(8 << 20)),
            unit(vec![0.6], "run r1"),
        );
        units
    }

    #[test]
    fn a_gap_in_calls_is_read_on_their_curve_and_the_rest_on_the_sweeps() {
        let units = with_calls();
        let sweep = Curve::of(&units, Of::Calls).unwrap();
        let calls = Curve::of(&units, Of::AfterCalls).unwrap();
        let mut g = vec![[0u64; 2]; BOUNDS.len() + 1];
        g[6] = [10, 10 * 10_000];
        // All of it in other calls: the calls' curve at 10 us.
        let all = sweep.mean_extra_split(&calls, 1.0, &g).unwrap();
        assert!((all[0] - 0.6).abs() < 1e-9, "{all:?}");
        // None of it: the sweeps' curve, as before.
        let none = sweep.mean_extra_split(&calls, 0.0, &g).unwrap();
        assert_eq!(none, sweep.mean_extra(&g).unwrap());
        // Half: 5 us on each, 1.5 + 0.3.
        let half = sweep.mean_extra_split(&calls, 0.5, &g).unwrap();
        let want = sweep.extra_at(5_000.0, 0) + calls.extra_at(5_000.0, 0);
        assert!((half[0] - want).abs() < 1e-9, "{half:?}");
        // Past the last points both curves are flat: the parts add to no more than the whole.
        g[6] = [10, 10 * 100_000_000];
        let far = sweep.mean_extra_split(&calls, 0.5, &g).unwrap();
        assert!((far[0] - 3.0).abs() < 1e-9, "{far:?}");
        assert_eq!(sweep.mean_extra_split(&calls, 0.5, &[[0, 0]; 7]), None);
    }

    #[test]
    fn the_calls_share_is_the_syscalls_part_of_the_measured_cpu_time() {
        let line = |class: &str, cpu_ns: u64| crate::measured::Line {
            class: class.into(),
            event: "x".into(),
            cpu_ns,
            ..crate::measured::Line::default()
        };
        let split = Split {
            lines: vec![
                line("user", 100),
                line("syscall", 250),
                line("syscall", 50),
                line("fault", 100),
            ],
            ..Split::default()
        };
        assert!((call_share(&split) - 0.6).abs() < 1e-9);
        assert_eq!(call_share(&Split::default()), 0.0);
    }

    #[test]
    fn a_fault_is_read_on_its_own_curve() {
        let mut units = two_points();
        assert!(Curve::of(&units, Of::Faults).is_none());
        units.insert(
            format!("{}/fault", point(1 << 20)),
            unit(vec![0.1], "run r1"),
        );
        let f = Curve::of(&units, Of::Faults).unwrap();
        assert!((f.extra_at(1e9, 0) - 0.1).abs() < 1e-9);
        assert_eq!(Of::for_class("fault"), Of::Faults);
        assert_eq!(Of::for_class("syscall"), Of::Calls);
    }

    #[test]
    fn no_curve_without_a_whole_point() {
        let mut units = Units::new();
        units.insert(point(1 << 20), unit(vec![1_000.0], "run r1"));
        assert!(!has_curve(&units));
        units.insert(format!("{}/ns", point(1 << 20)), unit(vec![0.5], "run r1"));
        assert!(has_curve(&units));
        alias(&mut units);
        assert!(units.contains_key(TERM));
    }

    #[test]
    fn a_raised_unit_carries_the_terms_figures() {
        let mut units = two_points();
        alias(&mut units);
        let by = |extra: f64, add: bool| Cold {
            extra: vec![extra],
            add,
        };
        let u = raised(
            &unit(vec![1000.0, 1100.0], "run r0"),
            &units,
            &by(0.3, false),
        );
        assert_eq!(u.samples, vec![1300.0, 1430.0]);
        assert!(u.from.contains("cold-call"), "{}", u.from);
        let u = raised(
            &unit(vec![1000.0, 1100.0], "run r0"),
            &units,
            &by(250.0, true),
        );
        assert_eq!(u.samples, vec![1250.0, 1350.0]);
    }
}
