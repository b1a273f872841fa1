//! `costlab echo --loaders`: two loader hosts, each a network namespace running a real sshd
//! (Debian's openssh-server) with a throwaway host key, reached with a throwaway user key and a
//! known_hosts file written for them (host keys are checked); the servers run in the root
//! namespace, reached over veth pairs. Checks the merge, not any timing.

use crate::common::one_line_exit_2;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use costlab_echo::remote::{decode_histogram, LoaderReport};

use crate::common::BIN;

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces with an sshd each; torn down on drop.
struct Lab {
    dir: PathBuf,
    ns: Vec<String>,
    sshd: Vec<Child>,
    server_ip: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.ns {
            let _ = run("ip", &["netns", "del", n]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn skip_reason() -> Option<String> {
    if !crate::common::is_root() {
        return Some("network namespaces need root".into());
    }
    if run("ip", &["netns", "list"]).is_err() {
        return Some("no `ip netns` (install iproute2)".into());
    }
    None
}

fn keygen(path: &Path) {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            path.to_str().unwrap(),
        ],
    )
    .expect("ssh-keygen (openssh-client)");
}

fn setup() -> Lab {
    assert!(
        Path::new("/usr/sbin/sshd").exists(),
        "no /usr/sbin/sshd: run scripts/install-deps.sh (installs openssh-server)"
    );
    let tag = std::process::id() % 100_000;
    let k = tag % 250 + 1;
    let dir = std::env::temp_dir().join(format!("costlab-ssh-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut lab = Lab {
        dir: dir.clone(),
        ns: Vec::new(),
        sshd: Vec::new(),
        server_ip: format!("10.214.{k}.1"),
    };
    std::fs::create_dir_all("/run/sshd").unwrap(); // sshd's privilege-separation directory
    keygen(&dir.join("id_user"));
    std::fs::copy(dir.join("id_user.pub"), dir.join("authorized_keys")).unwrap();
    let mut known = String::new();
    let mut config = String::new();
    for (i, name) in ["a", "b"].iter().enumerate() {
        let ns = format!("costlab-ssh{name}{tag}");
        let (root_dev, ns_dev) = (format!("cls{name}{tag}"), format!("clt{name}{tag}"));
        let net = 214 + i; // 10.214.k.0/24 for a, 10.215.k.0/24 for b
        let (root_ip, ns_ip) = (format!("10.{net}.{k}.1"), format!("10.{net}.{k}.2"));
        run("ip", &["netns", "add", &ns]).unwrap();
        lab.ns.push(ns.clone());
        run(
            "ip",
            &[
                "link", "add", &root_dev, "type", "veth", "peer", "name", &ns_dev, "netns", &ns,
            ],
        )
        .unwrap();
        run(
            "ip",
            &["addr", "add", &format!("{root_ip}/24"), "dev", &root_dev],
        )
        .unwrap();
        run("ip", &["link", "set", &root_dev, "up"]).unwrap();
        run(
            "ip",
            &[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{ns_ip}/24"),
                "dev",
                &ns_dev,
            ],
        )
        .unwrap();
        run("ip", &["-n", &ns, "link", "set", &ns_dev, "up"]).unwrap();
        run("ip", &["-n", &ns, "link", "set", "lo", "up"]).unwrap();
        // b reaches the server's address (on a's veth, in the root namespace) through it.
        run(
            "ip",
            &["-n", &ns, "route", "add", "default", "via", &root_ip],
        )
        .unwrap();
        let host_key = dir.join(format!("host_{name}"));
        keygen(&host_key);
        let conf = dir.join(format!("sshd_{name}"));
        std::fs::write(
            &conf,
            format!(
                "ListenAddress {ns_ip}\nPort 22\nHostKey {}\nPidFile {}/sshd_{name}.pid\nAuthorizedKeysFile {}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n",
                host_key.display(),
                dir.display(),
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, "/usr/sbin/sshd", "-D", "-f"])
            .arg(&conf)
            .arg("-E")
            .arg(dir.join(format!("sshd_{name}.log")))
            .stdin(Stdio::null())
            .spawn()
            .expect("start sshd");
        lab.sshd.push(child);
        let pubkey = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        known.push_str(&format!("{ns_ip} {}", pubkey.trim_end()));
        known.push('\n');
        config.push_str(&format!(
            "Host loader-{name}\n  HostName {ns_ip}\n  User root\n  IdentityFile {d}/id_user\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  ConnectTimeout 5\n",
            d = dir.display()
        ));
        if i == 0 {
            // The same sshd under a name whose known_hosts holds another key.
            config.push_str(&format!(
                "Host wrong-key\n  HostName {ns_ip}\n  User root\n  IdentityFile {d}/id_user\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts_wrong\n  GlobalKnownHostsFile /dev/null\n  ConnectTimeout 5\n",
                d = dir.display()
            ));
            keygen(&dir.join("other_key"));
            let other = std::fs::read_to_string(dir.join("other_key.pub")).unwrap();
            std::fs::write(
                dir.join("known_hosts_wrong"),
                format!("{ns_ip} {}\n", other.trim_end()),
            )
            .unwrap();
        }
    }
    std::fs::write(dir.join("known_hosts"), known).unwrap();
    std::fs::write(dir.join("ssh_config"), config).unwrap();
    // sshd is up when it answers.
    let t0 = Instant::now();
    for name in ["a", "b"] {
        loop {
            let ok = Command::new("ssh")
                .arg("-F")
                .arg(dir.join("ssh_config"))
                .args(["-o", "BatchMode=yes", &format!("loader-{name}"), "true"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "sshd {name} did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    lab
}

fn echo(lab: &Lab, loaders: &str, extra: &[&str]) -> std::process::Output {
    let ssh = format!("ssh -F {}", lab.dir.join("ssh_config").display());
    crate::common::command()
        .args(["echo", "--loaders", loaders, "--addr", &lab.server_ip])
        .args(["--ssh", &ssh, "--loader-costlab", BIN])
        .args(["--case", "epoll", "--conns", "4", "--sizes", "16"])
        .args(["--duration", "300ms", "--quick"])
        .args(extra)
        .env("COSTLAB_DB", lab.dir.join("history.db"))
        .env("COSTLAB_RETRY_BUDGET", "0")
        .stdin(Stdio::null())
        .output()
        .expect("run costlab")
}

#[test]
fn two_loaders_over_ssh_merge_counts_and_histograms() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let lab = setup();
    let keep = lab.dir.join("reports");
    let out = echo(
        &lab,
        "loader-a,loader-b",
        &["--json", "-", "--loader-reports", keep.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = crate::common::schema::doc(&out.stdout);
    let rows = doc["results"].as_array().unwrap();
    let samples = |metric: &str, loader: Option<&str>| -> Vec<f64> {
        rows.iter()
            .find(|r| {
                r["metric"] == metric
                    && r["case"]["loaders"] == "loader-a,loader-b"
                    && loader.is_none_or(|l| r["case"]["loader"] == l)
            })
            .unwrap_or_else(|| panic!("no {metric} row: {doc}"))["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let merged = samples("requests", None);
    let (a, b) = (
        samples("loader_host_requests", Some("loader-a")),
        samples("loader_host_requests", Some("loader-b")),
    );
    assert!(!merged.is_empty());
    for i in 0..merged.len() {
        assert_eq!(merged[i], a[i] + b[i], "run {i}");
        assert!(a[i] > 0.0 && b[i] > 0.0, "both loaders sent load");
    }
    for host in ["loader-a", "loader-b"] {
        let cpu = samples("loader_host_cpu", Some(host));
        assert_eq!(cpu.len(), merged.len());
        assert!(cpu.iter().all(|c| *c > 0.0), "{host} CPU {cpu:?}");
    }
    // p99 of each run == p99 of the merged histogram of the loaders' kept reports.
    let p99 = samples("p99", None);
    for (run, want) in p99.iter().enumerate() {
        let mut merged_h = None::<hdrhistogram::Histogram<u64>>;
        let mut count = 0u64;
        for host in ["loader-a", "loader-b"] {
            let f = keep.join(format!("run{run:04}-{host}.json"));
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            let r: LoaderReport = serde_json::from_value(v["report"].clone()).unwrap();
            count += r.requests;
            let h = decode_histogram(&r.histogram).unwrap();
            match &mut merged_h {
                Some(m) => m.add(&h).unwrap(),
                None => merged_h = Some(h),
            }
        }
        assert_eq!(count as f64, merged[run]);
        let got = merged_h.unwrap().value_at_quantile(0.99) as f64 / 1e3;
        assert_eq!(got, *want, "run {run}: p99 of the merged histogram");
    }
    eprintln!(
        "merged requests {merged:?} = a {a:?} + b {b:?}; p99 {p99:?} us (smoke, machine busy)"
    );

    // Host keys are checked: a host whose known key differs is refused, exit 2.
    one_line_exit_2(&echo(&lab, "loader-a,wrong-key", &[]), &["host key"]);
    // A loader host without costlab.
    let ssh = format!("ssh -F {}", lab.dir.join("ssh_config").display());
    let out = crate::common::command()
        .args([
            "echo",
            "--loaders",
            "loader-a,loader-b",
            "--addr",
            &lab.server_ip,
        ])
        .args(["--ssh", &ssh, "--loader-costlab", "/nonexistent/costlab"])
        .args(["--case", "epoll", "--conns", "4", "--quick"])
        .env("COSTLAB_DB", lab.dir.join("history.db"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line_exit_2(&out, &["costlab is not there"]);
}

#[test]
fn a_refusing_ssh_host_exits_2_with_one_line() {
    // No namespace needed: port 1 on loopback refuses.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ssh_config");
    std::fs::write(
        &cfg,
        "Host refuser\n  HostName 127.0.0.1\n  Port 1\n  ConnectTimeout 5\n",
    )
    .unwrap();
    let out = crate::common::command()
        .args(["echo", "--loaders", "refuser", "--addr", "10.214.0.1"])
        .args(["--ssh", &format!("ssh -F {}", cfg.display())])
        .args(["--case", "epoll", "--conns", "4", "--quick"])
        .env("COSTLAB_DB", dir.path().join("history.db"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line_exit_2(&out, &["loader refuser: ssh failed"]);
}
