//! The rows `costlab price` stores: per priced event its count, unit cost, price and share of
//! the program's CPU, and per what-if the time it would save.

use costlab_core::measure::quality::{self, Quality};
use costlab_history::report::{Outcome, ResultRow};

use crate::pricing::{Priced, WhatIf};
use crate::LAB;

/// Rows class/event/count/unit_cost/priced/share for each priced event.
pub fn push_price_rows(o: &mut Outcome, priced: &[Priced], cmd: &str, cpu_ns: Option<f64>) {
    for p in priced {
        let case = costlab_core::case! {"class" => p.class, "event" => p.event, "command" => cmd};
        let (q, why) = p
            .unit
            .as_ref()
            .map(|u| quality::worst_of(&u.rows.iter().collect::<Vec<_>>()))
            .unwrap_or((None, Vec::new()));
        let mut push = |metric: &str, unit: &str, samples: Vec<f64>, derived: bool| {
            if let Some(mut r) = ResultRow::new(LAB, case.clone(), metric, unit, samples) {
                r.quality = if derived {
                    q.or(Some(Quality::Ok))
                } else {
                    Some(Quality::Ok)
                };
                if derived {
                    r.quality_reasons = why.clone();
                }
                o.results.push(r);
            }
        };
        push("count", "events", vec![p.count as f64], false);
        if let Some(u) = &p.unit {
            push("unit_cost", "ns", u.samples.clone(), true);
            push("priced", "ns", p.priced_samples(), true);
            if let Some(cpu) = cpu_ns.filter(|c| *c > 0.0) {
                let share = p.priced_samples().iter().map(|x| 100.0 * x / cpu).collect();
                push("share", "%", share, true);
            }
        }
    }
}
/// Per what-if: the time saved and the events left after, judged by the figures it used.
pub fn push_what_if_rows(o: &mut Outcome, what_ifs: &[WhatIf], cmd: &str) {
    for w in what_ifs {
        let (q, why) = quality::worst_of(&w.rows.iter().collect::<Vec<_>>());
        for (metric, unit, samples) in [
            ("saved", "ns", w.saved.clone()),
            ("after", "events", vec![w.after as f64]),
        ] {
            if let Some(mut r) = ResultRow::new(
                LAB,
                costlab_core::case! {"what" => w.what, "from" => w.from, "command" => cmd},
                metric,
                unit,
                samples,
            ) {
                r.quality = q.or(Some(Quality::Ok));
                r.quality_reasons = why.clone();
                o.results.push(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::Unit;

    fn priced(count: u64, unit: Option<Vec<f64>>) -> Priced {
        Priced {
            class: "syscall".into(),
            event: "read".into(),
            count,
            unit: unit.map(|samples| Unit {
                samples,
                rows: Vec::new(),
                from: "test".into(),
            }),
            unit_name: "s".into(),
            how: String::new(),
        }
    }

    fn metric<'a>(o: &'a Outcome, m: &str) -> Option<&'a ResultRow> {
        o.results.iter().find(|r| r.metric == m)
    }

    #[test]
    fn a_priced_event_gets_count_unit_price_and_share() {
        let mut o = Outcome::default();
        push_price_rows(
            &mut o,
            &[priced(1000, Some(vec![100.0, 110.0]))],
            "dd",
            Some(1e6),
        );
        let count = metric(&o, "count").unwrap();
        assert_eq!(count.samples, vec![1000.0]);
        assert_eq!(count.key("command"), "dd");
        assert_eq!(metric(&o, "unit_cost").unwrap().samples, vec![100.0, 110.0]);
        assert_eq!(metric(&o, "priced").unwrap().samples, vec![1e5, 1.1e5]);
        assert_eq!(metric(&o, "share").unwrap().samples, vec![10.0, 11.0]);
        assert!(o.results.iter().all(|r| r.quality == Some(Quality::Ok)));
    }

    #[test]
    fn an_unpriced_event_gets_its_count_only_and_no_cpu_no_share() {
        let mut o = Outcome::default();
        push_price_rows(&mut o, &[priced(7, None)], "dd", Some(1e6));
        assert_eq!(o.results.len(), 1);
        assert_eq!(o.results[0].metric, "count");
        let mut o = Outcome::default();
        push_price_rows(&mut o, &[priced(7, Some(vec![5.0]))], "dd", Some(0.0));
        assert!(metric(&o, "share").is_none());
        assert!(metric(&o, "priced").is_some());
    }
}
