//! How the gc tax's profiles are taken: perf's cpu-clock where perf may sample here (through
//! measure::perf), else the Go runtime's pprof, and one profiled process under perf.

use std::path::Path;

use anyhow::Result;

use super::attrib::{self, Tally};
use super::bench::{self, ProfileRun};
use costlab_core::measure::perf;

/// The profiling rate asked of runtime/pprof (samples per CPU-second). The kernel checks
/// the CPU-time timers behind it at its tick, so what a thread gets is at most HZ (250 on
/// this machine's kernel): asking more is harmless, and the output says what was got.
pub const PROFILE_HZ: u64 = 1000;

/// The rate asked of perf's cpu-clock (samples per CPU-second), capped by the kernel's
/// perf_event_max_sample_rate: enough that the smallest taxes (write barriers, well under
/// 1%) get a thousand samples from a few processes of ten seconds.
pub const PERF_HZ: u64 = 20_000;

/// How the CPU samples are taken.
#[derive(Debug, Clone)]
pub enum Sampler {
    /// `perf record -e cpu-clock -F hz` (the program at hand, perf's path).
    Perf { perf: std::path::PathBuf, hz: u64 },
    /// runtime/pprof, and why perf is not used.
    Pprof { why: String },
}

impl Sampler {
    pub fn describe(&self) -> String {
        match self {
            Sampler::Perf { hz, .. } => {
                format!("perf record -e cpu-clock -F {hz} (software event, frame-pointer stacks)")
            }
            Sampler::Pprof { why } => {
                format!("runtime/pprof at {PROFILE_HZ} Hz asked (fallback: {why})")
            }
        }
    }
}

/// perf at `hz` (capped by the kernel) when it is on PATH and may sample here (a short
/// probe run), else pprof with the reason. COSTLAB_GC_SAMPLER=pprof forces the fallback.
pub fn choose_sampler(hz: u64) -> Sampler {
    if std::env::var("COSTLAB_GC_SAMPLER").is_ok_and(|v| v == "pprof") {
        return Sampler::Pprof {
            why: "COSTLAB_GC_SAMPLER=pprof".to_string(),
        };
    }
    let Some(perf) = perf::find() else {
        return Sampler::Pprof {
            why: "perf is not on PATH (apt-get install linux-perf)".to_string(),
        };
    };
    let hz = perf::rate(hz);
    match perf::probe(&perf, hz) {
        Ok(()) => Sampler::Perf { perf, hz },
        Err(why) => Sampler::Pprof { why },
    }
}

/// How many recordings one profiled process gets before a failed `perf script` stops the
/// lab: the first and two more.
const RECORDINGS: usize = 3;

/// One profiled process under perf: the program turns sampling on after its warm-up and
/// off at the window's end through perf's control fifos; the samples are read back with
/// `perf script` (cpumode, period, the user call chain) and tallied as they stream.
///
/// A recording perf script cannot read is taken again, up to [`RECORDINGS`] in all. Beside
/// a `costlab price` (BPF programs loaded and freed), a second's recording here held 13-89
/// PERF_RECORD_KSYMBOL records of the other tool's programs, though `--no-bpf-event` is
/// asked, and perf script 6.1 failed on 2 of 12 such recordings ("failed to process type:
/// 17 [Bad address]"). The run is measured again, whole: its figures and its samples come
/// from one process.
pub(super) fn perf_process(
    perf_bin: &Path,
    hz: u64,
    bin: &Path,
    args: &[String],
) -> Result<(ProfileRun, Tally)> {
    let mut recording = 1;
    loop {
        let rec = perf::Controlled::new()?;
        let mut all = rec.record_args(hz);
        all.extend([
            bin.display().to_string(),
            "-sampler".into(),
            "perf".into(),
            "-perf-ctl".into(),
            rec.ctl.display().to_string(),
            "-perf-ack".into(),
            rec.ack.display().to_string(),
        ]);
        all.extend(args.iter().cloned());
        let run: ProfileRun = bench::parse(&bench::run(perf_bin, &all, &[])?)?;
        match rec.script(perf_bin, attrib::tally_perf) {
            Ok(tally) => return Ok((run, tally?)),
            Err(e) if recording < RECORDINGS => {
                costlab_history::report::progress::note(&format!(
                    "{e:#}; recording the process again"
                ));
                recording += 1;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "perf script failed on {RECORDINGS} recordings in a row"
                )))
            }
        }
    }
}
