//! The `serve` command: the engine names, how to serve, and the dispatch to the engines. What
//! the engines themselves need (the listening socket, the file-descriptor limit, when to stop)
//! is in `listen`, which imports none of them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::features::Features;
use super::listen::{install_terminate_handler, listen, raise_nofile, Stop};
use super::stats::{Cpu, ServerStats};
use costlab_core::error::usage;
use costlab_core::measure::cpus;

/// The three servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Epoll,
    Uring,
    UringBasic,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Epoll, Engine::Uring, Engine::UringBasic];

    pub fn name(self) -> &'static str {
        match self {
            Engine::Epoll => "epoll",
            Engine::Uring => "uring",
            Engine::UringBasic => "uring-basic",
        }
    }

    pub fn parse(text: &str) -> Result<Engine> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == text.trim())
            .ok_or_else(|| {
                usage(format!(
                    "unknown engine '{text}': use epoll, uring or uring-basic"
                ))
            })
    }

    pub fn parse_list(text: &str) -> Result<Vec<Engine>> {
        costlab_core::measure::sizes::parse_list(text, Engine::parse)
    }
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOpts {
    pub engine: Engine,
    pub addr: SocketAddr,
    pub cpu: Option<usize>,
    pub duration: Option<Duration>,
    /// The fixed message size B; requests are counted as bytes echoed / B.
    pub size: u64,
    /// io_uring only: a kernel thread polls the submission queue.
    pub sqpoll: bool,
    /// uring only: the techniques to use.
    pub features: Features,
}

/// Serve until stopped. `on_bound` is told the address before the first client is taken
/// (the `serve` command prints it as its first line). Returns the server's counts.
pub fn serve(opts: &ServeOpts, on_bound: impl FnOnce(SocketAddr)) -> Result<ServerStats> {
    install_terminate_handler();
    raise_nofile(64)?;
    if let Some(cpu) = opts.cpu {
        cpus::check_cpus(&[cpu], &cpus::allowed_cpus())?;
        cpus::pin_current(cpu)?;
    }
    let nonblocking = opts.engine == Engine::Epoll;
    let (listener, bound) = listen(opts.addr, nonblocking)?;
    on_bound(bound);
    let stop = Stop::new(opts.duration);
    let start_cpu = Cpu::now();
    let t0 = Instant::now();
    let mut stats = match opts.engine {
        Engine::Epoll => {
            let mut s = ServerStats::new("epoll", "epoll", opts.size);
            super::epoll::run(listener, &stop, &mut s)?;
            s
        }
        Engine::Uring => super::uring::run(listener, &stop, opts.size, opts.sqpoll, opts.features)?,
        Engine::UringBasic => super::uring_basic::run(listener, &stop, opts.size)?,
    };
    stats.finish(start_cpu, t0.elapsed().as_nanos() as u64);
    Ok(stats)
}

/// Parse "127.0.0.1:7000", "[::1]:0" or "host:7000"; a bad address is a usage error, and a
/// host name that does not resolve is told apart from a malformed HOST:PORT.
pub fn parse_addr(text: &str, what: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let malformed = || {
        usage(format!(
            "bad {what} '{text}': use HOST:PORT, like 127.0.0.1:7000"
        ))
    };
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(malformed());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(malformed());
    }
    match t.to_socket_addrs() {
        Ok(mut it) => it.next().ok_or_else(|| {
            usage(format!(
                "{what} {text}: the name {host} resolved to no address; check the host name or use an IP address"
            ))
        }),
        Err(e) => Err(usage(format!(
            "{what} {text}: the name {host} did not resolve (DNS: {e}); check the host name or use an IP address"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn engines_parse_and_bad_ones_exit_2() {
        assert_eq!(
            Engine::parse_list("epoll,uring,uring-basic").unwrap(),
            Engine::ALL.to_vec()
        );
        assert_eq!(exit_code(&Engine::parse("kqueue").unwrap_err()), 2);
    }

    #[test]
    fn addresses_parse() {
        assert_eq!(
            parse_addr("127.0.0.1:0", "--addr").unwrap().to_string(),
            "127.0.0.1:0"
        );
        assert_eq!(exit_code(&parse_addr("nowhere", "--addr").unwrap_err()), 2);
    }
}
