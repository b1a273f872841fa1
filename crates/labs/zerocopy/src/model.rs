//! The zero-copy model: the sender's CPU per GB is the bytes it copies times what a copy costs
//! per byte, plus the calls it makes times what a call costs. What the model leaves out (the
//! TCP/IP stack's per-segment work, page pinning, completions) is what it under-predicts by.

/// How to move bytes to a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    ReadWrite,
    MmapWrite,
    Sendfile,
    Splice,
    Send,
    MsgZerocopy,
    UringSend,
    UringSendZc,
}

pub const ALL: [Method; 8] = [
    Method::ReadWrite,
    Method::MmapWrite,
    Method::Sendfile,
    Method::Splice,
    Method::Send,
    Method::MsgZerocopy,
    Method::UringSend,
    Method::UringSendZc,
];

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::ReadWrite => "read-write",
            Method::MmapWrite => "mmap-write",
            Method::Sendfile => "sendfile",
            Method::Splice => "splice",
            Method::Send => "send",
            Method::MsgZerocopy => "msg-zerocopy",
            Method::UringSend => "uring-send",
            Method::UringSendZc => "uring-send-zc",
        }
    }

    pub fn parse(text: &str) -> Option<Method> {
        ALL.into_iter().find(|m| m.name() == text)
    }

    /// Bytes come from a file (page cache) rather than from memory.
    pub fn from_file(self) -> bool {
        matches!(
            self,
            Method::ReadWrite | Method::MmapWrite | Method::Sendfile | Method::Splice
        )
    }

    /// The kernel says per send whether it copied (the zerocopy_fraction metric).
    pub fn reports_zerocopy(self) -> bool {
        matches!(self, Method::MsgZerocopy | Method::UringSendZc)
    }

    /// The copying method a zero-copy method is judged against (None for the copying ones).
    pub fn baseline(self) -> Option<Method> {
        match self {
            Method::MmapWrite | Method::Sendfile | Method::Splice => Some(Method::ReadWrite),
            Method::MsgZerocopy => Some(Method::Send),
            Method::UringSendZc => Some(Method::UringSend),
            _ => None,
        }
    }

    /// Times the sender's CPU copies each byte: read+write copies page cache -> user ->
    /// socket; mmap+write and send copy once; sendfile and splice hand page references over;
    /// the zero-copy sends copy only what the kernel reported copied.
    pub fn copies_per_byte(self, zerocopy_fraction: Option<f64>) -> f64 {
        match self {
            Method::ReadWrite => 2.0,
            Method::MmapWrite | Method::Send | Method::UringSend => 1.0,
            Method::Sendfile | Method::Splice => 0.0,
            Method::MsgZerocopy | Method::UringSendZc => {
                1.0 - zerocopy_fraction.unwrap_or(0.0).clamp(0.0, 1.0)
            }
        }
    }
}

/// The model's two measured costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// ns per byte copied (from a memcpy at the payload size, measured here).
    pub copy_ns_per_byte: f64,
    /// ns per call (s: a null syscall, measured here).
    pub call_ns: f64,
}

/// Predicted sender CPU, ms per GB (10^9 bytes).
pub fn predict_ms_per_gb(copies_per_byte: f64, calls_per_gb: f64, c: Costs) -> f64 {
    (copies_per_byte * 1e9 * c.copy_ns_per_byte + calls_per_gb * c.call_ns) / 1e6
}

/// The term of the prediction that is larger, and how much of the measurement neither
/// term explains (the stack's own work), in ms per GB.
pub fn split(copies_per_byte: f64, calls_per_gb: f64, c: Costs, measured: f64) -> (f64, f64, f64) {
    let copy = copies_per_byte * 1e9 * c.copy_ns_per_byte / 1e6;
    let calls = calls_per_gb * c.call_ns / 1e6;
    (copy, calls, measured - copy - calls)
}

/// The smallest payload from which the zero-copy method costs less sender CPU per GB than
/// its baseline at every size measured: `points` are (size, zero-copy, baseline), any order.
/// None when it never pays at the sizes measured.
pub fn pays_from(points: &[(u64, f64, f64)]) -> Option<u64> {
    let mut p = points.to_vec();
    p.sort_by_key(|x| x.0);
    let mut from = None;
    for &(size, zc, base) in p.iter().rev() {
        if zc < base {
            from = Some(size);
        } else {
            break;
        }
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in ALL {
            assert_eq!(Method::parse(m.name()), Some(m));
        }
        assert_eq!(Method::parse("zero"), None);
    }

    #[test]
    fn the_prediction_adds_copies_and_calls() {
        // 0.1 ns/byte (10 GB/s copy) and 100 ns a call.
        let c = Costs {
            copy_ns_per_byte: 0.1,
            call_ns: 100.0,
        };
        // read+write at 64 KiB: 2 copies/byte -> 200 ms/GB; 2 calls per 65536 bytes.
        let calls = 2.0 * 1e9 / 65536.0;
        let p = predict_ms_per_gb(Method::ReadWrite.copies_per_byte(None), calls, c);
        assert!((p - (200.0 + calls * 100.0 / 1e6)).abs() < 1e-9);
        assert_eq!(predict_ms_per_gb(0.0, 0.0, c), 0.0);
        let (copy, call, rest) = split(1.0, 1e4, c, 150.0);
        assert!((copy - 100.0).abs() < 1e-9 && (call - 1.0).abs() < 1e-9);
        assert!((rest - 49.0).abs() < 1e-9);
    }

    #[test]
    fn zero_copy_sends_copy_what_the_kernel_copied() {
        assert_eq!(Method::MsgZerocopy.copies_per_byte(Some(1.0)), 0.0);
        assert_eq!(Method::MsgZerocopy.copies_per_byte(Some(0.0)), 1.0);
        assert_eq!(Method::UringSendZc.copies_per_byte(Some(0.25)), 0.75);
        assert_eq!(Method::Sendfile.copies_per_byte(None), 0.0);
        assert_eq!(Method::Sendfile.baseline(), Some(Method::ReadWrite));
        assert_eq!(Method::Send.baseline(), None);
    }

    #[test]
    fn where_zero_copy_starts_to_pay() {
        let pts = [
            (4096, 9.0, 5.0),
            (65536, 4.0, 5.0),
            (1 << 20, 2.0, 5.0),
            (16384, 6.0, 5.0),
        ];
        assert_eq!(pays_from(&pts), Some(65536));
        // A dip that does not last is not where it pays.
        let pts = [(4096, 4.0, 5.0), (65536, 6.0, 5.0), (1 << 20, 2.0, 5.0)];
        assert_eq!(pays_from(&pts), Some(1 << 20));
        assert_eq!(pays_from(&[(4096, 6.0, 5.0)]), None);
        assert_eq!(pays_from(&[]), None);
    }
}
