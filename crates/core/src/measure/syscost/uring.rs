//! io_uring ops by batch: a NOP, and a 16-byte send and recv over loopback TCP.

use std::net::TcpStream;

use anyhow::{anyhow, bail, Context, Result};
use io_uring::{opcode, squeue, types, IoUring};

use super::sampling::{ns_per_iter, sample_two_phases, stall};
use super::tcp::{loopback_listener, loopback_pair};
use super::MSG;
use crate::measure::{sample_fn, SampleSpec};

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
///
/// # Safety
///
/// Every entry must be a NOP or point into memory that stays valid, and that nothing else
/// reads or writes, until its op completes: on `Ok` every op has completed; on `Err` some may
/// still be in flight, so the caller must drop `ring` (which cancels them) before that memory.
unsafe fn submit_batch(
    ring: &mut IoUring,
    entries: &[squeue::Entry],
    ok: impl Fn(i32) -> bool,
) -> Result<()> {
    // SAFETY: our caller's promise (see # Safety) is push_multiple's: the entries' memory
    // outlives their ops.
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
            // SAFETY: NOPs point at no memory.
            if let Err(e) = unsafe { submit_batch(&mut ring, &nops, |r| r >= 0) } {
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
        // SAFETY: the sends point into `msg` and the recvs into `bufs`, both declared before
        // the ring and so dropped after it; `bufs` is read only once the last batch is done.
        || unsafe { submit_batch(&mut ring.borrow_mut(), &sends, full) }.context("io_uring send"),
        // SAFETY: as for the sends above.
        || unsafe { submit_batch(&mut ring.borrow_mut(), &recvs, full) }.context("io_uring recv"),
    );
    // The recv buffers are only read after the ring's last batch completed.
    let (send, recv) = out?;
    if bufs.iter().any(|b| *b != msg) {
        bail!("io_uring recv returned other bytes than were sent");
    }
    let per_op = |v: Vec<f64>| v.into_iter().map(|x| x / f64::from(batch)).collect();
    Ok((per_op(send), per_op(recv)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uring_measurements_run_or_say_why_not() {
        let spec = SampleSpec::tiny();
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
