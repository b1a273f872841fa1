//! The bandwidth kernels: read, write, write-nt, copy and copy-nt over whole 64-byte lines,
//! in sequence or at random lines, with the widest SIMD this CPU has (chosen at run time);
//! and the C library's memcpy and memset, called as they are, as the reference beside them.
//!
//! Random access draws 8 line indices per step from 8 independent xorshift lanes, so 8 loads
//! (or stores) are in flight at once and the cost of drawing an index is a few ALU operations
//! per 64-byte line, never a library call per 8 bytes.
//!
//! All kernels work on raw pointers because with `--shared` several threads sweep one region.
//! Callers guarantee: pointers 64-byte aligned, lengths multiples of 64, ranges inside live
//! mappings.

use std::sync::OnceLock;

use costlab_core::measure::cycle;

/// The instruction set the kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2,
    Sse2,
    Scalar,
}

impl Isa {
    /// The widest the CPU supports, detected once.
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx512f") {
                    return Isa::Avx512;
                }
                if std::is_x86_feature_detected!("avx2") {
                    return Isa::Avx2;
                }
                Isa::Sse2
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                Isa::Scalar
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2 => "AVX2",
            Isa::Sse2 => "SSE2",
            Isa::Scalar => "scalar",
        }
    }

    /// Every ISA this CPU can run (for tests that check each kernel family).
    pub fn available() -> Vec<Isa> {
        let mut v = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            v.push(Isa::Sse2);
            if std::is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
            if std::is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
        }
        v
    }
}

/// Eight independent xorshift64 generators: one random line index each per step.
#[derive(Debug, Clone)]
pub struct Lanes {
    s: [u64; 8],
}

impl Lanes {
    pub fn new(seed: u64) -> Lanes {
        let mut z = seed;
        let mut s = [0u64; 8];
        for lane in &mut s {
            *lane = cycle::splitmix(&mut z) | 1;
        }
        Lanes { s }
    }

    /// Eight line indices in 0..lines (Lemire's multiply-shift maps a 64-bit draw to a range).
    #[inline(always)]
    pub fn next8(&mut self, lines: usize) -> [usize; 8] {
        let mut out = [0usize; 8];
        for (x, o) in self.s.iter_mut().zip(out.iter_mut()) {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *o = ((u128::from(*x) * lines as u128) >> 64) as usize;
        }
        out
    }
}

/// Accesses per random-pattern step of work (a multiple of 8).
pub const RAND_STEP: usize = 4096;

#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernels {
    ($m:ident, $feat:literal, $v:ty, $w:literal, $zero:ident, $set1:ident, $load:ident, $store:ident, $stream:ident, $xor:ident) => {
        pub(super) mod $m {
            use super::Lanes;
            use core::arch::x86_64::*;
            const PER: usize = 64 / $w;

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn load_line(p: *const u8, acc: $v) -> $v {
                let mut a = acc;
                for j in 0..PER {
                    a = $xor(a, $load(p.add(j * $w).cast()));
                }
                a
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn store_line(p: *mut u8, v: $v) {
                for j in 0..PER {
                    $store(p.add(j * $w).cast(), v);
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn stream_line(p: *mut u8, v: $v) {
                for j in 0..PER {
                    $stream(p.add(j * $w).cast(), v);
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn copy_line(d: *mut u8, s: *const u8) {
                for j in 0..PER {
                    $store(d.add(j * $w).cast(), $load(s.add(j * $w).cast()));
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fold(acc: [$v; 4]) -> u64 {
                let mut x = 0u64;
                for a in acc {
                    let words: [u64; $w / 8] = core::mem::transmute(a);
                    for w in words {
                        x ^= w;
                    }
                }
                x
            }

            /// Four 4 KiB pages at a time, one line of each per step, each page's next lines
            /// prefetched: four streams in flight, as the copy reads (see `copy_pages`). One
            /// accumulator per page: the xor chains do not serialise the loads. The rest
            /// (under 16 KiB) goes line after line.
            #[target_feature(enable = $feat)]
            pub unsafe fn read_seq(p: *const u8, len: usize) -> u64 {
                const PAGE: usize = 4096;
                let mut acc = [$zero(); 4];
                let mut base = 0;
                while base + 4 * PAGE <= len {
                    let mut o = 0;
                    while o < PAGE {
                        for (k, a) in acc.iter_mut().enumerate() {
                            let src = p.add(base + k * PAGE + o);
                            // Never faults, even past the end of the mapping.
                            _mm_prefetch::<_MM_HINT_T0>(src.add(128).cast());
                            *a = load_line(src, *a);
                        }
                        o += 64;
                    }
                    base += 4 * PAGE;
                }
                let mut off = base;
                while off + 256 <= len {
                    acc[0] = load_line(p.add(off), acc[0]);
                    acc[1] = load_line(p.add(off + 64), acc[1]);
                    acc[2] = load_line(p.add(off + 128), acc[2]);
                    acc[3] = load_line(p.add(off + 192), acc[3]);
                    off += 256;
                }
                while off < len {
                    acc[0] = load_line(p.add(off), acc[0]);
                    off += 64;
                }
                fold(acc)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn write_seq(p: *mut u8, len: usize, value: u8) {
                let v = $set1(value as i8);
                let mut off = 0;
                while off + 256 <= len {
                    for k in 0..4 {
                        store_line(p.add(off + k * 64), v);
                    }
                    off += 256;
                }
                while off < len {
                    store_line(p.add(off), v);
                    off += 64;
                }
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn write_nt_seq(p: *mut u8, len: usize, value: u8) {
                let v = $set1(value as i8);
                let mut off = 0;
                while off + 256 <= len {
                    for k in 0..4 {
                        stream_line(p.add(off + k * 64), v);
                    }
                    off += 256;
                }
                while off < len {
                    stream_line(p.add(off), v);
                    off += 64;
                }
                // Streaming stores are weakly ordered: fence so the sample ends after them.
                _mm_sfence();
            }

            /// Four lines a step: all loads of the step first, then all stores, so the loads
            /// of one step are in flight together and no store waits behind a load.
            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn copy_lines<const NT: bool>(d: *mut u8, s: *const u8, len: usize) {
                const V: usize = 256 / $w;
                let mut off = 0;
                while off + 256 <= len {
                    let mut r = [$zero(); V];
                    for (j, x) in r.iter_mut().enumerate() {
                        *x = $load(s.add(off + j * $w).cast());
                    }
                    // By reference: `into_iter` on the array made LLVM spill it and call
                    // memcpy for every step of the regular-store copy.
                    for (j, &x) in r.iter().enumerate() {
                        if NT {
                            $stream(d.add(off + j * $w).cast(), x);
                        } else {
                            $store(d.add(off + j * $w).cast(), x);
                        }
                    }
                    off += 256;
                }
                while off < len {
                    if NT {
                        copy_line_nt(d.add(off), s.add(off));
                    } else {
                        copy_line(d.add(off), s.add(off));
                    }
                    off += 64;
                }
                if NT {
                    // Streaming stores are weakly ordered: fence so the sample ends after them.
                    _mm_sfence();
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn copy_line_nt(d: *mut u8, s: *const u8) {
                for j in 0..PER {
                    $stream(d.add(j * $w).cast(), $load(s.add(j * $w).cast()));
                }
            }

            /// Four 4 KiB pages at a time, one line of each per step (loads, then stores),
            /// each page's next lines prefetched: four streams in flight instead of one. This
            /// is how glibc's memcpy copies above its non-temporal threshold; a straight
            /// line-after-line loop reached about 0.8x of it here (AVX2, Zen 3), with
            /// streaming and with regular stores alike. The rest (under 16 KiB) goes line
            /// after line.
            // PER is 1 for AVX-512, where `k % PER` is always 0: the same code serves all widths.
            #[allow(clippy::modulo_one)]
            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn copy_pages<const NT: bool>(d: *mut u8, s: *const u8, len: usize) {
                const V: usize = 256 / $w;
                const PAGE: usize = 4096;
                let mut base = 0;
                while base + 4 * PAGE <= len {
                    let mut o = 0;
                    while o < PAGE {
                        let mut r = [$zero(); V];
                        for (k, x) in r.iter_mut().enumerate() {
                            let src = s.add(base + (k / PER) * PAGE + o);
                            if k % PER == 0 {
                                // Never faults, even past the end of the mapping.
                                _mm_prefetch::<_MM_HINT_T0>(src.add(128).cast());
                            }
                            *x = $load(src.add((k % PER) * $w).cast());
                        }
                        for (k, &x) in r.iter().enumerate() {
                            let dst = d.add(base + (k / PER) * PAGE + o + (k % PER) * $w);
                            if NT {
                                $stream(dst.cast(), x);
                            } else {
                                $store(dst.cast(), x);
                            }
                        }
                        o += 64;
                    }
                    base += 4 * PAGE;
                }
                // The tail, and the fence after streaming stores.
                copy_lines::<NT>(d.add(base), s.add(base), len - base)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn copy_seq(d: *mut u8, s: *const u8, len: usize) {
                copy_pages::<false>(d, s, len)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn copy_nt_seq(d: *mut u8, s: *const u8, len: usize) {
                copy_pages::<true>(d, s, len)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn read_rand(
                p: *const u8,
                lines: usize,
                count: usize,
                rng: &mut Lanes,
            ) -> u64 {
                let mut acc = [$zero(); 4];
                let mut done = 0;
                while done < count {
                    let idx = rng.next8(lines);
                    for (k, i) in idx.into_iter().enumerate() {
                        acc[k & 3] = load_line(p.add(i * 64), acc[k & 3]);
                    }
                    done += 8;
                }
                fold(acc)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn write_rand(
                p: *mut u8,
                lines: usize,
                count: usize,
                rng: &mut Lanes,
                value: u8,
                nt: bool,
            ) {
                let v = $set1(value as i8);
                let mut done = 0;
                while done < count {
                    let idx = rng.next8(lines);
                    for i in idx {
                        if nt {
                            stream_line(p.add(i * 64), v);
                        } else {
                            store_line(p.add(i * 64), v);
                        }
                    }
                    done += 8;
                }
                if nt {
                    _mm_sfence();
                }
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn copy_rand(
                d: *mut u8,
                s: *const u8,
                lines: usize,
                count: usize,
                rng: &mut Lanes,
                nt: bool,
            ) {
                let mut done = 0;
                while done < count {
                    let from = rng.next8(lines);
                    let to = rng.next8(lines);
                    for k in 0..8 {
                        if nt {
                            copy_line_nt(d.add(to[k] * 64), s.add(from[k] * 64));
                        } else {
                            copy_line(d.add(to[k] * 64), s.add(from[k] * 64));
                        }
                    }
                    done += 8;
                }
                if nt {
                    _mm_sfence();
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
simd_kernels!(
    avx512,
    "avx512f",
    __m512i,
    64,
    _mm512_setzero_si512,
    _mm512_set1_epi8,
    _mm512_load_si512,
    _mm512_store_si512,
    _mm512_stream_si512,
    _mm512_xor_si512
);
#[cfg(target_arch = "x86_64")]
simd_kernels!(
    avx2,
    "avx2",
    __m256i,
    32,
    _mm256_setzero_si256,
    _mm256_set1_epi8,
    _mm256_load_si256,
    _mm256_store_si256,
    _mm256_stream_si256,
    _mm256_xor_si256
);
#[cfg(target_arch = "x86_64")]
simd_kernels!(
    sse2,
    "sse2",
    __m128i,
    16,
    _mm_setzero_si128,
    _mm_set1_epi8,
    _mm_load_si128,
    _mm_store_si128,
    _mm_stream_si128,
    _mm_xor_si128
);

/// Plain 8-byte loads and stores, for CPUs without the SIMD above.
mod scalar {
    use super::Lanes;

    #[inline(always)]
    unsafe fn load_line(p: *const u8) -> u64 {
        let q = p.cast::<u64>();
        let mut x = 0;
        for j in 0..8 {
            x ^= q.add(j).read();
        }
        x
    }

    #[inline(always)]
    unsafe fn store_line(p: *mut u8, v: u64) {
        let q = p.cast::<u64>();
        for j in 0..8 {
            q.add(j).write(v);
        }
    }

    pub unsafe fn read_seq(p: *const u8, len: usize) -> u64 {
        let mut x = 0;
        let mut off = 0;
        while off < len {
            x ^= load_line(p.add(off));
            off += 64;
        }
        x
    }

    pub unsafe fn write_seq(p: *mut u8, len: usize, value: u8) {
        let v = u64::from_ne_bytes([value; 8]);
        let mut off = 0;
        while off < len {
            store_line(p.add(off), v);
            off += 64;
        }
    }

    pub unsafe fn copy_seq(d: *mut u8, s: *const u8, len: usize) {
        std::ptr::copy_nonoverlapping(s, d, len);
    }

    pub unsafe fn read_rand(p: *const u8, lines: usize, count: usize, rng: &mut Lanes) -> u64 {
        let mut x = 0;
        let mut done = 0;
        while done < count {
            for i in rng.next8(lines) {
                x ^= load_line(p.add(i * 64));
            }
            done += 8;
        }
        x
    }

    pub unsafe fn write_rand(p: *mut u8, lines: usize, count: usize, rng: &mut Lanes, value: u8) {
        let v = u64::from_ne_bytes([value; 8]);
        let mut done = 0;
        while done < count {
            for i in rng.next8(lines) {
                store_line(p.add(i * 64), v);
            }
            done += 8;
        }
    }

    pub unsafe fn copy_rand(d: *mut u8, s: *const u8, lines: usize, count: usize, rng: &mut Lanes) {
        let mut done = 0;
        while done < count {
            let from = rng.next8(lines);
            let to = rng.next8(lines);
            for k in 0..8 {
                std::ptr::copy_nonoverlapping(s.add(from[k] * 64), d.add(to[k] * 64), 64);
            }
            done += 8;
        }
    }
}

/// Read `len` bytes from `p`; returns a fold of what was read (pass it to `black_box`).
///
/// # Safety
/// `p` is 64-byte aligned, `len` a multiple of 64, `p..p+len` readable; `isa` is supported.
pub unsafe fn read_seq(isa: Isa, p: *const u8, len: usize) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::read_seq(p, len),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::read_seq(p, len),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => sse2::read_seq(p, len),
        _ => scalar::read_seq(p, len),
    }
}

/// Write `value` to every byte of `p..p+len`; `nt` uses streaming (non-temporal) stores.
///
/// # Safety
/// As `read_seq`, and the range is writable.
pub unsafe fn write_seq(isa: Isa, p: *mut u8, len: usize, value: u8, nt: bool) {
    match (isa, nt) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, false) => avx512::write_seq(p, len, value),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, true) => avx512::write_nt_seq(p, len, value),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, false) => avx2::write_seq(p, len, value),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, true) => avx2::write_nt_seq(p, len, value),
        #[cfg(target_arch = "x86_64")]
        (Isa::Sse2, false) => sse2::write_seq(p, len, value),
        #[cfg(target_arch = "x86_64")]
        (Isa::Sse2, true) => sse2::write_nt_seq(p, len, value),
        _ => scalar::write_seq(p, len, value),
    }
}

/// Copy `len` bytes from `s` to `d` (the ranges do not overlap); `nt` uses streaming stores,
/// which skip the read of each destination line that a regular store makes first.
///
/// # Safety
/// As `read_seq` for `s`, `write_seq` for `d`.
pub unsafe fn copy_seq(isa: Isa, d: *mut u8, s: *const u8, len: usize, nt: bool) {
    match (isa, nt) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, false) => avx512::copy_seq(d, s, len),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, true) => avx512::copy_nt_seq(d, s, len),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, false) => avx2::copy_seq(d, s, len),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, true) => avx2::copy_nt_seq(d, s, len),
        #[cfg(target_arch = "x86_64")]
        (Isa::Sse2, false) => sse2::copy_seq(d, s, len),
        #[cfg(target_arch = "x86_64")]
        (Isa::Sse2, true) => sse2::copy_nt_seq(d, s, len),
        _ => scalar::copy_seq(d, s, len),
    }
}

/// The store kind a kernel of this ISA really uses: scalar code has no streaming stores.
pub fn store_kind(isa: Isa, nt: bool) -> &'static str {
    if nt && isa != Isa::Scalar {
        "streaming"
    } else {
        "regular"
    }
}

/// The C library's memcpy of `len` bytes from `s` to `d`, in one call: the library picks its
/// own method for the size (on glibc: vector loops, `rep movsb`, or streaming stores above
/// its non-temporal threshold).
///
/// # Safety
/// `s..s+len` readable, `d..d+len` writable, the ranges do not overlap.
pub unsafe fn libc_memcpy(d: *mut u8, s: *const u8, len: usize) {
    libc::memcpy(d.cast(), s.cast(), len);
}

/// The C library's memset of `len` bytes at `p` to `value`, in one call.
///
/// # Safety
/// `p..p+len` writable.
pub unsafe fn libc_memset(p: *mut u8, len: usize, value: u8) {
    libc::memset(p.cast(), i32::from(value), len);
}

/// Read `count` random whole lines of the `lines` lines at `p`.
///
/// # Safety
/// `p` is 64-byte aligned and `p..p+lines*64` readable; `count` a multiple of 8.
pub unsafe fn read_rand(
    isa: Isa,
    p: *const u8,
    lines: usize,
    count: usize,
    rng: &mut Lanes,
) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::read_rand(p, lines, count, rng),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::read_rand(p, lines, count, rng),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => sse2::read_rand(p, lines, count, rng),
        _ => scalar::read_rand(p, lines, count, rng),
    }
}

/// Write `count` random whole lines.
///
/// # Safety
/// As `read_rand`, and the range is writable.
pub unsafe fn write_rand(
    isa: Isa,
    p: *mut u8,
    lines: usize,
    count: usize,
    rng: &mut Lanes,
    value: u8,
    nt: bool,
) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::write_rand(p, lines, count, rng, value, nt),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::write_rand(p, lines, count, rng, value, nt),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => sse2::write_rand(p, lines, count, rng, value, nt),
        _ => scalar::write_rand(p, lines, count, rng, value),
    }
}

/// Copy `count` random lines of `s` to random lines of `d` (both `lines` lines long); `nt`
/// uses streaming stores.
///
/// # Safety
/// As `read_rand` for `s` and `write_rand` for `d`; the ranges do not overlap.
pub unsafe fn copy_rand(
    isa: Isa,
    d: *mut u8,
    s: *const u8,
    lines: usize,
    count: usize,
    rng: &mut Lanes,
    nt: bool,
) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::copy_rand(d, s, lines, count, rng, nt),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::copy_rand(d, s, lines, count, rng, nt),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => sse2::copy_rand(d, s, lines, count, rng, nt),
        _ => scalar::copy_rand(d, s, lines, count, rng),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::measure::region::{PageKind, Region};

    fn region(len: u64) -> Region {
        Region::new(len, PageKind::Small).unwrap()
    }

    fn xor_fold(bytes: &[u8]) -> u64 {
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .fold(0, |a, b| a ^ b)
    }

    #[test]
    fn write_writes_every_byte_and_read_reads_them() {
        for isa in Isa::available() {
            for nt in [false, true] {
                let mut r = region(8192 + 4096);
                let len = r.len();
                // SAFETY: the region is aligned, a multiple of 64 and ours.
                unsafe { write_seq(isa, r.as_mut_ptr(), len - 64, 0xab, nt) };
                let s = r.as_slice();
                assert!(s[..len - 64].iter().all(|&b| b == 0xab), "{isa:?} nt={nt}");
                assert!(
                    s[len - 64..].iter().all(|&b| b == 0x5a),
                    "{isa:?} wrote past the end"
                );
            }
            // Under one step of four pages, and over two steps with a tail of pages and
            // of lines: both the page-stream loop and the line-after-line rest are read.
            for size in [4096, 3 * 16384 + 4096] {
                let mut r = region(size as u64);
                for (i, b) in r.as_mut_slice().iter_mut().enumerate() {
                    *b = (i * 7 % 251) as u8;
                }
                let len = size - 64 * 3;
                // SAFETY: as above.
                let got = unsafe { read_seq(isa, r.as_ptr(), len) };
                assert_eq!(got, xor_fold(&r.as_slice()[..len]), "{isa:?} {size}");
            }
        }
    }

    #[test]
    fn copy_copies() {
        for isa in Isa::available() {
            for nt in [false, true] {
                // Three 16 KiB groups of four pages, then 8192 + 192 bytes: whole 256-byte
                // steps and a tail of three lines.
                let n = 3 * 16384 + 8192 + 192;
                let half = 64 << 10;
                let mut r = region(2 * half as u64);
                for (i, b) in r.as_mut_slice()[..n].iter_mut().enumerate() {
                    *b = (i % 253) as u8;
                }
                let p = r.as_mut_ptr();
                // SAFETY: the two ranges do not overlap and both lie in the region.
                unsafe { copy_seq(isa, p.add(half), p, n, nt) };
                let s = r.as_slice();
                assert_eq!(&s[..n], &s[half..half + n], "{isa:?} nt={nt}");
                assert!(
                    s[half + n..].iter().all(|&b| b == 0x5a),
                    "{isa:?} nt={nt} wrote past the end"
                );
            }
        }
    }

    #[test]
    fn libc_references_copy_and_set_exactly_their_range() {
        let mut r = region(3 * 4096);
        for (i, b) in r.as_mut_slice()[..4096].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let p = r.as_mut_ptr();
        // SAFETY: the first and second pages do not overlap.
        unsafe { libc_memcpy(p.add(4096), p, 4096 - 64) };
        let s = r.as_slice();
        assert_eq!(&s[..4096 - 64], &s[4096..2 * 4096 - 64]);
        assert!(s[2 * 4096 - 64..].iter().all(|&b| b == 0x5a));
        // SAFETY: the third page is ours.
        unsafe { libc_memset(p.add(2 * 4096), 4096 - 128, 0x3c) };
        let s = r.as_slice();
        assert!(s[2 * 4096..3 * 4096 - 128].iter().all(|&b| b == 0x3c));
        assert!(s[3 * 4096 - 128..].iter().all(|&b| b == 0x5a));
        assert_eq!(store_kind(Isa::Scalar, true), "regular");
        assert_eq!(store_kind(Isa::Sse2, true), "streaming");
        assert_eq!(store_kind(Isa::Avx2, false), "regular");
    }

    #[test]
    fn random_kernels_touch_whole_lines_inside_the_range() {
        for isa in Isa::available() {
            let mut r = region(4096 * 3);
            let p = r.as_mut_ptr();
            let mut rng = Lanes::new(7);
            // Lines of the middle page only.
            // SAFETY: 64 lines from p+4096 lie in the region.
            unsafe { write_rand(isa, p.add(4096), 64, 4096, &mut rng, 0x11, false) };
            let s = r.as_slice();
            assert!(s[..4096].iter().all(|&b| b == 0x5a), "{isa:?} before");
            assert!(s[8192..].iter().all(|&b| b == 0x5a), "{isa:?} after");
            // 4096 draws over 64 lines touch every line with near certainty; each line is
            // written whole or not at all.
            for line in s[4096..8192].chunks(64) {
                assert!(line.iter().all(|&b| b == line[0]), "{isa:?} partial line");
                assert_eq!(line[0], 0x11, "{isa:?}");
            }
            // SAFETY: as above.
            let x = unsafe { read_rand(isa, p.add(4096), 64, 4096, &mut rng) };
            assert_eq!(x, 0, "{isa:?}: an even number of equal lines folds to zero");
            // SAFETY: the first and last page do not overlap.
            unsafe { copy_rand(isa, p.add(8192), p.add(4096), 64, 4096, &mut rng, false) };
            assert!(
                r.as_slice()[8192..].iter().all(|&b| b == 0x11),
                "{isa:?} copy"
            );
            // SAFETY: as above.
            unsafe { write_rand(isa, p.add(4096), 64, 4096, &mut rng, 0x22, false) };
            // SAFETY: as above.
            unsafe { copy_rand(isa, p.add(8192), p.add(4096), 64, 4096, &mut rng, true) };
            assert!(
                r.as_slice()[8192..].iter().all(|&b| b == 0x22),
                "{isa:?} copy-nt"
            );
        }
    }

    #[test]
    fn lanes_stay_in_range() {
        let mut l = Lanes::new(1);
        for _ in 0..1000 {
            assert!(l.next8(3).iter().all(|&i| i < 3));
        }
    }
}
