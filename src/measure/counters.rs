//! `--counters`: perf counters read around each case.
//!
//! A lab wraps each case in `around(ctx.counters, || ...)` and attaches the readings to the
//! rows that case produced with `Readings::attach`. Hardware counters that the machine cannot
//! give (no PMU in a VM, perf_event_paranoid) are reported in `unsupported` with the reason;
//! software counters still come.

use std::collections::BTreeMap;

use crate::report::ResultRow;

/// Counter values for one case, and the counters that could not be read with why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    pub counters: BTreeMap<String, f64>,
    pub unsupported: BTreeMap<String, String>,
}

impl Readings {
    /// Put these readings on a result row (the JSON's "counters" / "unsupported_counters").
    pub fn attach(&self, row: &mut ResultRow) {
        row.counters = Some(self.counters.clone());
        if !self.unsupported.is_empty() {
            row.unsupported_counters = Some(self.unsupported.clone());
        }
    }

    /// Attach to every row from index `from` on (the rows one case just pushed).
    pub fn attach_from(&self, rows: &mut [ResultRow], from: usize) {
        for row in rows.iter_mut().skip(from) {
            self.attach(row);
        }
    }
}

/// Run `f` with counters open on this process (threads it starts are counted too) when
/// `enabled`; returns `f`'s value and the readings (None when not enabled).
pub fn around<T>(
    enabled: bool,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Option<Readings>)> {
    if !enabled {
        return Ok((f()?, None));
    }
    // Filled in by the counters work (issue 7): open the group, enable, run, read.
    Ok((f()?, Some(Readings::default())))
}
