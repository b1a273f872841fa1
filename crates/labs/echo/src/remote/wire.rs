//! The loaders' wire format: the one JSON line a loader host sends back (its counts, CPU and
//! latency histogram, serialized as HdrHistogram V2, deflated, hex), the loader's side that
//! writes it, and the lead's merge of several hosts' reports.

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::load::{self, Errors, LoadReport, LoadSpec};
use costlab_core::error::usage;

/// The costlab version every loader host must run (the wire format below is this version's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The wire format's name, in every loader report.
pub const FORMAT: &str = "costlab-loader/1";

/// What one loader sends back: one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderReport {
    pub format: String,
    pub costlab: String,
    /// Requests completed inside the measuring window.
    pub requests: u64,
    /// Requests answered byte-exact over the whole run.
    pub answered: u64,
    pub window_ns: u64,
    /// CPU time of the loader's threads, and how many CPUs they could use.
    pub cpu_ns: u64,
    pub cpus: usize,
    pub errors: WireErrors,
    pub first_mismatches: Vec<String>,
    /// The latency histogram (ns): HdrHistogram V2 with deflate, as hex.
    pub histogram: String,
}

/// The loader's error counts on the wire (load::Errors, which only serializes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireErrors {
    pub mismatch: u64,
    pub reset: u64,
    pub timeout: u64,
    pub connect: u64,
}

impl LoaderReport {
    pub fn from_load(r: &LoadReport) -> Result<LoaderReport> {
        Ok(LoaderReport {
            format: FORMAT.into(),
            costlab: VERSION.into(),
            requests: r.requests,
            answered: r.answered,
            window_ns: r.window.as_nanos() as u64,
            cpu_ns: r.cpu_ns,
            cpus: r.cpus,
            errors: WireErrors {
                mismatch: r.errors.mismatch,
                reset: r.errors.reset,
                timeout: r.errors.timeout,
                connect: r.errors.connect,
            },
            first_mismatches: r.first_mismatches.clone(),
            histogram: encode_histogram(&r.latency)?,
        })
    }

    /// Back to a LoadReport, the histogram deserialized.
    pub fn to_load(&self) -> Result<LoadReport> {
        let mut r = LoadReport::empty(self.cpus);
        r.requests = self.requests;
        r.answered = self.answered;
        r.window = Duration::from_nanos(self.window_ns);
        r.cpu_ns = self.cpu_ns;
        // A loader on another host sleeps on its own network's wakeups, not on this
        // server's loopback sends: not counted.
        r.sleeps = None;
        r.errors = Errors {
            mismatch: self.errors.mismatch,
            reset: self.errors.reset,
            timeout: self.errors.timeout,
            connect: self.errors.connect,
        };
        r.first_mismatches = self.first_mismatches.clone();
        r.latency = decode_histogram(&self.histogram)?;
        Ok(r)
    }

    /// Share of the loader's CPUs it kept busy over the window, in %.
    pub fn cpu_pct(&self) -> f64 {
        self.cpu_ns as f64 * 100.0 / (self.window_ns.max(1) as f64 * self.cpus.max(1) as f64)
    }
}

/// A histogram as HdrHistogram's V2 format (deflated), hex-encoded for a JSON string.
pub fn encode_histogram(h: &Histogram<u64>) -> Result<String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| anyhow::anyhow!("serializing a latency histogram: {e:?}"))?;
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push_str(&format!("{b:02x}"));
    }
    Ok(text)
}

/// The inverse of `encode_histogram`.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>> {
    let text = text.trim();
    anyhow::ensure!(
        text.len().is_multiple_of(2) && text.bytes().all(|b| b.is_ascii_hexdigit()),
        "a loader's histogram is not hex"
    );
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("checked hex"))
        .collect();
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("reading a loader's histogram: {e}"))
}

/// The loaders' reports as one: counts, errors and CPU summed, the histograms merged
/// (so every percentile is the merged distribution's), the window the longest of theirs.
pub fn merge(parts: &[LoadReport]) -> Result<LoadReport> {
    let mut total = LoadReport::empty(parts.iter().map(|p| p.cpus).sum());
    for p in parts {
        total.requests += p.requests;
        total.answered += p.answered;
        total.cpu_ns += p.cpu_ns;
        total.errors.add(&p.errors);
        total.window = total.window.max(p.window);
        total
            .latency
            .add(&p.latency)
            .map_err(|e| anyhow::anyhow!("merging the loaders' histograms: {e:?}"))?;
        total
            .first_mismatches
            .extend(p.first_mismatches.iter().cloned());
    }
    Ok(total)
}

// ---------------------------------------------------------------- the loader's side

/// `costlab echo load --for-lead`: check the spec, say `ready costlab VERSION`, wait for
/// `go` on stdin, run, print the report as one JSON line.
pub fn serve_lead(spec: &LoadSpec) -> Result<()> {
    spec.check()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready costlab {VERSION}")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim() != "go" {
        return Err(usage(
            "--for-lead: the lead closed the connection before saying go; this mode is for `costlab echo --loaders`",
        ));
    }
    let report = load::run(spec)?;
    let wire = LoaderReport::from_load(&report)?;
    writeln!(out, "{}", serde_json::to_string(&wire)?)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = LoadReport::empty(1).latency;
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    fn report(requests: u64, cpu_ns: u64, cpus: usize, lat: &[u64]) -> LoadReport {
        let mut r = LoadReport::empty(cpus);
        r.requests = requests;
        r.answered = requests + 1;
        r.window = Duration::from_millis(500);
        r.cpu_ns = cpu_ns;
        r.latency = hist(lat);
        r
    }

    #[test]
    fn a_histogram_survives_serialization_exactly() {
        let values: Vec<u64> = (1..=5000u64).map(|i| i * 997 % 3_000_000 + 1).collect();
        let h = hist(&values);
        let text = encode_histogram(&h).unwrap();
        assert!(text.bytes().all(|b| b.is_ascii_hexdigit()));
        let back = decode_histogram(&text).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 5000);
        for q in [0.5, 0.9, 0.99, 0.999] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q));
        }
        // An empty histogram too (a loader that answered nothing).
        let empty = hist(&[]);
        assert_eq!(
            decode_histogram(&encode_histogram(&empty).unwrap()).unwrap(),
            empty
        );
        assert!(decode_histogram("zz").is_err());
        assert!(decode_histogram("1c849314").is_err());
    }

    #[test]
    fn a_report_round_trips_through_the_wire() {
        let mut r = report(1234, 400_000_000, 2, &[1000, 2000, 3000]);
        r.errors.timeout = 3;
        r.first_mismatches
            .push("conn 1 byte 2: expected 00, received 01".into());
        let wire = LoaderReport::from_load(&r).unwrap();
        let line = serde_json::to_string(&wire).unwrap();
        assert!(!line.contains('\n'));
        let back: LoaderReport = serde_json::from_str(&line).unwrap();
        assert_eq!(back, wire);
        let r2 = back.to_load().unwrap();
        assert_eq!(
            (r2.requests, r2.answered, r2.cpu_ns, r2.cpus),
            (1234, 1235, 400_000_000, 2)
        );
        assert_eq!(r2.window, r.window);
        assert_eq!(r2.errors, r.errors);
        assert_eq!(r2.latency, r.latency);
        assert_eq!(r2.first_mismatches, r.first_mismatches);
        // 0.4 s of CPU over 0.5 s on 2 CPUs: 40%.
        assert!((wire.cpu_pct() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn merging_sums_counts_and_reads_percentiles_from_the_merged_histogram() {
        // Loader a: 99 fast answers (10 us); loader b: 99 slow ones (10 ms), and one of each
        // the other way, so each alone has a p99 far from the merged one's.
        let mut fast = vec![10_000u64; 99];
        fast.push(10_000_000);
        let mut slow = vec![10_000_000u64; 99];
        slow.push(10_000);
        let a = report(100, 100_000_000, 1, &fast);
        let mut b = report(300, 300_000_000, 2, &slow);
        b.errors.reset = 2;
        let m = merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.requests, 400);
        assert_eq!(m.answered, 402);
        assert_eq!(m.cpu_ns, 400_000_000);
        assert_eq!(m.cpus, 3);
        assert_eq!(m.errors.reset, 2);
        assert_eq!(m.window, Duration::from_millis(500));
        assert_eq!(m.latency.len(), 200);
        // The merged histogram is exactly the histogram of all 200 values.
        let mut all = fast.clone();
        all.extend(&slow);
        let direct = hist(&all);
        assert_eq!(m.latency, direct);
        for q in [0.5, 0.99, 0.999] {
            assert_eq!(m.latency.value_at_quantile(q), direct.value_at_quantile(q));
        }
        // Merged p50 sits at the fast side's top (100 of 200 values are fast), which no
        // average of the loaders' p50s gives.
        let p50 = m.latency.value_at_quantile(0.5);
        assert!(m.latency.equivalent(p50, 10_000), "{p50}");
        let avg_p50 = (a.latency.value_at_quantile(0.5) + b.latency.value_at_quantile(0.5)) / 2;
        assert!(!m.latency.equivalent(avg_p50, p50));
        // Through the wire and back, the same.
        let wired: Vec<LoadReport> = [a, b]
            .iter()
            .map(|r| LoaderReport::from_load(r).unwrap().to_load().unwrap())
            .collect();
        assert_eq!(merge(&wired).unwrap().latency, direct);
        // Busy share: 0.4 s of CPU over 0.5 s on 3 CPUs.
        assert!((m.busy() - 0.4 / 1.5).abs() < 1e-9);
    }
}
