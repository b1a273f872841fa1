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

/// A time on the command line: "2" or "2s" (seconds, fractions allowed), "500ms". `what` names
/// the option in the error; the time must be above zero and within `min..=max` (exit 2,
/// naming the range, otherwise).
pub fn parse_duration(
    text: &str,
    what: &str,
    min: std::time::Duration,
    max: std::time::Duration,
) -> anyhow::Result<std::time::Duration> {
    let t = text.trim();
    // Every unit a message of costlab's names: 500us, 500ms, 90s (or bare seconds), 2m, 1h.
    let (num, scale) = if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let range = if min.is_zero() {
        format!("above zero and at most {}", duration_text(max))
    } else {
        format!("from {} to {}", duration_text(min), duration_text(max))
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|x| x * scale)
        .filter(|x| *x > 0.0)
        .and_then(|x| std::time::Duration::try_from_secs_f64(x).ok())
        .filter(|d| (min..=max).contains(d))
        .ok_or_else(|| {
            crate::error::usage(format!(
                "bad {what} '{text}': use a time {range}, like 2s, 500ms, 2m or 1h"
            ))
        })
}

/// A count on the command line, alone or as one item of a list: a whole number from `lo` to
/// `hi` (`hi` = u64::MAX: no upper limit). The one parser every count goes through, so
/// that every message says what parses: "bad {what} '{text}': use a whole number from 1 to
/// 4096, like {example}" (exit 2).
pub fn parse_count(text: &str, what: &str, lo: u64, hi: u64, example: &str) -> anyhow::Result<u64> {
    let range = if hi == u64::MAX {
        format!("from {lo} up")
    } else {
        format!("from {lo} to {hi}")
    };
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| {
            crate::error::usage(format!(
                "bad {what} '{text}': use a whole number {range}, like {example}"
            ))
        })
}

/// A limit as the user writes it: "1h", "600s", "50ms".
fn duration_text(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
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
mod count_tests {
    #[test]
    fn counts_parse_within_their_range_and_say_it() {
        use super::parse_count;
        assert_eq!(parse_count(" 16 ", "batch", 1, 4096, "1,16").unwrap(), 16);
        for bad in ["0", "4097", "-1", "2.5", "x", "", "99999999999999999999999"] {
            let e = parse_count(bad, "batch", 1, 4096, "1,16").unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert_eq!(
                e.to_string(),
                format!("bad batch '{bad}': use a whole number from 1 to 4096, like 1,16")
            );
        }
        let e = parse_count("x", "connection count", 1, u64::MAX, "1,128").unwrap_err();
        assert!(e.to_string().contains("from 1 up"), "{e}");
    }
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

    #[test]
    fn durations_parse_within_the_caller_s_limits() {
        use super::parse_duration;
        use std::time::Duration;
        let (lo, hi) = (Duration::from_millis(50), Duration::from_secs(600));
        assert_eq!(
            parse_duration("1.5", "--duration", lo, hi).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration("50ms", "--duration", lo, hi).unwrap(),
            Duration::from_millis(50)
        );
        let e = parse_duration("10ms", "--duration", lo, hi).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert_eq!(
            e.to_string(),
            "bad --duration '10ms': use a time from 50ms to 600s, like 2s, 500ms, 2m or 1h"
        );
        for huge in ["1e30", "inf", "NaN"] {
            assert!(
                parse_duration(huge, "--duration", lo, hi).is_err(),
                "{huge}"
            );
        }
        let e = parse_duration("x", "--duration", Duration::ZERO, Duration::from_secs(3600));
        assert_eq!(
            e.unwrap_err().to_string(),
            "bad --duration 'x': use a time above zero and at most 1h, like 2s, 500ms, 2m or 1h"
        );
        // Every unit a message names parses, up to the limit it names.
        let hour = Duration::from_secs(3600);
        for (text, want) in [
            ("1h", hour),
            ("2m", Duration::from_secs(120)),
            ("90s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("250us", Duration::from_micros(250)),
            (" 0.5m ", Duration::from_secs(30)),
        ] {
            assert_eq!(
                parse_duration(text, "--duration", Duration::ZERO, hour).unwrap(),
                want,
                "{text}"
            );
        }
        assert!(parse_duration("61m", "--duration", Duration::ZERO, hour).is_err());
    }
}
