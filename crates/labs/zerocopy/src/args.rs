//! The zerocopy lab's command line.

use std::path::PathBuf;

use clap::Args;

use costlab_lab::args::Common;

#[derive(Args, Debug, Clone, Default)]
pub struct ZerocopyArgs {
    /// Cases: the methods (comma list): read-write, mmap-write, sendfile, splice, send, msg-zerocopy,
    /// uring-send, uring-send-zc [default: all]
    #[arg(long = "case", value_name = "LIST")]
    pub methods: Option<String>,
    /// Payload sizes, one call's bytes [default: 4K,16K,64K,256K,1M,4M; 64K,1M with --quick]
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// Links: loopback, veth (receiver in a network namespace; root) [default: both, veth
    /// where it can be made]
    #[arg(long, value_name = "LIST")]
    pub link: Option<String>,
    /// Directory for the file the file methods send from [default: the temp directory]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}
