//! The Universal Scalability Law: X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)).
//!
//! sigma is contention (the serial share: a lock, one line every thread must own in turn),
//! kappa is coherency (each pair of threads paying to agree: the line bouncing between all of
//! them), lambda the throughput of one thread. The fit minimises relative squared error, so a
//! 1% miss at 1 thread weighs as much as a 1% miss at 64. For a given (sigma, kappa) the best
//! lambda has a closed form, so the search is over (sigma, kappa) only: a coarse grid, then a
//! pattern search that keeps both non-negative.

/// One measured point of a curve: N threads gave throughput X.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub n: f64,
    pub x: f64,
}

/// Which parameters the fit may move. With only two thread counts there is one equation
/// for two unknowns, so we fit each alone and report the pair as bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Full,
    SigmaOnly,
    KappaOnly,
}

impl Shape {
    pub fn label(self) -> &'static str {
        match self {
            Shape::Full => "full",
            Shape::SigmaOnly => "sigma-only bound",
            Shape::KappaOnly => "kappa-only bound",
        }
    }
}

/// A fitted curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub shape: Shape,
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
    /// Root mean square of the relative residuals over the fitted points.
    pub rel_rms: f64,
}

/// What the points allow: a full fit, two one-parameter bounds, or nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Analysis {
    Full(Fit),
    Bounds { sigma_only: Fit, kappa_only: Fit },
    TooFew,
}

/// The thread counts every report extrapolates to.
pub const EXTRAPOLATE_TO: [usize; 4] = [8, 24, 64, 128];

/// The curve's shape without lambda: N / (1 + sigma (N-1) + kappa N (N-1)).
fn shape_at(n: f64, sigma: f64, kappa: f64) -> f64 {
    n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

impl Fit {
    /// Predicted throughput at `n` threads.
    pub fn predict(&self, n: f64) -> f64 {
        self.lambda * shape_at(n, self.sigma, self.kappa)
    }

    /// The thread count of peak throughput, N* = sqrt((1 - sigma) / kappa); `None` when the
    /// curve never turns down (kappa = 0). With sigma >= 1 more threads never help: 1.
    pub fn peak(&self) -> Option<f64> {
        if self.kappa <= 0.0 {
            return None;
        }
        if self.sigma >= 1.0 {
            return Some(1.0);
        }
        Some(((1.0 - self.sigma) / self.kappa).sqrt().max(1.0))
    }
}

/// The best lambda for fixed (sigma, kappa) under relative error, and the error it leaves.
fn best_lambda(points: &[Point], sigma: f64, kappa: f64) -> (f64, f64) {
    // Minimise sum (lambda g_i / x_i - 1)^2: lambda = sum(r_i) / sum(r_i^2), r_i = g_i / x_i.
    let (mut s1, mut s2) = (0.0, 0.0);
    for p in points {
        let r = shape_at(p.n, sigma, kappa) / p.x;
        s1 += r;
        s2 += r * r;
    }
    if s2 <= 0.0 || !s2.is_finite() {
        return (0.0, f64::INFINITY);
    }
    let lambda = s1 / s2;
    let err = points
        .iter()
        .map(|p| {
            let e = lambda * shape_at(p.n, sigma, kappa) / p.x - 1.0;
            e * e
        })
        .sum();
    (lambda, err)
}

/// Grid of sigma values: fine over [0, 1], geometric beyond (a curve that falls from the
/// first added thread needs sigma or kappa above 1).
fn sigma_grid() -> Vec<f64> {
    let mut g: Vec<f64> = (0..=200).map(|i| i as f64 * 0.005).collect();
    g.extend((1..=40).map(|i| 10f64.powf(i as f64 / 20.0)));
    g
}

/// Grid of kappa values: zero, then 1e-8 to 10 in tenth-decade steps.
fn kappa_grid() -> Vec<f64> {
    let mut g = vec![0.0];
    g.extend((0..=90).map(|i| 10f64.powf(-8.0 + i as f64 / 10.0)));
    g
}

/// Fit the USL to `points` moving only what `shape` allows. `None` when no point is usable
/// (non-positive or non-finite N or X).
pub fn fit(points: &[Point], shape: Shape) -> Option<Fit> {
    let pts: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.n >= 1.0 && p.x > 0.0 && p.n.is_finite() && p.x.is_finite())
        .collect();
    if pts.is_empty() {
        return None;
    }
    let sigmas = match shape {
        Shape::KappaOnly => vec![0.0],
        _ => sigma_grid(),
    };
    let kappas = match shape {
        Shape::SigmaOnly => vec![0.0],
        _ => kappa_grid(),
    };
    let cost = |s: f64, k: f64| best_lambda(&pts, s, k).1;
    let mut best = (0.0, 0.0, f64::INFINITY);
    for &s in &sigmas {
        for &k in &kappas {
            let e = cost(s, k);
            if e < best.2 {
                best = (s, k, e);
            }
        }
    }
    let (mut s, mut k, mut e) = best;
    // Pattern search: try a step each way on each free parameter, halve the steps when
    // nothing improves. Steps start near the grid spacing around the best grid point.
    let free_s = shape != Shape::KappaOnly;
    let free_k = shape != Shape::SigmaOnly;
    let mut ds = if free_s { 0.01_f64.max(s * 0.2) } else { 0.0 };
    let mut dk = if free_k { (k * 0.3).max(1e-8) } else { 0.0 };
    for _ in 0..5000 {
        let mut moved = false;
        for (ts, tk) in [(s + ds, k), (s - ds, k), (s, k + dk), (s, k - dk)] {
            if (ts == s && tk == k) || ts < 0.0 || tk < 0.0 {
                continue;
            }
            let te = cost(ts, tk);
            if te < e {
                (s, k, e) = (ts, tk, te);
                moved = true;
            }
        }
        if !moved {
            ds *= 0.5;
            dk *= 0.5;
            if ds < 1e-13 && dk < 1e-16 {
                break;
            }
        }
    }
    // A parameter left at a rounding-sized value (kappa 1e-16 would "predict" a peak at 1e8
    // threads) is zero when zero fits as well.
    let as_good = |te: f64| te <= e * (1.0 + 1e-9) + 1e-18;
    if k > 0.0 && as_good(cost(s, 0.0)) {
        k = 0.0;
    }
    if s > 0.0 && as_good(cost(0.0, k)) {
        s = 0.0;
    }
    let (lambda, e) = best_lambda(&pts, s, k);
    Some(Fit {
        shape,
        lambda,
        sigma: s,
        kappa: k,
        rel_rms: (e / pts.len() as f64).sqrt(),
    })
}

/// Fit what the points allow: three or more distinct thread counts give a full fit; two give
/// one equation for two unknowns, so sigma-only and kappa-only fits bracket the truth; one
/// gives nothing.
pub fn analyse(points: &[Point]) -> Analysis {
    let mut ns: Vec<f64> = points.iter().filter(|p| p.x > 0.0).map(|p| p.n).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    match ns.len() {
        0 | 1 => Analysis::TooFew,
        2 => match (fit(points, Shape::SigmaOnly), fit(points, Shape::KappaOnly)) {
            (Some(sigma_only), Some(kappa_only)) => Analysis::Bounds {
                sigma_only,
                kappa_only,
            },
            _ => Analysis::TooFew,
        },
        _ => fit(points, Shape::Full).map_or(Analysis::TooFew, Analysis::Full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(lambda: f64, sigma: f64, kappa: f64, ns: &[usize]) -> Vec<Point> {
        ns.iter()
            .map(|&n| Point {
                n: n as f64,
                x: lambda * shape_at(n as f64, sigma, kappa),
            })
            .collect()
    }

    /// Deterministic noise in [-amp, amp] (a small LCG; no timing, no randomness across runs).
    fn noisy(points: &[Point], amp: f64, seed: u64) -> Vec<Point> {
        let mut state = seed;
        points
            .iter()
            .map(|p| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                Point {
                    n: p.n,
                    x: p.x * (1.0 + amp * (2.0 * u - 1.0)),
                }
            })
            .collect()
    }

    const NS: [usize; 9] = [1, 2, 4, 8, 12, 16, 24, 32, 48];

    #[test]
    fn recovers_exact_parameters() {
        for &(sigma, kappa) in &[(0.05, 0.002), (0.3, 0.0), (0.0, 0.01), (0.02, 0.0001)] {
            let f = fit(&curve(12.5, sigma, kappa, &NS), Shape::Full).unwrap();
            assert!((f.sigma - sigma).abs() < 1e-4, "{f:?} vs {sigma}");
            assert!(
                (f.kappa - kappa).abs() < 1e-6 + kappa * 1e-3,
                "{f:?} vs {kappa}"
            );
            assert!((f.lambda - 12.5).abs() < 1e-3, "{f:?}");
            assert!(f.rel_rms < 1e-5);
        }
    }

    #[test]
    fn recovers_parameters_through_noise() {
        for seed in 1..6 {
            let pts = noisy(&curve(40.0, 0.08, 0.001, &NS), 0.02, seed);
            let f = fit(&pts, Shape::Full).unwrap();
            assert!((f.sigma - 0.08).abs() < 0.03, "seed {seed}: {f:?}");
            assert!((f.kappa - 0.001).abs() < 0.0004, "seed {seed}: {f:?}");
            assert!(f.rel_rms < 0.03);
            let peak = f.peak().unwrap();
            assert!((peak - (0.92f64 / 0.001).sqrt()).abs() < 8.0, "{peak}");
        }
    }

    #[test]
    fn a_falling_curve_fits_above_one() {
        // Throughput halves from 1 to 2 threads: sigma + 2 kappa = 3 in the two-point case.
        let pts = [Point { n: 1.0, x: 10.0 }, Point { n: 2.0, x: 5.0 }];
        match analyse(&pts) {
            Analysis::Bounds {
                sigma_only,
                kappa_only,
            } => {
                assert!((sigma_only.sigma - 3.0).abs() < 1e-6, "{sigma_only:?}");
                assert_eq!(sigma_only.kappa, 0.0);
                assert!((kappa_only.kappa - 1.5).abs() < 1e-6, "{kappa_only:?}");
                assert_eq!(kappa_only.sigma, 0.0);
                for f in [sigma_only, kappa_only] {
                    assert!((f.predict(2.0) - 5.0).abs() < 1e-6);
                    assert!((f.predict(1.0) - 10.0).abs() < 1e-6);
                }
                assert_eq!(sigma_only.peak(), None);
                assert_eq!(kappa_only.peak(), Some(1.0));
            }
            other => panic!("expected bounds, got {other:?}"),
        }
    }

    #[test]
    fn two_points_give_bounds_that_both_interpolate() {
        let pts = curve(20.0, 0.1, 0.02, &[1, 2]);
        let Analysis::Bounds {
            sigma_only,
            kappa_only,
        } = analyse(&pts)
        else {
            panic!("two thread counts must give bounds");
        };
        // One equation: sigma + 2 kappa = 0.14.
        assert!((sigma_only.sigma - 0.14).abs() < 1e-6);
        assert!((kappa_only.kappa - 0.07).abs() < 1e-6);
        // The bounds agree on the measured points and part ways beyond them.
        assert!(sigma_only.predict(64.0) > kappa_only.predict(64.0) * 3.0);
    }

    #[test]
    fn perfect_scaling_has_no_peak_and_degenerate_inputs_do_not_fit() {
        let f = fit(&curve(5.0, 0.0, 0.0, &NS), Shape::Full).unwrap();
        assert!(f.sigma < 1e-6 && f.kappa < 1e-9);
        assert_eq!(f.peak(), None);
        assert_eq!(analyse(&[Point { n: 1.0, x: 3.0 }]), Analysis::TooFew);
        assert_eq!(analyse(&[]), Analysis::TooFew);
        assert!(fit(&[Point { n: 1.0, x: 0.0 }], Shape::Full).is_none());
        // Repeated samples at the same N count once.
        let same = [Point { n: 2.0, x: 3.0 }, Point { n: 2.0, x: 3.1 }];
        assert_eq!(analyse(&same), Analysis::TooFew);
    }
}
