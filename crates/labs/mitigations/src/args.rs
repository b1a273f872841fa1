//! The mitigations lab's command line: `costlab mitigations` and its hidden `child`, the
//! process that measures s, w and t(n) under one control's state.

use clap::{Args, Subcommand};

use costlab_lab::args::Common;

/// `costlab mitigations`: each per-task speculation control forced on and off, A/B.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MitigationsArgs {
    #[command(subcommand)]
    pub command: Option<MitigationsCommand>,
    #[command(flatten)]
    pub run: MitigationsRunArgs,
}

#[derive(Subcommand, Debug)]
pub enum MitigationsCommand {
    /// (internal) measure s, w and t(n) in this process, started under one control's state
    #[command(
        hide = true,
        after_help = "Examples:\n  costlab mitigations child --control store-bypass --state off\n  (started by `costlab mitigations`, which sets the state between fork and exec)"
    )]
    Child(ChildArgs),
}

#[derive(Args, Debug, Clone)]
pub struct MitigationsRunArgs {
    /// Cases: the controls to force on and off (store-bypass, indirect-branch)
    #[arg(
        long = "case",
        default_value = "store-bypass,indirect-branch",
        value_name = "LIST"
    )]
    pub controls: String,
    /// io_uring batches for t(n), a comma list from 1 to 4096 [default: 1,16; full 1,4,16,64]
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub batches: Option<String>,
    /// A/B rounds: each state's processes run once per round, the order alternating
    /// [default: 2; 3 without --quick]
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = costlab_lab::args::whole::<usize, 1, 20>)]
    pub rounds: Option<usize>,
    /// Echo connection counts for the io_uring/epoll ratio
    #[arg(long, default_value = "1,128", value_name = "LIST")]
    pub conns: String,
    /// Leave the echo servers out: s, w and t(n) only
    #[arg(long)]
    pub no_echo: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct ChildArgs {
    /// The control this process was started under
    #[arg(long, value_name = "CONTROL")]
    pub control: String,
    /// on (forced disabled speculation) or off (speculation enabled)
    #[arg(long, value_name = "STATE")]
    pub state: String,
    /// io_uring batches
    #[arg(long, default_value = "1,16", value_name = "LIST")]
    pub batches: String,
    /// Samples per figure
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub samples: usize,
    /// Shorter samples
    #[arg(long)]
    pub quick: bool,
}
