//! `costlab trend`: each figure's history on one machine, with the runs where its level changed.

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::TrendArgs;
use costlab_core::error::usage;
use costlab_history::analysis::trend::*;
use costlab_history::report::trend::{render, render_html};
use costlab_history::store::open_existing;
use costlab_history::store::series::series;

pub fn command(db: Option<&Path>, args: &TrendArgs) -> Result<()> {
    let store = open_existing(db)?;
    let all = series(&store)?;
    if all.is_empty() {
        return Err(usage(
            "the history is empty: run a lab or `costlab run` first",
        ));
    }
    let machine = match &args.machine {
        None => None,
        Some(m) => {
            let mut ids: Vec<&String> = all.keys().map(|(_, mid)| mid).collect();
            ids.dedup();
            let ids: std::collections::BTreeSet<&String> = ids
                .into_iter()
                .filter(|id| id.contains(m.as_str()))
                .collect();
            match ids.len() {
                1 => Some(ids.into_iter().next().unwrap().clone()),
                0 => {
                    return Err(usage(format!(
                        "no machine '{m}' in the history: see `costlab machines` for ids"
                    )))
                }
                n => {
                    return Err(usage(format!(
                        "'{m}' matches {n} machines: give more of the id"
                    )))
                }
            }
        }
    };
    let keys: Vec<&(String, String)> = all
        .keys()
        .filter(|(_, mid)| machine.as_ref().is_none_or(|m| m == mid))
        .collect();
    let chosen: Vec<&(String, String)> = match &args.figure {
        None => keys,
        Some(f) => {
            let exact: Vec<_> = keys.iter().copied().filter(|(fig, _)| fig == f).collect();
            let hits: Vec<_> = if exact.is_empty() {
                keys.iter()
                    .copied()
                    .filter(|(fig, _)| fig.contains(f.as_str()))
                    .collect()
            } else {
                exact
            };
            let figures: std::collections::BTreeSet<&String> =
                hits.iter().map(|(f, _)| f).collect();
            match figures.len() {
                0 => {
                    return Err(usage(format!(
                        "no figure matches '{f}': name one as `costlab compare` prints it"
                    )))
                }
                1 => hits,
                n => {
                    let some: Vec<&str> = figures.iter().take(3).map(|s| s.as_str()).collect();
                    return Err(usage(format!(
                        "'{f}' matches {n} figures (e.g. {}): give more of the name",
                        some.join("; ")
                    )));
                }
            }
        }
    };
    let trends: Vec<Trend> = chosen
        .iter()
        .filter_map(|k| {
            let (unit, points) = &all[*k];
            (points.len() >= 2).then(|| analyse(&k.0, unit, &k.1, points.clone()))
        })
        .filter(|t| args.figure.is_some() || !t.changes.is_empty())
        .collect();
    let text = if trends.is_empty() {
        format!(
            "no figure changed across the runs (E-divisive means, permutation test, alpha {ALPHA})\n"
        )
    } else {
        render(&trends)
    };
    let json = serde_json::json!({ "figures": trends });
    match args.json.as_deref() {
        Some("-") => {
            eprint!("{text}");
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        Some(path) => {
            print!("{text}");
            std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
                .map_err(|e| usage(format!("cannot write --json {path}: {e}")))?;
        }
        None => print!("{text}"),
    }
    if let Some(page) = &args.html {
        std::fs::write(page, render_html(&trends))
            .with_context(|| format!("writing {}", page.display()))?;
        println!("chart: {}", page.display());
    }
    Ok(())
}
