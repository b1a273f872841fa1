//! A lab for the tests only: the smallest lab there can be, to show (and check) that a lab is
//! a folder plus one line in `labs::all()`. Its one case reports `--value` as every sample;
//! nothing outside this folder names it but that line and its `mod` line.

pub mod args;

use anyhow::Result;

use crate::case;
use crate::labs::args::{command, parsed, Invocation};
use crate::labs::{Ctx, Headline, Lab};
use crate::report::{table, Outcome};
use args::ExampleArgs;

pub const LAB: &str = "example";

/// One case, `what = constant`: the value given, once per sample.
pub fn run(args: &ExampleArgs, ctx: &Ctx) -> Result<Outcome> {
    if !(args.value.is_finite() && args.value >= 0.0) {
        return Err(crate::error::usage(format!(
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
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        None
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

#[cfg(test)]
mod tests {
    use crate::cli::{parse_from, Parsed};
    use crate::labs::{Ctx, Invocation};

    fn ctx(samples: Option<usize>) -> Ctx {
        Ctx {
            machine: Default::default(),
            spec: crate::measure::SampleSpec::quick().with_samples(samples),
            counters: false,
            quick: true,
            reserve_hugepages: false,
            history: None,
        }
    }

    #[test]
    fn the_example_lab_is_parsed_and_dispatched_through_the_registry() {
        let argv = ["costlab", "example", "--value", "7", "--samples", "3"];
        let Ok(Parsed::Lab {
            lab, name, matches, ..
        }) = parse_from(argv)
        else {
            panic!("`costlab example` is not a lab command")
        };
        assert_eq!((lab.name(), name.as_str()), ("example", "example"));
        let Invocation::Measure(m) = lab.invoke(&name, &matches).unwrap() else {
            panic!("the example lab measures")
        };
        assert_eq!(m.common.samples, Some(3));
        assert!(m.render.is_none(), "drawn by the lab's own render");
        let outcome = (m.run)(&ctx(m.common.samples)).unwrap();
        let rows = serde_json::to_value(&outcome.results).unwrap();
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        let row = &rows[0];
        assert_eq!(row["lab"], "example");
        assert_eq!(row["case"], serde_json::json!({"what": "constant"}));
        assert_eq!(row["metric"], "latency");
        assert_eq!(row["unit"], "ns");
        assert_eq!(row["summary"]["median"], 7.0);
        assert_eq!(row["summary"]["n"], 3);
        assert!(lab.render(&outcome).contains("constant"));
    }

    #[test]
    fn the_example_lab_s_bad_input_is_a_usage_error_and_its_help_is_listed() {
        let Ok(Parsed::Lab { lab, matches, .. }) = parse_from(["costlab", "example", "--value=-1"])
        else {
            panic!()
        };
        let Invocation::Measure(m) = lab.invoke("example", &matches).unwrap() else {
            panic!()
        };
        let e = (m.run)(&ctx(None)).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2, "{e}");
        let help = crate::cli::command().render_help().to_string();
        assert!(help.contains("example"), "{help}");
    }
}
