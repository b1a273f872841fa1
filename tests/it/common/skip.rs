//! A test that cannot run on this machine says so where the person running the suite sees
//! it: libtest captures only the print macros, so this writes to the real stderr. Under
//! `CI=true`, a skip whose cause the project's install step removes fails instead, so CI
//! cannot pass on a machine that silently lacks a part.
#![allow(dead_code)]

use std::io::Write;

/// Say that `test` did not run, and why.
pub fn skipped(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// As `skipped`, but a failure under CI=true (`make test` installs what it needs first).
pub fn skipped_unless_ci(test: &str, why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} cannot run in CI: {why} (make test installs it; check the install step)");
    }
    skipped(test, why);
}
