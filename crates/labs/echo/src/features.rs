//! The techniques the uring server uses, each of which `--features` can switch off so that
//! its gain shows: `--features -bundle,-inc` runs without receive bundles and incremental
//! buffers. What the kernel lacks falls back one technique at a time, and the server says
//! which took (`ServerStats::features`).

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::measure::sizes;

/// What the uring server is asked to use. The server reports what it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Large provided buffers (32 KiB) instead of 2 KiB ones: a message up to 32 KiB lands in
    /// one buffer, so it is one completion and one send.
    pub big: bool,
    /// Receive bundles (IORING_RECVSEND_BUNDLE): one completion fills several buffers.
    pub bundle: bool,
    /// Incremental buffer consumption (IOU_PBUF_RING_INC): a recv takes only the bytes it
    /// needs from a buffer, so small messages pack into one buffer and large buffers do not
    /// waste memory.
    pub inc: bool,
    /// Send everything a connection holds in one sendmsg with an iovec of its buffers,
    /// instead of one send per buffer.
    pub sendmsg: bool,
    /// Registered files: accepted sockets become direct descriptors (no fd table lookup and
    /// no file refcount per operation).
    pub fixed: bool,
    /// The buffer pool on transparent huge pages: the kernel's copy into a buffer walks no
    /// 4 KiB page tables (each a nested walk in a VM) for the buffers that cycle through the
    /// ring.
    pub huge: bool,
    /// SEND_ZC for a send of at least this many bytes; None: never (the default: on loopback
    /// the receiver copies anyway, so zero copy only adds the notification).
    pub zc: Option<usize>,
    /// The hot path for messages of at least this many bytes (the server's `--sizes`): no
    /// provided-buffer ring; each connection has a multishot poll, and a readable one is
    /// received into one of a few shared buffers, which its echo frees at once, so the
    /// kernel copies into memory that stays in cache. The ring cycles through far more
    /// memory than the cache holds, which costs most when messages are large. None: never.
    pub hot: Option<usize>,
    /// Before the server sleeps for want of completions, it polls the ring a little (at most
    /// SPIN_USEC) while that has recently found work. A sleeping server is woken by the
    /// peer's send, which on a virtual machine costs the waker an interrupt sent to a halted
    /// CPU: a server faster than its clients sleeps after nearly every request and makes each
    /// of them pay that.
    pub spin: bool,
}

/// Names as `--features` spells them, in the order they are reported.
pub const NAMES: [&str; 9] = [
    "big", "bundle", "inc", "sendmsg", "fixed", "huge", "zc", "hot", "spin",
];

impl Default for Features {
    fn default() -> Self {
        Features {
            big: true,
            bundle: true,
            inc: true,
            sendmsg: true,
            fixed: true,
            huge: true,
            zc: None,
            hot: Some(DEFAULT_HOT),
            spin: true,
        }
    }
}

/// The SEND_ZC threshold `+zc` alone sets: a 64 KiB send, where the copy a zero-copy send
/// saves starts to outweigh its notification on a real NIC.
pub const DEFAULT_ZC: usize = 64 * 1024;

/// The message size from which the hot path runs by default. Measured here (2 vCPUs, one
/// sweep, `--features hot=512 --ablate`, server CPU per request of the ring path over the hot
/// path): 512 B 1.07/0.80 and 4 KiB 1.12/0.97 at 16/128 connections, mixed, where a
/// multishot recv takes one completion and the hot path a poll and a recv; 8 KiB 1.12/1.11
/// and up, where the copy into a cold ring buffer outweighs the extra completion.
pub const DEFAULT_HOT: usize = 8 * 1024;

impl Features {
    /// Every technique off: multishot recv into 2 KiB provided buffers, one send per buffer.
    pub fn none() -> Features {
        Features {
            big: false,
            bundle: false,
            inc: false,
            sendmsg: false,
            fixed: false,
            huge: false,
            zc: None,
            hot: None,
            spin: false,
        }
    }

    /// Whether the hot path serves messages of `size` bytes.
    pub fn hot_for(&self, size: u64) -> bool {
        self.hot.is_some_and(|t| size >= t as u64)
    }

    /// Whether switching `name` off changes what a server with these features does with
    /// messages of `size` bytes: the hot path uses none of the ring's buffer techniques (nor
    /// zc), and below its threshold there is no hot path to switch off.
    pub fn matters_at(&self, name: &str, size: u64) -> bool {
        let hot = self.hot_for(size);
        match name {
            "hot" => hot,
            "fixed" | "spin" => true,
            _ => !hot,
        }
    }

    /// Parse "all", "none", "-bundle,-inc", "zc=64K", "+zc", "hot=4K", "-hot"; items apply left to right on
    /// top of the default (everything but zc).
    pub fn parse(text: &str) -> Result<Features> {
        let mut f = Features::default();
        let text = text.trim();
        if text.is_empty() || text == "all" || text == "default" {
            return Ok(f);
        }
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "none" {
                f = Features::none();
                continue;
            }
            if item == "all" || item == "default" {
                f = Features::default();
                continue;
            }
            let (on, name) = match item.strip_prefix('-') {
                Some(n) => (false, n),
                None => (true, item.strip_prefix('+').unwrap_or(item)),
            };
            if let Some(size) = name.strip_prefix("zc=") {
                if !on {
                    return Err(bad(item));
                }
                let b = sizes::parse_size(size)?;
                f.zc = Some(b.max(1) as usize);
                continue;
            }
            if let Some(size) = name.strip_prefix("hot=") {
                if !on {
                    return Err(bad(item));
                }
                let b = sizes::parse_size(size)?;
                f.hot = Some(b.max(1) as usize);
                continue;
            }
            match name {
                "big" => f.big = on,
                "bundle" => f.bundle = on,
                "inc" => f.inc = on,
                "sendmsg" => f.sendmsg = on,
                "fixed" => f.fixed = on,
                "huge" => f.huge = on,
                "zc" => f.zc = on.then_some(DEFAULT_ZC),
                "hot" => f.hot = on.then_some(DEFAULT_HOT),
                "spin" => f.spin = on,
                _ => return Err(bad(item)),
            }
        }
        Ok(f)
    }

    /// The `--features` text that gives back these features ("all" for the default).
    pub fn spec(&self) -> String {
        if *self == Features::default() {
            return "all".into();
        }
        let d = Features::default();
        let mut items = Vec::new();
        for (name, mine, def) in [
            ("big", self.big, d.big),
            ("bundle", self.bundle, d.bundle),
            ("inc", self.inc, d.inc),
            ("sendmsg", self.sendmsg, d.sendmsg),
            ("fixed", self.fixed, d.fixed),
            ("huge", self.huge, d.huge),
            ("spin", self.spin, d.spin),
        ] {
            if mine != def {
                items.push(format!("{}{name}", if mine { "+" } else { "-" }));
            }
        }
        if let Some(z) = self.zc {
            items.push(format!("zc={z}"));
        }
        match self.hot {
            None => items.push("-hot".into()),
            Some(h) if h != DEFAULT_HOT => items.push(format!("hot={h}")),
            Some(_) => {}
        }
        items.join(",")
    }

    /// "big,bundle,inc,sendmsg,fixed,huge,hot>=8192,spin" (what is on, in NAMES order), with
    /// "zc>=65536" when set.
    pub fn on_list(&self) -> String {
        let mut on: Vec<String> = [
            ("big", self.big),
            ("bundle", self.bundle),
            ("inc", self.inc),
            ("sendmsg", self.sendmsg),
            ("fixed", self.fixed),
            ("huge", self.huge),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| n.to_string())
        .collect();
        if let Some(z) = self.zc {
            on.push(format!("zc>={z}"));
        }
        if let Some(h) = self.hot {
            on.push(format!("hot>={h}"));
        }
        if self.spin {
            on.push("spin".into());
        }
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    }

    /// The same features with one switched off: the variants an ablation sweep runs.
    pub fn without(&self, name: &str) -> Features {
        let mut f = *self;
        match name {
            "big" => f.big = false,
            "bundle" => f.bundle = false,
            "inc" => f.inc = false,
            "sendmsg" => f.sendmsg = false,
            "fixed" => f.fixed = false,
            "huge" => f.huge = false,
            "zc" => f.zc = None,
            "hot" => f.hot = None,
            "spin" => f.spin = false,
            _ => {}
        }
        f
    }

    /// Whether a technique is on.
    pub fn has(&self, name: &str) -> bool {
        match name {
            "big" => self.big,
            "bundle" => self.bundle,
            "inc" => self.inc,
            "sendmsg" => self.sendmsg,
            "fixed" => self.fixed,
            "huge" => self.huge,
            "zc" => self.zc.is_some(),
            "hot" => self.hot.is_some(),
            "spin" => self.spin,
            _ => false,
        }
    }
}

fn bad(item: &str) -> anyhow::Error {
    usage(format!(
        "unknown --features item '{item}': use all, none, or a comma list of -NAME / +NAME with NAME one of {}, or zc=SIZE, hot=SIZE (like -bundle,-inc or zc=64K)",
        NAMES.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use costlab_core::error::exit_code;

    #[test]
    fn features_parse_and_print_back() {
        assert_eq!(Features::parse("all").unwrap(), Features::default());
        assert_eq!(Features::parse("").unwrap(), Features::default());
        let f = Features::parse("-bundle,-inc").unwrap();
        assert!(!f.bundle && !f.inc && f.big && f.sendmsg && f.fixed && f.zc.is_none());
        assert_eq!(f.spec(), "-bundle,-inc");
        assert_eq!(Features::parse(&f.spec()).unwrap(), f);
        assert_eq!(Features::parse("none").unwrap(), Features::none());
        assert_eq!(Features::parse("none,+big").unwrap().on_list(), "big");
        assert_eq!(Features::parse("zc=16K").unwrap().zc, Some(16384));
        assert_eq!(Features::parse("+zc").unwrap().zc, Some(DEFAULT_ZC));
        assert_eq!(
            Features::parse("zc=1K").unwrap().on_list(),
            "big,bundle,inc,sendmsg,fixed,huge,zc>=1024,hot>=8192,spin"
        );
        assert_eq!(Features::none().on_list(), "none");
        assert!(!Features::default().without("inc").has("inc"));
        // The hot path: a threshold, its own spelling, and off by name.
        let hot = Features::parse("hot=1").unwrap();
        assert_eq!(hot.hot, Some(1));
        assert_eq!(hot.spec(), "hot=1");
        assert_eq!(Features::parse(&hot.spec()).unwrap(), hot);
        let cold = Features::parse("-hot").unwrap();
        assert_eq!(cold.spec(), "-hot");
        assert_eq!(Features::parse("-hot,+hot").unwrap(), Features::default());
        assert!(Features::default().hot_for(8192) && !Features::default().hot_for(8191));
        assert!(!cold.hot_for(1 << 20) && !Features::none().hot_for(1 << 20));
        assert_eq!(
            Features::none().spec(),
            "-big,-bundle,-inc,-sendmsg,-fixed,-huge,-spin,-hot"
        );
        // Spinning before a sleep: on by default, off by name, on both paths.
        let still = Features::parse("-spin").unwrap();
        assert!(!still.spin && Features::default().spin && !Features::none().spin);
        assert_eq!(still.spec(), "-spin");
        assert_eq!(Features::parse(&still.spec()).unwrap(), still);
        let d = Features::default();
        assert!(d.matters_at("spin", 512) && d.matters_at("spin", 65536));
        assert!(!d.without("spin").has("spin"));
        let d = Features::default();
        assert!(d.matters_at("hot", 65536) && !d.matters_at("hot", 4096));
        assert!(d.matters_at("bundle", 4096) && !d.matters_at("bundle", 65536));
        assert!(d.matters_at("fixed", 4096) && d.matters_at("fixed", 65536));
        for bad in ["-turbo", "-zc=4K", "zc=lots", "-hot=4K", "hot=0x"] {
            assert_eq!(exit_code(&Features::parse(bad).unwrap_err()), 2, "{bad}");
        }
    }
}
