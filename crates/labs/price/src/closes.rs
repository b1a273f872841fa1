//! A close is two pieces of kernel work. The call frees the descriptor and drops the file's
//! count: what the `close-dup` term measures, a second descriptor of a file closed while the
//! file stays open. Where it was the file's last descriptor, the file is released too (its
//! dentry and inode put, the file system's release). close(2) does that inside the call on
//! this kernel (6.18: a loop of open and close put 420 ns a close on the split's close line, a
//! loop closing a dup first 230 ns a dup's close), so both are priced on the close line. The
//! `close` term (a file just opened, closed) holds both, so the release is `close` less
//! `close-dup`. That term's files are created and written as well as opened for reading, and
//! their release costs more than a directory's or a read-only file's (about 200 ns here).
//!
//! Which closes released a file is not traced: a run releases at most one file per file it
//! made, so the released count is the closes, at most the files the run's calls made (opens,
//! sockets, pipes' two ends ...). A program that dups descriptors closes more than it made
//! (find: 67883 closes of 17343 opened directories, each dup'ed by fcntl), and those closes
//! free a descriptor only. A failed open is counted among the files made (the split does not
//! part them), so a program whose opens fail often is priced a release too many for each.

use crate::count::Counts;
use crate::terms_of::{base_name, Pricing};
use crate::unit::Units;

/// Calls that make one file (a new open file description) when they succeed.
const MAKE_ONE: [&str; 23] = [
    "open",
    "openat",
    "openat2",
    "creat",
    "open_by_handle_at",
    "socket",
    "accept",
    "accept4",
    "memfd_create",
    "memfd_secret",
    "eventfd",
    "eventfd2",
    "epoll_create",
    "epoll_create1",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "inotify_init",
    "inotify_init1",
    "fanotify_init",
    "pidfd_open",
    "userfaultfd",
    "perf_event_open",
];

/// Calls that make two (a pipe's ends, a socket pair).
const MAKE_TWO: [&str; 3] = ["pipe", "pipe2", "socketpair"];

/// The term the release is priced at: `close` less `close-dup` (`pricing::derive`).
pub const RELEASE: &str = "close-release";

/// How a close's own call is priced where the two terms are measured.
pub const CALL_HOW: &str = "a close's own call: the descriptor freed and the file's count dropped (the close-dup term); the release of a file whose last descriptor it was is priced on files released";

/// The files the run's calls made.
pub fn made(counts: &Counts) -> u64 {
    counts
        .syscalls
        .iter()
        .map(|(name, n)| {
            let base = base_name(name);
            if MAKE_ONE.contains(&base) {
                *n
            } else if MAKE_TWO.contains(&base) {
                2 * n
            } else {
                0
            }
        })
        .sum()
}

/// The closes, and of them those that released a file: at most one a file made.
pub fn released(counts: &Counts) -> (u64, u64) {
    let closes = counts.syscalls.get("close").copied().unwrap_or(0);
    (closes, closes.min(made(counts)))
}

/// The close line's pricing where both terms are measured: its call at `close-dup`.
pub fn call_pricing(units: &Units) -> Option<Pricing> {
    (units.contains_key("close-dup") && units.contains_key(RELEASE)).then_some(Pricing {
        unit: "close-dup",
        factor: 1.0,
        how: CALL_HOW,
    })
}
