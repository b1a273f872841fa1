//! One bandwidth case's samples: a sweep per worker over its region (or its view of the
//! shared one), all workers between one barrier and one stop flag, regions mapped afresh
//! every few samples; and the `isa`/`store` keys that say which kernel moved the bytes.

use std::hint::black_box;
use std::marker::PhantomData;

use anyhow::Result;

use costlab_core::measure::region::{PageKind, Region};
use costlab_core::measure::sampler::SAMPLES_PER_SETUP;
use costlab_core::measure::sizes::human_size;
use costlab_core::measure::{cpus, team_window};
use costlab_lab::Ctx;

use super::kernels::{self, Isa, Lanes, RAND_STEP};
use super::plan::{Op, Pattern};
use super::shared;

/// One worker's sweep over its region (or its view of the shared one). It borrows the region
/// (`'a`), so the address it keeps cannot outlive the mapping.
struct Sweep<'a> {
    base: *mut u8,
    region: PhantomData<&'a Region>,
    /// Several workers sweep this region at once: stores go through `shared`'s kernels.
    shared: bool,
    /// Bytes of the region the op covers: the whole block, or each half for the copies.
    span: usize,
    op: Op,
    pattern: Pattern,
    isa: Isa,
    chunk: usize,
    cursor: usize,
    rng: Lanes,
    sink: u64,
}

/// Largest power of two up to 256 KiB that divides `span`: one seq iteration moves this much,
/// so samples can be sized finely while the sweep still runs through the whole block.
fn seq_chunk(span: usize) -> usize {
    let mut c = 256 << 10;
    while c > 64 && !span.is_multiple_of(c) {
        c /= 2;
    }
    c.min(span)
}

/// Work per timed unit of a worker: about 1 MiB, so the clock read after each unit costs
/// well under 1% even in L1, while the stop flag is seen within a few microseconds.
const UNIT_BYTES: u64 = 1 << 20;

impl<'a> Sweep<'a> {
    fn new(
        region: &'a Region,
        shared: bool,
        op: Op,
        pattern: Pattern,
        isa: Isa,
        seed: u64,
    ) -> Sweep<'a> {
        let span = if op.is_copy() {
            region.len() / 2 / 64 * 64
        } else {
            region.len()
        };
        Sweep {
            base: region.raw(),
            region: PhantomData,
            shared,
            span,
            op,
            pattern,
            isa,
            // The C library gets the whole span in one call, as a program copying the block
            // would call it: the size decides which method it picks.
            chunk: if op.is_libc() { span } else { seq_chunk(span) },
            cursor: 0,
            rng: Lanes::new(seed),
            sink: 0,
        }
    }

    /// Bytes one iteration moves, counted as STREAM does (copy = read + write).
    fn bytes_per_iter(&self) -> u64 {
        let one = match self.pattern {
            Pattern::Seq => self.chunk,
            Pattern::Rand if self.op.is_libc() => self.chunk,
            Pattern::Rand => RAND_STEP * 64,
        } as u64;
        if self.op.is_copy() {
            2 * one
        } else {
            one
        }
    }

    /// Iterations per timed unit (see `UNIT_BYTES`).
    fn iters_per_unit(&self) -> u64 {
        UNIT_BYTES.div_ceil(self.bytes_per_iter()).max(1)
    }

    fn run(&mut self, iters: u64) {
        let (isa, base, span) = (self.isa, self.base, self.span);
        let lines = span / 64;
        let nt = self.op.is_nt();
        for _ in 0..iters {
            // SAFETY: base..base+span (and base+span..base+2*span for the copies'
            // destination) lies in the region this Sweep borrows, so it is mapped; chunk
            // divides span and every offset is a multiple of 64, so accesses are aligned and
            // in bounds. A region only this worker sweeps is touched by no other thread. A
            // shared one (several workers at once) is only loaded by read cases, and written
            // only through `shared`'s atomic kernels, whose contract (shared.rs) this keeps:
            // every store to it during a case is atomic, the copies' source half is never
            // written, and the C library is not called on it.
            unsafe {
                let p = base.add(self.cursor);
                match (self.pattern, self.op) {
                    (_, Op::Memcpy | Op::Memset) if self.shared => {
                        unreachable!("memcpy and memset are not run on a shared region")
                    }
                    (Pattern::Seq, Op::Write | Op::WriteNt) if self.shared => {
                        shared::write_seq(p, self.chunk, 0x3c)
                    }
                    (Pattern::Seq, Op::Copy | Op::CopyNt) if self.shared => {
                        shared::copy_seq(p.add(span), p, self.chunk)
                    }
                    (Pattern::Rand, Op::Write | Op::WriteNt) if self.shared => {
                        shared::write_rand(base, lines, RAND_STEP, &mut self.rng, 0x3c)
                    }
                    (Pattern::Rand, Op::Copy | Op::CopyNt) if self.shared => {
                        shared::copy_rand(base.add(span), base, lines, RAND_STEP, &mut self.rng)
                    }
                    // The library calls are sequential whatever the pattern (the plan never
                    // pairs them with rand).
                    (_, Op::Memcpy) => kernels::libc_memcpy(p.add(span), p, self.chunk),
                    (_, Op::Memset) => kernels::libc_memset(p, self.chunk, 0x3c),
                    (Pattern::Seq, Op::Read) => self.sink ^= kernels::read_seq(isa, p, self.chunk),
                    (Pattern::Seq, Op::Write | Op::WriteNt) => {
                        kernels::write_seq(isa, p, self.chunk, 0x3c, nt)
                    }
                    (Pattern::Seq, Op::Copy | Op::CopyNt) => {
                        kernels::copy_seq(isa, p.add(span), p, self.chunk, nt)
                    }
                    (Pattern::Rand, Op::Read) => {
                        self.sink ^= kernels::read_rand(isa, base, lines, RAND_STEP, &mut self.rng)
                    }
                    (Pattern::Rand, Op::Write | Op::WriteNt) => {
                        kernels::write_rand(isa, base, lines, RAND_STEP, &mut self.rng, 0x3c, nt)
                    }
                    (Pattern::Rand, Op::Copy | Op::CopyNt) => kernels::copy_rand(
                        isa,
                        base.add(span),
                        base,
                        lines,
                        RAND_STEP,
                        &mut self.rng,
                        nt,
                    ),
                }
            }
            if self.pattern == Pattern::Seq || self.op.is_libc() {
                self.cursor += self.chunk;
                if self.cursor >= span {
                    self.cursor = 0;
                }
            }
        }
        black_box(self.sink);
    }
}

/// The `isa` and `store` case keys: what produced a figure.
pub(super) fn kernel_keys(op: Op, isa: Isa, shared: bool) -> (&'static str, &'static str) {
    if shared && op != Op::Read {
        (shared::ISA_KEY, shared::STORE_KEY)
    } else if op.is_libc() {
        ("libc", "libc")
    } else if op == Op::Read {
        (isa.name(), "none")
    } else {
        (isa.name(), kernels::store_kind(isa, op.is_nt()))
    }
}

/// Map the regions of one case: one per worker, each first-touched by its worker's CPU, or
/// one shared region touched from the first worker's CPU.
pub(super) fn make_regions(
    cpu_list: &[usize],
    block: u64,
    kind: PageKind,
    shared: bool,
) -> Result<Vec<Region>> {
    let owners: &[usize] = if shared { &cpu_list[..1] } else { cpu_list };
    std::thread::scope(|s| {
        let handles: Vec<_> = owners
            .iter()
            .map(|&cpu| {
                s.spawn(move || -> Result<Region> {
                    cpus::pin_current(cpu)?;
                    Region::new(block, kind)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a mapping thread panicked")))
            })
            .collect()
    })
}

/// The samples of one case: GB/s each, and the mean share of a sample's span (first start to
/// last end) that was left out because not every thread was running.
#[derive(Default)]
pub(super) struct Measured {
    pub(super) gbs: Vec<f64>,
    pub(super) edges: Vec<f64>,
}

impl Measured {
    pub(super) fn edge(&self) -> f64 {
        self.edges.iter().sum::<f64>() / self.edges.len().max(1) as f64
    }
}

/// GB/s per sample of each of `cases` (op, pattern) over one block size and thread count, and
/// the worst huge-page fraction any mapping got (the lowest for a huge kind, the highest for
/// 4k). All threads leave one barrier and run until one stop flag; only bytes moved while all
/// of them ran are counted.
///
/// The regions are mapped afresh (`make`) every [`SAMPLES_PER_SETUP`] samples: in a VM a
/// mapping's bandwidth depends on how the host backs it, which one mapping's samples cannot
/// show and a rerun maps anew. Each mapping serves every case in turn, so the cases' samples
/// are interleaved in time (their ratios carry no drift between them) and a figure of 7
/// samples costs four mappings, not four per op.
pub(super) fn measure_cases(
    cpu_list: &[usize],
    make: &dyn Fn() -> Result<Vec<Region>>,
    shared: bool,
    cases: &[(Op, Pattern)],
    ctx: &Ctx,
    notes: &mut Vec<String>,
) -> Result<(Vec<Measured>, Option<f64>)> {
    let isa = Isa::detect();
    let total = ctx.spec.samples.max(1);
    let mut out: Vec<Measured> = cases.iter().map(|_| Measured::default()).collect();
    let mut huge: Option<f64> = None;
    let mut taken = 0;
    while taken < total {
        let regions = make()?;
        if taken == 0 {
            // The first mapping speaks for the notes; the conditions keep the worst of all.
            note_thp(&regions[0], notes);
        }
        let take = SAMPLES_PER_SETUP.min(total - taken);
        // Samples of at least 50 ms: a DRAM stream of 10 ms sees page-walk and refresh
        // hiccups as a spread of several percent, and the window trims a few microseconds at
        // each edge.
        let spec = costlab_core::measure::SampleSpec {
            min_sample: ctx
                .spec
                .min_sample
                .max(std::time::Duration::from_millis(50)),
            samples: take,
            ..ctx.spec.clone()
        };
        for (&(op, pattern), m) in cases.iter().zip(out.iter_mut()) {
            let probe = Sweep::new(&regions[0], shared, op, pattern, isa, 1);
            let unit_bytes = (probe.bytes_per_iter() * probe.iters_per_unit()) as f64;
            let samples = team_window(
                cpu_list,
                &spec,
                |i| {
                    let w = Sweep::new(
                        &regions[i.min(regions.len() - 1)],
                        shared,
                        op,
                        pattern,
                        isa,
                        0x9e37 + i as u64,
                    );
                    let k = w.iters_per_unit();
                    Ok((w, k))
                },
                |(w, k): &mut (Sweep, u64)| w.run(*k),
            )?;
            m.gbs.extend(samples.iter().map(|s| {
                costlab_core::measure::units::gb_per_s(s.total_units() * unit_bytes, s.window_ns)
            }));
            m.edges.extend(
                samples
                    .iter()
                    .map(|s| 1.0 - s.window_ns / s.span_ns.max(1.0)),
            );
        }
        for r in &regions {
            if let Some(f) = r.huge_fraction() {
                huge = Some(match huge {
                    None => f,
                    Some(old) if r.kind().is_huge() => old.min(f),
                    Some(old) => old.max(f),
                });
            }
        }
        taken += take;
    }
    Ok((out, huge))
}

/// Note when the kernel did not back a thp region with huge pages.
pub(super) fn note_thp(region: &Region, notes: &mut Vec<String>) {
    if region.kind() != PageKind::Thp || region.len() < 4 << 20 {
        return;
    }
    if let Some(f) = region.huge_fraction() {
        if f < 0.9 {
            let note = format!(
                "thp: the kernel backed only {:.0}% of a {} region with huge pages (see /sys/kernel/mm/transparent_hugepage/enabled and defrag); thp figures are partly 4k",
                f * 100.0,
                human_size(region.len() as u64)
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_chunks_divide_the_span() {
        assert_eq!(seq_chunk(1 << 30), 256 << 10);
        assert_eq!(seq_chunk(16 << 10), 16 << 10);
        assert_eq!(seq_chunk(12 << 10), 4 << 10);
        assert_eq!(seq_chunk(6 << 10), 2 << 10);
        for span in [4096usize, 6144, 12288, 1 << 20, 3 << 20] {
            let c = seq_chunk(span);
            assert_eq!(span % c, 0);
            assert_eq!(c % 64, 0);
        }
    }

    #[test]
    fn reference_sweeps_count_the_bytes_they_move() {
        let isa = Isa::detect();
        let block = 64u64 << 10;
        let mut r = Region::new(block, PageKind::Small).unwrap();
        for (i, b) in r.as_mut_slice()[..32 << 10].iter_mut().enumerate() {
            *b = (i % 249) as u8;
        }
        // memcpy: one call copies the whole first half onto the second; read + write counted.
        let mut w = Sweep::new(&r, false, Op::Memcpy, Pattern::Seq, isa, 1);
        assert_eq!(w.span, 32 << 10);
        assert_eq!(w.chunk, 32 << 10);
        assert_eq!(w.bytes_per_iter(), 64 << 10);
        assert_eq!(w.iters_per_unit(), 16);
        w.run(1);
        let s = r.as_slice();
        assert_eq!(&s[..32 << 10], &s[32 << 10..]);
        // memset: one call over the whole block, counted once.
        let mut w = Sweep::new(&r, false, Op::Memset, Pattern::Seq, isa, 1);
        assert_eq!(
            (w.span, w.chunk, w.bytes_per_iter()),
            (64 << 10, 64 << 10, 64 << 10)
        );
        w.run(3);
        assert!(r.as_slice().iter().all(|&b| b == 0x3c));
        // The library calls stay sequential even if asked for rand.
        let w = Sweep::new(&r, false, Op::Memcpy, Pattern::Rand, isa, 1);
        assert_eq!(w.bytes_per_iter(), 64 << 10);
        // costlab's copies: 256 KiB-or-smaller chunks of the half, read + write counted.
        let mut big = Region::new(1 << 20, PageKind::Small).unwrap();
        for (i, b) in big.as_mut_slice()[..512 << 10].iter_mut().enumerate() {
            *b = (i % 241) as u8;
        }
        let mut w = Sweep::new(&big, false, Op::CopyNt, Pattern::Seq, isa, 1);
        assert_eq!(
            (w.span, w.chunk, w.bytes_per_iter()),
            (512 << 10, 256 << 10, 512 << 10)
        );
        assert_eq!(w.iters_per_unit(), 2);
        w.run(2);
        let s = big.as_slice();
        assert_eq!(&s[..512 << 10], &s[512 << 10..]);
        let w = Sweep::new(&big, false, Op::Read, Pattern::Rand, isa, 1);
        assert_eq!(w.bytes_per_iter(), (RAND_STEP * 64) as u64);
        assert_eq!(kernel_keys(Op::Memcpy, isa, false), ("libc", "libc"));
        assert_eq!(kernel_keys(Op::Read, Isa::Avx2, false), ("AVX2", "none"));
        assert_eq!(
            kernel_keys(Op::CopyNt, Isa::Avx2, false),
            ("AVX2", "streaming")
        );
        assert_eq!(
            kernel_keys(Op::Copy, Isa::Avx512, false),
            ("AVX-512", "regular")
        );
        // A shared region is stored to atomically whatever the ISA; reads keep the SIMD loads.
        assert_eq!(
            kernel_keys(Op::WriteNt, Isa::Avx2, true),
            ("scalar", "atomic-relaxed")
        );
        assert_eq!(kernel_keys(Op::Read, Isa::Avx2, true), ("AVX2", "none"));
    }
}
