//! What the program's fds point at (files, pipes, sockets, devices), watched over the run, and
//! the read/write family's counts split by it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::bpf;

/// What an fd points at, from its /proc/PID/fd link and the file it opens: `file` (a
/// regular file), `pipe`, `socket`, `dev` (a character device: /dev/null, /dev/zero, a tty),
/// or `other` (an eventfd, an epoll, a directory...).
pub fn fd_kind(link: &str, file_type: Option<std::fs::FileType>) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if link.starts_with("pipe:") {
        return "pipe";
    }
    if link.starts_with("socket:") {
        return "socket";
    }
    match file_type {
        Some(t) if t.is_file() => "file",
        Some(t) if t.is_fifo() => "pipe",
        Some(t) if t.is_socket() => "socket",
        Some(t) if t.is_char_device() => "dev",
        _ => "other",
    }
}

/// The kinds each by-fd key was seen pointing at, process by process, over the run. A key is
/// the tgid's low bits and the fd (`bpf::fd_key`), so two live processes can share one: where
/// they saw different kinds there (an archiver's stdin is /dev/null, its compressor's a pipe),
/// the key's calls cannot be told apart and keep the plain name.
#[derive(Debug, Default, Clone)]
pub struct FdKinds {
    seen: BTreeMap<u32, BTreeMap<u32, BTreeMap<&'static str, u32>>>,
}

impl FdKinds {
    /// Look once at the fds below `bpf::FDS` of each process in `pids`.
    pub fn sample(&mut self, pids: &[u32]) {
        for pid in pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for e in dir.flatten() {
                let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if fd >= bpf::FDS - 1 {
                    continue;
                }
                let link = std::fs::read_link(e.path()).unwrap_or_default();
                let ty = std::fs::metadata(e.path()).ok().map(|m| m.file_type());
                self.note_in(
                    *pid,
                    bpf::fd_key(*pid, fd),
                    fd_kind(&link.to_string_lossy(), ty),
                );
            }
        }
    }

    /// `fd`: a by-fd key (`bpf::fd_key`: the process's tgid bits and the fd), seen in one
    /// process.
    pub fn note(&mut self, fd: u32, kind: &'static str) {
        self.note_in(0, fd, kind)
    }

    /// `fd` (a by-fd key) seen as `kind` in process `pid`.
    pub fn note_in(&mut self, pid: u32, fd: u32, kind: &'static str) {
        let by_kind = self.seen.entry(fd).or_default().entry(pid).or_default();
        *by_kind.entry(kind).or_insert(0) += 1;
    }

    /// The kind key `fd` was seen as most often in each process that had it; None if never
    /// seen, or where two processes sharing the key saw different kinds.
    pub fn kind(&self, fd: u32) -> Option<&'static str> {
        let mut kinds = self.seen.get(&fd)?.values().filter_map(|by_kind| {
            by_kind
                .iter()
                .max_by_key(|(k, n)| (**n, std::cmp::Reverse(**k)))
                .map(|(k, _)| *k)
        });
        let first = kinds.next()?;
        kinds.all(|k| k == first).then_some(first)
    }

    /// The keys that processes with different kinds shared (their calls keep the plain name).
    pub fn shared(&self) -> usize {
        self.seen
            .iter()
            .filter(|(key, pids)| pids.len() > 1 && self.kind(**key).is_none())
            .count()
    }
}

/// Split the read/write family's counts by what their fds pointed at: of the `read` calls,
/// the share whose sampled fds were seen as character devices becomes `read:dev`, and so on;
/// the share on fds never seen (or above the counted fds) keeps the plain name.
pub fn split_by_fd_kind(
    syscalls: &mut BTreeMap<String, u64>,
    by_fd: &BTreeMap<(u32, u32), u64>,
    kinds: &FdKinds,
    names: &BTreeMap<u32, String>,
) {
    let mut sampled: BTreeMap<u32, (u64, BTreeMap<&'static str, u64>)> = BTreeMap::new();
    for (&(id, fd), &n) in by_fd {
        let e = sampled.entry(id).or_default();
        e.0 += n;
        if let Some(kind) = kinds.kind(fd) {
            *e.1.entry(kind).or_insert(0) += n;
        }
    }
    for (id, (all, by_kind)) in sampled {
        let Some(name) = names.get(&id) else {
            continue;
        };
        let Some(&total) = syscalls.get(name) else {
            continue;
        };
        let mut left = total;
        for (kind, n) in by_kind {
            let share = ((total as f64) * n as f64 / all as f64).round() as u64;
            let share = share.min(left);
            left -= share;
            if share > 0 {
                *syscalls.entry(format!("{name}:{kind}")).or_insert(0) += share;
            }
        }
        if left == 0 {
            syscalls.remove(name);
        } else {
            syscalls.insert(name.clone(), left);
        }
    }
}

/// The sampled calls' bytes by (syscall number, by-fd key) summed by the call's name and its
/// fd's kind ("read:pipe"; the plain name where the fd was never seen): what shares the
/// run's rchar and wchar out by kind.
pub fn by_fd_kind(
    bytes: &BTreeMap<(u32, u32), u64>,
    kinds: &FdKinds,
    names: &BTreeMap<u32, String>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (&(id, fd), &n) in bytes {
        let Some(name) = names.get(&id) else {
            continue;
        };
        let key = match kinds.kind(fd) {
            Some(kind) => format!("{name}:{kind}"),
            None => name.clone(),
        };
        *out.entry(key).or_insert(0) += n;
    }
    out
}

/// Watches the fds of a cgroup's (or a process's) processes every few milliseconds until
/// stopped; what it saw comes back from `stop`. The watch waits on a channel between looks,
/// so `stop` wakes it at once (a sleep made every run wait up to 10 ms more at its end).
pub struct FdWatch {
    stop: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<FdKinds>,
}

impl FdWatch {
    pub fn start(procs: Procs) -> FdWatch {
        use std::sync::mpsc::RecvTimeoutError;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let mut kinds = FdKinds::default();
            loop {
                let pids = match &procs {
                    Procs::Cgroup(dir) => std::fs::read_to_string(dir.join("cgroup.procs"))
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.trim().parse().ok())
                        .collect(),
                    Procs::One(pid) => vec![*pid],
                };
                kinds.sample(&pids);
                match stopped.recv_timeout(Duration::from_millis(10)) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // Stopped (or the watch dropped): one last look, then what was seen.
                    _ => {
                        kinds.sample(&pids);
                        return kinds;
                    }
                }
            }
        });
        FdWatch { stop, handle }
    }

    pub fn stop(self) -> FdKinds {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_default()
    }
}

/// Whose fds an `FdWatch` looks at.
pub enum Procs {
    Cgroup(PathBuf),
    One(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fds_are_told_apart_by_their_links_and_types() {
        let ty = |p: &str| std::fs::metadata(p).ok().map(|m| m.file_type());
        assert_eq!(fd_kind("pipe:[123]", None), "pipe");
        assert_eq!(fd_kind("socket:[9]", None), "socket");
        assert_eq!(fd_kind("/dev/null", ty("/dev/null")), "dev");
        assert_eq!(fd_kind("/proc/self/exe", ty("/proc/self/exe")), "file");
        assert_eq!(fd_kind("anon_inode:[eventfd]", None), "other");
        assert_eq!(fd_kind("/", ty("/")), "other");
    }

    #[test]
    fn sampled_fds_share_out_the_exact_totals() {
        let names: BTreeMap<u32, String> = [(0, "read".into()), (1, "write".into())].into();
        let mut kinds = FdKinds::default();
        kinds.note(0, "dev");
        kinds.note(1, "pipe");
        kinds.note(1, "pipe");
        kinds.note(1, "file"); // seen once as a file, twice as a pipe: a pipe
        let mut syscalls: BTreeMap<String, u64> = [
            ("read".into(), 1000),
            ("write".into(), 999),
            ("openat".into(), 3),
        ]
        .into();
        // Samples: reads 3 on fd 0 (dev), 1 on fd 7 (never seen); writes 4 on fd 1.
        let by_fd: BTreeMap<(u32, u32), u64> = [((0, 0), 3), ((0, 7), 1), ((1, 1), 4)].into();
        split_by_fd_kind(&mut syscalls, &by_fd, &kinds, &names);
        assert_eq!(syscalls.get("read:dev"), Some(&750));
        assert_eq!(syscalls.get("read"), Some(&250));
        assert_eq!(syscalls.get("write:pipe"), Some(&999));
        assert_eq!(syscalls.get("write"), None);
        assert_eq!(syscalls.get("openat"), Some(&3));
        let total: u64 = syscalls.values().sum();
        assert_eq!(total, 2002, "no call is lost or made up");
    }

    /// The sampled calls' bytes go by name and kind, an fd never seen under the plain name.
    #[test]
    fn sampled_bytes_sum_by_name_and_fd_kind() {
        let names: BTreeMap<u32, String> = [(0, "read".into()), (17, "pread64".into())].into();
        let mut kinds = FdKinds::default();
        kinds.note(bpf::fd_key(10, 0), "pipe");
        kinds.note(bpf::fd_key(10, 3), "file");
        kinds.note(bpf::fd_key(11, 3), "file");
        let bytes: BTreeMap<(u32, u32), u64> = [
            ((0, bpf::fd_key(10, 0)), 65536),
            ((0, bpf::fd_key(10, 3)), 4096),
            ((0, bpf::fd_key(11, 3)), 100),
            ((0, bpf::fd_key(11, 9)), 7),
            ((17, bpf::fd_key(10, 3)), 512),
            ((99, bpf::fd_key(10, 3)), 1),
        ]
        .into();
        let out = by_fd_kind(&bytes, &kinds, &names);
        let want: BTreeMap<String, u64> = [
            ("read:pipe".to_string(), 65536),
            ("read:file".to_string(), 4196),
            ("read".to_string(), 7),
            ("pread64:file".to_string(), 512),
        ]
        .into();
        assert_eq!(out, want);
    }

    /// One fd number, two processes, two kinds (an archiver's stdin is /dev/null, its
    /// compressor's a pipe): each process's reads are their own kind.
    #[test]
    fn the_same_fd_in_two_processes_keeps_each_ones_kind() {
        let names: BTreeMap<u32, String> = [(0, "read".into())].into();
        let (tar, gzip) = (4001, 4002);
        let mut kinds = FdKinds::default();
        kinds.note(bpf::fd_key(tar, 0), "dev");
        kinds.note(bpf::fd_key(gzip, 0), "pipe");
        assert_ne!(bpf::fd_key(tar, 0), bpf::fd_key(gzip, 0));
        let mut syscalls: BTreeMap<String, u64> = [("read".into(), 400)].into();
        let by_fd: BTreeMap<(u32, u32), u64> = [
            ((0, bpf::fd_key(tar, 0)), 1),
            ((0, bpf::fd_key(gzip, 0)), 3),
        ]
        .into();
        split_by_fd_kind(&mut syscalls, &by_fd, &kinds, &names);
        assert_eq!(syscalls.get("read:pipe"), Some(&300));
        assert_eq!(syscalls.get("read:dev"), Some(&100));
        // Where their pids' low bits match, the key is shared: neither kind is believed.
        let other = tar + bpf::PROCS * 3;
        let mut kinds = FdKinds::default();
        kinds.note_in(tar, bpf::fd_key(tar, 0), "dev");
        kinds.note_in(other, bpf::fd_key(other, 0), "pipe");
        kinds.note_in(other, bpf::fd_key(other, 1), "pipe");
        assert_eq!(kinds.kind(bpf::fd_key(other, 1)), Some("pipe"));
        let shared = bpf::fd_key(tar, 0);
        assert_eq!(shared, bpf::fd_key(other, 0));
        assert_eq!(kinds.kind(shared), None);
        assert_eq!(kinds.shared(), 1);
        // A high fd shares the last slot of its process.
        assert_eq!(bpf::fd_key(tar, 500), bpf::fd_key(tar, bpf::FDS - 1));
    }
}
