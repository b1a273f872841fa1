//! What the kernel says about a zero-copy send once it is done with the buffer.
//!
//! MSG_ZEROCOPY: each successful `send` gets the next 32-bit id; the kernel later queues a
//! `sock_extended_err` on the socket's error queue with `ee_origin` = SO_EE_ORIGIN_ZEROCOPY
//! covering ids `ee_info ..= ee_data`, and sets SO_EE_CODE_ZEROCOPY_COPIED in `ee_code` when it
//! had to copy after all (loopback, a local receiver, a device without scatter-gather).
//!
//! io_uring SEND_ZC: the send's own completion carries IORING_CQE_F_MORE; a second,
//! notification completion (IORING_CQE_F_NOTIF) follows when the buffer is free. With
//! IORING_SEND_ZC_REPORT_USAGE its `res` has IORING_NOTIF_USAGE_ZC_COPIED set if it copied.
//!
//! Parsing is kept apart from the sockets so the tests can feed it recorded bytes.

use std::collections::BTreeSet;

pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// io_uring: ask the notification to say whether the kernel copied (6.2+).
pub const IORING_SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
pub const IORING_NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;
pub const IORING_CQE_F_MORE: u32 = 1 << 1;
pub const IORING_CQE_F_NOTIF: u32 = 1 << 3;

/// The size of `struct sock_extended_err`.
pub const EXTENDED_ERR_LEN: usize = 16;

/// One zero-copy completion: ids `lo ..= hi`, and whether the kernel copied them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZcRange {
    pub lo: u32,
    pub hi: u32,
    pub copied: bool,
}

impl ZcRange {
    /// Sends this completion covers (ids wrap at 2^32).
    pub fn count(&self) -> u64 {
        u64::from(self.hi.wrapping_sub(self.lo)) + 1
    }
}

/// Parse a `sock_extended_err`: ee_errno u32, ee_origin u8, ee_type u8, ee_code u8, ee_pad u8,
/// ee_info u32, ee_data u32 (native endian).
pub fn parse_extended_err(b: &[u8]) -> Result<ZcRange, String> {
    if b.len() < EXTENDED_ERR_LEN {
        return Err(format!(
            "sock_extended_err of {} bytes (want {EXTENDED_ERR_LEN})",
            b.len()
        ));
    }
    let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let errno = u32_at(0);
    let origin = b[4];
    let code = b[6];
    if origin != SO_EE_ORIGIN_ZEROCOPY {
        return Err(format!(
            "error-queue message of origin {origin} (errno {errno}), not a zero-copy completion"
        ));
    }
    if errno != 0 {
        return Err(format!("zero-copy completion with errno {errno}"));
    }
    Ok(ZcRange {
        lo: u32_at(8),
        hi: u32_at(12),
        copied: code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
    })
}

/// The control messages of one `recvmsg(MSG_ERRQUEUE)`, as the kernel lays them out
/// (x86-64/aarch64: cmsg_len is a usize, then level and type as i32, data 8-byte aligned).
/// Returns the zero-copy completions among IP_RECVERR / IPV6_RECVERR messages.
pub fn parse_errqueue_control(control: &[u8]) -> Result<Vec<ZcRange>, String> {
    const HDR: usize = std::mem::size_of::<usize>() + 8;
    let align =
        |n: usize| (n + std::mem::size_of::<usize>() - 1) & !(std::mem::size_of::<usize>() - 1);
    let mut out = Vec::new();
    let mut at = 0;
    while at + HDR <= control.len() {
        let mut len_bytes = [0u8; std::mem::size_of::<usize>()];
        let w = len_bytes.len();
        len_bytes.copy_from_slice(&control[at..at + w]);
        let len = usize::from_ne_bytes(len_bytes);
        if len < HDR || at + len > control.len() {
            return Err(format!(
                "control message of length {len} at {at} overruns the buffer"
            ));
        }
        let i32_at = |i: usize| {
            i32::from_ne_bytes([control[i], control[i + 1], control[i + 2], control[i + 3]])
        };
        let level = i32_at(at + std::mem::size_of::<usize>());
        let kind = i32_at(at + std::mem::size_of::<usize>() + 4);
        let is_recverr = (level == libc::SOL_IP && kind == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR);
        if is_recverr {
            out.push(parse_extended_err(&control[at + HDR..at + len])?);
        }
        at += align(len);
    }
    Ok(out)
}

/// A SEND_ZC completion, read from its flags and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UringZc {
    /// The send itself: bytes sent (or -errno); `more` says a notification will follow.
    Sent { res: i32, more: bool },
    /// The buffer is free again; `copied` as REPORT_USAGE said.
    Notif { copied: bool },
}

pub fn parse_uring_cqe(res: i32, flags: u32) -> UringZc {
    if flags & IORING_CQE_F_NOTIF != 0 {
        UringZc::Notif {
            copied: (res as u32) & IORING_NOTIF_USAGE_ZC_COPIED != 0,
        }
    } else {
        UringZc::Sent {
            res,
            more: flags & IORING_CQE_F_MORE != 0,
        }
    }
}

/// Zero-copy sends in flight and what their completions said.
#[derive(Debug, Default)]
pub struct Tally {
    outstanding: BTreeSet<u32>,
    next_id: u32,
    pub completed: u64,
    pub copied: u64,
}

impl Tally {
    /// A send was accepted: it takes the next id.
    pub fn sent(&mut self) -> u32 {
        let id = self.next_id;
        self.outstanding.insert(id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// A completion arrived for `r`.
    pub fn complete(&mut self, r: ZcRange) {
        let mut id = r.lo;
        loop {
            self.outstanding.remove(&id);
            if id == r.hi {
                break;
            }
            id = id.wrapping_add(1);
        }
        self.completed += r.count();
        if r.copied {
            self.copied += r.count();
        }
    }

    /// True while any id up to and including `id` is still in flight.
    pub fn pending_upto(&self, id: u32) -> bool {
        self.outstanding.range(..=id).next().is_some()
    }

    pub fn in_flight(&self) -> usize {
        self.outstanding.len()
    }

    /// The share of completed sends that the kernel did not copy (None before any).
    pub fn zerocopy_fraction(&self) -> Option<f64> {
        (self.completed > 0).then(|| 1.0 - self.copied as f64 / self.completed as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sock_extended_err as the kernel writes it.
    fn ee(origin: u8, code: u8, lo: u32, hi: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[origin, 0, code, 0]);
        b.extend_from_slice(&lo.to_ne_bytes());
        b.extend_from_slice(&hi.to_ne_bytes());
        b
    }

    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let hdr = std::mem::size_of::<usize>() + 8;
        let mut b = Vec::new();
        b.extend_from_slice(&(hdr + data.len()).to_ne_bytes());
        b.extend_from_slice(&level.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(data);
        while b.len() % std::mem::size_of::<usize>() != 0 {
            b.push(0);
        }
        b
    }

    #[test]
    fn a_copied_range_on_the_error_queue() {
        // As loopback delivers them: sends 0..=6 completed in one message, copied.
        let mut control = cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(5, 1, 0, 6));
        control.extend(cmsg(libc::SOL_IPV6, libc::IPV6_RECVERR, &ee(5, 0, 7, 7)));
        let r = parse_errqueue_control(&control).unwrap();
        assert_eq!(
            r,
            vec![
                ZcRange {
                    lo: 0,
                    hi: 6,
                    copied: true
                },
                ZcRange {
                    lo: 7,
                    hi: 7,
                    copied: false
                }
            ]
        );
        assert_eq!(r[0].count(), 7);
    }

    #[test]
    fn other_messages_are_skipped_or_refused() {
        let control = cmsg(libc::SOL_SOCKET, libc::SO_TIMESTAMP, &[0u8; 16]);
        assert!(parse_errqueue_control(&control).unwrap().is_empty());
        assert!(parse_extended_err(&ee(2, 0, 0, 0))
            .unwrap_err()
            .contains("origin 2"));
        assert!(parse_extended_err(&[0u8; 8]).is_err());
        let mut bad = cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(5, 0, 0, 0));
        bad[0] = 200;
        assert!(parse_errqueue_control(&bad).is_err());
    }

    #[test]
    fn ranges_that_wrap_count_right() {
        let r = ZcRange {
            lo: u32::MAX - 1,
            hi: 1,
            copied: false,
        };
        assert_eq!(r.count(), 4);
    }

    #[test]
    fn send_zc_notifications() {
        // The send (res = bytes, F_MORE), then the notification with F_NOTIF and, on
        // loopback, the copied bit in res.
        assert_eq!(
            parse_uring_cqe(65536, IORING_CQE_F_MORE),
            UringZc::Sent {
                res: 65536,
                more: true
            }
        );
        assert_eq!(
            parse_uring_cqe(i32::MIN, IORING_CQE_F_NOTIF),
            UringZc::Notif { copied: true }
        );
        assert_eq!(
            parse_uring_cqe(0, IORING_CQE_F_NOTIF),
            UringZc::Notif { copied: false }
        );
        assert_eq!(
            parse_uring_cqe(-11, 0),
            UringZc::Sent {
                res: -11,
                more: false
            }
        );
    }

    #[test]
    fn the_tally_frees_buffers_in_order_and_counts_copies() {
        let mut t = Tally::default();
        let ids: Vec<u32> = (0..4).map(|_| t.sent()).collect();
        assert_eq!(ids, vec![0, 1, 2, 3]);
        assert!(t.pending_upto(1));
        t.complete(ZcRange {
            lo: 0,
            hi: 1,
            copied: true,
        });
        assert!(!t.pending_upto(1));
        assert!(t.pending_upto(3));
        t.complete(ZcRange {
            lo: 2,
            hi: 3,
            copied: false,
        });
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.zerocopy_fraction(), Some(0.5));
        assert_eq!(Tally::default().zerocopy_fraction(), None);
    }
}
