//! How costlab measures: CPUs and pinning, thread teams on a barrier, sampling, statistics,
//! sizes and units. Labs use these; none of them measures on its own terms.

pub mod aligned;
pub mod attach;
pub mod cancel;
pub mod conditions;
pub mod counters;
pub mod cpus;
pub mod cputime;
pub mod cycle;
pub mod hugepool;
pub mod perf;
pub mod procstat;
pub mod quality;
pub mod region;
pub mod sampler;
pub mod sizes;
pub mod stats;
pub mod syscost;
pub mod unitcost;
pub mod units;

pub use sampler::{sample_fn, team, team_window, Sample, SampleSpec, Timeline, WindowSample};
pub use stats::Summary;
