//! What the hooks alone cost a syscall-bound program, before any work in them: dd of COUNT
//! (2000000) 512-byte blocks from /dev/zero to /dev/null alone, beside empty programs on the
//! raw tracepoints sys_enter and sys_exit (what the split uses today: every task on the machine
//! takes the slow syscall path while they are attached), and beside empty fentry and fexit
//! programs on x64_sys_call (a BPF trampoline: no flag on any task). Rounds interleave the
//! three (and sys_enter alone); each prints seconds and the ratio to dd alone. Root and BPF needed.
//!
//! `cargo run --release -p costlab-price --example hookfloor [COUNT] [ROUNDS]`

use std::os::fd::OwnedFd;
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use costlab_bpf::prog::Load;
use costlab_bpf::uapi::{AttachType, ProgType};
use costlab_bpf::{Asm, Program, R0};
use costlab_price::measured::btf::Btf;

fn empty() -> Result<Vec<costlab_bpf::Insn>> {
    let mut a = Asm::new();
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

fn raw_tp(name: &str) -> Result<costlab_bpf::Attached> {
    raw_tp_with(name, &empty()?)
}

fn raw_tp_with(name: &str, insns: &[costlab_bpf::Insn]) -> Result<costlab_bpf::Attached> {
    Ok(costlab_bpf::attach(
        insns,
        &costlab_bpf::Hook::raw_tracepoint(name),
    )?)
}

fn tracing(btf_id: u32, at: AttachType) -> Result<(Program, OwnedFd)> {
    let insns = empty()?;
    let mut load = Load::new(ProgType::Tracing, &insns);
    load.expected_attach_type = Some(at);
    load.attach_btf_id = btf_id;
    let p = Program::load_with(&load).map_err(|e| anyhow!("{e}"))?;
    let l = costlab_bpf::link::link_create(&p, at, None)?;
    Ok((p, l))
}

fn dd(count: u64) -> Result<f64> {
    let t = Instant::now();
    let st = Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "bs=512", "status=none"])
        .arg(format!("count={count}"))
        .status()?;
    if !st.success() {
        bail!("dd failed: {st}");
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Programs on sys_enter made of one ingredient each, repeated `n` times, so that the
/// kernel's run statistics give each ingredient's cost (minus the empty program's).
fn parts(count: u64) -> Result<()> {
    use costlab_bpf::{map::Map, Helper, FP, R1, R2};
    let m = Map::percpu_array(64, 1)?;
    let n = 8;
    let mut progs: Vec<(&str, Asm)> = Vec::new();
    progs.push(("empty", Asm::new()));
    let mut a = Asm::new();
    for _ in 0..n {
        a.call(Helper::GetCurrentPidTgid);
    }
    progs.push(("get_current_pid_tgid", a));
    let mut a = Asm::new();
    for _ in 0..n {
        a.call(Helper::KtimeGetNs);
    }
    progs.push(("ktime_get_ns", a));
    let mut a = Asm::new();
    for _ in 0..n {
        a.call(Helper::GetCurrentCgroupId);
    }
    progs.push(("get_current_cgroup_id", a));
    let mut a = Asm::new();
    for _ in 0..n {
        a.st_w(FP, -4, 0);
        a.mov(R2, FP).add_imm(R2, -4);
        a.ld_map(R1, m.fd());
        a.call(Helper::MapLookupElem);
    }
    progs.push(("per-CPU array lookup", a));
    let _stats = costlab_bpf::prog::RunStats::enable()?;
    let mut base = 0.0;
    for (name, mut a) in progs {
        a.mov_imm(R0, 0);
        a.exit();
        let insns = a.finish()?;
        let at = raw_tp_with("sys_enter", &insns)?;
        dd(count)?;
        let r = at.program().run_stats()?;
        let per = r.time_ns as f64 / r.count.max(1) as f64;
        if name == "empty" {
            base = per;
            println!(
                "{name:24} {per:6.1} ns a run ({} runs; the statistics' own clock reads included)",
                r.count
            );
        } else {
            println!(
                "{name:24} {:6.1} ns each ({per:.1} ns a run of {n}, less the empty program's)",
                (per - base) / n as f64
            );
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("parts") {
        return parts(200_000);
    }
    let mut args = std::env::args().skip(1);
    let count: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2_000_000);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let btf = Btf::vmlinux()?;
    let id = btf
        .func_id(&std::env::var("HOOK_FN").unwrap_or("x64_sys_call".into()))
        .ok_or_else(|| anyhow!("no x64_sys_call in this kernel's BTF"))?;
    let mut t: [Vec<f64>; 4] = Default::default();
    let mut refused: Option<String> = None;
    for _ in 0..rounds {
        t[0].push(dd(count)?);
        {
            let _e = raw_tp("sys_enter")?;
            t[3].push(dd(count)?);
            let _x = raw_tp("sys_exit")?;
            t[1].push(dd(count)?);
        }
        match (
            tracing(id, AttachType::TraceFentry),
            tracing(id, AttachType::TraceFexit),
        ) {
            (Ok(_e), Ok(_x)) => t[2].push(dd(count)?),
            (Err(e), _) | (_, Err(e)) => {
                refused = Some(e.to_string());
            }
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = med(&mut t[0].clone());
    for (name, v) in [
        "dd alone",
        "raw_tp sys_enter+sys_exit (empty)",
        "fentry+fexit x64_sys_call (empty)",
        "raw_tp sys_enter only (empty)",
    ]
    .iter()
    .zip(t.iter_mut())
    {
        if v.is_empty() {
            continue;
        }
        let m = med(v);
        println!(
            "{name:36} median {m:.3} s ({:.3}-{:.3})  {:.2}x  {:.1} ns a syscall over alone",
            v[0],
            v[v.len() - 1],
            m / base,
            (m - base) * 1e9 / (2 * count) as f64
        );
    }
    if let Some(e) = refused {
        println!("fentry+fexit x64_sys_call: refused here ({e})");
    }
    Ok(())
}
