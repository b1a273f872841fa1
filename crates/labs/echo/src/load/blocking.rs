//! The blocking client: one thread per connection, one request at a time, for comparison.

use costlab_core::measure::aligned::AlignedBuf;
use std::io::{Read, Write};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::spec::{LoadReport, LoadSpec};
use super::stream::{
    connect, count_connect_error, count_io_error, fill_request, finish, loader_cpus,
};
use costlab_core::error::usage;
use costlab_core::measure::cpus;
use costlab_core::measure::cputime::{thread_cpu_ns, thread_sleeps};

pub(super) fn run(spec: &LoadSpec) -> Result<LoadReport> {
    let start_gate = Arc::new(Barrier::new(spec.conns + 1));
    let first_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut handles = Vec::with_capacity(spec.conns);
    for id in 0..spec.conns as u64 {
        let spec2 = spec.clone();
        let gate = Arc::clone(&start_gate);
        let first = Arc::clone(&first_error);
        let h = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || blocking_conn(&spec2, id, &gate, &first));
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                // Release the threads already waiting, then say why.
                for _ in handles.len()..spec.conns {
                    let g = Arc::clone(&start_gate);
                    std::thread::spawn(move || g.wait());
                }
                start_gate.wait();
                for h in handles {
                    let _ = h.join();
                }
                return Err(usage(format!(
                    "cannot start thread {} of the blocking client ({e}); use fewer --conns or --client event",
                    id + 1
                )));
            }
        }
    }
    start_gate.wait();
    let mut total = LoadReport::empty(loader_cpus(spec));
    for h in handles {
        match h.join() {
            Ok(r) => total.merge(&r),
            Err(_) => anyhow::bail!("a blocking client thread panicked"),
        }
    }
    finish(spec, total, &first_error)
}

fn blocking_conn(
    spec: &LoadSpec,
    id: u64,
    gate: &Barrier,
    first_error: &Mutex<Option<String>>,
) -> LoadReport {
    let cpu0 = thread_cpu_ns();
    let slept0 = thread_sleeps();
    if let Some(c) = &spec.cpus {
        let _ = cpus::pin_current_to(c);
    }
    let mut report = LoadReport::empty(0);
    let sock = connect(spec.target);
    gate.wait();
    let mut sock = match sock {
        Ok(s) => s,
        Err(e) => {
            count_connect_error(&mut report, &e, first_error);
            report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
            report.sleeps = Some(thread_sleeps().saturating_sub(slept0));
            return report;
        }
    };
    let epoch = Instant::now();
    let measure_from = spec.warmup();
    let deadline = spec.duration;
    let hard_end = spec.duration + spec.grace();
    // Open loop per connection: this connection's share of the rate.
    let interval = spec
        .rate
        .map(|r| Duration::from_secs_f64(spec.conns as f64 / r));
    let mut due = interval.map(|iv| iv.mul_f64(id as f64 / spec.conns as f64));
    let mut req = vec![0u8; spec.size];
    let mut got = AlignedBuf::zeroed(spec.size);
    let mut seq = 0u64;
    loop {
        let now = epoch.elapsed();
        if now >= deadline {
            break;
        }
        let sent = match (due, interval) {
            (Some(d), Some(iv)) => {
                // A slow open loop (--rate below a request a second per connection) waits
                // for Ctrl-C too.
                if d > now && !costlab_core::measure::cancel::sleep(d - now) {
                    break;
                }
                due = Some(d + iv);
                d
            }
            _ => now,
        };
        if sent >= deadline {
            break;
        }
        fill_request(id, seq, &mut req);
        seq += 1;
        let left = hard_end
            .saturating_sub(epoch.elapsed())
            .max(Duration::from_millis(1));
        let _ = sock.set_read_timeout(Some(left));
        let _ = sock.set_write_timeout(Some(left));
        if let Err(e) = sock.write_all(&req) {
            count_io_error(&mut report, &e);
            break;
        }
        if let Err(e) = sock.read_exact(&mut got) {
            count_io_error(&mut report, &e);
            break;
        }
        if got[..] != req[..] {
            report.mismatch(id, (seq - 1) * req.len() as u64, &req, &got);
            break;
        }
        let done = epoch.elapsed();
        report.answered += 1;
        if sent >= measure_from {
            let _ = report
                .latency
                .record(done.saturating_sub(sent).as_nanos().max(1) as u64);
        }
        if done >= measure_from && done <= deadline {
            report.requests += 1;
        }
    }
    let _ = sock.shutdown(std::net::Shutdown::Both);
    report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    report.sleeps = Some(thread_sleeps().saturating_sub(slept0));
    report
}
