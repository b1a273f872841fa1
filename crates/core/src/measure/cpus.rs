//! Which CPUs we may run on, pinning, and the `--threads` / `--cpus` checks every lab shares;
//! the sysfs formats they are read in (a CPU list, a cache's size).

use crate::error::usage;

/// A sysfs size ("32K", "1024K", "32768K", "2M") in bytes.
pub fn parse_sysfs_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1u64 << 10),
        'M' | 'm' => (&t[..t.len() - 1], 1 << 20),
        'G' | 'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// Parse a kernel CPU list ("0-3,8,10-11"), as in sysfs and `--cpus`, sorted. A CPU given twice
/// (`0-3,2`) is refused, naming it: every list option keeps that rule.
pub fn parse_cpu_list(text: &str) -> anyhow::Result<Vec<usize>> {
    let mut cpus = Vec::new();
    let t = text.trim();
    if t.is_empty() {
        return Ok(cpus);
    }
    for part in t.split(',') {
        let part = part.trim();
        let bad = || {
            usage(format!(
                "bad CPU list '{text}': use ids and ranges like 0-3,6"
            ))
        };
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if b < a || b - a > 1 << 16 {
                return Err(bad());
            }
            cpus.extend(a..=b);
        } else {
            cpus.push(part.parse().map_err(|_| bad())?);
        }
    }
    cpus.sort_unstable();
    if let Some(w) = cpus.windows(2).find(|w| w[0] == w[1]) {
        return Err(usage(format!(
            "bad CPU list '{text}': CPU {} is given twice; give each CPU once",
            w[0]
        )));
    }
    Ok(cpus)
}

/// Format CPU ids back into the compact kernel form ("0-3,8").
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Two CPUs for a measurement that crosses CPUs: (this thread's, the other side's), the last
/// two this process may use (CPU 0 takes most of the machine's interrupts). `needs` says what
/// a single CPU cannot give, for the error ("a wake-up across CPUs needs two CPUs").
pub fn last_two(needs: &str) -> anyhow::Result<(usize, usize)> {
    match allowed_cpus().as_slice() {
        [.., a, b] => Ok((*b, *a)),
        _ => anyhow::bail!("{needs}; this process may use one"),
    }
}

/// CPUs this process may run on (its affinity mask), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_current(cpu: usize) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| anyhow::anyhow!("pinning a thread to CPU {cpu}: {e}"))
}

/// Pin the calling thread to a set of CPUs (used to keep a loader off the server's CPU).
pub fn pin_current_to(cpus: &[usize]) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| anyhow::anyhow!("pinning to CPUs {}: {e}", format_cpu_list(cpus)))
}

/// The calling thread pinned for as long as this lives; the affinity it had before comes back
/// on drop (a lab pins its measuring thread, and the caller's thread must not stay pinned).
pub struct Pinned {
    before: Option<rustix::thread::CpuSet>,
}

impl Pinned {
    /// Pin to `cpu`; an error when the kernel refuses.
    pub fn to(cpu: usize) -> anyhow::Result<Pinned> {
        let before = rustix::thread::sched_getaffinity(None).ok();
        pin_current(cpu)?;
        Ok(Pinned { before })
    }

    /// Pin to the last CPU we may use: CPU 0 takes most of the machine's interrupts. Not being
    /// able to pin (a restricted container) leaves figures noisier, not wrong, so a refusal is
    /// ignored.
    pub fn last_allowed() -> Pinned {
        let before = rustix::thread::sched_getaffinity(None).ok();
        if let Some(&cpu) = allowed_cpus().last() {
            let _ = pin_current(cpu);
        }
        Pinned { before }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = &self.before {
            let _ = rustix::thread::sched_setaffinity(None, set);
        }
    }
}

/// Check `--cpus` against the affinity mask: every named CPU must be one we may use.
pub fn check_cpus(wanted: &[usize], allowed: &[usize]) -> anyhow::Result<()> {
    let missing: Vec<usize> = wanted
        .iter()
        .copied()
        .filter(|c| !allowed.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(usage(format!(
            "--cpus names CPU {} which is offline or outside this process's affinity mask; allowed: {}",
            format_cpu_list(&missing),
            format_cpu_list(allowed)
        )));
    }
    Ok(())
}

/// `--cpus LIST` on any lab: keep this process (and the threads and processes it starts) on
/// those CPUs, like `taskset`. Every lab then sees them as the CPUs it may use.
pub fn restrict_process(list: &str) -> anyhow::Result<Vec<usize>> {
    let wanted = parse_cpu_list(list)?;
    if wanted.is_empty() {
        return Err(usage("--cpus is empty: give CPU ids and ranges like 0-3,6"));
    }
    check_cpus(&wanted, &allowed_cpus())?;
    pin_current_to(&wanted)?;
    Ok(wanted)
}

/// Check a `--threads` sweep: zero is meaningless, and more threads than CPUs needs
/// `--oversubscribe` (the figures then measure the scheduler, not the layer).
pub fn check_threads(threads: &[usize], cpus: usize, oversubscribe: bool) -> anyhow::Result<()> {
    if threads.contains(&0) {
        return Err(usage("--threads 0: a run needs at least one thread"));
    }
    if let Some(&t) = threads.iter().find(|&&t| t > cpus) {
        if !oversubscribe {
            return Err(usage(format!(
                "--threads {t} is more than the {cpus} CPUs this process may use; lower it or add --oversubscribe"
            )));
        }
    }
    Ok(())
}

/// Parse a `--threads` list ("1,2,4").
pub fn parse_threads(text: &str) -> anyhow::Result<Vec<usize>> {
    crate::measure::sizes::parse_list(text, |s| {
        crate::measure::units::parse_count(s, "thread count", 1, 1 << 16, "1,2,4")
            .map(|n| n as usize)
    })
}

/// The CPU each of `threads` workers is pinned to: one per allowed CPU, wrapping round
/// when oversubscribed.
pub fn cpus_for_threads(threads: usize, allowed: &[usize]) -> Vec<usize> {
    (0..threads).map(|i| allowed[i % allowed.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    #[test]
    fn two_cpus_are_the_last_two_allowed_and_one_cpu_says_what_it_cannot_give() {
        let allowed = allowed_cpus();
        if let [.., a, b] = allowed.as_slice() {
            assert_eq!(last_two("x needs two CPUs").unwrap(), (*b, *a));
        }
        // Pinned to one CPU, this thread may use only it.
        let _one = Pinned::to(allowed[0]).unwrap();
        let e = last_two("a pipe across CPUs needs two CPUs").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a pipe across CPUs needs two CPUs; this process may use one"
        );
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("3,1").unwrap(), vec![1, 3]);
        // A CPU given twice is refused, naming it (the one rule of every list).
        let e = parse_cpu_list("3,1,1").unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("CPU 1 is given twice"), "{e}");
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn thread_checks() {
        assert!(check_threads(&[1, 2], 2, false).is_ok());
        assert_eq!(exit_code(&check_threads(&[4], 2, false).unwrap_err()), 2);
        assert!(check_threads(&[4], 2, true).is_ok());
        assert_eq!(exit_code(&check_threads(&[0], 2, true).unwrap_err()), 2);
        assert_eq!(cpus_for_threads(3, &[4, 6]), vec![4, 6, 4]);
    }

    #[test]
    fn cpus_outside_the_mask_are_refused() {
        let e = check_cpus(&[0, 5], &[0, 1]).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("CPU 5"));
    }
}
