//! The result contract, checked: every `costlab/1` document a test reads back is validated
//! against `docs/src/costlab-1.schema.json` by `scripts/check-json.py` (Debian's
//! python3-jsonschema, draft 2020-12) before the test looks inside it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

pub const SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/docs/src/costlab-1.schema.json"
);
pub const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check-json.py");

/// What `scripts/check-json.py` said of `text`: its exit status and its lines.
pub fn check(text: &[u8]) -> (Option<i32>, String) {
    let mut child = Command::new(CHECK)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("scripts/check-json.py starts (/usr/bin/python3: apt-get install python3)");
    // A document the checker stops reading early (bad JSON) must not fail the write.
    let _ = child.stdin.take().expect("stdin").write_all(text);
    let out = child.wait_with_output().expect("check-json.py ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

/// `text`, a costlab/1 document, parsed once it validates against the schema (the test fails
/// with the checker's lines otherwise).
pub fn doc(text: impl AsRef<[u8]>) -> serde_json::Value {
    let text = text.as_ref();
    let (code, said) = check(text);
    assert_eq!(code, Some(0), "not a valid costlab/1 document:\n{said}");
    serde_json::from_slice(text).expect("a valid document is JSON")
}

/// The costlab/1 document in the file `path`, validated as `doc` does.
pub fn doc_file(path: impl AsRef<Path>) -> serde_json::Value {
    let path = path.as_ref();
    doc(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}
