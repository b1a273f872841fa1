//! What a syscall costs: the single measurements behind the cost terms s, w and t, and
//! `measure_terms` that gathers them into the echo model's `CostTerms`.
//!
//! Shared by the syscall lab (which prints every figure) and the echo lab (which prices its
//! servers' counts with the terms), so it lives here and not in either lab.
//!
//! Every figure is ns per call (or per op for io_uring), sampled with `sample_fn`.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use io_uring::{opcode, squeue, types, IoUring};

use super::{sample_fn, SampleSpec, Summary};
use crate::labs::echo::model::{CostTerms, PerByte};

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

fn ns_per_iter(samples: Vec<super::Sample>, ops_per_iter: u64) -> Vec<f64> {
    samples
        .iter()
        .map(|s| s.ns / (s.iters.max(1) * ops_per_iter.max(1)) as f64)
        .collect()
}

/// s: a raw getppid, which the kernel answers without work. Through `libc::syscall` so no
/// libc wrapper can cache it.
pub fn null_syscall(spec: &SampleSpec) -> Result<Vec<f64>> {
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            // SAFETY: getppid takes no arguments, touches no memory and cannot fail.
            black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
    })?;
    Ok(ns_per_iter(samples, 1))
}

/// clock_gettime(CLOCK_MONOTONIC) through the vDSO: a call that does not enter the kernel.
pub fn clock_gettime_vdso(spec: &SampleSpec) -> Result<Vec<f64>> {
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            black_box(rustix::time::clock_gettime(
                rustix::time::ClockId::Monotonic,
            ));
        }
    })?;
    Ok(ns_per_iter(samples, 1))
}

/// After an op failed the sampler still wants its samples to last `min_sample` (it grows the
/// iteration count until they do, and a loop that returns at once never would), so a failed
/// run sleeps that long instead: the sampler finishes in bounded time and the error is
/// returned after it.
fn stall(spec: &SampleSpec) {
    std::thread::sleep(spec.min_sample);
}

/// Time `op` n times per iteration; the first error stops the loop and is returned.
fn sample_fallible(spec: &SampleSpec, mut op: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
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

/// read of 1 byte from /dev/zero.
pub fn read_devzero(spec: &SampleSpec) -> Result<Vec<f64>> {
    let f = std::fs::File::open("/dev/zero").context("opening /dev/zero")?;
    let mut buf = [0u8; 1];
    sample_fallible(spec, || {
        rustix::io::read(&f, &mut buf).context("reading /dev/zero")?;
        Ok(())
    })
}

/// write of 1 byte to /dev/null.
pub fn write_devnull(spec: &SampleSpec) -> Result<Vec<f64>> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    sample_fallible(spec, || {
        rustix::io::write(&f, b"x").context("writing /dev/null")?;
        Ok(())
    })
}

/// Take samples of two alternating phases and time each separately. Each iteration of the
/// sampler runs `chunk` ops of phase A, then `chunk` ops of phase B, with a clock read
/// around each phase; a sample's figure per phase is its phase time over its iterations.
/// Returns (A, B) samples, ns per op.
fn sample_two_phases(
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

/// A connected loopback TCP pair with TCP_NODELAY on both ends (so each 16-byte send goes out
/// at once instead of waiting on Nagle for the previous segment's ACK).
fn loopback_pair(listener: &TcpListener) -> Result<(TcpStream, TcpStream)> {
    let addr = listener.local_addr()?;
    let client = TcpStream::connect(addr).context("connecting a loopback TCP pair")?;
    let (server, _) = listener.accept().context("accepting a loopback TCP pair")?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((client, server))
}

fn loopback_listener() -> Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0").context("binding a loopback listener on 127.0.0.1")
}

/// 16-byte send and recv on a loopback TCP pair in one thread: (send, recv) ns per call.
///
/// Sends and recvs are paired so the socket buffers never fill: each sampler iteration sends
/// up to 64 messages (1 KiB, far below any socket buffer), then receives the same 64, and the
/// two phases are timed apart. On loopback the send itself carries the segment into the
/// peer's receive queue (the softirq runs on the sender's way out), so the send figure holds
/// the whole transmit and receive path and the recv figure the copy out of the queue.
pub fn tcp_send_recv(spec: &SampleSpec) -> Result<(Vec<f64>, Vec<f64>)> {
    tcp_send_recv_sized(spec, MSG)
}

/// As `tcp_send_recv` with `size`-byte messages: (send, recv) ns per message. Each phase
/// moves at most 32 KiB (64 messages of 16 B, one of 64 KiB), far below the socket buffers
/// set here, so a send never waits for the reader; a recv of a large message may take more
/// than one call, which is part of its cost.
pub fn tcp_send_recv_sized(spec: &SampleSpec, size: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let listener = loopback_listener()?;
    let (mut tx, mut rx) = loopback_pair(&listener)?;
    for s in [&tx, &rx] {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(s, 1 << 20);
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(s, 1 << 20);
        // A bug that made a send wait for a reader that never comes fails, not hangs.
        s.set_write_timeout(Some(std::time::Duration::from_secs(2)))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    }
    let size = size.max(1);
    let chunk = (32 * 1024 / size).clamp(1, 64) as u64;
    let msg: Vec<u8> = (0..size).map(|i| (i * 7 + 0x5a) as u8).collect();
    let mut buf = vec![0u8; size];
    sample_two_phases(
        spec,
        chunk,
        || {
            tx.write_all(&msg).context("send on loopback TCP")?;
            Ok(())
        },
        || {
            // A stream may hand back fewer bytes than asked; read until the message is whole.
            rx.read_exact(&mut buf).context("recv on loopback TCP")?;
            if buf != msg {
                bail!("loopback TCP returned other bytes than were sent");
            }
            Ok(())
        },
    )
}

/// A 16-byte loopback send that wakes its peer, ns per call. The peer thread, on another
/// CPU where there is one, sleeps in recv and echoes each message back; each round times
/// only the send, then waits for the echo, by which time the peer is asleep in recv again.
/// This send minus a plain `tcp-send` is what waking a sleeping peer adds to a send, a cost
/// an echo server pays whenever its client is waiting for the reply.
pub fn tcp_send_wake(spec: &SampleSpec) -> Result<Vec<f64>> {
    use std::net::Shutdown;
    let listener = loopback_listener()?;
    let (mut tx, mut rx) = loopback_pair(&listener)?;
    let allowed = super::cpus::allowed_cpus();
    // measure_all pins us to the last allowed CPU; the peer takes the first.
    let peer_cpu = (allowed.len() > 1).then(|| allowed[0]);
    let msg = [0x3cu8; MSG];
    std::thread::scope(|scope| -> Result<Vec<f64>> {
        let peer = scope.spawn(move || -> Result<()> {
            if let Some(cpu) = peer_cpu {
                let _ = super::cpus::pin_current(cpu);
            }
            let mut buf = [0u8; MSG];
            loop {
                match rx.read_exact(&mut buf) {
                    Ok(()) => rx.write_all(&buf).context("peer echo")?,
                    // The measuring side closed: done.
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(anyhow::Error::new(e).context("peer recv")),
                }
            }
        });
        let mut failed: Option<anyhow::Error> = None;
        let mut runs: Vec<(u64, f64)> = Vec::new();
        let mut back = [0u8; MSG];
        let sampled = sample_fn(spec, |n| {
            let mut t = 0f64;
            for _ in 0..n {
                if failed.is_some() {
                    stall(spec);
                    break;
                }
                let t0 = Instant::now();
                let sent = tx.write(&msg);
                t += t0.elapsed().as_nanos() as f64;
                let round = match sent {
                    Ok(MSG) => tx.read_exact(&mut back).context("echo from the peer"),
                    Ok(k) => Err(anyhow!("short send on loopback TCP: {k} of {MSG} bytes")),
                    Err(e) => Err(anyhow::Error::new(e).context("send on loopback TCP")),
                };
                if let Err(e) = round {
                    failed = Some(e);
                }
            }
            runs.push((n, t));
        });
        // Closing our side ends the peer's loop whatever happened above.
        let _ = tx.shutdown(Shutdown::Both);
        let peer_result = peer
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the echo peer thread panicked")));
        let samples = sampled?;
        if let Some(e) = failed {
            return Err(e);
        }
        peer_result?;
        let last = &runs[runs.len().saturating_sub(samples.len())..];
        Ok(last.iter().map(|(n, t)| t / (*n).max(1) as f64).collect())
    })
}

/// `epoll_wait` returning `events` ready events (level-triggered eventfds that stay
/// readable), ns per call.
pub fn epoll_wait_ready(spec: &SampleSpec, events: u32) -> Result<Vec<f64>> {
    use rustix::event::epoll;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
    let mut fds = Vec::new();
    for i in 0..events {
        let fd =
            rustix::event::eventfd(1, rustix::event::EventfdFlags::NONBLOCK).context("eventfd")?;
        epoll::add(
            &ep,
            &fd,
            epoll::EventData::new_u64(u64::from(i)),
            epoll::EventFlags::IN,
        )
        .context("epoll_ctl ADD")?;
        fds.push(fd);
    }
    let empty = epoll::Event {
        flags: epoll::EventFlags::empty(),
        data: epoll::EventData::new_u64(0),
    };
    let mut list = vec![empty; events as usize];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    sample_fallible(spec, || {
        let got = epoll::wait(&ep, &mut list[..], Some(&zero)).context("epoll_wait")?;
        if got != events as usize {
            bail!("epoll_wait returned {got} events, expected {events}");
        }
        Ok(())
    })
}

/// Why io_uring cannot be used here, or None when a ring can be set up.
pub fn uring_unsupported() -> Option<String> {
    match IoUring::new(8) {
        Ok(_) => None,
        Err(e) => Some(uring_setup_reason(&e)),
    }
}

/// io_uring_setup's error in words, with the likely cause.
fn uring_setup_reason(e: &std::io::Error) -> String {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim().to_string())
        .ok();
    match (e.raw_os_error(), sysctl.as_deref()) {
        (Some(libc::ENOSYS), _) => "io_uring_setup: ENOSYS (kernel built without io_uring)".into(),
        (Some(libc::EPERM), Some(v)) if v != "0" => {
            format!("io_uring_setup: EPERM (sysctl kernel.io_uring_disabled = {v}; 0 enables it)")
        }
        (Some(libc::EPERM), _) => {
            "io_uring_setup: EPERM (denied, likely by a seccomp filter of the container)".into()
        }
        _ => format!("io_uring_setup: {e}"),
    }
}

fn ring(batch: u32) -> Result<IoUring> {
    IoUring::new(batch.next_power_of_two().max(8)).map_err(|e| anyhow!(uring_setup_reason(&e)))
}

/// Submit `entries` with one submit_and_wait, reap them all, and check each result with `ok`.
fn submit_batch(
    ring: &mut IoUring,
    entries: &[squeue::Entry],
    ok: impl Fn(i32) -> bool,
) -> Result<()> {
    // SAFETY: every entry is a NOP or points into buffers the caller keeps alive and does not
    // touch until this function returns, and this function returns only after every entry has
    // completed (or after an error, when the caller drops the ring before the buffers).
    unsafe { ring.submission().push_multiple(entries) }
        .map_err(|_| anyhow!("io_uring submission queue too small for {}", entries.len()))?;
    let want = entries.len();
    let mut reaped = 0;
    while reaped < want {
        ring.submit_and_wait(want - reaped)
            .context("io_uring_enter")?;
        for cqe in ring.completion() {
            reaped += 1;
            if !ok(cqe.result()) {
                bail!(
                    "io_uring op failed: {}",
                    std::io::Error::from_raw_os_error(-cqe.result())
                );
            }
        }
    }
    Ok(())
}

/// io_uring NOP per op at `batch`: n NOPs submitted with one submit_and_wait(n).
pub fn uring_nop(spec: &SampleSpec, batch: u32) -> Result<Vec<f64>> {
    let mut ring = ring(batch)?;
    let nops: Vec<squeue::Entry> = (0..batch)
        .map(|i| opcode::Nop::new().build().user_data(u64::from(i)))
        .collect();
    let mut failed = None;
    let samples = sample_fn(spec, |n| {
        for _ in 0..n {
            if failed.is_some() {
                return stall(spec);
            }
            if let Err(e) = submit_batch(&mut ring, &nops, |r| r >= 0) {
                failed = Some(e);
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(ns_per_iter(samples, u64::from(batch)))
}

/// 16-byte send and recv through io_uring at `batch`: (send, recv) ns per op.
///
/// Each iteration submits n sends with one submit_and_wait(n), then n recvs of what they
/// sent with another, each phase timed apart (preparing, entering and reaping). The sends go
/// round-robin over up to 32 loopback pairs, at most 128 x 16 bytes queued on one socket,
/// and every byte is received before the next iteration, so no socket buffer fills. A recv
/// whose data is already queued completes inline; one that is not waits in the kernel until
/// it is, which it will be since every send completed first.
pub fn uring_send_recv(spec: &SampleSpec, batch: u32) -> Result<(Vec<f64>, Vec<f64>)> {
    use std::os::fd::AsRawFd;
    // Declared before the ring so they outlive it: on an error mid-batch the ring is dropped
    // (and its ops cancelled) before the memory they point into.
    let msg = [0xa5u8; MSG];
    let mut bufs = vec![[0u8; MSG]; batch as usize];
    let listener = loopback_listener()?;
    let pairs: Vec<(TcpStream, TcpStream)> = (0..batch.min(32))
        .map(|_| loopback_pair(&listener))
        .collect::<Result<_>>()?;
    let mut ring = ring(batch)?;
    let sends: Vec<squeue::Entry> = (0..batch as usize)
        .map(|i| {
            let fd = types::Fd(pairs[i % pairs.len()].0.as_raw_fd());
            opcode::Send::new(fd, msg.as_ptr(), MSG as u32)
                .build()
                .user_data(i as u64)
        })
        .collect();
    let recvs: Vec<squeue::Entry> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let fd = types::Fd(pairs[i % pairs.len()].1.as_raw_fd());
            opcode::Recv::new(fd, b.as_mut_ptr(), MSG as u32)
                .flags(libc::MSG_WAITALL)
                .build()
                .user_data(i as u64)
        })
        .collect();
    // Both phases use the one ring, in turn.
    let ring = std::cell::RefCell::new(&mut ring);
    let full = |r: i32| r == MSG as i32;
    let out = sample_two_phases(
        spec,
        1,
        || submit_batch(&mut ring.borrow_mut(), &sends, full).context("io_uring send"),
        || submit_batch(&mut ring.borrow_mut(), &recvs, full).context("io_uring recv"),
    );
    // The recv buffers are only read after the ring's last batch completed.
    let (send, recv) = out?;
    if bufs.iter().any(|b| *b != msg) {
        bail!("io_uring recv returned other bytes than were sent");
    }
    let per_op = |v: Vec<f64>| v.into_iter().map(|x| x / f64::from(batch)).collect();
    Ok((per_op(send), per_op(recv)))
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

/// The calling thread pinned to one CPU for the length of the measurements (a migration in
/// the middle of a sample would time the scheduler, and the echo servers are pinned too);
/// the thread's own affinity comes back on drop.
struct PinnedHere {
    old: Option<rustix::thread::CpuSet>,
}

impl PinnedHere {
    /// Pin to the last CPU we may use: CPU 0 takes most of the machine's interrupts.
    fn new() -> PinnedHere {
        let old = rustix::thread::sched_getaffinity(None).ok();
        if let Some(&cpu) = super::cpus::allowed_cpus().last() {
            // Not being able to pin (a restricted container) leaves the figures noisier, not
            // wrong, so it is no reason to stop.
            let _ = super::cpus::pin_current(cpu);
        }
        PinnedHere { old }
    }
}

impl Drop for PinnedHere {
    fn drop(&mut self) {
        if let Some(set) = &self.old {
            let _ = rustix::thread::sched_setaffinity(None, set);
        }
    }
}

/// Every measurement of the syscall lab, for the io_uring `batches` given. io_uring
/// failures (setup refused, an op the kernel lacks) leave those figures out with the reason
/// in `uring_unsupported`; anything else is an error.
pub fn measure_all(spec: &SampleSpec, batches: &[u32], run: Runner) -> Result<Measurements> {
    let _pinned = PinnedHere::new();
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

/// Each sample minus a fixed amount (the median of s): w's samples keep the spread of what
/// was measured, s's spread is reported with s.
fn median_of(samples: &[f64]) -> f64 {
    super::stats::median(samples)
}

fn minus(samples: &[f64], s: f64) -> Vec<f64> {
    samples.iter().map(|x| x - s).collect()
}

/// The cost terms from a set of measurements: s, w_send = tcp-send - s, w_recv =
/// tcp-recv - s, t(n) and the io_uring send/recv per op by batch, epoll_wait by events.
pub fn terms_from(m: &Measurements) -> Result<CostTerms> {
    let need = |call: &str| {
        m.get(call, 1)
            .and_then(Summary::of)
            .ok_or_else(|| anyhow!("no {call} figure to derive the cost terms from"))
    };
    let s = need("getppid")?;
    need("tcp-send")?;
    need("tcp-recv")?;
    let send = m.get("tcp-send", 1).unwrap_or_default();
    let recv = m.get("tcp-recv", 1).unwrap_or_default();
    let summary = |v: Vec<f64>| Summary::of(&v).ok_or_else(|| anyhow!("empty samples"));
    let uring_send = m.batched("uring-send");
    let uring_recv = m.batched("uring-recv");
    // The mean of a send op and a recv op, paired by sample: both come from one iteration.
    let uring_sendrecv = uring_send
        .iter()
        .filter_map(|(b, _)| {
            let a = m.get("uring-send", *b)?;
            let r = m.get("uring-recv", *b)?;
            let mean: Vec<f64> = a.iter().zip(r).map(|(x, y)| (x + y) / 2.0).collect();
            Summary::of(&mean).map(|sm| (*b, sm))
        })
        .collect();
    Ok(CostTerms {
        s_ns: s,
        w_send_ns: summary(minus(send, s.median))?,
        w_recv_ns: summary(minus(recv, s.median))?,
        t_nop_ns: m.batched("uring-nop"),
        uring_sendrecv_ns: uring_sendrecv,
        uring_send_ns: uring_send,
        uring_recv_ns: uring_recv,
        epoll_wait_ns: m.batched("epoll-wait"),
        wake_ns: m
            .get("tcp-send-wake", 1)
            .and_then(|v| Summary::of(&minus(v, median_of(send)))),
        uring_unsupported: m.uring_unsupported.clone(),
        send_bytes: PerByte::fit(&m.by_size("tcp-send")),
        recv_bytes: PerByte::fit(&m.by_size("tcp-recv")),
    })
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
    use std::time::Duration;

    fn tiny() -> SampleSpec {
        SampleSpec {
            samples: 3,
            min_sample: Duration::from_millis(1),
            warmup: Duration::from_millis(1),
        }
    }

    fn fake() -> Measurements {
        let mut m = Measurements::default();
        m.push("getppid", 1, vec![100.0, 90.0, 110.0]);
        m.push("clock_gettime", 1, vec![20.0, 20.0, 21.0]);
        m.push("tcp-send", 1, vec![1300.0, 1200.0, 1400.0]);
        m.push("tcp-recv", 1, vec![500.0, 600.0, 550.0]);
        m.push("epoll-wait", 1, vec![200.0]);
        m.push("epoll-wait", 32, vec![800.0]);
        m.push("tcp-send-wake", 1, vec![4300.0, 4400.0]);
        for b in [4u32, 1, 16] {
            let f = f64::from(b);
            m.push("uring-nop", b, vec![50.0 + 400.0 / f]);
            m.push("uring-send", b, vec![900.0 + 400.0 / f, 1000.0 + 400.0 / f]);
            m.push("uring-recv", b, vec![300.0 + 400.0 / f, 400.0 + 400.0 / f]);
        }
        m
    }

    #[test]
    fn terms_from_fake_measurements() {
        let t = terms_from(&fake()).unwrap();
        assert_eq!(t.s_ns.median, 100.0);
        // w = measured - median s, sample by sample.
        assert_eq!(t.w_send_ns.median, 1200.0);
        assert_eq!((t.w_send_ns.min, t.w_send_ns.max), (1100.0, 1300.0));
        assert_eq!(t.w_recv_ns.median, 450.0);
        let batches: Vec<u32> = t.t_nop_ns.iter().map(|(b, _)| *b).collect();
        assert_eq!(batches, vec![1, 4, 16]);
        assert_eq!(t.t_nop_ns[0].1.median, 450.0);
        assert_eq!(t.t_nop_ns[2].1.median, 75.0);
        // Send+recv per op: mean of the paired samples, (1300 + 700) / 2 and (1400 + 800) / 2.
        assert_eq!(t.uring_sendrecv_ns[0].0, 1);
        assert_eq!(t.uring_sendrecv_ns[0].1.median, 1050.0);
        assert_eq!(t.uring_send_ns[1].1.median, 1050.0);
        assert_eq!(t.epoll_wait_ns.len(), 2);
        // The wake: tcp-send-wake minus the median tcp-send (1300).
        assert_eq!(t.wake_ns.unwrap().median, 3050.0);
        assert!(t.uring_unsupported.is_none());
        // The article's t: U_send(1) + U_recv(1) - 2s = 1350 + 750 - 200.
        assert_eq!(t.article_t(), Some(1900.0));
    }

    #[test]
    fn terms_need_s_and_tcp() {
        let mut m = fake();
        m.figures.retain(|f| f.call != "tcp-recv");
        assert!(terms_from(&m).unwrap_err().to_string().contains("tcp-recv"));
        let mut m = fake();
        m.figures.retain(|f| !f.call.starts_with("uring"));
        m.uring_unsupported = Some("io_uring_setup: EPERM".into());
        let t = terms_from(&m).unwrap();
        assert!(t.t_nop_ns.is_empty() && t.uring_sendrecv_ns.is_empty());
        assert_eq!(
            t.uring_unsupported.as_deref(),
            Some("io_uring_setup: EPERM")
        );
    }

    #[test]
    fn a_failing_op_ends_the_sampling_with_its_error() {
        let t0 = Instant::now();
        let mut calls = 0;
        let e = sample_fallible(&tiny(), || {
            calls += 1;
            if calls > 3 {
                bail!("the socket went away")
            }
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("went away"));
        let e = sample_two_phases(&tiny(), 4, || Ok(()), || bail!("reset")).unwrap_err();
        assert!(e.to_string().contains("reset"));
        // Bounded: a few sleeps of min_sample, not a sampler spinning forever.
        assert!(t0.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn measure_all_derives_terms_and_gives_the_thread_back() {
        let before = super::super::cpus::allowed_cpus();
        let mut labels = Vec::new();
        let m = measure_all(&tiny(), &[1, 2], &mut |label, f| {
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
        let spec = tiny();
        assert_eq!(null_syscall(&spec).unwrap().len(), 3);
        assert!(clock_gettime_vdso(&spec).unwrap().iter().all(|x| *x > 0.0));
        assert_eq!(read_devzero(&spec).unwrap().len(), 3);
        assert_eq!(write_devnull(&spec).unwrap().len(), 3);
        let (s, r) = tcp_send_recv(&spec).unwrap();
        assert_eq!((s.len(), r.len()), (3, 3));
        assert_eq!(epoll_wait_ready(&spec, 4).unwrap().len(), 3);
        assert_eq!(tcp_send_wake(&spec).unwrap().len(), 3);
    }

    #[test]
    fn uring_measurements_run_or_say_why_not() {
        let spec = tiny();
        if let Some(why) = uring_unsupported() {
            assert!(why.starts_with("io_uring_setup"), "{why}");
            return;
        }
        assert_eq!(uring_nop(&spec, 4).unwrap().len(), 3);
        let (s, r) = uring_send_recv(&spec, 8).unwrap();
        assert_eq!((s.len(), r.len()), (3, 3));
        // More sends than pairs: several messages queue on one socket and come back whole.
        let (s, _) = uring_send_recv(&spec, 64).unwrap();
        assert!(s.iter().all(|x| *x > 0.0));
    }
}
