//! Reading the latency curve: find its plateaus (runs of sizes whose latency stays within a
//! tolerance) and say which is L1, L2, L3 and DRAM.
//!
//! With the cache sizes the kernel reports, a plateau belongs to the smallest cache its largest
//! size fits in, and one past the last cache is DRAM. Without them, plateaus are named in order.
//! The DRAM figure is the largest size measured: past the last cache the latency keeps
//! climbing (more TLB misses, longer page walks), so it has no flat top to average.

use std::fmt;

/// One point of the curve: a region size and its median latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub size: u64,
    pub ns: f64,
}

/// A run of consecutive points `first..=last` within the tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plateau {
    pub first: usize,
    pub last: usize,
}

impl Plateau {
    pub fn len(&self) -> usize {
        self.last - self.first + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    L1,
    L2,
    L3,
    Dram,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::L1, Level::L2, Level::L3, Level::Dram];

    pub fn name(self) -> &'static str {
        match self {
            Level::L1 => "L1",
            Level::L2 => "L2",
            Level::L3 => "L3",
            Level::Dram => "DRAM",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A level read off the curve: its plateau and the point that stands for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelFigure {
    pub level: Level,
    pub plateau: Plateau,
    /// Index of the representative point: the plateau's middle (its largest for DRAM).
    pub point: usize,
}

/// Group the curve (sorted by size) into plateaus: a run grows while its largest latency is
/// within `1 + tol` of its smallest. Runs of one point are transitions and dropped, except the
/// run holding the largest size (the DRAM end of the curve).
pub fn find_plateaus(points: &[Point], tol: f64) -> Vec<Plateau> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let (mut lo, mut hi) = (points[i].ns, points[i].ns);
        let mut j = i;
        while j + 1 < points.len() {
            let x = points[j + 1].ns;
            let (nlo, nhi) = (lo.min(x), hi.max(x));
            if nhi > nlo * (1.0 + tol) {
                break;
            }
            lo = nlo;
            hi = nhi;
            j += 1;
        }
        let p = Plateau { first: i, last: j };
        if p.len() >= 2 || j + 1 == points.len() {
            out.push(p);
        }
        i = j + 1;
    }
    out
}

/// Name the plateaus. `caches` are the L1d, L2 and L3 sizes when the machine reports them.
pub fn levels(
    points: &[Point],
    plateaus: &[Plateau],
    caches: [Option<u64>; 3],
) -> Vec<LevelFigure> {
    if points.is_empty() || plateaus.is_empty() {
        return Vec::new();
    }
    let known: Vec<u64> = caches.iter().map_while(|c| *c).collect();
    let mut chosen: Vec<LevelFigure> = Vec::new();
    let offer = |level: Level, p: Plateau, chosen: &mut Vec<LevelFigure>| {
        let point = if level == Level::Dram {
            p.last
        } else {
            (p.first + p.last) / 2
        };
        let fig = LevelFigure {
            level,
            plateau: p,
            point,
        };
        match chosen.iter_mut().find(|f| f.level == level) {
            None => chosen.push(fig),
            Some(old) => {
                // DRAM: the end of the curve. A cache: its longest plateau, then its lowest.
                let better = if level == Level::Dram {
                    p.last > old.plateau.last
                } else {
                    p.len() > old.plateau.len()
                        || (p.len() == old.plateau.len() && points[point].ns < points[old.point].ns)
                };
                if better {
                    *old = fig;
                }
            }
        }
    };
    if known.len() == 3 {
        for &p in plateaus {
            let top = points[p.last].size;
            let level = match known.iter().position(|&c| top <= c) {
                Some(0) => Level::L1,
                Some(1) => Level::L2,
                Some(_) => Level::L3,
                None => Level::Dram,
            };
            offer(level, p, &mut chosen);
        }
    } else {
        // No cache sizes: name plateaus in order; the last is DRAM only if it reaches sizes
        // no cache of today holds.
        let last = plateaus[plateaus.len() - 1];
        let dram = plateaus.len() >= 2 && points[last.last].size >= 256 << 20;
        let caches_part = if dram {
            &plateaus[..plateaus.len() - 1]
        } else {
            plateaus
        };
        // The three longest, kept in curve order.
        let mut idx: Vec<usize> = (0..caches_part.len()).collect();
        idx.sort_by_key(|&i| std::cmp::Reverse(caches_part[i].len()));
        idx.truncate(3);
        idx.sort_unstable();
        for (k, &i) in idx.iter().enumerate() {
            offer(
                [Level::L1, Level::L2, Level::L3][k],
                caches_part[i],
                &mut chosen,
            );
        }
        if dram {
            offer(Level::Dram, last, &mut chosen);
        }
    }
    chosen.sort_by_key(|f| f.level);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;
    const M: u64 = 1024 * K;

    /// A curve from 4 KiB to 1 GiB with the given step latencies.
    fn curve(f: impl Fn(u64) -> f64) -> Vec<Point> {
        (12..=30)
            .map(|s| 1u64 << s)
            .map(|size| Point { size, ns: f(size) })
            .collect()
    }

    fn zen_like(size: u64) -> f64 {
        match size {
            s if s <= 32 * K => 1.0,
            s if s <= 64 * K => 2.2, // transition
            s if s <= 512 * K => 3.3,
            s if s <= M => 5.0, // transition
            s if s <= 16 * M => 11.0 + (s as f64 / M as f64) * 0.05,
            s if s <= 32 * M => 30.0,
            s if s <= 64 * M => 70.0,
            s if s <= 256 * M => 95.0,
            s => 110.0 + (s / (256 * M)) as f64,
        }
    }

    #[test]
    fn steps_are_found_with_cache_sizes() {
        let pts = curve(zen_like);
        let pl = find_plateaus(&pts, 0.25);
        let lv = levels(&pts, &pl, [Some(32 * K), Some(M), Some(32 * M)]);
        let names: Vec<&str> = lv.iter().map(|f| f.level.name()).collect();
        assert_eq!(names, ["L1", "L2", "L3", "DRAM"]);
        let ns = |l: Level| pts[lv.iter().find(|f| f.level == l).unwrap().point].ns;
        assert_eq!(ns(Level::L1), 1.0);
        assert_eq!(ns(Level::L2), 3.3);
        assert!((11.0..12.0).contains(&ns(Level::L3)));
        // DRAM is the largest size.
        let dram = lv.iter().find(|f| f.level == Level::Dram).unwrap();
        assert_eq!(pts[dram.point].size, 1 << 30);
    }

    #[test]
    fn steps_are_found_in_order_without_cache_sizes() {
        let pts = curve(zen_like);
        let pl = find_plateaus(&pts, 0.25);
        let lv = levels(&pts, &pl, [None, None, None]);
        let got: Vec<(Level, f64)> = lv.iter().map(|f| (f.level, pts[f.point].ns)).collect();
        assert_eq!(got[0], (Level::L1, 1.0));
        assert_eq!(got[1], (Level::L2, 3.3));
        assert_eq!(got[2].0, Level::L3);
        assert_eq!(got[3].0, Level::Dram);
        assert_eq!(pts[lv[3].point].size, 1 << 30);
    }

    #[test]
    fn flat_and_short_curves() {
        let flat = curve(|_| 2.0);
        let pl = find_plateaus(&flat, 0.1);
        assert_eq!(pl, vec![Plateau { first: 0, last: 18 }]);
        // One plateau ending in DRAM sizes with caches known: DRAM only.
        let lv = levels(&flat, &pl, [Some(32 * K), Some(M), Some(32 * M)]);
        assert_eq!(lv.len(), 1);
        assert_eq!(lv[0].level, Level::Dram);
        // A curve that stops inside the caches names no DRAM.
        let small: Vec<Point> = curve(zen_like).into_iter().take(8).collect();
        let pl = find_plateaus(&small, 0.25);
        let lv = levels(&small, &pl, [None, None, None]);
        assert!(lv.iter().all(|f| f.level != Level::Dram));
        assert_eq!(lv[0].level, Level::L1);
        assert!(levels(&[], &[], [None, None, None]).is_empty());
    }

    #[test]
    fn noise_within_tolerance_does_not_split_a_plateau() {
        let pts: Vec<Point> = [1.0, 1.1, 0.95, 1.05, 4.0, 4.3, 3.9]
            .iter()
            .enumerate()
            .map(|(i, &ns)| Point {
                size: 4096 << i,
                ns,
            })
            .collect();
        let pl = find_plateaus(&pts, 0.2);
        assert_eq!(
            pl,
            vec![Plateau { first: 0, last: 3 }, Plateau { first: 4, last: 6 }]
        );
    }
}
