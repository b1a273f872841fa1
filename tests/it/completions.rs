//! `costlab completions` and `costlab man`: generated from the CLI's own definitions, loaded
//! by a real bash (Debian's bash-completion) and rendered by a real man.

use std::process::Command;

use crate::common::daemon::tool;
use crate::common::skip::skipped_unless_ci;
use crate::common::{costlab, BIN};

const BASH_COMPLETION: &str = "/usr/share/bash-completion/bash_completion";

/// What bash offers for the words `line` (the last one being completed), with bash-completion
/// and `costlab completions bash` loaded, as a Tab would.
fn bash_completes(line: &[&str]) -> Vec<String> {
    let words = line
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        r#"source {BASH_COMPLETION}
source <('{BIN}' completions bash)
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
# The function `complete -p costlab` names, called as bash calls it: command, word, previous.
fn=$(complete -p costlab | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$fn" costlab "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_a_labs_flag() {
    if !std::path::Path::new(BASH_COMPLETION).is_file() {
        skipped_unless_ci(
            "bash_completes_a_labs_flag",
            "no bash-completion (Debian's bash-completion package)",
        );
        return;
    }
    assert_eq!(bash_completes(&["costlab", "mem", "--pa"]), ["--pages"]);
    // A subcommand, and a lab's own subcommand.
    assert!(bash_completes(&["costlab", "compl"]).contains(&"completions".to_string()));
    assert!(bash_completes(&["costlab", "mem", "lat"]).contains(&"latency".to_string()));
}

#[test]
fn completions_for_each_shell_name_costlab_and_its_labs() {
    // Each shell's own syntax for "costlab has a mem command with a --pages flag".
    for (shell, marker, pages) in [
        ("bash", "complete -F", "--pages"),
        ("zsh", "#compdef costlab", "--pages"),
        ("fish", "complete -c costlab", "-l pages"),
    ] {
        let out = costlab(&["completions", shell]);
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(marker), "{shell}:\n{text}");
        assert!(text.contains(pages) && text.contains("syscall"), "{shell}");
    }
    let out = costlab(&["completions", "tcsh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tcsh") && err.contains("bash"), "{err}");
}

#[test]
fn man_renders_with_man_l() {
    let Some(man) = tool("man") else {
        skipped_unless_ci("man_renders_with_man_l", "no man (Debian's man-db package)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("costlab.1");
    let out = costlab(&["man"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&page, &out.stdout).unwrap();
    let render = |page: &std::path::Path| {
        let out = Command::new(&man)
            .arg("-l")
            .arg(page)
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = render(&page);
    for want in [
        "NAME",
        "costlab",
        "SYNOPSIS",
        "SUBCOMMANDS",
        "completions",
        "mem",
    ] {
        assert!(
            text.contains(want),
            "{want} not in the rendered page:\n{text}"
        );
    }
    // --out-dir: one page per command, a lab's flags in its own.
    let pages = dir.path().join("pages");
    let out = costlab(&["man", "--out-dir", pages.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mem = render(&pages.join("costlab-mem.1"));
    assert!(mem.contains("--pages"), "{mem}");
}
