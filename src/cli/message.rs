//! What a parse error says: clap's message with "costlab:" in front, or costlab's own line for a
//! value its parser refused.

/// The one line for a value costlab's own parser refused: "--samples -3: use a whole number
/// from 1 to 1000", the flag and the value as typed.
fn bad_number_line(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    use std::error::Error as _;
    let why = e.source()?.downcast_ref::<costlab_lab::args::BadNumber>()?;
    let arg = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    let value = match e.get(ContextKind::InvalidValue)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    let flag = arg.split(' ').next().unwrap_or(&arg);
    Some(format!("costlab: {flag} {value}: {why}\n"))
}

/// The text of a parse error as the user sees it: clap's whole message (the cause, the right
/// spelling or the possible values, the subcommand's usage line), "costlab:" in place of
/// "error:".
pub fn clap_message(e: &clap::Error) -> String {
    if let Some(line) = bad_number_line(e) {
        return line;
    }
    let text = e.render().to_string();
    let text = match text.strip_prefix("error: ") {
        Some(rest) => format!("costlab: {rest}"),
        None => text,
    };
    // A list under the first line (the required arguments not given) joins it, so that the
    // first line names what is expected; the usage lines stay.
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or_default().to_string();
    let mut rest: Vec<&str> = lines.collect();
    while rest.first().is_some_and(|l| l.starts_with("  ")) {
        if first.ends_with(':') {
            first.push(' ');
        } else {
            first.push_str(", ");
        }
        first.push_str(rest.remove(0).trim());
    }
    let mut out = first;
    for l in rest {
        out.push('\n');
        out.push_str(l);
    }
    out.push('\n');
    out
}
