//! The cases: each thread of a team runs one operation in a tight loop. What differs between
//! them is only which cache lines the operation writes and who else writes them.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;

use costlab_core::error::usage;

/// One case of the lab, named as in the JSON's `variant` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    ArcShared,
    ArcPerThread,
    AtomicShared,
    AtomicPadded,
    AtomicFalseSharing,
    MutexShared,
    ReadOnlyShared,
}

impl Variant {
    pub const ALL: [Variant; 7] = [
        Variant::ArcShared,
        Variant::ArcPerThread,
        Variant::AtomicShared,
        Variant::AtomicPadded,
        Variant::AtomicFalseSharing,
        Variant::MutexShared,
        Variant::ReadOnlyShared,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::ArcShared => "arc-shared",
            Variant::ArcPerThread => "arc-per-thread",
            Variant::AtomicShared => "atomic-shared",
            Variant::AtomicPadded => "atomic-padded",
            Variant::AtomicFalseSharing => "atomic-false-sharing",
            Variant::MutexShared => "mutex-shared",
            Variant::ReadOnlyShared => "read-only-shared",
        }
    }

    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// What one operation is, and which lines it writes: the reason for its curve.
    pub fn why(self) -> &'static str {
        match self {
            Variant::ArcShared => {
                "clone two Arcs every thread shares, build a struct, drop it: 4 atomic writes to 2 refcount lines that every core must own in turn, so each op waits for the line to travel from the last core that wrote it"
            }
            Variant::ArcPerThread => {
                "the same with each thread's own Arcs: the refcount lines stay in the thread's own cache, so the writes cost what they cost on one core"
            }
            Variant::AtomicShared => {
                "fetch_add on one counter: every op needs the counter's line exclusive, so the line moves between cores on nearly every op"
            }
            Variant::AtomicPadded => {
                "one counter per thread, each on its own 128-byte line: no line is written by two cores, so it scales like private work"
            }
            Variant::AtomicFalseSharing => {
                "one counter per thread, packed in one 64-byte line: no data is shared, but the line is, and it moves between cores as if it were"
            }
            Variant::MutexShared => {
                "lock, add, unlock one counter: the lock word and the counter's line move between cores, and waiters may sleep in the kernel"
            }
            Variant::ReadOnlyShared => {
                "loads from one line every thread shares: reads keep a copy of the line in every cache, nothing moves, it scales"
            }
        }
    }
}

/// Parse `--case` ("arc-shared,atomic-padded"); order kept, repeats dropped.
pub fn parse_cases(text: &str) -> Result<Vec<Variant>> {
    let mut out: Vec<Variant> = Vec::new();
    let list = costlab_core::measure::sizes::parse_list(text, |name| {
        Variant::from_name(name).ok_or_else(|| {
            let all: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
            usage(format!(
                "unknown case '{name}': choose from {}",
                all.join(", ")
            ))
        })
    })?;
    for v in list {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

/// What the Latte/Rune VM shared: the runtime context and the compiled unit. Each is a
/// line of data behind its refcounts, as in the original.
#[derive(Debug)]
struct Context {
    _functions: [u64; 8],
}

#[derive(Debug)]
struct Unit {
    _code: [u64; 8],
}

/// The small struct built from the two clones: `Vm::new(context.clone(), unit.clone())`.
struct Vm {
    _context: Arc<Context>,
    _unit: Arc<Unit>,
}

/// Build and drop `n` VMs from these Arcs; returns how many were built. The two Arc cases
/// run exactly this code and differ only in whose Arcs they pass.
fn churn(context: &Arc<Context>, unit: &Arc<Unit>, n: u64) -> u64 {
    let mut built = 0;
    for _ in 0..n {
        let vm = Vm {
            _context: context.clone(),
            _unit: unit.clone(),
        };
        black_box(&vm);
        built += 1;
    }
    built
}

fn new_pair() -> (Arc<Context>, Arc<Unit>) {
    (
        Arc::new(Context { _functions: [1; 8] }),
        Arc::new(Unit { _code: [2; 8] }),
    )
}

/// A value alone on 128 bytes: two 64-byte lines, because the adjacent-line prefetcher of
/// many x86 cores pulls lines in pairs and would otherwise couple neighbours.
#[repr(align(128))]
struct Padded<T>(T);

/// One 64-byte cache line of eight counters.
#[repr(align(64))]
struct Line([AtomicU64; 8]);

/// The shared state of one run of one case with `threads` workers.
pub struct Bench {
    variant: Variant,
    threads: usize,
    context: Arc<Context>,
    unit: Arc<Unit>,
    counter: Padded<AtomicU64>,
    padded: Vec<Padded<AtomicU64>>,
    packed: Vec<Line>,
    mutex: Padded<Mutex<u64>>,
    read_only: Padded<[u64; 8]>,
}

/// One worker's own state, built on its own CPU.
pub struct Worker {
    index: usize,
    /// arc-per-thread: this thread's own Arcs.
    own: Option<(Arc<Context>, Arc<Unit>)>,
    /// Something each op adds to, so its work is used (and checkable in tests).
    acc: u64,
}

impl Bench {
    pub fn new(variant: Variant, threads: usize) -> Bench {
        let (context, unit) = new_pair();
        Bench {
            variant,
            threads,
            context,
            unit,
            counter: Padded(AtomicU64::new(0)),
            padded: (0..threads).map(|_| Padded(AtomicU64::new(0))).collect(),
            packed: (0..threads.div_ceil(8))
                .map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            mutex: Padded(Mutex::new(0)),
            read_only: Padded([1; 8]),
        }
    }

    /// Worker `index`'s state; call it on the worker's own CPU so its Arcs live there.
    pub fn worker(&self, index: usize) -> Worker {
        Worker {
            index,
            own: (self.variant == Variant::ArcPerThread).then(new_pair),
            acc: 0,
        }
    }

    fn packed_slot(&self, index: usize) -> &AtomicU64 {
        &self.packed[index / 8].0[index % 8]
    }

    /// Do `n` operations of the case as worker `w`.
    pub fn work(&self, w: &mut Worker, n: u64) {
        match self.variant {
            Variant::ArcShared => w.acc += churn(&self.context, &self.unit, n),
            Variant::ArcPerThread => {
                if let Some((context, unit)) = w.own.as_ref() {
                    w.acc += churn(context, unit, n);
                }
            }
            Variant::AtomicShared => {
                for _ in 0..n {
                    black_box(self.counter.0.fetch_add(1, Ordering::Relaxed));
                }
            }
            Variant::AtomicPadded => {
                let c = &self.padded[w.index].0;
                for _ in 0..n {
                    black_box(c.fetch_add(1, Ordering::Relaxed));
                }
            }
            Variant::AtomicFalseSharing => {
                let c = self.packed_slot(w.index);
                for _ in 0..n {
                    black_box(c.fetch_add(1, Ordering::Relaxed));
                }
            }
            Variant::MutexShared => {
                for _ in 0..n {
                    // A poisoned lock only means another worker panicked; the count is intact.
                    let mut g = self.mutex.0.lock().unwrap_or_else(|e| e.into_inner());
                    *g += 1;
                }
            }
            Variant::ReadOnlyShared => {
                let mut sum = 0u64;
                for i in 0..n {
                    // black_box on the address each time so every load really happens.
                    sum += black_box(&self.read_only.0)[(i & 7) as usize];
                }
                w.acc += sum;
            }
        }
    }

    /// The counts the case's shared state holds now: one entry per counter it writes.
    #[cfg(test)]
    fn counts(&self) -> Vec<u64> {
        match self.variant {
            Variant::AtomicShared => vec![self.counter.0.load(Ordering::SeqCst)],
            Variant::AtomicPadded => self
                .padded
                .iter()
                .map(|c| c.0.load(Ordering::SeqCst))
                .collect(),
            Variant::AtomicFalseSharing => (0..self.threads)
                .map(|i| self.packed_slot(i).load(Ordering::SeqCst))
                .collect(),
            Variant::MutexShared => vec![*self.mutex.0.lock().unwrap()],
            _ => vec![],
        }
    }
}

impl Bench {
    pub fn threads(&self) -> usize {
        self.threads
    }
}

impl Worker {
    /// Which worker of the team this is (0-based).
    pub fn index(&self) -> usize {
        self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `variant` with `threads` unpinned threads doing `n` ops each; return the workers.
    fn run_fixed(bench: &Bench, n: u64) -> Vec<Worker> {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..bench.threads())
                .map(|i| {
                    s.spawn(move || {
                        let mut w = bench.worker(i);
                        // Two calls, as the sampler makes several.
                        bench.work(&mut w, n / 2);
                        bench.work(&mut w, n - n / 2);
                        w
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn counters_reach_the_expected_totals() {
        let (threads, n) = (3, 10_001u64);
        for v in [
            Variant::AtomicShared,
            Variant::AtomicPadded,
            Variant::AtomicFalseSharing,
            Variant::MutexShared,
        ] {
            let bench = Bench::new(v, threads);
            run_fixed(&bench, n);
            let want = match v {
                Variant::AtomicShared | Variant::MutexShared => vec![threads as u64 * n],
                _ => vec![n; threads],
            };
            assert_eq!(bench.counts(), want, "{}", v.name());
        }
    }

    #[test]
    fn false_sharing_counters_share_one_line_and_padded_ones_do_not() {
        let bench = Bench::new(Variant::AtomicFalseSharing, 8);
        let a = bench.packed_slot(0) as *const _ as usize;
        let b = bench.packed_slot(7) as *const _ as usize;
        assert_eq!(a / 64, b / 64);
        let bench = Bench::new(Variant::AtomicPadded, 2);
        let a = &bench.padded[0].0 as *const _ as usize;
        let b = &bench.padded[1].0 as *const _ as usize;
        assert!(b.abs_diff(a) >= 128 && a.is_multiple_of(128));
    }

    #[test]
    fn arc_counts_return_to_one() {
        for v in [Variant::ArcShared, Variant::ArcPerThread] {
            let bench = Bench::new(v, 2);
            let workers = run_fixed(&bench, 5_000);
            assert!(workers.iter().all(|w| w.acc == 5_000), "{}", v.name());
            for w in &workers {
                if let Some((c, u)) = &w.own {
                    assert_eq!((Arc::strong_count(c), Arc::strong_count(u)), (1, 1));
                }
            }
            assert_eq!(v == Variant::ArcPerThread, workers[0].own.is_some());
            assert_eq!(Arc::strong_count(&bench.context), 1);
            assert_eq!(Arc::strong_count(&bench.unit), 1);
        }
    }

    #[test]
    fn read_only_loads_every_element() {
        let bench = Bench::new(Variant::ReadOnlyShared, 2);
        let workers = run_fixed(&bench, 4_096);
        assert!(workers.iter().all(|w| w.acc == 4_096));
    }

    #[test]
    fn case_lists_parse_and_refuse_unknown_names() {
        assert_eq!(
            parse_cases("arc-shared, atomic-padded").unwrap(),
            vec![Variant::ArcShared, Variant::AtomicPadded]
        );
        // A case given twice is refused, naming it (docs/src/cli.md's one list rule).
        let e = parse_cases("arc-shared, atomic-padded,arc-shared").unwrap_err();
        assert!(e.to_string().contains("'arc-shared' is given twice"), "{e}");
        let e = parse_cases("arc-shard").unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("unknown case 'arc-shard'"));
        for v in Variant::ALL {
            assert_eq!(Variant::from_name(v.name()), Some(v));
        }
    }
}
