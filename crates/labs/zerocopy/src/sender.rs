//! The zerocopy sender: one payload by each method (read+write, mmap+write, sendfile,
//! splice, send, MSG_ZEROCOPY, io_uring send and send-zc), counting its calls and the
//! kernel's zero-copy completions.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use io_uring::{opcode, types, IoUring};

use super::completions::{self, Tally, UringZc, IORING_SEND_ZC_REPORT_USAGE};
use super::model::Method;

use super::source::SourceFile;

/// Zero-copy buffers in flight before the sender waits for a completion.
const ZC_BUFFERS: usize = 4;
/// The longest a sample may take to drain its zero-copy completions or get its ack.
pub(super) const STALL: Duration = Duration::from_secs(10);

pub(super) fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A syscall's return value, -1 turned into the error (EINTR retried by the callers).
pub(super) fn check(ret: isize, what: &str) -> Result<usize> {
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
pub(super) struct Sender<'a> {
    pub(super) method: Method,
    pub(super) size: usize,
    pub(super) sock: RawFd,
    pub(super) file: Option<&'a SourceFile>,
    pub(super) off: usize,
    pub(super) bufs: Vec<Vec<u8>>,
    pub(super) pipe: Option<(OwnedFd, OwnedFd, usize)>,
    pub(super) ring: Option<IoUring>,
    pub(super) tally: Tally,
    pub(super) last_id: Vec<Option<u32>>,
    pub(super) notifs_pending: Vec<u32>,
    pub(super) next_buf: usize,
    pub(super) calls: u64,
}

impl<'a> Sender<'a> {
    pub(super) fn new(
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
                if let Some(why) = costlab_core::measure::syscost::uring_unsupported() {
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

    pub(super) fn payload(&mut self) -> Result<()> {
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
    pub(super) fn drain(&mut self) -> Result<()> {
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
