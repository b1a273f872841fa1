//! The layers of ARCHITECTURE.md, kept by a test where the compiler cannot keep them.
//!
//! The compiler keeps the crates' order: a crate can use only the crates its manifest names,
//! and cargo refuses a circle between crates. What it cannot see is checked here:
//! - a manifest naming a crate of a higher layer (or of its own, for two labs): the compiler
//!   would accept a lab depending on another lab;
//! - inside one crate, a module using a module of a higher layer (`measure` using `machine`),
//!   read from every `crate::` and `super::` path outside `#[cfg(test)]` modules;
//! - a circle between files, through those same paths (`super::` included).
//!
//! Each failure names the file, the line and the rule. `scripts/imports.sh` prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod sizes;

/// The crates' layers, bottom first. "labs" stands for every crate under crates/labs/: each may
/// use the layers below, never another lab.
pub const CRATES: &[&[&str]] = &[
    &["costlab-core"],
    &["costlab-history"],
    &["costlab-lab", "costlab-bpf"],
    &["labs"],
    &["costlab"],
];

/// Inside a crate, the layers of its top-level modules, bottom first. A crate not named here
/// (a lab) has no inner layers, only the rule against circles.
pub const MODULES: &[(&str, &[&[&str]])] = &[
    (
        "costlab-core",
        &[&["error", "model", "symbols"], &["measure"], &["machine"]],
    ),
    ("costlab-history", &[&["analysis"], &["store"], &["report"]]),
    (
        "costlab",
        &[&["registry"], &["cli"], &["commands", "check"], &["runner"]],
    ),
];

/// The crate-root macros and the module they belong to (`case!` builds a model `Case`).
const MACROS: &[(&str, &str)] = &[("case", "model")];

/// One crate of the workspace: its name, its folder and the costlab crates its manifest names.
#[derive(Debug, Clone)]
pub struct Crate {
    pub name: String,
    pub dir: PathBuf,
    pub deps: Vec<(String, usize)>,
    pub is_lab: bool,
}

/// One `crate::` or `super::` reference inside a crate, resolved to the files on each side.
#[derive(Debug, Clone)]
pub struct Edge {
    pub krate: String,
    pub file: PathBuf,
    pub line: usize,
    /// The top-level module of each side ("measure"); "" for the crate root.
    pub from: String,
    pub to: String,
    /// The module files on each side, relative to the crate's src/.
    pub from_file: PathBuf,
    pub to_file: PathBuf,
}

/// The workspace's crates, read from the root manifest's folders: the root package and every
/// folder under crates/ with a Cargo.toml.
pub fn crates(root: &Path) -> Vec<Crate> {
    let mut dirs = vec![root.to_path_buf()];
    let mut stack = vec![root.join("crates")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.join("Cargo.toml").is_file() {
                    dirs.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| {
            let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            let name = package_name(&text)?;
            let is_lab = dir.parent().is_some_and(|p| p.ends_with("crates/labs"));
            Some(Crate {
                name,
                deps: costlab_deps(&text),
                dir,
                is_lab,
            })
        })
        .collect()
}

fn package_name(manifest: &str) -> Option<String> {
    let start = manifest.find("[package]")?;
    manifest[start..].lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "name").then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The costlab crates named in a manifest's [dependencies] (dev-dependencies are test code,
/// which may reach anywhere), each with its line.
fn costlab_deps(manifest: &str) -> Vec<(String, usize)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, l) in manifest.lines().enumerate() {
        let l = l.trim();
        if l.starts_with('[') {
            section = l.to_string();
            continue;
        }
        if section != "[dependencies]" {
            continue;
        }
        let key = l.split(['=', '.', ' ']).next().unwrap_or("");
        if key.starts_with("costlab-") {
            out.push((key.to_string(), i + 1));
        }
    }
    out
}

fn crate_rank(c: &str, is_lab: bool) -> Option<usize> {
    let key = if is_lab { "labs" } else { c };
    CRATES.iter().position(|l| l.contains(&key))
}

fn module_rank(krate: &str, module: &str) -> Option<usize> {
    let layers = MODULES.iter().find(|(c, _)| *c == krate)?.1;
    let module = MACROS
        .iter()
        .find(|(m, _)| *m == module)
        .map_or(module, |(_, layer)| layer);
    layers.iter().position(|l| l.contains(&module))
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

/// The module path of a file under src/ (`measure/conditions.rs` is [measure, conditions];
/// `lib.rs`, `main.rs` and a folder's `mod.rs` are their folder's module).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file that holds a module path: the deepest prefix of `path` that is a module of `src`.
fn file_of(src: &Path, path: &[String]) -> PathBuf {
    for n in (0..=path.len()).rev() {
        let dir: PathBuf = path[..n].iter().collect();
        if n == 0 {
            break;
        }
        let file = dir.with_extension("rs");
        if src.join(&file).is_file() {
            return file;
        }
        if src.join(&dir).join("mod.rs").is_file() {
            return dir.join("mod.rs");
        }
    }
    PathBuf::from("lib.rs")
}

/// Each path a line names through `crate::` or `super::`, resolved to a module path from the
/// crate root: `super::procstat::fill` in measure/conditions.rs is [measure, procstat, fill].
/// A `crate::{a::b, c}` group gives each item.
fn named_paths(code: &str, here: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (key, is_super) in [("crate::", false), ("super::", true)] {
        let mut rest = code;
        while let Some(i) = rest.find(key) {
            let before = &rest[..i];
            rest = &rest[i + key.len()..];
            // `$crate::` in a macro is the crate too; `costlab_crate::` or `super::super::`'s
            // second half are not new paths.
            let prev = before.chars().last();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_')
                || (is_super && before.ends_with("super::"))
            {
                continue;
            }
            // The module `super` starts from: a mod.rs is its folder's module, so its `super`
            // is the folder's parent; any other file's `super` is its folder.
            let mut base: Vec<String> = if is_super {
                let mut b = here.to_vec();
                if is_mod_file || !b.is_empty() {
                    b.pop();
                }
                let mut r = rest;
                while let Some(more) = r.strip_prefix("super::") {
                    b.pop();
                    r = more;
                }
                rest = r;
                b
            } else {
                Vec::new()
            };
            let items: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .map(|s| s.trim().split(['{', ' ']).next().unwrap().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            } else {
                let p: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                vec![p.trim_end_matches(':').to_string()]
            };
            for item in items {
                let mut full = base.clone();
                full.extend(
                    item.split("::")
                        .filter(|s| !s.is_empty() && *s != "self")
                        .map(|s| s.trim_end_matches('!').to_string()),
                );
                if !full.is_empty() {
                    out.push(full);
                }
            }
            base.clear();
        }
    }
    out
}

/// Every `crate::` and `super::` reference of a crate's sources outside tests.
pub fn edges(krate: &str, src: &Path) -> Vec<Edge> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().to_path_buf();
        let here = module_of(&rel);
        let is_mod_file = matches!(
            rel.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        );
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, code) in non_test(&text) {
            for path in named_paths(code, &here, is_mod_file) {
                out.push(Edge {
                    krate: krate.to_string(),
                    file: f.clone(),
                    line,
                    from: here.first().cloned().unwrap_or_default(),
                    to: path[0].clone(),
                    from_file: rel.clone(),
                    to_file: file_of(src, &path),
                });
            }
        }
    }
    out
}

/// What is wrong with the crates' manifests: a crate naming a crate of its own layer or a
/// higher one (a lab naming another lab), or a crate no layer names.
pub fn crate_violations(all: &[Crate]) -> Vec<String> {
    let mut bad = BTreeSet::new();
    for c in all {
        let Some(mine) = crate_rank(&c.name, c.is_lab) else {
            bad.insert(format!(
                "{}: crate {} is in no layer of CRATES",
                c.dir.display(),
                c.name
            ));
            continue;
        };
        for (dep, line) in &c.deps {
            let Some(d) = all.iter().find(|x| &x.name == dep) else {
                continue;
            };
            let theirs = crate_rank(&d.name, d.is_lab).unwrap_or(usize::MAX);
            let at = format!("{}:{line}", c.dir.join("Cargo.toml").display());
            if c.is_lab && d.is_lab {
                bad.insert(format!(
                    "{at}: the lab {} depends on the lab {}; code two labs need moves down into costlab-core",
                    c.name, d.name
                ));
            } else if theirs >= mine {
                bad.insert(format!(
                    "{at}: {} (layer {mine}) depends on {} (layer {theirs}), a layer not below it",
                    c.name, d.name
                ));
            }
        }
    }
    bad.into_iter().collect()
}

/// What is wrong inside crates: a module using a higher module of its crate's layers, and a
/// circle between files. A file using an ancestor module (a lab's file using its lib.rs) is how
/// a child reaches what its parent holds, and is no circle.
pub fn module_violations(edges: &[Edge]) -> Vec<String> {
    let mut bad = BTreeSet::new();
    for e in edges {
        if e.from.is_empty() || e.from == e.to {
            continue;
        }
        let at = format!("{}:{}", e.file.display(), e.line);
        if MODULES.iter().any(|(c, _)| *c == e.krate) {
            match (module_rank(&e.krate, &e.from), module_rank(&e.krate, &e.to)) {
                (None, _) => {
                    bad.insert(format!(
                        "{at}: module '{}' of {} is in no layer of MODULES",
                        e.from, e.krate
                    ));
                }
                (Some(a), Some(b)) if b > a => {
                    bad.insert(format!(
                        "{at}: {} (layer {a}) uses {} (layer {b}), a higher layer of {}",
                        e.from, e.to, e.krate
                    ));
                }
                _ => {}
            }
        }
    }
    for c in circles(edges) {
        bad.insert(format!("circle between files: {}", c.join(" -> ")));
    }
    bad.into_iter().collect()
}

fn is_ancestor(module_file: &Path, of: &Path) -> bool {
    let dir = match module_file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs") => return true,
        Some("mod.rs") => module_file.parent().unwrap_or(Path::new("")),
        _ => return false,
    };
    of.starts_with(dir) && of != module_file
}

/// Circles in the graph of files (each file to the files it names), each once, named
/// `crate/file`.
pub fn circles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in edges {
        if e.from_file == e.to_file || is_ancestor(&e.to_file, &e.from_file) {
            continue;
        }
        let name = |f: &Path| format!("{}/{}", e.krate, f.display());
        graph
            .entry(name(&e.from_file))
            .or_default()
            .insert(name(&e.to_file));
    }
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = vec![(start.as_str(), vec![start.as_str()])];
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
                } else if !path.contains(&next.as_str()) && path.len() < 8 {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    found.into_iter().collect()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn all_edges(all: &[Crate]) -> Vec<Edge> {
    all.iter()
        .flat_map(|c| edges(&c.name, &c.dir.join("src")))
        .collect()
}

#[test]
fn no_crate_or_module_runs_up_a_layer_and_no_file_circles() {
    let all = crates(&root());
    assert!(all.len() >= 12, "found only {} crates", all.len());
    let edges = all_edges(&all);
    assert!(
        edges.len() > 100,
        "the scan found only {} paths",
        edges.len()
    );
    let mut bad = crate_violations(&all);
    bad.extend(module_violations(&edges));
    assert!(
        bad.is_empty(),
        "{} layering violation(s) (the layers are CRATES and MODULES in tests/it/layers.rs and ARCHITECTURE.md):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Only costlab-bpf speaks bpf(2) and spells BPF's numbers: no other source (tests and
/// examples included) calls bpf(2), names a bpf(2) command or opcode constant of its own,
/// builds an instruction from an opcode byte or compares one with an opcode byte.
#[test]
fn only_the_bpf_crate_speaks_bpf2_and_spells_opcodes() {
    const SPOKEN: [&str; 8] = [
        "SYS_bpf",
        "const BPF_",
        "BPF_PROG_LOAD",
        "Insn::new(",
        ".code == 0x",
        ".code & 0x",
        ".code, 0x",
        "i.code, 0x",
    ];
    let mut files = Vec::new();
    for dir in ["src", "tests", "crates", "examples"] {
        rust_files(&root().join(dir), &mut files);
    }
    let bpf = root().join("crates/bpf");
    let this = root().join("tests/it/layers.rs");
    let mut bad = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&bpf) && **f != this) {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if let Some(w) = SPOKEN.iter().find(|w| line.contains(*w)) {
                bad.push(format!("{}:{}: {w}", f.display(), n + 1));
            }
        }
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    assert!(
        bad.is_empty(),
        "BPF numbers outside crates/bpf (write them with costlab_bpf's insn, asm and uapi):\n{}",
        bad.join("\n")
    );
}

/// The checker itself, on a workspace written here: a lab depending on a lab, a crate
/// depending upwards, a module using a higher module, and a circle through `super::` are each
/// caught; test code is not read.
#[test]
fn the_checker_catches_upward_crates_lab_to_lab_upward_modules_and_circles() {
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, text: &str| {
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    };
    let manifest = |name: &str, deps: &[&str]| {
        let mut t = format!("[package]\nname = \"{name}\"\n\n[dependencies]\n");
        for d in deps {
            t += &format!("{d}.workspace = true\n");
        }
        t + "\n[dev-dependencies]\ncostlab-echo.workspace = true\n"
    };
    w("Cargo.toml", &manifest("costlab", &["costlab-core"]));
    w("src/lib.rs", "pub mod cli;\n");
    w(
        "crates/core/Cargo.toml",
        &manifest("costlab-core", &["costlab-history"]),
    );
    w(
        "crates/core/src/lib.rs",
        "pub mod model;\npub mod measure;\n",
    );
    w(
        "crates/core/src/model/mod.rs",
        "use crate::machine::Machine;\n",
    );
    w(
        "crates/core/src/measure/conditions.rs",
        "use super::procstat::fill;\n",
    );
    w(
        "crates/core/src/measure/procstat.rs",
        "use crate::measure::conditions::Conditions;\n#[cfg(test)]\nmod tests { use crate::machine::x; }\n",
    );
    w("crates/core/src/machine/mod.rs", "\n");
    w(
        "crates/history/Cargo.toml",
        &manifest("costlab-history", &[]),
    );
    w(
        "crates/labs/mem/Cargo.toml",
        &manifest("costlab-mem", &["costlab-core", "costlab-echo"]),
    );
    w("crates/labs/mem/src/lib.rs", "use super::x;\n");
    w(
        "crates/labs/echo/Cargo.toml",
        &manifest("costlab-echo", &["costlab-core"]),
    );
    let all = crates(dir.path());
    let mut bad = crate_violations(&all);
    bad.extend(module_violations(&all_edges(&all)));
    let text = bad.join("\n");
    assert!(
        text.contains("the lab costlab-mem depends on the lab costlab-echo"),
        "{text}"
    );
    assert!(
        text.contains("costlab-core (layer 0) depends on costlab-history (layer 1)"),
        "{text}"
    );
    assert!(
        text.contains("model (layer 0) uses machine (layer 2), a higher layer of costlab-core"),
        "{text}"
    );
    assert!(
        text.contains("circle between files: costlab-core/measure/conditions.rs -> costlab-core/measure/procstat.rs -> costlab-core/measure/conditions.rs"),
        "{text}"
    );
    assert_eq!(bad.len(), 4, "{text}");
}

/// `cargo test --release --test it -- layers::print_the_graph --nocapture`: the crates, and each
/// crate's module graph with counts.
#[test]
fn print_the_graph() {
    let all = crates(&root());
    for c in &all {
        let deps: Vec<&str> = c.deps.iter().map(|(d, _)| d.as_str()).collect();
        println!("{:>16} -> {}", c.name, deps.join(", "));
    }
    let mut counts: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for e in all_edges(&all)
        .iter()
        .filter(|e| !e.from.is_empty() && e.from != e.to)
    {
        *counts
            .entry((e.krate.clone(), e.from.clone(), e.to.clone()))
            .or_default() += 1;
    }
    for ((k, f, t), n) in counts {
        if MODULES.iter().any(|(c, _)| *c == k) {
            println!("{k:>16}: {f} -> {t} ({n})");
        }
    }
}
