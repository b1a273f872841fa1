//! The sweep plan: which headrooms, in which mode, over how large a live heap, and the
//! environment each point's Go process gets.

use costlab_core::error::usage;
use costlab_core::measure::sizes::{human_size, parse_list};

/// How the collector is given its headroom h (free memory as a multiple of the live heap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// GOGC = 100 h: the heap may grow to live x (1 + h) before the next cycle.
    Gogc,
    /// GOGC off, GOMEMLIMIT = live x (1 + h): collect only when the limit is near.
    Memlimit,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Gogc => "gogc",
            Mode::Memlimit => "memlimit",
        }
    }
}

/// The default headroom sweep (the paper's 0.5x and 2x among them).
pub const DEFAULT_HEADROOM: &str = "0.25,0.5,1,2,3,4";

/// The Biscuit evaluation's live heap: 640 MB, about 2 million vnodes.
pub const PAPER_LIVE: u64 = 640 << 20;

/// The paper's GC overheads: (headroom, % of CPU) for 640 MB live.
pub const PAPER_POINTS: [(f64, f64); 2] = [(0.5, 34.0), (2.0, 9.0)];

/// Below this GC share (%) the paper calls the cost acceptable ("3x keeps GC under 10%").
pub const TARGET_SHARE: f64 = 10.0;

/// Peak RSS seen per byte of heap goal (live x (1 + h)): the concurrent collector lets the
/// heap overshoot its goal and freed pages linger; measured about 1.5 here, 1.6 leaves room.
const RSS_PER_GOAL: f64 = 1.6;

/// Parse a headroom list ("0.5,1,2"): each a finite number from 0.01 to 100, no repeats.
pub fn parse_headrooms(text: &str) -> anyhow::Result<Vec<f64>> {
    let list = parse_list(text, |item| {
        let h: f64 = item.parse().map_err(|_| {
            usage(format!(
                "bad headroom '{item}': expected a number such as 0.5 or 2 (free memory as a multiple of the live heap)"
            ))
        })?;
        if !h.is_finite() || !(0.01..=100.0).contains(&h) {
            return Err(usage(format!(
                "bad headroom '{item}': use a value from 0.01 to 100 (0.5 = half the live heap free)"
            )));
        }
        Ok(h)
    })?;
    for (i, h) in list.iter().enumerate() {
        if list[..i].contains(h) {
            return Err(usage(format!(
                "bad headroom list '{text}': {h} appears twice; give each headroom once"
            )));
        }
    }
    Ok(list)
}

/// Parse a mode list ("gogc,memlimit").
pub fn parse_modes(text: &str) -> anyhow::Result<Vec<Mode>> {
    let list = parse_list(text, |item| {
        match item {
        "gogc" => Ok(Mode::Gogc),
        "memlimit" => Ok(Mode::Memlimit),
        other => Err(usage(format!(
            "bad mode '{other}': use gogc (GOGC = 100 h) or memlimit (GOGC=off, GOMEMLIMIT = live x (1 + h))"
        ))),
    }
    })?;
    let mut out: Vec<Mode> = Vec::new();
    for m in list {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// The environment for one point: GOGC and GOMEMLIMIT are both set, so nothing the user
/// exported leaks into the sweep.
pub fn env_for(mode: Mode, headroom: f64, live: u64) -> Vec<(&'static str, String)> {
    match mode {
        Mode::Gogc => vec![
            (
                "GOGC",
                format!("{}", (100.0 * headroom).round().max(1.0) as u64),
            ),
            ("GOMEMLIMIT", "off".to_string()),
        ],
        Mode::Memlimit => vec![
            ("GOGC", "off".to_string()),
            ("GOMEMLIMIT", memlimit_bytes(headroom, live).to_string()),
        ],
    }
}

/// GOMEMLIMIT for headroom h: live x (1 + h), in bytes.
pub fn memlimit_bytes(headroom: f64, live: u64) -> u64 {
    (live as f64 * (1.0 + headroom)).round() as u64
}

/// What a point's process is expected to hold at its peak.
pub fn expected_peak(live: u64, headroom: f64) -> u64 {
    (live as f64 * (1.0 + headroom) * RSS_PER_GOAL) as u64
}

/// The live heap to use: the one asked for, if the largest headroom's peak fits in the
/// memory available; otherwise (nothing asked) the default, shrunk to fit half of what is
/// available. `None` for `available` means unknown: no cap.
pub fn choose_live(
    asked: Option<u64>,
    default: u64,
    max_headroom: f64,
    available: Option<u64>,
) -> anyhow::Result<(u64, Option<String>)> {
    match (asked, available) {
        (Some(live), Some(avail)) => {
            let need = expected_peak(live, max_headroom);
            if need > avail / 10 * 9 {
                return Err(usage(format!(
                    "--live {} with headroom {max_headroom} needs about {} at its peak, {} is available; use a smaller --live or --headroom",
                    human_size(live),
                    human_size(need),
                    human_size(avail)
                )));
            }
            Ok((live, None))
        }
        (Some(live), None) => Ok((live, None)),
        (None, Some(avail)) => {
            let fits = (avail as f64 / 2.0 / ((1.0 + max_headroom) * RSS_PER_GOAL)) as u64;
            if fits < default {
                let live = fits.max(16 << 20);
                Ok((
                    live,
                    Some(format!(
                        "live heap {} instead of {}: {} of memory available, headroom up to {max_headroom}",
                        human_size(live),
                        human_size(default),
                        human_size(avail)
                    )),
                ))
            } else {
                Ok((default, None))
            }
        }
        (None, None) => Ok((default, None)),
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub mode: Mode,
    pub headroom: f64,
}

/// Every (mode, headroom) pair, modes outermost, headrooms in the order given.
pub fn points(modes: &[Mode], headrooms: &[f64]) -> Vec<Point> {
    modes
        .iter()
        .flat_map(|&mode| {
            headrooms
                .iter()
                .map(move |&headroom| Point { mode, headroom })
        })
        .collect()
}

/// The order processes run in: every point once per round, `reps` rounds, so that slow
/// drifts of a shared machine spread over all points instead of landing on one.
pub fn schedule(points: &[Point], reps: usize) -> Vec<(usize, Point)> {
    (0..reps)
        .flat_map(|r| points.iter().map(move |p| (r, *p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn headroom_lists() {
        assert_eq!(
            parse_headrooms(DEFAULT_HEADROOM).unwrap(),
            vec![0.25, 0.5, 1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(parse_headrooms(" 2 , 0.5").unwrap(), vec![2.0, 0.5]);
        for bad in [
            "", "0", "-1", "abc", "1,,2", "inf", "NaN", "101", "1,1", "0.001",
        ] {
            let e = parse_headrooms(bad).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{bad}");
        }
    }

    #[test]
    fn mode_lists() {
        assert_eq!(
            parse_modes("gogc,memlimit").unwrap(),
            vec![Mode::Gogc, Mode::Memlimit]
        );
        // A mode given twice is refused, naming it (docs/src/cli.md's one list rule).
        let e = parse_modes("memlimit,memlimit").unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("'memlimit' is given twice"), "{e}");
        assert_eq!(exit_code(&parse_modes("gogc,zgc").unwrap_err()), 2);
    }

    #[test]
    fn env_per_mode() {
        let live = 640u64 << 20;
        assert_eq!(
            env_for(Mode::Gogc, 0.5, live),
            vec![
                ("GOGC", "50".to_string()),
                ("GOMEMLIMIT", "off".to_string())
            ]
        );
        assert_eq!(env_for(Mode::Gogc, 0.25, live)[0].1, "25");
        assert_eq!(env_for(Mode::Gogc, 3.0, live)[0].1, "300");
        assert_eq!(env_for(Mode::Gogc, 0.01, live)[0].1, "1");
        assert_eq!(
            env_for(Mode::Memlimit, 2.0, live),
            vec![
                ("GOGC", "off".to_string()),
                ("GOMEMLIMIT", (3 * live).to_string())
            ]
        );
        assert_eq!(memlimit_bytes(0.5, 1000), 1500);
        assert_eq!(memlimit_bytes(0.25, 128 << 20), 160 << 20);
    }

    #[test]
    fn live_heap_choice() {
        let gib = 1u64 << 30;
        // Plenty of memory: the default.
        assert_eq!(
            choose_live(None, PAPER_LIVE, 4.0, Some(24 * gib)).unwrap(),
            (PAPER_LIVE, None)
        );
        // Short of memory: shrunk to fit half of it, with a note.
        let (live, note) = choose_live(None, PAPER_LIVE, 4.0, Some(2 * gib)).unwrap();
        assert!(live < PAPER_LIVE && expected_peak(live, 4.0) <= gib);
        assert!(note.unwrap().contains("instead of"));
        // Asked for more than fits: a usage error.
        let e = choose_live(Some(8 * gib), PAPER_LIVE, 4.0, Some(24 * gib)).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("--live"));
        assert_eq!(
            choose_live(Some(gib), PAPER_LIVE, 1.0, None).unwrap(),
            (gib, None)
        );
    }

    #[test]
    fn schedule_interleaves_rounds() {
        let pts = points(&[Mode::Gogc, Mode::Memlimit], &[1.0, 3.0]);
        assert_eq!(pts.len(), 4);
        assert_eq!(
            pts[2],
            Point {
                mode: Mode::Memlimit,
                headroom: 1.0
            }
        );
        let s = schedule(&pts, 3);
        assert_eq!(s.len(), 12);
        assert_eq!((s[0].0, s[4].0, s[11].0), (0, 1, 2));
        assert_eq!(s[5].1, pts[1]);
    }
}
