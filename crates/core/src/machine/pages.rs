//! Page sizes: hugepage pools per size, transparent huge pages, total memory.

use super::sysfs::{kv_bytes, Root};
use super::HugePool;
pub use crate::measure::hugepool::{fix_hint, pool_dir, read_pool, PoolState, SYSFS_HUGEPAGES};

pub fn read_pools(root: &Root) -> Vec<HugePool> {
    let base = "sys/kernel/mm/hugepages";
    let mut pools: Vec<HugePool> = root
        .entries(base)
        .iter()
        .filter_map(|name| {
            let kb: u64 = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let n = |f: &str| {
                root.number::<u64>(&format!("{base}/{name}/{f}"))
                    .unwrap_or(0)
            };
            Some(HugePool {
                page_size: kb.checked_mul(1024)?,
                total: n("nr_hugepages"),
                free: n("free_hugepages"),
                reserved: n("resv_hugepages"),
                surplus: n("surplus_hugepages"),
            })
        })
        .collect();
    pools.sort_by_key(|p| p.page_size);
    pools
}

/// The selected word of a sysfs choice file: "always [madvise] never" -> "madvise".
pub fn selected(choice: &str) -> Option<String> {
    let start = choice.find('[')?;
    let end = choice[start..].find(']')? + start;
    Some(choice[start + 1..end].to_string())
}

/// THP mode (enabled) and defrag policy.
pub fn read_thp(root: &Root) -> (String, String) {
    let base = "sys/kernel/mm/transparent_hugepage";
    let pick = |f: &str| {
        root.value(&format!("{base}/{f}"))
            .and_then(|t| selected(&t))
            .unwrap_or_default()
    };
    (pick("enabled"), pick("defrag"))
}

pub fn read_mem_total(root: &Root) -> u64 {
    root.text("proc/meminfo")
        .and_then(|t| kv_bytes(&t, "MemTotal"))
        .unwrap_or(0)
}

/// MemAvailable from a /proc/meminfo text, in bytes.
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    kv_bytes(meminfo, "MemAvailable")
}

/// The kernel's estimate of the memory a new process can have (MemAvailable), in bytes, if it
/// can be read. Read afresh each call: it changes as the labs allocate.
pub fn mem_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_mem_available(&t))
}

#[cfg(test)]
mod tests {
    #[test]
    fn meminfo_parsing() {
        let t = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(super::parse_mem_available(t), Some(20_000_000 * 1024));
        assert_eq!(super::parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn selected_word() {
        assert_eq!(
            super::selected("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(super::selected("always madvise"), None);
    }
}
