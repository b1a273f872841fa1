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
    match text.strip_prefix("error: ") {
        Some(rest) => format!("costlab: {rest}"),
        None => text,
    }
}
