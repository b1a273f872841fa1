//! The commands over the history (history, compare, export, report, import, push, trend):
//! application code that joins the command line, the labs and the store, kept out of
//! `store/` so that storage knows nothing of either.

pub mod fleet;
pub mod history;
pub mod machines;
pub mod trend;
