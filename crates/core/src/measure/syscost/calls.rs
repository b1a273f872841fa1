//! The calls that need no peer: a null syscall, the vDSO clock, /dev/zero and /dev/null,
//! and epoll_wait over ready eventfds.

use std::hint::black_box;

use anyhow::{bail, Context, Result};

use super::sampling::{ns_per_iter, sample_fallible};
use crate::measure::{sample_fn, SampleSpec};

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
