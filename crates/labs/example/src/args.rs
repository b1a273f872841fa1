//! The example lab's command line: `costlab example [--value NS]` and the common options.

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone)]
pub struct ExampleArgs {
    /// The figure each sample reports, in ns
    #[arg(long, value_name = "NS", default_value_t = 42.0)]
    pub value: f64,
    #[command(flatten)]
    pub common: Common,
}
