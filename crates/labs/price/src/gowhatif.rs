//! The what-if for a Go program: its GC's share of its CPU, from its own runtime (the
//! `gctrace` line the runtime prints at each cycle, read from an untraced run), and what the
//! gc lab's headroom curve measured here says the share would be at GOGC 2x and 4x the one
//! it ran with.

use std::collections::BTreeMap;
use std::path::Path;

use super::pricing::{Unit, Units, WhatIf};
use costlab_core::model::Summary;

/// The marker the Go linker puts at the start of a binary's build info.
const BUILDINFO_MAGIC: &[u8] = b"\xff Go buildinf:";

/// Whether the file at `path` is a Go program (it carries Go build info).
pub fn is_go_program(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| {
        bytes
            .windows(BUILDINFO_MAGIC.len())
            .any(|w| w == BUILDINFO_MAGIC)
    })
}

/// The GC's share of the program's CPU since it started, %, from the last `gctrace` line
/// (`gc 12 @0.340s 4%: ...`) in its stderr; None when it printed none (no GC cycle ran).
pub fn gctrace_share(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("gc ")?;
            let pct = rest.split_whitespace().nth(2)?;
            pct.strip_suffix("%:")?.parse::<f64>().ok()
        })
        .next_back()
}

/// The share of the program's CPU (%) in its collector's own functions (marking, sweeping,
/// scavenging, the write barriers: the `go-gc` class), from the samples of its traced run;
/// None without 100 samples. The runtime's gctrace counts the marking only, and a GOGC moves
/// the rest with it (fewer cycles sweep and scavenge less), so the what-ifs scale the larger.
pub fn sampled_share(samples: Option<&crate::samples::Samples>) -> Option<f64> {
    let s = samples?;
    let gc = *s.user_classes.get("go-gc")?;
    (s.total >= 100).then(|| 100.0 * gc as f64 / s.total as f64)
}

/// The GC share a Go what-if scales (%), and where it came from: the samples' where they see
/// more than the runtime's own account (which leaves out the sweep), else the runtime's.
pub fn share_to_scale(gctrace: f64, sampled: Option<f64>) -> (f64, String) {
    match sampled {
        Some(s) if s > gctrace => (
            s,
            format!("{s:.1}% by its samples in the collector's functions (marking, sweeping, scavenging, write barriers); its runtime's gctrace counts {gctrace:.1}%, the marking alone"),
        ),
        _ => (gctrace, format!("{gctrace:.1}% by its runtime's gctrace")),
    }
}

/// The GOGC the program ran with (100 when unset; None when GC is off).
pub fn gogc(env: Option<&str>) -> Option<f64> {
    match env.map(str::trim) {
        None | Some("") => Some(100.0),
        Some(v) if v.eq_ignore_ascii_case("off") => None,
        Some(v) => v.parse::<f64>().ok().filter(|g| *g > 0.0),
    }
}

/// The gc lab's curve for Go: GC share (%) by headroom (GOGC / 100), from units named
/// `gc-share(H)`.
fn curve(units: &Units) -> BTreeMap<u64, (f64, &Unit)> {
    units
        .iter()
        .filter_map(|(k, u)| {
            let h: f64 = k
                .strip_prefix("gc-share(")?
                .strip_suffix(')')?
                .parse()
                .ok()?;
            Some(((h * 1000.0) as u64, (u.summary()?.median, u)))
        })
        .collect()
}

/// The curve's share at headroom `h`: linear in log(h) between the measured headrooms; None
/// outside them (no extrapolation).
pub fn share_at(points: &[(f64, f64)], h: f64) -> Option<f64> {
    let w = points.windows(2).find(|w| w[0].0 <= h && h <= w[1].0)?;
    let (a, b) = (w[0], w[1]);
    if a.0 == b.0 {
        return Some(a.1);
    }
    let t = (h.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
    Some(a.1 + t * (b.1 - a.1))
}

/// What GOGC 2x and 4x the current would save, each from the gc lab's curve scaled to the
/// program's own share: share(kH) / share(H) x the program's GC time. None without a curve
/// covering H, 2H or 4H.
pub fn go_what_if(share_pct: f64, gogc: f64, cpu: &Summary, units: &Units) -> Option<WhatIf> {
    let c = curve(units);
    let points: Vec<(f64, f64)> = c
        .iter()
        .map(|(h, (s, _))| (*h as f64 / 1000.0, *s))
        .collect();
    let h = gogc / 100.0;
    let now = share_at(&points, h)?;
    if now <= 0.0 {
        return None;
    }
    let gc_ns = cpu.median * share_pct / 100.0;
    let mut parts = Vec::new();
    let mut saved_2x = None;
    for k in [2.0, 4.0] {
        let Some(then) = share_at(&points, h * k) else {
            continue;
        };
        let predicted = share_pct * then / now;
        let saved = gc_ns * (1.0 - then / now);
        parts.push(format!(
            "GOGC={:.0}: ~{predicted:.1}% ({} less CPU)",
            gogc * k,
            costlab_core::measure::units::human_ns(saved)
        ));
        if saved_2x.is_none() {
            saved_2x = Some(saved);
        }
    }
    let saved = saved_2x?;
    let rows: Vec<_> = c.values().flat_map(|(_, u)| u.rows.clone()).collect();
    let from = c
        .values()
        .next()
        .map(|(_, u)| u.from.clone())
        .unwrap_or_default();
    Some(WhatIf {
        what: "go-gogc",
        from: from.clone(),
        saved: vec![saved],
        after: 0,
        text: format!(
            "a Go program: its GC took {share_pct:.1}% of its CPU at GOGC={gogc:.0}; the gc lab's headroom curve here predicts {} (scaled from {from} and the others on the curve)",
            parts.join(", ")
        ),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_gctrace_line_gives_the_share() {
        let err = "hello\ngc 1 @0.011s 2%: 0.010+0.31+0.003 ms clock, 4->4->0 MB, 4 MB goal, 2 P\n\
                   gc 2 @0.020s 7%: 0.012+0.5+0.004 ms clock, 4->4->1 MB, 5 MB goal, 2 P\nbye\n";
        assert_eq!(gctrace_share(err), Some(7.0));
        assert_eq!(gctrace_share("no gc here\n"), None);
    }

    #[test]
    fn the_larger_of_the_runtimes_and_the_samples_gc_share_is_scaled() {
        let mut smp = crate::samples::Samples {
            total: 1000,
            ..Default::default()
        };
        smp.user_classes.insert("go-gc".into(), 340);
        assert_eq!(sampled_share(Some(&smp)), Some(34.0));
        let (s, why) = share_to_scale(19.0, sampled_share(Some(&smp)));
        assert_eq!(s, 34.0);
        assert!(why.contains("34.0% by its samples") && why.contains("gctrace counts 19.0%"));
        assert_eq!(share_to_scale(40.0, Some(34.0)).0, 40.0);
        smp.total = 99;
        assert_eq!(sampled_share(Some(&smp)), None);
        assert_eq!(sampled_share(None), None);
    }

    #[test]
    fn gogc_from_the_environment() {
        assert_eq!(gogc(None), Some(100.0));
        assert_eq!(gogc(Some("200")), Some(200.0));
        assert_eq!(gogc(Some("off")), None);
        assert_eq!(gogc(Some("x")), None);
    }

    #[test]
    fn the_curve_is_read_in_log_headroom_and_never_extrapolated() {
        let pts = [(0.5, 34.0), (1.0, 20.0), (2.0, 9.0), (4.0, 4.0)];
        assert_eq!(share_at(&pts, 1.0), Some(20.0));
        assert!((share_at(&pts, 2.0f64.sqrt()).unwrap() - 14.5).abs() < 1e-9);
        assert_eq!(share_at(&pts, 8.0), None);
        assert_eq!(share_at(&pts, 0.25), None);
    }

    #[test]
    fn gogc_what_if_scales_the_curve_to_the_programs_own_share() {
        let mut units = Units::new();
        for (h, s) in [(1.0, 20.0), (2.0, 10.0), (4.0, 5.0)] {
            units.insert(
                format!("gc-share({h})"),
                Unit {
                    samples: vec![s],
                    rows: Vec::new(),
                    from: "run R: gc".into(),
                },
            );
        }
        let cpu = Summary::of(&[1e9]).unwrap();
        let w = go_what_if(30.0, 100.0, &cpu, &units).unwrap();
        // 30% of 1 s is GC; at GOGC=200 the curve halves it: 150 ms saved.
        assert!((w.saved[0] - 150e6).abs() < 1.0, "{:?}", w.saved);
        assert!(w.text.contains("GOGC=200: ~15.0%"), "{}", w.text);
        assert!(w.text.contains("GOGC=400: ~7.5%"), "{}", w.text);
        // Beyond the curve: nothing said.
        assert!(go_what_if(30.0, 300.0, &cpu, &units).is_none());
    }
}
