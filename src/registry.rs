//! The registry: every lab the binary knows, in the order `costlab run` runs them and
//! `costlab --help` lists their commands. It stands at the top, in the binary's crate, so that no
//! crate below names every lab; adding a lab is a crate under crates/labs/ and one line here.

use costlab_core::model::{Doc, LabSheet, LabStatus, Outcome, ResultRow};
use costlab_history::report::charts::Chart;
use costlab_lab::Lab;

/// Every lab that `costlab run` runs, in the order it runs them. A new lab is one line here.
pub fn all() -> Vec<Box<dyn Lab>> {
    vec![
        Box::new(costlab_mem::MemLab),
        Box::new(costlab_syscall::SyscallLab),
        Box::new(costlab_cost::CostLab),
        Box::new(costlab_echo::EchoLab),
        Box::new(costlab_mitigations::MitigationsLab),
        Box::new(costlab_share::ShareLab),
        Box::new(costlab_cpu::CpuLab),
        Box::new(costlab_gc::GcLab),
        Box::new(costlab_numa::NumaLab),
        Box::new(costlab_zerocopy::ZerocopyLab),
        Box::new(costlab_pin::PinLab),
        Box::new(costlab_price::PriceLab),
        Box::new(costlab_counters::CountersLab),
        #[cfg(test)]
        Box::new(costlab_example::ExampleLab),
    ]
}

/// The lab that owns the top-level command `name` (`numa-maps` is numa's), if any.
pub fn owner_of(name: &str) -> Option<Box<dyn Lab>> {
    all()
        .into_iter()
        .find(|lab| lab.commands().iter().any(|c| c.get_name() == name))
}

/// Every lab's charts of `doc` for the HTML report, in the registry's order: what the report's
/// callers hand `report::html` (the report draws only the models' charts itself).
pub fn charts(doc: &Doc) -> Vec<Chart> {
    all().iter().flat_map(|lab| lab.charts(doc)).collect()
}

/// What leads the report of `doc`: the first lab that tells the run whole (`Lab::lead`).
pub fn lead(doc: &Doc) -> Option<costlab_history::report::html::Lead> {
    all().iter().find_map(|lab| lab.lead(doc))
}

/// What `--strict` fails on in `rows`, one line each: every figure that is not ok, and each
/// lab's own lines (`Lab::strict_lines`: price's refuted what-ifs).
pub fn strict_lines(rows: &[ResultRow]) -> Vec<String> {
    let mut lines = costlab_history::report::verdict::not_ok_lines(rows);
    lines.extend(all().iter().flat_map(|lab| lab.strict_lines(rows)));
    lines
}

/// Each lab's own lines for `costlab compare A B` (`Lab::compare_lines`), in the registry's
/// order.
pub fn compare_lines(a: &Doc, b: &Doc) -> Vec<String> {
    all()
        .iter()
        .flat_map(|lab| lab.compare_lines(a, b))
        .collect()
}

/// Whether the top-level command `name` runs the user's program and exits with its status
/// (`Lab::runs_a_program`): costlab's own exit statuses then keep out of the program's way.
pub fn runs_a_program(name: &str) -> bool {
    owner_of(name).is_some_and(|lab| lab.runs_a_program(name))
}

/// The cost sheet of a document whose labs are known here (a lab run alone).
pub fn sheet_of(doc: &Doc) -> Vec<LabSheet> {
    let mut names: Vec<&str> = Vec::new();
    for r in &doc.results {
        if !names.contains(&r.lab.as_str()) {
            names.push(&r.lab);
        }
    }
    let all = all();
    names
        .into_iter()
        .map(|name| {
            let outcome = Outcome {
                results: doc
                    .results
                    .iter()
                    .filter(|r| r.lab == name)
                    .cloned()
                    .collect(),
                models: doc
                    .models
                    .iter()
                    .filter(|m| m.lab == name)
                    .cloned()
                    .collect(),
                notes: doc.notes.clone(),
            };
            let headlines = all
                .iter()
                .find(|l| l.name() == name)
                .map(|l| l.sheet_lines(&outcome))
                .unwrap_or_default();
            LabSheet {
                lab: name.to_string(),
                status: LabStatus::Ran,
                headlines,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::cli::{parse_from, Parsed};
    // The example lab is registered for tests only: these run it through the whole command
    // line and the registry, as a new lab is.
    use costlab_lab::{Ctx, Invocation};

    fn ctx(samples: Option<usize>) -> Ctx {
        let common = costlab_lab::Common {
            samples,
            quick: true,
            ..Default::default()
        };
        Ctx::new(Default::default(), &common, costlab_lab::Scope::Command)
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
        assert_eq!(costlab_core::error::exit_code(&e), 2, "{e}");
        let help = crate::cli::command().render_help().to_string();
        assert!(help.contains("example"), "{help}");
    }
}
