//! What the echo servers' engines share with the `serve` command: the listening socket, the
//! file-descriptor limit, and when to stop (SIGTERM, SIGINT or `--duration`). A leaf: it
//! imports none of the engines, so `server` -> engines -> `listen` runs one way.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use costlab_core::error::usage;
use costlab_core::measure::cancel;

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

/// SIGTERM sets a flag the serving loops poll. (SIGINT already does, through `cancel`.)
/// No SA_RESTART, so a blocked epoll_wait or io_uring_enter returns EINTR at once.
pub fn install_terminate_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
    // sigaction struct is fully initialised (zeroed, then handler and empty mask set).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_terminate as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// When the serving loop should end.
pub struct Stop {
    deadline: Option<Instant>,
}

impl Stop {
    pub fn new(duration: Option<Duration>) -> Stop {
        Stop {
            deadline: duration.map(|d| Instant::now() + d),
        }
    }

    pub fn now(&self) -> bool {
        TERMINATE.load(Ordering::Relaxed)
            || cancel::requested()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// How long one wait may block so that a deadline or a signal is seen promptly.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(50)
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; fail with a usage error when even the
/// hard limit is below `need`. Returns the soft limit now in force.
pub fn raise_nofile(need: u64) -> Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    let hard = lim.maximum.unwrap_or(u64::MAX);
    if lim.current.is_some_and(|c| c < hard) {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if now < need {
        return Err(usage(format!(
            "{need} file descriptors are needed but RLIMIT_NOFILE allows {now} (hard limit {hard}); \
             raise it (ulimit -Hn, or LimitNOFILE in systemd) or use fewer --conns"
        )));
    }
    Ok(now)
}

/// A listening TCP socket with a deep backlog (1000 clients connect at once).
pub fn listen(addr: SocketAddr, nonblocking: bool) -> Result<(OwnedFd, SocketAddr)> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let mut flags = SocketFlags::CLOEXEC;
    if nonblocking {
        flags |= SocketFlags::NONBLOCK;
    }
    let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, None)
        .context("creating the listening socket")?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true).context("SO_REUSEADDR")?;
    // Before listen: a connection is cloned from the listener when its handshake completes,
    // before anyone accepts it, and takes the listener's TCP_NODELAY as it was then. Set
    // later, it missed every client that connected at once: their sockets kept Nagle, and a
    // message echoed in two sends waited for the peer's delayed ACK (44 ms per request at
    // 64 KiB with the uring server's -bundle, whose direct descriptors cannot be set alone).
    rustix::net::sockopt::set_tcp_nodelay(&fd, true).context("TCP_NODELAY")?;
    bind_retrying(&fd, addr, BIND_RETRY)?;
    rustix::net::listen(&fd, 4096).context("listen")?;
    let std_listener = std::net::TcpListener::from(fd);
    let bound = std_listener
        .local_addr()
        .context("reading the bound address")?;
    Ok((OwnedFd::from(std_listener), bound))
}

/// How long a bind to a port in use is retried: a server that just exited on the same port
/// may still hold it for a moment (an io_uring ring is torn down after its process exits,
/// and with it the listening socket its operations referred to).
pub const BIND_RETRY: Duration = Duration::from_secs(3);

/// Bind, retrying EADDRINUSE every 10 ms for at most `limit` (never for port 0, which the
/// kernel picks free).
pub fn bind_retrying(fd: &OwnedFd, addr: SocketAddr, limit: Duration) -> Result<()> {
    let t0 = Instant::now();
    loop {
        match rustix::net::bind(fd, &addr) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::ADDRINUSE) if addr.port() != 0 && t0.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                return Err(usage(format!(
                    "cannot bind {addr}: {e}{}; choose another --addr (port 0 picks a free port)",
                    if e == rustix::io::Errno::ADDRINUSE && addr.port() != 0 {
                        format!(" (still in use after {} s of retries)", limit.as_secs())
                    } else {
                        String::new()
                    }
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn a_client_that_connects_before_the_accept_gets_nodelay() {
        // The connection is made, and cloned from the listener, before anything accepts it:
        // it must still have TCP_NODELAY (the uring server's direct descriptors rely on it).
        let (listener, bound) = listen("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let _client = std::net::TcpStream::connect(bound).unwrap();
        let accepted = rustix::net::accept(&listener).unwrap();
        assert!(rustix::net::sockopt::tcp_nodelay(&accepted).unwrap());
    }

    #[test]
    fn nofile_limit_reports_what_is_missing() {
        assert!(raise_nofile(16).is_ok());
        let limited = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .is_some();
        if limited {
            let e = raise_nofile(u64::MAX - 1).unwrap_err();
            assert_eq!(exit_code(&e), 2);
            assert!(e.to_string().contains("RLIMIT_NOFILE"));
        }
    }
}
