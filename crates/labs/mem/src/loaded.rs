//! Loaded latency (Intel MLC's `--loaded_latency`, Google's multiload): the chase's latency on
//! one CPU while the other CPUs stream through memory of their own, each waiting `delay` loop
//! steps after every 64-byte line. A large delay is a light load, zero the heaviest; with no
//! load threads at all it is the idle latency, the curve's first point. Each point gives the
//! chase's latency and the load's bandwidth over the same samples, so latency can be read
//! against bandwidth.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::args::MemLoadedArgs;
use super::chase;
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::measure::conditions::Watch;
use costlab_core::measure::region::{PageKind, Region};
use costlab_core::measure::sampler::SAMPLES_PER_SETUP;
use costlab_core::measure::sizes::{human_size, parse_size};
use costlab_core::measure::{cancel, cpus, cycle, SampleSpec};
use costlab_history::report::Outcome;
use costlab_lab::Ctx;

/// The load's kind of traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Read every word of each line.
    Read,
    /// Read each line and write one word of it back (each line is read and written).
    ReadWrite,
}

impl Traffic {
    pub fn name(self) -> &'static str {
        match self {
            Traffic::Read => "read",
            Traffic::ReadWrite => "read-write",
        }
    }

    /// Bytes counted per line: read, or read + written back (as STREAM counts copy).
    pub fn bytes_per_line(self) -> u64 {
        match self {
            Traffic::Read => 64,
            Traffic::ReadWrite => 128,
        }
    }

    fn parse(t: &str) -> Result<Traffic> {
        match t {
            "read" => Ok(Traffic::Read),
            "read-write" | "rw" => Ok(Traffic::ReadWrite),
            _ => Err(usage(format!(
                "unknown traffic '{t}' in --traffic: use read, read-write or both"
            ))),
        }
    }
}

/// The default delays, from no load (None: the idle point) to the heaviest (0).
pub const DELAYS: [Option<u64>; 6] = [None, Some(2000), Some(500), Some(100), Some(20), Some(0)];
pub const QUICK_DELAYS: [Option<u64>; 4] = [None, Some(300), Some(50), Some(0)];

#[derive(Debug, Clone)]
pub struct LoadedPlan {
    pub traffic: Vec<Traffic>,
    pub delays: Vec<Option<u64>>,
    /// The chase's region (larger than the last-level cache).
    pub size: u64,
    /// Each load thread's region.
    pub load_size: u64,
}

impl LoadedPlan {
    /// `costlab run`'s plan: read traffic; quick is four points over a 64 MiB chase.
    pub fn for_run(full: bool) -> LoadedPlan {
        LoadedPlan {
            traffic: if full {
                vec![Traffic::Read, Traffic::ReadWrite]
            } else {
                vec![Traffic::Read]
            },
            delays: if full {
                DELAYS.to_vec()
            } else {
                QUICK_DELAYS.to_vec()
            },
            size: if full { 256 << 20 } else { 64 << 20 },
            load_size: if full { 256 << 20 } else { 128 << 20 },
        }
    }

    /// The two points `mem bandwidth` measures when read fell below copy-nt: idle, and
    /// every other CPU reading at full speed, over regions beyond the caches.
    pub fn for_reading() -> LoadedPlan {
        LoadedPlan {
            traffic: vec![Traffic::Read],
            delays: vec![None, Some(0)],
            size: 256 << 20,
            load_size: 256 << 20,
        }
    }

    pub fn parse(a: &MemLoadedArgs, quick: bool) -> Result<LoadedPlan> {
        if a.traffic.split(',').all(|s| s.trim().is_empty()) {
            return Err(usage("--traffic is empty: give read, read-write or both"));
        }
        // Lists keep the one rule: no empty item, none given twice (docs/src/cli.md).
        let traffic = costlab_core::measure::sizes::parse_list(&a.traffic, Traffic::parse)?;
        let delays = match &a.delays {
            None if quick => QUICK_DELAYS.to_vec(),
            None => DELAYS.to_vec(),
            Some(t) => {
                let steps = costlab_core::measure::sizes::parse_list(t, |w| {
                    costlab_core::measure::units::parse_count(w, "delay", 0, 1 << 30, "2000,100,0")
                })
                .map_err(|e| usage(format!("--delays: {}", costlab_core::error::one_line(&e))))?;
                std::iter::once(None)
                    .chain(steps.into_iter().map(Some))
                    .collect()
            }
        };
        let size = parse_size(costlab_lab::args::one(
            "--sizes",
            &a.size,
            "the loaded chase runs over one region",
        )?)?;
        let load_size = parse_size(&a.load_size)?;
        if size < (1 << 20) || load_size < (1 << 20) {
            return Err(usage(
                "--sizes and --load-size must be at least 1M (and should exceed the last-level cache)",
            ));
        }
        Ok(LoadedPlan {
            traffic,
            delays,
            size,
            load_size,
        })
    }
}

/// One load thread: sweep the region line by line, `delay` loop steps after each line,
/// counting lines every 64 lines, until `stop`.
fn load_loop(region: &Region, traffic: Traffic, delay: u64, lines: &AtomicU64, stop: &AtomicBool) {
    let base = region.raw();
    let n = region.len() / 64;
    let mut acc = 0u64;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            // SAFETY: i < n, so the 64-byte line at i*64 lies inside the region, which
            // outlives this loop; only this thread touches it.
            unsafe {
                let p = base.add(i * 64).cast::<u64>();
                for w in 0..8 {
                    acc = acc.wrapping_add(p.add(w).read_volatile());
                }
                if traffic == Traffic::ReadWrite {
                    p.write_volatile(acc);
                }
            }
            // The delay: a dependent add chain, about a cycle per step (a pause
            // instruction costs tens of cycles on some CPUs and would make the scale coarse).
            let mut d = delay;
            while d > 0 {
                d = black_box(d) - 1;
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        lines.fetch_add(64, Ordering::Relaxed);
    }
    black_box(acc);
}

/// One point: (latency ns per step, bandwidth GB/s) per sample.
///
/// # Safety
///
/// `chase_start` must be a start that `chase::lay_out` returned, and the region it laid the
/// chain out in must stay mapped and unwritten until this returns (the chase thread follows
/// the chain from there).
unsafe fn measure_point(
    chase_start: *const usize,
    chase_cpu: usize,
    loads: &[(usize, &Region)],
    traffic: Traffic,
    delay: Option<u64>,
    spec: &SampleSpec,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let stop = AtomicBool::new(false);
    let lines = AtomicU64::new(0);
    let start = chase_start as usize;
    std::thread::scope(|scope| -> Result<(Vec<f64>, Vec<f64>)> {
        if let Some(d) = delay {
            for &(cpu, region) in loads {
                let (stop, lines) = (&stop, &lines);
                scope.spawn(move || {
                    if cpus::pin_current(cpu).is_ok() {
                        load_loop(region, traffic, d, lines, stop);
                    }
                });
            }
        }
        let lines = &lines;
        let chase = scope.spawn(move || -> Result<(Vec<f64>, Vec<f64>)> {
            cpus::pin_current(chase_cpu)?;
            let mut p = start as *const usize;
            let mut run = |steps: u64| -> (Duration, u64) {
                let l0 = lines.load(Ordering::Relaxed);
                let t0 = Instant::now();
                // SAFETY: `p` is on the chain laid out from `start`, whose region stays
                // mapped until measure_point returns (its caller's promise), and every
                // line of the chain holds the address of the next.
                p = unsafe { chase::chase(p, steps) };
                black_box(p);
                (t0.elapsed(), lines.load(Ordering::Relaxed) - l0)
            };
            let mut steps = 1024u64;
            let began = Instant::now();
            loop {
                let (took, _) = run(steps);
                if took >= spec.min_sample {
                    break;
                }
                let f = (spec.min_sample.as_secs_f64() * 1.2 / took.as_secs_f64().max(1e-9))
                    .clamp(2.0, 100.0);
                steps = (steps as f64 * f) as u64;
            }
            while began.elapsed() < spec.warmup {
                run(steps);
            }
            let (mut lat, mut bw) = (Vec::new(), Vec::new());
            for _ in 0..spec.samples {
                cancel::check()?;
                let (took, l) = run(steps);
                let ns = took.as_nanos() as f64;
                lat.push(ns / steps as f64);
                bw.push((l * traffic.bytes_per_line()) as f64 / ns);
            }
            Ok((lat, bw))
        });
        let r = chase.join();
        stop.store(true, Ordering::Relaxed);
        r.map_err(|_| anyhow::anyhow!("the chase thread panicked"))?
    })
}

/// `costlab mem loaded`: the latency-vs-bandwidth curve.
pub fn loaded(plan: &LoadedPlan, ctx: &Ctx) -> Result<Outcome> {
    let allowed = cpus::allowed_cpus();
    if allowed.len() < 2 {
        return Err(usage(
            "loaded latency needs two CPUs or more (one chases, the others load): allow more CPUs (taskset)",
        ));
    }
    let chase_cpu = allowed[0];
    let load_cpus = &allowed[1..];
    let mut out = Outcome::default();
    cpus::pin_current(chase_cpu)?;
    let next = cycle::sattolo(plan.size as usize / chase::LINE, 0x10ad);
    let mut load_regions = Vec::new();
    for &cpu in load_cpus {
        // First touch on the load thread's own CPU, so its memory is near it.
        cpus::pin_current(cpu)?;
        load_regions.push((cpu, Region::new(plan.load_size, PageKind::Thp)?));
    }
    let loads: Vec<(usize, &Region)> = load_regions.iter().map(|(c, r)| (*c, r)).collect();
    let points: Vec<(Traffic, Option<u64>)> = plan
        .traffic
        .iter()
        .flat_map(|&t| plan.delays.iter().map(move |&d| (t, d)))
        .collect();
    let total = ctx.spec.samples.max(1);
    let rounds = total.div_ceil(SAMPLES_PER_SETUP);
    let bar = costlab_history::report::progress::bar((points.len() * rounds) as u64, "mem loaded");
    // The chase region is mapped afresh every SAMPLES_PER_SETUP samples (its latency depends
    // on where the host backs it, which a rerun redraws), and each mapping serves every point
    // of the curve in turn, so the points' samples are interleaved in time and share one
    // window's conditions.
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let mut bw: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let mut huge: Option<f64> = None;
    let w = Watch::start(&allowed);
    while lat[0].len() < total {
        cpus::pin_current(chase_cpu)?;
        let mut region = Region::new(plan.size, PageKind::Thp)?;
        let start = chase::lay_out(&mut region, &next);
        cpus::pin_current_to(&allowed)?;
        // Samples of 50 ms at least: a DRAM chase of 10 ms moves by several percent with a
        // burst on the host.
        let spec = SampleSpec {
            samples: SAMPLES_PER_SETUP.min(total - lat[0].len()),
            min_sample: ctx.spec.min_sample.max(Duration::from_millis(50)),
            ..ctx.spec.clone()
        };
        for (i, &(traffic, delay)) in points.iter().enumerate() {
            // SAFETY: `start` came from lay_out over `region`, which lives (unwritten) until
            // the end of this iteration of the while loop, past every measure_point.
            let (l, b) = unsafe { measure_point(start, chase_cpu, &loads, traffic, delay, &spec) }?;
            lat[i].extend(l);
            bw[i].extend(b);
            bar.inc(1);
        }
        let f = region.huge_fraction();
        huge = match (huge, f) {
            (Some(old), Some(f)) => Some(old.min(f)),
            (old, f) => old.or(f),
        };
    }
    let conditions = w.finish().pages("thp", huge);
    let mark = out.results.len();
    for (i, &(traffic, delay)) in points.iter().enumerate() {
        let threads = if delay.is_some() { loads.len() } else { 0 };
        let case = || {
            case! {
                "op" => "loaded",
                "traffic" => traffic.name(),
                "load_threads" => threads,
                "delay" => delay.map_or(serde_json::Value::Null, |d| d.into()),
                "block" => plan.size,
                "pages" => "thp",
            }
        };
        out.push(
            super::LAB,
            case(),
            "latency",
            "ns",
            std::mem::take(&mut lat[i]),
        );
        out.push(
            super::LAB,
            case(),
            "bandwidth",
            "GB/s",
            std::mem::take(&mut bw[i]),
        );
    }
    out.attach_conditions(mark, conditions);
    bar.finish_and_clear();
    if huge.is_some_and(|f| f < 0.9) {
        out.notes.push(format!(
            "thp: only {:.0}% of the {} chase region is on huge pages: the latency includes page walks",
            huge.unwrap_or(0.0) * 100.0,
            human_size(plan.size)
        ));
    }
    Ok(out)
}

/// The curve's points for one traffic kind, in plan order: (delay, latency, bandwidth).
pub fn curve<'a>(
    rows: &'a [costlab_history::report::ResultRow],
    traffic: &str,
) -> Vec<(
    Option<u64>,
    &'a costlab_history::report::ResultRow,
    &'a costlab_history::report::ResultRow,
)> {
    rows.iter()
        .filter(|r| r.key("op") == "loaded" && r.key("traffic") == traffic && r.metric == "latency")
        .filter_map(|lat| {
            let bw = rows
                .iter()
                .find(|b| b.metric == "bandwidth" && b.case == lat.case)?;
            Some((lat.case.get("delay").and_then(|d| d.as_u64()), lat, bw))
        })
        .collect()
}

/// The curve's idle point and its heaviest load (the most bandwidth): (idle latency row,
/// heaviest latency row, heaviest bandwidth row).
pub fn idle_and_heaviest<'a>(
    rows: &'a [costlab_history::report::ResultRow],
    traffic: &str,
) -> Option<(
    &'a costlab_history::report::ResultRow,
    &'a costlab_history::report::ResultRow,
    &'a costlab_history::report::ResultRow,
)> {
    let pts = curve(rows, traffic);
    let idle = pts.iter().find(|p| p.0.is_none())?.1;
    let (_, lat, bw) = pts
        .iter()
        .filter(|p| p.0.is_some())
        .max_by(|a, b| a.2.summary.median.total_cmp(&b.2.summary.median))?;
    Some((idle, lat, bw))
}

/// Read the curve: idle latency, the heaviest load's latency and bandwidth.
pub fn reading(points: &[(Option<u64>, f64, f64)]) -> Option<String> {
    let idle = points.iter().find(|p| p.0.is_none())?.1;
    let heavy = points
        .iter()
        .filter(|p| p.0.is_some())
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    Some(format!(
        "latency {:.0} ns idle, {:.0} ns ({:.2}x) with the others loading {:.1} GB/s",
        idle,
        heavy.1,
        heavy.1 / idle,
        heavy.2
    ))
}

/// The cost sheet's line: the heaviest load's latency, read against idle.
pub fn headline(out: &Outcome) -> Option<costlab_lab::Headline> {
    let pts = curve(&out.results, Traffic::Read.name());
    let flat: Vec<(Option<u64>, f64, f64)> = pts
        .iter()
        .map(|(d, l, b)| (*d, l.summary.median, b.summary.median))
        .collect();
    let (_, heavy, _) = idle_and_heaviest(&out.results, Traffic::Read.name())?;
    // The reading is the whole curve's (idle against the heaviest load): every latency on it
    // is an input.
    let inputs: Vec<&costlab_history::report::ResultRow> = pts.iter().map(|(_, l, _)| *l).collect();
    Some(
        costlab_lab::Headline {
            label: "loaded DRAM latency".into(),
            summary: heavy.summary,
            unit: "ns".into(),
            reading: reading(&flat)?,
            ..Default::default()
        }
        .judged_by(&inputs),
    )
}

pub fn render(out: &Outcome) -> String {
    let mut text = String::new();
    for traffic in [Traffic::Read, Traffic::ReadWrite] {
        let pts = curve(&out.results, traffic.name());
        if pts.is_empty() {
            continue;
        }
        let rows: Vec<Vec<String>> = pts
            .iter()
            .map(|(d, lat, bw)| {
                vec![
                    d.map_or("idle".into(), |d| d.to_string()),
                    lat.key("load_threads"),
                    format!(
                        "{}{}",
                        lat.summary.show(1),
                        costlab_history::report::verdict::mark(lat)
                    ),
                    format!(
                        "{}{}",
                        bw.summary.show(2),
                        costlab_history::report::verdict::mark(bw)
                    ),
                ]
            })
            .collect();
        text.push_str(&format!(
            "loaded latency, {} traffic (chase over {}, thp)\n",
            traffic.name(),
            human_size(
                pts[0]
                    .1
                    .case
                    .get("block")
                    .and_then(|b| b.as_u64())
                    .unwrap_or(0)
            )
        ));
        text.push_str(&costlab_history::report::table::render(
            &[
                "delay (steps/line)",
                "load threads",
                "latency ns",
                "load bandwidth GB/s",
            ],
            &rows,
        ));
        text.push('\n');
        let flat: Vec<(Option<u64>, f64, f64)> = pts
            .iter()
            .map(|(d, l, b)| (*d, l.summary.median, b.summary.median))
            .collect();
        if let Some(r) = reading(&flat) {
            text.push_str(&format!("{r}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reading_takes_idle_and_the_heaviest_load() {
        let pts = [
            (None, 100.0, 0.0),
            (Some(500), 110.0, 5.0),
            (Some(0), 150.0, 20.0),
        ];
        let r = reading(&pts).unwrap();
        assert!(r.contains("100 ns idle"), "{r}");
        assert!(
            r.contains("150 ns (1.50x)") && r.contains("20.0 GB/s"),
            "{r}"
        );
        assert!(reading(&pts[1..]).is_none());
    }

    #[test]
    fn traffic_counts_written_bytes_too() {
        assert_eq!(Traffic::Read.bytes_per_line(), 64);
        assert_eq!(Traffic::ReadWrite.bytes_per_line(), 128);
        assert!(Traffic::parse("write").is_err());
    }
}
