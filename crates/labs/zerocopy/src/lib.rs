//! The zero-copy lab: what moving bytes to a socket costs, by method and payload size. File to
//! socket (read+write, mmap+write, sendfile, splice through a pipe) and memory to socket
//! (send, MSG_ZEROCOPY, io_uring SEND and SEND_ZC), over loopback and, as root, a veth pair
//! into a network namespace. Throughput, the sender's and receiver's CPU per GB, calls per GB,
//! and for the zero-copy sends the share the kernel really did not copy.
//!
//! The model: sender CPU per GB = bytes copied x a copy's cost per byte (a memcpy at the
//! payload size, measured here) + calls x a call's cost (s, the null syscall). The payload
//! size from which each zero-copy method costs less sender CPU than its copying twin is read
//! from the measurements.

pub mod args;
pub mod completions;
mod execute;
pub mod model;
mod plan;
mod render;
mod sender;
mod source;
pub mod transfer;
mod verdict;
pub mod veth;

use anyhow::Result;

use args::ZerocopyArgs;
use costlab_core::error::usage;
use costlab_history::report::Outcome;
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub use execute::execute;
use plan::QUICK_SIZES;
pub use plan::{Link, Plan, SIZES};
pub use render::{headlines, render};

pub const LAB: &str = "zerocopy";

/// `costlab zerocopy`.
pub fn run(args: &ZerocopyArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::parse(args, ctx.quick)?;
    if !plan.veth_optional && plan.links.contains(&Link::Veth) {
        if let Some(why) = veth::unavailable() {
            return Err(usage(why));
        }
    }
    if !plan.dir.is_dir() {
        return Err(usage(format!(
            "--dir {} is not a directory: give one where a scratch file may be written",
            plan.dir.display()
        )));
    }
    execute(&plan, ctx)
}

pub struct ZerocopyLab;

impl Lab for ZerocopyLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<ZerocopyArgs>(
            "zerocopy",
            "What moving bytes to a socket costs: read+write, mmap, sendfile, splice, send, MSG_ZEROCOPY, io_uring SEND and SEND_ZC, by payload size, over loopback and veth",
            "Examples:\n  costlab zerocopy\n  costlab zerocopy --case read-write,sendfile --sizes 64K,1M --link loopback",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: ZerocopyArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }

    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let plan = Plan {
            methods: model::ALL.to_vec(),
            sizes: if full {
                SIZES.to_vec()
            } else {
                QUICK_SIZES.to_vec()
            },
            // Quick: loopback only, to stay within a few seconds; `costlab zerocopy` adds veth.
            links: if full {
                vec![Link::Loopback, Link::Veth]
            } else {
                vec![Link::Loopback]
            },
            veth_optional: true,
            dir: std::env::temp_dir(),
        };
        execute(&plan, ctx)
    }

    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
}
