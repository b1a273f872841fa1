//! The tax by attribution, as the Biscuit evaluation found it: where do a running Go
//! program's CPU samples fall? Each sample's leaf (perf's `sym+off`, or a runtime/pprof PC
//! placed by the binary's symbol table) is classified against the binary's own disassembly
//! (`go tool objdump`, of the functions that were sampled): the collector's work, the
//! stack-check prologues, the write barriers, the safety checks (bounds, divide, shift,
//! nil), the loads those checks fold in, the kernel, and the rest.
//!
//! # Charging a class only its own work
//!
//! A sampled profile puts a sample where the CPU waited, not where the work was asked for.
//! A timer interrupt is taken at an instruction boundary: while a load's cache miss holds
//! retirement, the PC the sampler sees is that load or, after the usual one-instruction
//! skid, the instruction after it. Go's compiler folds loads into its checks: the bounds
//! check of `r.Tags[0]` is `CMPQ 0x20(DX), $0` (compare the slice length in the record
//! with zero) and a nil check is `TESTB AL, 0(AX)`. When such a compare is the first
//! instruction to touch a new object, the object's cache miss stalls on it, and its samples
//! land on the compare or on the conditional jump after it. Charging them to safety
//! charges the check for a miss the program pays anyway: built with `-gcflags=-B` the same
//! samples move to the next load of the same line (gcbench's server workload: a "safety"
//! share of 10% that was 96% one such jump; the checks' own work is under 1%).
//!
//! So: a compare or test of any check class whose memory operand reads program data, and
//! the conditional jump right after it, are class `memory`: their samples are the wait of
//! the load the check folded in. "Program data" is an address through a general register
//! (a heap object, a slice's backing array). Three kinds of memory operand stay with their
//! check, because the line they read is the check's own and is always hot:
//!
//! - `0x10(R14)`: the prologue's `CMPQ SP, 0x10(R14)` reads g.stackguard0 (R14 holds g in
//!   Go's register ABI); every call of every function reads that line, so it never misses
//!   and its samples are the prologue's compare-and-branch.
//! - `(SB)` and `(IP)`: statics, e.g. the write barrier's `CMPL runtime.writeBarrier(SB),
//!   $0`, read by every pointer store of the program.
//! - `(SP)` and `(BP)`: the function's own frame, the most recently touched memory.
//!
//! A register-only compare before a panic branch stays safety: it reads nothing. What this
//! rule gives up is the issue cost of the folded compare itself (one uop, a cycle when the
//! line is in L1); the A/B cross-check in `tax` (the workload built with `-B`, with an A/A
//! control) measures what the checks cost end to end and says whether the two agree. The
//! loads inside a write barrier's block (the old pointer it records) stay write-barrier:
//! without the barrier the program would not load them at all (a store's miss waits in the
//! store buffer, not at retirement).
//!
//! # Kernel time
//!
//! Time a process spends in the kernel (syscalls, page faults) is the class `kernel`: with
//! perf, a sample whose cpumode is kernel (`perf script -F misc` prints K), whatever its user
//! stack; with runtime/pprof, whose SIGPROF for kernel time is delivered on the return to
//! user mode, a leaf right after a `SYSCALL` instruction. Shares are given both of all CPU
//! (kernel included) and of user-mode CPU, so no class is diluted by kernel time unsaid.
//!
//! classify.rs gives each instruction its class, samples.rs tallies a profile's samples,
//! this file maps the sampled functions' addresses to classes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

mod classify;
mod samples;

pub use classify::*;
pub use samples::*;

/// One classified instruction.
#[derive(Debug, Clone)]
struct Span {
    addr: u64,
    len: u64,
    class: Class,
    /// "OP ARGS", for naming where a class's samples fell.
    text: String,
}

/// The classified instructions of the functions a profile sampled, for lookups by
/// function and offset (perf's frames) or by PC (pprof's).
#[derive(Debug, Default)]
pub struct ClassMap {
    spans: Vec<Span>,
    /// Each function's first address by name.
    starts: HashMap<String, u64>,
}

/// The collector's entry points (`costlab_core::symbols`): a user-mode sample with one of them
/// on its stack is GC work whatever its leaf (memclr, spanOf, a map of the heap's bits).
pub use costlab_core::symbols::user::GO_GC_ENTRIES as GC_ENTRIES;

pub(super) fn is_gc_entry(symbol: &str) -> bool {
    costlab_core::symbols::user::go_gc_entry(symbol)
}

impl ClassMap {
    pub fn new(funcs: &[Func]) -> ClassMap {
        let mut spans = Vec::new();
        let mut starts = HashMap::new();
        for f in funcs {
            for (inst, c) in f.insts.iter().zip(classify_func(f)) {
                spans.push(Span {
                    addr: inst.addr,
                    len: inst.len,
                    class: c,
                    text: format!("{} {}", inst.op, inst.args).trim().to_string(),
                });
            }
            if let Some(a) = f.insts.first() {
                starts.insert(f.name.clone(), a.addr);
            }
        }
        spans.sort_by_key(|s| s.addr);
        ClassMap { spans, starts }
    }

    /// The PC of `symbol + offset`, where the map has that function.
    pub fn pc_of(&self, symbol: &str, offset: u64) -> Option<u64> {
        self.starts.get(symbol).map(|a| a + offset)
    }

    fn span_at(&self, pc: u64) -> Option<&Span> {
        let i = self.spans.partition_point(|s| s.addr <= pc);
        let s = self.spans.get(i.checked_sub(1)?)?;
        (pc < s.addr + s.len.max(1)).then_some(s)
    }

    /// The class of the instruction containing `pc` (Other when no instruction does: the
    /// vDSO, a PC outside the text).
    pub fn class_of(&self, pc: u64) -> Class {
        self.span_at(pc).map_or(Class::Other, |s| s.class)
    }

    /// The class of one sample: kernel mode is kernel; a barrier or collector leaf is its
    /// own; under a GC entry point it is GC; else its leaf's class. With no mode known, a
    /// leaf right after a SYSCALL is kernel time delivered on the way out.
    pub fn class_of_sample(&self, s: &Sample) -> Class {
        if s.mode == Mode::Kernel {
            return Class::Kernel;
        }
        let c = s
            .leaf
            .as_ref()
            .and_then(|(f, off)| self.pc_of(f, *off))
            .map_or(Class::Other, |pc| self.class_of(pc));
        match c {
            Class::Kernel if s.mode == Mode::Unknown => Class::Kernel,
            // Seen by a sampler that knows the mode, the instruction after a SYSCALL in
            // user mode is user work.
            Class::Kernel => Class::Other,
            Class::WriteBarrier | Class::Gc => c,
            _ if s.under_gc => Class::Gc,
            _ => c,
        }
    }

    /// Samples per class.
    pub fn classify(&self, t: &Tally) -> Counts {
        let mut out = [0u64; N];
        for (s, n) in &t.counts {
            out[self.class_of_sample(s).index()] += n;
        }
        out
    }

    /// The `n` instructions that took most of `class`'s samples: ("fn+0xoff OP ARGS", samples).
    pub fn sites(&self, tallies: &[&Tally], class: Class, n: usize) -> Vec<(String, u64)> {
        let mut by: HashMap<(String, u64), u64> = HashMap::new();
        for t in tallies {
            for (s, k) in &t.counts {
                if self.class_of_sample(s) != class {
                    continue;
                }
                if let Some((f, off)) = &s.leaf {
                    *by.entry((f.clone(), *off)).or_insert(0) += k;
                }
            }
        }
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v.into_iter()
            .map(|((f, off), k)| {
                let text = self
                    .pc_of(&f, off)
                    .and_then(|pc| self.span_at(pc))
                    .map_or(String::new(), |s| format!(" {}", s.text));
                (format!("{f}+{off:#x}{text}"), k)
            })
            .collect()
    }

    /// How many instructions of each class the map holds.
    pub fn counts(&self) -> Counts {
        let mut out = [0u64; N];
        for s in &self.spans {
            out[s.class.index()] += 1;
        }
        out
    }

    /// How many functions the map holds.
    pub fn functions(&self) -> usize {
        self.starts.len()
    }
}

/// A regexp matching exactly these names (Go's regexp syntax, for `objdump -s`).
fn exact_names(names: &[&String]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|n| {
            n.chars()
                .flat_map(|c| {
                    let special = "\\.+*?()|[]{}^$".contains(c);
                    special.then_some('\\').into_iter().chain([c])
                })
                .collect()
        })
        .collect();
    format!("^(?:{})$", quoted.join("|"))
}

/// Disassemble the functions `symbols` of `bin` with `go tool objdump -s` and classify
/// them. Only sampled functions are read: the whole binary's disassembly takes seconds, a
/// profile's few hundred functions a fraction of one.
pub fn class_map_of(go: &Path, bin: &Path, symbols: &BTreeSet<String>) -> Result<ClassMap> {
    let names: Vec<&String> = symbols.iter().collect();
    let mut funcs = Vec::new();
    // One objdump per 64 KiB of pattern, well inside the kernel's limit for one argument.
    let mut chunk: Vec<&String> = Vec::new();
    let mut len = 0;
    let mut chunks: Vec<Vec<&String>> = Vec::new();
    for n in names {
        if len + n.len() > 64 << 10 && !chunk.is_empty() {
            chunks.push(std::mem::take(&mut chunk));
            len = 0;
        }
        len += n.len() + 4;
        chunk.push(n);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    for c in chunks {
        let text = go_tool(go, &["objdump", "-s", &exact_names(&c)], bin)?;
        funcs.extend(parse_objdump(&text));
    }
    Ok(ClassMap::new(&funcs))
}

/// The executable of Go's `tool` (nm, objdump), resolved once per process with `go tool -n
/// TOOL`. Since Go 1.24 these tools are not shipped built: the first use builds one into the
/// build cache, which took 29 s on this 2-vCPU host, and `go tool` itself costs a second of
/// start-up each call. `costlab gc build` resolves both, so the build happens there and not
/// inside a timed run. None where the toolchain cannot name it (then `go tool` is run).
pub fn tool_path(go: &Path, tool: &str) -> Option<PathBuf> {
    static PATHS: Mutex<BTreeMap<String, Option<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut paths = PATHS.lock().unwrap_or_else(|e| e.into_inner());
    let key = format!("{}\0{tool}", go.display());
    paths
        .entry(key)
        .or_insert_with(|| {
            let out = Command::new(go)
                .args(["tool", "-n", tool])
                .env("GOTOOLCHAIN", "local")
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let first = text.lines().next()?.trim();
            let path = PathBuf::from(first);
            (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
        })
        .clone()
}

/// The output of `go tool TOOL ARGS... BIN` with the local toolchain (nothing fetched): the
/// tool's executable run directly where `go tool -n` names it.
pub(super) fn go_tool(go: &Path, args: &[&str], bin: &Path) -> Result<String> {
    let tool = args.first().copied().unwrap_or_default();
    let mut cmd = match tool_path(go, tool) {
        Some(exe) => {
            let mut c = Command::new(exe);
            c.args(&args[1..]);
            c
        }
        None => {
            let mut c = Command::new(go);
            c.arg("tool").args(args);
            c
        }
    };
    let out = cmd
        .arg(bin)
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} tool {tool}", go.display()))?;
    if !out.status.success() {
        bail!(
            "go tool {tool} {} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests;
