//! Moving bytes to a TCP socket by one method, and timing it: a receiver thread (in a network
//! namespace for veth) reads every byte and acknowledges each sample; the sender, on its own
//! CPU, sends the sample's bytes in payload-sized calls and waits for the acknowledgement.
//!
//! CPU time: the receiver reads its own thread's clock around each sample; the sender's is
//! the process's CPU time over the sample minus the receiver's, so io_uring's kernel workers
//! (threads of this process) count as the sender's.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use io_uring::{opcode, types, IoUring};

use super::completions::{self, Tally, UringZc, IORING_SEND_ZC_REPORT_USAGE};
use super::model::Method;
use crate::measure::{cancel, cpus, cputime, SampleSpec};

/// Zero-copy buffers in flight before the sender waits for a completion.
const ZC_BUFFERS: usize = 4;
/// The longest a sample may take to drain its zero-copy completions or get its ack.
const STALL: Duration = Duration::from_secs(10);

/// What one case measured, one entry per timed sample.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    pub throughput_gbps: Vec<f64>,
    pub sender_ms_per_gb: Vec<f64>,
    pub receiver_ms_per_gb: Vec<f64>,
    pub calls_per_gb: Vec<f64>,
    /// Methods that report it: the share of sends the kernel did not copy.
    pub zerocopy_fraction: Vec<f64>,
}

/// The file the file methods send from: written once, in the page cache, unlinked.
pub struct SourceFile {
    file: File,
    map: *const u8,
    pub len: usize,
}

// SAFETY: the mapping is read-only and lives as long as the SourceFile; sharing a pointer to
// read-only memory between threads is sound.
unsafe impl Sync for SourceFile {}
// SAFETY: as above.
unsafe impl Send for SourceFile {}

impl SourceFile {
    pub fn create(dir: &std::path::Path, len: usize) -> Result<SourceFile> {
        let path = dir.join(format!("costlab-zerocopy-{}.dat", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("creating the source file {}", path.display()))?;
        let _ = std::fs::remove_file(&path);
        let mut block = vec![0u8; 1 << 20];
        let mut state = 0x5eed_u64;
        for b in block.chunks_mut(8) {
            let v = crate::measure::cycle::splitmix(&mut state).to_le_bytes();
            b.copy_from_slice(&v[..b.len()]);
        }
        let mut left = len;
        while left > 0 {
            let n = left.min(block.len());
            file.write_all(&block[..n])
                .with_context(|| format!("writing the source file in {}", dir.display()))?;
            left -= n;
        }
        // Written back now, so no writeback runs while the samples are taken.
        file.sync_all()?;
        // SAFETY: a fresh shared read-only mapping of a file we hold open, of its length.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            bail!(
                "mmap of the source file: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(SourceFile {
            file,
            map: map as *const u8,
            len,
        })
    }
}

impl SourceFile {
    /// The file's bytes, through its mapping.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `map` is a read-only mapping of `len` bytes made in `create` and unmapped
        // only in drop, so it outlives the borrow of self; the file is unlinked and only we
        // hold it, and it is written before it is mapped, so nothing changes the bytes.
        unsafe { std::slice::from_raw_parts(self.map, self.len) }
    }
}

impl Drop for SourceFile {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `create`, once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A syscall's return value, -1 turned into the error (EINTR retried by the callers).
fn check(ret: isize, what: &str) -> Result<usize> {
    if ret < 0 {
        let e = errno();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(anyhow!("{what}: {e}"));
    }
    Ok(ret as usize)
}

/// The sender's state for one method.
struct Sender<'a> {
    method: Method,
    size: usize,
    sock: RawFd,
    file: Option<&'a SourceFile>,
    off: usize,
    bufs: Vec<Vec<u8>>,
    pipe: Option<(OwnedFd, OwnedFd, usize)>,
    ring: Option<IoUring>,
    tally: Tally,
    last_id: Vec<Option<u32>>,
    notifs_pending: Vec<u32>,
    next_buf: usize,
    calls: u64,
}

impl<'a> Sender<'a> {
    fn new(
        method: Method,
        size: usize,
        sock: RawFd,
        file: Option<&'a SourceFile>,
    ) -> Result<Sender<'a>> {
        let nbufs = if method.reports_zerocopy() {
            ZC_BUFFERS
        } else {
            1
        };
        let bufs = (0..nbufs)
            .map(|i| vec![(i as u8).wrapping_add(0x41); size])
            .collect();
        let mut s = Sender {
            method,
            size,
            sock,
            file,
            off: 0,
            bufs,
            pipe: None,
            ring: None,
            tally: Tally::default(),
            last_id: vec![None; nbufs],
            notifs_pending: vec![0; nbufs],
            next_buf: 0,
            calls: 0,
        };
        match method {
            Method::Splice => {
                let (r, w) = rustix::pipe::pipe().context("pipe")?;
                // A pipe as large as allowed (up to the payload) so one splice pair moves much.
                let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
                    .ok()
                    .and_then(|t| t.trim().parse::<usize>().ok())
                    .unwrap_or(1 << 20);
                let want = size.clamp(4096, max);
                // SAFETY: F_SETPIPE_SZ on a pipe we own; failure leaves the default size.
                let got = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, want as i32) };
                let cap = if got > 0 { got as usize } else { 65536 };
                s.pipe = Some((r, w, cap));
            }
            Method::MsgZerocopy => {
                let one: libc::c_int = 1;
                // SAFETY: setsockopt with a pointer to an int of the size given.
                let r = unsafe {
                    libc::setsockopt(
                        sock,
                        libc::SOL_SOCKET,
                        libc::SO_ZEROCOPY,
                        &one as *const _ as *const libc::c_void,
                        std::mem::size_of::<libc::c_int>() as u32,
                    )
                };
                if r != 0 {
                    bail!("SO_ZEROCOPY refused: {} (kernel 4.14+ needed)", errno());
                }
            }
            Method::UringSend | Method::UringSendZc => {
                if let Some(why) = crate::measure::syscost::uring_unsupported() {
                    bail!("{why}");
                }
                let ring = IoUring::new(16).context("io_uring_setup")?;
                if method == Method::UringSendZc {
                    let mut probe = io_uring::Probe::new();
                    ring.submitter()
                        .register_probe(&mut probe)
                        .context("io_uring probe")?;
                    if !probe.is_supported(opcode::SendZc::CODE) {
                        bail!("this kernel has no IORING_OP_SEND_ZC (6.0+ needed)");
                    }
                }
                s.ring = Some(ring);
            }
            _ => {}
        }
        if method.from_file() && file.is_none() {
            bail!("no source file");
        }
        Ok(s)
    }

    /// The next payload's file offset.
    fn next_off(&mut self) -> usize {
        let len = self.file.map_or(0, |f| f.len);
        if self.off + self.size > len {
            self.off = 0;
        }
        let o = self.off;
        self.off += self.size;
        o
    }

    /// Send all of `buf` with plain sends, counting the calls.
    fn send_all(sock: RawFd, calls: &mut u64, mut buf: &[u8], flags: i32) -> Result<()> {
        while !buf.is_empty() {
            // SAFETY: `buf` is a live slice: send reads at most its length from its start.
            let n = unsafe { libc::send(sock, buf.as_ptr().cast(), buf.len(), flags) };
            *calls += 1;
            let n = check(n, "send")?;
            buf = &buf[n..];
        }
        Ok(())
    }

    fn payload(&mut self) -> Result<()> {
        let size = self.size;
        match self.method {
            Method::ReadWrite => {
                let off = self.next_off();
                let fd = self.file.expect("file").file.as_raw_fd();
                let mut got = 0;
                while got < size {
                    let buf = &mut self.bufs[0][got..];
                    // SAFETY: reading into our own buffer of the length given.
                    let n = unsafe {
                        libc::pread(
                            fd,
                            buf.as_mut_ptr() as *mut libc::c_void,
                            buf.len(),
                            (off + got) as libc::off_t,
                        )
                    };
                    self.calls += 1;
                    let n = check(n, "pread")?;
                    if n == 0 {
                        bail!("the source file ended early");
                    }
                    got += n;
                }
                Self::send_all(self.sock, &mut self.calls, &self.bufs[0][..size], 0)
            }
            Method::MmapWrite => {
                let off = self.next_off();
                // off + size <= the mapping's length: next_off wraps before the end.
                let bytes = &self.file.expect("file").bytes()[off..off + size];
                Self::send_all(self.sock, &mut self.calls, bytes, 0)
            }
            Method::Sendfile => {
                let off = self.next_off();
                let fd = self.file.expect("file").file.as_raw_fd();
                let mut o = off as libc::off_t;
                let end = (off + size) as libc::off_t;
                while o < end {
                    // SAFETY: sendfile between two fds we own, with a valid offset pointer.
                    let n = unsafe { libc::sendfile(self.sock, fd, &mut o, (end - o) as usize) };
                    self.calls += 1;
                    if check(n, "sendfile")? == 0 && n == 0 {
                        bail!("sendfile sent nothing");
                    }
                }
                Ok(())
            }
            Method::Splice => {
                let off = self.next_off();
                let fd = self.file.expect("file").file.as_raw_fd();
                let (r, w, cap) = {
                    let (r, w, cap) = self.pipe.as_ref().expect("pipe");
                    (r.as_raw_fd(), w.as_raw_fd(), *cap)
                };
                let mut o = off as libc::loff_t;
                let mut left = size;
                while left > 0 {
                    // SAFETY: splice from our file (offset pointer valid) into our pipe.
                    let n = unsafe {
                        libc::splice(
                            fd,
                            &mut o,
                            w,
                            std::ptr::null_mut(),
                            left.min(cap),
                            libc::SPLICE_F_MOVE,
                        )
                    };
                    self.calls += 1;
                    let n = check(n, "splice file->pipe")?;
                    if n == 0 {
                        bail!("splice from the file moved nothing");
                    }
                    let mut inpipe = n;
                    while inpipe > 0 {
                        // SAFETY: splice from our pipe to our socket, no offsets.
                        let k = unsafe {
                            libc::splice(
                                r,
                                std::ptr::null_mut(),
                                self.sock,
                                std::ptr::null_mut(),
                                inpipe,
                                libc::SPLICE_F_MOVE | libc::SPLICE_F_MORE,
                            )
                        };
                        self.calls += 1;
                        inpipe -= check(k, "splice pipe->socket")?;
                    }
                    left -= n;
                }
                Ok(())
            }
            Method::Send => Self::send_all(self.sock, &mut self.calls, &self.bufs[0][..size], 0),
            Method::MsgZerocopy => self.msg_zerocopy(),
            Method::UringSend => self.uring_send(),
            Method::UringSendZc => self.uring_send_zc(),
        }
    }

    fn msg_zerocopy(&mut self) -> Result<()> {
        let i = self.next_buf;
        self.next_buf = (i + 1) % self.bufs.len();
        if let Some(id) = self.last_id[i] {
            let t0 = Instant::now();
            while self.tally.pending_upto(id) {
                self.read_errqueue(true, t0)?;
            }
        }
        let base = self.bufs[i].as_ptr();
        let mut sent = 0;
        let t0 = Instant::now();
        while sent < self.size {
            // SAFETY: the buffer lives in self.bufs until its completion is read.
            let n = unsafe {
                libc::send(
                    self.sock,
                    base.add(sent) as *const libc::c_void,
                    self.size - sent,
                    libc::MSG_ZEROCOPY,
                )
            };
            self.calls += 1;
            if n < 0 && errno().raw_os_error() == Some(libc::ENOBUFS) {
                // Too many notifications pending (optmem_max): collect some and go on.
                self.read_errqueue(true, t0)?;
                continue;
            }
            let n = check(n, "send(MSG_ZEROCOPY)")?;
            if n > 0 {
                self.last_id[i] = Some(self.tally.sent());
            }
            sent += n;
        }
        Ok(())
    }

    /// Read every completion queued; with `block`, wait (poll for POLLERR) for at least one.
    fn read_errqueue(&mut self, block: bool, since: Instant) -> Result<()> {
        if block {
            let mut pfd = libc::pollfd {
                fd: self.sock,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 100) };
            self.calls += 1;
        }
        let mut control = [0u8; 256];
        loop {
            // SAFETY: msghdr is plain pointers and integers, for which all-zero is valid.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = control.len();
            // SAFETY: msg points at our control buffer of the length given; no data iovecs.
            let n = unsafe {
                libc::recvmsg(self.sock, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
            };
            self.calls += 1;
            if n < 0 {
                let e = errno();
                if e.raw_os_error() == Some(libc::EAGAIN) {
                    break;
                }
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                bail!("recvmsg(MSG_ERRQUEUE): {e}");
            }
            let len = msg.msg_controllen.min(control.len());
            let ranges =
                completions::parse_errqueue_control(&control[..len]).map_err(|e| anyhow!(e))?;
            for r in ranges {
                self.tally.complete(r);
            }
        }
        if block && since.elapsed() > STALL {
            bail!("no MSG_ZEROCOPY completion within {} s", STALL.as_secs());
        }
        Ok(())
    }

    fn uring_send(&mut self) -> Result<()> {
        let mut sent = 0;
        while sent < self.size {
            // SAFETY: bufs[0] outlives the wait below, which reaps this send.
            let sqe = opcode::Send::new(
                types::Fd(self.sock),
                unsafe { self.bufs[0].as_ptr().add(sent) },
                (self.size - sent) as u32,
            )
            .build()
            .user_data(0);
            let ring = self.ring.as_mut().expect("ring");
            // SAFETY: the entry's buffer stays valid until its completion is reaped below.
            unsafe { ring.submission().push(&sqe) }.map_err(|_| anyhow!("SQ full"))?;
            ring.submit_and_wait(1).context("io_uring_enter")?;
            self.calls += 1;
            let cqe = ring
                .completion()
                .next()
                .ok_or_else(|| anyhow!("no completion"))?;
            if cqe.result() < 0 {
                bail!(
                    "io_uring send: {}",
                    std::io::Error::from_raw_os_error(-cqe.result())
                );
            }
            sent += cqe.result() as usize;
        }
        Ok(())
    }

    /// Reap completions: sends tell how much went, notifications free their buffer.
    fn reap_zc(&mut self, sent_result: &mut Option<i32>) {
        let ring = self.ring.as_mut().expect("ring");
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            match completions::parse_uring_cqe(cqe.result(), cqe.flags()) {
                UringZc::Sent { res, more } => {
                    if more {
                        self.notifs_pending[i] += 1;
                    }
                    *sent_result = Some(res);
                }
                UringZc::Notif { copied } => {
                    self.notifs_pending[i] = self.notifs_pending[i].saturating_sub(1);
                    self.tally.completed += 1;
                    if copied {
                        self.tally.copied += 1;
                    }
                }
            }
        }
    }

    fn wait_zc(&mut self) -> Result<()> {
        self.ring
            .as_mut()
            .expect("ring")
            .submit_and_wait(1)
            .context("io_uring_enter")?;
        self.calls += 1;
        Ok(())
    }

    fn uring_send_zc(&mut self) -> Result<()> {
        let i = self.next_buf;
        self.next_buf = (i + 1) % self.bufs.len();
        let t0 = Instant::now();
        while self.notifs_pending[i] > 0 {
            self.wait_zc()?;
            let mut ignore = None;
            self.reap_zc(&mut ignore);
            if t0.elapsed() > STALL {
                bail!("no SEND_ZC notification within {} s", STALL.as_secs());
            }
        }
        let mut sent = 0;
        while sent < self.size {
            // SAFETY: bufs[i] is not reused until its notification is reaped.
            let sqe = opcode::SendZc::new(
                types::Fd(self.sock),
                unsafe { self.bufs[i].as_ptr().add(sent) },
                (self.size - sent) as u32,
            )
            .zc_flags(IORING_SEND_ZC_REPORT_USAGE)
            .build()
            .user_data(i as u64);
            let ring = self.ring.as_mut().expect("ring");
            // SAFETY: as above, the buffer outlives the request.
            unsafe { ring.submission().push(&sqe) }.map_err(|_| anyhow!("SQ full"))?;
            let mut res = None;
            while res.is_none() {
                self.wait_zc()?;
                self.reap_zc(&mut res);
            }
            let res = res.unwrap_or(0);
            if res == -libc::EINVAL {
                bail!("SEND_ZC refused IORING_SEND_ZC_REPORT_USAGE (kernel 6.2+ needed)");
            }
            if res < 0 {
                bail!(
                    "io_uring SEND_ZC: {}",
                    std::io::Error::from_raw_os_error(-res)
                );
            }
            sent += res as usize;
        }
        Ok(())
    }

    /// Wait until the kernel has given every zero-copy buffer back.
    fn drain(&mut self) -> Result<()> {
        let t0 = Instant::now();
        match self.method {
            Method::MsgZerocopy => {
                while self.tally.in_flight() > 0 {
                    self.read_errqueue(true, t0)?;
                }
            }
            Method::UringSendZc => {
                while self.notifs_pending.iter().any(|&n| n > 0) {
                    self.wait_zc()?;
                    let mut ignore = None;
                    self.reap_zc(&mut ignore);
                    if t0.elapsed() > STALL {
                        bail!("no SEND_ZC notification within {} s", STALL.as_secs());
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// One sample's raw figures.
struct Raw {
    bytes: u64,
    wall_ns: u64,
    process_cpu_ns: u64,
    calls: u64,
    completed: u64,
    copied: u64,
}

fn one_sample(s: &mut Sender, stream: &mut TcpStream, bytes: u64) -> Result<Raw> {
    stream.write_all(&bytes.to_le_bytes())?;
    let (calls0, done0, copied0) = (s.calls, s.tally.completed, s.tally.copied);
    let c0 = cputime::process_cpu_ns();
    let t0 = Instant::now();
    for _ in 0..bytes / s.size as u64 {
        s.payload()?;
    }
    s.drain()?;
    let mut ack = [0u8; 1];
    stream
        .read_exact(&mut ack)
        .context("waiting for the receiver's acknowledgement")?;
    let wall_ns = t0.elapsed().as_nanos() as u64;
    let c1 = cputime::process_cpu_ns();
    Ok(Raw {
        bytes,
        wall_ns,
        process_cpu_ns: c1 - c0,
        calls: s.calls - calls0,
        completed: s.tally.completed - done0,
        copied: s.tally.copied - copied0,
    })
}

/// Where the receiver listens: a network namespace (veth) or this one (loopback).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub netns: Option<String>,
    pub ip: IpAddr,
}

fn enter_netns(name: &str) -> Result<()> {
    let f = File::open(format!("/run/netns/{name}"))
        .with_context(|| format!("opening network namespace {name}"))?;
    // SAFETY: setns on an fd we just opened; CLONE_NEWNET moves only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns into {name}: {}", errno());
    }
    Ok(())
}

/// The receiver: accept one connection, then per sample read an 8-byte length, that many
/// bytes, and acknowledge with one byte. Returns its CPU ns per sample.
fn receive(listener: TcpListener) -> Result<Vec<u64>> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, STALL.as_millis() as i32) };
    if ready <= 0 {
        bail!("the sender never connected");
    }
    let (mut s, _) = listener.accept()?;
    s.set_read_timeout(Some(STALL))?;
    let mut buf = vec![0u8; 256 << 10];
    let mut cpu = Vec::new();
    loop {
        let mut hdr = [0u8; 8];
        if s.read_exact(&mut hdr).is_err() {
            break;
        }
        let n = u64::from_le_bytes(hdr);
        if n == 0 {
            break;
        }
        let c0 = cputime::thread_cpu_ns();
        let mut left = n;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let k = s.read(&mut buf[..want])?;
            if k == 0 {
                bail!("the sender closed mid-sample");
            }
            left -= k as u64;
        }
        cpu.push(cputime::thread_cpu_ns() - c0);
        s.write_all(&[1])?;
    }
    Ok(cpu)
}

/// Measure one (method, size) case between `sender_cpu` and `receiver_cpu`.
pub fn measure(
    method: Method,
    size: usize,
    at: &Endpoint,
    file: Option<&SourceFile>,
    sender_cpu: usize,
    receiver_cpu: usize,
    spec: &SampleSpec,
) -> Result<Measured> {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Result<SocketAddr>>();
    std::thread::scope(|scope| -> Result<Measured> {
        let at2 = at.clone();
        let recv = scope.spawn(move || -> Result<Vec<u64>> {
            let bound = (|| -> Result<TcpListener> {
                cpus::pin_current(receiver_cpu)?;
                if let Some(ns) = &at2.netns {
                    enter_netns(ns)?;
                }
                Ok(TcpListener::bind(SocketAddr::new(at2.ip, 0))?)
            })();
            match bound {
                Ok(l) => {
                    let _ = addr_tx.send(Ok(l.local_addr()?));
                    receive(l)
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    let _ = addr_tx.send(Err(e));
                    Err(anyhow!(msg))
                }
            }
        });
        let addr = addr_rx
            .recv()
            .map_err(|_| anyhow!("the receiver thread ended early"))??;
        let sent = scope
            .spawn(move || -> Result<Vec<Raw>> {
                cpus::pin_current(sender_cpu)?;
                let mut stream = TcpStream::connect(addr)
                    .with_context(|| format!("connecting to the receiver at {addr}"))?;
                let r = send_samples(method, size, file, &mut stream, spec);
                // The end marker, also after an error, so the receiver stops.
                let _ = stream.write_all(&0u64.to_le_bytes());
                let _ = stream.shutdown(std::net::Shutdown::Write);
                r
            })
            .join()
            .map_err(|_| anyhow!("the sender thread panicked"))?;
        let recv_cpu = recv
            .join()
            .map_err(|_| anyhow!("the receiver thread panicked"))?;
        let raws = sent?;
        let recv_cpu = recv_cpu?;
        summarise(&raws, &recv_cpu, method, spec.samples)
    })
}

fn send_samples(
    method: Method,
    size: usize,
    file: Option<&SourceFile>,
    stream: &mut TcpStream,
    spec: &SampleSpec,
) -> Result<Vec<Raw>> {
    let mut s = Sender::new(method, size, stream.as_raw_fd(), file)?;
    // Calibrate: grow the sample until it lasts long enough for the clock.
    let mut per = ((4usize << 20).max(size * 4) / size).max(1) as u64;
    let max_per = ((1u64 << 30) / size as u64).max(1);
    let mut raws = Vec::new();
    let started = Instant::now();
    loop {
        cancel::check()?;
        let r = one_sample(&mut s, stream, per * size as u64)?;
        let took = Duration::from_nanos(r.wall_ns);
        raws.push(r);
        if took >= spec.min_sample || per >= max_per {
            break;
        }
        let factor =
            (spec.min_sample.as_secs_f64() * 1.2 / took.as_secs_f64().max(1e-6)).clamp(2.0, 16.0);
        per = ((per as f64 * factor) as u64).min(max_per);
    }
    while started.elapsed() < spec.warmup {
        raws.push(one_sample(&mut s, stream, per * size as u64)?);
    }
    for _ in 0..spec.samples {
        cancel::check()?;
        raws.push(one_sample(&mut s, stream, per * size as u64)?);
    }
    Ok(raws)
}

fn summarise(raws: &[Raw], recv_cpu: &[u64], method: Method, samples: usize) -> Result<Measured> {
    if recv_cpu.len() != raws.len() {
        bail!(
            "the receiver saw {} samples, the sender sent {}",
            recv_cpu.len(),
            raws.len()
        );
    }
    let from = raws.len().saturating_sub(samples);
    let mut m = Measured::default();
    for (r, &rc) in raws[from..].iter().zip(&recv_cpu[from..]) {
        let gb = r.bytes as f64 / 1e9;
        m.throughput_gbps.push(gb / (r.wall_ns as f64 / 1e9));
        m.sender_ms_per_gb
            .push(r.process_cpu_ns.saturating_sub(rc) as f64 / 1e6 / gb);
        m.receiver_ms_per_gb.push(rc as f64 / 1e6 / gb);
        m.calls_per_gb.push(r.calls as f64 / gb);
        if method.reports_zerocopy() && r.completed > 0 {
            m.zerocopy_fraction
                .push(1.0 - r.copied as f64 / r.completed as f64);
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> SampleSpec {
        SampleSpec {
            samples: 2,
            min_sample: Duration::from_millis(1),
            warmup: Duration::from_millis(1),
        }
    }

    fn loopback() -> Endpoint {
        Endpoint {
            netns: None,
            ip: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        }
    }

    /// The kernel's own completions, parsed: on loopback every zero-copy send is copied into
    /// the local receiver and the completion says so, so the fraction is exactly 0.
    #[test]
    fn loopback_zero_copy_completions_say_copied() {
        let cpu = cpus::allowed_cpus()[0];
        for m in [Method::MsgZerocopy, Method::UringSendZc] {
            match measure(m, 64 << 10, &loopback(), None, cpu, cpu, &tiny()) {
                Ok(r) => {
                    assert_eq!(r.zerocopy_fraction.len(), 2, "{}", m.name());
                    assert!(r.zerocopy_fraction.iter().all(|&f| f == 0.0), "{r:?}");
                    assert!(r.calls_per_gb.iter().all(|&c| c > 0.0));
                }
                // Old kernels, io_uring off: the reason is the row's text, not a failure.
                Err(e) => eprintln!("{}: unavailable here: {e:#}", m.name()),
            }
        }
    }

    #[test]
    fn every_file_method_moves_the_bytes() {
        let cpu = cpus::allowed_cpus()[0];
        let f = SourceFile::create(&std::env::temp_dir(), 1 << 20).unwrap();
        for m in [
            Method::ReadWrite,
            Method::MmapWrite,
            Method::Sendfile,
            Method::Splice,
            Method::Send,
        ] {
            let r = measure(m, 16 << 10, &loopback(), Some(&f), cpu, cpu, &tiny()).unwrap();
            assert_eq!(r.throughput_gbps.len(), 2, "{}", m.name());
            assert!(r.zerocopy_fraction.is_empty());
        }
    }
}
