//! The lab contract: what every lab implements (`Lab`), what it is given (`Ctx`) and the options
//! and parsing every lab's command shares (`args`). Each lab is a crate of its own under
//! crates/labs/ that depends on this one and on the layers below, never on another lab; the
//! binary's registry (`costlab::registry::all`) names every lab, so nothing here does.

pub mod args;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use costlab_core::error::ProgramEnd;
use costlab_core::machine::Machine;
use costlab_core::measure::conditions::{RetryBudget, LAB_RETRY_BUDGET_S, RUN_RETRY_BUDGET_S};
use costlab_core::measure::SampleSpec;
use costlab_history::store::Store;

/// What every lab is given: the command's options as the lab needs them, the machine, the
/// history, and where a lab that runs the user's program says how it ended. Made by
/// `Ctx::new`, once per command.
pub struct Ctx {
    pub machine: Machine,
    /// How to sample (from `--samples` and `--quick`, or `run`'s plan).
    pub spec: SampleSpec,
    /// `--counters`: read perf counters around each case.
    pub counters: bool,
    /// `--quick`: smaller plans.
    pub quick: bool,
    /// `costlab run --reserve-hugepages`: a lab may raise a hugepage pool for its run (through
    /// `machine::restore`, so it is given back). Lab commands have their own flag.
    pub reserve_hugepages: bool,
    /// `--retry-budget`: the time the whole command may spend re-measuring disturbed or noisy
    /// cases (`conditions::judged_case` draws on it).
    pub retry: RetryBudget,
    /// The history this command stores into, opened by the binary (`with_history`). A lab
    /// reads it only for figures it builds on (price's unit costs), never to store.
    history: Option<Mutex<Store>>,
    /// How the user's program ended, where the lab ran one (price).
    program: Mutex<Option<ProgramEnd>>,
}

/// What a `Ctx` is made for: a lab's own command, or one lab's plan in `costlab run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The lab's own command (`costlab mem ...`): `--quick` picks the smaller plan.
    Command,
    /// `costlab run`: the quick plans unless `full`; `reserve_hugepages` from its flag.
    Run { full: bool, reserve_hugepages: bool },
}

impl Ctx {
    /// The one way a `Ctx` is made: from the command's common options, for `scope`. The
    /// defaults that differ by scope are here: `--retry-budget` 30 s for a lab's command
    /// (`LAB_RETRY_BUDGET_S`), 60 s for `costlab run` (`RUN_RETRY_BUDGET_S`).
    pub fn new(machine: Machine, common: &Common, scope: Scope) -> Ctx {
        let (quick, reserve_hugepages, default_budget) = match scope {
            Scope::Command => (common.quick, false, LAB_RETRY_BUDGET_S),
            Scope::Run {
                full,
                reserve_hugepages,
            } => (!full, reserve_hugepages, RUN_RETRY_BUDGET_S),
        };
        let base = if quick {
            SampleSpec::quick()
        } else {
            SampleSpec::default()
        };
        let budget = common.retry_budget.unwrap_or(default_budget);
        Ctx {
            machine,
            spec: base.with_samples(common.samples),
            counters: common.counters,
            quick,
            reserve_hugepages,
            retry: RetryBudget::new(Duration::from_secs(budget)),
            history: None,
            program: Mutex::new(None),
        }
    }

    /// The context with the history the command opened (`--db`).
    pub fn with_history(mut self, history: Store) -> Ctx {
        self.history = Some(Mutex::new(history));
        self
    }

    /// The history the command opened (locked: the lab's threads share the context). A lab's
    /// command always has one; a test's context given none fails here, never a panic.
    pub fn history(&self) -> anyhow::Result<MutexGuard<'_, Store>> {
        let history = self
            .history
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("this command was given no history to read"))?;
        Ok(history.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A lab that ran the user's program says how it ended: the binary exits with its
    /// status when it failed (`error::exit_code_beside_program`).
    pub fn program_ended(&self, end: ProgramEnd) {
        *self.program.lock().unwrap_or_else(|p| p.into_inner()) = Some(end);
    }

    /// How the user's program ended, if the lab ran one.
    pub fn program_end(&self) -> Option<ProgramEnd> {
        *self.program.lock().unwrap_or_else(|p| p.into_inner())
    }
}

use costlab_history::report::Outcome;

/// Headlines are results: they live with the result model; re-exported here for the labs.
pub use costlab_history::report::Headline;

pub use args::{Common, Invocation};

/// What `costlab run`, the lab's own command and the report need of a lab. Each lab folder has
/// one implementation; `all()` lists them, so adding a lab is a folder and one line there.
pub trait Lab {
    /// The lab's name, as in the JSON's "lab" field ("mem", "syscall", ...).
    fn name(&self) -> &'static str;
    /// The lab's own top-level commands, as `costlab --help` lists them: usually one
    /// (`costlab mem`), numa has two (`numa`, `numa-maps`). Build each with
    /// `args::command::<TheLabsArgs>(name, about, examples)`, the examples starting with
    /// "Examples:". The binary adds them to its command line after `run`, in `all()`'s order.
    fn commands(&self) -> Vec<clap::Command>;
    /// Turn the lab's command `name` (one of `commands()`), parsed into `matches`, into what
    /// the binary does: `args::parsed::<TheLabsArgs>(matches)?`, then either
    /// `Invocation::measure(common, move |ctx| run(&args, ctx))` (the binary checks the
    /// common options, stores, prints, writes `--json`, handles Ctrl-C and `--strict`) or,
    /// having run the command itself (a server, a build), `Invocation::Done`. Bad arguments
    /// found here are `error::usage` errors (exit 2).
    fn invoke(&self, name: &str, matches: &clap::ArgMatches) -> anyhow::Result<Invocation>;
    /// Why the lab cannot run on this machine (no Go toolchain, one NUMA node, ...), or None:
    /// by default it runs everywhere.
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        None
    }
    /// Run the lab's plan for `costlab run`: `full = false` is the quick plan, sized so that
    /// all labs together finish within 90 s on a 2-core machine.
    fn run_plan(&self, ctx: &Ctx, full: bool) -> anyhow::Result<Outcome>;
    /// The lab's lines of the cost sheet, read from its outcome. Callers want `sheet_lines`,
    /// which judges them.
    fn headlines(&self, outcome: &Outcome) -> Vec<Headline>;
    /// The lab's lines of the cost sheet with their verdicts: the one way a sheet is made
    /// (`costlab run`, a lab run alone, an import), so every view of a headline shows the same
    /// mark (`report::verdict::follow`).
    fn sheet_lines(&self, outcome: &Outcome) -> Vec<Headline> {
        let mut h = self.headlines(outcome);
        costlab_history::report::verdict::follow(&mut h, &outcome.results);
        h
    }
    /// The lab's tables for the terminal. By default one row per figure and each model's
    /// table, so a new lab prints something readable before it has its own tables.
    fn render(&self, outcome: &Outcome) -> String {
        use costlab_history::report::table;
        let rows: Vec<Vec<String>> = outcome
            .results
            .iter()
            .map(|r| {
                vec![
                    costlab_core::model::case_text(&r.case),
                    r.metric.clone(),
                    table::median_marked(r),
                    costlab_history::report::sheet::spread(&r.summary),
                    r.unit.clone(),
                ]
            })
            .collect();
        let mut out = table::render(&["case", "metric", "median", "spread", "unit"], &rows);
        for m in &outcome.models {
            out.push_str(&table::render_model(m));
        }
        out
    }
    /// Whether `costlab run` runs the lab's plan. A lab that needs the user's input (price:
    /// a program to price) answers false and is reached only through its own command.
    fn in_run(&self) -> bool {
        true
    }
    /// The lab's charts in the HTML report (each a drawing or the reason it is left out);
    /// the models' charts are drawn for every lab alike.
    fn charts(
        &self,
        _doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        Vec::new()
    }
    /// What leads the HTML report of a run this lab tells whole (price: the program it ran,
    /// where its time went, its what-ifs), in place of the cost sheet; None (the default) for
    /// a lab whose figures sit on the sheet like the others'.
    fn lead(
        &self,
        _doc: &costlab_history::report::Doc,
    ) -> Option<costlab_history::report::html::Lead> {
        None
    }
    /// The lab's own lines for `--strict`, beside the figures that are not ok (one line each;
    /// any line fails the command with exit status 3): price's refuted what-ifs.
    fn strict_lines(&self, _rows: &[costlab_history::report::ResultRow]) -> Vec<String> {
        Vec::new()
    }
    /// The lab's own lines for `costlab compare A B`, after the table of figures: price's
    /// what-ifs, each verdict in A and in B.
    fn compare_lines(
        &self,
        _a: &costlab_history::report::Doc,
        _b: &costlab_history::report::Doc,
    ) -> Vec<String> {
        Vec::new()
    }
    /// Whether the lab's command `name` runs the user's program and exits with its status
    /// (price): its stdout is the program's, and costlab's own exit statuses move out of the
    /// program's way (`costlab_core::error::beside_program`), bad input included.
    fn runs_a_program(&self, _name: &str) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_constructor_gives_each_scope_its_defaults() {
        let lab = Ctx::new(Machine::default(), &Common::default(), Scope::Command);
        assert_eq!(lab.retry.left(), Duration::from_secs(LAB_RETRY_BUDGET_S));
        assert!(!lab.quick && !lab.reserve_hugepages);
        let run = Scope::Run {
            full: false,
            reserve_hugepages: true,
        };
        let run = Ctx::new(Machine::default(), &Common::default(), run);
        assert_eq!(run.retry.left(), Duration::from_secs(RUN_RETRY_BUDGET_S));
        assert!(run.quick && run.reserve_hugepages);
        assert_eq!(run.spec.samples, SampleSpec::quick().samples);
        // Given options win over the defaults, in either scope.
        let given = Common {
            samples: Some(4),
            retry_budget: Some(0),
            counters: true,
            ..Default::default()
        };
        let full = Scope::Run {
            full: true,
            reserve_hugepages: false,
        };
        let c = Ctx::new(Machine::default(), &given, full);
        assert_eq!((c.spec.samples, c.retry.left()), (4, Duration::ZERO));
        assert!(c.counters && !c.quick);
        // No history given: an error, never a panic; a program's end is kept.
        assert!(c.history().is_err());
        assert_eq!(c.program_end(), None);
        c.program_ended(ProgramEnd::Exited(3));
        assert_eq!(c.program_end(), Some(ProgramEnd::Exited(3)));
    }

    #[test]
    fn the_retry_budget_s_help_names_both_defaults() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            common: Common,
        }
        let help = Cmd::command().render_help().to_string().replace('\n', " ");
        let said =
            format!("[default: {LAB_RETRY_BUDGET_S}; {RUN_RETRY_BUDGET_S} for `costlab run`]");
        let flat: String = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&said), "{flat}");
    }
}
