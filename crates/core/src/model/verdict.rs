//! How verdicts combine: a figure derived from others takes the worst of theirs and names
//! which (`fold_inputs`, `worst_of`, `model_inherits`, `Headline::judged_by`), and prose that
//! quotes a figure that is not ok says so (`quote`). It sits above the figures it reads
//! (`result`) and the verdict itself (`quality`), so neither needs it.

use super::quality::Quality;
use super::result::{Headline, Model, ResultRow};

impl Headline {
    /// Take the worst verdict of the figures this headline is read from. A headline that is
    /// one figure shown as it is (one row, the same summary) carries that figure's verdict and
    /// reasons unchanged; one derived from figures (a ratio, a cut, a difference) names each
    /// input that is not ok (`fold_inputs` below).
    pub fn judged_by(mut self, rows: &[&ResultRow]) -> Self {
        if let [r] = rows {
            if r.summary == self.summary && self.quality.is_none() {
                self.quality = r.quality;
                self.quality_reasons = r.quality_reasons.clone();
                return self;
            }
        }
        fold_inputs(&mut self.quality, &mut self.quality_reasons, rows);
        if self.quality.is_none() && rows.iter().any(|r| r.quality.is_some()) {
            self.quality = Some(Quality::Ok);
        }
        self
    }
}

/// The reason a derived figure gives for one input that is not ok: which figure, its verdict
/// and why ("from its input mem op=chase ... latency: disturbed (other processes took ...)").
pub fn input_reason(input: &ResultRow) -> String {
    let q = input.quality.unwrap_or(Quality::Ok);
    if input.quality_reasons.is_empty() {
        format!("from its input {}: {}", input.name(), q.word())
    } else {
        format!(
            "from its input {}: {} ({})",
            input.name(),
            q.word(),
            input.quality_reasons.join("; ")
        )
    }
}

/// Fold the verdicts of `inputs` into a verdict (`quality`, `reasons`): the worst of it and
/// theirs, with one reason per input that is not ok, naming it. Idempotent: folding the same
/// inputs twice adds nothing. Headlines, model verdicts and derived rows all go through here so
/// that a derived figure says the same thing in every view.
pub fn fold_inputs(
    quality: &mut Option<Quality>,
    reasons: &mut Vec<String>,
    inputs: &[&ResultRow],
) {
    for input in inputs {
        let Some(q) = input.quality.filter(|q| *q != Quality::Ok) else {
            continue;
        };
        let why = input_reason(input);
        if !reasons.contains(&why) {
            reasons.push(why);
        }
        *quality = Some(quality.map_or(q, |own| own.max(q)));
    }
}

/// The verdict of a figure derived from `inputs` (None when none of them is judged): the
/// worst of theirs, with one reason per input that is not ok.
pub fn worst_of(inputs: &[&ResultRow]) -> (Option<Quality>, Vec<String>) {
    let mut q = inputs.iter().filter_map(|r| r.quality).max();
    let mut why = Vec::new();
    fold_inputs(&mut q, &mut why, inputs);
    (q, why)
}

/// Open a model's verdict with its inputs' when any is not ok: its terms, fits and
/// predictions are read from those figures, so it must not be read as clean either.
pub fn model_inherits(m: &mut Model, inputs: &[&ResultRow]) {
    let (q, why) = worst_of(inputs);
    let Some(q) = q.filter(|q| *q != Quality::Ok) else {
        return;
    };
    let line = format!(
        "{} {}: read from figures that are not ok, so its terms and predictions must not be read as clean: {}",
        q.mark(),
        q.word(),
        why.join("; ")
    );
    if !m.verdict.contains(&line) {
        m.verdict.insert(0, line);
    }
}

/// A figure quoted in prose, with its verdict when it is not ok: "s = 406 ns" stays as it is
/// for an ok figure and becomes "s = 406 ns (disturbed: other processes took 48% of CPU 1
/// during the samples)" otherwise, so no sentence prices from a figure that must not be read as
/// clean without saying so.
pub fn quote(text: impl std::fmt::Display, quality: Option<Quality>, reasons: &[String]) -> String {
    match quality {
        Some(q) if q != Quality::Ok && reasons.is_empty() => format!("{text} ({})", q.word()),
        Some(q) if q != Quality::Ok => format!("{text} ({}: {})", q.word(), reasons.join("; ")),
        _ => text.to_string(),
    }
}

/// `quote` for a row's own verdict.
pub fn quote_row(text: impl std::fmt::Display, r: &ResultRow) -> String {
    quote(text, r.quality, &r.quality_reasons)
}
