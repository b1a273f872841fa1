//! UTC timestamps and run ids without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a civil date (the inverse of `civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch of an RFC 3339 time ("2026-11-22T10:00:00Z", a fraction of a
/// second dropped, "+01:00" offsets applied); `None` when it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let t = text.trim();
    let num = |a: usize, b: usize| -> Option<i64> {
        let s = t.get(a..b)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, s) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let seps = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| t.as_bytes()[i] != c)
        || !matches!(t.as_bytes()[10], b'T' | b't' | b' ')
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || s > 60
    {
        return None;
    }
    let mut rest = &t[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    Some(days * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// RFC 3339 UTC for seconds since the epoch: "2026-11-22T10:00:00Z".
pub fn rfc3339(secs: i64) -> String {
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub fn now_rfc3339() -> String {
    rfc3339(now_secs())
}

/// A run id that sorts by time and does not collide between concurrent runs:
/// "20261122T100000Z-3f9a1c".
pub fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tag = (u64::from(nanos) ^ (u64::from(std::process::id()) << 20)) & 0xff_ffff;
    let compact: String = now_rfc3339()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    format!("{compact}-{tag:06x}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_341_600), "2026-11-22T10:00:00Z");
        assert_eq!(super::run_id().len(), 23);
    }

    #[test]
    fn parses_what_it_writes_and_offsets() {
        for secs in [0, 951_782_400, 1_795_341_600, -86_400, 4_102_444_799] {
            assert_eq!(super::parse_rfc3339(&super::rfc3339(secs)), Some(secs));
        }
        assert_eq!(
            super::parse_rfc3339("2026-11-22T11:00:00.250+01:00"),
            Some(1_795_341_600)
        );
        for bad in [
            "",
            "2026-11-22",
            "2026-13-01T00:00:00Z",
            "2026-11-22T10:00:00",
            "x026-11-22T10:00:00Z",
        ] {
            assert_eq!(super::parse_rfc3339(bad), None, "{bad}");
        }
    }
}
