//! The plotter's axes: their scales (linear, log), tick labels, and the map from a value to a
//! position on the page.

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    /// Logarithmic with ticks at powers of the base (10, or 2 for sizes in bytes).
    Log(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    Number,
    /// Bytes as 4K, 1M, 2G.
    Bytes,
}

#[derive(Debug, Clone)]
pub struct Axis {
    /// Label with its unit: "block size (bytes)", "bandwidth (GB/s)".
    pub label: String,
    pub scale: Scale,
    pub format: Format,
    /// Start a linear axis at zero.
    pub zero: bool,
    /// Ticks at whole numbers only (thread and connection counts).
    pub integer: bool,
}

impl Axis {
    pub fn new(label: impl Into<String>, scale: Scale, format: Format) -> Axis {
        Axis {
            label: label.into(),
            scale,
            format,
            zero: true,
            integer: false,
        }
    }

    /// A count (threads, connections): whole-number ticks, log2 when it spans 4x or more.
    pub fn count(label: impl Into<String>, values: &[f64]) -> Axis {
        let (lo, hi) = min_max(values);
        let scale = if lo >= 1.0 && hi / lo >= 4.0 {
            Scale::Log(2.0)
        } else {
            Scale::Linear
        };
        Axis {
            zero: false,
            integer: true,
            ..Axis::new(label, scale, Format::Number)
        }
    }

    /// A log scale when all values are positive and span more than `span`x, else linear.
    pub fn auto(label: impl Into<String>, values: &[f64], span: f64, format: Format) -> Axis {
        let pos = values.iter().all(|v| *v > 0.0);
        let (lo, hi) = min_max(values);
        let base = if format == Format::Bytes { 2.0 } else { 10.0 };
        // Sizes are read in powers of two: a bytes axis is log2 even over one point.
        let scale = if pos && lo > 0.0 && (hi / lo > span || format == Format::Bytes) {
            Scale::Log(base)
        } else {
            Scale::Linear
        };
        Axis::new(label, scale, format)
    }
}

pub fn min_max(v: &[f64]) -> (f64, f64) {
    let lo = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::INFINITY, f64::min);
    let hi = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// A number for a tick: no more digits than it needs.
pub fn tick_text(v: f64, format: Format) -> String {
    match format {
        Format::Bytes if v >= 1.0 && v.fract() == 0.0 => {
            costlab_core::measure::sizes::format_size(v as u64)
        }
        _ => {
            let a = v.abs();
            if a == 0.0 {
                "0".into()
            } else if a >= 1e4 {
                // 400k, 1.5M: fewer digits to read than 400000.
                let (d, suffix) = if a >= 1e9 {
                    (1e9, "G")
                } else if a >= 1e6 {
                    (1e6, "M")
                } else {
                    (1e3, "k")
                };
                let s = format!("{:.2}", v / d);
                format!("{}{suffix}", s.trim_end_matches('0').trim_end_matches('.'))
            } else if a < 1e-3 {
                format!("{v:.0e}")
            } else if a >= 100.0 || v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                let s = format!("{v:.3}");
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        }
    }
}

/// The domain and ticks of an axis over `values`.
pub(super) fn domain(axis: &Axis, values: &[f64]) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = min_max(values);
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    match axis.scale {
        Scale::Log(base) => {
            let lo = lo.max(f64::MIN_POSITIVE);
            let hi = hi.max(lo);
            let mut e0 = (lo.ln() / base.ln()).floor();
            let mut e1 = (hi.ln() / base.ln()).ceil();
            if e1 - e0 <= 1.0 {
                // One point (or one octave): give it room on both sides, not the frame's edge.
                e0 -= 1.0;
                e1 += 1.0;
            }
            // At most ~9 ticks: step over exponents.
            let step = ((e1 - e0) / 8.0).ceil().max(1.0);
            e0 = (e0 / step).floor() * step;
            let ticks: Vec<f64> = (0..)
                .map(|i| e0 + step * f64::from(i))
                .take_while(|e| *e <= e1 + 1e-9)
                .map(|e| base.powf(e))
                .collect();
            let ticks = if axis.integer {
                ticks.into_iter().filter(|t| t.fract() == 0.0).collect()
            } else {
                ticks
            };
            (base.powf(e0), base.powf(e1), ticks)
        }
        Scale::Linear => {
            if axis.zero && lo > 0.0 {
                lo = 0.0;
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            let raw = (hi - lo) / 6.0;
            let mag = 10f64.powf(raw.log10().floor());
            let mut step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag);
            if axis.integer {
                // 2.5 is not a count, nor is anything under 1.
                step = if step <= 1.0 {
                    1.0
                } else if step.fract() != 0.0 {
                    step.ceil()
                } else {
                    step
                };
            }
            let start = (lo / step).floor() * step;
            let end = (hi / step).ceil() * step;
            let n = ((end - start) / step).round() as i64;
            let ticks = (0..=n).map(|i| start + step * i as f64).collect();
            (start, end, ticks)
        }
    }
}

pub(super) struct Map {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) log: bool,
    pub(super) a: f64,
    pub(super) b: f64,
}

impl Map {
    pub(super) fn new(scale: Scale, lo: f64, hi: f64, a: f64, b: f64) -> Map {
        let log = matches!(scale, Scale::Log(_));
        Map { lo, hi, log, a, b }
    }
    pub(super) fn at(&self, v: f64) -> f64 {
        let f = |x: f64| {
            if self.log {
                x.max(f64::MIN_POSITIVE).ln()
            } else {
                x
            }
        };
        let t = (f(v) - f(self.lo)) / (f(self.hi) - f(self.lo));
        self.a + t * (self.b - self.a)
    }
}
