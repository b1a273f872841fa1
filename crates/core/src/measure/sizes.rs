//! Sizes on the command line are binary multiples: 16K = 16 KiB, 4MiB, 1G = 1 GiB.
//! In JSON they are plain bytes.

use crate::error::usage;

const UNITS: [(&str, u32); 4] = [("", 0), ("K", 10), ("M", 20), ("G", 30)];

/// Parse "16K", "4MiB", "1G", "1.5G", "4096" into bytes. Zero, negative, malformed and
/// overflowing sizes are usage errors (exit 2) naming the cause.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(usage(format!(
            "bad size '{text}': a size must be above zero (16K, 4M, 1G)"
        )));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let shift = suffix_shift(suffix.trim()).ok_or_else(|| {
        usage(format!(
            "bad size '{text}': unknown unit '{suffix}'; use a number with K, M or G (binary: 16K, 4M, 1G)"
        ))
    })?;
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(usage(format!(
            "bad size '{text}': expected a number with an optional K, M or G (16K, 4M, 1G)"
        )));
    }
    let bytes = if num.contains('.') {
        let x: f64 = num
            .parse()
            .map_err(|_| usage(format!("bad size '{text}': not a number")))?;
        let b = x * (1u64 << shift) as f64;
        if !(b.is_finite() && b < u64::MAX as f64) || b.fract() != 0.0 {
            return Err(usage(format!(
                "bad size '{text}': not a whole number of bytes"
            )));
        }
        b as u64
    } else {
        let x: u64 = num
            .parse()
            .map_err(|_| usage(format!("bad size '{text}': number too large")))?;
        x.checked_mul(1u64 << shift)
            .ok_or_else(|| usage(format!("bad size '{text}': too large")))?
    };
    if bytes == 0 {
        return Err(usage(format!(
            "bad size '{text}': a size must be above zero"
        )));
    }
    Ok(bytes)
}

fn suffix_shift(s: &str) -> Option<u32> {
    let up = s.to_ascii_uppercase();
    let core = up
        .strip_suffix("IB")
        .or_else(|| up.strip_suffix('B'))
        .unwrap_or(&up);
    if up == "B" {
        return Some(0);
    }
    UNITS.iter().find(|(u, _)| *u == core).map(|(_, sh)| *sh)
}

/// Parse a comma list of sizes ("16K,4M,1G").
pub fn parse_size_list(text: &str) -> anyhow::Result<Vec<u64>> {
    parse_list(text, parse_size)
}

/// Parse a comma-separated list with `item`; empty items are errors, and so is an item given
/// twice (`16K,16K`, or `16K,16384`: the same value), named in the message. Every list option
/// keeps this one rule (docs/src/cli.md).
pub fn parse_list<T: PartialEq>(
    text: &str,
    item: impl Fn(&str) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(usage(format!(
            "bad list '{text}': an item is empty; separate items with single commas"
        )));
    }
    let mut out: Vec<T> = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = item(p)?;
        if let Some(j) = out.iter().position(|o| *o == v) {
            return Err(duplicate(text, parts[j], p));
        }
        out.push(v);
    }
    Ok(out)
}

/// The one message for a list item given twice.
pub fn duplicate(text: &str, first: &str, again: &str) -> anyhow::Error {
    let what = if first == again {
        format!("'{again}' is given twice")
    } else {
        format!("'{first}' and '{again}' are the same")
    };
    usage(format!("bad list '{text}': {what}; give each item once"))
}

/// Shortest exact binary form: 16384 -> "16K", 3 << 30 -> "3G", 1000 -> "1000".
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in UNITS.iter().rev() {
        if *shift > 0 && bytes >= (1 << shift) && bytes.is_multiple_of(1 << shift) {
            return format!("{}{}", bytes >> shift, unit);
        }
    }
    bytes.to_string()
}

/// Human form for prose: "1.5 GiB", "32 KiB", "512 B".
pub fn human_size(bytes: u64) -> String {
    let names = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < names.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", names[i])
    } else {
        format!("{v:.1} {}", names[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    #[test]
    fn binary_multiples() {
        assert_eq!(parse_size("16K").unwrap(), 16 << 10);
        assert_eq!(parse_size("16k").unwrap(), 16 << 10);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("4MB").unwrap(), 4 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64B").unwrap(), 64);
        assert_eq!(parse_size(" 2M ").unwrap(), 2 << 20);
    }

    #[test]
    fn bad_sizes_are_usage_errors() {
        for bad in [
            "0",
            "0K",
            "",
            "K",
            "12Q",
            "-4K",
            "1.2.3M",
            "1.0000001K",
            "99999999999999999999",
            "17179869184G",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{bad}");
            assert!(e.to_string().contains("bad size"), "{bad}: {e}");
        }
    }

    #[test]
    fn lists_and_formatting() {
        assert_eq!(
            parse_size_list("16K,4M,1G").unwrap(),
            vec![16 << 10, 4 << 20, 1 << 30]
        );
        assert!(parse_size_list("16K,,1G").is_err());
        assert_eq!(format_size(16 << 10), "16K");
        assert_eq!(format_size(3 << 30), "3G");
        assert_eq!(format_size(1536), "1536");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(human_size(3 << 29), "1.5 GiB");
        assert_eq!(human_size(512), "512 B");
        for s in [4096u64, 1 << 20, 5 << 30, 12345] {
            assert_eq!(parse_size(&format_size(s)).unwrap(), s);
        }
    }
}
