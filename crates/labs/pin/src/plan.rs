//! The pin lab's plan: the workloads and placements to measure and how long, from the
//! command line or for `costlab run`.

use std::time::Duration;

use anyhow::Result;

use super::args::PinArgs;
use super::placement::{self, Placement};
use costlab_core::error::usage;
use costlab_core::measure::sizes::parse_list;
use costlab_core::measure::units::parse_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Memory,
    Sharing,
    Echo,
}

pub const WORKLOADS: [Workload; 3] = [Workload::Memory, Workload::Sharing, Workload::Echo];

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Memory => "memory",
            Workload::Sharing => "sharing",
            Workload::Echo => "echo",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Memory => "Mloads/s",
            Workload::Sharing => "Mop/s",
            Workload::Echo => "req/s",
        }
    }

    /// Placements that mean something for the workload: irq-cpu is about the server.
    pub fn placements(self) -> &'static [Placement] {
        match self {
            Workload::Echo => &placement::ALL,
            _ => &[
                Placement::Pinned,
                Placement::Free,
                Placement::Stacked,
                Placement::SameCore,
                Placement::SameNode,
                Placement::CrossNode,
                Placement::PerCore,
            ],
        }
    }

    /// Threads the workload runs: echo is a server and a client whatever `--threads` says.
    pub fn threads(self, asked: usize) -> usize {
        match self {
            Workload::Echo => 2,
            _ => asked,
        }
    }
}

pub struct Plan {
    pub workloads: Vec<Workload>,
    pub placements: Vec<Placement>,
    /// The placements were named on the command line: one that is impossible here is refused
    /// (exit 2) rather than noted and left out.
    pub explicit: bool,
    /// Busy threads of the memory and sharing workloads.
    pub threads: usize,
    /// Move the NIC's queue interrupts onto the server's CPU for irq-cpu (root).
    pub move_irqs: bool,
    /// Length of each placement's run, split into `samples` runs.
    pub duration: Duration,
}

/// The shortest and longest `--duration` (each placement's run, split into the samples).
const MIN_RUN: Duration = Duration::from_millis(50);
const MAX_RUN: Duration = Duration::from_secs(600);
/// The most busy threads `--threads` takes (each memory thread chases its own 64 MiB).
const MAX_THREADS: usize = 256;

impl Plan {
    /// The plan `costlab pin` asks for.
    pub fn parse(args: &PinArgs, quick: bool) -> Result<Plan> {
        let workloads = match &args.workload {
            None => WORKLOADS.to_vec(),
            Some(t) => choices(t, "--case", "workload", "memory, sharing, echo", |s| {
                WORKLOADS.into_iter().find(|w| w.name() == s)
            })?,
        };
        let placements = match &args.placement {
            None => placement::ALL.to_vec(),
            Some(t) => choices(t, "--placement", "placement", placement::NAMES, |s| {
                Placement::parse(s)
            })?,
        };
        let threads = match &args.threads {
            None => 2,
            Some(t) => {
                let one = costlab_lab::args::one("--threads", t, "pin runs one thread count")?;
                costlab_core::measure::units::parse_count(
                    one,
                    "--threads",
                    1,
                    MAX_THREADS as u64,
                    "4",
                )? as usize
            }
        };
        let duration = match &args.duration {
            Some(d) => parse_duration(d, "--duration", MIN_RUN, MAX_RUN)?,
            None if quick => Duration::from_millis(500),
            None => Duration::from_secs(2),
        };
        Ok(Plan {
            workloads,
            explicit: args.placement.is_some(),
            placements,
            threads,
            move_irqs: args.move_irqs,
            duration,
        })
    }

    /// `costlab run`'s plan: quick, the two workloads of the cost sheet, a few seconds in all.
    pub fn for_run(full: bool) -> Plan {
        Plan {
            workloads: if full {
                WORKLOADS.to_vec()
            } else {
                vec![Workload::Memory, Workload::Echo]
            },
            placements: if full {
                placement::ALL.to_vec()
            } else {
                vec![Placement::Pinned, Placement::Stacked, Placement::IrqCpu]
            },
            explicit: false,
            threads: 2,
            move_irqs: false,
            duration: if full {
                Duration::from_secs(2)
            } else {
                Duration::from_millis(300)
            },
        }
    }
}

/// `--case memory,echo`: names from `names`, in the order given.
fn choices<T: PartialEq>(
    text: &str,
    flag: &str,
    what: &str,
    names: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>> {
    if text.trim().is_empty() {
        return Err(usage(format!("{flag} is empty: give {names}")));
    }
    parse_list(text, |s| {
        parse(s).ok_or_else(|| usage(format!("unknown {what} '{s}': use {names}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    fn args(workload: Option<&str>, placement: Option<&str>, duration: Option<&str>) -> PinArgs {
        PinArgs {
            threads: None,
            workload: workload.map(String::from),
            placement: placement.map(String::from),
            duration: duration.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn a_plan_takes_the_lists_in_the_order_given() {
        let p = Plan::parse(&args(Some("echo,memory"), Some("free"), Some("1s")), false).unwrap();
        assert_eq!(p.workloads, vec![Workload::Echo, Workload::Memory]);
        assert_eq!(p.placements, vec![Placement::Free]);
        assert_eq!(p.duration, Duration::from_secs(1));
        let all = Plan::parse(&args(None, None, None), true).unwrap();
        assert_eq!(all.workloads.len(), 3);
        assert_eq!(all.duration, Duration::from_millis(500));
    }

    #[test]
    fn bad_lists_and_durations_are_usage_errors() {
        for (a, want) in [
            (args(Some("disk"), None, None), "unknown workload 'disk'"),
            (args(None, Some(""), None), "--placement is empty"),
            (args(None, Some("pinned,,free"), None), "an item is empty"),
            (args(None, None, Some("10ms")), "from 50ms to 600s"),
            (
                args(None, Some("same-socket"), None),
                "unknown placement 'same-socket'",
            ),
            (
                PinArgs {
                    threads: Some("0".into()),
                    ..args(None, None, None)
                },
                "bad --threads '0'",
            ),
        ] {
            let e = Plan::parse(&a, false).err().unwrap();
            assert_eq!(exit_code(&e), 2, "{e}");
            assert!(e.to_string().contains(want), "{e}");
        }
    }
}
