//! The README and the manual (docs/, an mdBook): the README stays short and says the two
//! set-up commands, every lab has its page, every link resolves (offline), the book builds,
//! and no file of the repository cites one outside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, skip};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn the_readme_is_short_and_gives_exactly_the_two_set_up_commands() {
    let readme = read("README.md");
    let n = readme.lines().count();
    assert!(
        n <= 300,
        "README.md has {n} lines; the manual (docs/) takes the rest"
    );
    let setup = readme
        .split("\n## Set up\n")
        .nth(1)
        .expect("a Set up section");
    let block = setup
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in Set up");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["make run", "make test"]);
    for must in [
        "## Installing",
        "make deb",
        "cargo install --locked --path .",
        "cost sheet (median",
        "$ costlab price ",
        "## Read on",
    ] {
        assert!(readme.contains(must), "README.md lacks {must:?}");
    }
}

/// Every registered lab is named in the labs' index of the manual, linked to its page.
#[test]
fn every_lab_has_a_page_in_the_manual() {
    let index = read("docs/src/labs/README.md");
    let summary = read("docs/src/SUMMARY.md");
    let linked: Vec<(String, String)> = index
        .split('[')
        .skip(1)
        .filter_map(|s| {
            let (text, rest) = s.split_once("](")?;
            Some((text.to_string(), rest.split(')').next()?.to_string()))
        })
        .collect();
    for lab in costlab::registry::all() {
        let name = lab.name();
        let (_, page) = linked
            .iter()
            .find(|(text, _)| text.split([' ', ',']).any(|w| w == name))
            .unwrap_or_else(|| panic!("lab {name} has no page in docs/src/labs/README.md"));
        let path = Path::new(ROOT).join("docs/src/labs").join(page);
        assert!(path.is_file(), "{name}: {} is missing", path.display());
        let rel = path
            .strip_prefix(Path::new(ROOT).join("docs/src"))
            .unwrap()
            .to_str()
            .unwrap()
            .replace("labs/../", "");
        assert!(
            summary.contains(&format!("({rel})")),
            "{rel} is not in SUMMARY.md"
        );
    }
    for page in [
        "price.md",
        "fleet.md",
        "cli.md",
        "exit-status.md",
        "contract.md",
    ] {
        assert!(
            summary.contains(&format!("]({page})")),
            "{page} not in SUMMARY.md"
        );
    }
}

fn check_links(args: &[PathBuf]) {
    let out = Command::new(Path::new(ROOT).join("scripts/check-links.py"))
        .args(args)
        .output()
        .expect("scripts/check-links.py runs (/usr/bin/python3)");
    assert!(
        out.status.success(),
        "broken links:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_readme_architecture_and_manual_sources_link_only_to_what_exists() {
    let mut files: Vec<PathBuf> = vec![
        Path::new(ROOT).join("README.md"),
        Path::new(ROOT).join("ARCHITECTURE.md"),
    ];
    files.extend(common::manual_pages());
    check_links(&files);
}

#[test]
fn the_link_checker_finds_a_broken_link_and_a_missing_anchor() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.html"), "<h1 id=\"top\">A</h1><a href=\"b.html#there\">b</a><a href=\"c.html\">c</a><a href=\"https://example.org/\">x</a>").unwrap();
    std::fs::write(
        dir.path().join("b.html"),
        "<h1 id=\"here\">B</h1><a href=\"a.html#top\">a</a>",
    )
    .unwrap();
    let out = Command::new(Path::new(ROOT).join("scripts/check-links.py"))
        .arg(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("b.html#there: no id 'there'"), "{said}");
    assert!(said.contains("c.html: no such file"), "{said}");
    assert_eq!(said.lines().count(), 2, "{said}");
}

fn mdbook() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("mdbook"))
        .find(|p| p.is_file())
}

/// `mdbook build` makes the book, with a page per entry of SUMMARY.md and the schema beside
/// the contract page, and every link of the built pages resolves.
#[test]
fn the_manual_builds_and_its_links_resolve() {
    let test = "the_manual_builds_and_its_links_resolve";
    let Some(mdbook) = mdbook() else {
        skip::skipped_unless_ci(
            test,
            "no mdbook (scripts/install-deps.sh installs it: cargo install --locked mdbook)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let book = dir.path().join("book");
    let out = Command::new(mdbook)
        .arg("build")
        .arg(Path::new(ROOT).join("docs"))
        .arg("--dest-dir")
        .arg(&book)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mdbook build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "index.html",
        "contract.html",
        "labs/mem.html",
        "costlab-1.schema.json",
    ] {
        assert!(book.join(page).is_file(), "{page} not built");
    }
    check_links(&[book]);
}

/// The repository cites no file outside itself: no tracked file names a design document the
/// repository does not hold.
#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(ROOT)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        skip::skipped(
            "no_file_cites_a_document_outside_the_repository",
            "not a git checkout",
        );
        return;
    };
    let outside = ["DESIGN", ".md"].concat();
    let mut cites = Vec::new();
    for f in out.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let rel = String::from_utf8_lossy(f).into_owned();
        let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join(&rel)) else {
            continue; // binary
        };
        for (i, l) in text.lines().enumerate() {
            if l.contains(&outside) {
                cites.push(format!("{rel}:{}: {l}", i + 1));
            }
        }
    }
    assert!(
        cites.is_empty(),
        "cites a file outside the repository:\n{}",
        cites.join("\n")
    );
}
