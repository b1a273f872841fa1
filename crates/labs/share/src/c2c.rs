//! Core-to-core latency: two pinned threads bounce one cache line with compare-and-swap.
//!
//! The pinger moves the line's value from even to odd, the ponger from odd to even; each CAS
//! can only succeed once the line has come over from the other core, so one ping-pong is two
//! line transfers and one-way latency is the round trip over two. A batch is many round
//! trips (so the clock weighs little), a sample is the median of many short batches (so a
//! preemption or interrupt spoils one batch, not the sample) and a pair's figure is the
//! median of its samples.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use costlab_core::measure::{cancel, cpus, stats};

/// How one pair is sampled.
#[derive(Debug, Clone)]
pub struct C2cSpec {
    /// Samples per pair; each is the median of `batches` short batches of round trips.
    pub samples: usize,
    pub batches: usize,
    /// Each batch runs at least this long (round trips are scaled to reach it). Short, so a
    /// preemption spoils one batch of many rather than the sample.
    pub min_batch: Duration,
    /// Untimed bouncing before the first sample.
    pub warmup: Duration,
}

impl C2cSpec {
    pub fn new(samples: Option<usize>, quick: bool) -> C2cSpec {
        C2cSpec {
            samples: samples.unwrap_or(if quick { 11 } else { 21 }).max(1),
            batches: if quick { 32 } else { 64 },
            min_batch: Duration::from_micros(20),
            warmup: Duration::from_millis(50),
        }
    }
}

/// A round trip that takes longer than this means the other thread is not running.
const STALL: Duration = Duration::from_secs(2);

/// Every unordered pair of `cpus`, in order.
pub fn pairs(cpus: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, &a) in cpus.iter().enumerate() {
        for &b in &cpus[i + 1..] {
            out.push((a, b));
        }
    }
    out
}

/// The first of `cpus` against every other: one row of the matrix, in `cpus.len() - 1` pairs.
pub fn star_pairs(cpus: &[usize]) -> Vec<(usize, usize)> {
    match cpus.split_first() {
        Some((&first, rest)) => rest.iter().map(|&b| (first, b)).collect(),
        None => Vec::new(),
    }
}

/// How many line addresses each pair bounces: lines in different pages and cache sets, so one
/// unlucky address (a set shared with something hot, a slice far from both cores) shows up as
/// spread across addresses instead of as the pair's latency.
pub const ADDRESSES: usize = 4;

/// Page-aligned, freshly mapped memory for one pair's lines, first touched on CPU `a` so the
/// kernel places it on a's node; unmapped when dropped.
struct Lines {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; the threads that share it only touch it through
// atomics (`line`), and it outlives them (scoped threads).
unsafe impl Send for Lines {}
// SAFETY: as for Send: shared references only reach the mapping through atomics.
unsafe impl Sync for Lines {}

impl Lines {
    fn new() -> Result<Lines> {
        let len = ADDRESSES * 4096;
        // SAFETY: an anonymous private mapping with no address hint has no preconditions.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(anyhow!(
                "mapping c2c lines: {}",
                std::io::Error::last_os_error()
            ));
        }
        let lines = Lines {
            base: p.cast(),
            len,
        };
        for i in 0..ADDRESSES {
            // First touch, from the pinned caller: the page lands on its node.
            lines.line(i).store(0, Ordering::SeqCst);
        }
        Ok(lines)
    }

    /// Line `i`: in page i, at a different cache-line index in each page (sets differ).
    fn line(&self, i: usize) -> &AtomicU64 {
        let offset = i * 4096 + ((i * 17) % 64) * 64;
        // SAFETY: offset + 8 <= len, 64-byte aligned within a live mapping of zeroed
        // memory; AtomicU64 has the layout of u64 and the mapping lives as long as &self.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // SAFETY: base/len are what mmap returned; no reference outlives the struct.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// One pair's figures: one-way latency per sample (ns), and each address's median.
#[derive(Debug, Clone)]
pub struct PairFigures {
    pub samples: Vec<f64>,
    pub per_address: Vec<f64>,
}

impl PairFigures {
    /// (max - min) / min of the per-address medians, %: how much the line's address matters.
    pub fn address_spread_pct(&self) -> Option<f64> {
        let lo = self
            .per_address
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = self.per_address.iter().copied().fold(0.0, f64::max);
        (self.per_address.len() > 1 && lo > 0.0).then(|| 100.0 * (hi - lo) / lo)
    }
}

/// Measure the one-way latency between CPUs `a` and `b` over `ADDRESSES` fresh lines: the
/// samples are split between the addresses (at least two each).
pub fn measure_pair(a: usize, b: usize, spec: &C2cSpec) -> Result<Vec<f64>> {
    Ok(measure_pair_lines(a, b, spec)?.samples)
}

/// As `measure_pair`, with each address's median.
pub fn measure_pair_lines(a: usize, b: usize, spec: &C2cSpec) -> Result<PairFigures> {
    if a == b {
        return Err(anyhow!("c2c needs two different CPUs, got {a} twice"));
    }
    // Map and first-touch on CPU a, from a thread of its own (pinning the caller would leave
    // every later lab on CPU a).
    let lines = std::thread::scope(|s| {
        s.spawn(|| cpus::pin_current(a).and_then(|_| Lines::new()))
            .join()
            .map_err(|_| anyhow!("the c2c setup thread panicked"))?
    })?;
    let per = spec.samples.div_ceil(ADDRESSES).max(2);
    let mut all = Vec::with_capacity(per * ADDRESSES);
    let mut per_address = Vec::with_capacity(ADDRESSES);
    for i in 0..ADDRESSES {
        let one = C2cSpec {
            samples: per,
            // Only the first address needs the CPUs brought out of their idle states.
            warmup: if i == 0 { spec.warmup } else { spec.warmup / 4 },
            ..spec.clone()
        };
        let s = bounce(a, b, lines.line(i), &one)?;
        per_address.push(stats::median(&s));
        all.extend(s);
    }
    Ok(PairFigures {
        samples: all,
        per_address,
    })
}

/// Bounce `line` between CPUs `a` and `b`: one value (ns) per sample.
fn bounce(a: usize, b: usize, line: &AtomicU64, spec: &C2cSpec) -> Result<Vec<f64>> {
    line.store(0, Ordering::SeqCst);
    let stop = AtomicBool::new(false);
    let pong_gone = AtomicBool::new(false);

    std::thread::scope(|s| {
        let ponger = s.spawn(|| {
            let result = cpus::pin_current(b).map(|_| pong(line, &stop));
            pong_gone.store(true, Ordering::SeqCst);
            result
        });
        let pinger = s.spawn(|| {
            let result = cpus::pin_current(a).and_then(|_| {
                // Bring this CPU out of a low-power state before calibrating: spin, untimed
                // (the ponger spins from its start).
                let t = Instant::now();
                while t.elapsed() < spec.warmup {
                    std::hint::spin_loop();
                }
                ping_samples(line, &pong_gone, spec)
            });
            stop.store(true, Ordering::SeqCst);
            result
        });
        let result = pinger
            .join()
            .map_err(|_| anyhow!("the c2c thread on CPU {a} panicked"));
        stop.store(true, Ordering::SeqCst);
        let pong_result = ponger
            .join()
            .map_err(|_| anyhow!("the c2c thread on CPU {b} panicked"))?;
        pong_result?;
        result?
    })
}

/// The ponger: answer every odd value with the next even one until told to stop.
fn pong(line: &AtomicU64, stop: &AtomicBool) {
    let mut v = 1u64;
    loop {
        match line.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => v += 2,
            Err(_) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        }
    }
}

/// The pinger's side: calibrate round trips per sample, warm up, take the samples.
fn ping_samples(line: &AtomicU64, pong_gone: &AtomicBool, spec: &C2cSpec) -> Result<Vec<f64>> {
    let mut v = 0u64;
    let mut batch = |rounds: u64| -> Result<Duration> {
        let t0 = Instant::now();
        for _ in 0..rounds {
            let mut spins = 0u32;
            while line
                .compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                spins = spins.wrapping_add(1);
                // Look at the clock rarely: it would add to every round trip otherwise.
                if spins.is_multiple_of(65_536) {
                    if pong_gone.load(Ordering::Relaxed) {
                        return Err(anyhow!("the c2c partner thread stopped answering"));
                    }
                    if t0.elapsed() > STALL {
                        return Err(anyhow!(
                            "one c2c round trip took over {}s: the partner CPU is not running our thread",
                            STALL.as_secs()
                        ));
                    }
                }
            }
            v += 2;
        }
        Ok(t0.elapsed())
    };
    // Size a batch from the fastest of three tries, so one stall does not shrink it.
    let mut rounds = 16u64;
    loop {
        let mut took = Duration::MAX;
        for _ in 0..3 {
            took = took.min(batch(rounds)?);
        }
        if took >= spec.min_batch || rounds >= 1 << 30 {
            break;
        }
        rounds = rounds.saturating_mul(2);
    }
    let warm = Instant::now();
    while warm.elapsed() < spec.warmup {
        batch(rounds)?;
    }
    let mut out = Vec::with_capacity(spec.samples);
    let mut one_way = Vec::with_capacity(spec.batches);
    for _ in 0..spec.samples {
        cancel::check()?;
        one_way.clear();
        for _ in 0..spec.batches.max(1) {
            let took = batch(rounds)?;
            one_way.push(took.as_nanos() as f64 / rounds as f64 / 2.0);
        }
        out.push(stats::median(&one_way));
    }
    Ok(out)
}

/// When a pair's samples fall in two groups far apart (ratio at least `GAP`), the two group
/// medians and sizes, low first: under a hypervisor a vCPU moved to another physical core
/// mid-run, and the latency changed with it.
pub fn two_modes(samples: &[f64]) -> Option<((f64, usize), (f64, usize))> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let (cut, _) = v
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] > 0.0 && w[1] / w[0] >= GAP)
        .max_by(|a, b| (a.1[1] / a.1[0]).total_cmp(&(b.1[1] / b.1[0])))?;
    let (lo, hi) = v.split_at(cut + 1);
    Some(((stats::median(lo), lo.len()), (stats::median(hi), hi.len())))
}

/// Pair latencies laid out by CPU, symmetric (one-way latency has no direction here).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub cpus: Vec<usize>,
    cells: Vec<Option<f64>>,
}

impl Matrix {
    /// From (a, b, latency) triples; CPUs are the sorted union of those named.
    pub fn from_pairs(pairs: &[(usize, usize, f64)]) -> Matrix {
        let mut cpus: Vec<usize> = pairs.iter().flat_map(|p| [p.0, p.1]).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let n = cpus.len();
        let mut m = Matrix {
            cpus,
            cells: vec![None; n * n],
        };
        for &(a, b, lat) in pairs {
            if let (Some(i), Some(j)) = (m.index(a), m.index(b)) {
                m.cells[i * n + j] = Some(lat);
                m.cells[j * n + i] = Some(lat);
            }
        }
        m
    }

    fn index(&self, cpu: usize) -> Option<usize> {
        self.cpus.binary_search(&cpu).ok()
    }

    /// The latency between two CPUs, if measured.
    pub fn get(&self, a: usize, b: usize) -> Option<f64> {
        let (i, j) = (self.index(a)?, self.index(b)?);
        self.cells[i * self.cpus.len() + j]
    }

    /// Rows for a table: the first column names the CPU, the diagonal is "—".
    pub fn rows(&self, prec: usize) -> Vec<Vec<String>> {
        self.cpus
            .iter()
            .map(|&a| {
                let mut row = vec![format!("CPU {a}")];
                row.extend(self.cpus.iter().map(|&b| match self.get(a, b) {
                    _ if a == b => "—".to_string(),
                    Some(x) => format!("{x:.p$}", p = prec),
                    None => "?".to_string(),
                }));
                row
            })
            .collect()
    }
}

/// One level of the grouping: CPUs joined when their latency is at most `threshold`.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub threshold: f64,
    pub groups: Vec<Vec<usize>>,
    /// Largest latency inside any group and smallest between groups at this level.
    pub inside_max: f64,
    pub between_min: Option<f64>,
}

/// Two latencies this far apart (ratio) are different distances, not noise.
pub const GAP: f64 = 1.3;

/// Group CPUs by low mutual latency: each jump of at least `GAP` between consecutive sorted
/// pair latencies is a boundary (SMT siblings, a shared L2, a shared L3, a socket); at each
/// boundary CPUs linked by a latency below it form groups. Levels that would group nothing,
/// or everything, are left out; an empty result means no structure is visible.
pub fn group(m: &Matrix) -> Vec<Level> {
    let mut lats: Vec<f64> = Vec::new();
    for (i, &a) in m.cpus.iter().enumerate() {
        for &b in &m.cpus[i + 1..] {
            if let Some(x) = m.get(a, b) {
                lats.push(x);
            }
        }
    }
    lats.sort_by(f64::total_cmp);
    let mut levels: Vec<Level> = Vec::new();
    for w in lats.windows(2) {
        if w[0] <= 0.0 || w[1] / w[0] < GAP {
            continue;
        }
        let threshold = (w[0] * w[1]).sqrt();
        let groups = components(m, threshold);
        if groups.len() <= 1 || groups.len() == m.cpus.len() {
            continue;
        }
        if levels.last().is_some_and(|l| l.groups == groups) {
            continue;
        }
        let (inside_max, between_min) = spread(m, &groups);
        levels.push(Level {
            threshold,
            groups,
            inside_max,
            between_min,
        });
    }
    levels
}

/// Connected components of the graph whose edges are latencies at most `threshold`.
fn components(m: &Matrix, threshold: f64) -> Vec<Vec<usize>> {
    let n = m.cpus.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for j in i + 1..n {
            if m.cells[i * n + j].is_some_and(|x| x <= threshold) {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut root_of_group: Vec<usize> = Vec::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        match root_of_group.iter().position(|&x| x == r) {
            Some(g) => groups[g].push(m.cpus[i]),
            None => {
                root_of_group.push(r);
                groups.push(vec![m.cpus[i]]);
            }
        }
    }
    groups
}

fn spread(m: &Matrix, groups: &[Vec<usize>]) -> (f64, Option<f64>) {
    let group_of = |cpu: usize| groups.iter().position(|g| g.contains(&cpu));
    let (mut inside_max, mut between_min) = (0.0f64, None::<f64>);
    for (i, &a) in m.cpus.iter().enumerate() {
        for &b in &m.cpus[i + 1..] {
            let Some(x) = m.get(a, b) else { continue };
            if group_of(a) == group_of(b) {
                inside_max = inside_max.max(x);
            } else {
                between_min = Some(between_min.map_or(x, |y| y.min(x)));
            }
        }
    }
    (inside_max, between_min)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake 8-CPU machine: SMT pairs at ~12 ns, 4-CPU L3 groups at ~40 ns, ~110 ns across.
    fn fake_lat(a: usize, b: usize) -> f64 {
        let wobble = ((a * 7 + b * 3) % 5) as f64 * 0.4;
        if a / 2 == b / 2 {
            12.0 + wobble
        } else if a / 4 == b / 4 {
            40.0 + wobble
        } else {
            110.0 + wobble
        }
    }

    #[test]
    fn pairs_cover_each_unordered_pair_once() {
        assert_eq!(pairs(&[0, 2, 5]), vec![(0, 2), (0, 5), (2, 5)]);
        assert!(pairs(&[3]).is_empty());
        assert_eq!(pairs(&(0..8).collect::<Vec<_>>()).len(), 28);
    }

    #[test]
    fn matrix_is_symmetric_over_sparse_cpu_ids() {
        let m = Matrix::from_pairs(&[(9, 2, 50.0), (2, 5, 30.0)]);
        assert_eq!(m.cpus, vec![2, 5, 9]);
        assert_eq!(star_pairs(&[0, 1, 2, 3]), vec![(0, 1), (0, 2), (0, 3)]);
        assert!(star_pairs(&[4]).is_empty());
        assert_eq!(m.get(2, 9), Some(50.0));
        assert_eq!(m.get(9, 2), Some(50.0));
        assert_eq!(m.get(5, 9), None);
        assert_eq!(m.get(4, 9), None);
        let rows = m.rows(1);
        assert_eq!(rows[0], vec!["CPU 2", "—", "30.0", "50.0"]);
        assert_eq!(rows[2], vec!["CPU 9", "50.0", "?", "—"]);
    }

    #[test]
    fn groups_follow_the_cache_hierarchy() {
        let cpus: Vec<usize> = (0..8).collect();
        let triples: Vec<(usize, usize, f64)> = pairs(&cpus)
            .into_iter()
            .map(|(a, b)| (a, b, fake_lat(a, b)))
            .collect();
        let levels = group(&Matrix::from_pairs(&triples));
        assert_eq!(levels.len(), 2, "{levels:?}");
        assert_eq!(
            levels[0].groups,
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert!(levels[0].inside_max < 14.0 && levels[0].between_min.unwrap() >= 40.0);
        assert_eq!(levels[1].groups, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert!(levels[1].threshold > 42.0 && levels[1].threshold < 110.0);
    }

    #[test]
    fn sparse_ids_group_by_latency_not_by_number() {
        // CPUs 0 and 9 share a cache, 4 and 6 share another.
        let lat = |a: usize, b: usize| {
            if (a == 0 && b == 9) || (a == 4 && b == 6) {
                20.0
            } else {
                80.0
            }
        };
        let triples: Vec<_> = pairs(&[0, 4, 6, 9])
            .into_iter()
            .map(|(a, b)| (a, b, lat(a, b)))
            .collect();
        let levels = group(&Matrix::from_pairs(&triples));
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].groups, vec![vec![0, 9], vec![4, 6]]);
    }

    #[test]
    fn uniform_latencies_show_no_structure() {
        let cpus = [0, 1, 2, 3];
        let triples: Vec<_> = pairs(&cpus)
            .into_iter()
            .map(|(a, b)| (a, b, 50.0 + (a + b) as f64))
            .collect();
        assert!(group(&Matrix::from_pairs(&triples)).is_empty());
        assert!(group(&Matrix::from_pairs(&[(0, 1, 45.0)])).is_empty());
    }

    #[test]
    fn two_modes_split_at_the_big_gap() {
        let ((lo, nlo), (hi, nhi)) = two_modes(&[27.0, 106.0, 26.5, 108.0, 105.0]).unwrap();
        assert_eq!((lo, nlo, hi, nhi), (26.75, 2, 106.0, 3));
        assert!(two_modes(&[100.0, 104.0, 110.0, 120.0]).is_none());
        assert!(two_modes(&[50.0]).is_none());
    }

    #[test]
    fn a_pair_bounces_the_line() {
        let allowed = cpus::allowed_cpus();
        if allowed.len() < 2 {
            return; // nothing to bounce between on one CPU
        }
        let spec = C2cSpec {
            samples: 3,
            batches: 4,
            min_batch: Duration::from_micros(20),
            warmup: Duration::from_millis(1),
        };
        let f = measure_pair_lines(allowed[0], allowed[1], &spec).unwrap();
        // Samples are split over the addresses, at least two each.
        assert_eq!(f.samples.len(), ADDRESSES * 2);
        assert_eq!(f.per_address.len(), ADDRESSES);
        assert!(f.samples.iter().all(|x| x.is_finite() && *x > 0.0));
        assert!(f.address_spread_pct().is_some_and(|p| p >= 0.0));
        assert!(measure_pair(allowed[0], allowed[0], &spec).is_err());
        // The caller is left where it was.
        assert_eq!(cpus::allowed_cpus(), allowed);
    }
}
