//! Fake labs for the runner's tests: they stand in for the real labs (which land on other
//! branches) through the same `Lab` trait. Their figures are made up; nothing here measures.

use costlab_history::report::Outcome;
use costlab_lab::{Ctx, Headline, Invocation, Lab};

pub enum Act {
    /// Give two made-up rows.
    Give,
    /// Cannot run here.
    Unavailable(&'static str),
    /// Fail with an error.
    Fail(&'static str),
    /// Change a setting (and leak its guard, as a process cut short would), then act as if
    /// Ctrl-C arrived mid-lab.
    ChangeThenInterrupt(std::path::PathBuf),
    /// Must never run (it comes after an interruption).
    Never,
}

pub struct Fake {
    pub name: &'static str,
    pub act: Act,
}

impl Lab for Fake {
    fn name(&self) -> &'static str {
        self.name
    }
    /// A fake has no command of its own: only the runner runs it.
    fn commands(&self) -> Vec<clap::Command> {
        Vec::new()
    }
    fn invoke(&self, name: &str, _m: &clap::ArgMatches) -> anyhow::Result<Invocation> {
        Err(anyhow::anyhow!("{name}: a fake lab has no command"))
    }
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        match self.act {
            Act::Unavailable(why) => Some(why.to_string()),
            _ => None,
        }
    }
    fn run_plan(&self, _ctx: &Ctx, _full: bool) -> anyhow::Result<Outcome> {
        match &self.act {
            Act::Give => {
                let mut o = Outcome::default();
                o.push(
                    self.name,
                    costlab_core::case! {"call" => "getppid"},
                    "latency",
                    "ns",
                    vec![50.0, 52.0, 51.0],
                );
                o.push(
                    self.name,
                    costlab_core::case! {"call" => "uring-nop", "batch" => 8},
                    "latency",
                    "ns",
                    vec![90.0, 91.0],
                );
                o.notes.push("fake note".into());
                Ok(o)
            }
            Act::Fail(msg) => Err(anyhow::anyhow!("{msg}")),
            Act::ChangeThenInterrupt(path) => {
                let g = costlab_core::machine::restore::change_setting(path, "512", "fake pool")?;
                std::mem::forget(g);
                costlab_core::measure::cancel::simulate(true);
                costlab_core::measure::cancel::check()?;
                unreachable!("check() fails once Ctrl-C is pressed")
            }
            Act::Unavailable(_) => unreachable!("an unavailable lab is not run"),
            Act::Never => panic!("a lab after Ctrl-C must not run"),
        }
    }
    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        o.results
            .iter()
            .take(1)
            .map(|r| Headline {
                label: format!("{} s", self.name),
                summary: r.summary,
                unit: r.unit.clone(),
                reading: "made up".into(),
                ..Default::default()
            })
            .collect()
    }
}

pub fn ctx() -> Ctx {
    Ctx {
        machine: costlab_core::machine::Machine::probe(),
        spec: costlab_core::measure::SampleSpec::quick(),
        counters: false,
        quick: true,
        reserve_hugepages: false,
        history: None,
        program_exit: Default::default(),
    }
}

pub fn run_info(id: &str) -> costlab_history::report::RunInfo {
    costlab_history::report::RunInfo {
        id: id.into(),
        started: costlab_history::report::time::now_rfc3339(),
        costlab: "0.1.0".into(),
        command: "costlab run (test)".into(),
        complete: false,
    }
}
