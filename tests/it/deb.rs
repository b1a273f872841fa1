//! The Debian package (`make deb`): built from the release binary the tests run, checked by
//! lintian, then installed where it cannot replace a costlab the machine has (an overlay over
//! / in a mount namespace of its own, as a chroot), where `costlab --version`, `man -w
//! costlab`, bash's completion of `costlab me<TAB>` and `systemd-analyze verify` run on what
//! it installed; then purged, and every path `dpkg -L` listed checked gone from the disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{is_root, skip, BIN};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the package cannot be built and installed here, if it cannot.
fn missing() -> Option<String> {
    if !is_root() {
        return Some("not root: installing needs a mount namespace and an overlay".into());
    }
    let deb = Command::new("cargo").args(["deb", "--version"]).output();
    if !deb.is_ok_and(|o| o.status.success()) {
        return Some("no cargo-deb (scripts/install-deps.sh installs it)".into());
    }
    for tool in [
        "dpkg",
        "unshare",
        "chroot",
        "man",
        "systemd-analyze",
        "lintian",
    ] {
        if !has(tool) {
            return Some(format!("no {tool} (scripts/install-deps.sh installs it)"));
        }
    }
    if !Path::new("/usr/share/bash-completion/bash_completion").is_file() {
        return Some("no bash-completion (scripts/install-deps.sh installs it)".into());
    }
    None
}

/// The package, built once per test run by scripts/deb.sh from the binary under test.
fn package() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        // Kept for the whole run: both tests read it.
        let out = tempfile::tempdir().unwrap().keep();
        let target = Path::new(BIN).parent().unwrap().parent().unwrap();
        let run = Command::new(Path::new(ROOT).join("scripts/deb.sh"))
            .arg(&out)
            .env("CARGO_TARGET_DIR", target)
            .env("CARGO_DEB_ARGS", "--fast")
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "scripts/deb.sh: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        let name = format!("costlab_{}_amd64.deb", env!("CARGO_PKG_VERSION"));
        let deb = out.join(name);
        assert!(deb.is_file(), "no {}", deb.display());
        deb
    })
}

/// lintian finds no error or warning that contrib/debian/lintian-overrides does not explain.
#[test]
fn the_package_is_lintian_clean() {
    if let Some(why) = missing() {
        skip::skipped_unless_ci("the_package_is_lintian_clean", &why);
        return;
    }
    let out = Command::new("lintian")
        .args(["--fail-on", "error,warning", "--suppress-tags-from-file"])
        .arg(Path::new(ROOT).join("contrib/debian/lintian-overrides"))
        .arg(package())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("$ lintian costlab.deb\n{said}");
    assert!(out.status.success(), "lintian: {said}");
    let tags: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("E:") || l.starts_with("W:"))
        .collect();
    assert!(tags.is_empty(), "{tags:?}");
}

/// What runs inside the throwaway root: each check's output after a `==name` line.
const INSIDE: &str = r#"set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
if ! dpkg -i /tmp/costlab.deb >/tmp/dpkg.log 2>&1; then cat /tmp/dpkg.log; exit 1; fi
echo "==version"; costlab --version
echo "==man"; man -w costlab
echo "==complete"
bash --norc --noprofile -c '
source /usr/share/bash-completion/bash_completion
__load_completion costlab
COMP_WORDS=(costlab me); COMP_CWORD=1; COMP_LINE="costlab me"; COMP_POINT=${#COMP_LINE}
fn=$(complete -p costlab | sed -E "s/.* -F ([^ ]+) .*/\1/")
"$fn" costlab me costlab
printf "%s\n" "${COMPREPLY[@]}"'
echo "==verify"; systemd-analyze verify costlab.service costlab.timer 2>&1; echo "exit $?"
echo "==enabled"; systemctl is-enabled costlab.timer costlab.service 2>&1
echo "==listed"; dpkg -L costlab | tee /tmp/listed
if ! dpkg --purge costlab >/tmp/dpkg.log 2>&1; then echo "==purge failed"; cat /tmp/dpkg.log; fi
echo "==left"
while read -r f; do if [ -e "$f" ] && [ ! -d "$f" ]; then echo "$f"; fi; done </tmp/listed
echo "==status"; dpkg-query -W -f='${Status}\n' costlab 2>&1
echo "==end"
"#;

/// Sets up the overlay over / and runs INSIDE chrooted into it; all of it in a mount namespace
/// of its own, so the mounts and every write vanish with it.
const OUTSIDE: &str = r#"set -euo pipefail
T=$1
mount -t tmpfs costlab-deb-test "$T"
mkdir "$T/upper" "$T/work" "$T/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$T/upper,workdir=$T/work" "$T/root"
mount --bind /dev "$T/root/dev"
mount -t proc proc "$T/root/proc"
mount -t tmpfs tmpfs "$T/root/tmp"
mount -t tmpfs tmpfs "$T/root/run"
cp "$2" "$T/root/tmp/costlab.deb"
printf '%s' "$3" >"$T/root/tmp/inside.sh"
chroot "$T/root" /bin/bash /tmp/inside.sh
"#;

fn section<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text
        .find(&format!("=={name}\n"))
        .unwrap_or_else(|| panic!("no =={name} in:\n{text}"))
        + name.len()
        + 3;
    let rest = &text[start..];
    // An empty section is followed at once by the next marker.
    let end = if rest.starts_with("==") {
        0
    } else {
        rest.find("\n==").map_or(rest.len(), |i| i + 1)
    };
    &rest[..end]
}

#[test]
fn the_package_installs_works_and_purges_without_a_trace() {
    if let Some(why) = missing() {
        skip::skipped_unless_ci(
            "the_package_installs_works_and_purges_without_a_trace",
            &why,
        );
        return;
    }
    let deb = package();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .args([
            "300",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            OUTSIDE,
            "deb-test",
        ])
        .arg(dir.path())
        .arg(deb)
        .arg(INSIDE)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}{err}");
    assert!(
        out.status.success(),
        "exit {:?}: {text}{err}",
        out.status.code()
    );
    assert!(text.contains("==end"), "{text}");

    let version = section(&text, "version");
    assert!(
        version.starts_with(&format!("costlab {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert_eq!(
        section(&text, "man").trim(),
        "/usr/share/man/man1/costlab.1.gz"
    );
    let offered: Vec<&str> = section(&text, "complete").lines().collect();
    assert!(
        offered.contains(&"mem"),
        "costlab me<TAB> offers {offered:?}"
    );
    assert!(offered.iter().all(|w| w.starts_with("me")), "{offered:?}");
    assert_eq!(
        section(&text, "verify").trim(),
        "exit 0",
        "systemd-analyze verify said more"
    );
    let enabled: Vec<&str> = section(&text, "enabled").lines().collect();
    assert_eq!(enabled, ["disabled", "static"], "installed, not enabled");

    let listed = section(&text, "listed");
    for path in [
        "/usr/bin/costlab",
        "/usr/share/man/man1/costlab.1.gz",
        "/usr/share/man/man1/costlab-mem.1.gz",
        "/usr/share/bash-completion/completions/costlab",
        "/usr/share/zsh/vendor-completions/_costlab",
        "/usr/share/fish/vendor_completions.d/costlab.fish",
        "/usr/share/costlab/costlab-alerts.yml",
        "/etc/default/costlab",
    ] {
        assert!(
            listed.lines().any(|l| l == path),
            "{path} not in dpkg -L:\n{listed}"
        );
    }
    assert!(
        listed
            .lines()
            .any(|l| l.ends_with("systemd/system/costlab.service"))
            && listed
                .lines()
                .any(|l| l.ends_with("systemd/system/costlab.timer")),
        "units not in dpkg -L:\n{listed}"
    );
    assert!(!text.contains("==purge failed"), "{text}");
    assert_eq!(
        section(&text, "left").trim(),
        "",
        "left on the disk after purge"
    );
    assert!(
        !section(&text, "status").contains("installed"),
        "{}",
        section(&text, "status")
    );
}
