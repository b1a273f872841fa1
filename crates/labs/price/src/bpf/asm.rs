//! A small BPF assembler with named instructions: each instruction is written by its mnemonic
//! (`mov`, `ldx_dw`, `jne_imm`, `call`, ...), jumps go to named labels resolved at the end, and
//! each instruction may carry a comment, so that `listing()` prints the program as a reviewer
//! reads it. The encodings are the kernel's (Documentation/bpf/standardization/
//! instruction-set.rst); the tests check each against its documented byte.

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::{bail, Result};

/// One BPF instruction: opcode, dst and src registers, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    #[cfg(test)]
    pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// The 8 bytes the kernel reads (little-endian: dst in the low nibble).
    pub fn bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

/// A register, r0..r10 (r10 is the read-only frame pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);

pub const R0: Reg = Reg(0);
pub const R1: Reg = Reg(1);
pub const R2: Reg = Reg(2);
pub const R3: Reg = Reg(3);
pub const R4: Reg = Reg(4);
pub const R6: Reg = Reg(6);
pub const R7: Reg = Reg(7);
pub const R8: Reg = Reg(8);
pub const R9: Reg = Reg(9);
pub const FP: Reg = Reg(10);

/// Kernel helpers by their uapi numbers (include/uapi/linux/bpf.h, `___BPF_FUNC_MAPPER`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Helper {
    MapLookupElem = 1,
    MapUpdateElem = 2,
    KtimeGetNs = 5,
    GetCurrentPidTgid = 14,
    GetCurrentCgroupId = 80,
    ProbeReadKernel = 113,
}

// Instruction classes, operations and modes (the opcode's parts).
const ALU64: u8 = 0x07;
const ALU32: u8 = 0x04;
const JMP: u8 = 0x05;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const K: u8 = 0x00;
const X: u8 = 0x08;
const MEM: u8 = 0x60;
const ATOMIC: u8 = 0xc0;
const W: u8 = 0x00;
const DW: u8 = 0x18;

/// An instruction waiting for its jump target, or placed.
#[derive(Debug, Clone)]
struct Slot {
    insn: Insn,
    target: Option<String>,
    comment: String,
}

/// A program being written: instructions, labels, comments.
#[derive(Debug, Default)]
pub struct Asm {
    slots: Vec<Slot>,
    labels: BTreeMap<String, usize>,
    fresh: usize,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    fn put(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> &mut Asm {
        self.slots.push(Slot {
            insn: Insn {
                code,
                dst: dst.0,
                src: src.0,
                off,
                imm,
            },
            target: None,
            comment: String::new(),
        });
        self
    }

    fn jump(&mut self, code: u8, dst: Reg, src: Reg, imm: i32, to: &str) -> &mut Asm {
        self.put(code, dst, src, 0, imm);
        self.slots.last_mut().expect("just pushed").target = Some(to.to_string());
        self
    }

    /// A label name not used before, for the jumps of one emitted block.
    pub fn fresh(&mut self, stem: &str) -> String {
        self.fresh += 1;
        format!("{stem}.{}", self.fresh)
    }

    /// Put `name` on the next instruction.
    pub fn label(&mut self, name: &str) -> &mut Asm {
        self.labels.insert(name.to_string(), self.slots.len());
        self
    }

    /// Comment the last instruction written.
    pub fn note(&mut self, text: &str) -> &mut Asm {
        if let Some(s) = self.slots.last_mut() {
            s.comment = text.to_string();
        }
        self
    }

    // ALU, 64-bit.
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(ALU64 | 0xb0 | X, dst, src, 0, 0)
    }
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(ALU64 | 0xb0 | K, dst, Reg(0), 0, imm)
    }
    /// dst = (u32) src: the upper half zeroed.
    pub fn mov32(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(ALU32 | 0xb0 | X, dst, src, 0, 0)
    }
    pub fn add(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(ALU64 | X, dst, src, 0, 0)
    }
    pub fn add_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(ALU64 | K, dst, Reg(0), 0, imm)
    }
    pub fn sub(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(ALU64 | 0x10 | X, dst, src, 0, 0)
    }
    pub fn and_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(ALU64 | 0x50 | K, dst, Reg(0), 0, imm)
    }
    pub fn lsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(ALU64 | 0x60 | K, dst, Reg(0), 0, imm)
    }
    pub fn rsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(ALU64 | 0x70 | K, dst, Reg(0), 0, imm)
    }

    /// dst = a 64-bit constant (two instruction slots).
    pub fn ld_imm64(&mut self, dst: Reg, v: u64) -> &mut Asm {
        self.put(0x18, dst, Reg(0), 0, v as u32 as i32);
        self.put(0, Reg(0), Reg(0), 0, (v >> 32) as u32 as i32)
    }
    /// dst = the map whose fd this is (two slots; the loader swaps the fd for the map).
    pub fn ld_map(&mut self, dst: Reg, map_fd: i32) -> &mut Asm {
        self.put(0x18, dst, Reg(1), 0, map_fd);
        self.put(0, Reg(0), Reg(0), 0, 0)
    }

    // Loads and stores: dst = *(size *)(src + off); *(size *)(dst + off) = src or imm.
    pub fn ldx_dw(&mut self, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.put(LDX | MEM | DW, dst, src, off, 0)
    }
    pub fn ldx_w(&mut self, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.put(LDX | MEM | W, dst, src, off, 0)
    }
    pub fn stx_dw(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(STX | MEM | DW, dst, src, off, 0)
    }
    pub fn stx_w(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(STX | MEM | W, dst, src, off, 0)
    }
    pub fn st_w(&mut self, dst: Reg, off: i16, imm: i32) -> &mut Asm {
        self.put(ST | MEM | W, dst, Reg(0), off, imm)
    }
    pub fn st_dw(&mut self, dst: Reg, off: i16, imm: i32) -> &mut Asm {
        self.put(ST | MEM | DW, dst, Reg(0), off, imm)
    }
    /// src = atomic_fetch_add((u64 *)(dst + off), src) (kernel 5.12 and later).
    pub fn atomic_fetch_add_dw(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(STX | ATOMIC | DW, dst, src, off, 0x01)
    }

    // Jumps to a label.
    pub fn ja(&mut self, to: &str) -> &mut Asm {
        self.jump(JMP, Reg(0), Reg(0), 0, to)
    }
    pub fn jeq_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0x10 | K, dst, Reg(0), imm, to)
    }
    pub fn jne_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0x50 | K, dst, Reg(0), imm, to)
    }
    pub fn jne(&mut self, dst: Reg, src: Reg, to: &str) -> &mut Asm {
        self.jump(JMP | 0x50 | X, dst, src, 0, to)
    }
    pub fn jeq(&mut self, dst: Reg, src: Reg, to: &str) -> &mut Asm {
        self.jump(JMP | 0x10 | X, dst, src, 0, to)
    }
    /// Unsigned dst > imm.
    pub fn jgt_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0x20 | K, dst, Reg(0), imm, to)
    }
    /// Unsigned dst >= imm.
    pub fn jge_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0x30 | K, dst, Reg(0), imm, to)
    }
    /// Unsigned dst < imm.
    pub fn jlt_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0xa0 | K, dst, Reg(0), imm, to)
    }
    /// Unsigned dst <= imm.
    pub fn jle_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0xb0 | K, dst, Reg(0), imm, to)
    }
    /// dst & imm != 0.
    pub fn jset_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(JMP | 0x40 | K, dst, Reg(0), imm, to)
    }

    pub fn call(&mut self, h: Helper) -> &mut Asm {
        self.put(JMP | 0x80, Reg(0), Reg(0), 0, h as i32)
    }
    pub fn exit(&mut self) -> &mut Asm {
        self.put(JMP | 0x90, Reg(0), Reg(0), 0, 0)
    }

    /// The instructions with every jump resolved; a label never placed, or a jump too far,
    /// is an error.
    pub fn finish(&self) -> Result<Vec<Insn>> {
        let mut out = Vec::with_capacity(self.slots.len());
        for (at, s) in self.slots.iter().enumerate() {
            let mut insn = s.insn;
            if let Some(t) = &s.target {
                let Some(&to) = self.labels.get(t) else {
                    bail!("BPF program: jump at {at} to a label never placed: {t}");
                };
                let off = to as i64 - at as i64 - 1;
                insn.off = i16::try_from(off)
                    .map_err(|_| anyhow::anyhow!("BPF program: jump at {at} to {t} too far"))?;
            }
            out.push(insn);
        }
        Ok(out)
    }

    /// The program as text: index, labels, mnemonic bytes and comment per instruction.
    pub fn listing(&self) -> String {
        let mut by_at: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for (name, at) in &self.labels {
            by_at.entry(*at).or_default().push(name);
        }
        let mut out = String::new();
        for (at, s) in self.slots.iter().enumerate() {
            for l in by_at.get(&at).into_iter().flatten() {
                let _ = writeln!(out, "{l}:");
            }
            let i = s.insn;
            let target = s
                .target
                .as_deref()
                .map(|t| format!(" -> {t}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{at:4}  {:02x} r{} r{} {:+} {}{target}{}{}",
                i.code,
                i.dst,
                i.src,
                i.off,
                i.imm,
                if s.comment.is_empty() { "" } else { "  ; " },
                s.comment
            );
        }
        out
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(f: impl FnOnce(&mut Asm)) -> Insn {
        let mut a = Asm::new();
        f(&mut a);
        a.finish().unwrap()[0]
    }

    #[test]
    fn each_mnemonic_has_the_documented_opcode() {
        assert_eq!(
            one(|a| {
                a.mov(R6, R1);
            })
            .code,
            0xbf
        );
        assert_eq!(
            one(|a| {
                a.mov_imm(R0, 0);
            })
            .code,
            0xb7
        );
        assert_eq!(
            one(|a| {
                a.mov32(R8, R0);
            })
            .code,
            0xbc
        );
        assert_eq!(
            one(|a| {
                a.add(R1, R2);
            })
            .code,
            0x0f
        );
        assert_eq!(
            one(|a| {
                a.add_imm(R2, -4);
            })
            .code,
            0x07
        );
        assert_eq!(
            one(|a| {
                a.sub(R1, R2);
            })
            .code,
            0x1f
        );
        assert_eq!(
            one(|a| {
                a.and_imm(R1, 4);
            })
            .code,
            0x57
        );
        assert_eq!(
            one(|a| {
                a.lsh_imm(R1, 5);
            })
            .code,
            0x67
        );
        assert_eq!(
            one(|a| {
                a.rsh_imm(R1, 32);
            })
            .code,
            0x77
        );
        assert_eq!(
            one(|a| {
                a.ldx_dw(R1, R6, 8);
            })
            .code,
            0x79
        );
        assert_eq!(
            one(|a| {
                a.ldx_w(R1, R9, 0);
            })
            .code,
            0x61
        );
        assert_eq!(
            one(|a| {
                a.stx_dw(R9, 8, R7);
            })
            .code,
            0x7b
        );
        assert_eq!(
            one(|a| {
                a.stx_w(FP, -4, R1);
            })
            .code,
            0x63
        );
        assert_eq!(
            one(|a| {
                a.st_w(FP, -4, 0);
            })
            .code,
            0x62
        );
        assert_eq!(
            one(|a| {
                a.st_dw(FP, -8, 0);
            })
            .code,
            0x7a
        );
        assert_eq!(
            one(|a| {
                a.call(Helper::KtimeGetNs);
            })
            .code,
            0x85
        );
        assert_eq!(
            one(|a| {
                a.exit();
            })
            .code,
            0x95
        );
        let f = one(|a| {
            a.atomic_fetch_add_dw(R0, 0, R1);
        });
        assert_eq!((f.code, f.imm), (0xdb, 1));
    }

    #[test]
    fn jumps_land_on_their_labels_forward_and_back() {
        let mut a = Asm::new();
        a.label("top").mov_imm(R0, 0);
        a.jeq_imm(R0, 1, "end").note("skip one");
        a.jne(R0, R1, "top");
        a.mov_imm(R0, 1);
        a.label("end").exit();
        let p = a.finish().unwrap();
        assert_eq!((p[1].code, p[1].off), (0x15, 2));
        assert_eq!((p[2].code, p[2].off), (0x5d, -3));
        let l = a.listing();
        assert!(l.contains("end:") && l.contains("; skip one") && l.contains("-> top"));
    }

    #[test]
    fn a_missing_label_is_an_error_not_a_wild_jump() {
        let mut a = Asm::new();
        a.ja("nowhere").exit();
        assert!(a.finish().unwrap_err().to_string().contains("nowhere"));
    }

    #[test]
    fn wide_constants_and_maps_take_two_slots() {
        let mut a = Asm::new();
        a.ld_imm64(R1, 0x1234_5678_9abc_def0).ld_map(R1, 9);
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(
            (p[0].imm as u32, p[1].imm as u32),
            (0x9abc_def0, 0x1234_5678)
        );
        assert_eq!((p[2].code, p[2].src, p[2].imm), (0x18, 1, 9));
    }
}
