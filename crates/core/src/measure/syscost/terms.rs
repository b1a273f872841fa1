//! The cost terms derived from the syscall figures (`CostTerms`: s, w, t(n), e(k), the
//! per-byte fits), and what they give at a batch or a size. Produced here, priced by the echo
//! lab's model and printed by the syscall lab.

use anyhow::{anyhow, Result};

use super::Measurements;
use crate::measure::stats::fit_line;
use crate::measure::Summary;

/// The cost terms, measured by `measure_terms` and priced by the echo lab's model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostTerms {
    /// s: a null syscall round trip (raw getppid), ns.
    pub s_ns: Summary,
    /// Kernel work of a 16-byte send on loopback TCP beyond s, ns.
    pub w_send_ns: Summary,
    /// Kernel work of a 16-byte recv on loopback TCP beyond s, ns.
    pub w_recv_ns: Summary,
    /// io_uring NOP cost per op at batch n: (n, ns per op), as measured (the enter's
    /// switch shared by the n ops is included).
    pub t_nop_ns: Vec<(u32, Summary)>,
    /// io_uring send+recv cost per op at batch n: (n, ns per op), the mean of a send op and a
    /// recv op measured in the same iteration (the enter's switch shared by n included).
    pub uring_sendrecv_ns: Vec<(u32, Summary)>,
    /// io_uring 16-byte send cost per op at batch n, as measured (switch shared by n included).
    #[serde(default)]
    pub uring_send_ns: Vec<(u32, Summary)>,
    /// io_uring 16-byte recv cost per op at batch n, as measured (switch shared by n included).
    #[serde(default)]
    pub uring_recv_ns: Vec<(u32, Summary)>,
    /// `epoll_wait` returning k ready events: (k, ns per call, s included).
    #[serde(default)]
    pub epoll_wait_ns: Vec<(u32, Summary)>,
    /// What a 16-byte loopback send adds when it wakes a peer sleeping in recv (on another
    /// CPU where there is one), ns. Not in the predictions (how many sends wake a sleeping
    /// client depends on the client), but the verdicts use it to size an unexplained gap.
    #[serde(default)]
    pub wake_ns: Option<Summary>,
    /// Why the io_uring terms are missing (io_uring_setup refused), if they are.
    #[serde(default)]
    pub uring_unsupported: Option<String>,
    /// A loopback send and a recv of B bytes as fixed + per-byte (s included), fitted over
    /// 16 B .. 64 KiB; None where they were not measured (the model then has no byte term).
    #[serde(default)]
    pub send_bytes: Option<PerByte>,
    #[serde(default)]
    pub recv_bytes: Option<PerByte>,
}

/// A cost that grows with the bytes moved: fixed + per_byte x B, fitted by least squares
/// over (bytes, ns) points, which are kept to check the fit against.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerByte {
    pub fixed_ns: f64,
    pub per_byte_ns: f64,
    /// (bytes, measured ns) the fit was made from.
    pub points: Vec<(f64, f64)>,
}

impl PerByte {
    /// Least-squares line through the points; None with fewer than two distinct sizes.
    pub fn fit(points: &[(f64, f64)]) -> Option<PerByte> {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let (fixed_ns, per_byte_ns) = fit_line(&pts)?;
        Some(PerByte {
            fixed_ns,
            per_byte_ns,
            points: pts,
        })
    }

    /// The fitted cost of B bytes.
    pub fn at(&self, bytes: f64) -> f64 {
        self.fixed_ns + self.per_byte_ns * bytes
    }

    /// The largest relative miss of the line at its own points.
    pub fn worst_miss(&self) -> f64 {
        self.points
            .iter()
            .map(|(x, y)| ((self.at(*x) - y) / y.abs().max(1e-9)).abs())
            .fold(0.0, f64::max)
    }
}

/// (n, median) points of a batched term.
fn medians(v: &[(u32, Summary)]) -> Vec<(u32, f64)> {
    v.iter().map(|(n, s)| (*n, s.median)).collect()
}

/// Interpolate a batched per-op cost at batch `n`: linear in 1/n between the measured
/// batches on either side (exact for a per-op cost plus a per-enter cost shared by n), held
/// at the nearest measured batch outside their range. None without points.
pub fn interpolate(points: &[(u32, f64)], n: f64) -> Option<f64> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(b, y)| *b > 0 && y.is_finite())
        .map(|(b, y)| (f64::from(*b), *y))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = *pts.first()?;
    let last = *pts.last()?;
    if n <= first.0 {
        return Some(first.1);
    }
    if n >= last.0 {
        return Some(last.1);
    }
    for w in pts.windows(2) {
        let ((n0, y0), (n1, y1)) = (w[0], w[1]);
        if n >= n0 && n <= n1 {
            let (x0, x1, x) = (1.0 / n0, 1.0 / n1, 1.0 / n);
            if x0 == x1 {
                return Some(y0);
            }
            return Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
        }
    }
    Some(last.1)
}

impl CostTerms {
    /// s, ns (median).
    pub fn s(&self) -> f64 {
        self.s_ns.median
    }

    /// w = w_recv + w_send, ns (medians).
    pub fn w(&self) -> f64 {
        self.w_recv_ns.median + self.w_send_ns.median
    }

    /// Per-op io_uring send cost as measured at each batch; falls back to the send+recv mean
    /// when the separate figures are missing.
    pub fn uring_send(&self) -> Vec<(u32, f64)> {
        if self.uring_send_ns.is_empty() {
            medians(&self.uring_sendrecv_ns)
        } else {
            medians(&self.uring_send_ns)
        }
    }

    pub fn uring_recv(&self) -> Vec<(u32, f64)> {
        if self.uring_recv_ns.is_empty() {
            medians(&self.uring_sendrecv_ns)
        } else {
            medians(&self.uring_recv_ns)
        }
    }

    /// The article's t: kernel work of one recv and one send through io_uring at batch 1,
    /// beyond the switch: U_send(1) + U_recv(1) - 2s. None unless batch 1 was measured.
    pub fn article_t(&self) -> Option<f64> {
        let at_one = |v: Vec<(u32, f64)>| v.into_iter().find(|(n, _)| *n == 1).map(|(_, u)| u);
        let send = at_one(self.uring_send())?;
        let recv = at_one(self.uring_recv())?;
        Some(send + recv - 2.0 * self.s())
    }

    /// p_op(n) = U_op(n) - s/n: per-op cost of a send and of a recv through io_uring at
    /// batch n without the switch, never below zero. None without io_uring figures.
    pub fn uring_ops_at(&self, n: f64) -> Option<(f64, f64)> {
        let s = self.s();
        let without_switch = |pts: Vec<(u32, f64)>| -> Vec<(u32, f64)> {
            pts.into_iter()
                .map(|(b, u)| (b, u - s / f64::from(b)))
                .collect()
        };
        let send = interpolate(&without_switch(self.uring_send()), n)?;
        let recv = interpolate(&without_switch(self.uring_recv()), n)?;
        Some((send.max(0.0), recv.max(0.0)))
    }

    /// e(k): kernel work of an epoll_wait returning k events, beyond s; None if not measured.
    pub fn epoll_wait_work(&self, k: f64) -> Option<f64> {
        let s = self.s();
        let pts: Vec<(u32, f64)> = self
            .epoll_wait_ns
            .iter()
            .map(|(k, c)| (*k, c.median - s))
            .collect();
        // epoll_wait's work grows with k (it copies each event out), so interpolate in k, not 1/k.
        let mut pts: Vec<(f64, f64)> = pts.iter().map(|(k, y)| (f64::from(*k), *y)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = *pts.first()?;
        let last = *pts.last()?;
        let e = if pts.len() == 1 || k <= first.0 {
            first.1
        } else {
            // Extrapolate past the last point along the last segment: the cost per event is
            // what carries on.
            let (a, b) = pts
                .windows(2)
                .map(|w| (w[0], w[1]))
                .find(|(_, b)| k <= b.0)
                .unwrap_or((pts[pts.len() - 2], last));
            if b.0 == a.0 {
                a.1
            } else {
                a.1 + (b.1 - a.1) * (k - a.0) / (b.0 - a.0)
            }
        };
        Some(e.max(0.0))
    }

    /// What moving a message of `size` bytes in and out of the kernel costs beyond the 16-byte
    /// message w and the io_uring ops were measured with: (size - 16) x (send + recv per
    /// byte). None without the per-byte fits or for sizes up to 16.
    pub fn bytes_beyond_16(&self, size: u64) -> Option<f64> {
        let (send, recv) = (self.send_bytes.as_ref()?, self.recv_bytes.as_ref()?);
        let extra = size.saturating_sub(super::MSG as u64) as f64;
        (extra > 0.0).then(|| extra * (send.per_byte_ns.max(0.0) + recv.per_byte_ns.max(0.0)))
    }

    /// The largest batch measured for io_uring send/recv (0 if none).
    pub fn max_uring_batch(&self) -> u32 {
        let a = self.uring_send_ns.iter().map(|(n, _)| *n).max();
        let b = self.uring_sendrecv_ns.iter().map(|(n, _)| *n).max();
        a.max(b).unwrap_or(0)
    }
}

/// Each sample minus a fixed amount (the median of s): w's samples keep the spread of what
/// was measured, s's spread is reported with s.
fn median_of(samples: &[f64]) -> f64 {
    crate::measure::stats::median(samples)
}

fn minus(samples: &[f64], s: f64) -> Vec<f64> {
    samples.iter().map(|x| x - s).collect()
}

/// The cost terms from a set of measurements: s, w_send = tcp-send - s, w_recv =
/// tcp-recv - s, t(n) and the io_uring send/recv per op by batch, epoll_wait by events.
pub fn terms_from(m: &Measurements) -> Result<CostTerms> {
    let need = |call: &str| {
        m.get(call, 1)
            .and_then(Summary::of)
            .ok_or_else(|| anyhow!("no {call} figure to derive the cost terms from"))
    };
    let s = need("getppid")?;
    need("tcp-send")?;
    need("tcp-recv")?;
    let send = m.get("tcp-send", 1).unwrap_or_default();
    let recv = m.get("tcp-recv", 1).unwrap_or_default();
    let summary = |v: Vec<f64>| Summary::of(&v).ok_or_else(|| anyhow!("empty samples"));
    let uring_send = m.batched("uring-send");
    let uring_recv = m.batched("uring-recv");
    // The mean of a send op and a recv op, paired by sample: both come from one iteration.
    let uring_sendrecv = uring_send
        .iter()
        .filter_map(|(b, _)| {
            let a = m.get("uring-send", *b)?;
            let r = m.get("uring-recv", *b)?;
            let mean: Vec<f64> = a.iter().zip(r).map(|(x, y)| (x + y) / 2.0).collect();
            Summary::of(&mean).map(|sm| (*b, sm))
        })
        .collect();
    Ok(CostTerms {
        s_ns: s,
        w_send_ns: summary(minus(send, s.median))?,
        w_recv_ns: summary(minus(recv, s.median))?,
        t_nop_ns: m.batched("uring-nop"),
        uring_sendrecv_ns: uring_sendrecv,
        uring_send_ns: uring_send,
        uring_recv_ns: uring_recv,
        epoll_wait_ns: m.batched("epoll-wait"),
        wake_ns: m
            .get("tcp-send-wake", 1)
            .and_then(|v| Summary::of(&minus(v, median_of(send)))),
        uring_unsupported: m.uring_unsupported.clone(),
        send_bytes: PerByte::fit(&m.by_size("tcp-send")),
        recv_bytes: PerByte::fit(&m.by_size("tcp-recv")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake() -> Measurements {
        let mut m = Measurements::default();
        m.push("getppid", 1, vec![100.0, 90.0, 110.0]);
        m.push("clock_gettime", 1, vec![20.0, 20.0, 21.0]);
        m.push("tcp-send", 1, vec![1300.0, 1200.0, 1400.0]);
        m.push("tcp-recv", 1, vec![500.0, 600.0, 550.0]);
        m.push("epoll-wait", 1, vec![200.0]);
        m.push("epoll-wait", 32, vec![800.0]);
        m.push("tcp-send-wake", 1, vec![4300.0, 4400.0]);
        for b in [4u32, 1, 16] {
            let f = f64::from(b);
            m.push("uring-nop", b, vec![50.0 + 400.0 / f]);
            m.push("uring-send", b, vec![900.0 + 400.0 / f, 1000.0 + 400.0 / f]);
            m.push("uring-recv", b, vec![300.0 + 400.0 / f, 400.0 + 400.0 / f]);
        }
        m
    }

    #[test]
    fn terms_from_fake_measurements() {
        let t = terms_from(&fake()).unwrap();
        assert_eq!(t.s_ns.median, 100.0);
        // w = measured - median s, sample by sample.
        assert_eq!(t.w_send_ns.median, 1200.0);
        assert_eq!((t.w_send_ns.min, t.w_send_ns.max), (1100.0, 1300.0));
        assert_eq!(t.w_recv_ns.median, 450.0);
        let batches: Vec<u32> = t.t_nop_ns.iter().map(|(b, _)| *b).collect();
        assert_eq!(batches, vec![1, 4, 16]);
        assert_eq!(t.t_nop_ns[0].1.median, 450.0);
        assert_eq!(t.t_nop_ns[2].1.median, 75.0);
        // Send+recv per op: mean of the paired samples, (1300 + 700) / 2 and (1400 + 800) / 2.
        assert_eq!(t.uring_sendrecv_ns[0].0, 1);
        assert_eq!(t.uring_sendrecv_ns[0].1.median, 1050.0);
        assert_eq!(t.uring_send_ns[1].1.median, 1050.0);
        assert_eq!(t.epoll_wait_ns.len(), 2);
        // The wake: tcp-send-wake minus the median tcp-send (1300).
        assert_eq!(t.wake_ns.unwrap().median, 3050.0);
        assert!(t.uring_unsupported.is_none());
        // The article's t: U_send(1) + U_recv(1) - 2s = 1350 + 750 - 200.
        assert_eq!(t.article_t(), Some(1900.0));
    }

    #[test]
    fn terms_need_s_and_tcp() {
        let mut m = fake();
        m.figures.retain(|f| f.call != "tcp-recv");
        assert!(terms_from(&m).unwrap_err().to_string().contains("tcp-recv"));
        let mut m = fake();
        m.figures.retain(|f| !f.call.starts_with("uring"));
        m.uring_unsupported = Some("io_uring_setup: EPERM".into());
        let t = terms_from(&m).unwrap();
        assert!(t.t_nop_ns.is_empty() && t.uring_sendrecv_ns.is_empty());
        assert_eq!(
            t.uring_unsupported.as_deref(),
            Some("io_uring_setup: EPERM")
        );
    }
}
