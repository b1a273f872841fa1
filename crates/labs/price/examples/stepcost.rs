//! What each step of the split's programs costs a syscall, measured here now: programs that
//! do one step each (nothing, the per-CPU state's lookup, the clock, a helper that names the
//! task or its cgroup, sys_exit's whole path) are attached in turn to the raw `sys_exit`
//! tracepoint while this process calls getppid in a loop; each round times the loop bare and
//! under each program, interleaved, and the medians of the differences are printed (ns a
//! call). Then the cpu-clock tick the split samples user time with (`prog::user_tick` on a
//! software cpu-clock event on every CPU) at two periods, against a loop with no syscalls,
//! timed by this thread's CPU time (% more CPU time). Last, the whole split
//! (`measured::Tracer`, every program attached, this process moved into a fresh cgroup) and
//! the counter `--count-only` attaches (`bpf::SyscallCounter`), each on the getppid loop
//! (ns a call). Run as root: `cargo run --release -p costlab-price --example stepcost [ROUNDS]`.
//! A timing tool for choosing what the programs do (see measured/prog.rs), not a test.

use std::time::Instant;

use costlab_bpf::uapi::perf::PERF_COUNT_SW_CPU_CLOCK;
use costlab_bpf::{attach, Asm, Helper, Hook, Map, FP, R0, R1, R2, R3, R7, R9};
use costlab_price::measured::prog;

const CALLS: u32 = 1_000_000;

fn loop_ns() -> f64 {
    let t = Instant::now();
    for _ in 0..CALLS {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe {
            libc::syscall(libc::SYS_getppid);
        }
    }
    t.elapsed().as_nanos() as f64 / CALLS as f64
}

fn end(a: &mut Asm) {
    a.label("out");
    a.mov_imm(R0, 0);
    a.exit();
}

fn state(a: &mut Asm, map: i32) {
    a.st_w(FP, -4, 0);
    a.mov(R2, FP).add_imm(R2, -4);
    a.ld_map(R1, map);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "out");
    a.mov(R9, R0);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let st_map = Map::percpu_array(prog::STATE_SIZE, 1)?;
    let slots_map = Map::percpu_array(prog::SLOT_SIZE, prog::SLOTS)?;
    let (st, slots) = (st_map.fd(), slots_map.fd());
    steps(rounds, st, slots)?;
    ticks(rounds, st, slots)?;
    whole(rounds)
}

/// Each step's program on raw sys_exit: ns a getppid call, against the bare loop.
fn steps(rounds: usize, st: i32, slots: i32) -> anyhow::Result<()> {
    let mut variants: Vec<(&str, Asm)> = Vec::new();
    let mut a = Asm::new();
    end(&mut a);
    variants.push(("empty program", a));
    let mut a = Asm::new();
    state(&mut a, st);
    a.ldx_w(R1, R9, 0);
    end(&mut a);
    variants.push(("state lookup (inlined)", a));
    let mut a = Asm::new();
    a.call(Helper::KtimeGetNs);
    end(&mut a);
    variants.push(("ktime_get_ns", a));
    let mut a = Asm::new();
    a.call(Helper::GetCurrentPidTgid);
    end(&mut a);
    variants.push(("get_current_pid_tgid", a));
    let mut a = Asm::new();
    a.call(Helper::GetCurrentCgroupId);
    end(&mut a);
    variants.push(("get_current_cgroup_id", a));
    // sys_exit's tracked path: state, clock, the class's slot, cpu += now - since.
    let mut a = Asm::new();
    state(&mut a, st);
    a.call(Helper::KtimeGetNs);
    a.mov(R7, R0);
    a.ldx_w(R1, R9, 4);
    a.stx_w(FP, -8, R1);
    a.mov(R2, FP).add_imm(R2, -8);
    a.ld_map(R1, slots);
    a.call(Helper::MapLookupElem);
    a.jeq_imm(R0, 0, "out");
    a.ldx_dw(R1, R9, 8);
    a.mov(R2, R7).sub(R2, R1);
    a.ldx_dw(R3, R0, 8).add(R3, R2).stx_dw(R0, 8, R3);
    a.stx_dw(R9, 8, R7);
    end(&mut a);
    variants.push(("state + clock + slot + charge", a));

    loop_ns();
    let mut deltas: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut bare = Vec::new();
    for _ in 0..rounds {
        for (i, (_, a)) in variants.iter().enumerate() {
            let b = loop_ns();
            let p = attach(&a.finish()?, &Hook::raw_tracepoint("sys_exit"))?;
            let t = loop_ns();
            drop(p);
            bare.push(b);
            deltas[i].push(t - b);
        }
    }
    println!(
        "getppid bare: {:.1} ns a call (median of {})",
        median(&mut bare),
        bare.len()
    );
    for (i, (name, _)) in variants.iter().enumerate() {
        let mut d = deltas[i].clone();
        println!(
            "{name:32} +{:.1} ns a call  {:?}",
            median(&mut d),
            deltas[i]
                .iter()
                .map(|x| (x * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// The cpu-clock tick's cost on a loop without syscalls: % more CPU time, period 1 ms and 4 ms.
fn ticks(rounds: usize, st: i32, slots: i32) -> anyhow::Result<()> {
    let spin = || {
        let cpu = || {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime writes the timespec given.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
        };
        let t0 = cpu();
        let mut x = 1u64;
        for i in 0..300_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        std::hint::black_box(x);
        cpu() - t0
    };
    let m = prog::Maps {
        slots,
        state: st,
        tasks: slots,
        work: slots,
        by_fd: None,
        seen: slots,
    };
    for period_ms in [1u64, 4] {
        let mut more = Vec::new();
        for _ in 0..rounds {
            let b = spin();
            let p = attach(
                &prog::user_tick(&m).finish()?,
                &Hook::PerfSoftware {
                    config: PERF_COUNT_SW_CPU_CLOCK,
                    period: period_ms * 1_000_000,
                    name: "cpu-clock".into(),
                },
            )?;
            let t = spin();
            drop(p);
            more.push(100.0 * (t - b) / b);
        }
        println!(
            "user_tick every {period_ms} ms                +{:.2}% CPU time  {:?}",
            median(&mut more.clone()),
            more.iter()
                .map(|x| (x * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// The whole split and the counting-only counter, this process in a cgroup of its own.
fn whole(rounds: usize) -> anyhow::Result<()> {
    let cg = costlab_price::count::Cgroup::create()?;
    let own = std::fs::read_to_string("/proc/self/cgroup")?;
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .to_string();
    let home = cg
        .dir
        .ancestors()
        .find(|d| {
            d.join("cgroup.controllers").exists()
                && !d.join("..").join("cgroup.controllers").exists()
        })
        .map(|root| root.join(own.trim_start_matches('/')))
        .ok_or_else(|| {
            anyhow::anyhow!("cannot find the cgroup v2 root above {}", cg.dir.display())
        })?;
    std::fs::write(cg.dir.join("cgroup.procs"), "0")?;
    let id = costlab_price::bpf::cgroup_id(&cg.dir)?;
    let mut split = Vec::new();
    let mut counter = Vec::new();
    for _ in 0..rounds {
        let b = loop_ns();
        let t = costlab_price::measured::Tracer::attach(id)?;
        let s = loop_ns();
        drop(t);
        let c = costlab_price::bpf::SyscallCounter::attach(costlab_price::bpf::Whose::Cgroup(id))?;
        let n = loop_ns();
        drop(c);
        split.push(s - b);
        counter.push(n - b);
    }
    std::fs::write(home.join("cgroup.procs"), "0")?;
    drop(cg);
    for (name, v) in [
        ("the whole split (Tracer)", split),
        ("SyscallCounter (--count-only)", counter),
    ] {
        println!(
            "{name:32} +{:.1} ns a call  {:?}",
            median(&mut v.clone()),
            v.iter()
                .map(|x| (x * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}
