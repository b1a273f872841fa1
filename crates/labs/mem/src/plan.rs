//! From command-line arguments to a validated plan: every op, pattern, page kind, size and
//! thread count checked before anything is mapped or measured.

use std::fmt;

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::measure::cpus;
use costlab_core::measure::region::PageKind;
use costlab_core::measure::sizes::{format_size, parse_list, parse_size_list};

/// What a bandwidth kernel does to each line. `Memcpy` and `Memset` are the C library's own,
/// measured beside costlab's kernels as their reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    WriteNt,
    Copy,
    CopyNt,
    Memcpy,
    Memset,
}

impl Op {
    pub const ALL: [Op; 7] = [
        Op::Read,
        Op::Write,
        Op::WriteNt,
        Op::Copy,
        Op::CopyNt,
        Op::Memcpy,
        Op::Memset,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::WriteNt => "write-nt",
            Op::Copy => "copy",
            Op::CopyNt => "copy-nt",
            Op::Memcpy => "memcpy",
            Op::Memset => "memset",
        }
    }

    pub fn parse(text: &str) -> Result<Op> {
        let t = text.trim().to_ascii_lowercase();
        Op::ALL.into_iter().find(|o| o.name() == t).ok_or_else(|| {
            usage(format!(
                "unknown op '{text}': use read, write, write-nt, copy, copy-nt, memcpy or memset (comma list: --case read,copy)"
            ))
        })
    }

    /// Ops that copy one half of the block onto the other: each byte is read once and written
    /// once, and both are counted (as STREAM counts copy).
    pub fn is_copy(self) -> bool {
        matches!(self, Op::Copy | Op::CopyNt | Op::Memcpy)
    }

    /// The C library's functions, the reference cases.
    pub fn is_libc(self) -> bool {
        matches!(self, Op::Memcpy | Op::Memset)
    }

    /// Streaming (non-temporal) stores.
    pub fn is_nt(self) -> bool {
        matches!(self, Op::WriteNt | Op::CopyNt)
    }

    /// The C library's function this op is compared with in the tables.
    pub fn reference(self) -> Option<Op> {
        match self {
            Op::Copy | Op::CopyNt => Some(Op::Memcpy),
            Op::Write | Op::WriteNt => Some(Op::Memset),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The order lines are visited in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Seq,
    Rand,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Seq => "seq",
            Pattern::Rand => "rand",
        }
    }

    pub fn parse(text: &str) -> Result<Pattern> {
        match text.trim().to_ascii_lowercase().as_str() {
            "seq" => Ok(Pattern::Seq),
            "rand" | "rnd" => Ok(Pattern::Rand),
            _ => Err(usage(format!(
                "unknown pattern '{text}': use seq or rand (comma list: --pattern seq,rand)"
            ))),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Smallest block and chase size: one base page.
pub const MIN_SIZE: u64 = 4096;

/// Parse a `--pages` list, without repeats.
pub fn parse_pages(text: &str) -> Result<Vec<PageKind>> {
    let mut v = parse_list(text, PageKind::parse)?;
    dedup_keep_order(&mut v);
    Ok(v)
}

fn dedup_keep_order<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v.iter() {
        if !out.contains(x) {
            out.push(*x);
        }
    }
    *v = out;
}

/// A bandwidth sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthPlan {
    pub ops: Vec<Op>,
    pub patterns: Vec<Pattern>,
    pub blocks: Vec<u64>,
    pub threads: Vec<usize>,
    pub pages: Vec<PageKind>,
    pub shared: bool,
    pub reserve: bool,
}

/// The text of a bandwidth command's options.
#[derive(Debug, Clone)]
pub struct BandwidthText<'a> {
    pub op: &'a str,
    pub pattern: &'a str,
    pub block: &'a str,
    pub threads: &'a str,
    pub pages: &'a str,
    pub shared: bool,
    pub oversubscribe: bool,
    pub reserve: bool,
}

impl BandwidthPlan {
    /// Parse and check. `cpus` is how many CPUs this process may use.
    pub fn parse(t: &BandwidthText, cpus: usize) -> Result<BandwidthPlan> {
        let mut ops = parse_list(t.op, Op::parse)?;
        dedup_keep_order(&mut ops);
        let mut patterns = parse_list(t.pattern, Pattern::parse)?;
        dedup_keep_order(&mut patterns);
        let mut blocks = parse_size_list(t.block)?;
        dedup_keep_order(&mut blocks);
        let mut threads = cpus::parse_threads(t.threads)?;
        dedup_keep_order(&mut threads);
        let pages = parse_pages(t.pages)?;
        cpus::check_threads(&threads, cpus, t.oversubscribe)?;
        for &b in &blocks {
            check_block(b, &pages)?;
        }
        if t.shared && ops.iter().all(|o| o.is_libc()) {
            return Err(usage(
                "memcpy and memset are not run on a --shared region (the C library's stores from several threads to the same bytes would be a data race): drop --shared or add another op to --case".to_string(),
            ));
        }
        if ops.iter().all(|o| o.is_libc()) && !patterns.contains(&Pattern::Seq) {
            return Err(usage(
                "memcpy and memset are sequential only: add --pattern seq".to_string(),
            ));
        }
        Ok(BandwidthPlan {
            ops,
            patterns,
            blocks,
            threads,
            pages,
            shared: t.shared,
            reserve: t.reserve,
        })
    }

    /// Pages each hugetlb kind needs at the largest point of the sweep (regions of one case
    /// are freed before the next is mapped).
    pub fn pool_needs(&self) -> Vec<(PageKind, u64)> {
        let max_threads = self.threads.iter().copied().max().unwrap_or(1) as u64;
        let regions = if self.shared { 1 } else { max_threads };
        self.pages
            .iter()
            .filter_map(|&k| {
                let page = k.pool_page()?;
                let per = self
                    .blocks
                    .iter()
                    .map(|b| b.div_ceil(page))
                    .max()
                    .unwrap_or(0);
                Some((k, per * regions))
            })
            .collect()
    }

    /// Cases measured: the C library's functions are sequential only.
    pub fn cases(&self) -> usize {
        // memcpy and memset run on sequential, unshared regions only.
        let seq = usize::from(self.patterns.contains(&Pattern::Seq) && !self.shared);
        let per_block: usize = self
            .ops
            .iter()
            .map(|o| {
                if o.is_libc() {
                    seq
                } else {
                    self.patterns.len()
                }
            })
            .sum();
        per_block * self.blocks.len() * self.threads.len() * self.pages.len()
    }
}

/// A block must hold whole base pages and whole pages of every kind it is mapped with.
pub fn check_block(block: u64, pages: &[PageKind]) -> Result<()> {
    if block < MIN_SIZE {
        return Err(usage(format!(
            "--sizes {}: below 4K; a block must be at least one 4 KiB page",
            format_size(block)
        )));
    }
    for &k in pages {
        if !block.is_multiple_of(k.granule()) {
            return Err(usage(format!(
                "--sizes {}: not a multiple of the {} page size ({}); use a multiple like {}",
                format_size(block),
                k,
                format_size(k.granule()),
                format_size(block.div_ceil(k.granule()) * k.granule())
            )));
        }
    }
    Ok(())
}

/// A latency curve.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyPlan {
    pub sizes: Vec<u64>,
    pub pages: Vec<PageKind>,
    pub reserve: bool,
}

/// 4 KiB to 1 GiB, doubling.
pub fn default_sizes() -> Vec<u64> {
    (12..=30).map(|s| 1u64 << s).collect()
}

impl LatencyPlan {
    pub fn parse(sizes: Option<&str>, pages: &str, reserve: bool) -> Result<LatencyPlan> {
        let mut sizes = match sizes {
            Some(t) => parse_size_list(t)?,
            None => default_sizes(),
        };
        for &s in &sizes {
            if s < MIN_SIZE || !s.is_multiple_of(64) {
                return Err(usage(format!(
                    "--sizes {}: a chase size must be at least 4K and a multiple of 64 bytes (one cache line)",
                    format_size(s)
                )));
            }
            if s / 64 > u64::from(u32::MAX) {
                return Err(usage(format!(
                    "--sizes {}: too large; the chase handles up to 256 GiB",
                    format_size(s)
                )));
            }
        }
        sizes.sort_unstable();
        sizes.dedup();
        Ok(LatencyPlan {
            sizes,
            pages: parse_pages(pages)?,
            reserve,
        })
    }

    /// One region at a time: each hugetlb kind needs the largest size, in whole pages.
    pub fn pool_needs(&self) -> Vec<(PageKind, u64)> {
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        self.pages
            .iter()
            .filter_map(|&k| Some((k, largest.div_ceil(k.pool_page()?))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    fn text<'a>(
        op: &'a str,
        block: &'a str,
        threads: &'a str,
        pages: &'a str,
    ) -> BandwidthText<'a> {
        BandwidthText {
            op,
            pattern: "seq,rand",
            block,
            threads,
            pages,
            shared: false,
            oversubscribe: false,
            reserve: false,
        }
    }

    #[test]
    fn a_good_sweep_parses() {
        let p = BandwidthPlan::parse(
            &text("read,write,write-nt,copy", "16K,4M,1G", "1,2", "4k,thp"),
            2,
        )
        .unwrap();
        assert_eq!(p.ops, Op::ALL[..4].to_vec());
        assert_eq!(p.patterns, vec![Pattern::Seq, Pattern::Rand]);
        assert_eq!(p.blocks, vec![16 << 10, 4 << 20, 1 << 30]);
        assert_eq!(p.threads, vec![1, 2]);
        assert_eq!(p.cases(), 4 * 2 * 3 * 2 * 2);
        assert!(p.pool_needs().is_empty());
    }

    #[test]
    fn reference_ops_parse_and_know_their_kind() {
        let p =
            BandwidthPlan::parse(&text("copy,copy-nt,memcpy,memset", "1G", "1", "4k"), 2).unwrap();
        assert_eq!(p.ops, vec![Op::Copy, Op::CopyNt, Op::Memcpy, Op::Memset]);
        assert!(Op::Memcpy.is_copy() && Op::Memcpy.is_libc() && !Op::Memcpy.is_nt());
        assert!(Op::CopyNt.is_copy() && Op::CopyNt.is_nt() && !Op::CopyNt.is_libc());
        assert!(!Op::Memset.is_copy() && Op::Memset.is_libc());
        assert_eq!(Op::CopyNt.reference(), Some(Op::Memcpy));
        assert_eq!(Op::WriteNt.reference(), Some(Op::Memset));
        assert_eq!(Op::Read.reference(), None);
        // Sequential only: no rand case for the library calls.
        let p = BandwidthPlan::parse(&text("read,memcpy", "1G", "1,2", "4k"), 2).unwrap();
        assert_eq!(p.cases(), (2 + 1) * 2);
        let mut t = text("memcpy,memset", "1G", "1", "4k");
        t.pattern = "rand";
        let e = BandwidthPlan::parse(&t, 2).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("--pattern seq"), "{e}");
    }

    #[test]
    fn bad_sweeps_exit_2() {
        let bad = [
            text("fly", "16K", "1", "4k"),
            text("read", "0", "1", "4k"),
            text("read", "1K", "1", "4k"),
            text("read", "12Q", "1", "4k"),
            text("read", "6K", "1", "2m"),
            text("read", "4M", "1", "3m"),
            text("read", "4M", "9", "4k"),
            text("read", "4M", "0", "4k"),
            text("read,", "4M", "1", "4k"),
        ];
        for t in bad {
            let e = BandwidthPlan::parse(&t, 2).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{t:?}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
        let mut t = text("read", "4M", "9", "4k");
        t.oversubscribe = true;
        assert!(BandwidthPlan::parse(&t, 2).is_ok());
        let mut t = text("read", "4M", "1", "4k");
        t.pattern = "zigzag";
        assert!(BandwidthPlan::parse(&t, 2).is_err());
    }

    #[test]
    fn pool_needs_count_whole_pages_per_thread() {
        let p = BandwidthPlan::parse(&text("read", "4M,6M", "1,2", "4k,2m,1g"), 2);
        assert!(p.is_err(), "6M is not a multiple of 1G");
        let p = BandwidthPlan::parse(&text("read", "4M,6M", "1,2", "4k,2m"), 2).unwrap();
        assert_eq!(p.pool_needs(), vec![(PageKind::Huge2m, 6)]);
        let l = LatencyPlan::parse(Some("4K,1G,64M"), "4k,thp,2m,1g", false).unwrap();
        assert_eq!(l.sizes, vec![4096, 64 << 20, 1 << 30]);
        assert_eq!(
            l.pool_needs(),
            vec![(PageKind::Huge2m, 512), (PageKind::Huge1g, 1)]
        );
    }

    #[test]
    fn latency_defaults_and_errors() {
        let l = LatencyPlan::parse(None, "4k,thp", false).unwrap();
        assert_eq!(l.sizes.first(), Some(&4096));
        assert_eq!(l.sizes.last(), Some(&(1 << 30)));
        for bad in ["1K", "0", "4100", "x"] {
            let e = LatencyPlan::parse(Some(bad), "4k", false).unwrap_err();
            assert_eq!(exit_code(&e), 2, "{bad}");
        }
        assert!(LatencyPlan::parse(None, "4k,huge", false).is_err());
    }
}
