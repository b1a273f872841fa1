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

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Where a CPU sample's time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Gc,
    Prologue,
    WriteBarrier,
    Safety,
    Memory,
    Kernel,
    Other,
}

/// How many classes there are.
pub const N: usize = 7;

/// Samples (or instructions) per class, in `Class::ALL` order.
pub type Counts = [u64; N];

impl Class {
    pub const ALL: [Class; N] = [
        Class::Gc,
        Class::Prologue,
        Class::WriteBarrier,
        Class::Safety,
        Class::Memory,
        Class::Kernel,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Gc => "gc",
            Class::Prologue => "prologue",
            Class::WriteBarrier => "write-barrier",
            Class::Safety => "safety",
            Class::Memory => "memory",
            Class::Kernel => "kernel",
            Class::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// What the class counts, for notes.
    pub fn means(self) -> &'static str {
        match self {
            Class::Gc => "user-mode samples with a GC entry point on the stack (mark workers, assists, sweeping) or a leaf in the collector's functions",
            Class::Prologue => "the stack-bound check at function entry (compare with g.stackguard, branch), its morestack call block, runtime.morestack and newstack",
            Class::WriteBarrier => "the inlined check of runtime.writeBarrier and its branch, the barrier block it guards, the runtime's barrier functions",
            Class::Safety => "compare-and-branch whose branch (or fall-through) leads to a bounds/slice/divide/shift panic, reading registers, the stack or statics only",
            Class::Memory => "the wait of a load a check folds in: a check's compare or nil-check probe (TESTB AL, 0(reg)) whose memory operand is program data, and the jump after it (sampling skid)",
            Class::Kernel => "samples taken in kernel mode (syscalls, page faults), whatever the user stack; with pprof, a leaf right after a SYSCALL",
            Class::Other => "everything else in user mode: the program's work, the allocator, the scheduler",
        }
    }
}

/// One instruction of the disassembly.
#[derive(Debug, Clone, PartialEq)]
pub struct Inst {
    pub addr: u64,
    pub len: u64,
    /// The mnemonic, e.g. `CMPQ`.
    pub op: String,
    /// The operands as objdump prints them.
    pub args: String,
}

/// One function of the disassembly.
#[derive(Debug, Clone, PartialEq)]
pub struct Func {
    pub name: String,
    pub insts: Vec<Inst>,
}

/// Parse `go tool objdump` output: `TEXT name(SB) file` headers, then one line per
/// instruction: `file:line <TAB> 0xADDR <TAB> HEXBYTES <TAB> OP ARGS`.
pub fn parse_objdump(text: &str) -> Vec<Func> {
    let mut out: Vec<Func> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("TEXT ") {
            // Up to "(SB)": a generic's name may hold a space (`type:.eq.[2]interface {}`),
            // and perf names it whole.
            let name = match rest.find("(SB)") {
                Some(end) => &rest[..end],
                None => rest.split_whitespace().next().unwrap_or(""),
            };
            out.push(Func {
                name: name.to_string(),
                insts: Vec::new(),
            });
            continue;
        }
        let Some(f) = out.last_mut() else { continue };
        let fields: Vec<&str> = line
            .split('\t')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if fields.len() < 4 {
            continue;
        }
        let Some(addr) = fields[1]
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        let bytes = fields[2];
        if bytes.is_empty() || !bytes.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let asm = fields[3];
        let (op, args) = asm.split_once(' ').unwrap_or((asm, ""));
        f.insts.push(Inst {
            addr,
            len: (bytes.len() / 2) as u64,
            op: op.to_string(),
            args: args.trim().to_string(),
        });
    }
    out
}

fn is_cond_jump(op: &str) -> bool {
    op.starts_with('J') && op != "JMP"
}

fn jump_target(i: &Inst) -> Option<u64> {
    i.args
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}

fn call_target(i: &Inst) -> Option<&str> {
    if i.op != "CALL" {
        return None;
    }
    Some(i.args.strip_suffix("(SB)").unwrap_or(&i.args))
}

fn is_gc_function(name: &str) -> bool {
    let Some(r) = name.strip_prefix("runtime.") else {
        return false;
    };
    const PARTS: [&str; 20] = [
        "gcDrain",
        "scanobject",
        "greyobject",
        "scanblock",
        "scanstack",
        "scanframe",
        "scanSpan",
        "scanConservative",
        "markroot",
        "gcAssist",
        "gcBgMarkWorker",
        "gcMark",
        "gcFlushBgCredit",
        "gcmarknewobject",
        "findObject",
        "gcWork",
        "sweep",
        "spanQueue",
        "markBits",
        "tryDeferToSpanScan",
    ];
    r.starts_with("gc") && !r.starts_with("gcWriteBarrier")
        || PARTS.iter().any(|p| r.contains(p))
        || r.contains("typePointers")
        || r.contains("gcBits")
}

fn is_wb_function(name: &str) -> bool {
    let Some(r) = name.strip_prefix("runtime.") else {
        return false;
    };
    r.starts_with("gcWriteBarrier")
        || r.starts_with("wbBufFlush")
        || r.starts_with("(*wbBuf)")
        || r.starts_with("bulkBarrier")
        || r.starts_with("wbZero")
        || r.starts_with("wbMove")
        || r.starts_with("typeBitsBulkBarrier")
}

fn is_stack_growth(name: &str) -> bool {
    name.starts_with("runtime.morestack") || name == "runtime.newstack"
}

fn is_safety_panic(callee: &str) -> bool {
    let Some(r) = callee.strip_prefix("runtime.") else {
        return false;
    };
    [
        "panicIndex",
        "panicBounds",
        "panicSlice",
        "goPanicIndex",
        "goPanicSlice",
        "panicdivide",
        "panicshift",
        "panicmem",
    ]
    .iter()
    .any(|p| r.starts_with(p))
}

/// From instruction `i`, run straight-line code (following unconditional jumps, at most
/// `hops`, and at most `limit` instructions) and say whether it calls a function for which
/// `want` holds before any other call, return or branch.
fn reaches(f: &Func, mut i: usize, limit: usize, hops: usize, want: &dyn Fn(&str) -> bool) -> bool {
    let mut hops_left = hops;
    for _ in 0..limit {
        let Some(inst) = f.insts.get(i) else {
            return false;
        };
        if let Some(callee) = call_target(inst) {
            return want(callee);
        }
        if inst.op == "JMP" {
            if hops_left == 0 {
                return false;
            }
            hops_left -= 1;
            match jump_target(inst).and_then(|t| index_of(f, t)) {
                Some(t) => {
                    i = t;
                    continue;
                }
                None => return false,
            }
        }
        if is_cond_jump(&inst.op) || inst.op.starts_with("RET") {
            return false;
        }
        i += 1;
    }
    false
}

fn index_of(f: &Func, addr: u64) -> Option<usize> {
    f.insts.binary_search_by_key(&addr, |i| i.addr).ok()
}

/// The class of every instruction of `f`, in order.
pub fn classify_func(f: &Func) -> Vec<Class> {
    let n = f.insts.len();
    let whole = if is_wb_function(&f.name) {
        Some(Class::WriteBarrier)
    } else if is_gc_function(&f.name) {
        Some(Class::Gc)
    } else if is_stack_growth(&f.name) {
        Some(Class::Prologue)
    } else {
        None
    };
    if let Some(c) = whole {
        return vec![c; n];
    }
    let mut cls = vec![Class::Other; n];
    let set = |cls: &mut Vec<Class>, i: usize, c: Class| {
        if i < cls.len() && cls[i] == Class::Other {
            cls[i] = c;
        }
    };
    // Prologue: the stack-bound check in the first few instructions, its branch to a block
    // that calls morestack, and that block up to its jump back.
    let morestack = |c: &str| c.starts_with("runtime.morestack");
    for j in 0..n.min(5) {
        let inst = &f.insts[j];
        if !is_cond_jump(&inst.op) {
            continue;
        }
        let Some(t) = jump_target(inst).and_then(|t| index_of(f, t)) else {
            break;
        };
        if reaches(f, t, 40, 0, &morestack) {
            for k in 0..=j {
                set(&mut cls, k, Class::Prologue);
            }
            for k in t..n {
                set(&mut cls, k, Class::Prologue);
                if f.insts[k].op == "JMP" || f.insts[k].op.starts_with("RET") {
                    break;
                }
            }
        }
        break;
    }
    // Write barriers: the test of runtime.writeBarrier, its branch, and the barrier block.
    for i in 0..n {
        if !f.insts[i].args.contains("runtime.writeBarrier(SB)") {
            continue;
        }
        set(&mut cls, i, Class::WriteBarrier);
        let Some(jcc) = f.insts.get(i + 1) else {
            continue;
        };
        if !is_cond_jump(&jcc.op) {
            continue;
        }
        set(&mut cls, i + 1, Class::WriteBarrier);
        let Some(t) = jump_target(jcc).and_then(|t| index_of(f, t)) else {
            continue;
        };
        if jcc.op == "JE" || jcc.op == "JEQ" {
            // The branch skips the barrier when it is off: the block is the fall-through,
            // up to the branch target (where the plain store is).
            for k in i + 2..t.min(i + 26) {
                set(&mut cls, k, Class::WriteBarrier);
            }
            continue;
        }
        // Where the unbarriered path rejoins: its first unconditional jump, if forward of
        // the barrier block; the block is everything from the branch target up to there.
        let join = (i + 2..n.min(i + 16))
            .find(|&k| f.insts[k].op == "JMP" || is_cond_jump(&f.insts[k].op))
            .filter(|&k| f.insts[k].op == "JMP")
            .and_then(|k| jump_target(&f.insts[k]))
            .filter(|&a| a > f.insts[t].addr);
        for k in t..n.min(t + 24) {
            if join.is_some_and(|a| f.insts[k].addr >= a) {
                break;
            }
            set(&mut cls, k, Class::WriteBarrier);
            if f.insts[k].op == "JMP" || f.insts[k].op.starts_with("RET") {
                break;
            }
        }
    }
    // Safety checks: a conditional branch whose taken or fall-through path calls a bounds,
    // slice, divide or shift panic; the compare or test before it; the panic call itself;
    // and the nil-check probes the compiler inserts where no load would fault first.
    for i in 0..n {
        let inst = &f.insts[i];
        if call_target(inst).is_some_and(is_safety_panic) {
            set(&mut cls, i, Class::Safety);
            continue;
        }
        if inst.op == "TESTB" && inst.args.starts_with("AL, 0(") {
            set(&mut cls, i, Class::Safety);
            continue;
        }
        if !is_cond_jump(&inst.op) {
            continue;
        }
        let taken = jump_target(inst)
            .and_then(|t| index_of(f, t))
            .is_some_and(|t| reaches(f, t, 8, 2, &is_safety_panic));
        let through = reaches(f, i + 1, 8, 2, &is_safety_panic);
        if taken || through {
            set(&mut cls, i, Class::Safety);
            if i > 0 && is_compare(&f.insts[i - 1].op) {
                set(&mut cls, i - 1, Class::Safety);
            }
        }
    }
    // A check's compare that reads program data, and the jump after it, are the wait of
    // the load it folds in (see the module's doc): memory, whatever check it belongs to.
    for i in 0..n {
        let is_check = matches!(
            cls[i],
            Class::Safety | Class::Prologue | Class::WriteBarrier
        );
        if !is_check || !is_compare(&f.insts[i].op) || !reads_program_data(&f.insts[i].args) {
            continue;
        }
        let check = cls[i];
        cls[i] = Class::Memory;
        if f.insts.get(i + 1).is_some_and(|j| is_cond_jump(&j.op)) && cls[i + 1] == check {
            cls[i + 1] = Class::Memory;
        }
    }
    // Where a signal for time spent in a syscall finds the thread: the instruction after
    // the SYSCALL (kept apart so that a sampler that sees user PCs only can tell it).
    for i in 1..n {
        if f.insts[i - 1].op == "SYSCALL" {
            set(&mut cls, i, Class::Kernel);
        }
    }
    cls
}

fn is_compare(op: &str) -> bool {
    op.starts_with("CMP") || op.starts_with("TEST")
}

/// Whether an instruction's operands (Go assembler syntax) read memory through a general
/// register: `0x20(DX)`, `0(SI)(BX*1)`. The base register is the first one in parentheses;
/// g (R14), the stack (SP, BP) and statics (SB, IP) are the check's own hot lines, not
/// program data (see the module's doc).
pub fn reads_program_data(args: &str) -> bool {
    let Some(open) = args.find('(') else {
        return false;
    };
    let rest = &args[open + 1..];
    let Some(close) = rest.find(')') else {
        return false;
    };
    !matches!(&rest[..close], "SP" | "BP" | "R14" | "SB" | "IP")
}

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

/// The collector's entry points: a user-mode sample with one of them on its stack is GC
/// work whatever its leaf (memclr, spanOf, a map of the heap's bits).
pub const GC_ENTRIES: [&str; 12] = [
    "runtime.gcBgMarkWorker",
    "runtime.gcAssistAlloc",
    "runtime.gcAssistAlloc1",
    "runtime.bgsweep",
    "runtime.sweepone",
    "runtime.deductSweepCredit",
    "runtime.gcMarkDone",
    "runtime.gcMarkTermination",
    "runtime.gcStart",
    "runtime.markroot",
    "runtime.gcDrain",
    "runtime.gcDrainN",
];

fn is_gc_entry(symbol: &str) -> bool {
    GC_ENTRIES.contains(&symbol)
}

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
    counts: HashMap<Sample, u64>,
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

/// The output of `go tool TOOL ARGS... BIN` with the local toolchain (nothing fetched).
fn go_tool(go: &Path, args: &[&str], bin: &Path) -> Result<String> {
    let tool = args.first().copied().unwrap_or_default();
    let out = Command::new(go)
        .arg("tool")
        .args(args)
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

#[cfg(test)]
mod tests {
    use super::*;

    const DIS: &str = "TEXT main.f(SB) /x/f.go
  f.go:3\t\t0x1000\t\t493b6610\t\tCMPQ SP, 0x10(R14)\t
  f.go:3\t\t0x1004\t\t7620\t\tJBE 0x1026\t
  f.go:3\t\t0x1006\t\t55\t\tPUSHQ BP\t
  f.go:4\t\t0x1007\t\t4839c8\t\tCMPQ AX, CX\t
  f.go:4\t\t0x100a\t\t7315\t\tJAE 0x1021\t
  f.go:5\t\t0x100c\t\t833d00000000\t\tCMPL runtime.writeBarrier(SB), $0x0\t
  f.go:5\t\t0x1012\t\t7504\t\tJNE 0x1018\t
  f.go:5\t\t0x1014\t\t90\t\tNOPL\t
  f.go:5\t\t0x1015\t\teb06\t\tJMP 0x101d\t
  f.go:5\t\t0x1017\t\t90\t\tNOPL\t
  f.go:5\t\t0x1018\t\te800000000\t\tCALL runtime.gcWriteBarrier2(SB)\t
  f.go:5\t\t0x101d\t\t488910\t\tMOVQ DX, 0(AX)\t
  f.go:5\t\t0x1020\t\tc3\t\tRET\t
  f.go:4\t\t0x1021\t\te800000000\t\tCALL runtime.panicBounds(SB)\t
  f.go:3\t\t0x1026\t\t4889442408\t\tMOVQ AX, 0x8(SP)\t
  f.go:3\t\t0x102b\t\te800000000\t\tCALL runtime.morestack_noctxt.abi0(SB)\t
  f.go:3\t\t0x1030\t\te900000000\t\tJMP main.f(SB)\t
TEXT runtime.scanobject(SB) /r/mgcmark.go
  mgcmark.go:1\t\t0x2000\t\t90\t\tNOPL\t
TEXT runtime.gcDrain(SB) /r/mgcmark.go
  mgcmark.go:9\t\t0x3000\t\te800000000\t\tCALL main.f(SB)\t
";

    fn user(f: &str, off: u64) -> Sample {
        Sample {
            mode: Mode::User,
            under_gc: false,
            leaf: Some((f.to_string(), off)),
        }
    }

    #[test]
    fn objdump_parses_and_classifies() {
        let funcs = parse_objdump(DIS);
        assert_eq!(funcs.len(), 3);
        assert_eq!(funcs[0].name, "main.f");
        assert_eq!(funcs[0].insts.len(), 17);
        assert_eq!(funcs[0].insts[1].op, "JBE");
        assert_eq!(funcs[0].insts[1].len, 2);
        let eq = parse_objdump("TEXT type:.eq.[2]interface {}(SB) <autogenerated>\n");
        assert_eq!(eq[0].name, "type:.eq.[2]interface {}");
        use Class::*;
        // The prologue's compare reads g (R14) and the barrier's reads a static (SB): both
        // stay with their check; the bounds compare reads registers only: safety.
        assert_eq!(
            classify_func(&funcs[0]),
            vec![
                Prologue,
                Prologue,
                Other,
                Safety,
                Safety,
                WriteBarrier,
                WriteBarrier,
                Other,
                Other,
                Other,
                WriteBarrier,
                Other,
                Other,
                Safety,
                Prologue,
                Prologue,
                Prologue
            ]
        );
        let map = ClassMap::new(&funcs);
        assert_eq!(map.class_of(0x1001), Prologue);
        assert_eq!(map.class_of(0x2000), Gc);
        assert_eq!(map.class_of(0x9999), Other);
        assert_eq!(map.counts(), [2, 5, 3, 3, 0, 0, 6]);
        assert_eq!(map.functions(), 3);
        // Under a GC entry point plain code is GC; a barrier leaf stays a barrier; kernel
        // mode is kernel whatever the stack.
        let mut t = Tally::default();
        t.add(
            Sample {
                under_gc: true,
                ..user("main.f", 6)
            },
            4,
        );
        t.add(user("main.f", 6), 6);
        t.add(
            Sample {
                under_gc: true,
                ..user("main.f", 0x18)
            },
            3,
        );
        t.add(user("main.f", 7), 2);
        t.add(
            Sample {
                mode: Mode::Kernel,
                under_gc: true,
                ..user("main.f", 6)
            },
            5,
        );
        t.add(
            Sample {
                leaf: None,
                ..user("", 0)
            },
            1,
        );
        assert_eq!(map.classify(&t), [4, 0, 3, 2, 0, 5, 7]);
        assert_eq!(t.total(), 21);
        assert_eq!(t.kernel_samples(), 5);
        assert_eq!(t.samples_in("main."), 15);
        assert_eq!(
            t.leaf_symbols().into_iter().collect::<Vec<_>>(),
            vec!["main.f"]
        );
    }

    /// gcbench's record chain (main.handle, as go1.26 compiles it): the bounds check of
    /// r.Tags[0] is the first instruction to touch each record.
    const CHAIN: &str = "TEXT main.handle(SB) gcbench/server.go
  server.go:88\t\t0x100\t\t493b6610\t\tCMPQ SP, 0x10(R14)\t
  server.go:88\t\t0x104\t\t0f86a0000000\t\tJBE 0x1a0\t
  server.go:102\t\t0x10a\t\t4c8b4a18\t\tMOVQ 0x18(DX), R9\t
  server.go:102\t\t0x10e\t\t4d8b4908\t\tMOVQ 0x8(R9), R9\t
  server.go:102\t\t0x112\t\t4c034a10\t\tADDQ 0x10(DX), R9\t
  server.go:102\t\t0x116\t\t4c014820\t\tADDQ R9, 0x20(AX)\t
  server.go:103\t\t0x11a\t\t488b5230\t\tMOVQ 0x30(DX), DX\t
  server.go:101\t\t0x11e\t\t48ffc1\t\tINCQ CX\t
  server.go:101\t\t0x121\t\t4939c8\t\tCMPQ R8, CX\t
  server.go:101\t\t0x124\t\t7e11\t\tJLE 0x137\t
  server.go:101\t\t0x126\t\t4885d2\t\tTESTQ DX, DX\t
  server.go:101\t\t0x129\t\t740c\t\tJE 0x137\t
  server.go:102\t\t0x12b\t\t48837a2000\t\tCMPQ 0x20(DX), $0x0\t
  server.go:102\t\t0x130\t\t77d8\t\tJA 0x10a\t
  server.go:102\t\t0x132\t\te966000000\t\tJMP 0x190\t
  server.go:99\t\t0x137\t\t84000000\t\tTESTB AL, 0(AX)\t
  server.go:99\t\t0x13a\t\t488b4c2410\t\tMOVQ 0x10(SP), CX\t
  server.go:99\t\t0x13f\t\t4839ca\t\tCMPQ 0x18(SP), CX\t
  server.go:99\t\t0x143\t\t7350\t\tJAE 0x195\t
  server.go:99\t\t0x145\t\tc3\t\tRET\t
  server.go:102\t\t0x190\t\te800000000\t\tCALL runtime.panicBounds(SB)\t
  server.go:99\t\t0x195\t\te800000000\t\tCALL runtime.panicIndex(SB)\t
  server.go:88\t\t0x1a0\t\te800000000\t\tCALL runtime.morestack_noctxt.abi0(SB)\t
  server.go:88\t\t0x1a5\t\te900000000\t\tJMP main.handle(SB)\t
";

    #[test]
    fn a_check_that_folds_in_a_missed_load_is_charged_to_memory() {
        let funcs = parse_objdump(CHAIN);
        let c = classify_func(&funcs[0]);
        let at = |addr: u64| {
            let i = funcs[0].insts.iter().position(|i| i.addr == addr).unwrap();
            c[i]
        };
        use Class::*;
        // The chain's check reads the record: the compare and the jump after it (where
        // skid puts the miss) are memory, not safety; its panic call stays safety.
        assert_eq!((at(0x12b), at(0x130)), (Memory, Memory));
        assert_eq!(at(0x190), Safety);
        // The nil-check probe is a load of the object it checks: memory.
        assert_eq!(at(0x137), Memory);
        // A compare against the stack frame, and the prologue's compare with g: their own.
        assert_eq!((at(0x13f), at(0x143)), (Safety, Safety));
        assert_eq!((at(0x100), at(0x104)), (Prologue, Prologue));
        // The loop's own loads are the program's work.
        assert_eq!(at(0x10a), Other);

        // Samples as a profile of the chain sees them: most on the jump after the check.
        let map = ClassMap::new(&funcs);
        let mut t = Tally::default();
        t.add(user("main.handle", 0x30), 960); // JA after CMPQ 0x20(DX)
        t.add(user("main.handle", 0x2b), 10); // the CMPQ itself
        t.add(user("main.handle", 0x3f), 3); // CMPQ 0x18(SP), CX: a check's own work
        t.add(user("main.handle", 0x0e), 27); // the load of r.Tags' array
        let counts = map.classify(&t);
        assert_eq!(counts[Memory.index()], 970);
        assert_eq!(counts[Safety.index()], 3);
        assert_eq!(counts[Other.index()], 27);
        let sites = map.sites(&[&t], Memory, 1);
        assert_eq!(sites, vec![("main.handle+0x30 JA 0x10a".to_string(), 960)]);
    }

    #[test]
    fn program_data_operands() {
        for yes in [
            "0x20(DX), $0x0",
            "AL, 0(AX)",
            "0(SI)(BX*1), CX",
            "-0x8(R9), R8",
        ] {
            assert!(reads_program_data(yes), "{yes}");
        }
        for no in [
            "SP, 0x10(R14)",
            "runtime.writeBarrier(SB), $0x0",
            "0x18(SP), CX",
            "-0x8(BP), AX",
            "0x17b19(IP), SI",
            "AX, CX",
            "$0x0",
        ] {
            assert!(!reads_program_data(no), "{no}");
        }
    }

    #[test]
    fn perf_script_is_tallied_with_its_cpu_mode() {
        let funcs = parse_objdump(DIS);
        let map = ClassMap::new(&funcs);
        // misc (K or U), period; then frames. The kernel sample's frames start at the user
        // code that entered the kernel (recorded with --user-callchains).
        let text = "U     50000 \n\t  1006 main.f+0x6\n\t  3005 runtime.gcDrain+0x5\n\nU     50000 \n\t  1018 main.f+0x18\n\nK 50000\n\t 8ad64 runtime.sysMmap.abi0+0x24\n\nU 50000\n\t 7f00 [unknown]\n\t  1006 main.f+0x6\n";
        assert_eq!(perf_frame("\t  1006 main.f+0x6"), Some(("main.f", 6)));
        assert_eq!(perf_frame("\t 7f00 [unknown]"), None);
        let t = tally_perf(std::io::Cursor::new(text)).unwrap();
        assert_eq!(t.total(), 4);
        assert_eq!(map.classify(&t), [1, 0, 1, 0, 0, 1, 1]);
        // Without a cpumode column the mode is unknown and the leaf decides.
        let t = tally_perf(std::io::Cursor::new(" 50000\n\t 1007 main.f+0x7\n")).unwrap();
        assert_eq!(map.classify(&t), [0, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn pprof_stacks_are_placed_by_the_symbol_table() {
        let dis = "TEXT internal/runtime/syscall.Syscall6(SB) /r/asm.s
  asm.s:1\t\t0x5000\t\t0f05\t\tSYSCALL\t
  asm.s:2\t\t0x5002\t\t483d01f0ffff\t\tCMPQ AX, $-0xfff\t
  asm.s:3\t\t0x5008\t\tc3\t\tRET\t
";
        let mut funcs = parse_objdump(DIS);
        funcs.extend(parse_objdump(dis));
        let map = ClassMap::new(&funcs);
        let syms = SymTab::parse(
            "    1000         53 T main.f\n    2000 1 T runtime.scanobject\n    3000 5 T runtime.gcDrain\n    4000 8 D main.data\n    5000 9 T internal/runtime/syscall.Syscall6\n",
        );
        assert_eq!(syms.place(0x1007), Some(("main.f", 7)));
        assert_eq!(syms.place(0x4001), None);
        let t = tally_pprof(
            &syms,
            &[
                vec![4, 0x1006, 0x3005],
                vec![6, 0x1006],
                vec![3, 0x1018, 0x3005],
                vec![2, 0x1007],
                // pprof's signal for time in a syscall arrives on the way out of it.
                vec![7, 0x5002, 0x1010],
                vec![1, 0x9999],
            ],
        );
        assert_eq!(map.classify(&t), [4, 0, 3, 2, 0, 7, 7]);
        // perf's user-mode sample on the same instruction is user work.
        let mut u = Tally::default();
        u.add(user("internal/runtime/syscall.Syscall6", 2), 1);
        assert_eq!(map.classify(&u)[Class::Other.index()], 1);
    }

    #[test]
    fn objdump_patterns_match_names_exactly() {
        let names = ["runtime.(*mheap).alloc".to_string(), "main.f".to_string()];
        let re = exact_names(&names.iter().collect::<Vec<_>>());
        assert_eq!(re, "^(?:runtime\\.\\(\\*mheap\\)\\.alloc|main\\.f)$");
    }

    #[test]
    fn barrier_block_on_the_fall_through() {
        let dis = "TEXT main.store(SB) /x/s.go
  s.go:1\t\t0x10\t\t833d00000000\t\tCMPL runtime.writeBarrier(SB), $0x0\t
  s.go:1\t\t0x16\t\t740f\t\tJE 0x27\t
  s.go:1\t\t0x18\t\t488b08\t\tMOVQ 0(AX), CX\t
  s.go:1\t\t0x1b\t\te800000000\t\tCALL runtime.gcWriteBarrier2(SB)\t
  s.go:1\t\t0x20\t\t49891b\t\tMOVQ BX, 0(R11)\t
  s.go:1\t\t0x23\t\t49894b08\t\tMOVQ CX, 0x8(R11)\t
  s.go:1\t\t0x27\t\t488918\t\tMOVQ BX, 0(AX)\t
  s.go:1\t\t0x2a\t\tc3\t\tRET\t
";
        let f = &parse_objdump(dis)[0];
        let c = classify_func(f);
        // The barrier's own load of the old pointer (MOVQ 0(AX), CX) stays the barrier's.
        assert_eq!(c.iter().filter(|&&k| k == Class::WriteBarrier).count(), 6);
        assert_eq!(c[6], Class::Other);
    }

    #[test]
    fn wilson_interval() {
        let (lo, hi) = wilson(50, 100);
        assert!(
            (lo - 40.38).abs() < 0.05 && (hi - 59.62).abs() < 0.05,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 0), (0.0, 100.0));
        let (lo, _) = wilson(0, 1000);
        assert!(lo < 1e-9);
    }
}
