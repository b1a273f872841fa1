//! A small BPF assembler with named instructions: each instruction is written by its mnemonic
//! (`mov`, `ldx_dw`, `jne_imm`, `call`, ...), jumps go to named labels resolved at the end, and
//! each instruction may carry a comment, so that `listing()` prints the program as a reviewer
//! reads it. Each mnemonic is the `insn` constructor of the same name.

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::{bail, Result};

use crate::insn::{self, Helper, Insn, Reg};
use crate::uapi::*;

/// An instruction waiting for its jump target, or placed.
#[derive(Debug, Clone)]
struct Slot {
    insn: Insn,
    target: Option<String>,
    comment: String,
}

/// A program being written: instructions, labels, comments.
#[derive(Debug, Default, Clone)]
pub struct Asm {
    slots: Vec<Slot>,
    labels: BTreeMap<String, usize>,
    fresh: usize,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    fn put(&mut self, insn: Insn) -> &mut Asm {
        self.slots.push(Slot {
            insn,
            target: None,
            comment: String::new(),
        });
        self
    }

    fn put2(&mut self, pair: [Insn; 2]) -> &mut Asm {
        self.put(pair[0]).put(pair[1])
    }

    fn jump(&mut self, insn: Insn, to: &str) -> &mut Asm {
        self.put(insn);
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
        self.put(insn::mov(dst, src))
    }
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(insn::mov_imm(dst, imm))
    }
    /// dst = (u32) src: the upper half zeroed.
    pub fn mov32(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(insn::mov32(dst, src))
    }
    pub fn add(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(insn::add(dst, src))
    }
    pub fn add_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(insn::add_imm(dst, imm))
    }
    pub fn sub(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(insn::sub(dst, src))
    }
    pub fn mul(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(insn::mul(dst, src))
    }
    pub fn and_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(insn::and_imm(dst, imm))
    }
    pub fn lsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(insn::lsh_imm(dst, imm))
    }
    pub fn lsh(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.put(insn::lsh(dst, src))
    }
    pub fn rsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.put(insn::rsh_imm(dst, imm))
    }

    /// dst = a 64-bit constant (two instruction slots).
    pub fn ld_imm64(&mut self, dst: Reg, v: u64) -> &mut Asm {
        self.put2(insn::ld_imm64(dst, v))
    }
    /// dst = the map whose fd this is (two slots; the loader swaps the fd for the map).
    pub fn ld_map(&mut self, dst: Reg, map_fd: i32) -> &mut Asm {
        self.put2(insn::ld_map(dst, map_fd))
    }

    // Loads and stores: dst = *(size *)(src + off); *(size *)(dst + off) = src or imm.
    pub fn ldx_dw(&mut self, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.put(insn::ldx_dw(dst, src, off))
    }
    pub fn ldx_b(&mut self, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.put(insn::ldx_b(dst, src, off))
    }
    pub fn ldx_w(&mut self, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.put(insn::ldx_w(dst, src, off))
    }
    pub fn stx_dw(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(insn::stx_dw(dst, off, src))
    }
    pub fn stx_w(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(insn::stx_w(dst, off, src))
    }
    pub fn st_w(&mut self, dst: Reg, off: i16, imm: i32) -> &mut Asm {
        self.put(insn::st_w(dst, off, imm))
    }
    pub fn st_dw(&mut self, dst: Reg, off: i16, imm: i32) -> &mut Asm {
        self.put(insn::st_dw(dst, off, imm))
    }
    /// src = atomic_fetch_add((u64 *)(dst + off), src) (kernel 5.12 and later).
    pub fn atomic_fetch_add_dw(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.put(insn::atomic_fetch_add_dw(dst, off, src))
    }

    // Jumps to a label.
    pub fn ja(&mut self, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JA, insn::R0, 0, 0), to)
    }
    pub fn jeq_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JEQ, dst, imm, 0), to)
    }
    pub fn jne_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JNE, dst, imm, 0), to)
    }
    pub fn jne(&mut self, dst: Reg, src: Reg, to: &str) -> &mut Asm {
        self.jump(insn::jmp_reg(BPF_JNE, dst, src, 0), to)
    }
    pub fn jeq(&mut self, dst: Reg, src: Reg, to: &str) -> &mut Asm {
        self.jump(insn::jmp_reg(BPF_JEQ, dst, src, 0), to)
    }
    /// Unsigned dst > imm.
    pub fn jgt_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JGT, dst, imm, 0), to)
    }
    /// Unsigned dst >= imm.
    pub fn jge_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JGE, dst, imm, 0), to)
    }
    /// Unsigned dst < imm.
    pub fn jlt_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JLT, dst, imm, 0), to)
    }
    /// Unsigned dst <= imm.
    pub fn jle_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JLE, dst, imm, 0), to)
    }
    /// Signed dst < imm.
    pub fn jslt_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JSLT, dst, imm, 0), to)
    }
    /// Unsigned dst < src.
    pub fn jlt(&mut self, dst: Reg, src: Reg, to: &str) -> &mut Asm {
        self.jump(insn::jmp_reg(BPF_JLT, dst, src, 0), to)
    }
    /// dst & imm != 0.
    pub fn jset_imm(&mut self, dst: Reg, imm: i32, to: &str) -> &mut Asm {
        self.jump(insn::jmp_imm(BPF_JSET, dst, imm, 0), to)
    }

    pub fn call(&mut self, h: Helper) -> &mut Asm {
        self.put(insn::call(h))
    }
    pub fn exit(&mut self) -> &mut Asm {
        self.put(insn::exit())
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

    /// The program as text: index, labels, opcode, registers, offset, immediate and comment
    /// per instruction.
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
    use crate::insn::{R0, R1};

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
        assert_eq!((p[1].target(1), p[2].target(2)), (Some(4), Some(0)));
        let l = a.listing();
        assert!(l.contains("end:") && l.contains("; skip one") && l.contains("-> top"));
        assert!(l.contains("   1  15 r0 r0 +0 1 -> end  ; skip one"), "{l}");
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

    #[test]
    fn each_mnemonic_is_its_instruction() {
        let mut a = Asm::new();
        a.mov(R1, R0).and_imm(R1, 3).atomic_fetch_add_dw(R0, 0, R1);
        a.call(Helper::KtimeGetNs).exit();
        assert_eq!(
            a.finish().unwrap(),
            vec![
                insn::mov(R1, R0),
                insn::and_imm(R1, 3),
                insn::atomic_fetch_add_dw(R0, 0, R1),
                insn::call(Helper::KtimeGetNs),
                insn::exit()
            ]
        );
    }
}
