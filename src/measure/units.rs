//! Canonical units: bandwidth in GB/s (10^9 bytes), times in ns or us.

/// GB/s (10^9 bytes per second) for `bytes` moved in `ns` nanoseconds.
pub fn gb_per_s(bytes: f64, ns: f64) -> f64 {
    if ns <= 0.0 {
        0.0
    } else {
        bytes / ns
    }
}

/// A duration in ns in the unit a reader expects: "850 ns", "12.3 us", "4.56 ms", "1.20 s".
pub fn human_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.1} ns")
    } else if a < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A rate: "2.31 M/s", "950 k/s".
pub fn human_rate(per_s: f64) -> String {
    if per_s >= 1e9 {
        format!("{:.2} G/s", per_s / 1e9)
    } else if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1} /s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(gb_per_s(2e9, 1e9), 2.0);
        assert_eq!(gb_per_s(1.0, 0.0), 0.0);
        assert_eq!(human_ns(850.0), "850.0 ns");
        assert_eq!(human_ns(12_345.0), "12.35 us");
        assert_eq!(human_ns(4.56e6), "4.56 ms");
        assert_eq!(human_rate(2.31e6), "2.31 M/s");
        assert_eq!(human_rate(950.0), "950.0 /s");
    }
}

/// `x` with `digits` significant digits, plainly ("101.8", "0.00341", "4163").
pub fn sig(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

#[cfg(test)]
mod sig_tests {
    #[test]
    fn significant_digits() {
        assert_eq!(super::sig(101.75066768882248, 3), "102");
        assert_eq!(super::sig(0.003412, 3), "0.00341");
        assert_eq!(super::sig(28.63, 3), "28.6");
        assert_eq!(super::sig(-1.5, 2), "-1.5");
    }
}
