//! A profile's samples and their tally: perf script's frames (with the CPU mode) or
//! runtime/pprof's stacks placed by the binary's symbol table, counted per leaf, and the
//! Wilson interval of a share.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use anyhow::{Context, Result};

use super::{go_tool, is_gc_entry};

/// The CPU mode a sample was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    User,
    Kernel,
    /// The sampler does not say (runtime/pprof): the leaf decides.
    Unknown,
}

/// One sample, reduced to what its class depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sample {
    pub mode: Mode,
    /// A GC entry point is on the stack (the leaf's function included).
    pub under_gc: bool,
    /// The leaf: function and byte offset; None where no symbol is known (the vDSO).
    pub leaf: Option<(String, u64)>,
}

/// A process's samples, counted by what classifies them.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub(super) counts: HashMap<Sample, u64>,
}

impl Tally {
    pub fn add(&mut self, s: Sample, n: u64) {
        *self.counts.entry(s).or_insert(0) += n;
    }

    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Samples taken in kernel mode.
    pub fn kernel_samples(&self) -> u64 {
        self.counts
            .iter()
            .filter(|(s, _)| s.mode == Mode::Kernel)
            .map(|(_, n)| n)
            .sum()
    }

    /// User-mode (or unknown-mode) samples whose leaf is in a function named `prefix...`.
    pub fn samples_in(&self, prefix: &str) -> u64 {
        self.counts
            .iter()
            .filter(|(s, _)| {
                s.mode != Mode::Kernel
                    && s.leaf.as_ref().is_some_and(|(f, _)| f.starts_with(prefix))
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// The functions the samples' leaves fell in: what must be disassembled.
    pub fn leaf_symbols(&self) -> BTreeSet<String> {
        self.counts
            .keys()
            .filter_map(|s| s.leaf.as_ref().map(|(f, _)| f.clone()))
            .collect()
    }
}

/// A binary's functions by address, from `go tool nm -size -sort address`: to place
/// runtime/pprof's PCs.
#[derive(Debug, Default)]
pub struct SymTab {
    /// (start, end, name), sorted by start.
    funcs: Vec<(u64, u64, String)>,
}

impl SymTab {
    /// Parse `go tool nm -size -sort address`: `ADDR SIZE TYPE NAME`, text symbols (T, t).
    pub fn parse(text: &str) -> SymTab {
        let mut funcs: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let size: u64 = it.next()?.parse().ok()?;
                let kind = it.next()?;
                let name = it.collect::<Vec<_>>().join(" ");
                (matches!(kind, "T" | "t") && size > 0 && !name.is_empty()).then_some((
                    addr,
                    addr + size,
                    name,
                ))
            })
            .collect();
        funcs.sort_by_key(|f| f.0);
        SymTab { funcs }
    }

    /// The function containing `pc` and the offset in it.
    pub fn place(&self, pc: u64) -> Option<(&str, u64)> {
        let i = self.funcs.partition_point(|f| f.0 <= pc);
        let (a, b, name) = self.funcs.get(i.checked_sub(1)?)?;
        (pc < *b).then_some((name.as_str(), pc - a))
    }
}

/// `go tool nm -size -sort address` of `bin`.
pub fn symtab_of(go: &Path, bin: &Path) -> Result<SymTab> {
    Ok(SymTab::parse(&go_tool(
        go,
        &["nm", "-size", "-sort", "address"],
        bin,
    )?))
}

/// A tally of pprof's stacks `[count, leaf pc, caller pcs...]`: the leaf is the
/// instruction hit, callers are return addresses (pc - 1 is inside their call).
pub fn tally_pprof(syms: &SymTab, stacks: &[Vec<u64>]) -> Tally {
    let mut t = Tally::default();
    for st in stacks {
        let Some((&n, pcs)) = st.split_first() else {
            continue;
        };
        let Some((&leaf, callers)) = pcs.split_first() else {
            continue;
        };
        let leaf = syms.place(leaf).map(|(f, off)| (f.to_string(), off));
        let under_gc = leaf.as_ref().is_some_and(|(f, _)| is_gc_entry(f))
            || callers
                .iter()
                .any(|&pc| pc > 0 && syms.place(pc - 1).is_some_and(|(f, _)| is_gc_entry(f)));
        t.add(
            Sample {
                mode: Mode::Unknown,
                under_gc,
                leaf,
            },
            n,
        );
    }
    t
}

/// One frame line of `perf script -F misc,period,ip,sym,symoff --no-inline`: `<ip>
/// <symbol>+0x<off>` (perf prints a user address relative to its mapping, so the frame is
/// placed by its symbol), or `<ip> [unknown]`: (symbol, offset), None where perf named no
/// symbol.
pub fn perf_frame(line: &str) -> Option<(&str, u64)> {
    let (_ip, rest) = line.trim().split_once(char::is_whitespace)?;
    let (sym, off) = rest.trim().rsplit_once("+0x")?;
    Some((sym, u64::from_str_radix(off.trim(), 16).ok()?))
}

/// A tally of `perf script -F misc,period,ip,sym,symoff --no-inline` output read line by
/// line: a line that does not start with a tab opens a sample (its cpumode, K for kernel,
/// then its period), the tab-led lines after it are its frames, innermost first. Recorded
/// with --user-callchains, a kernel-mode sample's frames start at the user code that
/// entered the kernel; its mode says where the CPU was.
pub fn tally_perf<R: std::io::BufRead>(r: R) -> Result<Tally> {
    let mut t = Tally::default();
    // The sample being read, and whether its first frame (the leaf) has been seen.
    let mut open: Option<(Sample, bool)> = None;
    for line in r.lines() {
        let line = line.context("reading perf script output")?;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with('\t') {
            if let Some((s, leaf_seen)) = open.as_mut() {
                let frame = perf_frame(&line);
                if !*leaf_seen {
                    s.leaf = frame.map(|(f, off)| (f.to_string(), off));
                    *leaf_seen = true;
                }
                if frame.is_some_and(|(f, _)| is_gc_entry(f)) {
                    s.under_gc = true;
                }
            }
            continue;
        }
        if let Some((s, _)) = open.take() {
            t.add(s, 1);
        }
        let first = line.split_whitespace().next().unwrap_or("");
        let mode = if first.chars().all(|c| c.is_ascii_digit()) {
            // No cpumode column: an older perf, or a caller that did not ask for it.
            Mode::Unknown
        } else if first.contains('K') {
            Mode::Kernel
        } else {
            Mode::User
        };
        open = Some((
            Sample {
                mode,
                under_gc: false,
                leaf: None,
            },
            false,
        ));
    }
    if let Some((s, _)) = open.take() {
        t.add(s, 1);
    }
    Ok(t)
}

/// The Wilson score interval (95%) of a share k / n, in %.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 100.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt()) / denom;
    (
        100.0 * (centre - half).max(0.0),
        100.0 * (centre + half).min(1.0),
    )
}
