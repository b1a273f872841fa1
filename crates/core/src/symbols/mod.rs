//! What a sampled function is, written once for every lab that names samples: the kernel's
//! functions by area (`kernel`: the user copies, the TCP/IP stack, io_uring, the page
//! allocator ...), the Go runtime's collector, write barriers and stack growth, and the user
//! libraries' copies, allocators and locks (`user`). Each lab maps an area or a role to its
//! own words (price's subsystems, echo's parts, the gc lab's classes), so one symbol is
//! classed from the same row everywhere.
//!
//! A pattern is a string: `name` matches a function whose name starts with it, `=name` the
//! name exactly, `*name` a name that holds it anywhere.

pub mod kernel;
pub mod user;

pub use kernel::{Area, Tier};
pub use user::{GoRuntime, UserRole};

/// Whether `sym` matches one pattern (see the module's doc).
pub fn matches(pattern: &str, sym: &str) -> bool {
    if let Some(exact) = pattern.strip_prefix('=') {
        sym == exact
    } else if let Some(part) = pattern.strip_prefix('*') {
        sym.contains(part)
    } else {
        sym.starts_with(pattern)
    }
}

/// Whether `sym` matches any of `patterns`.
pub fn any(patterns: &[&str], sym: &str) -> bool {
    patterns.iter().any(|p| matches(p, sym))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_prefixes_exact_names_or_parts() {
        assert!(matches("tcp_", "tcp_sendmsg"));
        assert!(!matches("tcp_", "__tcp_push"));
        assert!(matches("=tcp_poll", "tcp_poll"));
        assert!(!matches("=tcp_poll", "tcp_poll_x"));
        assert!(matches("*spin_lock", "_raw_spin_lock_irqsave"));
        assert!(!matches("*spin_lock", "spin_unlock"));
        assert!(any(&["x", "=tcp_poll"], "tcp_poll"));
        assert!(!any(&[], "tcp_poll"));
    }
}
