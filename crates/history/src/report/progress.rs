//! Progress on stderr, only when stderr is a terminal (never in CI logs or pipes).

use std::io::IsTerminal;

pub use indicatif::ProgressBar;
use indicatif::ProgressStyle;

/// A progress bar over `total` steps; hidden when stderr is not a terminal.
pub fn bar(total: u64, label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_prefix(label.to_string());
    pb
}

/// One line of progress on stderr when not on a terminal (so long steps still show life).
pub fn note(msg: &str) {
    if !std::io::stderr().is_terminal() {
        eprintln!("costlab: {msg}");
    }
}
