//! The text both symbolizers write, in `perf script -F comm,tid,time,ip,sym,symoff,dso --ns`'s
//! layout: a header `comm tid secs.nanos:` per sample, then its frames leaf first, each
//! `\tip sym+0xoff (dso)` (`[unknown]` without the offset where nothing named it), a blank
//! line between samples. Parsed here to say how far the two agree.

use std::collections::HashMap;
use std::io::BufRead;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// As printed: a kernel address, or a user address as an offset in its file.
    pub ip: u64,
    /// "" where nothing named it.
    pub sym: String,
    pub off: Option<u64>,
    pub dso: String,
}

impl Frame {
    pub fn named(&self) -> bool {
        !self.sym.is_empty()
    }
    /// Where its function starts (in the printed coordinates), where known.
    pub fn start(&self) -> Option<u64> {
        self.off.map(|o| self.ip.wrapping_sub(o))
    }
}

/// One frame line (without its leading tab).
pub fn parse_frame(line: &str) -> Option<Frame> {
    let t = line.trim();
    let (ip, rest) = t.split_once(' ')?;
    let ip = u64::from_str_radix(ip, 16).ok()?;
    let rest = rest.trim_start();
    let (symoff, dso) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
        _ => (rest, ""),
    };
    let (sym, off) = match symoff.rfind("+0x") {
        Some(i) => match u64::from_str_radix(&symoff[i + 3..], 16) {
            Ok(o) => (&symoff[..i], Some(o)),
            Err(_) => (symoff, None),
        },
        None => (symoff, None),
    };
    let sym = if sym == "[unknown]" { "" } else { sym };
    Some(Frame {
        ip,
        sym: sym.to_string(),
        off,
        dso: dso.to_string(),
    })
}

/// The samples of a text, keyed by (tid, time as printed).
pub fn parse(input: impl BufRead) -> HashMap<(u32, String), Vec<Frame>> {
    let mut out = HashMap::new();
    let mut key: Option<(u32, String)> = None;
    let mut frames = Vec::new();
    for line in input.lines().map_while(Result::ok) {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if let Some(f) = parse_frame(&line) {
                frames.push(f);
            }
            continue;
        }
        if let Some(k) = key.take() {
            out.insert(k, std::mem::take(&mut frames));
        }
        frames.clear();
        // "comm may have spaces  1234 21091.107892460:" — the last two tokens.
        let mut toks = line.split_whitespace().rev();
        let time = toks.next().map(|t| t.trim_end_matches(':').to_string());
        let tid = toks.next().and_then(|t| t.parse::<u32>().ok());
        if let (Some(tid), Some(time)) = (tid, time) {
            key = Some((tid, time));
        }
    }
    if let Some(k) = key {
        out.insert(k, frames);
    }
    out
}

/// How far two symbolizers agree on the same samples.
#[derive(Debug, Default, PartialEq)]
pub struct Agreement {
    pub a_samples: usize,
    pub b_samples: usize,
    /// Samples both wrote (same tid and time).
    pub matched: usize,
    /// Leaf named by each, over its own samples.
    pub a_named: usize,
    pub b_named: usize,
    /// Of the matched: the same leaf name; the same function under another name (an alias:
    /// the same start in the same file); named by one only; named differently.
    pub same_name: usize,
    pub alias: usize,
    pub one_only: usize,
    pub differ: usize,
    /// Frames at the same depth of the matched samples: compared, and with the same name.
    pub frames: usize,
    pub frames_same: usize,
    /// Up to five leaves named differently or by one only, for a reader to judge.
    pub examples: Vec<String>,
}

fn base(dso: &str) -> &str {
    dso.rsplit('/').next().unwrap_or(dso)
}

pub fn agree(
    a: &HashMap<(u32, String), Vec<Frame>>,
    b: &HashMap<(u32, String), Vec<Frame>>,
) -> Agreement {
    let leaf_named = |f: &Vec<Frame>| f.first().is_some_and(Frame::named);
    let mut g = Agreement {
        a_samples: a.len(),
        b_samples: b.len(),
        a_named: a.values().filter(|f| leaf_named(f)).count(),
        b_named: b.values().filter(|f| leaf_named(f)).count(),
        ..Agreement::default()
    };
    let mut keys: Vec<&(u32, String)> = a.keys().collect();
    keys.sort();
    for k in keys {
        let (Some(fa), Some(fb)) = (a.get(k), b.get(k)) else {
            continue;
        };
        g.matched += 1;
        for (x, y) in fa.iter().zip(fb) {
            g.frames += 1;
            if x.sym == y.sym {
                g.frames_same += 1;
            }
        }
        let (Some(x), Some(y)) = (fa.first(), fb.first()) else {
            continue;
        };
        let verdict = if x.sym == y.sym {
            g.same_name += 1;
            None
        } else if x.named() && y.named() {
            if x.start().is_some() && x.start() == y.start() && base(&x.dso) == base(&y.dso) {
                g.alias += 1;
                None
            } else {
                g.differ += 1;
                Some("differ")
            }
        } else {
            g.one_only += 1;
            Some("one only")
        };
        if let Some(v) = verdict {
            if g.examples.len() < 5 {
                let name = |f: &Frame| {
                    if f.named() {
                        f.sym.clone()
                    } else {
                        "[unknown]".into()
                    }
                };
                g.examples.push(format!(
                    "{v}: {} {:#x}: {} / {}",
                    base(&x.dso),
                    x.ip,
                    name(x),
                    name(y)
                ));
            }
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERF: &str = "python3 29138 21091.107892460: \n\tffffffff816ab6e6 try_charge_memcg+0x66 ([kernel.kallsyms])\n\tffffffff816ac05f charge_memcg+0x2f ([kernel.kallsyms])\n\t           98109 _int_malloc+0xda9 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\t               0 [unknown] ([unknown])\n\nbash 29138 21091.108887773: \n\t           238b4 strcmp+0x1414 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n\ntar 29140 21091.116257771: \n\t           7f170 [unknown] (/usr/bin/tar)\n\ntar 29140 21091.117257771: \n\t           f786a __GI___fstatat64+0xa (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\nonly perf 1 1.000000001: \n\t           1 x+0x0 (/a)\n";
    const OURS: &str = "python3 29138 21091.107892460:\n\tffffffff816ab6e6 try_charge_memcg+0x66 ([kernel.kallsyms])\n\tffffffff816ac05f charge_memcg+0x2f ([kernel.kallsyms])\n\t98109 _int_malloc+0xda9 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\t0 [unknown] ([unknown])\n\nbash 29138 21091.108887773:\n\t238b4 [unknown] (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n\ntar 29140 21091.116257771:\n\t7f170 main+0x10 (/usr/bin/tar)\n\ntar 29140 21091.117257771:\n\tf786a fstatat64+0xa (/usr/lib/x86_64-linux-gnu/libc.so.6)\n";

    #[test]
    fn a_frame_line_is_split_into_address_name_offset_and_file() {
        let f = parse_frame("\t           98109 _int_malloc+0xda9 (/usr/lib/libc.so.6)").unwrap();
        assert_eq!(
            f,
            Frame {
                ip: 0x98109,
                sym: "_int_malloc".into(),
                off: Some(0xda9),
                dso: "/usr/lib/libc.so.6".into()
            }
        );
        assert_eq!(f.start(), Some(0x97360));
        let u = parse_frame("\t  7f763cda38a8 [unknown] ([unknown])").unwrap();
        assert!(!u.named());
        assert_eq!(u.off, None);
        // Names with spaces and parentheses (demangled C++) keep them.
        let c =
            parse_frame("\t10 operator new(unsigned long)+0x4 (/usr/lib/libstdc++.so.6)").unwrap();
        assert_eq!(c.sym, "operator new(unsigned long)");
        assert_eq!(c.dso, "/usr/lib/libstdc++.so.6");
        assert_eq!(parse_frame("\tnot-hex x (y)"), None);
    }

    #[test]
    fn two_outputs_are_matched_by_thread_and_time_and_compared_by_leaf() {
        let a = parse(PERF.as_bytes());
        let b = parse(OURS.as_bytes());
        assert_eq!(a.len(), 5);
        assert_eq!(a[&(29138, "21091.107892460".to_string())].len(), 4);
        let g = agree(&a, &b);
        assert_eq!((g.a_samples, g.b_samples, g.matched), (5, 4, 4));
        assert_eq!((g.a_named, g.b_named), (4, 3));
        // python3: same; bash: perf only; tar: ours only; fstatat64: an alias.
        assert_eq!((g.same_name, g.alias, g.one_only, g.differ), (1, 1, 2, 0));
        assert_eq!((g.frames, g.frames_same), (7, 4));
        assert_eq!(g.examples.len(), 2);
        assert!(
            g.examples[0].contains("strcmp / [unknown]"),
            "{:?}",
            g.examples
        );
    }
}
