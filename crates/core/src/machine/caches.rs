//! Caches per level, from sysfs cpu*/cache/index*: size, line, and which CPUs share each one.

use super::sysfs::{parse_sysfs_size, Root};
use super::Cache;

/// Every cache level and kind once, with the groups of CPUs that share an instance of it.
pub fn read_caches(root: &Root, online: &[usize]) -> Vec<Cache> {
    let mut caches: Vec<Cache> = Vec::new();
    for &cpu in online {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
        for idx in root.numbered(&dir, "index") {
            let base = format!("{dir}/index{idx}");
            let (Some(level), Some(kind)) = (
                root.number::<u8>(&format!("{base}/level")),
                root.value(&format!("{base}/type")),
            ) else {
                continue;
            };
            let size = root
                .value(&format!("{base}/size"))
                .and_then(|s| parse_sysfs_size(&s))
                .unwrap_or(0);
            let line = root
                .number(&format!("{base}/coherency_line_size"))
                .unwrap_or(0);
            let shared = root
                .cpu_list(&format!("{base}/shared_cpu_list"))
                .unwrap_or_else(|| vec![cpu]);
            match caches
                .iter_mut()
                .find(|c| c.level == level && c.kind == kind)
            {
                Some(c) => {
                    if !c.shared_by.contains(&shared) {
                        c.shared_by.push(shared);
                    }
                }
                None => caches.push(Cache {
                    level,
                    kind,
                    size,
                    line,
                    shared_by: vec![shared],
                }),
            }
        }
    }
    caches.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    caches
}
