//! The commands over the history (history, compare, export, report, import, push, trend):
//! application code that joins the command line, the labs and the store, kept out of
//! `store/` so that storage knows nothing of either; and `shell`, costlab's completions and
//! man page.

pub mod fleet;
pub mod history;
pub mod machines;
pub mod shell;
pub mod trend;
