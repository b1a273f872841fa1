//! The syscall lab's command line.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct SyscallArgs {
    /// io_uring batches to measure (ops per enter), a comma list from 1 to 4096
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub batches: Option<String>,
    #[command(flatten)]
    pub common: Common,
}
