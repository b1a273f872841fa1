//! What the split needs from the kernel's own type information (/sys/kernel/btf/vmlinux): the
//! offset of `pid` in `struct task_struct` (to read the next task's id at a switch), and a
//! function's BTF id (for a program at its exit, where a kernel allows it). Only the type
//! section's walk is written here: kinds, their sizes, names; no DWARF, no relocation.

use anyhow::{bail, Result};

/// The BTF of one kernel: its types (kind, name offset, info, size-or-type, tail) and strings.
pub struct Btf {
    data: Vec<u8>,
    /// Per type id (from 1): (offset of its record, kind, vlen).
    types: Vec<(usize, u32, u32)>,
    str_start: usize,
    str_len: usize,
}

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_FUNC: u32 = 12;

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

impl Btf {
    pub fn parse(data: Vec<u8>) -> Result<Btf> {
        if data.len() < 24 || data[0..2] != [0x9f, 0xeb] {
            bail!("not little-endian BTF (no 0xeB9F magic)");
        }
        let h = |at| u32_at(&data, at).unwrap_or(0) as usize;
        let hdr_len = h(4);
        let (type_off, type_len, str_off, str_len) = (h(8), h(12), h(16), h(20));
        let start = hdr_len + type_off;
        let end = start + type_len;
        if end > data.len() || hdr_len + str_off + str_len > data.len() {
            bail!("BTF sections run past the file's end");
        }
        let mut types = Vec::new();
        let mut at = start;
        while at + 12 <= end {
            let info = u32_at(&data, at + 4).unwrap_or(0);
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let tail = match kind {
                1 | 14 | 17 => 4,              // int, var, decl tag
                3 => 12,                       // array
                4 | 5 => 12 * vlen as usize,   // struct, union members
                6 => 8 * vlen as usize,        // enum
                13 => 8 * vlen as usize,       // func proto params
                15 | 19 => 12 * vlen as usize, // datasec, enum64
                2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                k => bail!("BTF type kind {k} unknown to this reader (a newer kernel?)"),
            };
            types.push((at, kind, vlen));
            at += 12 + tail;
        }
        Ok(Btf {
            str_start: hdr_len + str_off,
            str_len,
            data,
            types,
        })
    }

    pub fn vmlinux() -> Result<Btf> {
        let data = std::fs::read("/sys/kernel/btf/vmlinux")?;
        Btf::parse(data)
    }

    fn name(&self, off: u32) -> &str {
        let off = off as usize;
        if off >= self.str_len {
            return "";
        }
        let s = &self.data[self.str_start + off..self.str_start + self.str_len];
        let n = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..n]).unwrap_or("")
    }

    fn find(&self, kind: u32, name: &str) -> Option<(u32, usize, u32)> {
        self.types
            .iter()
            .enumerate()
            .find_map(|(i, &(at, k, vlen))| {
                (k == kind && self.name(u32_at(&self.data, at)?) == name).then_some((
                    i as u32 + 1,
                    at,
                    vlen,
                ))
            })
    }

    /// The type id of the kernel function `name`.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.find(KIND_FUNC, name).map(|(id, _, _)| id)
    }

    /// The byte offset of `member` in `struct name`: a member of it, or of an anonymous
    /// struct or union inside it (mm_struct keeps nearly all its members in one).
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        let (_, at, vlen) = self.find(KIND_STRUCT, name)?;
        self.member_in(at, vlen, member, 4)
    }

    /// The size in bytes of `struct name`.
    pub fn struct_size(&self, name: &str) -> Option<u32> {
        let (_, at, _) = self.find(KIND_STRUCT, name)?;
        u32_at(&self.data, at + 8)
    }

    /// `member`'s byte offset in the struct or union whose record is at `at`, looking into
    /// anonymous members `depth` levels down.
    fn member_in(&self, at: usize, vlen: u32, member: &str, depth: u32) -> Option<u32> {
        let info = u32_at(&self.data, at + 4)?;
        let bitfields = info >> 31 == 1;
        let bytes = |rec: usize| -> Option<u32> {
            let off = u32_at(&self.data, rec + 8)?;
            Some(if bitfields { off & 0xff_ffff } else { off } / 8)
        };
        for m in 0..vlen as usize {
            let rec = at + 12 + 12 * m;
            let name = self.name(u32_at(&self.data, rec)?);
            if name == member {
                return bytes(rec);
            }
            if name.is_empty() && depth > 0 {
                let id = (u32_at(&self.data, rec + 4)? as usize).checked_sub(1)?;
                let (inner, kind, n) = *self.types.get(id)?;
                if kind == KIND_STRUCT || kind == KIND_UNION {
                    if let Some(o) = self.member_in(inner, n, member, depth - 1) {
                        return Some(bytes(rec)? + o);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian BTF blob of `records` (u32 words) over the NUL-separated `strs`;
    /// `off` gives a name's offset in `strs`.
    fn blob(strs: &[u8], records: impl Fn(&dyn Fn(&str) -> u32) -> Vec<u32>) -> Vec<u8> {
        let off = |s: &str| {
            let hay = std::str::from_utf8(strs).unwrap();
            hay.find(&format!("\0{s}\0")).unwrap() as u32 + 1
        };
        let t: Vec<u8> = records(&off).iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut d = vec![0x9f, 0xeb, 1, 0];
        for v in [24u32, 0, t.len() as u32, t.len() as u32, strs.len() as u32] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&t);
        d.extend_from_slice(strs);
        d
    }

    /// A BTF blob with: 1 int "int"; 2 struct "task_struct" { int state @0; int pid @64 bytes };
    /// 3 func proto; 4 func "handle_mm_fault".
    fn fixture() -> Vec<u8> {
        blob(
            b"\0int\0task_struct\0state\0pid\0handle_mm_fault\0",
            |off| {
                vec![
                    off("int"),
                    1 << 24,
                    4,
                    32,
                    off("task_struct"),
                    (4 << 24) | 2,
                    128,
                    off("state"),
                    1,
                    0,
                    off("pid"),
                    1,
                    64 * 8,
                    0,
                    13 << 24,
                    0,
                    off("handle_mm_fault"),
                    12 << 24,
                    3,
                ]
            },
        )
    }

    #[test]
    fn finds_a_function_and_a_member() {
        let b = Btf::parse(fixture()).unwrap();
        assert_eq!(b.func_id("handle_mm_fault"), Some(4));
        assert_eq!(b.func_id("nope"), None);
        assert_eq!(b.member_offset("task_struct", "pid"), Some(64));
        assert_eq!(b.member_offset("task_struct", "tgid"), None);
    }

    /// struct mm_struct { struct { int a; int rss_stat @16; } @8; } : rss_stat at 24; the
    /// struct's size read from its record.
    #[test]
    fn a_member_of_an_anonymous_struct_is_found() {
        let d = blob(b"\0int\0mm_struct\0a\0rss_stat\0", |off| {
            vec![
                off("int"),
                1 << 24,
                4,
                32,
                0,
                (4 << 24) | 2,
                20,
                off("a"),
                1,
                0,
                off("rss_stat"),
                1,
                16 * 8,
                off("mm_struct"),
                (4 << 24) | 1,
                64,
                0,
                2,
                8 * 8,
            ]
        });
        let b = Btf::parse(d).unwrap();
        assert_eq!(b.member_offset("mm_struct", "rss_stat"), Some(24));
        assert_eq!(b.member_offset("mm_struct", "nope"), None);
        assert_eq!(b.struct_size("mm_struct"), Some(64));
    }

    #[test]
    fn a_file_that_is_not_btf_is_refused() {
        assert!(Btf::parse(vec![0; 40]).is_err());
    }
}
