//! A database URL's password never leaves the user's control: every place one could appear
//! (the stored command line, notes, errors, exports) goes through `redact`.

/// `text` with the password of every URL (`postgres://user:PASSWORD@host`, any scheme), a
/// `?password=` parameter) and of libpq key=value strings (`password=...`) replaced by `***`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_scheme(rest) {
        let (before, url_on) = rest.split_at(at);
        out.push_str(before);
        let end = url_on
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`')
            .unwrap_or(url_on.len());
        out.push_str(&redact_url(&url_on[..end]));
        rest = &url_on[end..];
    }
    out.push_str(rest);
    redact_password_params(&out)
}

/// Where the first `scheme://` starts. Any scheme, not only PostgreSQL's: a mistyped or
/// unsupported `--db mysql://user:pw@host` is echoed in the error that refuses it, and its
/// password must not be.
fn find_scheme(s: &str) -> Option<usize> {
    let is_scheme_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.');
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(i) = s[from..].find("://").map(|i| i + from) {
        let mut start = i;
        while start > 0 && is_scheme_char(b[start - 1]) {
            start -= 1;
        }
        // RFC 3986: a scheme starts with a letter.
        while start < i && !b[start].is_ascii_alphabetic() {
            start += 1;
        }
        if start < i {
            return Some(start);
        }
        from = i + 3;
    }
    None
}

/// One URL: the userinfo's password, if any.
fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let Some(at) = auth.rfind('@') else {
        return url.to_string();
    };
    let (userinfo, host) = auth.split_at(at);
    match userinfo.find(':') {
        Some(colon) => format!("{scheme}{}:***{host}{tail}", &userinfo[..colon]),
        None => url.to_string(),
    }
}

/// `password=VALUE` (a URL parameter or a key=value word) becomes `password=***`.
fn redact_password_params(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let lower = rest.to_ascii_lowercase();
        let Some(i) = lower.find("password=") else {
            out.push_str(rest);
            return out;
        };
        let boundary_ok = i == 0
            || matches!(
                rest.as_bytes()[i - 1],
                b'?' | b'&' | b' ' | b'\t' | b'\'' | b'"'
            );
        let value_start = i + "password=".len();
        out.push_str(&rest[..value_start]);
        let tail = &rest[value_start..];
        if !boundary_ok {
            rest = tail;
            continue;
        }
        let end = if let Some(q) = tail.strip_prefix('\'') {
            q.find('\'').map(|j| j + 2).unwrap_or(tail.len())
        } else {
            tail.find(|c: char| c.is_whitespace() || c == '&' || c == '#' || c == '"')
                .unwrap_or(tail.len())
        };
        if end > 0 {
            out.push_str("***");
        }
        rest = &tail[end..];
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted_and_the_rest_kept() {
        assert_eq!(
            redact("costlab --db postgres://ann:s3cr%40t@db.example:5433/costlab run"),
            "costlab --db postgres://ann:***@db.example:5433/costlab run"
        );
        assert_eq!(
            redact("postgresql://ann@db/costlab?sslmode=require&password=hunter2&x=1"),
            "postgresql://ann@db/costlab?sslmode=require&password=***&x=1"
        );
        assert_eq!(
            redact("host=db user=ann password='a b c' dbname=costlab"),
            "host=db user=ann password=*** dbname=costlab"
        );
        assert_eq!(
            redact("cannot connect to POSTGRES://u:pw@h/d: refused"),
            "cannot connect to POSTGRES://u:***@h/d: refused"
        );
        // No password: nothing changes.
        for s in [
            "postgres://ann@db/costlab",
            "postgres:///costlab?host=/tmp/x",
            "a note about passwords, no URL",
            "/home/ann/history.db",
        ] {
            assert_eq!(redact(s), s);
        }
        // A password with '@' in it: the last '@' ends the userinfo.
        assert_eq!(redact("postgres://u:p@ss@h/d"), "postgres://u:***@h/d");
        // Any scheme: an unsupported --db is echoed in the error that refuses it.
        assert_eq!(
            redact("--db mysql://u:secret@h/x: unknown"),
            "--db mysql://u:***@h/x: unknown"
        );
        assert_eq!(redact("9://u:pw@h"), "9://u:pw@h");
    }
}
