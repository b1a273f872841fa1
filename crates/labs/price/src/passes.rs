//! A create's passes over recently deleted inodes (ext4 without a journal), priced: the
//! split's buffer touches inside ext4's inode allocations turned into passes by a
//! calibration measured now (`measured::inodes`), each line given the passes made inside it,
//! the run's passes one event priced at the create-pass term, and the tracer's own cost of
//! the touches taken out of the kernel time.

use crate::count::Counts;

/// Touches an allocation makes with nothing to pass are a few (4 here); below this many an
/// allocation, a run passed over next to nothing and no calibration is run.
const FEW: u64 = 8;

/// Count the passes of the traced run in `counts` (its lines and an event), with the
/// calibration's note; the tracer's extra cost, ns (0 where nothing was passed).
pub fn count(counts: &mut Counts, notes: &mut Vec<String>) -> f64 {
    let Some(split) = counts.measured.as_mut() else {
        return 0.0;
    };
    let (touches, windows) = split.lines.iter().fold((0, 0), |(t, w), l| {
        (t + l.inode_touches, w + l.inode_windows)
    });
    if windows == 0 || touches <= FEW * windows {
        return 0.0;
    }
    let dir = std::env::current_dir().unwrap_or_else(|_| "/".into());
    match crate::measured::inodes::calibrate(&dir) {
        Ok(cal) => {
            let mut total = 0;
            for l in &mut split.lines {
                l.inodes_passed = cal.passes(l.inode_touches, l.inode_windows);
                total += l.inodes_passed;
            }
            if total > 0 {
                counts
                    .events
                    .insert(("inodes".into(), "passed over".into()), total);
            }
            if let Some(t) = counts.tracer_per_event.as_mut() {
                t.touch = cal.touch_ns;
            }
            notes.push(cal.line());
            touches as f64 * cal.touch_ns
        }
        Err(e) if costlab_core::measure::cancel::is_interrupt(&e) => 0.0,
        Err(e) => {
            notes.push(format!(
                "{windows} inode allocations made {touches} buffer touches (passes over recently deleted inodes), not calibrated ({}): not priced, and the tracer's cost of them not taken out",
                costlab_core::error::one_line(&e)
            ));
            0.0
        }
    }
}
