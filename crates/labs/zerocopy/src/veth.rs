//! The veth link: the receiver in a network namespace of its own, joined to this one by a veth
//! pair, so bytes cross a (virtual) device instead of loopback. Created with iproute2 for the
//! run and deleted when the guard drops (deleting the namespace deletes the pair).

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Why a veth link cannot be made here, or None.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "veth needs root to create a network namespace and a veth pair (run as root, or --link loopback)"
                .into(),
        );
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("veth needs iproute2's ip (apt-get install iproute2)".into());
    }
    None
}

/// A namespace with one end of a veth pair; the other end is in this namespace.
pub struct Veth {
    pub netns: String,
    pub peer_ip: IpAddr,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Veth {
    pub fn create() -> Result<Veth> {
        let pid = std::process::id();
        let netns = format!("costlab-zc-{pid}");
        let host = format!("czc{}a", pid % 10_000_000);
        let peer = format!("czc{}b", pid % 10_000_000);
        // A /30 in 10.213.0.0/16 picked by pid, so two runs at once do not collide.
        let net = (pid % 16000) * 4;
        let (b3, b4) = ((net >> 8) as u8, (net & 0xff) as u8);
        let host_ip = format!("10.213.{b3}.{}", b4 + 1);
        let peer_ip = Ipv4Addr::new(10, 213, b3, b4 + 2);
        ip(&["netns", "add", &netns])?;
        let v = Veth {
            netns: netns.clone(),
            peer_ip: IpAddr::V4(peer_ip),
        };
        ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", &peer, "netns", &netns,
        ])?;
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        ip(&[
            "-n",
            &netns,
            "addr",
            "add",
            &format!("{peer_ip}/30"),
            "dev",
            &peer,
        ])?;
        ip(&["-n", &netns, "link", "set", &peer, "up"])?;
        ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        Ok(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.netns]);
    }
}
