//! What a syscall costs: the single measurements behind the cost terms s, w and t, and
//! `measure_terms` that gathers them into the cost terms (`CostTerms`) the echo model prices.
//!
//! Shared by the syscall lab (which prints every figure) and the echo lab (which prices its
//! servers' counts with the terms), so it lives here and not in either lab.
//!
//! Every figure is ns per call (or per op for io_uring), sampled with `sample_fn`. Its parts:
//! `sampling` (timing ops that can fail, and two phases apart), `calls` (the calls that need
//! no peer), `tcp` (loopback send and recv), `uring` (io_uring ops by batch) and `terms` (the
//! cost terms derived from the figures); this file gathers them in `measure_all`.

mod calls;
mod sampling;
mod tcp;
mod terms;
mod uring;

use anyhow::Result;

use super::{SampleSpec, Summary};

pub use calls::{clock_gettime_vdso, epoll_wait_ready, null_syscall, read_devzero, write_devnull};
pub use tcp::{
    tcp_send_recv, tcp_send_recv_at, tcp_send_recv_sized, tcp_send_wake, UNALIGNED_OFFSET,
};
pub use terms::{interpolate, terms_from, CostTerms, PerByte};
pub use uring::{uring_nop, uring_send_recv, uring_unsupported};

/// The io_uring batches measured by default: 1, 2, 4, ..., 256.
pub const DEFAULT_BATCHES: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The numbers of ready events `epoll_wait` is measured returning.
pub const EPOLL_EVENTS: [u32; 2] = [1, 32];

/// Bytes moved by each send and recv (the article's echo message).
pub const MSG: usize = 16;

/// Message sizes at which send and recv are measured for the fixed + per-byte fit.
pub const PER_BYTE_SIZES: [usize; 6] = [16, 256, 1024, 4096, 16 * 1024, 64 * 1024];

/// The largest batch accepted (rings and loopback pairs are sized from it).
pub const MAX_BATCH: u32 = 4096;

/// One measured call: its case (`call`, `batch`) and its samples, ns per call or per op.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFigure {
    pub call: &'static str,
    pub batch: u32,
    pub samples: Vec<f64>,
}

/// Everything the syscall lab measured, and what it could not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurements {
    pub figures: Vec<CallFigure>,
    /// Why io_uring figures are missing (io_uring_setup refused, an op failed), if they are.
    pub uring_unsupported: Option<String>,
    /// tcp-send and tcp-recv by message size: (call, bytes, ns per message samples).
    pub sized: Vec<(&'static str, usize, Vec<f64>)>,
}

impl Measurements {
    pub fn get(&self, call: &str, batch: u32) -> Option<&[f64]> {
        self.figures
            .iter()
            .find(|f| f.call == call && f.batch == batch)
            .map(|f| f.samples.as_slice())
    }

    /// (bytes, median ns per message) of a sized call, ascending in size.
    pub fn by_size(&self, call: &str) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = self
            .sized
            .iter()
            .filter(|(c, _, _)| *c == call)
            .filter_map(|(_, b, v)| Summary::of(v).map(|s| (*b as f64, s.median)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    pub fn push(&mut self, call: &'static str, batch: u32, samples: Vec<f64>) {
        self.figures.push(CallFigure {
            call,
            batch,
            samples,
        });
    }

    /// (batch, summary) for every batch of a batched call, ascending.
    fn batched(&self, call: &str) -> Vec<(u32, Summary)> {
        let mut v: Vec<(u32, Summary)> = self
            .figures
            .iter()
            .filter(|f| f.call == call)
            .filter_map(|f| Summary::of(&f.samples).map(|s| (f.batch, s)))
            .collect();
        v.sort_by_key(|(b, _)| *b);
        v
    }
}

/// How `measure_all` runs each measurement: given a label and the measurement, run it and
/// return its figures. The syscall lab's runner shows progress and reads counters around
/// each; `plain` just runs it.
pub type Runner<'a> =
    &'a mut dyn FnMut(&str, &mut dyn FnMut() -> Result<Vec<CallFigure>>) -> Result<Vec<CallFigure>>;

/// A runner that just runs the measurement.
pub fn plain(_: &str, f: &mut dyn FnMut() -> Result<Vec<CallFigure>>) -> Result<Vec<CallFigure>> {
    f()
}

fn one(call: &'static str, batch: u32, samples: Vec<f64>) -> Vec<CallFigure> {
    vec![CallFigure {
        call,
        batch,
        samples,
    }]
}

/// Every measurement of the syscall lab, for the io_uring `batches` given. io_uring
/// failures (setup refused, an op the kernel lacks) leave those figures out with the reason
/// in `uring_unsupported`; anything else is an error.
pub fn measure_all(spec: &SampleSpec, batches: &[u32], run: Runner) -> Result<Measurements> {
    // Pinned for the length of the measurements: a migration in the middle of a sample would
    // time the scheduler, and the echo servers are pinned too.
    let _pinned = super::cpus::Pinned::last_allowed();
    let mut m = Measurements::default();
    let add = |m: &mut Measurements, figs: Vec<CallFigure>| m.figures.extend(figs);
    let figs = run("getppid", &mut || {
        Ok(one("getppid", 1, null_syscall(spec)?))
    })?;
    add(&mut m, figs);
    let figs = run("clock_gettime", &mut || {
        Ok(one("clock_gettime", 1, clock_gettime_vdso(spec)?))
    })?;
    add(&mut m, figs);
    let figs = run("read /dev/zero", &mut || {
        Ok(one("read-devzero", 1, read_devzero(spec)?))
    })?;
    add(&mut m, figs);
    let figs = run("write /dev/null", &mut || {
        Ok(one("write-devnull", 1, write_devnull(spec)?))
    })?;
    add(&mut m, figs);
    let figs = run("tcp send/recv", &mut || {
        let (send, recv) = tcp_send_recv(spec)?;
        let mut v = one("tcp-send", 1, send);
        v.extend(one("tcp-recv", 1, recv));
        Ok(v)
    })?;
    add(&mut m, figs);
    for &size in &PER_BYTE_SIZES {
        let mut got = None;
        run(&format!("tcp send/recv {size} B"), &mut || {
            got = Some(tcp_send_recv_sized(spec, size)?);
            Ok(Vec::new())
        })?;
        if let Some((send, recv)) = got {
            m.sized.push(("tcp-send", size, send));
            m.sized.push(("tcp-recv", size, recv));
        }
    }
    // The largest size again, received 16 bytes past a cache line: what a misplaced buffer
    // costs here (the fit above uses only the aligned rows).
    let size = PER_BYTE_SIZES[PER_BYTE_SIZES.len() - 1];
    let mut got = None;
    run(
        &format!("tcp recv {size} B, {UNALIGNED_OFFSET} B past a line"),
        &mut || {
            got = Some(tcp_send_recv_at(spec, size, UNALIGNED_OFFSET)?.1);
            Ok(Vec::new())
        },
    )?;
    if let Some(recv) = got {
        m.sized.push(("tcp-recv-unaligned", size, recv));
    }
    let figs = run("tcp send waking a peer", &mut || {
        Ok(one("tcp-send-wake", 1, tcp_send_wake(spec)?))
    })?;
    add(&mut m, figs);
    for &k in &EPOLL_EVENTS {
        let figs = run(&format!("epoll_wait {k} events"), &mut || {
            Ok(one("epoll-wait", k, epoll_wait_ready(spec, k)?))
        })?;
        add(&mut m, figs);
    }
    m.uring_unsupported = uring_unsupported();
    if m.uring_unsupported.is_some() {
        return Ok(m);
    }
    for &b in batches {
        let nop = run(&format!("io_uring nop batch {b}"), &mut || {
            Ok(one("uring-nop", b, uring_nop(spec, b)?))
        });
        let sendrecv = nop.and_then(|figs| {
            add(&mut m, figs);
            run(&format!("io_uring send/recv batch {b}"), &mut || {
                let (send, recv) = uring_send_recv(spec, b)?;
                let mut v = one("uring-send", b, send);
                v.extend(one("uring-recv", b, recv));
                Ok(v)
            })
        });
        match sendrecv {
            Ok(figs) => add(&mut m, figs),
            Err(e) => {
                crate::measure::cancel::check()?;
                m.uring_unsupported = Some(format!("io_uring batch {b}: {e:#}"));
                return Ok(m);
            }
        }
    }
    Ok(m)
}

/// Measure the cost terms (every default batch: 1, 2, 4, ..., 256) and derive them.
pub fn measure_terms(spec: &SampleSpec) -> Result<CostTerms> {
    measure_terms_at(spec, &DEFAULT_BATCHES)
}

/// Measure the cost terms at the io_uring `batches` given (include 1: the article's t is
/// read there; a smaller set makes a quicker plan, a larger batch covers servers that reap
/// more completions per enter than 256).
pub fn measure_terms_at(spec: &SampleSpec, batches: &[u32]) -> Result<CostTerms> {
    let m = measure_all(spec, batches, &mut plain)?;
    terms_from(&m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_all_derives_terms_and_gives_the_thread_back() {
        let before = super::super::cpus::allowed_cpus();
        let mut labels = Vec::new();
        let m = measure_all(&SampleSpec::tiny(), &[1, 2], &mut |label, f| {
            labels.push(label.to_string());
            f()
        })
        .unwrap();
        assert_eq!(super::super::cpus::allowed_cpus(), before);
        assert_eq!(labels[0], "getppid");
        let t = terms_from(&m).unwrap();
        assert_eq!(t.s_ns.n, 3);
        match &m.uring_unsupported {
            None => {
                assert_eq!(t.t_nop_ns.len(), 2);
                assert_eq!(t.uring_send_ns.len(), 2);
                assert!(labels.iter().any(|l| l == "io_uring send/recv batch 2"));
            }
            Some(why) => assert!(t.t_nop_ns.is_empty(), "{why}"),
        }
    }

    #[test]
    fn single_measurements_run() {
        let spec = SampleSpec::tiny();
        assert_eq!(null_syscall(&spec).unwrap().len(), 3);
        assert!(clock_gettime_vdso(&spec).unwrap().iter().all(|x| *x > 0.0));
        assert_eq!(read_devzero(&spec).unwrap().len(), 3);
        assert_eq!(write_devnull(&spec).unwrap().len(), 3);
        let (s, r) = tcp_send_recv(&spec).unwrap();
        assert_eq!((s.len(), r.len()), (3, 3));
        assert_eq!(epoll_wait_ready(&spec, 4).unwrap().len(), 3);
        assert_eq!(tcp_send_wake(&spec).unwrap().len(), 3);
    }
}
