//! The NUMA path on a real two-node kernel: boot an emulated two-node machine with virtme-ng
//! (QEMU without KVM, Debian's kernel, the host's root read-only, /tmp writable) and run
//! costlab inside. Checks placement and output, never costs: the emulator does not slow
//! remote memory.
//!
//! Needs what scripts/install-deps.sh installs (qemu-system-x86, linux-image-amd64, numactl,
//! busybox-static, virtme-ng in /opt/virtme-ng). Skips, saying why, where the guest cannot
//! boot; fails instead when CI=true.

use serde_json::Value;

use crate::common::vng::{self, json_in, section};

use crate::common::BIN;

/// The machine: 4 CPUs as 2 sockets x 1 core x 2 threads, one node per socket (CPUs 0-1 on
/// node 0, 2-3 on node 1), 1G each. QEMU's `-smp` is given again with the topology (vng's
/// --cpus passes only the count); an Intel vendor string makes the guest kernel read the
/// SMT siblings from CPUID (with AMD's it wants topoext, which TCG lacks).
const MACHINE: &[&str] = &[
    "--cpus",
    "4",
    "--memory",
    "2G",
    "--numa",
    "1G,cpus=0-1",
    "--numa",
    "1G,cpus=2-3",
    "--qemu-opts=-smp 4,sockets=2,cores=1,threads=2 -cpu max,vendor=GenuineIntel",
];

/// The guest's script: each command's JSON between markers. One boot runs every check.
///
/// `m NAME` prints the marker on stdout and, on stderr, the guest's uptime at it, so that a
/// guest that runs out of time says which step took it. `t` gives one step at most
/// [`STEP_SECS`]: a step that hangs ends with status 124 and the script goes on to the next,
/// where a hang would otherwise take the whole boot's ten minutes and every section after it.
fn script() -> String {
    format!(
        "set -x; m() {{ echo \"==$1\"; echo \"==$1 at $(cut -d' ' -f1 /proc/uptime) s\" >&2; }}; \
         t() {{ timeout -k 5 {STEP_SECS} \"$@\"; }}; \
         echo 0 > /proc/sys/kernel/numa_balancing; export COSTLAB_DB=/tmp/costlab-two-node.db; \
         export COSTLAB_JOURNAL_DIR=/tmp/costlab-journal; \
         m machine; t {BIN} machine --json -; \
         m numa; t {BIN} numa --quick --samples 2 --sizes 16M --json - 2>/dev/null; \
         m bind; t numactl --membind=1 --cpunodebind=1 {BIN} numa-maps --self --json - 2>/dev/null; \
         m interleave; t numactl --interleave=0,1 {BIN} numa-maps --self --json - 2>/dev/null; \
         m balancing; cat /proc/sys/kernel/numa_balancing; \
         {PIN}; {KNOBS}; m end",
        PIN = pin_script(),
        KNOBS = knobs_script(),
    )
}

/// The most one step of the guest's script may take: alone, the whole boot takes about a
/// minute, and its longest step a few seconds.
const STEP_SECS: u32 = 120;

/// The pin lab's topology placements: two threads each way, four dealt across the nodes,
/// the refusals, and the loopback-only line of IRQ placement.
fn pin_script() -> String {
    format!(
        "m pin; t {BIN} pin --case sharing --placement same-core,same-node,cross-node,per-core,free \
           --duration 100ms --samples 1 --json - 2>/dev/null; \
         m pin4; t {BIN} pin --case sharing --threads 4 --placement cross-node --duration 100ms --samples 1 --json - 2>/dev/null; \
         m pin-refused; t {BIN} pin --threads 3 --placement same-core 2>&1; echo \"rc=$?\"; \
         m pin-irq; t {BIN} pin --case echo --placement irq-cpu --move-irqs 2>&1; echo \"rc=$?\""
    )
}

/// The NUMA knobs, each set to 0 and 1 through the journal; the journal must be empty after.
/// The guest's /tmp is tmpfs, which numa-knobs refuses for its page-cache fill: the fill goes
/// to an ext4 file system on a loop device (its image on tmpfs, its page cache ext4's).
fn knobs_script() -> String {
    format!(
        "m knobs-before; cat /proc/sys/vm/zone_reclaim_mode /proc/sys/kernel/numa_balancing; \
         modprobe -q loop; modprobe -q ext4; truncate -s 160M /tmp/knobs.img; mkfs.ext4 -q -F /tmp/knobs.img; \
         mkdir -p /tmp/knobs; mount -o loop /tmp/knobs.img /tmp/knobs; \
         m knobs; t {BIN} numa-knobs --change-knobs --quick --samples 1 --sizes 8M --fill 64M --dir /tmp/knobs --json - 2>/dev/null; \
         m knobs-after; cat /proc/sys/vm/zone_reclaim_mode /proc/sys/kernel/numa_balancing"
    )
}

/// The guest's steps as its stderr stamped them: `name at UPTIME s`, in order.
fn steps(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("=="))
        .filter(|l| l.ends_with(" s") && l.contains(" at "))
        .collect()
}

/// The JSON document of a step, or a failure naming the step and what it printed instead
/// (nothing, where [`STEP_SECS`] ended it).
fn doc(stdout: &str, step: &str) -> Value {
    let text = section(stdout, step).unwrap_or_else(|| panic!("the guest printed no {step} step"));
    if !text.contains('{') {
        panic!("the guest's {step} step printed no JSON (a step is ended after {STEP_SECS} s): {text:?}");
    }
    json_in(text)
}

/// The last `n` lines of a text.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// MiB of anonymous memory per node from a numa-maps document.
fn anon_by_node(doc: &Value) -> Vec<(u64, f64)> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["case"]["kind"] == "anon" && r["case"]["node"].is_u64())
        .map(|r| {
            (
                r["case"]["node"].as_u64().unwrap(),
                r["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn costlab_on_an_emulated_two_node_machine() {
    if let Some(why) = vng::cannot_boot() {
        crate::common::skip::skipped_unless_ci("two_node", &why);
        return;
    }
    let guest = vng::boot(MACHINE, &script());
    let stdout = guest.stdout.as_str();
    eprintln!(
        "two_node: guest ran in {:.0} s; steps: {}",
        guest.secs,
        steps(&guest.stderr).join(", ")
    );
    if section(stdout, "machine").is_none() {
        crate::common::skip::skipped_unless_ci(
            "two_node",
            &format!(
                "the guest did not boot or run costlab (status {:?}, stamps: {}): {}",
                guest.status,
                guest.stamps(),
                guest.tail()
            ),
        );
        return;
    }
    let stamped = steps(&guest.stderr);
    assert!(
        section(stdout, "end").is_some(),
        "the guest script did not finish in {:.0} s (status {:?}); its last step was {:?} of {:?}\n\
         --- the last of its stdout:\n{}\n--- the last of its stderr:\n{}",
        guest.secs,
        guest.status,
        stamped.last(),
        stamped,
        last_lines(stdout, 40),
        last_lines(&guest.stderr, 40),
    );

    // costlab machine: two nodes and their distances.
    let m = doc(stdout, "machine");
    assert_eq!(m["numa_nodes"], 2, "{m}");
    let nodes = m["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    let text = nodes[0].to_string();
    assert!(text.contains("20"), "node 0 has no remote distance: {text}");
    assert_eq!(
        section(stdout, "balancing").unwrap().trim(),
        "0",
        "numa_balancing is off"
    );

    // costlab numa --quick: both matrices full, 2 x 2 each.
    let numa = doc(stdout, "numa");
    for metric in ["latency", "bandwidth"] {
        let mut cells: Vec<(String, String)> = numa["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["metric"] == metric && r["case"]["policy"] == "bind")
            .map(|r| {
                (
                    r["case"]["cpu_node"].to_string(),
                    r["case"]["mem_node"].to_string(),
                )
            })
            .filter(|(c, _)| c != "\"all\"")
            .collect();
        cells.sort();
        cells.dedup();
        assert_eq!(cells.len(), 4, "{metric} matrix is not 2 x 2: {cells:?}");
    }

    // Bound to node 1: the anonymous memory is on node 1.
    let bind = anon_by_node(&doc(stdout, "bind"));
    let on1: f64 = bind.iter().filter(|(n, _)| *n == 1).map(|x| x.1).sum();
    let total: f64 = bind.iter().map(|x| x.1).sum();
    assert!(
        total > 0.0 && on1 / total > 0.95,
        "bind to node 1: {bind:?}"
    );

    // Interleaved: pages on both nodes.
    let il = anon_by_node(&doc(stdout, "interleave"));
    for node in [0, 1] {
        assert!(
            il.iter().any(|(n, mib)| *n == node && *mib > 0.0),
            "interleave left node {node} empty: {il:?}"
        );
    }

    topology_placements(stdout);
    numa_knobs(stdout);
}

/// CPU -> the CPUs each thread ran on, from a pin document's throughput row of `placement`.
fn ran_on(doc: &Value, placement: &str) -> Vec<Vec<u64>> {
    let row = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "throughput" && r["case"]["placement"] == placement)
        .unwrap_or_else(|| panic!("no {placement} row: {doc}"));
    row["conditions"]["ran_on"]
        .as_object()
        .unwrap_or_else(|| panic!("no ran_on: {row}"))
        .values()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap())
                .collect()
        })
        .collect()
}

/// The guest's topology as costlab reads it, and where each placement's threads ran.
fn topology_placements(stdout: &str) {
    let m = doc(stdout, "machine");
    assert_eq!(
        m["threads_per_core"], 2,
        "SMT siblings seen: {}",
        m["cpu_places"]
    );
    assert_eq!(m["cores"], 2);
    let places = m["cpu_places"].as_array().expect("cpu_places");
    let core_of = |cpu: usize| places[cpu]["core_cpus"].clone();
    assert_eq!(core_of(0), serde_json::json!([0, 1]));
    assert_eq!(core_of(3), serde_json::json!([2, 3]));
    assert_eq!(places[2]["node"], 1);

    let pin = doc(stdout, "pin");
    // Two threads: SMT siblings of core 0; node 0's two CPUs; one per node; one per core.
    assert_eq!(ran_on(&pin, "same-core"), vec![vec![0], vec![1]]);
    assert_eq!(ran_on(&pin, "same-node"), vec![vec![0], vec![1]]);
    assert_eq!(ran_on(&pin, "cross-node"), vec![vec![0], vec![2]]);
    assert_eq!(ran_on(&pin, "per-core"), vec![vec![0], vec![2]]);
    for cpus in ran_on(&pin, "free") {
        assert!(cpus.iter().all(|&c| c < 4), "{cpus:?}");
    }
    // Four threads dealt over the nodes: 0 and 2, then 1 and 3.
    let pin4 = doc(stdout, "pin4");
    assert_eq!(
        ran_on(&pin4, "cross-node"),
        vec![vec![0], vec![2], vec![1], vec![3]]
    );
    let refused = section(stdout, "pin-refused").unwrap();
    assert!(
        refused.contains("costlab: same-core runs one thread per SMT sibling: 3 threads need 3 siblings; this machine's cores have 2"),
        "{refused}"
    );
    assert!(refused.contains("rc=2"), "{refused}");
    // The guest has no network device: IRQ placement says so in one line.
    let irq = section(stdout, "pin-irq").unwrap();
    assert!(
        irq.contains("costlab: IRQ placement: this machine has only loopback"),
        "{irq}"
    );
    assert!(irq.contains("rc=2"), "{irq}");
}

/// numa-knobs: each knob at 0 and 1, where the pages went, numastat per node, and every
/// setting back where it was with the journal empty.
fn numa_knobs(stdout: &str) {
    let doc = doc(stdout, "knobs");
    let rows = doc["results"].as_array().unwrap();
    for (knob, workload, metrics) in [
        (
            "zone-reclaim",
            "page-cache-fill",
            &["local_share", "fault_time"][..],
        ),
        (
            "numa-balancing",
            "remote-start",
            &["local_share", "bandwidth", "pages_migrated", "hint_faults"],
        ),
    ] {
        for setting in [0, 1] {
            for metric in metrics {
                let r = rows
                    .iter()
                    .find(|r| {
                        r["metric"] == *metric
                            && r["case"]["knob"] == knob
                            && r["case"]["setting"] == setting
                            && r["case"]["workload"] == workload
                    })
                    .unwrap_or_else(|| panic!("no {knob}={setting} {metric}: {doc}"));
                assert_eq!(r["case"]["cpu_node"], 0, "{r}");
                let want_mem = if knob == "zone-reclaim" { 0 } else { 1 };
                assert_eq!(r["case"]["mem_node"], want_mem, "{r}");
                if *metric == "local_share" {
                    let pct = r["summary"]["median"].as_f64().unwrap();
                    assert!((0.0..=100.0).contains(&pct), "{r}");
                }
            }
            for node in [0, 1] {
                assert!(
                    rows.iter().any(|r| r["metric"] == "numastat"
                        && r["case"]["knob"] == knob
                        && r["case"]["setting"] == setting
                        && r["case"]["node"] == node
                        && r["case"]["stat"] == "numa_hit"),
                    "no numastat of node {node} for {knob}={setting}"
                );
            }
        }
    }
    // With balancing off the remote-start memory stays remote.
    let off = rows
        .iter()
        .find(|r| {
            r["metric"] == "local_share"
                && r["case"]["knob"] == "numa-balancing"
                && r["case"]["setting"] == 0
        })
        .unwrap();
    assert!(off["summary"]["median"].as_f64().unwrap() < 5.0, "{off}");
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("vm.zone_reclaim_mode: restored to"),
        "{notes}"
    );
    assert!(
        notes.contains("kernel.numa_balancing: restored to"),
        "{notes}"
    );
    assert!(notes.contains("need real hardware"), "{notes}");
    assert_eq!(
        section(stdout, "knobs-before").unwrap().trim(),
        section(stdout, "knobs-after").unwrap().trim(),
        "the knobs are back where they were"
    );
}
