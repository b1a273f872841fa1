//! Old spellings of flags: one table, hidden aliases, one warning line naming the new spelling.

use super::command;

/// An old spelling of a flag: on the command `path` (words after `costlab`), `--old` still
/// parses as the argument `id` (whose long name is the new spelling), hidden from `--help`,
/// and warns once per process (`old_spelling_warning`).
pub struct OldSpelling {
    pub path: &'static str,
    pub id: &'static str,
    pub old: &'static str,
    /// The new spelling, where the old one is a hidden argument of its own (gc's `--reps`,
    /// read beside `--samples`) rather than an alias.
    pub own: Option<&'static str>,
}

const fn old(path: &'static str, id: &'static str, old: &'static str) -> OldSpelling {
    OldSpelling {
        path,
        id,
        old,
        own: None,
    }
}

const fn own(path: &'static str, old: &'static str, new: &'static str) -> OldSpelling {
    OldSpelling {
        path,
        id: old,
        old,
        own: Some(new),
    }
}

/// Every old spelling, in one place: `command()` adds each as a hidden alias of its argument,
/// `old_spelling_warning` names the new spelling. One meaning, one visible spelling: sizes
/// `--sizes`, threads `--threads`, the case selector `--case`, a count of samples `--samples`,
/// an output file `--out`, an output directory `--out-dir`.
pub const OLD_SPELLINGS: &[OldSpelling] = &[
    old("mem bandwidth", "block", "block"),
    old("mem bandwidth", "op", "op"),
    old("mem loaded", "size", "size"),
    old("echo", "engine", "engine"),
    old("echo", "sizes", "size"),
    old("echo", "threads", "threads"),
    old("echo serve", "engine", "engine"),
    old("echo serve", "size", "size"),
    old("echo serve", "cpu", "cpu"),
    old("echo load", "size", "size"),
    old("echo load", "threads", "threads"),
    old("numa", "size", "size"),
    old("zerocopy", "methods", "methods"),
    old("pin", "workload", "workload"),
    own("gc", "reps", "samples"),
    own("gc tax", "reps", "samples"),
    old("run", "report", "out"),
    old("run", "report", "report"),
    old("report", "out", "out"),
    old("export", "output", "output"),
    old("export", "samples", "samples"),
    old("trend", "html", "html"),
    old("price", "terms", "terms"),
];

/// Add the old spellings that belong to `cmd` (whose path is `path`) and its subcommands.
pub(super) fn add_old_spellings(mut cmd: clap::Command, path: &str) -> clap::Command {
    for o in OLD_SPELLINGS
        .iter()
        .filter(|o| o.path == path && o.own.is_none())
    {
        cmd = cmd.mut_arg(o.id, |a| a.alias(o.old));
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in subs {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |c| add_old_spellings(c, &sub_path));
    }
    cmd
}

/// The one warning line for the old spellings `argv` used (`None`: none), naming each new
/// spelling: "costlab: --engine is now --case; the old spelling will go". Only the words
/// before a `--` are flags; a value that merely looks like an old flag is not one.
pub fn old_spelling_warning<I, T>(argv: I) -> Option<String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let cmd = command();
    let matches = cmd.clone().try_get_matches_from(&argv).ok()?;
    // The command path that ran, and its clap command (to name each new spelling).
    let mut path = Vec::new();
    let mut at = &cmd;
    let mut m = &matches;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_string());
        at = at.find_subcommand(name)?;
        m = sub;
    }
    let path = path.join(" ");
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|w| w.to_string_lossy().into_owned())
        .take_while(|w| w != "--")
        .collect();
    let mut said = Vec::new();
    for o in OLD_SPELLINGS.iter().filter(|o| o.path == path) {
        let flag = format!("--{}", o.old);
        let used = words
            .iter()
            .any(|w| *w == flag || w.starts_with(&format!("{flag}=")));
        let new = match o.own {
            Some(new) => new,
            None => at
                .get_arguments()
                .find(|a| a.get_id() == o.id)
                .and_then(|a| a.get_long())?,
        };
        if used && new != o.old {
            said.push(format!("{flag} is now --{new}"));
        }
    }
    if said.is_empty() {
        return None;
    }
    let spelling = if said.len() == 1 {
        "the old spelling will go"
    } else {
        "the old spellings will go"
    };
    Some(format!("costlab: {}; {spelling}", said.join(", ")))
}
