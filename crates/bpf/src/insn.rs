//! One BPF instruction, its registers and the kernel's helpers, and the constructors of each
//! instruction the assembler writes (so that a test compares with `insn::mov_imm(R0, 0)`, not
//! with an opcode byte). The encodings are the kernel's (Documentation/bpf/standardization/
//! instruction-set.rst), built from the named parts of `uapi`.

use crate::uapi::*;

/// One BPF instruction: opcode, dst and src registers, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

/// A register, r0..r10 (r10 is the read-only frame pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);

pub const R0: Reg = Reg(0);
pub const R1: Reg = Reg(1);
pub const R2: Reg = Reg(2);
pub const R3: Reg = Reg(3);
pub const R4: Reg = Reg(4);
pub const R5: Reg = Reg(5);
pub const R6: Reg = Reg(6);
pub const R7: Reg = Reg(7);
pub const R8: Reg = Reg(8);
pub const R9: Reg = Reg(9);
pub const FP: Reg = Reg(10);

/// Kernel helpers by their uapi numbers (include/uapi/linux/bpf.h, `___BPF_FUNC_MAPPER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Helper {
    MapLookupElem = 1,
    MapUpdateElem = 2,
    MapDeleteElem = 3,
    KtimeGetNs = 5,
    GetCurrentPidTgid = 14,
    GetCurrentTask = 35,
    GetCurrentCgroupId = 80,
    ProbeReadUser = 112,
    ProbeReadKernel = 113,
    ProbeReadUserStr = 114,
}

/// The bytes of one encoded instruction.
pub const INSN_SIZE: usize = 8;

/// A map update's flag: create or replace (BPF_ANY).
pub const BPF_ANY: i32 = 0;
/// A map update's flag: create only, fail where the key is there (BPF_NOEXIST).
pub const BPF_NOEXIST: i32 = 1;

impl Insn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    const fn of(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(code, dst.0, src.0, off, imm)
    }

    /// The 8 bytes the kernel reads (little-endian: dst in the low nibble).
    pub fn bytes(&self) -> [u8; INSN_SIZE] {
        let mut b = [0u8; INSN_SIZE];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    /// A jump that goes by its offset: `ja` or a conditional one (not a call, not an exit).
    pub fn is_jump(&self) -> bool {
        matches!(class(self.code), BPF_JMP | BPF_JMP32)
            && !matches!(op(self.code), BPF_CALL | BPF_EXIT)
    }

    /// Where a jump at index `at` lands; None for anything else.
    pub fn target(&self, at: usize) -> Option<usize> {
        self.is_jump()
            .then(|| (at as i64 + 1 + self.off as i64) as usize)
    }

    pub fn is_exit(&self) -> bool {
        self.code == BPF_JMP | BPF_EXIT
    }

    pub fn is_call(&self, h: Helper) -> bool {
        self.code == BPF_JMP | BPF_CALL && self.imm == h as i32
    }

    /// The fd of the map a `ld_map` loads (its first slot); None for anything else.
    pub fn map_fd(&self) -> Option<i32> {
        (self.code == BPF_LD | BPF_IMM | BPF_DW && self.src == BPF_PSEUDO_MAP_FD)
            .then_some(self.imm)
    }

    /// The first slot of a 64-bit constant's load (`ld_imm64`).
    pub fn is_ld_imm64(&self) -> bool {
        self.code == BPF_LD | BPF_IMM | BPF_DW && self.src == 0
    }
}

fn alu64_x(op: u8, dst: Reg, src: Reg) -> Insn {
    Insn::of(BPF_ALU64 | op | BPF_X, dst, src, 0, 0)
}
fn alu64_k(op: u8, dst: Reg, imm: i32) -> Insn {
    Insn::of(BPF_ALU64 | op | BPF_K, dst, R0, 0, imm)
}

// ALU, 64-bit.
pub fn mov(dst: Reg, src: Reg) -> Insn {
    alu64_x(BPF_MOV, dst, src)
}
pub fn mov_imm(dst: Reg, imm: i32) -> Insn {
    alu64_k(BPF_MOV, dst, imm)
}
/// dst = (u32) src: the upper half zeroed.
pub fn mov32(dst: Reg, src: Reg) -> Insn {
    Insn::of(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
}
pub fn add(dst: Reg, src: Reg) -> Insn {
    alu64_x(BPF_ADD, dst, src)
}
pub fn add_imm(dst: Reg, imm: i32) -> Insn {
    alu64_k(BPF_ADD, dst, imm)
}
pub fn sub(dst: Reg, src: Reg) -> Insn {
    alu64_x(BPF_SUB, dst, src)
}
pub fn mul(dst: Reg, src: Reg) -> Insn {
    alu64_x(BPF_MUL, dst, src)
}
pub fn and_imm(dst: Reg, imm: i32) -> Insn {
    alu64_k(BPF_AND, dst, imm)
}
pub fn lsh_imm(dst: Reg, imm: i32) -> Insn {
    alu64_k(BPF_LSH, dst, imm)
}
/// dst <<= src.
pub fn lsh(dst: Reg, src: Reg) -> Insn {
    alu64_x(BPF_LSH, dst, src)
}
pub fn rsh_imm(dst: Reg, imm: i32) -> Insn {
    alu64_k(BPF_RSH, dst, imm)
}

/// dst = a 64-bit constant (two instruction slots).
pub fn ld_imm64(dst: Reg, v: u64) -> [Insn; 2] {
    [
        Insn::of(BPF_LD | BPF_IMM | BPF_DW, dst, R0, 0, v as u32 as i32),
        Insn::of(0, R0, R0, 0, (v >> 32) as u32 as i32),
    ]
}
/// dst = the map whose fd this is (two slots; the loader swaps the fd for the map).
pub fn ld_map(dst: Reg, map_fd: i32) -> [Insn; 2] {
    [
        Insn::of(
            BPF_LD | BPF_IMM | BPF_DW,
            dst,
            Reg(BPF_PSEUDO_MAP_FD),
            0,
            map_fd,
        ),
        Insn::of(0, R0, R0, 0, 0),
    ]
}

// Loads and stores: dst = *(size *)(src + off); *(size *)(dst + off) = src or imm.
pub fn ldx_dw(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::of(BPF_LDX | BPF_MEM | BPF_DW, dst, src, off, 0)
}
pub fn ldx_b(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::of(BPF_LDX | BPF_MEM | BPF_B, dst, src, off, 0)
}
pub fn ldx_w(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::of(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
}
pub fn stx_dw(dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::of(BPF_STX | BPF_MEM | BPF_DW, dst, src, off, 0)
}
pub fn stx_w(dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::of(BPF_STX | BPF_MEM | BPF_W, dst, src, off, 0)
}
pub fn st_w(dst: Reg, off: i16, imm: i32) -> Insn {
    Insn::of(BPF_ST | BPF_MEM | BPF_W, dst, R0, off, imm)
}
pub fn st_dw(dst: Reg, off: i16, imm: i32) -> Insn {
    Insn::of(BPF_ST | BPF_MEM | BPF_DW, dst, R0, off, imm)
}
/// src = atomic_fetch_add((u64 *)(dst + off), src) (kernel 5.12 and later).
pub fn atomic_fetch_add_dw(dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::of(
        BPF_STX | BPF_ATOMIC | BPF_DW,
        dst,
        src,
        off,
        BPF_ADD as i32 | BPF_FETCH,
    )
}

/// A jump by `off` instructions: `op` one of BPF_JA, BPF_JEQ ... against imm (BPF_K).
pub fn jmp_imm(op: u8, dst: Reg, imm: i32, off: i16) -> Insn {
    Insn::of(BPF_JMP | op | BPF_K, dst, R0, off, imm)
}
/// A jump by `off` instructions comparing dst with src (BPF_X).
pub fn jmp_reg(op: u8, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::of(BPF_JMP | op | BPF_X, dst, src, off, 0)
}
pub fn call(h: Helper) -> Insn {
    Insn::of(BPF_JMP | BPF_CALL, R0, R0, 0, h as i32)
}
pub fn exit() -> Insn {
    Insn::of(BPF_JMP | BPF_EXIT, R0, R0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each instruction against its documented opcode byte (instruction-set.rst's tables).
    #[test]
    fn each_instruction_has_the_documented_opcode() {
        let codes = [
            (mov(R6, R1), 0xbf),
            (mov_imm(R0, 0), 0xb7),
            (mov32(R8, R0), 0xbc),
            (add(R1, R2), 0x0f),
            (add_imm(R2, -4), 0x07),
            (sub(R1, R2), 0x1f),
            (and_imm(R1, 4), 0x57),
            (lsh_imm(R1, 5), 0x67),
            (rsh_imm(R1, 32), 0x77),
            (ldx_dw(R1, R6, 8), 0x79),
            (ldx_w(R1, R9, 0), 0x61),
            (stx_dw(R9, 8, R7), 0x7b),
            (stx_w(FP, -4, R1), 0x63),
            (st_w(FP, -4, 0), 0x62),
            (st_dw(FP, -8, 0), 0x7a),
            (call(Helper::KtimeGetNs), 0x85),
            (exit(), 0x95),
            (jmp_imm(BPF_JA, R0, 0, 1), 0x05),
            (jmp_imm(BPF_JEQ, R0, 0, 1), 0x15),
            (jmp_imm(BPF_JGT, R0, 0, 1), 0x25),
            (jmp_imm(BPF_JGE, R0, 0, 1), 0x35),
            (jmp_imm(BPF_JSET, R0, 0, 1), 0x45),
            (jmp_imm(BPF_JNE, R0, 0, 1), 0x55),
            (jmp_imm(BPF_JLT, R0, 0, 1), 0xa5),
            (jmp_imm(BPF_JLE, R0, 0, 1), 0xb5),
            (jmp_reg(BPF_JEQ, R0, R1, 1), 0x1d),
            (jmp_reg(BPF_JNE, R0, R1, 1), 0x5d),
        ];
        for (i, want) in codes {
            assert_eq!(i.code, want, "{i:?}");
        }
        let f = atomic_fetch_add_dw(R0, 0, R1);
        assert_eq!((f.code, f.imm), (0xdb, 1));
        assert_eq!(ld_imm64(R1, 0)[0].code, 0x18);
    }

    #[test]
    fn the_bytes_put_dst_in_the_low_nibble_and_are_little_endian() {
        assert_eq!(ldx_dw(R1, R6, 8).bytes(), [0x79, 0x61, 8, 0, 0, 0, 0, 0]);
        assert_eq!(
            add_imm(R2, -4).bytes(),
            [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn jumps_calls_exits_and_map_loads_are_told_apart() {
        let j = jmp_imm(BPF_JNE, R1, 0, 3);
        assert!(j.is_jump() && !j.is_exit());
        assert_eq!(j.target(10), Some(14));
        assert!(!call(Helper::MapLookupElem).is_jump());
        assert!(call(Helper::MapLookupElem).is_call(Helper::MapLookupElem));
        assert!(!call(Helper::MapLookupElem).is_call(Helper::KtimeGetNs));
        assert!(exit().is_exit() && !exit().is_jump());
        assert_eq!(ld_map(R1, 9)[0].map_fd(), Some(9));
        assert_eq!(ld_imm64(R1, 9)[0].map_fd(), None);
        assert!(ld_imm64(R1, 9)[0].is_ld_imm64() && !ld_map(R1, 9)[0].is_ld_imm64());
    }
}
