//! Memory regions backed by one kind of page, mapped with mmap and (by default) first-touched.
//! The one mapping every lab uses: the memory lab's kernels, the NUMA lab's placed regions.
//!
//! `4k` asks the kernel never to use transparent huge pages for the region, `thp` asks it to
//! (and aligns the region to 2 MiB so it can), `2m` and `1g` take pages from the hugetlb pools.
//! A region made with `untouched` or `system_default` has no page placed yet, so a policy
//! (mbind) set on it decides where its pages land.

use std::fmt;

use anyhow::Result;

use crate::error::usage;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

// MAP_HUGE_SHIFT is 26: the log2 of the page size goes in bits 26..31 of the flags.
const MAP_HUGE_2MB: libc::c_int = 21 << 26;
const MAP_HUGE_1GB: libc::c_int = 30 << 26;

/// What backs a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PageKind {
    Small,
    Thp,
    Huge2m,
    Huge1g,
}

impl PageKind {
    pub const ALL: [PageKind; 4] = [
        PageKind::Small,
        PageKind::Thp,
        PageKind::Huge2m,
        PageKind::Huge1g,
    ];

    /// The name used on the command line and in the JSON's "pages" key.
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Small => "4k",
            PageKind::Thp => "thp",
            PageKind::Huge2m => "2m",
            PageKind::Huge1g => "1g",
        }
    }

    pub fn parse(text: &str) -> Result<PageKind> {
        let t = text.trim().to_ascii_lowercase();
        PageKind::ALL
            .into_iter()
            .find(|k| k.name() == t)
            .ok_or_else(|| {
                usage(format!(
                    "unknown page kind '{text}': use 4k, thp, 2m or 1g (comma list: --pages 4k,thp)"
                ))
            })
    }

    /// The granule a block must be a multiple of: the page the kernel maps it with.
    /// (THP regions are mapped with 4 KiB granules and promoted where 2 MiB fits.)
    pub fn granule(self) -> u64 {
        match self {
            PageKind::Small | PageKind::Thp => 4 * KIB,
            PageKind::Huge2m => 2 * MIB,
            PageKind::Huge1g => GIB,
        }
    }

    /// The page size of a hugetlb pool this kind draws from, if any.
    pub fn pool_page(self) -> Option<u64> {
        match self {
            PageKind::Huge2m => Some(2 * MIB),
            PageKind::Huge1g => Some(GIB),
            _ => None,
        }
    }

    /// True for the kinds that map memory with pages larger than 4 KiB.
    pub fn is_huge(self) -> bool {
        self != PageKind::Small
    }

    /// The size of the pages that back the region once it is touched (THP: 2 MiB where the
    /// kernel could promote).
    pub fn page_bytes(self) -> u64 {
        match self {
            PageKind::Small => 4 * KIB,
            PageKind::Thp | PageKind::Huge2m => 2 * MIB,
            PageKind::Huge1g => GIB,
        }
    }
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An anonymous private mapping of `len` bytes, page aligned (2 MiB aligned for thp).
pub struct Region {
    base: *mut u8,
    map_len: usize,
    ptr: *mut u8,
    len: usize,
    kind: PageKind,
}

// SAFETY: a Region owns its mapping exclusively; the raw pointers are only an address range.
unsafe impl Send for Region {}
// SAFETY: shared access hands out `&[u8]` and, through `raw`, an address that only kernels
// use, whose callers state in their own SAFETY comments why their accesses are sound.
unsafe impl Sync for Region {}

impl Region {
    /// Map `len` bytes backed by `kind` pages and first-touch every page from the calling thread
    /// (so the kernel places it on this thread's NUMA node and no fault lands in a sample).
    pub fn new(len: u64, kind: PageKind) -> Result<Region> {
        let mut r = Region::map(len, kind, true)?;
        r.touch();
        Ok(r)
    }

    /// Map `len` bytes backed by `kind` pages, advised but not touched: no page is placed
    /// until the first write, so a memory policy set now decides where each page lands.
    pub fn untouched(len: u64, kind: PageKind) -> Result<Region> {
        Region::map(len, kind, true)
    }

    /// Map `len` bytes of 4 KiB-granule memory with no advice (the system's THP mode decides),
    /// not touched.
    pub fn system_default(len: u64) -> Result<Region> {
        Region::map(len, PageKind::Small, false)
    }

    fn map(len: u64, kind: PageKind, advise: bool) -> Result<Region> {
        if len == 0 {
            return Err(usage("a region must be above zero bytes"));
        }
        let len_us = usize::try_from(len).map_err(|_| usage("region too large"))?;
        // Hugetlb mappings must be a whole number of pages.
        let granule = kind.pool_page().unwrap_or(4 * KIB) as usize;
        let rounded = len_us.div_ceil(granule) * granule;
        let extra = if kind == PageKind::Thp {
            2 * MIB as usize
        } else {
            0
        };
        let map_len = rounded + extra;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        match kind {
            PageKind::Huge2m => flags |= libc::MAP_HUGETLB | MAP_HUGE_2MB,
            PageKind::Huge1g => flags |= libc::MAP_HUGETLB | MAP_HUGE_1GB,
            _ => {}
        }
        // SAFETY: an anonymous mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked against MAP_FAILED below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(map_error(kind, len, err));
        }
        let base = base.cast::<u8>();
        let ptr = if kind == PageKind::Thp {
            let align = 2 * MIB as usize;
            let addr = base as usize;
            let aligned = addr.div_ceil(align) * align;
            // SAFETY: aligned - addr < 2 MiB = extra, so ptr..ptr+rounded lies in the mapping.
            unsafe { base.add(aligned - addr) }
        } else {
            base
        };
        let advice = match kind {
            _ if !advise => None,
            PageKind::Small => Some(libc::MADV_NOHUGEPAGE),
            PageKind::Thp => Some(libc::MADV_HUGEPAGE),
            _ => None,
        };
        if let Some(advice) = advice {
            // SAFETY: the range lies inside the mapping just made. A kernel without THP
            // refuses the advice with EINVAL; the region is then plain 4 KiB pages, which
            // `huge_fraction` reports, so the result is ignored.
            unsafe {
                libc::madvise(ptr.cast(), rounded, advice);
            }
        }
        Ok(Region {
            base,
            map_len,
            ptr,
            len: len_us,
            kind,
        })
    }

    /// Write every page once so that every page is faulted in and backed by real memory
    /// (an untouched anonymous page reads from the shared zero page).
    fn touch(&mut self) {
        // SAFETY: ptr..ptr+len is inside the writable mapping this Region owns.
        unsafe { std::ptr::write_bytes(self.ptr, 0x5a, self.len) };
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn kind(&self) -> PageKind {
        self.kind
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The start as a raw pointer for kernels that several threads run over one region
    /// (`--shared`); they never form references into it.
    pub fn raw(&self) -> *mut u8 {
        self.ptr
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is readable for len bytes and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The region as 64-bit words (a trailing part word is left out).
    pub fn as_slice_u64(&self) -> &[u64] {
        // SAFETY: the start is page aligned (so u64 aligned), len / 8 words are readable and
        // live as long as self; anonymous memory reads as zeros before it is written.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u64>(), self.len / 8) }
    }

    pub fn as_mut_slice_u64(&mut self) -> &mut [u64] {
        // SAFETY: as above, and `&mut self` makes this the only view of the memory.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), self.len / 8) }
    }

    /// The region as 32-bit ints (a trailing part int is left out).
    pub fn as_mut_slice_u32(&mut self) -> &mut [u32] {
        // SAFETY: the start is page aligned (so u32 aligned), len / 4 ints are writable and
        // live as long as self, and `&mut self` makes this the only view of the memory.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u32>(), self.len / 4) }
    }

    /// Fraction of the region the kernel backs with huge pages, from /proc/self/smaps
    /// (AnonHugePages for THP; the hugetlb kinds are huge by construction).
    pub fn huge_fraction(&self) -> Option<f64> {
        match self.kind {
            PageKind::Huge2m | PageKind::Huge1g => Some(1.0),
            PageKind::Small | PageKind::Thp => {
                let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
                let kb = anon_huge_kb(&text, self.ptr as usize)?;
                Some((kb * 1024) as f64 / self.len as f64)
            }
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned; nothing borrows the region
        // once it drops.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// The AnonHugePages (kB) of the smaps entry whose range contains `addr`.
pub fn anon_huge_kb(smaps: &str, addr: usize) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a <= addr && addr < b;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                return rest.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}

fn map_error(kind: PageKind, len: u64, err: std::io::Error) -> anyhow::Error {
    let size = crate::measure::sizes::format_size(len);
    match (kind.pool_page(), err.raw_os_error()) {
        (Some(page), Some(libc::ENOMEM)) => usage(format!(
            "{kind} pages: the {} hugepage pool has too few free pages for {size}; {}",
            crate::measure::sizes::human_size(page),
            super::hugepool::fix_hint(page, len.div_ceil(page))
        )),
        (Some(_), Some(libc::EPERM | libc::EACCES)) => usage(format!(
            "{kind} pages: no permission to map hugetlb pages ({err}); run as root or add your group to /proc/sys/vm/hugetlb_shm_group"
        )),
        (Some(page), Some(libc::EINVAL)) => usage(format!(
            "{kind} pages: this kernel has no {} hugepage support ({err}); use --pages 4k or thp",
            crate::measure::sizes::human_size(page)
        )),
        _ => usage(format!(
            "cannot map {size} of {kind} pages: {err}; use smaller --sizes or fewer --threads"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_name() {
        for k in PageKind::ALL {
            assert_eq!(PageKind::parse(k.name()).unwrap(), k);
        }
        assert_eq!(PageKind::parse("THP").unwrap(), PageKind::Thp);
        let e = PageKind::parse("3m").unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
    }

    #[test]
    fn regions_are_touched_aligned_and_writable() {
        let mut r = Region::new(64 * KIB, PageKind::Small).unwrap();
        assert_eq!(r.len(), 64 * KIB as usize);
        assert!(r.as_slice().iter().all(|&b| b == 0x5a));
        r.as_mut_slice()[100] = 7;
        assert_eq!(r.as_slice()[100], 7);
        let t = Region::new(3 * MIB, PageKind::Thp).unwrap();
        assert_eq!(t.as_ptr() as usize % (2 * MIB as usize), 0);
        assert!(t.huge_fraction().is_some());
    }

    #[test]
    fn smaps_parsing_finds_the_mapping() {
        let smaps = "7f0000000000-7f0000400000 rw-p 00000000 00:00 0\nSize: 4096 kB\nAnonHugePages:      2048 kB\n7f0000400000-7f0000800000 rw-p 00000000 00:00 0\nAnonHugePages:         0 kB\n";
        assert_eq!(anon_huge_kb(smaps, 0x7f0000200000), Some(2048));
        assert_eq!(anon_huge_kb(smaps, 0x7f0000400000), Some(0));
        assert_eq!(anon_huge_kb(smaps, 0x100), None);
    }
}
