//! A figure's verdict: `ok`, `noisy` or `disturbed`, and the word and mark each is shown with.
//! How verdicts combine is `model::verdict`; judging a figure from its spread and conditions is
//! `measure::quality`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quality {
    Ok,
    Noisy,
    Disturbed,
}

impl Quality {
    pub fn word(self) -> &'static str {
        match self {
            Quality::Ok => "ok",
            Quality::Noisy => "noisy",
            Quality::Disturbed => "disturbed",
        }
    }

    /// The mark printed beside a figure in tables: nothing for ok.
    pub fn mark(self) -> &'static str {
        match self {
            Quality::Ok => "",
            Quality::Noisy => "~",
            Quality::Disturbed => "!",
        }
    }
}
