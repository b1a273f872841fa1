//! The JSON contract and the exports kept byte for byte: the fixture run is imported into a
//! throwaway history and exported as JSON, CSV (per figure and per sample) and Markdown, and
//! each must equal the file in tests/fixtures/golden/, written by costlab before the result
//! model moved to src/model. A change to any of these formats is a change to what users parse:
//! make it on purpose, then write the files anew with `COSTLAB_BLESS=1 cargo test --release
//! --test it golden::` and say why in the commit.

use crate::common;

use std::path::Path;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/golden");

#[test]
fn the_fixture_run_exports_byte_for_byte_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = common::costlab_db(&db, &["import", common::FIXTURE]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: [(&str, &[&str]); 4] = [
        ("export.json", &["--format", "json"]),
        ("export.csv", &["--format", "csv"]),
        ("export-samples.csv", &["--format", "csv", "--raw-samples"]),
        ("export.md", &["--format", "markdown"]),
    ];
    let bless = std::env::var_os("COSTLAB_BLESS").is_some();
    let mut differ = Vec::new();
    for (name, flags) in cases {
        let mut args = vec!["export", "last"];
        args.extend_from_slice(flags);
        let out = common::costlab_db(&db, &args);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let golden = Path::new(GOLDEN).join(name);
        if bless {
            std::fs::write(&golden, &out.stdout).unwrap();
            continue;
        }
        let want = std::fs::read(&golden).unwrap();
        if out.stdout != want {
            let got = String::from_utf8_lossy(&out.stdout);
            let want = String::from_utf8_lossy(&want);
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .map_or(got.lines().count().min(want.lines().count()), |i| i);
            differ.push(format!(
                "{name}: differs from line {} on:\n  now:    {}\n  golden: {}",
                line + 1,
                got.lines().nth(line).unwrap_or("(end)"),
                want.lines().nth(line).unwrap_or("(end)")
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
