//! What every lab's command shares: the options with one meaning in every lab (`Common`), and
//! how a lab's command, once parsed, tells the binary what to do (`Invocation`).

use anyhow::Result;
use clap::Args;

use crate::Ctx;
use costlab_history::report::Outcome;

/// Options with the same meaning in every lab that measures.
#[derive(Args, Debug, Clone, Default)]
pub struct Common {
    /// Write results as JSON (costlab/1 schema) to FILE, or "-" for stdout
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Timed samples per figure (1 to 1000)
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = samples)]
    pub samples: Option<usize>,
    /// Run on these CPUs only (kernel list: 0-3,6); threads and child processes stay inside
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub cpus: Option<String>,
    /// Read perf counters around each case (software counters always; hardware where a PMU exists)
    #[arg(long)]
    pub counters: bool,
    /// A smaller plan: fewer sizes, shorter samples
    #[arg(long)]
    pub quick: bool,
    /// Exit 3 if any figure is not ok (disturbed or noisy), one line per figure: for CI
    /// (`costlab price`: 124, out of its program's way)
    #[arg(long)]
    pub strict: bool,
    /// Seconds the command may spend re-measuring disturbed or noisy cases (each case is
    /// measured at most 3 times; 0 = never re-measure) [default: 30; 60 for `costlab run`]
    #[arg(long, value_name = "SECS", env = "COSTLAB_RETRY_BUDGET", allow_hyphen_values = true, value_parser = whole::<u64, 0, {u64::MAX}>)]
    pub retry_budget: Option<u64>,
}

/// The most samples one figure may take: beyond it a run would last hours, not minutes.
pub const MAX_SAMPLES: usize = 1000;

/// `--samples N`: a whole number; its range (1 to `MAX_SAMPLES`) is checked before the run
/// with a message of its own for 0 and for too many.
fn samples(text: &str) -> Result<usize, BadNumber> {
    text.trim()
        .parse()
        .map_err(|_| BadNumber(format!("use a whole number from 1 to {MAX_SAMPLES}")))
}

/// The one value of a flag whose command takes one (`echo load --sizes 16K`): a comma list
/// is refused, naming the flag, the value and why.
pub fn one<'a>(flag: &str, text: &'a str, why: &str) -> Result<&'a str> {
    if text.contains(',') {
        return Err(costlab_core::error::usage(format!(
            "{flag} {text}: {why}; give one value"
        )));
    }
    Ok(text)
}

/// A lab's top-level command as `costlab --help` lists it: its name, its one-line `about`,
/// its examples (`after_help`, starting "Examples:"), and the arguments of `A`.
pub fn command<A: Args>(
    name: &'static str,
    about: &'static str,
    after_help: &'static str,
) -> clap::Command {
    // As clap's derive does for a subcommand variant: the arguments first, then the
    // variant's own texts, so a doc comment on `A` never replaces them.
    A::augment_args(clap::Command::new(name))
        .about(about)
        .long_about(None)
        .after_help(after_help)
}

/// The parsed arguments of `A` from its command's matches. The matches come from the command
/// `A` built, so this fails only on a bug; it still fails as bad input, never a panic.
pub fn parsed<A: clap::FromArgMatches>(m: &clap::ArgMatches) -> Result<A> {
    A::from_arg_matches(m).map_err(|e| costlab_core::error::usage(e.to_string().trim().to_string()))
}

/// What the binary does with a lab's parsed command (`Lab::invoke`).
pub enum Invocation {
    /// Measure: the binary checks the common options, probes the machine, opens the history,
    /// runs `run`, then stores the outcome, prints its tables and writes its JSON (Ctrl-C,
    /// `--strict` and the exit codes are the binary's). A lab never touches the history.
    Measure(Measure),
    /// The lab ran the command itself and has nothing to store (a server, a build, the loader
    /// a lead drives over ssh).
    Done,
}

/// A lab's measurement, run once with the context the binary made.
pub type Run = Box<dyn FnOnce(&Ctx) -> Result<Outcome>>;

/// A command's own terminal tables for an outcome.
pub type Render = Box<dyn FnOnce(&Outcome) -> String>;

/// The measuring half of an `Invocation`.
pub struct Measure {
    /// The command's common options (`--json`, `--samples`, `--cpus`, `--strict`, ...).
    pub common: Common,
    /// The measurement, given the context the binary made from `common`.
    pub run: Run,
    /// The terminal tables of the outcome; `None`: the lab's `Lab::render`.
    pub render: Option<Render>,
    /// Stdout belongs to a program the lab ran (price): the lab's tables go to stderr, and
    /// the command exits with the program's status when it failed (`Ctx::program_ended`).
    pub stdout_is_the_programs: bool,
}

impl Invocation {
    /// Measure with `run`, drawn by the lab's own `render`.
    pub fn measure(common: Common, run: impl FnOnce(&Ctx) -> Result<Outcome> + 'static) -> Self {
        Invocation::Measure(Measure {
            common,
            run: Box::new(run),
            render: None,
            stdout_is_the_programs: false,
        })
    }

    /// Measure with `run`, drawn by `render` (a subcommand with tables of its own).
    pub fn measure_rendered(
        common: Common,
        run: impl FnOnce(&Ctx) -> Result<Outcome> + 'static,
        render: impl FnOnce(&Outcome) -> String + 'static,
    ) -> Self {
        Invocation::Measure(Measure {
            common,
            run: Box::new(run),
            render: Some(Box::new(render)),
            stdout_is_the_programs: false,
        })
    }

    /// A lab that runs the user's program: its tables go to stderr (stdout is the program's)
    /// and the command exits with the program's status when it failed (`Ctx::program_ended`).
    pub fn program(mut self) -> Self {
        if let Invocation::Measure(m) = &mut self {
            m.stdout_is_the_programs = true;
        }
        self
    }
}

/// A count given on the command line (`--samples N`, `--depth D`, ...): clap takes hyphen
/// values for these so that `--samples -3` reaches here and gets costlab's own one-line
/// message instead of "unexpected argument '-3'".
#[derive(Debug)]
pub struct BadNumber(pub String);

impl std::fmt::Display for BadNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadNumber {}

/// clap's value parser for a whole number from `LO` to `HI`: anything else (a negative
/// number, a fraction, a word) is refused with the range.
pub fn whole<T: TryFrom<u64>, const LO: u64, const HI: u64>(text: &str) -> Result<T, BadNumber> {
    let bad = || {
        BadNumber(if HI == u64::MAX {
            format!("use a whole number from {LO} up")
        } else {
            format!("use a whole number from {LO} to {HI}")
        })
    };
    let n: u64 = text.trim().parse().map_err(|_| bad())?;
    if n < LO || n > HI {
        return Err(bad());
    }
    T::try_from(n).map_err(|_| bad())
}

/// A percent (`--min-effect 5`): a number from 0 to 1000.
pub fn percent(text: &str) -> Result<f64, BadNumber> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=1000.0).contains(&x) => Ok(x),
        _ => Err(BadNumber("use a percent from 0 to 1000, like 5".into())),
    }
}

/// A number in seconds or a count that may have a fraction (`--seconds 1.5`), above zero.
pub fn positive(text: &str) -> Result<f64, BadNumber> {
    match text.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(BadNumber("use a number above zero".into())),
    }
}
