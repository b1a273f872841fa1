//! The cost terms derived from the syscall figures.

use anyhow::{anyhow, Result};

use super::Measurements;
use crate::labs::echo::model::{CostTerms, PerByte};
use crate::measure::Summary;

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
