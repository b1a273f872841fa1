//! Where an echo server's CPU per request goes (`costlab echo --attribute`). After the timed
//! runs, each sweep point gets one more run with perf sampling the server (cpu-clock, no call
//! graphs); every symbol is put in a part (the recv copy, the send copy, the TCP/IP stack,
//! io_uring, epoll, ...) and each part's share of that run's samples, times that run's own
//! CPU per request, gives the part in ns per request. The timed runs are never profiled:
//! perf's interrupts would add to what they measure.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};

use costlab_core::measure::perf::{self, SymbolSamples};
use costlab_core::symbols::{kernel, Area};

/// Samples per second: enough for a few thousand samples per run, little added load.
pub const PERF_HZ: u64 = 999;

/// A part of the server's work, by the kernel or user symbol it ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Copying received bytes out of socket buffers into the server's buffers.
    RecvCopy,
    /// Copying bytes to send from the server's buffers into socket buffers.
    SendCopy,
    /// TCP, IP, loopback and socket-buffer handling (both directions, softirq included).
    Stack,
    /// Allocating and freeing memory (slab, pages).
    Alloc,
    /// io_uring: submission, completion, task work, provided buffers.
    Uring,
    /// epoll and the poll callbacks it runs.
    Epoll,
    /// Entering and leaving the kernel, file lookups, user-copy checks.
    Entry,
    /// Sleeping, waking and switching tasks, timers.
    Sched,
    /// Spinning on and releasing locks (with interrupts: where softirq work shows).
    Locks,
    /// The server's own code in user space.
    User,
    Other,
}

impl Part {
    pub const ALL: [Part; 11] = [
        Part::RecvCopy,
        Part::SendCopy,
        Part::Stack,
        Part::Alloc,
        Part::Uring,
        Part::Epoll,
        Part::Entry,
        Part::Sched,
        Part::Locks,
        Part::User,
        Part::Other,
    ];

    /// The name in tables and in the JSON's "part" case key.
    pub fn name(self) -> &'static str {
        match self {
            Part::RecvCopy => "recv copy",
            Part::SendCopy => "send copy",
            Part::Stack => "tcp/ip",
            Part::Alloc => "alloc",
            Part::Uring => "io_uring",
            Part::Epoll => "epoll",
            Part::Entry => "syscall entry",
            Part::Sched => "scheduler",
            Part::Locks => "locks",
            Part::User => "user",
            Part::Other => "other",
        }
    }

    /// The part a symbol belongs to: its area in `costlab_core::symbols`, in echo's words.
    pub fn of(symbol: &str, kernel: bool) -> Part {
        if !kernel {
            return Part::User;
        }
        kernel::area(symbol).map_or(Part::Other, Part::of_area)
    }

    /// Echo's part for a kernel area.
    pub fn of_area(area: Area) -> Part {
        match area {
            Area::CopyOut => Part::RecvCopy,
            Area::CopyIn => Part::SendCopy,
            Area::Net | Area::Softirq => Part::Stack,
            Area::PageAlloc | Area::Slab | Area::Memcg => Part::Alloc,
            Area::Uring => Part::Uring,
            Area::Epoll | Area::NetPoll => Part::Epoll,
            Area::SyscallEntry | Area::FileCalls | Area::UserCopyCheck => Part::Entry,
            Area::SchedCore | Area::SchedWait | Area::Timer | Area::TimerIrq => Part::Sched,
            Area::Locks | Area::Futex => Part::Locks,
            Area::Tracing
            | Area::UserCopy
            | Area::PageZero
            | Area::PageCache
            | Area::Vm
            | Area::Fs
            | Area::Irq
            | Area::Process => Part::Other,
        }
    }
}

/// Shares of a profile's samples per part (summing to 1), or None without samples.
pub fn shares(rows: &[SymbolSamples]) -> Option<Vec<(Part, f64)>> {
    let total: u64 = rows.iter().map(|r| r.samples).sum();
    if total == 0 {
        return None;
    }
    let mut per = [0u64; Part::ALL.len()];
    for r in rows {
        let p = Part::of(&r.symbol, r.kernel);
        per[Part::ALL
            .iter()
            .position(|q| *q == p)
            .unwrap_or(Part::ALL.len() - 1)] += r.samples;
    }
    Some(
        Part::ALL
            .iter()
            .zip(per)
            .map(|(p, n)| (*p, n as f64 / total as f64))
            .collect(),
    )
}

/// The symbols that fell in `Other` with the most samples, for the note that says what the
/// classification missed.
pub fn top_other(rows: &[SymbolSamples], n: usize) -> Vec<String> {
    rows.iter()
        .filter(|r| Part::of(&r.symbol, r.kernel) == Part::Other)
        .take(n)
        .map(|r| r.symbol.clone())
        .collect()
}

/// A profile of a server under way: perf attached, its samples kept over a window.
pub struct Profile {
    recording: perf::Recording,
    dir: PathBuf,
    perf_bin: PathBuf,
}

impl Profile {
    /// Attach perf to the server `pid`, keeping samples from `lead` after this call for
    /// `span`. Returns once perf is attached: start the load after it.
    pub fn start(perf_bin: &Path, pid: u32, lead: Duration, span: Duration) -> Result<Profile> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "costlab-echo-perf-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let data = dir.join("perf.data");
        match perf::start_record(perf_bin, pid, perf::rate(PERF_HZ), lead, span, &data) {
            Ok(recording) => Ok(Profile {
                recording,
                dir,
                perf_bin: perf_bin.to_path_buf(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Wait for the window to end; the samples per symbol. The data file is removed.
    pub fn finish(self) -> Result<Vec<SymbolSamples>> {
        let Profile {
            recording,
            dir,
            perf_bin,
        } = self;
        let result = recording
            .finish()
            .and_then(|()| perf::symbols(&perf_bin, &dir.join("perf.data")));
        let _ = std::fs::remove_dir_all(&dir);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(symbol: &str, kernel: bool, samples: u64) -> SymbolSamples {
        SymbolSamples {
            symbol: symbol.into(),
            kernel,
            samples,
        }
    }

    #[test]
    fn symbols_go_to_their_parts() {
        let cases = [
            ("_copy_to_iter", true, Part::RecvCopy),
            ("_copy_from_iter", true, Part::SendCopy),
            ("tcp_sendmsg_locked", true, Part::Stack),
            ("__tcp_transmit_skb", true, Part::Stack),
            ("loopback_xmit", true, Part::Stack),
            ("kmem_cache_alloc_node_noprof", true, Part::Alloc),
            ("io_recv", true, Part::Uring),
            ("__io_issue_sqe", true, Part::Uring),
            ("__do_sys_io_uring_enter", true, Part::Uring),
            ("ep_send_events", true, Part::Epoll),
            ("tcp_poll", true, Part::Epoll),
            ("do_syscall_64", true, Part::Entry),
            ("fdget", true, Part::Entry),
            ("finish_task_switch.isra.0", true, Part::Sched),
            ("_raw_spin_unlock_irqrestore", true, Part::Locks),
            ("__pv_queued_spin_lock_slowpath", true, Part::Locks),
            ("costlab_echo::epoll::run", false, Part::User),
            ("0xffffffff8a2001c0", true, Part::Other),
        ];
        for (s, k, want) in cases {
            assert_eq!(Part::of(s, k), want, "{s}");
        }
    }

    #[test]
    fn shares_sum_to_one_and_name_what_was_missed() {
        let rows = vec![
            row("_copy_to_iter", true, 60),
            row("_copy_from_iter", true, 20),
            row("mystery_fn", true, 15),
            row("main", false, 5),
        ];
        let s = shares(&rows).unwrap();
        assert!((s.iter().map(|(_, x)| x).sum::<f64>() - 1.0).abs() < 1e-12);
        let get = |p: Part| s.iter().find(|(q, _)| *q == p).unwrap().1;
        assert!((get(Part::RecvCopy) - 0.60).abs() < 1e-12);
        assert!((get(Part::SendCopy) - 0.20).abs() < 1e-12);
        assert!((get(Part::Other) - 0.15).abs() < 1e-12);
        assert!((get(Part::User) - 0.05).abs() < 1e-12);
        assert_eq!(top_other(&rows, 3), vec!["mystery_fn".to_string()]);
        assert!(shares(&[]).is_none());
    }

    #[test]
    fn part_names_are_unique() {
        let mut names: Vec<&str> = Part::ALL.iter().map(|p| p.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Part::ALL.len());
    }
}
