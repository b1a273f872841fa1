//! CSV export: one line per figure, the case as `key=value` pairs in one column so that every
//! lab fits the same header.

use crate::report::Doc;

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The case as "op=read pattern=seq block=1073741824", in the lab's key order.
pub fn case_text(case: &crate::report::Case) -> String {
    case.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render(doc: &Doc) -> String {
    let mut out = String::from("run_id,lab,case,metric,unit,median,min,max,mad,n,samples\n");
    for r in &doc.results {
        let samples: Vec<String> = r.samples.iter().map(|x| x.to_string()).collect();
        let cells = [
            doc.run.id.clone(),
            r.lab.clone(),
            case_text(&r.case),
            r.metric.clone(),
            r.unit.clone(),
            r.summary.median.to_string(),
            r.summary.min.to_string(),
            r.summary.max.to_string(),
            r.summary.mad.to_string(),
            r.summary.n.to_string(),
            samples.join(" "),
        ];
        let line: Vec<String> = cells.iter().map(|c| field(c)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(super::field("a b"), "a b");
        assert_eq!(super::field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }
}
