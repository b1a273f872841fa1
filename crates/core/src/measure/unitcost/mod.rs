//! The unit costs `costlab price` multiplies counts by: what one page fault, context switch,
//! futex call, thread or process start, pipe or file read, open or stat costs on this machine,
//! each a set of samples in ns per event.
//!
//! They live here, below the labs, because two users need them: the `cost` lab measures and
//! stores them, and `price` measures the ones the history lacks before it prices a program.

mod faults;
mod files;
mod sched;

use anyhow::Result;

use super::SampleSpec;

/// Every term, in the order they are measured and shown (the `term` case key's values).
pub const TERMS: [&str; 16] = [
    "fault-4k",
    "fault-thp",
    "fault-file",
    "switch-same-cpu",
    "wake-cross-cpu",
    "futex-wake",
    "futex-wait-eagain",
    "thread-spawn",
    "fork-exit",
    "fork-exec",
    "munmap",
    "munmap-shootdown",
    "pipe-rw",
    "file-read",
    "openat-close",
    "stat",
];

/// The sizes at which a term with a per-byte part is measured: the fixed part is read at the
/// smallest, the per-byte part from the line through both.
pub const SIZES: [u64; 2] = [64, 64 * 1024];

/// One figure of a term: ns per event (`latency`) at a size, or the fitted `per_byte` ns.
#[derive(Debug, Clone, PartialEq)]
pub struct TermFigure {
    pub term: &'static str,
    pub size: Option<u64>,
    pub metric: &'static str,
    pub samples: Vec<f64>,
}

/// What a term's figure means, for the table and the reading.
pub fn reading(term: &str) -> &'static str {
    match term {
        "fault-4k" => "first touch of an anonymous 4 KiB page (zeroing included), per fault",
        "fault-thp" => "first touch of an anonymous 2 MiB THP (zeroing 2 MiB included), per fault",
        "fault-file" => "first touch of a mapped page-cache page, per fault (fault-around maps up to 16 pages each)",
        "switch-same-cpu" => "a token handed between two threads on one CPU through a futex, per hand-off (the wake and wait calls included)",
        "wake-cross-cpu" => "a futex wake of a thread asleep on another CPU to it running, per hand-off (the calls included)",
        "futex-wake" => "FUTEX_WAKE with no waiter",
        "futex-wait-eagain" => "FUTEX_WAIT that returns EAGAIN at once",
        "thread-spawn" => "a thread created and joined (its stack's mmap and munmap included)",
        "fork-exit" => "fork, the child's _exit, the parent's wait",
        "fork-exec" => "fork, exec of /bin/true, its run and exit, the parent's wait",
        "munmap" => "munmap of 16 touched 4 KiB pages, per call (this CPU's TLB flushed)",
        "munmap-shootdown" => "munmap of 16 touched pages while a thread of the process runs on another CPU: the flush there by IPI included, per call",
        "pipe-rw" => "a write then a read of `size` bytes through a pipe, per pair",
        "file-read" => "a pread of `size` bytes of a cached file",
        "openat-close" => "open and close of a file",
        "stat" => "newfstatat of a file's path",
        _ => "",
    }
}

/// Measure one term. An Err is a term this machine cannot give (THP off, one CPU); the
/// caller reports it as unsupported with the reason.
pub fn measure(term: &str, spec: &SampleSpec) -> Result<Vec<TermFigure>> {
    let t = TERMS
        .iter()
        .copied()
        .find(|t| *t == term)
        .ok_or_else(|| anyhow::anyhow!("no unit-cost term '{term}'"))?;
    let one = |samples: Vec<f64>| {
        vec![TermFigure {
            term: t,
            size: None,
            metric: "latency",
            samples,
        }]
    };
    Ok(match t {
        "fault-4k" => one(faults::anon(spec, false)?),
        "fault-thp" => one(faults::anon(spec, true)?),
        "fault-file" => one(faults::file(spec)?),
        "switch-same-cpu" => one(sched::handoff(spec, true)?),
        "wake-cross-cpu" => one(sched::handoff(spec, false)?),
        "futex-wake" => one(sched::futex_wake(spec)?),
        "futex-wait-eagain" => one(sched::futex_wait_eagain(spec)?),
        "thread-spawn" => one(sched::thread_spawn(spec)?),
        "fork-exit" => one(sched::fork_exit(spec)?),
        "fork-exec" => one(sched::fork_exec(spec)?),
        "munmap" => one(faults::munmap(spec, false)?),
        "munmap-shootdown" => one(faults::munmap(spec, true)?),
        "pipe-rw" => sized(t, spec, files::pipe_rw)?,
        "file-read" => sized(t, spec, files::file_read)?,
        "openat-close" => one(files::openat_close(spec)?),
        "stat" => one(files::stat(spec)?),
        _ => unreachable!("every term in TERMS has a kernel"),
    })
}

/// A term at each of `SIZES`, and its per-byte part: each sample pair's slope.
fn sized(
    term: &'static str,
    spec: &SampleSpec,
    kernel: fn(&SampleSpec, usize) -> Result<Vec<f64>>,
) -> Result<Vec<TermFigure>> {
    let mut out = Vec::new();
    let mut by_size = Vec::new();
    for &size in &SIZES {
        let samples = kernel(spec, size as usize)?;
        by_size.push(samples.clone());
        out.push(TermFigure {
            term,
            size: Some(size),
            metric: "latency",
            samples,
        });
    }
    let (lo, hi) = (SIZES[0] as f64, SIZES[SIZES.len() - 1] as f64);
    let per_byte: Vec<f64> = by_size[0]
        .iter()
        .zip(&by_size[by_size.len() - 1])
        .map(|(a, b)| ((b - a) / (hi - lo)).max(0.0))
        .collect();
    out.push(TermFigure {
        term,
        size: Some(SIZES[SIZES.len() - 1]),
        metric: "per_byte",
        samples: per_byte,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_term_runs_or_says_why_not() {
        let spec = SampleSpec::tiny();
        for t in TERMS {
            match measure(t, &spec) {
                Ok(figs) => {
                    assert!(!figs.is_empty(), "{t}");
                    for f in figs {
                        assert_eq!(f.samples.len(), 3, "{t}");
                        assert!(f.samples.iter().all(|x| x.is_finite() && *x >= 0.0), "{t}");
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty(), "{t}"),
            }
            assert!(!reading(t).is_empty(), "{t}");
        }
        assert!(measure("nope", &spec).is_err());
    }
}
