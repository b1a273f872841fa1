//! What the io_uring servers (uring.rs, uring_hot.rs, uring_basic.rs) and the io_uring loader
//! share: building a ring, pushing SQEs, one enter per turn, the user_data encoding, a
//! connection's socket as fd or direct descriptor, and accepting, closing and shutting down.

use std::os::fd::RawFd;
use std::time::Duration;

use anyhow::{Context, Result};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::listen::Stop;
use super::stats::ServerStats;
use costlab_core::error::usage;

pub(super) const SQ_ENTRIES: u32 = 4096;
pub(super) const CQ_ENTRIES: u32 = 16384;
// user_data: kind in the top byte, a 24-bit generation, the 32-bit slot.
pub(super) const ACCEPT: u8 = 1;
pub(super) const RECV: u8 = 2;
pub(super) const SEND: u8 = 3;
pub(super) const CANCEL: u8 = 4;
pub(super) const CLOSE: u8 = 5;
pub(super) const POLL: u8 = 6;

pub(super) fn ud(kind: u8, slot: usize, gen: u32) -> u64 {
    (u64::from(kind) << 56) | (u64::from(gen & 0xff_ffff) << 32) | slot as u64
}

pub(super) fn ud_parts(ud: u64) -> (u8, usize, u32) {
    (
        (ud >> 56) as u8,
        (ud & 0xffff_ffff) as usize,
        ((ud >> 32) & 0xff_ffff) as u32,
    )
}

/// Build a ring, trying each setup in turn while the kernel answers EINVAL (flag unknown).
/// Returns the ring and the name of the setup that took.
pub(super) type Setup<'a> = (&'static str, &'a dyn Fn(&mut io_uring::Builder));

pub(super) fn build_ring(attempts: &[Setup]) -> Result<(IoUring, &'static str)> {
    let mut last = None;
    for (name, configure) in attempts {
        let mut b = IoUring::builder();
        configure(&mut b);
        b.setup_cqsize(CQ_ENTRIES);
        match b.build(SQ_ENTRIES) {
            Ok(ring) => return Ok((ring, name)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(unavailable(e)),
        }
    }
    Err(unavailable(last.unwrap_or_else(|| {
        std::io::Error::from_raw_os_error(libc::EINVAL)
    })))
}

pub(super) fn unavailable(e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOSYS) => usage(format!(
            "io_uring is not available here ({e}); it may be disabled by sysctl kernel.io_uring_disabled or a seccomp profile; use --case epoll"
        )),
        _ => anyhow::Error::new(e).context("setting up io_uring"),
    }
}

/// Push an SQE; when the submission queue is full, submit what is there first (an extra
/// enter, counted).
///
/// # Safety
///
/// As for [`push_sqe`]: whatever `sqe` points to must stay valid until its completion is reaped.
pub(super) unsafe fn push(
    ring: &mut IoUring,
    sqe: &squeue::Entry,
    stats: &mut ServerStats,
) -> Result<()> {
    // SAFETY: our caller upholds push_sqe's contract for `sqe`.
    let extra = unsafe { push_sqe(ring, sqe) }?;
    stats.enters += extra;
    stats.syscalls += extra;
    Ok(())
}

/// Push an SQE, submitting first while the submission queue is full. Returns how many
/// enters that took (0 almost always). Shared by the servers and the io_uring loader.
///
/// # Safety
///
/// The kernel reads and writes what `sqe` points to (a data buffer, an iovec and its msghdr)
/// after this returns, up to the operation's completion, or its last one for a multishot
/// operation. The caller must keep each of them valid, and not move or free them or hand
/// them to anyone else, until that completion is reaped or the ring is dropped.
pub(super) unsafe fn push_sqe(ring: &mut IoUring, sqe: &squeue::Entry) -> Result<u64> {
    let mut extra = 0;
    loop {
        // SAFETY: the buffers `sqe` points to stay valid until its completion, as our
        // caller promised.
        if unsafe { ring.submission().push(sqe) }.is_ok() {
            return Ok(extra);
        }
        extra += 1;
        match ring.submit() {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EINTR)) => {}
            Err(e) => return Err(e).context("io_uring_enter (submit)"),
        }
    }
}

/// How long an enter that asks for more than one completion waits for them before it settles
/// for one (IORING_FEAT_MIN_TIMEOUT, 6.12+): a guess that the next event is near must not
/// become a stall when it is not.
pub(super) const MIN_WAIT_USEC: u32 = 50;

/// One io_uring_enter: submit everything queued and wait for `want` completions, no longer
/// than `timeout`; where the kernel has min-timeout, a wait for more than one settles for one
/// after MIN_WAIT_USEC. A timeout, a signal or a full completion queue is not an error.
pub(super) fn submit_and_wait(ring: &mut IoUring, want: usize, timeout: Duration) -> Result<()> {
    let ts = types::Timespec::from(timeout);
    let mut args = types::SubmitArgs::new().timespec(&ts);
    if want > 1 && ring.params().is_feature_min_timeout() {
        args = args.min_wait_usec(MIN_WAIT_USEC);
    }
    match ring.submitter().submit_with_args(want, &args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e).context("io_uring_enter"),
    }
}

/// One turn's single enter: submit everything queued and wait for at least one completion,
/// no longer than the stop tick. Then copy the completions out.
pub(super) fn enter_and_reap(
    ring: &mut IoUring,
    stop: &Stop,
    want: usize,
    stats: &mut ServerStats,
    out: &mut Vec<(u64, i32, u32)>,
) -> Result<()> {
    stats.enters += 1;
    stats.syscalls += 1;
    submit_and_wait(ring, want, stop.tick())?;
    reap(ring, stats, out);
    Ok(())
}

/// How long a server polls its ring before it sleeps (`spin`): about what waking a halted
/// virtual CPU costs, so a poll that finds work within it saves that wake.
pub(super) const SPIN_USEC: u64 = 20;

/// Whether to watch the ring before sleeping, from how the last watches went: one that found
/// work adds 1 to a credit (up to 8), one that found none takes a penalty (8, doubling with
/// each miss in a row up to 128, back to 8 after a hit), and the server watches while the
/// credit is not negative, so under load while about 8 watches in 9 find work. Each sleep
/// taken without watching gives 1 back: at one connection, where the next request is a round
/// trip away, the server watches before one sleep in 9, then 17, 33, 65, 129, and wastes at
/// most SPIN_USEC each time.
#[derive(Debug)]
pub(super) struct Spin {
    credit: i32,
    penalty: i32,
}

impl Default for Spin {
    fn default() -> Spin {
        Spin {
            credit: 0,
            penalty: Spin::MISS,
        }
    }
}

impl Spin {
    const MISS: i32 = 8;
    const MAX_MISS: i32 = 128;
    const MAX: i32 = 8;

    pub(super) fn should(&mut self) -> bool {
        if self.credit >= 0 {
            return true;
        }
        self.credit += 1;
        false
    }

    pub(super) fn found(&mut self, work: bool) {
        if work {
            self.credit = (self.credit + 1).min(Self::MAX);
            self.penalty = Self::MISS;
        } else {
            self.credit -= self.penalty;
            self.penalty = (self.penalty * 2).min(Self::MAX_MISS);
        }
    }
}

/// One turn's enter, as `enter_and_reap`; but where that enter would sleep (nothing to
/// submit, no completion and no work of the ring's pending) and `spin` says so, first watch
/// the ring's IORING_SQ_TASKRUN flag, which the kernel sets as soon as work for us arrives,
/// for at most SPIN_USEC. Watching is reading shared memory: no syscall. The ring must be set
/// up with IORING_SETUP_TASKRUN_FLAG (`build_server_ring`). `ring.spin_hits` and
/// `ring.spin_misses` count how the watches went.
pub(super) fn enter_spin_and_reap(
    ring: &mut IoUring,
    stop: &Stop,
    want: usize,
    spin: Option<&mut Spin>,
    stats: &mut ServerStats,
    out: &mut Vec<(u64, i32, u32)>,
) -> Result<()> {
    // Waiting for more than one completion is a bet that the next comes soon (uring.rs's
    // `want`): that wait is the one to take.
    if let Some(spin) = spin.filter(|_| want == 1) {
        let idle = ring.submission().is_empty()
            && ring.completion().is_empty()
            && !ring.submission().taskrun();
        if idle && spin.should() {
            let from = std::time::Instant::now();
            let until = from + Duration::from_micros(SPIN_USEC);
            let mut work = false;
            let mut at = from;
            while at < until {
                if ring.submission().taskrun() || !ring.completion().is_empty() {
                    work = true;
                    break;
                }
                std::hint::spin_loop();
                at = std::time::Instant::now();
            }
            stats.ring.spin_ns += at.saturating_duration_since(from).as_nanos() as u64;
            spin.found(work);
            if work {
                stats.ring.spin_hits += 1;
            } else {
                stats.ring.spin_misses += 1;
            }
        }
    }
    enter_and_reap(ring, stop, want, stats, out)
}

/// Copy the completions out, counting them and the enter that reaped them.
fn reap(ring: &mut IoUring, stats: &mut ServerStats, out: &mut Vec<(u64, i32, u32)>) {
    out.clear();
    out.extend(
        ring.completion()
            .map(|c| (c.user_data(), c.result(), c.flags())),
    );
    stats.completions += out.len() as u64;
    stats.ring.enter_reaped(out.len());
}

/// The ring setups the uring server and the io_uring loader try, best first:
/// SINGLE_ISSUER + DEFER_TASKRUN (completions run in our own enter, no IPI), else
/// COOP_TASKRUN, else a plain ring.
pub(super) fn build_modern_ring() -> Result<(IoUring, &'static str)> {
    build_ring(&[
        ("single_issuer+defer_taskrun", &|b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
        ("coop_taskrun", &|b| {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }),
        ("plain", &|_| {}),
    ])
}

/// A connection's socket: a plain fd, or a direct descriptor (an index into the ring's
/// registered file table).
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    Fd(RawFd),
    Fixed(u32),
}

/// Build an SQE against a connection's socket, fd or direct descriptor alike.
macro_rules! on_target {
    ($t:expr, $f:ident => $e:expr) => {
        match $t {
            Target::Fd(x) => {
                let $f = types::Fd(x);
                $e
            }
            Target::Fixed(i) => {
                let $f = types::Fixed(i);
                $e
            }
        }
    };
}
pub(super) use on_target;

/// Register a sparse file table for direct descriptors, as large as the fd limit; where the
/// kernel refuses, why (plain descriptors are used instead).
pub(super) fn register_file_table(ring: &IoUring) -> Option<String> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(65536)
        .clamp(64, 65536) as u32;
    ring.submitter()
        .register_files_sparse(limit)
        .err()
        .map(|e| format!("fixed: registering a file table failed ({e}); plain descriptors"))
}

/// Arm the listener's multishot accept; with `fixed`, accepted sockets become direct
/// descriptors in the ring's file table. Shared by the ring path and the hot path.
pub(super) fn arm_accept(
    ring: &mut IoUring,
    listener: RawFd,
    fixed: bool,
    stats: &mut ServerStats,
) -> Result<()> {
    // A direct descriptor is not in the fd table, so it takes no O_CLOEXEC (EINVAL).
    let flags = if fixed { 0 } else { libc::SOCK_CLOEXEC };
    let sqe = opcode::AcceptMulti::new(types::Fd(listener))
        .allocate_file_index(fixed)
        .flags(flags)
        .build()
        .user_data(ud(ACCEPT, 0, 0));
    // SAFETY: the accept passes no address buffer; direct descriptors go into the ring's own
    // file table.
    unsafe { push(ring, &sqe, stats) }
}

/// Read an accept completion: the new connection's socket, if one came. Counts it (or the
/// error) and re-arms the accept when the multishot one ended. An accept refused as built
/// (EINVAL) is an error: re-arming it would spin.
pub(super) fn on_accept(
    ring: &mut IoUring,
    listener: RawFd,
    fixed: bool,
    res: i32,
    flags: u32,
    stats: &mut ServerStats,
) -> Result<Option<Target>> {
    let mut target = None;
    if res >= 0 {
        stats.accepted += 1;
        target = Some(if fixed {
            Target::Fixed(res as u32)
        } else {
            Target::Fd(res)
        });
    } else if res == -libc::EINVAL {
        return Err(
            anyhow::Error::new(std::io::Error::from_raw_os_error(-res)).context("io_uring accept")
        );
    } else if res != -libc::ECANCELED {
        stats.errors += 1;
    }
    if !cqueue::more(flags) && res != -libc::ECANCELED {
        arm_accept(ring, listener, fixed, stats)?;
    }
    Ok(target)
}

/// A slot for a new connection: the last one freed, else a new one at the end.
pub(super) fn take_slot<C>(free: &mut Vec<usize>, conns: &mut Vec<C>, new: fn() -> C) -> usize {
    free.pop().unwrap_or_else(|| {
        conns.push(new());
        conns.len() - 1
    })
}

/// Close a finished connection's socket through the ring, counting it; the slot is the
/// caller's to free. The close's completion needs nothing done.
pub(super) fn push_close(
    ring: &mut IoUring,
    target: Target,
    slot: usize,
    stats: &mut ServerStats,
) -> Result<()> {
    stats.closed += 1;
    let sqe = on_target!(target, f => opcode::Close::new(f).build());
    // SAFETY: a close points to no memory of ours.
    unsafe { push(ring, &sqe.user_data(ud(CLOSE, slot, 0)), stats) }
}

/// At exit: stop accepting, close the live connections' plain descriptors (direct ones go
/// with the file table, unregistered here).
pub(super) fn shut_down(ring: &mut IoUring, live: impl Iterator<Item = Target>, fixed: bool) {
    cancel_accept(ring, ud(ACCEPT, 0, 0));
    for t in live {
        if let Target::Fd(fd) = t {
            // SAFETY: fds of live connections were accepted by us and are closed only here.
            unsafe { libc::close(fd) };
        }
    }
    if fixed {
        let _ = ring.submitter().unregister_files();
    }
}

/// The server's ring: with a kernel thread polling the submission queue where asked, else the
/// best of the modern setups, with IORING_SETUP_TASKRUN_FLAG so that `spin` can see work
/// arrive without an enter.
pub(super) fn build_server_ring(sqpoll: bool) -> Result<(IoUring, &'static str)> {
    if sqpoll {
        return build_ring(&[
            ("sqpoll+single_issuer", &|b| {
                b.setup_sqpoll(1000).setup_single_issuer();
            }),
            ("sqpoll", &|b| {
                b.setup_sqpoll(1000);
            }),
        ]);
    }
    build_ring(&[
        ("single_issuer+defer_taskrun", &|b| {
            b.setup_single_issuer()
                .setup_defer_taskrun()
                .setup_taskrun_flag();
        }),
        ("coop_taskrun", &|b| {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }),
        ("plain", &|_| {}),
    ])
}

/// Cancel the pending accept (`accept_ud`) and wait, briefly, for it to end: an operation
/// still in flight holds the listening socket, and the ring is torn down asynchronously
/// after exit, so without this the port can stay taken for a moment after the server exits.
pub(super) fn cancel_accept(ring: &mut IoUring, accept_ud: u64) {
    let cancel = opcode::AsyncCancel::new(accept_ud)
        .build()
        .user_data(ud(CANCEL, 0, 0));
    // SAFETY: an AsyncCancel points to no memory of ours.
    if unsafe { push_sqe(ring, &cancel) }.is_err() {
        return;
    }
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        if submit_and_wait(ring, 1, Duration::from_millis(20)).is_err() {
            return;
        }
        let ended = ring
            .completion()
            .any(|c| c.user_data() == accept_ud && !cqueue::more(c.flags()));
        if ended {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_watches_while_most_watches_find_work() {
        let mut s = Spin::default();
        assert!(s.should());
        s.found(false);
        // Eight sleeps without watching, then a try again.
        let tries: Vec<bool> = (0..9).map(|_| s.should()).collect();
        assert_eq!(
            tries,
            [false, false, false, false, false, false, false, false, true]
        );
        // Found work eight times: one miss is forgiven, a second is not.
        for _ in 0..20 {
            s.found(true);
        }
        s.found(false);
        assert!(s.should());
        s.found(false);
        assert!(!s.should());
        // Misses in a row pause it longer each time: 8, then 16 sleeps.
        let mut idle = Spin::default();
        let mut pauses = Vec::new();
        for _ in 0..3 {
            assert!(idle.should());
            idle.found(false);
            let mut n = 0;
            while !idle.should() {
                n += 1;
            }
            pauses.push(n);
            // `should` said yes: the watch happens and misses again.
        }
        assert_eq!(pauses, [8, 16, 32]);
    }

    #[test]
    fn user_data_round_trips() {
        let d = ud(SEND, 123_456, 0x1ff_ffff);
        assert_eq!(ud_parts(d), (SEND, 123_456, 0xff_ffff));
        assert_eq!(ud_parts(ud(ACCEPT, 0, 0)), (ACCEPT, 0, 0));
    }
}
