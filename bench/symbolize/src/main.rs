//! costlab's `perf record -a -G CGROUP -e cpu-clock -g` samples, symbolized with blazesym
//! instead of `perf script`: a side-by-side measurement for issue 33 (bench/symbolize-overhead.sh),
//! not part of costlab's workspace.
//!
//! `costlab-symbolize-bench symbolize [--compare] [--debug-syms] PERF.DATA` reads perf.data
//! itself (linux-perf-data: the samples' pids, tids, times and call chains, the MMAP/MMAP2,
//! FORK and COMM records that say which file each address lies in), then names every frame
//! with blazesym: user addresses as file offsets in their ELF file (its .symtab, else its
//! .dynsym; with --debug-syms its DWARF and debug link too), vDSO addresses in this process's
//! own vDSO (the same kernel's), kernel addresses with /proc/kallsyms. It writes what costlab
//! reads from `perf script -F comm,tid,ip,sym,dso --no-inline`; with --compare, what
//! `perf script -F comm,tid,time,ip,sym,symoff,dso --ns --no-inline` writes, so that
//! `costlab-symbolize-bench compare PERF.TXT OURS.TXT` can say how far the two agree.

mod maps;
mod script;

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

use blazesym::helper::ElfResolver;
use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer, TranslateFileOffset as _};
use blazesym::{MaybeDefault, Pid};
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use maps::{Maps, Place};

/// Call-chain entries at or above this are context markers (PERF_CONTEXT_MAX is -4095).
const CONTEXT_MAX: u64 = -4095i64 as u64;
const CONTEXT_KERNEL: u64 = -128i64 as u64;
const CONTEXT_USER: u64 = -512i64 as u64;
/// The kernel's half of the address space (x86-64, arm64).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

#[derive(Debug, Clone, Copy)]
enum Loc {
    Kernel(u64),
    File { file: usize, offset: u64 },
    Unknown(u64),
}

/// A function's name and the address's offset in it; None where nothing named it.
type Named = Option<(String, u64)>;

struct Sample {
    comm: usize,
    tid: i32,
    time: u64,
    frames: Vec<Loc>,
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("costlab-symbolize-bench: {msg}");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: costlab-symbolize-bench symbolize [--compare] [--debug-syms] PERF.DATA | compare PERF.TXT OURS.TXT";
    match args.first().map(String::as_str) {
        Some("symbolize") => {
            let compare = args.iter().any(|a| a == "--compare");
            let debug = args.iter().any(|a| a == "--debug-syms");
            let Some(data) = args.iter().skip(1).find(|a| !a.starts_with("--")) else {
                die(usage)
            };
            if let Err(e) = symbolize(&PathBuf::from(data), compare, debug) {
                die(format!("{data}: {e}"));
            }
        }
        Some("compare") if args.len() == 3 => compare(&args[1], &args[2]),
        _ => die(usage),
    }
}

fn compare(a: &str, b: &str) {
    let read = |p: &str| match std::fs::File::open(p) {
        Ok(f) => script::parse(BufReader::new(f)),
        Err(e) => die(format!("{p}: {e}")),
    };
    let g = script::agree(&read(a), &read(b));
    let pct = |n: usize, d: usize| {
        if d == 0 {
            0.0
        } else {
            100.0 * n as f64 / d as f64
        }
    };
    println!(
        "samples: perf {}, blazesym {}, both {}",
        g.a_samples, g.b_samples, g.matched
    );
    println!(
        "leaf named: perf {:.1}%, blazesym {:.1}%",
        pct(g.a_named, g.a_samples),
        pct(g.b_named, g.b_samples)
    );
    println!(
        "same leaf function: {:.1}% of samples in both ({:.1}% by the same name, {:.1}% an alias of it); named by one only {:.1}%, named differently {:.1}%",
        pct(g.same_name + g.alias, g.matched),
        pct(g.same_name, g.matched),
        pct(g.alias, g.matched),
        pct(g.one_only, g.matched),
        pct(g.differ, g.matched)
    );
    println!(
        "frames at the same depth named alike: {:.1}% of {}",
        pct(g.frames_same, g.frames),
        g.frames
    );
    for e in &g.examples {
        println!("  e.g. {e}");
    }
}

/// This process's vDSO: the start of its mapping and the offset it maps from.
fn own_vdso() -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let mut f = line.split_whitespace();
    let start = u64::from_str_radix(f.next()?.split('-').next()?, 16).ok()?;
    let _perms = f.next()?;
    let off = u64::from_str_radix(f.next()?, 16).ok()?;
    Some((start, off))
}

/// `path`'s separate debug file under /usr/lib/debug/.build-id (Debian's -dbg and -dbgsym
/// packages), found by its build ID as perf finds it: its .symtab names the local functions
/// that a stripped library's .dynsym lacks.
fn debug_file(path: &str) -> Option<PathBuf> {
    let id = blazesym::helper::read_elf_build_id(path).ok()??;
    if id.len() < 2 {
        return None;
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    debug.is_file().then_some(debug)
}

/// The functions at file offsets `offs` of ELF file `path`. Without `debug_syms` as perf
/// names them with --no-inline: from the symbol table of the file's build-ID debug file
/// where there is one (a debug file keeps the program headers' addresses but not their file
/// offsets, so the offsets are turned into addresses with the original file's), else from
/// the file's own .symtab or .dynsym. With `debug_syms` blazesym finds the debug file itself
/// (by debug link) and reads its DWARF.
fn symbolize_elf(
    symbolizer: &Symbolizer,
    path: &str,
    offs: &[u64],
    debug_syms: bool,
) -> blazesym::Result<Vec<Named>> {
    let named = |v: Vec<Symbolized>| -> Vec<Named> {
        v.into_iter()
            .map(|s| match s {
                Symbolized::Sym(s) => Some((s.name.into_owned(), s.offset as u64)),
                Symbolized::Unknown(_) => None,
            })
            .collect()
    };
    if !debug_syms {
        if let Some(debug) = debug_file(path) {
            let original = ElfResolver::open(path)?;
            let mut virt = Vec::with_capacity(offs.len());
            for &o in offs {
                // An offset outside every segment stays unnamed (u64::MAX is in none).
                virt.push(original.file_offset_to_virt_offset(o)?.unwrap_or(u64::MAX));
            }
            let mut elf = Elf::new(debug);
            elf.debug_syms = false;
            return symbolizer
                .symbolize(&Source::Elf(elf), Input::VirtOffset(&virt))
                .map(named);
        }
    }
    let mut elf = Elf::new(path);
    elf.debug_syms = debug_syms;
    symbolizer
        .symbolize(&Source::Elf(elf), Input::FileOffset(offs))
        .map(named)
}

fn symbolize(data: &PathBuf, compare: bool, debug_syms: bool) -> Result<(), String> {
    let (maps, comms, samples) = read_samples(data)?;
    let (names, knames) = name_frames(&maps, &samples, debug_syms);
    write_text(&maps, &comms, &samples, &names, &knames, compare)
}

/// Names of user frames by (file, offset), and of kernel frames by address.
type Names = (HashMap<(usize, u64), Named>, HashMap<u64, Named>);

/// Pass 1: the samples, each frame placed in a file or the kernel; the maps and the commands.
fn read_samples(data: &PathBuf) -> Result<(Maps, Vec<String>, Vec<Sample>), String> {
    let file = std::fs::File::open(data).map_err(|e| e.to_string())?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(BufReader::new(file))
        .map_err(|e| format!("not a perf.data file ({e})"))?;
    let mut maps = Maps::default();
    let mut comms: Vec<String> = Vec::new();
    let mut comm_ids: HashMap<String, usize> = HashMap::new();
    let mut comm_of: HashMap<i32, usize> = HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    while let Some(rec) = record_iter
        .next_record(&mut perf_file)
        .map_err(|e| format!("reading a record: {e}"))?
    {
        let PerfFileRecord::EventRecord { record, .. } = rec else {
            continue;
        };
        let Ok(ev) = record.parse() else { continue };
        match ev {
            EventRecord::Mmap(m) if m.pid != -1 && m.is_executable => {
                let p = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                maps.mmap(m.pid, m.address, m.length, m.page_offset, &p);
            }
            // PROT_EXEC: perf records data maps only with -d, but be sure.
            EventRecord::Mmap2(m) if m.pid != -1 && m.protection & 4 != 0 => {
                let p = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                maps.mmap(m.pid, m.address, m.length, m.page_offset, &p);
            }
            EventRecord::Fork(f) => {
                maps.fork(f.ppid, f.pid);
                if let Some(&c) = comm_of.get(&f.ptid) {
                    comm_of.insert(f.tid, c);
                }
            }
            EventRecord::Comm(c) => {
                if c.is_execve {
                    maps.exec(c.pid);
                }
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                let n = comm_ids.len();
                let id = *comm_ids.entry(name.clone()).or_insert_with(|| {
                    comms.push(name);
                    n
                });
                comm_of.insert(c.tid, id);
            }
            EventRecord::Sample(s) => {
                let pid = s.pid.unwrap_or(-1);
                let tid = s.tid.unwrap_or(-1);
                let mut frames = Vec::new();
                let mut kernel = s.cpu_mode == CpuMode::Kernel;
                let place = |ip: u64, kernel: bool| {
                    if kernel || ip >= KERNEL_START {
                        Loc::Kernel(ip)
                    } else {
                        match maps.find(pid, ip) {
                            Place::File { file, offset } => Loc::File { file, offset },
                            Place::Unmapped => Loc::Unknown(ip),
                        }
                    }
                };
                match &s.callchain {
                    Some(chain) if !chain.is_empty() => {
                        for i in 0..chain.len() {
                            let Some(ip) = chain.get(i) else { break };
                            if ip >= CONTEXT_MAX {
                                kernel = match ip {
                                    CONTEXT_KERNEL => true,
                                    CONTEXT_USER => false,
                                    _ => kernel,
                                };
                                continue;
                            }
                            frames.push(place(ip, kernel));
                        }
                    }
                    _ => {
                        if let Some(ip) = s.ip {
                            frames.push(place(ip, kernel));
                        }
                    }
                }
                let comm = *comm_of.get(&tid).unwrap_or_else(|| {
                    let n = comm_ids.len();
                    comm_ids.entry(":unknown".into()).or_insert_with(|| {
                        comms.push(":unknown".into());
                        n
                    })
                });
                samples.push(Sample {
                    comm,
                    tid,
                    time: s.timestamp.unwrap_or(0),
                    frames,
                });
            }
            _ => {}
        }
    }
    Ok((maps, comms, samples))
}

/// Pass 2: each distinct address named once, one batch per file and one for the kernel.
fn name_frames(maps: &Maps, samples: &[Sample], debug_syms: bool) -> Names {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .build();
    let mut per_file: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut kernel_addrs: Vec<u64> = Vec::new();
    for s in samples {
        for f in &s.frames {
            match *f {
                Loc::Kernel(a) => kernel_addrs.push(a),
                Loc::File { file, offset } => per_file.entry(file).or_default().push(offset),
                Loc::Unknown(_) => {}
            }
        }
    }
    let named = |res: blazesym::Result<Vec<Symbolized>>, n: usize| -> Vec<Named> {
        match res {
            Ok(v) => v
                .into_iter()
                .map(|s| match s {
                    Symbolized::Sym(s) => Some((s.name.into_owned(), s.offset as u64)),
                    Symbolized::Unknown(_) => None,
                })
                .collect(),
            Err(_) => vec![None; n],
        }
    };
    let mut names: HashMap<(usize, u64), Named> = HashMap::new();
    let vdso = own_vdso();
    for (file, mut offs) in per_file {
        offs.sort_unstable();
        offs.dedup();
        let path = &maps.files[file];
        let res = if path == "[vdso]" {
            match vdso {
                Some((start, pgoff)) => {
                    let abs: Vec<u64> = offs.iter().map(|o| start + o - pgoff).collect();
                    let mut p = Process::new(Pid::Slf);
                    p.debug_syms = false;
                    p.perf_map = false;
                    p.map_files = false;
                    named(
                        symbolizer.symbolize(&Source::Process(p), Input::AbsAddr(&abs)),
                        abs.len(),
                    )
                }
                None => vec![None; offs.len()],
            }
        } else if path.starts_with('/') {
            symbolize_elf(&symbolizer, path, &offs, debug_syms)
                .unwrap_or_else(|_| vec![None; offs.len()])
        } else {
            // "//anon", "[heap]", "[stack]", memfd JIT code: no file to read symbols from.
            vec![None; offs.len()]
        };
        for (o, n) in offs.into_iter().zip(res) {
            names.insert((file, o), n);
        }
    }
    kernel_addrs.sort_unstable();
    kernel_addrs.dedup();
    let mut knames: HashMap<u64, Named> = HashMap::new();
    if !kernel_addrs.is_empty() {
        // kallsyms, as perf reads it here (no vmlinux on this machine's kind).
        let k = Kernel {
            kallsyms: MaybeDefault::Some(PathBuf::from("/proc/kallsyms")),
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        let res = named(
            symbolizer.symbolize(&Source::Kernel(k), Input::AbsAddr(&kernel_addrs)),
            kernel_addrs.len(),
        );
        knames.extend(kernel_addrs.iter().copied().zip(res));
    }
    (names, knames)
}

/// Pass 3: the text `perf script` would write.
fn write_text(
    maps: &Maps,
    comms: &[String],
    samples: &[Sample],
    names: &HashMap<(usize, u64), Named>,
    knames: &HashMap<u64, Named>,
    compare: bool,
) -> Result<(), String> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let w = |out: &mut BufWriter<_>, ip: u64, n: Option<&Named>, dso: &str| {
        let r = match n.and_then(|n| n.as_ref()) {
            Some((sym, off)) if compare => writeln!(out, "\t{ip:16x} {sym}+{off:#x} ({dso})"),
            Some((sym, _)) => writeln!(out, "\t{ip:16x} {sym} ({dso})"),
            None => writeln!(out, "\t{ip:16x} [unknown] ({dso})"),
        };
        r.map_err(|e| e.to_string())
    };
    for s in samples {
        let comm = &comms[s.comm];
        let r = if compare {
            writeln!(
                out,
                "{comm} {:5} {}.{:09}:",
                s.tid,
                s.time / 1_000_000_000,
                s.time % 1_000_000_000
            )
        } else {
            writeln!(out, "{comm} {:5}", s.tid)
        };
        r.map_err(|e| e.to_string())?;
        for f in &s.frames {
            match *f {
                Loc::Kernel(a) => w(&mut out, a, knames.get(&a), "[kernel.kallsyms]")?,
                Loc::File { file, offset } => w(
                    &mut out,
                    offset,
                    names.get(&(file, offset)),
                    &maps.files[file],
                )?,
                Loc::Unknown(a) => w(&mut out, a, None, "[unknown]")?,
            }
        }
        writeln!(out).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}
