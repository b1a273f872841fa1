//! A lab for the tests only: the smallest lab there can be, to show (and check) that a lab is
//! a folder plus one line in `labs::all()`. Its one case reports `--value` as every sample;
//! nothing outside this folder names it but that line and its `mod` line.

pub mod args;

use anyhow::Result;

use args::ExampleArgs;
use costlab_core::case;
use costlab_history::report::{table, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub const LAB: &str = "example";

/// One case, `what = constant`: the value given, once per sample.
pub fn run(args: &ExampleArgs, ctx: &Ctx) -> Result<Outcome> {
    if !(args.value.is_finite() && args.value >= 0.0) {
        return Err(costlab_core::error::usage(format!(
            "--value {}: give a figure of 0 ns or more",
            args.value
        )));
    }
    let mut out = Outcome::default();
    let samples = vec![args.value; ctx.spec.samples.max(1)];
    out.push(LAB, case! {"what" => "constant"}, "latency", "ns", samples);
    Ok(out)
}

/// One line per figure: its case and its median.
pub fn render(out: &Outcome) -> String {
    let rows: Vec<Vec<String>> = out
        .results
        .iter()
        .map(|r| {
            vec![
                r.key("what"),
                format!("{} {}", table::figure(r.summary.median), r.unit),
            ]
        })
        .collect();
    table::render(&["what", "latency"], &rows)
}

pub struct ExampleLab;

impl Lab for ExampleLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<ExampleArgs>(
            "example",
            "A lab for the tests: reports the value it is given",
            "Examples:\n  costlab example\n  costlab example --value 7 --samples 3",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: ExampleArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn run_plan(&self, ctx: &Ctx, _full: bool) -> Result<Outcome> {
        run(
            &ExampleArgs {
                value: 42.0,
                common: Default::default(),
            },
            ctx,
        )
    }
    fn headlines(&self, _outcome: &Outcome) -> Vec<Headline> {
        Vec::new()
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
}
