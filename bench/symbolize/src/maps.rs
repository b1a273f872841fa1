//! Each process's executable mappings as perf.data records them over time: the maps perf
//! synthesized at its start, the MMAP/MMAP2 records of later mappings, FORK (a new process
//! starts with its parent's maps; a new thread shares them) and exec (a COMM record with
//! the exec flag drops the old image's maps). perf records no munmap, so a later mapping
//! over an older range wins, as perf's own overlap fix-up makes it.

use std::collections::HashMap;

/// One mapping: `[start, end)` of a process's address space, from `pgoff` in file `file`
/// (an index into [`Maps::files`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub file: usize,
}

/// Where an address lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// In file `file` (an index into [`Maps::files`]) at this file offset.
    File { file: usize, offset: u64 },
    /// In no mapping perf recorded (JIT code, a map made before perf started and missed).
    Unmapped,
}

#[derive(Debug, Default)]
pub struct Maps {
    /// Each file named by a mapping, once (paths as perf recorded them, "[vdso]" included).
    pub files: Vec<String>,
    index: HashMap<String, usize>,
    by_pid: HashMap<i32, Vec<Mapping>>,
}

impl Maps {
    pub fn file_id(&mut self, path: &str) -> usize {
        if let Some(&i) = self.index.get(path) {
            return i;
        }
        self.files.push(path.to_string());
        self.index.insert(path.to_string(), self.files.len() - 1);
        self.files.len() - 1
    }

    pub fn mmap(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &str) {
        let file = self.file_id(path);
        let end = start.saturating_add(len);
        let maps = self.by_pid.entry(pid).or_default();
        // Entries wholly under the new one can never be found again: drop them so that a
        // long-lived process's list stays short.
        maps.retain(|m| !(m.start >= start && m.end <= end));
        maps.push(Mapping {
            start,
            end,
            pgoff,
            file,
        });
    }

    /// A new process `child` (not a new thread) forked from `parent`.
    pub fn fork(&mut self, parent: i32, child: i32) {
        if parent == child {
            return;
        }
        let inherited = self.by_pid.get(&parent).cloned().unwrap_or_default();
        self.by_pid.insert(child, inherited);
    }

    /// `pid` called exec: its old image is gone.
    pub fn exec(&mut self, pid: i32) {
        self.by_pid.remove(&pid);
    }

    /// The latest mapping of `pid` that holds `addr`.
    pub fn find(&self, pid: i32, addr: u64) -> Place {
        self.by_pid
            .get(&pid)
            .and_then(|maps| maps.iter().rev().find(|m| m.start <= addr && addr < m.end))
            .map_or(Place::Unmapped, |m| Place::File {
                file: m.file,
                offset: addr - m.start + m.pgoff,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_found_in_its_latest_mapping_as_a_file_offset() {
        let mut m = Maps::default();
        m.mmap(10, 0x40_0000, 0x1000, 0x2000, "/usr/bin/tar");
        m.mmap(10, 0x7f00_0000, 0x10_0000, 0, "/usr/lib/libc.so.6");
        let tar = m.file_id("/usr/bin/tar");
        assert_eq!(
            m.find(10, 0x40_0010),
            Place::File {
                file: tar,
                offset: 0x2010
            }
        );
        assert_eq!(m.find(10, 0x40_1000), Place::Unmapped);
        assert_eq!(m.find(11, 0x40_0010), Place::Unmapped);
        // A later mapping over the same range wins (no munmap is recorded).
        m.mmap(10, 0x7f00_0000, 0x8000, 0x1000, "/usr/lib/libz.so.1");
        let z = m.file_id("/usr/lib/libz.so.1");
        assert_eq!(
            m.find(10, 0x7f00_0010),
            Place::File {
                file: z,
                offset: 0x1010
            }
        );
        // Outside the newer range, the older mapping still holds.
        assert!(matches!(
            m.find(10, 0x7f00_9000),
            Place::File { offset: 0x9000, .. }
        ));
        assert_eq!(m.files.len(), 3);
    }

    #[test]
    fn a_child_inherits_its_parents_maps_until_it_execs() {
        let mut m = Maps::default();
        m.mmap(10, 0x1000, 0x1000, 0, "/usr/bin/tar");
        m.fork(10, 11);
        assert!(matches!(m.find(11, 0x1800), Place::File { .. }));
        m.exec(11);
        assert_eq!(m.find(11, 0x1800), Place::Unmapped);
        assert!(matches!(m.find(10, 0x1800), Place::File { .. }));
        m.mmap(11, 0x1000, 0x1000, 0, "/usr/bin/gzip");
        let gzip = m.file_id("/usr/bin/gzip");
        assert_eq!(
            m.find(11, 0x1800),
            Place::File {
                file: gzip,
                offset: 0x800
            }
        );
        // A new thread (same pid) keeps the process's maps.
        m.fork(10, 10);
        assert!(matches!(m.find(10, 0x1800), Place::File { .. }));
    }
}
