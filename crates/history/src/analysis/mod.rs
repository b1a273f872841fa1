//! Statistics over stored runs: whether a figure changed between two runs (Mann-Whitney U with
//! Benjamini-Hochberg, `compare`) and where a figure's level changed across many (E-divisive
//! change points, `trend`). Data in, verdicts out: it reads no history and draws nothing.

pub mod compare;
pub mod mitigations;
pub mod mwu;
pub mod trend;
