//! The mem lab's charts in the HTML report: bandwidth by block (sequential and random), the
//! latency curve, and loaded latency.

mod bandwidth;
mod latency;
mod loaded;

use costlab_history::report::charts::Chart;
use costlab_history::report::Doc;

/// The mem lab's case keys (docs/src/contract.md).
pub const MEM_KEYS: [&str; 5] = ["op", "pattern", "pages", "block", "threads"];

/// The lab's charts of `doc`, in the report's order.
pub fn charts(doc: &Doc) -> Vec<Chart> {
    let mut v = bandwidth::charts(doc);
    v.push(latency::chart(doc));
    v.push(loaded::chart(doc));
    v
}
