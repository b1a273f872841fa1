//! The result contract in the repository: `docs/src/costlab-1.schema.json` (JSON Schema, draft
//! 2020-12) accepts what costlab writes, rejects a renamed key, and the manual's contract page
//! lists exactly the keys the schema names.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::{self, schema};

fn schema_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(schema::SCHEMA).unwrap()).unwrap()
}

fn fixture_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(common::FIXTURE).unwrap()).unwrap()
}

#[test]
fn the_schema_is_draft_2020_12_and_accepts_the_fixture_and_the_golden_export() {
    let s = schema_json();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(
        s["properties"]["schema"]["const"],
        costlab_core::model::SCHEMA
    );
    schema::doc_file(common::FIXTURE);
    schema::doc_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/golden/export.json"
    ));
    // What costlab itself writes from a Doc, not only what a file holds.
    let text = serde_json::to_vec(&common::fixture()).unwrap();
    schema::doc(text);
}

/// Rename one key of `doc` at `path` (object keys, array indexes as numbers).
fn renamed(mut doc: Value, path: &[&str], from: &str, to: &str) -> Value {
    let mut at = &mut doc;
    for p in path {
        at = match p.parse::<usize>() {
            Ok(i) => &mut at[i],
            Err(_) => &mut at[*p],
        };
    }
    let obj = at.as_object_mut().expect("an object");
    let v = obj.remove(from).unwrap_or_else(|| panic!("no key {from}"));
    obj.insert(to.into(), v);
    doc
}

/// The contract is closed where it is closed: each renamed key is named as unexpected.
#[test]
fn a_renamed_key_is_rejected_where_the_contract_is_closed() {
    let cases: [(&[&str], &str, &str); 6] = [
        (&[], "notes", "note"),
        (&["run"], "complete", "completed"),
        (&["results", "0"], "metric", "metrics"),
        (&["results", "0", "summary"], "median", "p50"),
        (&["results", "0"], "quality_reasons", "quality_reason"),
        (&["models", "0", "points", "0"], "measured", "actual"),
    ];
    let mut fixture = fixture_json();
    // Give the first row a verdict with reasons, as a noisy figure has.
    fixture["results"][0]["quality"] = "noisy".into();
    fixture["results"][0]["quality_reasons"] = serde_json::json!(["MAD is 9% of the median"]);
    schema::doc(serde_json::to_vec(&fixture).unwrap());
    for (path, from, to) in cases {
        let doc = renamed(fixture.clone(), path, from, to);
        let (code, said) = schema::check(&serde_json::to_vec(&doc).unwrap());
        assert_eq!(
            code,
            Some(1),
            "{path:?}.{from} -> {to} was accepted: {said}"
        );
        assert!(said.contains(&format!("'{to}' was unexpected")), "{said}");
    }
    // Open where the contract is open: a lab adds a case key, a probe a machine fact.
    let mut open = fixture_json();
    open["results"][0]["case"]["new_key"] = "x".into();
    open["machine"]["new_fact"] = 1.into();
    schema::doc(serde_json::to_vec(&open).unwrap());
    // A wrong type is an error too.
    let mut typed = fixture_json();
    typed["results"][0]["summary"]["n"] = "five".into();
    assert_eq!(
        schema::check(&serde_json::to_vec(&typed).unwrap()).0,
        Some(1)
    );
}

#[test]
fn the_checker_refuses_what_is_not_json_with_exit_2() {
    let (code, said) = schema::check(b"{ not json");
    assert_eq!(code, Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "one line: {said}");
    assert!(said.contains("give a costlab/1 JSON document"), "{said}");
}

/// Every key path the schema names ("results[].summary.median"), following $refs; the
/// machine's open record contributes its own named facts.
fn schema_paths(s: &Value) -> BTreeSet<String> {
    fn walk(root: &Value, node: &Value, at: &str, out: &mut BTreeSet<String>) {
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.trim_start_matches("#/$defs/");
                &root["$defs"][name]
            }
            None => node,
        };
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(p.clone());
                walk(root, v, &p, out);
            }
        }
        if let Some(items) = node.get("items") {
            walk(root, items, &format!("{at}[]"), out);
        }
    }
    let mut out = BTreeSet::new();
    walk(s, s, "", &mut out);
    out
}

/// The key paths the manual's contract page lists: the first cell of each table row, in
/// backquotes (`results[].summary.median`).
fn page_paths(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_manuals_contract_page_lists_exactly_the_keys_of_the_schema() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/contract.md"))
            .unwrap();
    let from_schema = schema_paths(&schema_json());
    let on_page = page_paths(&page);
    let missing: Vec<_> = from_schema.difference(&on_page).collect();
    let extra: Vec<_> = on_page.difference(&from_schema).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/src/contract.md and the schema differ: not on the page {missing:?}; not in the schema {extra:?}"
    );
    assert!(on_page.contains("results[].summary.median"));
}
