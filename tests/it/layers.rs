//! The layers of ARCHITECTURE.md, kept by a test: every `crate::…` path in src/ is read, and an
//! import from a lower layer into a higher one, a circle between folders, or one lab reaching
//! into another fails here, naming the file, the line and the rule. Test code (`#[cfg(test)]`
//! modules) may reach anywhere, as DESIGN.md allows, and is not read.
//!
//! `scripts/imports.sh` prints the graph this test checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first: a module may use its own layer's modules and those below it.
/// Written once, here; ARCHITECTURE.md draws the same list.
pub const LAYERS: &[&[&str]] = &[
    &["error", "model"],
    &["measure"],
    &["machine"],
    &["analysis"],
    &["store"],
    &["report"],
    &["labs"],
    &["cli", "commands", "runner", "check"],
];

/// The crate-root macros and the layer they belong to (`case!` builds a model `Case`).
const MACROS: &[(&str, &str)] = &[("case", "model")];

fn rank(module: &str) -> Option<usize> {
    let module = MACROS
        .iter()
        .find(|(m, _)| *m == module)
        .map_or(module, |(_, layer)| layer);
    LAYERS.iter().position(|l| l.contains(&module))
}

/// One `crate::` reference: the file, its line, the module it is in and the one it names.
#[derive(Debug, Clone)]
pub struct Edge {
    pub file: PathBuf,
    pub line: usize,
    pub from: String,
    pub to: String,
    /// For labs/: the lab folder of each side ("mem"), when inside labs.
    pub from_lab: Option<String>,
    pub to_lab: Option<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its `#[cfg(test)]` items (tests may reach anywhere). Test modules
/// sit at the end of a file here, so everything from the first `#[cfg(test)]` on is dropped.
fn non_test(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
        .collect()
}

/// The module a file under src/ belongs to, and its lab folder when under labs/.
fn module_of(src: &Path, file: &Path) -> (String, Option<String>) {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    let lab = (parts[0] == "labs" && parts.len() > 2).then(|| parts[1].clone());
    (parts[0].clone(), lab)
}

/// Every `crate::module` reference outside tests, with `crate::labs::x` naming its lab. A
/// `use crate::{a, b}` group is read too.
pub fn edges(src: &Path) -> Vec<Edge> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let (from, from_lab) = module_of(src, &f);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, code) in non_test(&text) {
            for to in crate_paths(code) {
                let (to_mod, to_lab) = match to.split_once("::") {
                    Some((m, rest)) => (
                        m.to_string(),
                        (m == "labs")
                            .then(|| rest.split("::").next().unwrap_or("").to_string())
                            .filter(|l| {
                                // A lab is a folder; labs/args.rs and labs/mod.rs are what
                                // every lab shares (the `Lab` trait, the common options).
                                !l.is_empty()
                                    && l.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                                    && src.join("labs").join(l).is_dir()
                            }),
                    ),
                    None => (to.clone(), None),
                };
                out.push(Edge {
                    file: f.clone(),
                    line,
                    from: from.clone(),
                    to: to_mod,
                    from_lab: from_lab.clone(),
                    to_lab,
                });
            }
        }
    }
    out
}

/// The paths after each `crate::` in a line ("report::model::Outcome"), and each item of a
/// `crate::{a::b, c}` group.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = &rest[..i];
        rest = &rest[i + "crate::".len()..];
        // `$crate::` in a macro is the crate too; `costlab_crate::` is not.
        if before
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim();
                if !item.is_empty() {
                    out.push(item.split(['{', ' ']).next().unwrap().to_string());
                }
            }
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        if !path.is_empty() {
            out.push(path.trim_end_matches(':').to_string());
        }
    }
    out
}

/// What is wrong with the graph: one line per upward import, per lab reaching into another
/// lab, per module no layer names, and per circle between folders.
pub fn violations(edges: &[Edge]) -> Vec<String> {
    let mut bad = BTreeSet::new();
    for e in edges {
        let at = format!("{}:{}", e.file.display(), e.line);
        match (rank(&e.from), rank(&e.to)) {
            (None, _) => {
                bad.insert(format!(
                    "{at}: module '{}' is in no layer of LAYERS",
                    e.from
                ));
            }
            (_, None) => {
                bad.insert(format!("{at}: crate::{} is in no layer of LAYERS", e.to));
            }
            (Some(a), Some(b)) if b > a => {
                bad.insert(format!(
                    "{at}: {} (layer {a}) imports {} (layer {b}), a higher layer",
                    e.from, e.to
                ));
            }
            _ => {}
        }
        if let (Some(a), Some(b)) = (&e.from_lab, &e.to_lab) {
            if a != b {
                bad.insert(format!(
                    "{at}: the {a} lab imports the {b} lab; code two labs need moves down to measure/ or machine/"
                ));
            }
        }
    }
    for c in circles(edges) {
        bad.insert(format!("circle between folders: {}", c.join(" -> ")));
    }
    bad.into_iter().collect()
}

/// Circles in the graph of top-level folders (each module to those it imports), each once.
pub fn circles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges.iter().filter(|e| e.from != e.to) {
        graph.entry(&e.from).or_default().insert(&e.to);
    }
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = vec![(*start, vec![*start])];
        while let Some((node, path)) = stack.pop() {
            for next in graph.get(node).into_iter().flatten() {
                if next == start {
                    let mut c: Vec<String> = path.iter().map(|s| s.to_string()).collect();
                    // One rotation per circle: start from its smallest name.
                    let min = c
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, n)| n.as_str())
                        .unwrap()
                        .0;
                    c.rotate_left(min);
                    c.push(c[0].clone());
                    found.insert(c);
                } else if !path.contains(next) && path.len() < 12 {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    found.into_iter().collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_runs_up_a_layer_and_no_lab_reaches_into_another() {
    let edges = edges(&src());
    assert!(
        edges.len() > 100,
        "the scan found only {} imports",
        edges.len()
    );
    let bad = violations(&edges);
    assert!(
        bad.is_empty(),
        "{} layering violation(s) (the layers are LAYERS in tests/it/layers.rs and ARCHITECTURE.md):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The checker itself: an upward import, a lab importing a lab and a circle are each caught on
/// a tree written here.
#[test]
fn the_checker_catches_an_upward_import_a_lab_to_lab_import_and_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, text: &str| {
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    };
    w("model/mod.rs", "use crate::report::table;\n");
    w("report/mod.rs", "use crate::model::Outcome;\n");
    w(
        "labs/mem/mod.rs",
        "use crate::labs::echo::stats;\nuse crate::measure::Summary;\n",
    );
    w(
        "labs/echo/mod.rs",
        "use crate::{model::Outcome, report::html};\n",
    );
    w(
        "measure/x.rs",
        "fn f() {}\n#[cfg(test)]\nmod tests { use crate::labs::mem; }\n",
    );
    let e = edges(dir.path());
    let bad = violations(&e);
    let text = bad.join("\n");
    assert!(
        text.contains("model (layer 0) imports report (layer 5)"),
        "{text}"
    );
    assert!(text.contains("the mem lab imports the echo lab"), "{text}");
    assert!(
        text.contains("circle between folders: model -> report -> model"),
        "{text}"
    );
    // labs -> model and labs -> report are fine; test code is not read.
    assert!(!text.contains("labs (layer"), "{text}");
    assert!(!text.contains("measure (layer"), "{text}");
    assert_eq!(bad.len(), 3, "{text}");
}

/// `cargo test --release --test it -- layers::print_the_graph --nocapture`: the folder graph with counts.
#[test]
fn print_the_graph() {
    let edges = edges(&src());
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in edges.iter().filter(|e| e.from != e.to) {
        *counts.entry((e.from.clone(), e.to.clone())).or_default() += 1;
    }
    for layer in LAYERS.iter().rev() {
        for m in *layer {
            let out: Vec<String> = counts
                .iter()
                .filter(|((f, _), _)| f == m)
                .map(|((_, t), n)| format!("{t} ({n})"))
                .collect();
            println!("{m:>9} -> {}", out.join(", "));
        }
    }
}
