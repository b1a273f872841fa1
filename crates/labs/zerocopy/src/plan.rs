//! What the zero-copy lab measures: the methods, payload sizes and links, parsed from the
//! command line or set by `costlab run`'s plans.

use anyhow::Result;

use crate::args::ZerocopyArgs;
use crate::model::{self, Method};
use costlab_core::error::usage;
use costlab_core::measure::sizes::parse_size_list;

/// The default sweep: 4 KiB to 4 MiB by 4x.
pub const SIZES: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
pub(crate) const QUICK_SIZES: [u64; 2] = [64 << 10, 1 << 20];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Loopback,
    Veth,
}

impl Link {
    pub fn name(self) -> &'static str {
        match self {
            Link::Loopback => "loopback",
            Link::Veth => "veth",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub methods: Vec<Method>,
    pub sizes: Vec<u64>,
    pub links: Vec<Link>,
    /// veth was asked for by default rather than by name: skip it quietly (with a note) where
    /// it cannot be made.
    pub veth_optional: bool,
    pub dir: std::path::PathBuf,
}

impl Plan {
    pub fn parse(args: &ZerocopyArgs, quick: bool) -> Result<Plan> {
        let methods = match &args.methods {
            None => model::ALL.to_vec(),
            Some(t) => t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Method::parse(s).ok_or_else(|| {
                        usage(format!(
                            "unknown method '{s}' in --case: use {}",
                            model::ALL.map(Method::name).join(", ")
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        };
        if methods.is_empty() {
            return Err(usage(
                "--case is empty: give a comma list such as sendfile,send",
            ));
        }
        let sizes = match &args.sizes {
            Some(t) => parse_size_list(t)?,
            None if quick => QUICK_SIZES.to_vec(),
            None => SIZES.to_vec(),
        };
        if let Some(&bad) = sizes.iter().find(|&&s| !(1..=(64 << 20)).contains(&s)) {
            return Err(usage(format!(
                "payload {bad} bytes in --sizes is out of range: use 1 byte to 64M, like 4K,64K,1M"
            )));
        }
        let links = match &args.link {
            None => vec![Link::Loopback, Link::Veth],
            Some(t) => t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| match s {
                    "loopback" => Ok(Link::Loopback),
                    "veth" => Ok(Link::Veth),
                    _ => Err(usage(format!(
                        "unknown link '{s}' in --link: use loopback, veth or both"
                    ))),
                })
                .collect::<Result<Vec<_>>>()?,
        };
        if links.is_empty() {
            return Err(usage("--link is empty: give loopback, veth or both"));
        }
        Ok(Plan {
            methods,
            sizes,
            links,
            veth_optional: args.link.is_none(),
            dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
        })
    }
}
