//! The tax by attribution, as the Biscuit evaluation found it: where do a running Go
//! program's CPU samples fall? Each leaf PC of a runtime/pprof CPU profile (decoded by the
//! Go program itself, see gcbench/pprofdecode.go) is classified against the binary's own
//! disassembly (`go tool objdump`): the collector's work, the stack-check prologues, the
//! write barriers, the safety checks (bounds, divide, shift, nil), and the rest.

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
    Other,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::Gc,
        Class::Prologue,
        Class::WriteBarrier,
        Class::Safety,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Gc => "gc",
            Class::Prologue => "prologue",
            Class::WriteBarrier => "write-barrier",
            Class::Safety => "safety",
            Class::Other => "other",
        }
    }

    fn index(self) -> usize {
        Class::ALL.iter().position(|&c| c == self).unwrap_or(4)
    }

    /// What the class counts, for notes.
    pub fn means(self) -> &'static str {
        match self {
            Class::Gc => "samples with a GC entry point on the stack (mark workers, assists, sweeping) or a leaf in the collector's functions",
            Class::Prologue => "the stack-bound check at function entry (compare with g.stackguard, branch), its morestack call block, runtime.morestack and newstack",
            Class::WriteBarrier => "the inlined check of runtime.writeBarrier and its branch, the barrier block it guards, the runtime's barrier functions",
            Class::Safety => "compare-and-branch whose branch (or fall-through) leads to a bounds/slice/divide/shift panic, and nil-check probes (TESTB AL, 0(reg))",
            Class::Other => "everything else: the program's work, the allocator, the kernel (a sample in a syscall lands on its return)",
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
            let name = rest.split_whitespace().next().unwrap_or("");
            let name = name.strip_suffix("(SB)").unwrap_or(name);
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
            if i > 0
                && (f.insts[i - 1].op.starts_with("CMP") || f.insts[i - 1].op.starts_with("TEST"))
            {
                set(&mut cls, i - 1, Class::Safety);
            }
        }
    }
    cls
}

/// Every instruction of a binary with its class, sorted by address, for lookups by PC.
pub struct ClassMap {
    spans: Vec<(u64, u64, Class)>,
    /// (first address, end, is a GC entry point), sorted; and each function's start by name.
    funcs: Vec<(u64, u64, bool)>,
    starts: std::collections::HashMap<String, u64>,
}

/// The collector's entry points: a sample with one of them on its stack is GC work
/// whatever its leaf (memclr, spanOf, a map of the heap's bits).
const GC_ENTRIES: [&str; 12] = [
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

impl ClassMap {
    pub fn new(funcs: &[Func]) -> ClassMap {
        let mut spans = Vec::new();
        let mut fspans = Vec::new();
        let mut starts = std::collections::HashMap::new();
        for f in funcs {
            for (inst, c) in f.insts.iter().zip(classify_func(f)) {
                spans.push((inst.addr, inst.len, c));
            }
            if let (Some(a), Some(b)) = (f.insts.first(), f.insts.last()) {
                fspans.push((
                    a.addr,
                    b.addr + b.len,
                    GC_ENTRIES.contains(&f.name.as_str()),
                ));
                starts.insert(f.name.clone(), a.addr);
            }
        }
        spans.sort_by_key(|s| s.0);
        fspans.sort_by_key(|s| s.0);
        ClassMap {
            spans,
            funcs: fspans,
            starts,
        }
    }

    /// Whether `pc` lies in one of the collector's entry points.
    fn in_gc_entry(&self, pc: u64) -> bool {
        let i = self.funcs.partition_point(|f| f.0 <= pc);
        i > 0 && pc < self.funcs[i - 1].1 && self.funcs[i - 1].2
    }

    /// The PC of `symbol + offset`, where the binary has that function.
    pub fn pc_of(&self, symbol: &str, offset: u64) -> Option<u64> {
        self.starts.get(symbol).map(|a| a + offset)
    }

    /// The class of one sampled stack (PCs innermost first: the leaf is the instruction
    /// hit, callers are return addresses or inside their call, so pc - 1 is looked up): a
    /// stack under a GC entry point is GC unless its leaf is a write-barrier instruction.
    pub fn class_of_stack(&self, pcs: &[u64]) -> Class {
        let Some(&leaf) = pcs.first() else {
            return Class::Other;
        };
        let c = self.class_of(leaf);
        if c == Class::WriteBarrier || c == Class::Gc {
            return c;
        }
        let under_gc = self.in_gc_entry(leaf)
            || pcs[1..]
                .iter()
                .any(|&pc| pc > 0 && self.in_gc_entry(pc - 1));
        if under_gc {
            Class::Gc
        } else {
            c
        }
    }

    /// The class of the instruction containing `pc` (Other when no instruction does: the
    /// vDSO, a PC outside the text).
    pub fn class_of(&self, pc: u64) -> Class {
        let i = self.spans.partition_point(|s| s.0 <= pc);
        if i == 0 {
            return Class::Other;
        }
        let (a, len, c) = self.spans[i - 1];
        if pc < a + len.max(1) {
            c
        } else {
            Class::Other
        }
    }

    /// How many instructions of each class (in `Class::ALL` order).
    pub fn counts(&self) -> [u64; 5] {
        let mut out = [0u64; 5];
        for s in &self.spans {
            out[s.2.index()] += 1;
        }
        out
    }
}

/// Disassemble `bin` with `go tool objdump` and classify it.
pub fn class_map_of(go: &Path, bin: &Path) -> Result<ClassMap> {
    let out = Command::new(go)
        .args(["tool", "objdump"])
        .arg(bin)
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} tool objdump", go.display()))?;
    if !out.status.success() {
        bail!(
            "go tool objdump {} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let funcs = parse_objdump(&String::from_utf8_lossy(&out.stdout));
    if funcs.is_empty() {
        bail!("go tool objdump {} printed no functions", bin.display());
    }
    Ok(ClassMap::new(&funcs))
}

/// Samples per class from pprof's stacks `[count, leaf pc, caller pcs...]`.
pub fn attribute(map: &ClassMap, stacks: &[Vec<u64>]) -> [u64; 5] {
    let mut out = [0u64; 5];
    for st in stacks {
        let Some((&n, pcs)) = st.split_first() else {
            continue;
        };
        out[map.class_of_stack(pcs).index()] += n;
    }
    out
}

/// One frame line of `perf script -F period,ip,sym,symoff --no-inline`: `<ip> <symbol>+0x<off>`
/// (perf prints a user address relative to its mapping, so the frame is placed by its
/// symbol), or `<ip> [unknown]`: (symbol, offset), None where perf named no symbol.
pub fn perf_frame(line: &str) -> Option<(&str, u64)> {
    let (_ip, rest) = line.trim().split_once(char::is_whitespace)?;
    let (sym, off) = rest.trim().rsplit_once("+0x")?;
    Some((sym, u64::from_str_radix(off.trim(), 16).ok()?))
}

/// Samples per class from `perf script -F period,ip,sym,symoff --no-inline` output read
/// line by line: a line that does not start with a tab opens a sample (its period), the
/// tab-led lines after it are its frames, innermost first. A frame in no function of the
/// binary (the vDSO, perf's own exec) is PC 0 (class other).
pub fn attribute_perf<R: std::io::BufRead>(map: &ClassMap, r: R) -> Result<[u64; 5]> {
    let mut out = [0u64; 5];
    let mut pcs: Vec<u64> = Vec::new();
    let mut open = false;
    for line in r.lines() {
        let line = line.context("reading perf script output")?;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with('\t') {
            let pc = perf_frame(&line)
                .and_then(|(sym, off)| map.pc_of(sym, off))
                .unwrap_or(0);
            pcs.push(pc);
            continue;
        }
        if open {
            out[map.class_of_stack(&pcs).index()] += 1;
        }
        pcs.clear();
        open = true;
    }
    if open {
        out[map.class_of_stack(&pcs).index()] += 1;
    }
    Ok(out)
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
";

    #[test]
    fn objdump_parses_and_classifies() {
        let funcs = parse_objdump(DIS);
        assert_eq!(funcs.len(), 2);
        assert_eq!(funcs[0].name, "main.f");
        assert_eq!(funcs[0].insts.len(), 17);
        assert_eq!(funcs[0].insts[1].op, "JBE");
        assert_eq!(funcs[0].insts[1].len, 2);
        let c = classify_func(&funcs[0]);
        use Class::*;
        assert_eq!(
            c,
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
        assert_eq!(map.counts(), [1, 5, 3, 3, 6]);
        // A stack under a GC entry point whose leaf is plain code counts as GC; a barrier
        // leaf stays a barrier.
        let gc = parse_objdump("TEXT runtime.gcDrain(SB) /r/mgcmark.go\n  m.go:1\t\t0x3000\t\te800000000\t\tCALL main.f(SB)\t\n");
        let mut all = funcs.clone();
        all.extend(gc);
        let map = ClassMap::new(&all);
        let got = attribute(
            &map,
            &[
                vec![4, 0x1006, 0x3005],
                vec![6, 0x1006],
                vec![3, 0x1018, 0x3005],
                vec![2, 0x1007],
            ],
        );
        assert_eq!(got, [4, 0, 3, 2, 6]);
        // perf's output: a period line per sample, then its frames.
        let text = "     50000 \n\t  1006 main.f+0x6\n\t  3005 runtime.gcDrain+0x5\n\n     50000 \n\t  1018 main.f+0x18\n\n 50000\n\t 7f00 [unknown]\n";
        assert_eq!(perf_frame("\t  1006 main.f+0x6"), Some(("main.f", 6)));
        assert_eq!(perf_frame("\t 7f00 [unknown]"), None);
        let got = attribute_perf(&map, std::io::Cursor::new(text)).unwrap();
        assert_eq!(got, [1, 0, 1, 0, 1]);
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
