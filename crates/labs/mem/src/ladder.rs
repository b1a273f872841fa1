//! Naming a plateau only where the curve supports it.
//!
//! `plateaus::levels` names a plateau by the cache its sizes fit in. That alone can name a
//! plateau L3 that is no L3 hit: on a VM the host shares its L3 with other guests, so a chase
//! over a few MiB may already pay half a trip to memory, and still look flat. A level is a
//! step of a ladder: each cache level is clearly faster than the next one measured, and every
//! cache hit is well under a DRAM load (on a core that owns its caches an L3 hit takes 10-35%
//! of a dependent DRAM load, L1 and L2 far less). Where the curve has no DRAM point (it stops
//! inside the cache the machine reports, as on a VM that reports its host's whole L3), a level
//! also rises at most 16x over the one below it: further up, the loads go to memory. A plateau
//! that does not fit the ladder keeps its figure, marked `level: none` with the level its
//! sizes suggested (`candidate`), and one line says why no level is named.

use serde_json::Value;

use costlab_core::measure::quality;
use costlab_core::measure::sizes::human_size;
use costlab_history::report::{Headline, Outcome, ResultRow};

use super::block_of;
use super::plateaus::{Level, LevelFigure, Point};

/// A cache level's latency is at most this share of DRAM's: above it, a "hit" is partly a
/// trip to memory.
pub const MAX_SHARE_OF_DRAM: f64 = 0.4;

/// Each cache level is at least this many times faster than the next plateau measured.
pub const MIN_STEP: f64 = 1.5;

/// Where no DRAM point was measured, a cache level is at most this many times slower than the
/// one below it (L1 to L2 and L2 to L3 are 3-10x on today's cores, page walks included; L2 to
/// memory is 25x and more): a plateau further up is loads that go to memory, whatever size the
/// machine reports for its last cache.
pub const MAX_RISE: f64 = 16.0;

/// The value of the `level` key on a plateau that fits no level.
pub const NONE: &str = "none";

/// Why a plateau is given no level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// Its latency is too close to DRAM's for a cache hit.
    NearDram { dram_ns: f64 },
    /// It is not clearly faster than the plateau above it.
    NotBelow { next: Level, next_ns: f64 },
    /// The plateau below it is not clearly faster: the two cannot be told apart.
    NotAbove { below: Level, below_ns: f64 },
    /// It is too far above the plateau below for the next cache level.
    FarAbove { below: Level, below_ns: f64 },
}

/// A plateau the sizes would have named `figure.level`, and why the ladder refuses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unnamed {
    pub figure: LevelFigure,
    pub ns: f64,
    pub why: Why,
}

/// Hold the named levels to the ladder: those that fit, and those that do not with why. DRAM
/// (the end of the curve) is always kept.
pub fn hold(points: &[Point], figures: Vec<LevelFigure>) -> (Vec<LevelFigure>, Vec<Unnamed>) {
    let ns = |f: &LevelFigure| points[f.point].ns;
    let dram = figures.iter().find(|f| f.level == Level::Dram).map(&ns);
    let caches: Vec<&LevelFigure> = figures.iter().filter(|f| f.level != Level::Dram).collect();
    let mut kept = Vec::new();
    let mut refused = Vec::new();
    for (i, f) in caches.iter().enumerate() {
        let x = ns(f);
        let next = caches.get(i + 1).map(|n| (n.level, ns(n)));
        let below = i.checked_sub(1).map(|j| (caches[j].level, ns(caches[j])));
        let why = match (dram, next, below) {
            (Some(d), _, _) if x > MAX_SHARE_OF_DRAM * d => Some(Why::NearDram { dram_ns: d }),
            (_, Some((next, next_ns)), _) if x * MIN_STEP > next_ns => {
                Some(Why::NotBelow { next, next_ns })
            }
            (_, _, Some((below, below_ns))) if below_ns * MIN_STEP > x => {
                Some(Why::NotAbove { below, below_ns })
            }
            (None, _, Some((below, below_ns))) if x > below_ns * MAX_RISE => {
                Some(Why::FarAbove { below, below_ns })
            }
            _ => None,
        };
        match why {
            Some(why) => refused.push(Unnamed {
                figure: **f,
                ns: x,
                why,
            }),
            None => kept.push(**f),
        }
    }
    kept.extend(figures.iter().filter(|f| f.level == Level::Dram).copied());
    (kept, refused)
}

/// Why no level is named, in one line: the plateau's figure, the one it was held against and
/// the rule.
pub fn why_text(level: &str, ns: f64, why: &Why) -> String {
    match *why {
        Why::NearDram { dram_ns } => format!(
            "{ns:.1} ns is {:.2}x DRAM's {dram_ns:.0} ns, and a cache hit takes well under a DRAM load (at most {MAX_SHARE_OF_DRAM}x): these loads are partly served by memory, so this is not {level} (on a VM the host shares its L3 with other guests)",
            ns / dram_ns
        ),
        Why::NotBelow { next, next_ns } => format!(
            "{ns:.1} ns is not clearly below the next plateau ({next}, {next_ns:.1} ns; a level is at least {MIN_STEP}x faster than the next), so the curve does not resolve {level} from it"
        ),
        Why::NotAbove { below, below_ns } => format!(
            "{ns:.1} ns is not clearly above the plateau below ({below}, {below_ns:.1} ns; a level is at least {MIN_STEP}x slower than the one before), so the curve does not resolve {level} from it"
        ),
        Why::FarAbove { below, below_ns } => format!(
            "{ns:.1} ns is {:.0}x the plateau below ({below}, {below_ns:.1} ns), and a cache level is at most {MAX_RISE:.0}x the one below it: these loads go to memory, so this is not {level} whatever size the machine reports for it (on a VM the host's L3 is shared with other guests)",
            ns / below_ns
        ),
    }
}

/// The rows and notes for the plateaus the ladder refused, of one page kind: each plateau's
/// figure with `level: none` and the level its sizes suggested as `candidate`; a note each
/// where `notes` is wanted (the first page kind, as for the other level notes).
pub(super) fn unnamed_rows(
    rows: &[&ResultRow],
    points: &[Point],
    unnamed: &[Unnamed],
    caches: [Option<u64>; 3],
    kind: &str,
    notes: Option<&mut Vec<String>>,
) -> Vec<ResultRow> {
    let mut out = Vec::new();
    let mut lines = Vec::new();
    for u in unnamed {
        let mut row = rows[u.figure.point].clone();
        let level = u.figure.level;
        row.case.insert("level".into(), Value::from(NONE));
        row.case
            .insert("candidate".into(), Value::from(level.name()));
        let cache = match level {
            Level::L1 => caches[0],
            Level::L2 => caches[1],
            Level::L3 => caches[2],
            Level::Dram => None,
        };
        if let Some(c) = cache {
            row.case.insert("cache".into(), Value::from(c));
        }
        let (from, to) = (
            points[u.figure.plateau.first].size,
            points[u.figure.plateau.last].size,
        );
        row.case.insert("plateau_from".into(), Value::from(from));
        row.case.insert("plateau_to".into(), Value::from(to));
        lines.push(format!(
            "no level named for the plateau {}–{} ({kind} pages, where the sizes suggest {}): {}",
            human_size(from),
            human_size(to),
            level.name(),
            why_text(level.name(), u.ns, &u.why)
        ));
        out.push(row);
    }
    if let Some(n) = notes {
        n.extend(lines);
    }
    out
}

/// The cost sheet's lines for the plateaus given no level (4 KiB pages): the curve's own
/// figure, and why no level is named.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let dram = out
        .results
        .iter()
        .find(|r| r.key("level") == Level::Dram.name() && r.key("pages") == "4k");
    out.results
        .iter()
        .filter(|r| r.key("level") == NONE && r.key("pages") == "4k")
        .map(|r| {
            let candidate = r.key("candidate");
            let why = why_of(out, r, dram);
            let mut inputs = vec![r];
            inputs.extend(dram.filter(|_| matches!(why, Some(Why::NearDram { .. }))));
            let cache = r
                .case
                .get("cache")
                .and_then(Value::as_u64)
                .map_or(String::new(), |c| {
                    format!(" (the machine reports a {} {candidate})", human_size(c))
                });
            let because = match &why {
                Some(w) => why_text(&candidate, r.summary.median, w),
                None => "the curve does not fit the ladder of levels".into(),
            };
            Headline {
                label: format!("chase at {}, no level", human_size(block_of(r))),
                summary: r.summary,
                unit: r.unit.clone(),
                reading: format!(
                    "{}: a plateau {}–{}{cache}; no level named: {because}",
                    quality::quote_row(format!("{:.0} ns", r.summary.median), r),
                    human_size(num(r, "plateau_from")),
                    human_size(num(r, "plateau_to")),
                ),
                ..Default::default()
            }
            .judged_by(&inputs)
        })
        .collect()
}

fn num(r: &ResultRow, key: &str) -> u64 {
    r.case.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The reason a stored `level: none` row carries, found again from the rows beside it: the
/// DRAM rule first, then the step to the nearest named level above or below.
fn why_of(out: &Outcome, r: &ResultRow, dram: Option<&ResultRow>) -> Option<Why> {
    let ns = r.summary.median;
    if let Some(d) = dram.map(|d| d.summary.median) {
        if ns > MAX_SHARE_OF_DRAM * d {
            return Some(Why::NearDram { dram_ns: d });
        }
    }
    let named = |l: Level| {
        out.results
            .iter()
            .find(|x| x.key("level") == l.name() && x.key("pages") == r.key("pages"))
            .map(|x| x.summary.median)
    };
    let me = Level::ALL
        .into_iter()
        .find(|l| l.name() == r.key("candidate"))?;
    let above = Level::ALL
        .into_iter()
        .filter(|l| *l > me && *l != Level::Dram)
        .find_map(|l| named(l).map(|v| (l, v)));
    if let Some((next, next_ns)) = above.filter(|(_, v)| ns * MIN_STEP > *v) {
        return Some(Why::NotBelow { next, next_ns });
    }
    let below = Level::ALL
        .into_iter()
        .rev()
        .filter(|l| *l < me)
        .find_map(|l| named(l).map(|v| (l, v)));
    let (below, below_ns) = below?;
    if below_ns * MIN_STEP > ns {
        Some(Why::NotAbove { below, below_ns })
    } else if dram.is_none() && ns > below_ns * MAX_RISE {
        Some(Why::FarAbove { below, below_ns })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plateaus::{find_plateaus, levels, Plateau};
    use crate::{headlines as sheet, latency::analyse_latency, render, LAB};
    use costlab_core::case;
    use costlab_core::machine::{Cache, Machine};

    const K: u64 = 1024;
    const M: u64 = 1024 * K;

    fn fig(level: Level, i: usize) -> LevelFigure {
        LevelFigure {
            level,
            plateau: Plateau { first: i, last: i },
            point: i,
        }
    }

    fn pts(ns: &[f64]) -> Vec<Point> {
        ns.iter()
            .enumerate()
            .map(|(i, &ns)| Point {
                size: 4096 << (2 * i),
                ns,
            })
            .collect()
    }

    #[test]
    fn a_ladder_that_fits_keeps_every_level() {
        let p = pts(&[1.0, 3.5, 12.0, 90.0]);
        let all = vec![
            fig(Level::L1, 0),
            fig(Level::L2, 1),
            fig(Level::L3, 2),
            fig(Level::Dram, 3),
        ];
        let (kept, refused) = hold(&p, all.clone());
        assert_eq!(kept, all);
        assert!(refused.is_empty());
    }

    #[test]
    fn a_plateau_near_dram_or_beside_its_neighbour_is_refused() {
        // L3 at half of DRAM's time: not a hit.
        let p = pts(&[1.0, 3.5, 180.0, 400.0]);
        let (kept, refused) = hold(
            &p,
            vec![
                fig(Level::L1, 0),
                fig(Level::L2, 1),
                fig(Level::L3, 2),
                fig(Level::Dram, 3),
            ],
        );
        let names: Vec<Level> = kept.iter().map(|f| f.level).collect();
        assert_eq!(names, [Level::L1, Level::L2, Level::Dram]);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].why, Why::NearDram { dram_ns: 400.0 });
        // L2 and L3 within 1.5x of each other: neither is resolved from the other.
        let p = pts(&[1.0, 10.0, 12.0, 120.0]);
        let (kept, refused) = hold(
            &p,
            vec![
                fig(Level::L1, 0),
                fig(Level::L2, 1),
                fig(Level::L3, 2),
                fig(Level::Dram, 3),
            ],
        );
        assert_eq!(
            kept.iter().map(|f| f.level).collect::<Vec<_>>(),
            [Level::L1, Level::Dram]
        );
        assert!(matches!(
            refused[0].why,
            Why::NotBelow {
                next: Level::L3,
                ..
            }
        ));
        assert!(matches!(
            refused[1].why,
            Why::NotAbove {
                below: Level::L2,
                ..
            }
        ));
        // Without DRAM only the steps count.
        let p = pts(&[1.0, 3.5]);
        let (kept, refused) = hold(&p, vec![fig(Level::L1, 0), fig(Level::L2, 1)]);
        assert_eq!(kept.len(), 2);
        assert!(refused.is_empty());
        // A machine that reports a 480 MiB L3 and a curve that ends at 256 MiB: the last
        // plateau, 190x L2, is memory, not L3, though no DRAM point was measured.
        let p = pts(&[1.3, 4.7, 889.0]);
        let (kept, refused) = hold(
            &p,
            vec![fig(Level::L1, 0), fig(Level::L2, 1), fig(Level::L3, 2)],
        );
        assert_eq!(kept.len(), 2);
        assert_eq!(
            refused[0].why,
            Why::FarAbove {
                below: Level::L2,
                below_ns: 4.7
            }
        );
        assert!(why_text("L3", 889.0, &refused[0].why).contains("189x the plateau below"));
    }

    fn chase(size: u64, samples: Vec<f64>) -> ResultRow {
        ResultRow::new(
            LAB,
            case! {"op" => "chase", "pattern" => "rand", "pages" => "4k", "block" => size, "threads" => 1},
            "latency",
            "ns",
            samples,
        )
        .unwrap()
    }

    fn cache(level: u8, size: u64) -> Cache {
        Cache {
            level,
            kind: if level == 1 { "Data" } else { "Unified" }.into(),
            size,
            line: 64,
            shared_by: vec![],
        }
    }

    /// The host: a 4 MiB chase at 176-185 ns, DRAM at 383-416 ns, an L3 of 32 MiB
    /// reported. The sizes say L3; the ladder does not, and the sheet says why.
    #[test]
    fn a_4_mib_chase_at_half_of_dram_is_not_named_l3() {
        let curve: [(u64, Vec<f64>); 10] = [
            (4 * K, vec![1.5; 5]),
            (16 * K, vec![1.5; 5]),
            (64 * K, vec![4.9; 5]),
            (256 * K, vec![5.3; 5]),
            (M, vec![5.8; 5]),
            (2 * M, vec![90.0; 5]),
            (4 * M, vec![176.0, 179.0, 181.0, 183.0, 185.0]),
            (8 * M, vec![190.0; 5]),
            (64 * M, vec![370.0; 5]),
            (256 * M, vec![383.0, 395.0, 400.0, 408.0, 416.0]),
        ];
        let mut out = Outcome::default();
        for (size, s) in curve.iter().cloned() {
            out.results.push(chase(size, s));
        }
        // The sizes alone would name the 4-8 MiB plateau L3.
        let points: Vec<Point> = out
            .results
            .iter()
            .map(|r| Point {
                size: block_of(r),
                ns: r.summary.median,
            })
            .collect();
        let caches = [Some(48 * K), Some(2 * M), Some(32 * M)];
        let by_size = levels(&points, &find_plateaus(&points, 0.25), caches);
        assert!(by_size.iter().any(|f| f.level == Level::L3));

        let machine = Machine {
            caches: vec![cache(1, 48 * K), cache(2, 2 * M), cache(3, 32 * M)],
            ..Default::default()
        };
        analyse_latency(&mut out, &machine);
        let levels: Vec<String> = out
            .results
            .iter()
            .filter(|r| r.case.contains_key("level"))
            .map(|r| r.key("level"))
            .collect();
        assert_eq!(levels, ["none", "L1", "L2", "DRAM"]);
        let none = out.results.iter().find(|r| r.key("level") == NONE).unwrap();
        assert_eq!(none.key("candidate"), "L3");
        assert_eq!(block_of(none), 4 * M);
        assert!(
            out.notes
                .iter()
                .any(|n| n.starts_with("no level named for the plateau 4 MiB–8 MiB")),
            "{:?}",
            out.notes
        );

        let h = sheet(&out);
        let labels: Vec<&str> = h.iter().map(|x| x.label.as_str()).collect();
        assert!(!labels.contains(&"L3 latency"), "{labels:?}");
        let line = h
            .iter()
            .find(|x| x.label == "chase at 4 MiB, no level")
            .expect("the curve's own figure on the sheet");
        assert_eq!(line.summary.median, 181.0);
        assert_eq!((line.summary.min, line.summary.max), (176.0, 185.0));
        assert!(
            line.reading.contains("0.45x DRAM's 400 ns") && line.reading.contains("not L3"),
            "{}",
            line.reading
        );
        assert!(line.reading.contains("32 MiB L3"), "{}", line.reading);
        // The terminal's level table names no L3 either.
        let text = render(&out);
        assert!(!text.contains("\n L3 "), "{text}");
    }

    /// This host: an L3 of 480 MiB reported (the host's), so the quick curve (4 KiB to
    /// 256 MiB) has no DRAM point and its memory plateau fits "L3" by size. 170 ns over an L2
    /// of 4.7 ns is memory, not L3.
    #[test]
    fn a_memory_plateau_inside_a_reported_l3_is_not_named_l3() {
        let mut out = Outcome::default();
        for (size, ns) in [
            (4 * K, 1.3),
            (16 * K, 1.3),
            (64 * K, 4.7),
            (256 * K, 4.8),
            (M, 9.0),
            (2 * M, 30.0),
            (4 * M, 80.0),
            (8 * M, 120.0),
            (64 * M, 165.0),
            (256 * M, 175.0),
        ] {
            out.results.push(chase(size, vec![ns; 5]));
        }
        let machine = Machine {
            caches: vec![cache(1, 48 * K), cache(2, 2 * M), cache(3, 480 * M)],
            ..Default::default()
        };
        analyse_latency(&mut out, &machine);
        let h = sheet(&out);
        let labels: Vec<&str> = h.iter().map(|x| x.label.as_str()).collect();
        assert!(labels.contains(&"L2 latency"), "{labels:?}");
        assert!(!labels.contains(&"L3 latency"), "{labels:?}");
        let line = h.iter().find(|x| x.label.ends_with(", no level")).unwrap();
        assert!(
            line.reading.contains("these loads go to memory"),
            "{}",
            line.reading
        );
        assert!(line.reading.contains("480 MiB L3"), "{}", line.reading);
    }
}
