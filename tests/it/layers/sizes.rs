//! The sizes ARCHITECTURE.md holds the code to, kept by a test: no .rs file over 800 lines and
//! no function over 150, but a short list of exemptions. `layers::sizes::print_the_sizes` lists
//! what breaks them.

use std::path::{Path, PathBuf};

use super::{root, rust_files};

/// The most lines a .rs file may hold, and a function.
pub const MAX_FILE_LINES: usize = 800;
pub const MAX_FN_LINES: usize = 150;

/// What may be longer, and why: the SIMD kernels are one loop per access pattern and ISA side by
/// side, the echo model is one model with its fit and its checks.
pub const SIZE_EXEMPT: &[&str] = &[
    "crates/labs/mem/src/kernels.rs",
    "crates/labs/echo/src/model.rs",
];

/// The workspace's own .rs files (src/, crates/, tests/, bench/), relative to `root`.
fn own_rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for top in ["src", "crates", "tests", "bench"] {
        rust_files(&root.join(top), &mut files);
    }
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "target"));
    files.sort();
    files
        .into_iter()
        .filter_map(|f| f.strip_prefix(root).ok().map(Path::to_path_buf))
        .collect()
}

/// Each function of a Rust source: its name, its first line and how many lines it spans (from
/// `fn` to its closing brace). Strings, chars, raw strings and comments are skipped, so a brace
/// in `format!("{}")` does not count; a lifetime (`'a`) is not a char.
pub fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let b = text.as_bytes();
    let (mut i, mut line, mut depth) = (0usize, 1usize, 0usize);
    let mut out = Vec::new();
    // A function seen, waiting for its body: name, line, () and [] depth inside its signature.
    let mut pending: Option<(String, usize, usize)> = None;
    // Open bodies: name, first line, the brace depth its body opened at.
    let mut open: Vec<(String, usize, usize)> = Vec::new();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied().unwrap_or(0);
        match c {
            b'\n' => line += 1,
            b'/' if next == b'/' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if next == b'*' => {
                let mut nest = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        nest += 1;
                        i += 1;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        nest -= 1;
                        i += 1;
                        if nest == 0 {
                            i += 1;
                            break;
                        }
                    } else if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
                continue;
            }
            b'r' if (next == b'#' || next == b'"') && (i == 0 || !ident(b[i - 1])) => {
                let hashes = b[i + 1..].iter().take_while(|&&h| h == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"')
                        .chain(std::iter::repeat_n(b'#', hashes))
                        .collect();
                    i += 2 + hashes;
                    while i < b.len() && !b[i..].starts_with(&close) {
                        line += usize::from(b[i] == b'\n');
                        i += 1;
                    }
                    i += close.len();
                    continue;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    line += usize::from(b[i] == b'\n');
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' => {
                if next == b'\\' {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 2;
                }
            }
            b'f' if next == b'n'
                && (i == 0 || !ident(b[i - 1]))
                && !b.get(i + 2).copied().is_some_and(ident) =>
            {
                let rest = &text[i + 2..];
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|&c| c.is_alphanumeric() || c == '_')
                    .collect();
                if !name.is_empty() {
                    pending = Some((name, line, 0));
                }
                i += 2;
                continue;
            }
            b'(' | b'[' => {
                if let Some(p) = pending.as_mut() {
                    p.2 += 1;
                }
            }
            b')' | b']' => {
                if let Some(p) = pending.as_mut() {
                    p.2 = p.2.saturating_sub(1);
                }
            }
            b';' if pending.as_ref().is_some_and(|p| p.2 == 0) => pending = None,
            b'{' => {
                depth += 1;
                // A brace inside the signature's () or [] is not the body.
                if pending.as_ref().is_some_and(|p| p.2 == 0) {
                    let (name, first, _) = pending.take().unwrap_or_default();
                    open.push((name, first, depth));
                }
            }
            b'}' => {
                if open.last().is_some_and(|o| o.2 == depth) {
                    let (name, first, _) = open.pop().unwrap_or_default();
                    out.push((name, first, line - first + 1));
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Every file over `MAX_FILE_LINES` and every function over `MAX_FN_LINES` under `root`, but
/// those `SIZE_EXEMPT` names.
pub fn oversized(root: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for rel in own_rust_files(root) {
        let shown = rel.to_string_lossy().replace('\\', "/");
        if SIZE_EXEMPT.contains(&shown.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(&rel)) else {
            continue;
        };
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            bad.push(format!(
                "{shown}: {lines} lines (at most {MAX_FILE_LINES}): split it by topic"
            ));
        }
        for (name, first, n) in functions(&text) {
            if n > MAX_FN_LINES {
                bad.push(format!(
                    "{shown}:{first}: fn {name} spans {n} lines (at most {MAX_FN_LINES}): split it into steps"
                ));
            }
        }
    }
    bad
}

#[test]
fn no_file_over_800_lines_and_no_function_over_150() {
    let bad = oversized(&root());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_size_checker_measures_functions_from_fn_to_closing_brace() {
    let src = "fn a() {\n    let s = \"}{\";\n    let c = '{';\n    let r = r#\"}\"#;\n    // }\n    /* { */\n}\nfn b<'x>(v: [u8; 2], s: &'x str) -> u8 {\n    fn inner() {}\n    if true { 1 } else { 2 }\n}\ntrait T { fn decl(&self); fn with_body(&self) {\n} }\n";
    let fns = functions(src);
    assert_eq!(
        fns,
        vec![
            ("a".to_string(), 1, 7),
            ("inner".to_string(), 9, 1),
            ("b".to_string(), 8, 4),
            ("with_body".to_string(), 12, 2),
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let long_fn = format!(
        "fn long() {{\n{}}}\n",
        "    let _ = 1;\n".repeat(MAX_FN_LINES - 1)
    );
    std::fs::create_dir_all(dir.path().join("crates/x/src")).unwrap();
    std::fs::write(dir.path().join("crates/x/src/lib.rs"), &long_fn).unwrap();
    std::fs::write(
        dir.path().join("crates/x/src/big.rs"),
        "// x\n".repeat(MAX_FILE_LINES + 1),
    )
    .unwrap();
    let bad = oversized(dir.path()).join("\n");
    assert!(bad.contains("crates/x/src/big.rs: 801 lines"), "{bad}");
    assert!(
        bad.contains("crates/x/src/lib.rs:1: fn long spans 151 lines"),
        "{bad}"
    );
    assert_eq!(bad.lines().count(), 2, "{bad}");
}

/// `cargo test --release --test it -- layers::sizes::print_the_sizes --nocapture`: what breaks the
/// limits now.
#[test]
fn print_the_sizes() {
    for line in oversized(&root()) {
        println!("{line}");
    }
}
