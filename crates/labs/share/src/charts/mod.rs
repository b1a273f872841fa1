//! The share lab's charts in the HTML report: each variant's scaling with its USL fit, and
//! the core-to-core latency heatmap.

mod c2c;
mod scaling;

use costlab_history::report::charts::Chart;
use costlab_history::report::Doc;

/// The lab's charts of `doc`, in the report's order.
pub fn charts(doc: &Doc) -> Vec<Chart> {
    vec![scaling::chart(doc), c2c::chart(doc)]
}
