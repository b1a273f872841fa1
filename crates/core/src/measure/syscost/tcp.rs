//! Send and recv on loopback TCP: paired in one thread, by message size, and a send that
//! wakes a peer asleep in recv.

use crate::measure::aligned::AlignedBuf;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::sampling::{sample_two_phases, stall};
use super::MSG;
use crate::measure::{cpus, sample_fn, SampleSpec};

/// A connected loopback TCP pair with TCP_NODELAY on both ends (so each 16-byte send goes out
/// at once instead of waiting on Nagle for the previous segment's ACK).
pub(super) fn loopback_pair(listener: &TcpListener) -> Result<(TcpStream, TcpStream)> {
    let addr = listener.local_addr()?;
    let client = TcpStream::connect(addr).context("connecting a loopback TCP pair")?;
    let (server, _) = listener.accept().context("accepting a loopback TCP pair")?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((client, server))
}

pub(super) fn loopback_listener() -> Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0").context("binding a loopback listener on 127.0.0.1")
}

/// 16-byte send and recv on a loopback TCP pair in one thread: (send, recv) ns per call.
///
/// Sends and recvs are paired so the socket buffers never fill: each sampler iteration sends
/// up to 64 messages (1 KiB, far below any socket buffer), then receives the same 64, and the
/// two phases are timed apart. On loopback the send itself carries the segment into the
/// peer's receive queue (the softirq runs on the sender's way out), so the send figure holds
/// the whole transmit and receive path and the recv figure the copy out of the queue.
pub fn tcp_send_recv(spec: &SampleSpec) -> Result<(Vec<f64>, Vec<f64>)> {
    tcp_send_recv_sized(spec, MSG)
}

/// As `tcp_send_recv` with `size`-byte messages: (send, recv) ns per message. Each phase
/// moves at most 32 KiB (64 messages of 16 B, one of 64 KiB), far below the socket buffers
/// set here, so a send never waits for the reader; a recv of a large message may take more
/// than one call, which is part of its cost.
pub fn tcp_send_recv_sized(spec: &SampleSpec, size: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    tcp_send_recv_at(spec, size, 0)
}

/// How far past a cache line the unaligned recv writes (see `tcp_send_recv_at`).
pub const UNALIGNED_OFFSET: usize = 16;

/// As `tcp_send_recv_sized`, receiving into a buffer that starts `offset` bytes past a page
/// (and so past a cache line). The sender's buffer stays page-aligned. On the AMD EPYC
/// (Zen) this was written on, a 64 KiB recv 4 to 24 bytes past the line ran at about 1.8 GB/s
/// against 9-11 GB/s at 0 or 32 to 60: the kernel's `rep movsb` copy has a cliff that depends
/// on where the destination sits against the source.
pub fn tcp_send_recv_at(
    spec: &SampleSpec,
    size: usize,
    offset: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let listener = loopback_listener()?;
    let (mut tx, mut rx) = loopback_pair(&listener)?;
    for s in [&tx, &rx] {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(s, 1 << 20);
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(s, 1 << 20);
        // A bug that made a send wait for a reader that never comes fails, not hangs.
        s.set_write_timeout(Some(std::time::Duration::from_secs(2)))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    }
    let size = size.max(1);
    let chunk = (32 * 1024 / size).clamp(1, 64) as u64;
    let msg: Vec<u8> = (0..size).map(|i| (i * 7 + 0x5a) as u8).collect();
    // Page-aligned as the echo servers' buffers are, so the per-byte cost is theirs.
    let mut whole = AlignedBuf::zeroed(size + offset);
    let buf = &mut whole[offset..];
    sample_two_phases(
        spec,
        chunk,
        || {
            tx.write_all(&msg).context("send on loopback TCP")?;
            Ok(())
        },
        || {
            // A stream may hand back fewer bytes than asked; read until the message is whole.
            rx.read_exact(buf).context("recv on loopback TCP")?;
            if buf[..] != msg[..] {
                bail!("loopback TCP returned other bytes than were sent");
            }
            Ok(())
        },
    )
}

/// A 16-byte loopback send that wakes its peer, ns per call. The peer thread, on another
/// CPU where there is one, sleeps in recv and echoes each message back; each round times
/// only the send, then waits for the echo, by which time the peer is asleep in recv again.
/// This send minus a plain `tcp-send` is what waking a sleeping peer adds to a send, a cost
/// an echo server pays whenever its client is waiting for the reply.
pub fn tcp_send_wake(spec: &SampleSpec) -> Result<Vec<f64>> {
    use std::net::Shutdown;
    let listener = loopback_listener()?;
    let (mut tx, mut rx) = loopback_pair(&listener)?;
    let allowed = cpus::allowed_cpus();
    // measure_all pins us to the last allowed CPU; the peer takes the first.
    let peer_cpu = (allowed.len() > 1).then(|| allowed[0]);
    let msg = [0x3cu8; MSG];
    std::thread::scope(|scope| -> Result<Vec<f64>> {
        let peer = scope.spawn(move || -> Result<()> {
            if let Some(cpu) = peer_cpu {
                let _ = cpus::pin_current(cpu);
            }
            let mut buf = [0u8; MSG];
            loop {
                match rx.read_exact(&mut buf) {
                    Ok(()) => rx.write_all(&buf).context("peer echo")?,
                    // The measuring side closed: done.
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(anyhow::Error::new(e).context("peer recv")),
                }
            }
        });
        let mut failed: Option<anyhow::Error> = None;
        let mut runs: Vec<(u64, f64)> = Vec::new();
        let mut back = [0u8; MSG];
        let sampled = sample_fn(spec, |n| {
            let mut t = 0f64;
            for _ in 0..n {
                if failed.is_some() {
                    stall(spec);
                    break;
                }
                let t0 = Instant::now();
                let sent = tx.write(&msg);
                t += t0.elapsed().as_nanos() as f64;
                let round = match sent {
                    Ok(MSG) => tx.read_exact(&mut back).context("echo from the peer"),
                    Ok(k) => Err(anyhow!("short send on loopback TCP: {k} of {MSG} bytes")),
                    Err(e) => Err(anyhow::Error::new(e).context("send on loopback TCP")),
                };
                if let Err(e) = round {
                    failed = Some(e);
                }
            }
            runs.push((n, t));
        });
        // Closing our side ends the peer's loop whatever happened above.
        let _ = tx.shutdown(Shutdown::Both);
        let peer_result = peer
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the echo peer thread panicked")));
        let samples = sampled?;
        if let Some(e) = failed {
            return Err(e);
        }
        peer_result?;
        let last = &runs[runs.len().saturating_sub(samples.len())..];
        Ok(last.iter().map(|(n, t)| t / (*n).max(1) as f64).collect())
    })
}
