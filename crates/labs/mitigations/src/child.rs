//! `costlab mitigations child`: the process started under one control's state. It checks the
//! state it was given, measures s (getppid), w (16-byte loopback send and recv) and t(n)
//! (io_uring NOP, send and recv at each batch) with the kernels of `measure::syscost`, and
//! writes its figures as one JSON object on stdout for the parent.

use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::args::ChildArgs;
use super::{parse_batches, State, LAB};
use costlab_core::error::usage;
use costlab_core::machine::speculation::{self, Control};
use costlab_core::measure::{syscost, SampleSpec};
use costlab_history::report::Outcome;

/// One figure: the syscall lab's call and batch, ns per call or op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildFigure {
    pub call: String,
    pub batch: u32,
    pub samples: Vec<f64>,
}

/// What a child measured, and the state it measured under as it read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    pub control: String,
    pub state: String,
    /// PR_GET_SPECULATION_CTRL's flags in the child.
    pub prctl: u32,
    /// The control's /proc/self/status line in the child ("thread force mitigated").
    pub status: Option<String>,
    pub figures: Vec<ChildFigure>,
    /// Why io_uring figures are missing, if they are.
    pub uring_unsupported: Option<String>,
}

impl ChildReport {
    /// The report is of the control and state asked, and prctl says the state held.
    pub fn check(&self, control: Control, state: State) -> Result<()> {
        if self.control != control.name() || self.state != state.name() {
            bail!(
                "the child measured {} {}, not {} {}",
                self.control,
                self.state,
                control.name(),
                state.name()
            );
        }
        if !state.holds(self.prctl) {
            bail!(
                "{} {}: the child's prctl reads {} ({}), not that state",
                control.name(),
                state.name(),
                speculation::Flags(self.prctl).names(),
                self.status.as_deref().unwrap_or("no status line")
            );
        }
        Ok(())
    }

    /// The lab's rows: case control, state, call, batch; latency in ns.
    pub fn outcome(&self, control: Control, state: State) -> Outcome {
        let mut o = Outcome::default();
        for f in &self.figures {
            o.push(
                LAB,
                costlab_core::case! {
                    "control" => control.name(),
                    "state" => state.name(),
                    "call" => f.call.as_str(),
                    "batch" => f.batch
                },
                "latency",
                "ns",
                f.samples.clone(),
            );
        }
        if let Some(why) = &self.uring_unsupported {
            o.notes
                .push(format!("io_uring figures unsupported here: {why}"));
        }
        o
    }
}

/// The child's command: check the state, measure, print the report.
pub fn child_command(a: &ChildArgs) -> Result<()> {
    let control = Control::of(&a.control).ok_or_else(|| {
        usage(format!(
            "--control {}: use store-bypass or indirect-branch",
            a.control
        ))
    })?;
    let state =
        State::of(&a.state).ok_or_else(|| usage(format!("--state {}: use on or off", a.state)))?;
    let batches = parse_batches(&a.batches)?;
    let offer = speculation::offer(control);
    let flags = match &offer.prctl {
        Ok(f) => f.0,
        Err(e) => bail!(
            "{}: prctl(PR_GET_SPECULATION_CTRL) failed: {e}",
            control.name()
        ),
    };
    if !state.holds(flags) {
        return Err(usage(format!(
            "{} {}: this process runs with {} ({}): start it through `costlab mitigations`, which sets the state",
            control.name(),
            state.name(),
            speculation::Flags(flags).names(),
            offer.status.as_deref().unwrap_or("no status line")
        )));
    }
    let spec = if a.quick {
        SampleSpec {
            samples: a.samples.max(1),
            min_sample: Duration::from_millis(10),
            warmup: Duration::from_millis(10),
        }
    } else {
        SampleSpec::default().with_samples(Some(a.samples))
    };
    let (figures, uring_unsupported) = measure(&spec, &batches)?;
    let report = ChildReport {
        control: control.name().into(),
        state: state.name().into(),
        prctl: flags,
        status: offer.status,
        figures,
        uring_unsupported,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// s, w and t(n), pinned to the last allowed CPU as the syscall lab measures them.
fn measure(spec: &SampleSpec, batches: &[u32]) -> Result<(Vec<ChildFigure>, Option<String>)> {
    let _pinned = costlab_core::measure::cpus::Pinned::last_allowed();
    let fig = |call: &str, batch: u32, samples: Vec<f64>| ChildFigure {
        call: call.into(),
        batch,
        samples,
    };
    let mut v = vec![fig("getppid", 1, syscost::null_syscall(spec)?)];
    let (send, recv) = syscost::tcp_send_recv(spec)?;
    v.push(fig("tcp-send", 1, send));
    v.push(fig("tcp-recv", 1, recv));
    if let Some(why) = syscost::uring_unsupported() {
        return Ok((v, Some(why)));
    }
    for &b in batches {
        let nop = syscost::uring_nop(spec, b);
        let sr = nop.and_then(|nop| Ok((nop, syscost::uring_send_recv(spec, b)?)));
        match sr {
            Ok((nop, (send, recv))) => {
                v.push(fig("uring-nop", b, nop));
                v.push(fig("uring-send", b, send));
                v.push(fig("uring-recv", b, recv));
            }
            Err(e) => {
                costlab_core::measure::cancel::check()?;
                return Ok((v, Some(format!("io_uring batch {b}: {e:#}"))));
            }
        }
    }
    Ok((v, None))
}
