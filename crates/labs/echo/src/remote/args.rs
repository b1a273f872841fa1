//! The remote loaders' options: `--loaders` hosts, the `--addr` the servers listen on, how
//! connections split between hosts, and quoting words for the remote shell.

use std::net::IpAddr;

use anyhow::Result;

use super::Loaders;
use crate::args::EchoRunArgs;
use costlab_core::error::usage;

/// Parse `--loaders`: host names as ssh takes them, each once.
pub fn parse_hosts(text: &str) -> Result<Vec<String>> {
    let hosts = costlab_core::measure::sizes::parse_list(text, |h| {
        if h.starts_with('-') || h.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(usage(format!(
                "--loaders: '{h}' is not a host: give names as ssh takes them (HOST or USER@HOST), comma-separated"
            )));
        }
        Ok(h.to_string())
    })?;
    for (i, h) in hosts.iter().enumerate() {
        if hosts[..i].contains(h) {
            return Err(usage(format!(
                "--loaders: '{h}' is listed twice: name each host once (one loader per host)"
            )));
        }
    }
    Ok(hosts)
}

/// Check `--addr` for the servers: an IP (port chosen per run) or IP:PORT. With loaders it
/// must be one other hosts can reach.
pub fn parse_bind(text: &str, loaders: bool) -> Result<String> {
    let t = text.trim();
    let ip: IpAddr = match t.parse::<std::net::SocketAddr>() {
        Ok(a) => a.ip(),
        Err(_) => t.parse().map_err(|_| {
            usage(format!(
                "bad --addr '{text}': give an IP address of this machine (10.0.0.5), or IP:PORT"
            ))
        })?,
    };
    if loaders && (ip.is_loopback() || ip.is_unspecified()) {
        return Err(usage(format!(
            "--loaders with --addr {t}: the loader hosts cannot reach the servers there; give --addr an address of this machine that they reach (e.g. --addr 10.0.0.5)"
        )));
    }
    Ok(if t.parse::<std::net::SocketAddr>().is_ok() {
        t.to_string()
    } else if ip.is_ipv6() {
        format!("[{ip}]:0")
    } else {
        format!("{ip}:0")
    })
}

/// The servers' address and the loader hosts from `costlab echo`'s options. With loaders,
/// connection counts too small to split are left out when the user left `--conns` at its
/// default (an error when they asked for them), and every host is checked over ssh before
/// anything is measured.
pub fn from_args(args: &EchoRunArgs, conns: &mut Vec<usize>) -> Result<(String, Option<Loaders>)> {
    let Some(list) = &args.loaders else {
        let addr = parse_bind(args.addr.as_deref().unwrap_or("127.0.0.1"), false)?;
        return Ok((addr, None));
    };
    let hosts = parse_hosts(list)?;
    let Some(addr) = &args.addr else {
        return Err(usage(
            "--loaders needs --addr: an address of this machine that the loader hosts reach, for the servers to listen on (e.g. --addr 10.0.0.5)",
        ));
    };
    let addr = parse_bind(addr, true)?;
    let loaders = Loaders::new(
        hosts,
        &args.ssh,
        &args.loader_costlab,
        args.threads,
        args.loader_reports.as_deref(),
    )?;
    if args.conns == DEFAULT_CONNS {
        conns.retain(|c| *c >= loaders.hosts.len());
    }
    loaders.check_conns(conns)?;
    if conns.is_empty() {
        return Err(usage(format!(
            "--loaders: {} hosts need at least as many connections; give --conns",
            loaders.hosts.len()
        )));
    }
    loaders.check()?;
    Ok((addr, Some(loaders)))
}

/// `costlab echo --conns`'s default (cli.rs).
const DEFAULT_CONNS: &str = "1,16,128,1000";

/// The connections host `i` of `n` opens, of `conns` in all.
pub fn share(conns: usize, n: usize, i: usize) -> usize {
    conns / n + usize::from(i < conns % n)
}

/// Quote a word for the remote shell that ssh hands the command to.
pub(super) fn shell_word(w: &str) -> String {
    format!("'{}'", w.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn bad_loader_input_is_a_usage_error() {
        assert_eq!(parse_hosts("a, me@b").unwrap(), ["a", "me@b"]);
        for bad in ["", "a,,b", "-oProxyCommand=x", "a b", "a,a"] {
            assert_eq!(exit_code(&parse_hosts(bad).unwrap_err()), 2, "{bad}");
        }
        assert_eq!(parse_bind("10.0.0.5", true).unwrap(), "10.0.0.5:0");
        assert_eq!(parse_bind("10.0.0.5:9000", true).unwrap(), "10.0.0.5:9000");
        assert_eq!(parse_bind("::1", false).unwrap(), "[::1]:0");
        assert_eq!(parse_bind("127.0.0.1", false).unwrap(), "127.0.0.1:0");
        for (bad, loaders) in [("127.0.0.1", true), ("0.0.0.0", true), ("host", false)] {
            assert_eq!(
                exit_code(&parse_bind(bad, loaders).unwrap_err()),
                2,
                "{bad}"
            );
        }
        assert_eq!(
            exit_code(&Loaders::new(vec!["a".into()], " ", "costlab", None, None).unwrap_err()),
            2
        );
    }
}
