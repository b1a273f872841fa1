//! What `costlab gc tax` is asked: the taxes (kinds), the methods and workloads, and the
//! run's configuration.

use costlab_core::error::usage;
use costlab_core::measure::sizes::parse_list;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bounds,
    Prologue,
    WriteBarrier,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bounds => "bounds",
            Kind::Prologue => "prologue",
            Kind::WriteBarrier => "write-barrier",
        }
    }

    /// What the two sides of the ratio are.
    pub fn compares(self) -> &'static str {
        match self {
            Kind::Bounds => "plain build / -gcflags=-B build (slice-indexing kernel)",
            Kind::Prologue => "caller with stack check / //go:nosplit caller",
            Kind::WriteBarrier => "pointer store while marking / while no GC runs",
        }
    }
}

/// How a tax is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Attribution,
    Ab,
    Aa,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Attribution => "attribution",
            Method::Ab => "ab",
            Method::Aa => "aa",
        }
    }
}

pub fn parse_methods(text: &str) -> anyhow::Result<Vec<Method>> {
    let mut out: Vec<Method> = Vec::new();
    for m in parse_list(text, |item| {
        match item {
        "attribution" => Ok(Method::Attribution),
        "ab" => Ok(Method::Ab),
        "aa" => Ok(Method::Aa),
        other => Err(usage(format!(
            "bad tax method '{other}': use attribution (CPU profile), ab (two builds) or aa (the same build moved)"
        ))),
    }
    })? {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// The workloads profiled for attribution.
pub const WORKLOADS: [&str; 2] = ["heap", "server"];

pub fn parse_workloads(text: &str) -> anyhow::Result<Vec<&'static str>> {
    let mut out: Vec<&'static str> = Vec::new();
    for w in parse_list(text, |item| {
        WORKLOADS.iter().copied().find(|w| *w == item).ok_or_else(|| {
            usage(format!(
                "bad workload '{item}': use heap (the vnode heap builder) or server (requests over loopback)"
            ))
        })
    })? {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

/// What `costlab gc tax` measures.
#[derive(Debug, Clone)]
pub struct TaxConfig {
    pub methods: Vec<Method>,
    /// The A/B (and A/A) kinds.
    pub kinds: Vec<Kind>,
    pub workloads: Vec<&'static str>,
    /// A/B and A/A pairs per kind.
    pub reps: usize,
    /// Attribution: profiled processes per workload and build, seconds each sampled, and
    /// seconds each runs unsampled first.
    pub procs: usize,
    pub seconds: f64,
    pub warmup: f64,
    /// Attribution: the rate asked of perf (samples per CPU-second).
    pub perf_hz: u64,
    /// Attribution: also run the -B build and the layout-shifted twin (the A/B cross-check
    /// and its A/A control), interleaved with the plain build.
    pub cross_check: bool,
    /// Live heap of the heap workload and the write-barrier kernel.
    pub live: u64,
}

/// Seconds the workload runs unsampled before each window, by default.
pub const WARMUP_S: f64 = 1.0;

pub fn parse_kinds(text: &str) -> anyhow::Result<Vec<Kind>> {
    let mut out: Vec<Kind> = Vec::new();
    for k in parse_list(text, |item| match item {
        "bounds" => Ok(Kind::Bounds),
        "prologue" => Ok(Kind::Prologue),
        "write-barrier" => Ok(Kind::WriteBarrier),
        other => Err(usage(format!(
            "bad tax kind '{other}': use bounds, prologue or write-barrier"
        ))),
    })? {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// The attribution workloads' live heap at most: small enough that a window holds many GC
/// cycles (a window of a few cycles moves the GC share by where it falls in them).
pub const ATTRIB_LIVE: u64 = 64 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn kinds_parse() {
        assert_eq!(
            parse_kinds("bounds,prologue,write-barrier").unwrap(),
            vec![Kind::Bounds, Kind::Prologue, Kind::WriteBarrier]
        );
        // A kind given twice is refused, naming it (docs/src/cli.md's one list rule).
        let e = parse_kinds("bounds,prologue,write-barrier,bounds").unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("'bounds' is given twice"), "{e}");
        assert_eq!(exit_code(&parse_kinds("nil").unwrap_err()), 2);
    }
}
