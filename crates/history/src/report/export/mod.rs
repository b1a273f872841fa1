//! The export formats of a stored run (`costlab export --format NAME RUN`): one trait, one file
//! per format. A new format is a file with an `Exporter` and one line in `all()`; the command
//! line takes its name from there.

pub mod csv;
pub mod json;
pub mod markdown;
pub mod prometheus;

use anyhow::Result;

use costlab_core::model::{Doc, LabSheet};

/// What a format is handed: the run as stored, its cost sheet with every headline judged,
/// and the options of the command.
pub struct Run<'a> {
    pub doc: &'a Doc,
    pub sheet: &'a [LabSheet],
    /// `--raw-samples`: one row per sample instead of one per figure (formats that have rows).
    pub raw_samples: bool,
}

/// One export format.
pub trait Exporter {
    /// Its name, as `--format` takes it.
    fn name(&self) -> &'static str;
    /// Whether `--raw-samples` means something to it; the command refuses the flag otherwise.
    fn has_sample_rows(&self) -> bool {
        false
    }
    /// The run in this format, whole, ending with a newline.
    fn export(&self, run: &Run) -> Result<String>;
}

/// Every format, the default (JSON) first.
pub fn all() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::Json),
        Box::new(csv::Csv),
        Box::new(markdown::Markdown),
        Box::new(prometheus::Prometheus),
    ]
}

/// The names `--format` takes.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|e| e.name()).collect()
}

/// The format named `name`, if there is one.
pub fn by_name(name: &str) -> Option<Box<dyn Exporter>> {
    all().into_iter().find(|e| e.name() == name)
}
