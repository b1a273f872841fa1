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

/// A DAMON scheme that pages memory out on its own, without memory pressure: how long memory
/// must go untouched before it is taken, whether anonymous memory is left alone (the page
/// cache only), and how much it may take per quota interval.
#[derive(Debug, Clone, PartialEq)]
pub struct DamonPageout {
    /// Seconds untouched before a region may be paged out (the scheme's minimum age, in
    /// aggregation intervals, times the interval).
    pub min_age_s: f64,
    /// Anonymous pages are filtered out: only file pages (the page cache) are taken.
    pub file_only: bool,
    /// Bytes it may page out per `reset_ms` (0: no quota).
    pub quota_bytes: u64,
    pub reset_ms: u64,
}

impl std::fmt::Display for DamonPageout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DAMON pages out {} untouched for {:.0} s",
            if self.file_only {
                "page-cache memory"
            } else {
                "memory"
            },
            self.min_age_s
        )?;
        if self.quota_bytes > 0 && self.reset_ms > 0 {
            write!(
                f,
                " (up to {} MiB per {} ms)",
                self.quota_bytes >> 20,
                self.reset_ms
            )?;
        }
        Ok(())
    }
}

/// The pageout schemes of the running DAMON daemons (`sys/kernel/mm/damon/admin`) that are
/// always active (no watermarks: a scheme with them pages out only while free memory is low,
/// as reclaim does).
pub fn damon_pageout(root: &Root) -> Vec<DamonPageout> {
    let base = "sys/kernel/mm/damon/admin/kdamonds";
    let mut out = Vec::new();
    for k in root.numbered(base, "") {
        if root.value(&format!("{base}/{k}/state")).as_deref() != Some("on") {
            continue;
        }
        let contexts = format!("{base}/{k}/contexts");
        for c in root.numbered(&contexts, "") {
            let ctx = format!("{contexts}/{c}");
            let aggr_us: u64 = root
                .number(&format!("{ctx}/monitoring_attrs/intervals/aggr_us"))
                .unwrap_or(0);
            let schemes = format!("{ctx}/schemes");
            out.extend(
                root.numbered(&schemes, "")
                    .iter()
                    .filter_map(|s| pageout_scheme(root, &format!("{schemes}/{s}"), aggr_us)),
            );
        }
    }
    out
}

/// One scheme's pageout, where it is one and always active; `aggr_us`: its context's
/// aggregation interval, the unit of its minimum age.
fn pageout_scheme(root: &Root, sc: &str, aggr_us: u64) -> Option<DamonPageout> {
    let v = |f: &str| root.value(&format!("{sc}/{f}"));
    if v("action").as_deref() != Some("pageout")
        || v("watermarks/metric").is_some_and(|m| m != "none")
    {
        return None;
    }
    let age: u64 = root
        .number(&format!("{sc}/access_pattern/age/min"))
        .unwrap_or(0);
    // A filter of anonymous pages that does not allow them: the page cache only.
    let file_only = ["ops_filters", "filters", "core_filters"]
        .iter()
        .any(|kind| {
            let dir = format!("{sc}/{kind}");
            root.numbered(&dir, "").iter().any(|i| {
                let f = |x: &str| v(&format!("{kind}/{i}/{x}"));
                f("type").as_deref() == Some("anon")
                    && f("matching").as_deref() != Some("N")
                    && f("allow").as_deref() == Some("N")
            })
        });
    Some(DamonPageout {
        min_age_s: age as f64 * aggr_us as f64 / 1e6,
        file_only,
        quota_bytes: root.number(&format!("{sc}/quotas/bytes")).unwrap_or(0),
        reset_ms: root
            .number(&format!("{sc}/quotas/reset_interval_ms"))
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod damon_tests {
    use super::*;

    fn put(dir: &std::path::Path, rel: &str, v: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{v}\n")).unwrap();
    }

    /// A running kdamond with a pageout scheme that filters anonymous pages out: 12
    /// aggregation intervals of 5 s, 128 MiB a second; a stopped one, another action and a
    /// scheme with watermarks are not told.
    #[test]
    fn a_running_pageout_scheme_is_read_with_its_age_filter_and_quota() {
        let t = tempfile::tempdir().unwrap();
        let k = "sys/kernel/mm/damon/admin/kdamonds";
        put(t.path(), &format!("{k}/0/state"), "on");
        let c = format!("{k}/0/contexts/0");
        put(
            t.path(),
            &format!("{c}/monitoring_attrs/intervals/aggr_us"),
            "5000000",
        );
        let s = format!("{c}/schemes/0");
        put(t.path(), &format!("{s}/action"), "pageout");
        put(t.path(), &format!("{s}/access_pattern/age/min"), "12");
        put(t.path(), &format!("{s}/quotas/bytes"), "134217728");
        put(t.path(), &format!("{s}/quotas/reset_interval_ms"), "1000");
        put(t.path(), &format!("{s}/ops_filters/nr_filters"), "1");
        put(t.path(), &format!("{s}/ops_filters/0/type"), "anon");
        put(t.path(), &format!("{s}/ops_filters/0/matching"), "Y");
        put(t.path(), &format!("{s}/ops_filters/0/allow"), "N");
        put(t.path(), &format!("{s}/watermarks/metric"), "none");
        put(t.path(), &format!("{c}/schemes/1/action"), "stat");
        // Watermarks: pages out only while free memory is low, as reclaim does.
        put(t.path(), &format!("{c}/schemes/2/action"), "pageout");
        put(
            t.path(),
            &format!("{c}/schemes/2/watermarks/metric"),
            "free_mem_rate",
        );
        put(t.path(), &format!("{k}/1/state"), "off");
        put(
            t.path(),
            &format!("{k}/1/contexts/0/schemes/0/action"),
            "pageout",
        );
        let got = damon_pageout(&Root::new(t.path()));
        assert_eq!(
            got,
            vec![DamonPageout {
                min_age_s: 60.0,
                file_only: true,
                quota_bytes: 134217728,
                reset_ms: 1000,
            }]
        );
        assert_eq!(
            got[0].to_string(),
            "DAMON pages out page-cache memory untouched for 60 s (up to 128 MiB per 1000 ms)"
        );
        assert!(damon_pageout(&Root::new(&t.path().join("none"))).is_empty());
    }
}
