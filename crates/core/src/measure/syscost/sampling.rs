//! Timing ops that can fail, and two alternating phases timed apart.

use std::hint::black_box;
use std::time::Instant;

use anyhow::Result;

use crate::measure::{sample_fn, Sample, SampleSpec};

pub(super) fn ns_per_iter(samples: Vec<Sample>, ops_per_iter: u64) -> Vec<f64> {
    samples
        .iter()
        .map(|s| s.ns / (s.iters.max(1) * ops_per_iter.max(1)) as f64)
        .collect()
}

/// After an op failed the sampler still wants its samples to last `min_sample` (it grows the
/// iteration count until they do, and a loop that returns at once never would), so a failed
/// run sleeps that long instead: the sampler finishes in bounded time and the error is
/// returned after it.
pub(super) fn stall(spec: &SampleSpec) {
    std::thread::sleep(spec.min_sample);
}

/// Time `op` n times per iteration; the first error stops the loop and is returned.
pub(super) fn sample_fallible(
    spec: &SampleSpec,
    mut op: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let mut failed: Option<anyhow::Error> = None;
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            if failed.is_some() {
                return stall(spec);
            }
            if let Err(e) = black_box(op()) {
                failed = Some(e);
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(ns_per_iter(samples, 1)),
    }
}

/// Take samples of two alternating phases and time each separately. Each iteration of the
/// sampler runs `chunk` ops of phase A, then `chunk` ops of phase B, with a clock read
/// around each phase; a sample's figure per phase is its phase time over its iterations.
/// Returns (A, B) samples, ns per op.
pub(super) fn sample_two_phases(
    spec: &SampleSpec,
    chunk: u64,
    mut a: impl FnMut() -> Result<()>,
    mut b: impl FnMut() -> Result<()>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut failed: Option<anyhow::Error> = None;
    // Per call of the sampler's closure: (iters, ns in A, ns in B). The sampler calls it
    // to calibrate, to warm up and then once per sample, so the last `samples` are the ones.
    let mut runs: Vec<(u64, f64, f64)> = Vec::new();
    let samples = sample_fn(spec, |n| {
        let (mut ta, mut tb, mut done) = (0f64, 0f64, 0u64);
        while done < n && failed.is_none() {
            let k = chunk.min(n - done);
            let t0 = Instant::now();
            for _ in 0..k {
                if let Err(e) = a() {
                    failed.get_or_insert(e);
                    break;
                }
            }
            let t1 = Instant::now();
            for _ in 0..k {
                if failed.is_some() {
                    break;
                }
                if let Err(e) = b() {
                    failed.get_or_insert(e);
                }
            }
            let t2 = Instant::now();
            ta += (t1 - t0).as_nanos() as f64;
            tb += (t2 - t1).as_nanos() as f64;
            done += k;
        }
        if failed.is_some() {
            stall(spec);
        }
        runs.push((n, ta, tb));
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let last = &runs[runs.len().saturating_sub(samples.len())..];
    let per = |t: f64, n: u64| t / n.max(1) as f64;
    Ok((
        last.iter().map(|(n, ta, _)| per(*ta, *n)).collect(),
        last.iter().map(|(n, _, tb)| per(*tb, *n)).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::bail;
    use std::time::Duration;

    #[test]
    fn a_failing_op_ends_the_sampling_with_its_error() {
        let t0 = Instant::now();
        let mut calls = 0;
        let e = sample_fallible(&SampleSpec::tiny(), || {
            calls += 1;
            if calls > 3 {
                bail!("the socket went away")
            }
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("went away"));
        let e =
            sample_two_phases(&SampleSpec::tiny(), 4, || Ok(()), || bail!("reset")).unwrap_err();
        assert!(e.to_string().contains("reset"));
        // Bounded: a few sleeps of min_sample, not a sampler spinning forever.
        assert!(t0.elapsed() < Duration::from_secs(30));
    }
}
