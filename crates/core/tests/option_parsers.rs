//! Property tests of the option parsers every command shares: sizes, durations, CPU lists,
//! thread counts and case lists, fed arbitrary strings. Each either refuses with a usage
//! error (exit 2, one line naming the value) or returns a value that formats back to itself;
//! none panics.

use std::time::Duration;

use costlab_core::error::exit_code;
use costlab_core::measure::cpus::{format_cpu_list, parse_cpu_list, parse_threads};
use costlab_core::measure::sizes::{format_size, parse_list, parse_size, parse_size_list};
use costlab_core::measure::units::parse_duration;
use proptest::prelude::*;

/// A refusal as the binary prints it: exit 2 and one line.
fn refused(e: &anyhow::Error) -> Result<(), TestCaseError> {
    prop_assert_eq!(exit_code(e), 2, "{}", e);
    let text = e.to_string();
    prop_assert!(!text.is_empty() && !text.contains('\n'), "{:?}", text);
    Ok(())
}

/// Strings that look like what a user types into these options, and any string at all.
fn option_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9.,eE+ KMGTBibmshu-]{0,12}",
        "[0-9]{1,25}(K|M|G|KiB|MB|ms|us|s|m|h)?",
        "[0-9]{1,6}(-[0-9]{1,6})?(,[0-9]{1,6}(-[0-9]{1,6})?){0,4}",
    ]
}

const CASES: [&str; 4] = ["read", "write", "copy", "memcpy"];

fn case(s: &str) -> anyhow::Result<&'static str> {
    CASES.iter().copied().find(|c| *c == s).ok_or_else(|| {
        costlab_core::error::usage(format!(
            "unknown case '{s}': use read, write, copy or memcpy"
        ))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_size_is_refused_or_formats_back(text in option_text()) {
        match parse_size(&text) {
            Ok(b) => {
                prop_assert!(b > 0);
                prop_assert_eq!(parse_size(&format_size(b)).unwrap(), b);
            }
            Err(e) => refused(&e)?,
        }
    }

    #[test]
    fn a_written_size_parses_to_its_bytes(n in 1u64..100_000, unit in 0usize..4) {
        let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30)][unit];
        prop_assert_eq!(parse_size(&format!("{n}{suffix}")).unwrap(), n << shift);
        prop_assert_eq!(parse_size(&format_size(n << shift)).unwrap(), n << shift);
    }

    #[test]
    fn a_size_list_is_refused_or_has_each_size_once(text in option_text()) {
        match parse_size_list(&text) {
            Ok(v) => {
                prop_assert!(!v.is_empty());
                let back: Vec<String> = v.iter().map(|b| format_size(*b)).collect();
                prop_assert_eq!(parse_size_list(&back.join(",")).unwrap(), v.clone());
                for (i, b) in v.iter().enumerate() {
                    prop_assert!(!v[..i].contains(b), "{} twice in {:?}", b, v);
                }
            }
            Err(e) => refused(&e)?,
        }
    }

    #[test]
    fn a_duration_is_refused_or_within_its_limits(text in option_text(), lo_ms in 0u64..2000, span_ms in 1u64..7_200_000) {
        let (lo, hi) = (Duration::from_millis(lo_ms), Duration::from_millis(lo_ms + span_ms));
        match parse_duration(&text, "--duration", lo, hi) {
            Ok(d) => {
                prop_assert!(d > Duration::ZERO && d >= lo && d <= hi, "{:?}", d);
                let back = format!("{}us", d.as_micros());
                if Duration::from_micros(d.as_micros() as u64) == d {
                    prop_assert_eq!(parse_duration(&back, "--duration", lo, hi).unwrap(), d);
                }
            }
            Err(e) => {
                refused(&e)?;
                let msg = e.to_string();
                prop_assert!(msg.starts_with("bad --duration '"), "{}", msg);
            }
        }
    }

    #[test]
    fn every_unit_a_duration_message_names_parses(n in 1u64..60, unit in 0usize..5) {
        let (suffix, ms) = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("", 1000)][unit];
        let d = parse_duration(&format!("{n}{suffix}"), "--duration", Duration::ZERO, Duration::from_secs(60 * 3600)).unwrap();
        prop_assert_eq!(d, Duration::from_millis(n * ms));
    }

    #[test]
    fn a_cpu_list_is_refused_or_formats_back(text in option_text()) {
        match parse_cpu_list(&text) {
            Ok(v) => {
                prop_assert!(v.windows(2).all(|w| w[0] < w[1]), "{:?}", v);
                prop_assert_eq!(parse_cpu_list(&format_cpu_list(&v)).unwrap(), v);
            }
            Err(e) => refused(&e)?,
        }
    }

    #[test]
    fn a_set_of_cpus_formats_and_parses_back(set in proptest::collection::btree_set(0usize..512, 1..40)) {
        let v: Vec<usize> = set.into_iter().collect();
        prop_assert_eq!(parse_cpu_list(&format_cpu_list(&v)).unwrap(), v);
    }

    #[test]
    fn a_cpu_given_twice_is_named(cpus in proptest::collection::vec(0usize..64, 1..6), again in 0usize..6) {
        let dup = cpus[again % cpus.len()];
        let mut items: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        items.push(dup.to_string());
        let e = parse_cpu_list(&items.join(",")).unwrap_err();
        refused(&e)?;
        prop_assert!(e.to_string().contains("is given twice"), "{}", e);
    }

    #[test]
    fn a_thread_list_is_refused_or_formats_back(text in option_text()) {
        match parse_threads(&text) {
            Ok(v) => {
                let back: Vec<String> = v.iter().map(|t| t.to_string()).collect();
                prop_assert_eq!(parse_threads(&back.join(",")).unwrap(), v);
            }
            Err(e) => refused(&e)?,
        }
    }

    #[test]
    fn a_case_list_is_refused_or_names_each_case_once(text in prop_oneof![any::<String>(), "(read|write|copy|memcpy|x|)(,(read|write|copy|memcpy| read|x|)){0,5}"]) {
        match parse_list(&text, case) {
            Ok(v) => {
                prop_assert!(!v.is_empty());
                for (i, c) in v.iter().enumerate() {
                    prop_assert!(!v[..i].contains(c), "{} twice in {:?}", c, v);
                }
                prop_assert_eq!(parse_list(&v.join(","), case).unwrap(), v);
            }
            Err(e) => refused(&e)?,
        }
    }
}

#[test]
fn a_duplicate_is_named_with_both_spellings() {
    let e = parse_size_list("4K,16K,16384").unwrap_err();
    assert_eq!(exit_code(&e), 2);
    assert_eq!(
        e.to_string(),
        "bad list '4K,16K,16384': '16K' and '16384' are the same; give each item once"
    );
    let e = parse_list("read,copy,read", case).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad list 'read,copy,read': 'read' is given twice; give each item once"
    );
    let e = parse_cpu_list("0-3,2").unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad CPU list '0-3,2': CPU 2 is given twice; give each CPU once"
    );
}
