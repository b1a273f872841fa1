//! The verdict on a tried what-if: the predicted saving set against the savings measured over
//! the A/B pairs. Pure arithmetic, so that every rule has a fixture.

use costlab_core::measure::Summary;

/// What the trial says of a what-if (the `verdict` case key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The measured spread holds the prediction's sign and the sizes agree (within the
    /// spreads or 25%).
    Confirmed,
    /// The measured saving has the other sign, beyond its spread.
    Refuted,
    /// The measured spread crosses zero: no saving either way that the pairs can tell.
    Level,
    /// The sign holds, the size does not: the remedy saves, but not what the model said.
    SizeOff,
    /// The remedy cannot be set from outside the program.
    NotTried,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Confirmed => "confirmed",
            Verdict::Refuted => "refuted",
            Verdict::Level => "level",
            Verdict::SizeOff => "size-off",
            Verdict::NotTried => "not-tried",
        }
    }

    /// Whether the prediction may be printed as advice: never when the trial contradicts it.
    pub fn advice(self) -> bool {
        matches!(self, Verdict::Confirmed)
    }
}

/// How close two sizes must be, besides overlapping spreads: 25% of the predicted one.
pub const AGREE: f64 = 0.25;

/// The predicted saving: its bounds (lo <= mid <= hi), ns; `None` for a remedy whose model
/// gives no size, judged by sign alone (a remedy offered claims to save).
pub type Predicted = Option<(f64, f64, f64)>;

/// The verdict for `predicted` against the per-pair savings `measured` (A - B, ns): empty
/// when nothing was tried.
pub fn judge(predicted: Predicted, measured: &[f64]) -> Verdict {
    let Some(m) = Summary::of(measured) else {
        return Verdict::NotTried;
    };
    if m.min <= 0.0 && m.max >= 0.0 {
        return Verdict::Level;
    }
    let measured_sign = m.median.signum();
    let Some((lo, mid, hi)) = predicted else {
        return if measured_sign > 0.0 {
            Verdict::Confirmed
        } else {
            Verdict::Refuted
        };
    };
    // A prediction of no change is contradicted by any change beyond the spread.
    if mid == 0.0 || mid.signum() != measured_sign {
        return Verdict::Refuted;
    }
    let overlap = lo.min(hi) <= m.max && m.min <= hi.max(lo);
    let close = (m.median - mid).abs() <= AGREE * mid.abs();
    if overlap || close {
        Verdict::Confirmed
    } else {
        Verdict::SizeOff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    #[test]
    fn nothing_measured_is_not_tried() {
        assert_eq!(judge(Some((1.0, 2.0, 3.0)), &[]), Verdict::NotTried);
    }

    #[test]
    fn a_spread_across_zero_is_level_whatever_was_predicted() {
        let m = [-5.0 * MS, 1.0 * MS, 3.0 * MS];
        assert_eq!(
            judge(Some((300.0 * MS, 352.0 * MS, 400.0 * MS)), &m),
            Verdict::Level
        );
        assert_eq!(judge(None, &m), Verdict::Level);
        assert_eq!(judge(Some((0.0, 0.0, 0.0)), &[0.0, 0.0]), Verdict::Level);
    }

    #[test]
    fn the_other_sign_beyond_the_spread_is_refuted() {
        // The THP trial: 352 ms predicted saved, 350-500 ms more kernel time.
        let m = [-350.0 * MS, -420.0 * MS, -500.0 * MS];
        assert_eq!(
            judge(Some((300.0 * MS, 352.0 * MS, 400.0 * MS)), &m),
            Verdict::Refuted
        );
        // A rise predicted, a saving measured.
        assert_eq!(
            judge(Some((-2.0, -1.0, -0.5)), &[3.0, 4.0]),
            Verdict::Refuted
        );
        // No size predicted: the remedy's own claim (it saves) is the sign.
        assert_eq!(judge(None, &[-3.0, -4.0]), Verdict::Refuted);
        // A prediction of no change, and a change beyond the spread.
        assert_eq!(judge(Some((0.0, 0.0, 0.0)), &[3.0, 4.0]), Verdict::Refuted);
    }

    #[test]
    fn the_same_sign_and_size_is_confirmed() {
        // Within 25% of the prediction, though the spreads do not overlap.
        assert_eq!(
            judge(Some((100.0, 100.0, 100.0)), &[80.0, 82.0, 84.0]),
            Verdict::Confirmed
        );
        // Far apart in the median, but the spreads overlap.
        assert_eq!(
            judge(Some((40.0, 100.0, 160.0)), &[50.0, 60.0, 150.0]),
            Verdict::Confirmed
        );
        // A rise predicted and measured.
        assert_eq!(
            judge(Some((-12.0, -10.0, -9.0)), &[-11.0, -10.5]),
            Verdict::Confirmed
        );
        // By sign alone.
        assert_eq!(judge(None, &[1.0, 2.0]), Verdict::Confirmed);
    }

    #[test]
    fn the_same_sign_and_another_size_is_size_off() {
        assert_eq!(
            judge(Some((100.0, 100.0, 100.0)), &[10.0, 12.0, 14.0]),
            Verdict::SizeOff
        );
        assert_eq!(
            judge(Some((90.0, 100.0, 110.0)), &[300.0, 320.0]),
            Verdict::SizeOff
        );
    }

    #[test]
    fn only_a_confirmed_prediction_is_advice() {
        for v in [
            Verdict::Refuted,
            Verdict::Level,
            Verdict::SizeOff,
            Verdict::NotTried,
        ] {
            assert!(!v.advice(), "{v:?}");
        }
        assert!(Verdict::Confirmed.advice());
    }
}
