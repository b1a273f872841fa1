//! Classifying a Go binary's instructions: `go tool objdump` parsed into functions, and
//! each instruction given its class (GC work, prologue, write barrier, safety check, the
//! load a check folds in, or other) by the rules the attribution module's doc explains.

use costlab_core::symbols::user::go_runtime;
use costlab_core::symbols::GoRuntime;

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
    if let Some(c) = whole_class(&f.name) {
        return vec![c; n];
    }
    let mut cls = vec![Class::Other; n];
    mark_prologue(f, &mut cls);
    mark_write_barriers(f, &mut cls);
    mark_safety(f, &mut cls);
    mark_folded_loads(f, &mut cls);
    mark_after_syscall(f, &mut cls);
    cls
}

/// The class of a whole runtime function (a write barrier, the collector, stack growth, as
/// `costlab_core::symbols` names them); None for one classified instruction by instruction.
pub fn whole_class(name: &str) -> Option<Class> {
    go_runtime(name).map(|g| match g {
        GoRuntime::Gc => Class::Gc,
        GoRuntime::WriteBarrier => Class::WriteBarrier,
        GoRuntime::StackGrowth => Class::Prologue,
    })
}

/// Give instruction `i` class `c` unless an earlier pass classed it.
fn set(cls: &mut [Class], i: usize, c: Class) {
    if i < cls.len() && cls[i] == Class::Other {
        cls[i] = c;
    }
}

/// Prologue: the stack-bound check in the first few instructions, its branch to a block
/// that calls morestack, and that block up to its jump back.
fn mark_prologue(f: &Func, cls: &mut [Class]) {
    let n = f.insts.len();
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
                set(cls, k, Class::Prologue);
            }
            for k in t..n {
                set(cls, k, Class::Prologue);
                if f.insts[k].op == "JMP" || f.insts[k].op.starts_with("RET") {
                    break;
                }
            }
        }
        break;
    }
}

/// Write barriers: the test of runtime.writeBarrier, its branch, and the barrier block.
fn mark_write_barriers(f: &Func, cls: &mut [Class]) {
    let n = f.insts.len();
    for i in 0..n {
        if !f.insts[i].args.contains("runtime.writeBarrier(SB)") {
            continue;
        }
        set(cls, i, Class::WriteBarrier);
        let Some(jcc) = f.insts.get(i + 1) else {
            continue;
        };
        if !is_cond_jump(&jcc.op) {
            continue;
        }
        set(cls, i + 1, Class::WriteBarrier);
        let Some(t) = jump_target(jcc).and_then(|t| index_of(f, t)) else {
            continue;
        };
        if jcc.op == "JE" || jcc.op == "JEQ" {
            // The branch skips the barrier when it is off: the block is the fall-through,
            // up to the branch target (where the plain store is).
            for k in i + 2..t.min(i + 26) {
                set(cls, k, Class::WriteBarrier);
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
            set(cls, k, Class::WriteBarrier);
            if f.insts[k].op == "JMP" || f.insts[k].op.starts_with("RET") {
                break;
            }
        }
    }
}

/// Safety checks: a conditional branch whose taken or fall-through path calls a bounds,
/// slice, divide or shift panic; the compare or test before it; the panic call itself;
/// and the nil-check probes the compiler inserts where no load would fault first.
fn mark_safety(f: &Func, cls: &mut [Class]) {
    let n = f.insts.len();
    for i in 0..n {
        let inst = &f.insts[i];
        if call_target(inst).is_some_and(is_safety_panic) {
            set(cls, i, Class::Safety);
            continue;
        }
        if inst.op == "TESTB" && inst.args.starts_with("AL, 0(") {
            set(cls, i, Class::Safety);
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
            set(cls, i, Class::Safety);
            if i > 0 && is_compare(&f.insts[i - 1].op) {
                set(cls, i - 1, Class::Safety);
            }
        }
    }
}

/// A check's compare that reads program data, and the jump after it, are the wait of
/// the load it folds in (see the module's doc): memory, whatever check it belongs to.
fn mark_folded_loads(f: &Func, cls: &mut [Class]) {
    let n = f.insts.len();
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
}

/// Where a signal for time spent in a syscall finds the thread: the instruction after
/// the SYSCALL (kept apart so that a sampler that sees user PCs only can tell it).
fn mark_after_syscall(f: &Func, cls: &mut [Class]) {
    let n = f.insts.len();
    for i in 1..n {
        if f.insts[i - 1].op == "SYSCALL" {
            set(cls, i, Class::Kernel);
        }
    }
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
