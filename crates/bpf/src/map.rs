//! BPF maps: created with their key and value sizes, read back by key. A per-CPU map's value
//! comes back once for each possible CPU (`cpus::possible`), each padded to 8 bytes as the
//! kernel copies them.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use anyhow::Result;

use crate::sys;
use crate::uapi::MapType;

/// A map while its fd is open.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    kind: MapType,
    key_size: u32,
    value_size: u32,
    /// Values a key holds: the possible CPUs for a per-CPU map, else 1.
    cpus: usize,
}

impl Map {
    /// A map of `entries` keys of `key_size` bytes, each value `value_size` bytes.
    pub fn create(kind: MapType, key_size: u32, value_size: u32, entries: u32) -> Result<Map> {
        let cpus = if kind.per_cpu() {
            crate::cpus::possible()?
        } else {
            1
        };
        let fd = sys::MapCreate::new(kind, key_size, value_size, entries)
            .call()
            .map_err(|e| anyhow::anyhow!("creating a BPF {kind:?} map failed ({e})"))?;
        Ok(Map {
            fd,
            kind,
            key_size,
            value_size,
            cpus,
        })
    }

    /// A per-CPU array of `entries` values of `value_size` bytes (u32 keys).
    pub fn percpu_array(value_size: u32, entries: u32) -> Result<Map> {
        Map::create(MapType::PercpuArray, 4, value_size, entries)
    }

    /// An array of `entries` values of `value_size` bytes (u32 keys).
    pub fn array(value_size: u32, entries: u32) -> Result<Map> {
        Map::create(MapType::Array, 4, value_size, entries)
    }

    /// A hash of at most `entries` u32 keys.
    pub fn hash(value_size: u32, entries: u32) -> Result<Map> {
        Map::create(MapType::Hash, 4, value_size, entries)
    }

    /// A hash of at most `entries` u64 keys (a set, where the value is a byte no one reads).
    pub fn hash_u64(value_size: u32, entries: u32) -> Result<Map> {
        Map::create(MapType::Hash, 8, value_size, entries)
    }

    /// The fd a program's `ld_map` names.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn kind(&self) -> MapType {
        self.kind
    }

    /// Values a key holds: one for each possible CPU in a per-CPU map, else one.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// A value's size as the kernel copies it for a per-CPU map (rounded up to 8).
    fn stride(&self) -> usize {
        if self.kind.per_cpu() {
            self.value_size.div_ceil(8) as usize * 8
        } else {
            self.value_size as usize
        }
    }

    /// The value of `key` (its size the map's key size): one for each of `cpus()`, or None
    /// where the key is not there (a hash).
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        anyhow::ensure!(
            key.len() == self.key_size as usize,
            "a {}-byte key for a map of {}-byte keys",
            key.len(),
            self.key_size
        );
        let stride = self.stride();
        let mut buf = vec![0u8; stride * self.cpus];
        // SAFETY: the key has the map's key size (checked) and the buffer holds what the
        // kernel copies for this map: `cpus` values of `stride` bytes.
        match unsafe { sys::lookup(self.fd.as_fd(), key, &mut buf) } {
            Ok(()) => Ok(Some(
                buf.chunks(stride)
                    .map(|c| c[..self.value_size as usize].to_vec())
                    .collect(),
            )),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(anyhow::anyhow!("reading a BPF map ({e})")),
        }
    }

    /// Every CPU's value of the u32 `key` of an array (a missing key reads as zeros).
    pub fn values(&self, key: u32) -> Result<Vec<Vec<u8>>> {
        Ok(self
            .lookup(&key.to_ne_bytes())?
            .unwrap_or_else(|| vec![vec![0; self.value_size as usize]; self.cpus]))
    }

    /// The u64 counter at the start of `key`'s value, summed over CPUs.
    pub fn sum_u64(&self, key: u32) -> Result<u64> {
        anyhow::ensure!(
            self.value_size >= 8,
            "a u64 read from a map of {}-byte values",
            self.value_size
        );
        Ok(self
            .values(key)?
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            .sum())
    }

    /// Set `key`'s value (the same on every CPU of a per-CPU map).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        anyhow::ensure!(
            key.len() == self.key_size as usize && value.len() == self.value_size as usize,
            "a key or value of the wrong size for this map"
        );
        let stride = self.stride();
        let mut buf = vec![0u8; stride * self.cpus];
        for c in buf.chunks_mut(stride) {
            c[..value.len()].copy_from_slice(value);
        }
        // SAFETY: the key has the map's key size and the buffer holds `cpus` values of
        // `stride` bytes, what the kernel reads for this map.
        unsafe { sys::update(self.fd.as_fd(), key, &buf, 0) }
            .map_err(|e| anyhow::anyhow!("writing a BPF map ({e})"))
    }
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
