//! A create's passes over recently deleted inodes (ext4 without a journal), as the split
//! counts them: `prog::inodes`' three raw tracepoints attached beside the split, and the
//! calibration that turns their touches into passes and takes their own cost out.
//!
//! A pass is a lookup of an inode-table block in the buffer cache and a read of the inode's
//! dtime; it fires `block_touch_buffer` when the per-CPU buffer cache holds the block. So the
//! passes of the tracked tasks' allocations are the touches inside them, less those every
//! allocation makes (its bitmap, the inode it takes), scaled by the share of passes that
//! touch. The calibration measures both here, now, in a scratch directory at the root of
//! an ext4 file system without a journal (a group of its own, ext4 spreads new top-level
//! directories): allocations with nothing to pass (the touches each makes), then
//! allocations after `DELETED` deletions timed with the programs attached and without (the
//! tracer's own cost per touch, and the touches per pass).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use costlab_bpf::{Attached, Hook, Map};
use costlab_core::measure::cputime::thread_cpu_ns;
use costlab_core::measure::stats::median;
use costlab_core::measure::unitcost::{fsops, passes};
use serde::{Deserialize, Serialize};

use super::prog::{self, inodes as ip, Maps};

/// Attach `prog::inodes`' programs (all three or none); a note says why not.
pub(super) fn attach(m: &Maps, progs: &mut Vec<(String, Attached)>, notes: &mut Vec<String>) {
    match attach_all(m) {
        Ok(v) => progs.extend(v),
        Err(e) => notes.push(format!(
            "a create's passes over recently deleted inodes not counted (ext4 without a journal): {e}"
        )),
    }
}

fn attach_all(m: &Maps) -> Result<Vec<(String, Attached)>> {
    let raw = Hook::raw_tracepoint;
    [
        (ip::request(m), raw("ext4_request_inode")),
        (ip::allocate(m), raw("ext4_allocate_inode")),
        (ip::touch(m), raw("block_touch_buffer")),
    ]
    .into_iter()
    .map(|(a, hook)| Ok((hook.name(), costlab_bpf::attach(&a.finish()?, &hook)?)))
    .collect()
}

/// What turns touches into passes, and what a touch costs the tracer, measured here now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Touches an allocation makes with nothing to pass.
    pub base: f64,
    /// Touches per inode passed (below 1: a pass that finds its block outside the per-CPU
    /// buffer cache fires no touch).
    pub per_pass: f64,
    /// The tracer's own CPU ns per touch inside an allocation.
    pub touch_ns: f64,
}

impl Calibration {
    /// The passes of `windows` allocations that made `touches` touches.
    pub fn passes(&self, touches: u64, windows: u64) -> u64 {
        let extra = touches as f64 - self.base * windows as f64;
        (extra.max(0.0) / self.per_pass.max(0.5)).round() as u64
    }

    /// A note for the price: what was measured.
    pub fn line(&self) -> String {
        format!(
            "a create's passes over recently deleted inodes, calibrated here: an allocation makes {:.1} buffer touches of its own and {:.3} an inode it passes over ({DELETED} deleted first; 15/16 where the first inode of each 4 KiB inode-table block is found without one); the tracer's {:.0} ns a touch taken out",
            self.base, self.per_pass, self.touch_ns
        )
    }
}

/// Inodes deleted before the calibration's timed allocations.
pub const DELETED: usize = 400;
/// Allocations in each block of the calibration.
const BLOCK: usize = 16;
/// Touches an allocation with nothing to pass makes (its bitmap, the inode it takes: 3.5
/// here); a scratch directory whose allocations make more than this passes over deletions
/// itself, and a base read there would take the program's passes for its own.
const CLEAN_TOUCHES: f64 = 16.0;

/// An ext4 file system without a journal: `dir`'s if it is one, else the first mounted.
fn ext4_root(dir: &Path) -> Result<PathBuf> {
    if passes::passes_deleted_inodes(dir).unwrap_or(false) {
        return fsops::mount_point(dir);
    }
    fsops::mount_points_of("ext4")?
        .into_iter()
        .find(|mp| passes::passes_deleted_inodes(mp).unwrap_or(false))
        .context("no ext4 file system without a journal is mounted")
}

/// The calibration's maps and programs, this thread tracked on every CPU inside an openat
/// with O_CREAT.
struct Rig {
    slots: Map,
    _state: Map,
    _tasks: Map,
    _work: Map,
    _seen: Map,
    m: Maps,
}

impl Rig {
    fn new() -> Result<Rig> {
        let slots = Map::percpu_array(prog::SLOT_SIZE, prog::SLOTS)?;
        let state = Map::percpu_array(prog::STATE_SIZE, 1)?;
        let tasks = Map::hash(prog::TASK_SIZE, 16)?;
        let work = Map::percpu_array(prog::pages::WORK_SIZE, prog::SLOTS)?;
        let seen = Map::hash_u64(1, 16)?;
        let mut st = vec![0u8; prog::STATE_SIZE as usize];
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as u32;
        st[0..4].copy_from_slice(&tid.to_ne_bytes());
        st[4..8].copy_from_slice(&prog::OPEN_CREATE.to_ne_bytes());
        state.update(&0u32.to_ne_bytes(), &st)?;
        let m = Maps {
            slots: slots.fd(),
            state: state.fd(),
            tasks: tasks.fd(),
            work: work.fd(),
            by_fd: None,
            seen: seen.fd(),
        };
        Ok(Rig {
            slots,
            _state: state,
            _tasks: tasks,
            _work: work,
            _seen: seen,
            m,
        })
    }

    /// (touches, windows) so far.
    fn counts(&self) -> Result<(u64, u64)> {
        Ok((
            self.slots.sum_u64(ip::INODE_TOUCHES)?,
            self.slots.sum_u64(ip::INODE_WINDOWS)?,
        ))
    }
}

/// CPU ns of one create of `p` (closed after, untimed).
fn create(p: &Path) -> Result<f64> {
    let t = thread_cpu_ns();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .with_context(|| format!("creating {}", p.display()))?;
    let ns = thread_cpu_ns().saturating_sub(t) as f64;
    drop(f);
    Ok(ns)
}

/// Measure the calibration on the file system of `dir` (or another ext4 without a journal).
pub fn calibrate(dir: &Path) -> Result<Calibration> {
    let root = ext4_root(dir)?;
    let scratch = fsops::Scratch::fresh_clean(&root)?;
    let at = |n: &str| scratch.path().join(n);
    let rig = Rig::new()?;
    let progs = attach_all(&rig.m)?;
    for i in 0..2 * BLOCK {
        create(&at(&format!("clean{i}")))?;
    }
    let (touches, windows) = rig.counts()?;
    if windows < 2 * BLOCK as u64 {
        bail!(
            "{windows} allocations seen of {}: the tracepoints did not fire",
            2 * BLOCK
        );
    }
    let base = touches as f64 / windows as f64;
    if base > CLEAN_TOUCHES {
        bail!(
            "the scratch directory's own creates made {base:.1} buffer touches each, passing over inodes deleted in its group: this file system has no group clear of the recent deletions (one of few groups, or one flex group)"
        );
    }
    drop(progs);
    for i in 0..DELETED {
        create(&at(&format!("gone{i}")))?;
    }
    for i in 0..DELETED {
        std::fs::remove_file(at(&format!("gone{i}")))?;
    }
    passes::wait_past_deletions()?;
    let mut plain = Vec::new();
    for i in 0..BLOCK {
        plain.push(create(&at(&format!("plain{i}")))?);
    }
    let before = rig.counts()?;
    let progs = attach_all(&rig.m)?;
    let mut traced = Vec::new();
    for i in 0..BLOCK {
        traced.push(create(&at(&format!("traced{i}")))?);
    }
    drop(progs);
    let after = rig.counts()?;
    for i in 0..BLOCK {
        plain.push(create(&at(&format!("after{i}")))?);
    }
    let (touches, windows) = (after.0 - before.0, after.1 - before.1);
    if windows == 0 {
        bail!("no allocation seen while the programs were attached");
    }
    let per_alloc = touches as f64 / windows as f64;
    let per_pass = ((per_alloc - base) / DELETED as f64).clamp(0.5, 1.0);
    let touch_ns = ((median(&traced) - median(&plain)) / per_alloc).max(0.0);
    Ok(Calibration {
        base,
        per_pass,
        touch_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_become_passes_less_the_allocations_own() {
        let cal = Calibration {
            base: 4.0,
            per_pass: 0.9375,
            touch_ns: 60.0,
        };
        // 10 allocations that passed 1000 inodes each: 40 touches of their own, 9375 of passes.
        assert_eq!(cal.passes(40 + 9375, 10), 10_000);
        // Fewer touches than the allocations make on their own: nothing passed.
        assert_eq!(cal.passes(30, 10), 0);
        assert_eq!(cal.passes(0, 0), 0);
        // A per-pass share the calibration could not have measured (below one in two) is
        // held at one in two, not divided by.
        let odd = Calibration {
            per_pass: 0.0,
            ..cal
        };
        assert_eq!(odd.passes(14, 2), 12);
    }
}
