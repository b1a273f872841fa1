//! `costlab completions SHELL` and `costlab man`: written from the CLI's own clap definitions
//! (`cli::command()`, the labs' subcommands included), so they cannot drift from the parser.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use costlab_core::error::usage;

use crate::cli::{CompletionsArgs, ManArgs};

/// `text` on stdout; a reader that stopped early (`| head`) is not an error.
fn print(text: &[u8]) -> Result<()> {
    match std::io::stdout().lock().write_all(text) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

pub fn completions(args: &CompletionsArgs) -> Result<()> {
    let mut cmd = crate::cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "costlab", &mut out);
    print(&out)
}

pub fn man(args: &ManArgs) -> Result<()> {
    let cmd = crate::cli::command();
    let Some(dir) = &args.out_dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut out)
            .context("rendering the man page")?;
        return print(&out);
    };
    write_pages(cmd, dir)
}

/// costlab.1 and a page for every command (costlab-mem.1, costlab-mem-latency.1, ...) in `dir`.
fn write_pages(cmd: clap::Command, dir: &Path) -> Result<()> {
    costlab_history::report::dest::check_dir("--out-dir", dir)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("cannot create --out-dir {}: {e}", dir.display())))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing man pages in {}", dir.display()))?;
    let pages = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
                .count()
        })
        .unwrap_or(0);
    println!("{pages} man pages in {}", dir.display());
    Ok(())
}
