//! A wake-up's cost to the waker when the wakee sleeps on another, idle CPU: the waker sends
//! that CPU an interrupt (an IPI), and in a VM sending one is an exit to the host, paid
//! inside the waker's own syscall (a pipe write, a futex wake). A reader pinned to one CPU
//! blocks on a pipe; a writer pinned to another waits long enough for the reader's CPU to
//! stop polling and halt, then times its one-byte write. Beside each, a write to a pipe
//! nobody waits on is timed. The function-call and rescheduling interrupts the reader's CPU
//! took over the same window (the `CAL` and `RES` rows of /proc/interrupts) say how many
//! writes sent one: `wake-ipi` is the writes' extra time over the plain writes', per IPI. The
//! reader's side, `wake-halted`, is its CPU time in each read that slept (its switch back in
//! on a CPU woken from a halt) over a plain read's, per IPI.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::measure::cpus::{last_two, Pinned};
use crate::measure::cputime::thread_cpu_ns;

use super::tick::row_count;
use crate::measure::{cancel, SampleSpec};

/// Timed writes per sample.
const WRITES: usize = 200;
/// How long the writer waits before each timed write, for the reader's CPU to go idle, µs:
/// the term is measured at each, and a price reads it at its own waits' length. Here (a KVM
/// guest with haltpoll) a wake-up 5 us after the reader slept found its CPU still polling half
/// the time (no interrupt sent), from 10 us on nearly never. Both sides cost more the longer
/// the CPU sat halted: on the 2-vCPU EPYC guest (2026-12-08) the waker's write 6.2, 6.5 and
/// 7.2 us an interrupt after 50, 200 and 1000 us, the wakee's read 11.0, 13.4 and 15.3 us (in a
/// slow minute of the host, 9.3, 10.4 and 19.1 for the waker); a producer blocked on a pipe
/// into gzip waits about 900 us.
pub const IDLE_US: [u64; 3] = [50, 250, 1000];

/// The sum of the `CAL:` and `RES:` rows for CPU `cpu` (the header names the columns `CPU0
/// CPU1 ...`): the interrupts another CPU sends it to run a function or to reschedule.
pub fn ipis_taken(text: &str, cpu: usize) -> Option<u64> {
    let (cal, res) = (row_count(text, "CAL:", cpu), row_count(text, "RES:", cpu));
    (cal.is_some() || res.is_some()).then(|| cal.unwrap_or(0) + res.unwrap_or(0))
}

fn ipis_now(cpu: usize) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").context("reading /proc/interrupts")?;
    ipis_taken(&text, cpu)
        .ok_or_else(|| anyhow::anyhow!("/proc/interrupts has no CAL or RES row for CPU {cpu}"))
}

fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// One sample's figure: the median of the `ipis` slowest woken writes (or reads) less the
/// median plain one, per IPI. The writes that sent an interrupt are the slow ones (6.5-10 us
/// here, against 0.4 for a plain write); where the other CPU still polled for some of the
/// wake-ups they sent none and cost what a plain write does. Taking the median of all the
/// writes gave 129 ns in one `costlab cost` on 2026-12-07, when fewer than half sent one, and
/// 9.3-12.6 us in five others. None where no write sent one (the other CPU polls when idle:
/// a wake-up costs no IPI).
pub fn per_ipi(woken: &mut [u64], plain: &mut [u64], ipis: u64) -> Option<f64> {
    if ipis == 0 || woken.is_empty() || plain.is_empty() {
        return None;
    }
    let k = (ipis as usize).min(woken.len());
    woken.sort_unstable_by(|a, b| b.cmp(a));
    let extra = (median(&mut woken[..k]) - median(plain)).max(0.0);
    Some(extra)
}

fn pipe() -> Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid out array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        bail!("pipe: {}", std::io::Error::last_os_error());
    }
    use std::os::fd::FromRawFd;
    // SAFETY: both fds were just made by pipe and are owned by nobody else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// Which side of a cross-CPU wake-up a figure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The waker's write, less a plain write's, per IPI it sent (`wake-ipi`).
    Waker,
    /// The woken reader's CPU time in its read, less a plain read's, per IPI its CPU took
    /// (`wake-halted`): its switch back in on a CPU that had halted (in a VM the vCPU
    /// re-entered, the tick restarted: more exits), the switch itself included.
    Wakee,
}

/// ns per IPI, of `side`, to wake a task asleep on another CPU idle for `idle_us`.
pub fn wake(spec: &SampleSpec, side: Side, idle_us: u64) -> Result<Vec<f64>> {
    let idle_for = Duration::from_micros(idle_us);
    use std::sync::{Arc, Mutex};
    let (mine, theirs) = last_two("a wake-up across CPUs needs two CPUs")?;
    let _pin = Pinned::to(mine)?;
    let (mut rx, mut tx) = pipe()?;
    let reads = Arc::new(Mutex::new(Vec::with_capacity(WRITES)));
    let reader = {
        let reads = reads.clone();
        std::thread::spawn(move || -> Result<()> {
            let _pin = Pinned::to(theirs)?;
            let mut b = [0u8; 1];
            loop {
                let t0 = thread_cpu_ns();
                match rx.read(&mut b) {
                    Ok(1) if b[0] == b'x' => {}
                    _ => return Ok(()),
                }
                let cpu = thread_cpu_ns() - t0;
                reads.lock().unwrap_or_else(|e| e.into_inner()).push(cpu);
            }
        })
    };
    let (mut plain_rx, mut plain_tx) = pipe()?;
    let mut out = Vec::with_capacity(spec.samples);
    let mut result = Ok(());
    for _ in 0..spec.samples {
        if let Err(e) = cancel::check() {
            result = Err(e);
            break;
        }
        let mut woken = Vec::with_capacity(WRITES);
        let mut plain = Vec::with_capacity(WRITES);
        let before = ipis_now(theirs)?;
        for _ in 0..WRITES {
            let idle = Instant::now();
            while idle.elapsed() < idle_for {
                std::hint::spin_loop();
            }
            let t0 = Instant::now();
            tx.write_all(b"x")?;
            woken.push(t0.elapsed().as_nanos() as u64);
        }
        let ipis = ipis_now(theirs)?.saturating_sub(before);
        let mut b = [0u8; 1];
        for _ in 0..WRITES {
            let t0 = Instant::now();
            plain_tx.write_all(b"x")?;
            let w = t0.elapsed().as_nanos() as u64;
            let c0 = thread_cpu_ns();
            plain_rx.read_exact(&mut b)?;
            plain.push(match side {
                Side::Waker => w,
                Side::Wakee => thread_cpu_ns() - c0,
            });
        }
        if side == Side::Wakee {
            // The reader's last read is done within the plain writes' time, or soon after.
            std::thread::sleep(idle_for);
            woken = std::mem::take(&mut *reads.lock().unwrap_or_else(|e| e.into_inner()));
        }
        match per_ipi(&mut woken, &mut plain, ipis) {
            Some(v) => out.push(v),
            None => {
                result = Err(anyhow::anyhow!(
                    "waking a task on CPU {theirs} sent it no interrupt ({WRITES} wake-ups): its idle loop polls, so a wake-up costs no IPI here"
                ));
                break;
            }
        }
    }
    let _ = tx.write_all(b"q");
    drop(tx);
    let _ = reader.join();
    result.map(|_| out)
}

/// Pages each round of the `fault-shootdown` term writes (8 MiB).
const COW_PAGES: usize = 2048;

/// Times a `fault-shootdown` pair is taken before too few flushes reach the other CPU mean
/// that it flushes none (rather than that another task held that CPU for a moment).
const TRIES: u32 = 3;

/// The `TLB:` row of /proc/interrupts for CPU `cpu`: the TLB shootdowns it took.
fn shootdowns_now(cpu: usize) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").context("reading /proc/interrupts")?;
    row_count(&text, "TLB:", cpu)
        .ok_or_else(|| anyhow::anyhow!("/proc/interrupts has no TLB row for CPU {cpu}"))
}

/// What the partner thread of `fault_shootdown` does.
const SPIN: u8 = 0;
const PARK: u8 = 1;
const EXIT: u8 = 2;

/// ns per TLB shootdown a copy-on-write fault sends to another CPU that runs a thread of the
/// same process (a Go or JVM heap written while its other threads run): the fault must flush
/// that CPU's TLB entry for the old page, by an interrupt it waits on (in a VM, exits on both
/// sides). Each sample writes `COW_PAGES` pages first read (so the zero page is mapped and
/// each write is a copy on write) twice: once while a thread of this process spins on the
/// other CPU, once while it is parked (its CPU idle, no flush sent there). The difference, per
/// shootdown that CPU counted (the `TLB:` row).
pub fn fault_shootdown(spec: &SampleSpec) -> Result<Vec<f64>> {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::sync::Arc;
    let (mine, theirs) = last_two("a TLB shootdown needs a second CPU")?;
    let _pin = Pinned::to(mine)?;
    let mode = Arc::new(AtomicU8::new(PARK));
    let spinning = Arc::new(AtomicBool::new(false));
    let partner = {
        let (mode, spinning) = (mode.clone(), spinning.clone());
        std::thread::spawn(move || {
            let _pin = Pinned::to(theirs);
            loop {
                match mode.load(Ordering::Acquire) {
                    SPIN => {
                        spinning.store(true, Ordering::Release);
                        std::hint::spin_loop();
                    }
                    PARK => {
                        spinning.store(false, Ordering::Release);
                        std::thread::park();
                    }
                    _ => return,
                }
            }
        })
    };
    let set = |m: u8| -> Result<()> {
        mode.store(m, Ordering::Release);
        partner.thread().unpark();
        let t0 = Instant::now();
        while spinning.load(Ordering::Acquire) != (m == SPIN) {
            if t0.elapsed() > Duration::from_secs(5) {
                bail!("the thread on CPU {theirs} did not start or stop spinning within 5 s");
            }
            std::thread::yield_now();
        }
        if m == PARK {
            // Its CPU idle, out of the process's address space.
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    };
    // One round's copy-on-write faults: (ns, shootdowns the other CPU took).
    let round = || -> Result<(f64, u64)> {
        let len = COW_PAGES * 4096;
        let m = super::faults::Mapping::anon(len)?;
        let base = m.addr;
        // SAFETY: advice and accesses inside the mapping `m` owns (unmapped when it drops).
        let (ns, ipis) = unsafe {
            libc::madvise(base.cast(), len, libc::MADV_NOHUGEPAGE);
            let mut sum = 0u8;
            for i in 0..COW_PAGES {
                sum = sum.wrapping_add(std::ptr::read_volatile(base.add(i * 4096)));
            }
            std::hint::black_box(sum);
            let before = shootdowns_now(theirs)?;
            let t0 = Instant::now();
            for i in 0..COW_PAGES {
                std::ptr::write_volatile(base.add(i * 4096), 1);
            }
            let ns = t0.elapsed().as_nanos() as f64;
            (ns, shootdowns_now(theirs)?.saturating_sub(before))
        };
        Ok((ns, ipis))
    };
    let result = (|| {
        let mut out = Vec::with_capacity(spec.samples);
        for i in 0..=spec.samples {
            // A task that takes the spinner's CPU for a moment (a busy machine) leaves it out
            // of the address space, and the writes send it fewer flushes: that pair is taken
            // again, up to `TRIES` times, before the term says it cannot be measured.
            let mut tried = 0;
            let (with, without, ipis) = loop {
                cancel::check()?;
                set(SPIN)?;
                let (with, ipis) = round()?;
                set(PARK)?;
                let (without, _) = round()?;
                tried += 1;
                if ipis >= (COW_PAGES / 4) as u64 {
                    break (with, without, ipis);
                }
                if tried == TRIES {
                    bail!("{COW_PAGES} copy-on-write faults sent CPU {theirs} {ipis} TLB shootdowns while a thread of the process ran there ({TRIES} tries): it flushes no remote TLB here, or another task took that CPU");
                }
            };
            if i > 0 {
                out.push((with - without).max(0.0) / ipis as f64);
            }
        }
        Ok(out)
    })();
    mode.store(EXIT, Ordering::Release);
    partner.thread().unpark();
    let _ = partner.join();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_call_and_reschedule_rows_are_summed_by_the_cpus_column() {
        let text = "           CPU0       CPU1\nLOC:     123456     789012   Local timer interrupts\nRES:         10         20   Rescheduling interrupts\nCAL:        100        200   Function call interrupts\n";
        assert_eq!(ipis_taken(text, 0), Some(110));
        assert_eq!(ipis_taken(text, 1), Some(220));
        assert_eq!(ipis_taken(text, 2), None);
        assert_eq!(ipis_taken("  CPU0\nLOC: 1 x\n", 0), None);
    }

    #[test]
    fn an_interrupt_costs_what_the_writes_that_sent_one_cost_beyond_a_plain_write() {
        // 2 IPIs: the 2 slowest writes (7100 and 7000, median 7100 of the two) less 400.
        let mut woken = vec![7000, 420, 7100];
        let mut plain = vec![400, 410, 390];
        assert_eq!(per_ipi(&mut woken, &mut plain, 2), Some(6700.0));
        assert_eq!(per_ipi(&mut woken, &mut plain, 0), None);
        // Fewer than half the writes sent one: still their cost, not a plain write's.
        let mut few = vec![410, 400, 7300, 405, 395];
        assert_eq!(per_ipi(&mut few, &mut plain, 1), Some(6900.0));
        // More interrupts than writes (another sender's): every write counts once.
        let mut all = vec![7000, 7000, 7000];
        assert_eq!(per_ipi(&mut all, &mut plain, 9), Some(6600.0));
        // A woken write no dearer than a plain one costs nothing, never below zero.
        let mut cheap = vec![100, 100, 100];
        assert_eq!(per_ipi(&mut cheap, &mut plain, 2), Some(0.0));
    }
}
