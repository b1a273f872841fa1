//! Which remedies can be set from outside the program here, and how: what the program is
//! (Go, dynamically linked glibc), the THP mode, the CPU topology and the NUMA nodes.

use std::path::{Path, PathBuf};

/// The THP mode's sysfs file.
pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The 2 MiB hugetlb pool's size file.
pub const POOL_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

/// The THP mode now (`always`, `madvise`, `never`), None without THP.
pub fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string(THP_ENABLED).ok()?;
    Some(costlab_core::machine::restore::chosen(&text))
}

/// Whether the program at `path` is dynamically linked against glibc (it names glibc's
/// loader and libc.so.6), so that glibc's tunables reach its malloc.
pub fn is_glibc_dynamic(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| has(&b, b"libc.so.6") && has(&b, b"ld-linux"))
}

fn has(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The CPUs to pin to: the SMT siblings of the first CPU this process may use (one CPU where
/// its core has no siblings), within the allowed ones.
pub fn pin_set() -> Vec<usize> {
    let allowed = costlab_core::measure::cpus::allowed_cpus();
    let Some(&first) = allowed.first() else {
        return Vec::new();
    };
    let list = std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{first}/topology/thread_siblings_list"
    ))
    .ok()
    .and_then(|t| costlab_core::measure::cpus::parse_cpu_list(&t).ok())
    .unwrap_or_else(|| vec![first]);
    let set: Vec<usize> = list.into_iter().filter(|c| allowed.contains(c)).collect();
    if set.is_empty() {
        vec![first]
    } else {
        set
    }
}

/// The NUMA nodes that have memory (node 0 alone where the kernel does not say).
pub fn memory_nodes() -> Vec<usize> {
    let root = PathBuf::from("/sys/devices/system/node");
    std::fs::read_to_string(root.join("has_memory"))
        .ok()
        .and_then(|t| costlab_core::measure::cpus::parse_cpu_list(&t).ok())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// The nodes as set_mempolicy's mask (the first 64 nodes).
pub fn node_mask(nodes: &[usize]) -> u64 {
    nodes
        .iter()
        .filter(|n| **n < 64)
        .fold(0, |m, n| m | (1u64 << n))
}

/// The 2 MiB pages a heap of `bytes` needs, with a margin for the allocator's own.
pub fn pool_pages(bytes: u64) -> u64 {
    bytes.div_ceil(2 << 20) + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_covers_the_heap_and_a_margin() {
        assert_eq!(pool_pages(0), 16);
        assert_eq!(pool_pages(1), 17);
        assert_eq!(pool_pages(256 << 20), 128 + 16);
    }

    #[test]
    fn the_interleave_mask_has_a_bit_per_node() {
        assert_eq!(node_mask(&[0, 1]), 0b11);
        assert_eq!(node_mask(&[1, 3, 70]), 0b1010);
        assert!(!memory_nodes().is_empty());
    }

    #[test]
    fn the_glibc_check_reads_the_files_names() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prog");
        std::fs::write(&p, b"\x7fELF /lib64/ld-linux-x86-64.so.2 \0libc.so.6\0").unwrap();
        assert!(is_glibc_dynamic(&p));
        std::fs::write(&p, b"\x7fELF static").unwrap();
        assert!(!is_glibc_dynamic(&p));
        assert!(!is_glibc_dynamic(&dir.path().join("none")));
    }
}
