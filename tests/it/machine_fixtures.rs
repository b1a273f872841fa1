//! `Machine::probe_at` against fixture trees of other machines: exact parsing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use costlab_core::machine::{Cache, HugePool, Machine};

fn fixture(name: &str) -> Machine {
    let root: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name]
        .iter()
        .collect();
    Machine::probe_at(&root)
}

#[test]
fn xeon_two_sockets_four_nodes() {
    let m = fixture("xeon-2s-4node");
    assert_eq!(m.cpu_model, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
    assert_eq!(m.cpu_vendor, "GenuineIntel");
    assert_eq!(
        m.cpu_flags,
        vec![
            "sse4_2",
            "avx",
            "avx2",
            "fma",
            "bmi2",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512_vnni",
            "erms",
            "pdpe1gb",
            "constant_tsc",
            "nonstop_tsc",
            "pcid",
            "invpcid",
            "rdtscp",
            "clwb"
        ]
    );
    assert!(m.has_flag("avx512f") && !m.has_flag("sve"));
    assert_eq!(m.cpus_online, 8);
    assert_eq!(m.online_cpus, (0..8).collect::<Vec<_>>());
    assert_eq!((m.threads_per_core, m.cores, m.sockets), (2, 4, 2));
    // Each CPU's place: its SMT sibling (thread_siblings_list; this tree has no
    // core_cpus_list or core_id), package and node.
    let p5 = m.cpu_places.iter().find(|p| p.cpu == 5).unwrap();
    assert_eq!(
        (p5.core_cpus.clone(), p5.core_id, p5.package, p5.node),
        (vec![1, 5], None, Some(0), Some(1))
    );
    assert_eq!(m.cpu_places.len(), 8);

    assert_eq!(m.caches.len(), 4);
    assert_eq!(
        m.caches[0],
        Cache {
            level: 1,
            kind: "Data".into(),
            size: 32 << 10,
            line: 64,
            shared_by: vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]],
        }
    );
    assert_eq!(m.caches[1].kind, "Instruction");
    assert_eq!(m.cache_size(2), Some(1 << 20));
    assert_eq!(m.cache_size(3), Some(28160 << 10));
    assert_eq!(
        m.caches[3].shared_by,
        vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]
    );

    assert_eq!(m.numa_nodes, 4);
    let cpus: Vec<Vec<usize>> = m.nodes.iter().map(|n| n.cpus.clone()).collect();
    assert_eq!(cpus, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    let dist: Vec<Vec<u32>> = m.nodes.iter().map(|n| n.distances.clone()).collect();
    assert_eq!(
        dist,
        vec![
            vec![10, 11, 21, 21],
            vec![11, 10, 21, 21],
            vec![21, 21, 10, 11],
            vec![21, 21, 11, 10]
        ]
    );
    assert!(m.nodes.iter().all(|n| n.mem_total == 96 << 30));
    assert_eq!(m.nodes[0].mem_free, 48 << 30);
    assert_eq!(m.node_of_cpu(5), Some(1));
    assert_eq!(m.node_of_cpu(9), None);
    assert_eq!(m.mem_total, 384 << 30);

    assert_eq!(
        m.hugepages,
        vec![
            HugePool {
                page_size: 2 << 20,
                total: 1024,
                free: 1000,
                reserved: 24,
                surplus: 0
            },
            HugePool {
                page_size: 1 << 30,
                total: 8,
                free: 6,
                reserved: 0,
                surplus: 0
            },
        ]
    );
    assert_eq!(m.pool(1 << 30).map(|p| p.free), Some(6));
    assert_eq!(
        (m.thp.as_str(), m.thp_defrag.as_str()),
        ("always", "madvise")
    );
    assert_eq!(m.kernel, "5.15.0-91-generic");
    // DMI names the board maker on bare metal too: without the cpuinfo flag it is no VM.
    assert_eq!(m.hypervisor, None);
    assert_eq!(m.io_uring_disabled, None);
    assert!(m.io_uring.starts_with("enabled"));
    assert_eq!(m.perf_event_paranoid, Some(4));
    assert_eq!(m.hw_counters_work, None);
    assert_eq!((m.zone_reclaim_mode, m.numa_balancing), (Some(1), Some(1)));

    assert_eq!(m.mitigations.entries.len(), 6);
    assert_eq!(m.mitigations.cmdline, None);
    assert_eq!(
        m.mitigations_summary(),
        "on (spec_store_bypass: Speculative Store Bypass disabled via prctl; spectre_v1: usercopy/swapgs barriers and __user pointer sanitization; spectre_v2: Enhanced / Automatic IBRS; tsx_async_abort: TSX disabled)"
    );
    assert_eq!(m.mitigations_summary, m.mitigations_summary());

    // lo has no device; eth1's node is unknown (-1) and eth10's IRQ is not eth1's.
    let names: Vec<&str> = m.net.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, vec!["eth0", "eth1"]);
    let eth0 = &m.net[0];
    assert_eq!(eth0.numa_node, Some(1));
    let irqs: Vec<&str> = eth0.irqs.iter().map(|r| r.irq.as_str()).collect();
    assert_eq!(irqs, vec!["120", "121", "122", "123"]);
    assert_eq!(
        eth0.irq_cpus(),
        BTreeMap::from([(1, 900000), (2, 300000), (5, 600000), (6, 200000)])
    );
    assert_eq!(m.net[1].numa_node, None);
    assert!(m.net[1].irqs.is_empty());

    let table = costlab_history::report::machine::render(&m);
    assert!(table.contains("NIC eth0"));
    assert!(table.contains("75% on node 1"), "{table}");
    assert!(table.contains("distances 10 11 21 21"));
}

#[test]
fn epyc_vm_one_node() {
    let m = fixture("epyc-vm-1node");
    assert_eq!(m.cpu_model, "AMD EPYC");
    assert!(m.has_flag("avx512f") && m.has_flag("avx2"));
    assert_eq!(m.cpus_online, 2);
    assert_eq!((m.threads_per_core, m.cores, m.sockets), (1, 2, 1));
    assert_eq!(m.cache_size(1), Some(32 << 10));
    assert_eq!(m.cache_size(2), Some(1 << 20));
    assert_eq!(m.cache_size(3), Some(32 << 20));
    assert_eq!(m.caches[3].shared_by, vec![vec![0, 1]]);
    assert_eq!(m.caches[2].shared_by, vec![vec![0], vec![1]]);
    assert_eq!(m.numa_nodes, 1);
    assert_eq!(m.nodes[0].cpus, vec![0, 1]);
    assert_eq!(m.nodes[0].distances, vec![10]);
    assert_eq!(m.nodes[0].mem_total, 8874188 * 1024);
    assert_eq!(m.mem_total, 24684084 * 1024);
    let sizes: Vec<u64> = m.hugepages.iter().map(|p| p.page_size).collect();
    assert_eq!(sizes, vec![2 << 20, 1 << 30]);
    assert_eq!(m.thp, "madvise");
    assert_eq!(m.kernel, "6.18.44-fc-v669");
    assert_eq!(
        m.hypervisor.as_deref(),
        Some("unknown hypervisor (cpuinfo 'hypervisor' flag)")
    );
    assert_eq!(m.io_uring_disabled, Some(0));
    assert_eq!(m.perf_event_paranoid, Some(2));
    // mitigations= after "--" belongs to init, not to the kernel.
    assert_eq!(
        m.mitigations.cmdline.as_deref(),
        Some("auto,no_guest_host,no_guest_guest")
    );
    assert_eq!(
        m.mitigations_summary(),
        "on (spectre_v1: usercopy/swapgs barriers and __user pointer sanitization; spectre_v2: Retpolines; vulnerable: spec_rstack_overflow, spec_store_bypass)"
    );
    // virtio: the NIC's vectors are found by its device name and the PCI function's MSI list.
    assert_eq!(m.net.len(), 1);
    assert_eq!(m.net[0].name, "eth0");
    assert_eq!(m.net[0].numa_node, None);
    let irqs: Vec<&str> = m.net[0].irqs.iter().map(|r| r.irq.as_str()).collect();
    assert_eq!(irqs, vec!["37", "38", "39"]);
}

#[test]
fn a_missing_root_gives_an_empty_machine_not_a_panic() {
    let m = Machine::probe_at(std::path::Path::new("/nonexistent/costlab"));
    assert_eq!(m.cpus_online, 0);
    assert_eq!(m.numa_nodes, 1);
    assert!(m.caches.is_empty() && m.net.is_empty());
    assert!(costlab_history::report::machine::render(&m).contains("CPU"));
}
