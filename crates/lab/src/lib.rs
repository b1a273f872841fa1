//! The lab contract: what every lab implements (`Lab`), what it is given (`Ctx`) and the options
//! and parsing every lab's command shares (`args`). Each lab is a crate of its own under
//! crates/labs/ that depends on this one and on the layers below, never on another lab; the
//! binary's registry (`costlab::registry::all`) names every lab, so nothing here does.

pub mod args;

use costlab_core::machine::Machine;
use costlab_core::measure::SampleSpec;

/// What every lab is given.
pub struct Ctx {
    pub machine: Machine,
    /// How to sample (from `--samples` and `--quick`).
    pub spec: SampleSpec,
    /// `--counters`: read perf counters around each case.
    pub counters: bool,
    /// `--quick`: smaller plans.
    pub quick: bool,
    /// `costlab run --reserve-hugepages`: a lab may raise a hugepage pool for its run (through
    /// `machine::restore`, so it is given back). Lab commands have their own flag.
    pub reserve_hugepages: bool,
    /// The history this command stores into (`--db`; None: the default one). A lab reads it
    /// only for figures it builds on (price's unit costs), never to store.
    pub history: Option<std::path::PathBuf>,
    /// A lab that runs the user's program (price) puts its exit status here; the binary exits
    /// with it once the run is stored and shown, as the program would have.
    pub program_exit: std::sync::atomic::AtomicI32,
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
}
