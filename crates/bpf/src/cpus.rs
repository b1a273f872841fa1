//! The two CPU counts BPF needs, and why they differ:
//! - a per-CPU map holds one value for every CPU the kernel may ever bring up (`possible`),
//!   and a lookup copies out that many: sized from the online CPUs, the buffer would be too
//!   small on a machine with CPUs offline or hot-pluggable;
//! - a perf event is opened on a CPU that runs now (`online`): opening one on an offline CPU
//!   fails.
//!
//! Both are read from sysfs and parsed by `costlab_core::measure::cpus`; an unreadable list is
//! an error, never a guess.

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::measure::cpus::parse_cpu_list;

const POSSIBLE: &str = "/sys/devices/system/cpu/possible";
const ONLINE: &str = "/sys/devices/system/cpu/online";

/// The CPU list in `text` (read from `path`), refused when empty.
fn list(path: &str, text: &str, why: &str) -> Result<Vec<usize>> {
    match parse_cpu_list(text.trim()) {
        Ok(l) if !l.is_empty() => Ok(l),
        _ => Err(usage(format!(
            "cannot parse {path} ({:?}): {why}",
            text.trim()
        ))),
    }
}

fn read(path: &str, why: &str) -> Result<Vec<usize>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {path} ({e}): {why}; mount sysfs")))?;
    list(path, &text, why)
}

/// How many values a per-CPU map's key holds: the CPUs the kernel may ever have.
pub fn possible() -> Result<usize> {
    read(POSSIBLE, "per-CPU BPF maps are sized from it").map(|l| l.len())
}

/// The CPUs online now, where a per-CPU perf event is opened.
pub fn online() -> Result<Vec<usize>> {
    read(ONLINE, "perf events are opened on each online CPU")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_an_empty_or_bad_one_is_one_line() {
        assert_eq!(list("p", "0-15\n", "x").unwrap().len(), 16);
        assert_eq!(list("p", "0,2-3", "x").unwrap(), vec![0, 2, 3]);
        for bad in ["", "0-x", "3-1"] {
            let e = list("/sys/p", bad, "sized from it")
                .unwrap_err()
                .to_string();
            assert!(e.contains("/sys/p") && e.contains("sized from it") && !e.contains('\n'));
        }
    }

    #[test]
    fn this_machine_has_at_least_as_many_possible_cpus_as_online_ones() {
        let (p, o) = (possible().unwrap(), online().unwrap());
        assert!(p >= o.len() && !o.is_empty(), "{p} possible, {o:?} online");
    }
}
