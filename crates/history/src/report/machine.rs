//! The `costlab machine` table: what `machine::Machine` read, drawn for the terminal.

use costlab_core::measure::cpus::format_cpu_list;
use costlab_core::measure::sizes::human_size;

use costlab_core::machine::{kernel, numa, Machine};

/// The machine as the terminal shows it (`costlab machine`).
pub fn render(m: &Machine) -> String {
    render_text(m)
}

/// A readable table of the machine.
fn render_text(m: &Machine) -> String {
    let mut rows: Rows = Vec::new();
    cpu_rows(m, &mut rows);
    memory_rows(m, &mut rows);
    kernel_rows(m, &mut rows);
    let mut out = crate::report::table::render(&["what", "value"], &rows) + "\n";
    out += &vulnerability_table(m);
    out
}

type Rows = Vec<Vec<String>>;

fn row(rows: &mut Rows, k: &str, v: String) {
    rows.push(vec![k.to_string(), v]);
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "—".to_string()
    } else {
        s.to_string()
    }
}

/// The CPU, its flags, which CPUs are online and allowed, SMT and the caches.
fn cpu_rows(m: &Machine, rows: &mut Rows) {
    row(
        rows,
        "CPU",
        format!("{} ({})", or_dash(&m.cpu_model), m.arch),
    );
    row(
        rows,
        "flags that matter",
        if m.cpu_flags.is_empty() {
            "—".to_string()
        } else {
            m.cpu_flags.join(" ")
        },
    );
    row(
        rows,
        "CPUs online",
        format!(
            "{} ({})",
            m.cpus_online,
            or_dash(&format_cpu_list(&m.online_cpus))
        ),
    );
    if !m.allowed_cpus.is_empty() && m.allowed_cpus != m.online_cpus {
        row(rows, "CPUs allowed", format_cpu_list(&m.allowed_cpus));
    }
    row(
        rows,
        "SMT",
        format!(
            "{} thread(s) per core; {} core(s), {} socket(s)",
            m.threads_per_core, m.cores, m.sockets
        ),
    );
    for c in &m.caches {
        let sharing = c
            .shared_by
            .first()
            .map(|g| {
                if g.len() == 1 {
                    "per CPU".to_string()
                } else {
                    format!(
                        "{} instance(s), each shared by {} CPUs",
                        c.shared_by.len(),
                        g.len()
                    )
                }
            })
            .unwrap_or_default();
        row(
            rows,
            &format!("L{} {}", c.level, c.kind.to_lowercase()),
            format!("{}, {} B lines, {sharing}", human_size(c.size), c.line),
        );
    }
}

/// Memory, NUMA nodes and their policies, page sizes, huge pages and THP.
fn memory_rows(m: &Machine, rows: &mut Rows) {
    row(rows, "memory", human_size(m.mem_total));
    row(rows, "NUMA nodes", m.numa_nodes.to_string());
    for n in &m.nodes {
        row(
            rows,
            &format!("  node {}", n.id),
            format!(
                "CPUs {}, {} ({} free), distances {}",
                or_dash(&format_cpu_list(&n.cpus)),
                human_size(n.mem_total),
                human_size(n.mem_free),
                n.distances
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
    }
    if let Some(z) = m.zone_reclaim_mode {
        row(rows, "zone_reclaim_mode", numa::zone_reclaim_meaning(z));
    }
    if let Some(b) = m.numa_balancing {
        row(rows, "numa_balancing", numa::numa_balancing_meaning(b));
    }
    row(rows, "base page", human_size(m.base_page));
    for p in &m.hugepages {
        row(
            rows,
            &format!("hugepages {}", human_size(p.page_size)),
            format!(
                "{} total, {} free, {} reserved, {} surplus",
                p.total, p.free, p.reserved, p.surplus
            ),
        );
    }
    row(
        rows,
        "THP",
        format!(
            "enabled {}, defrag {}",
            or_dash(&m.thp),
            or_dash(&m.thp_defrag)
        ),
    );
}

/// The kernel, the hypervisor, mitigations, io_uring, perf and the NICs.
fn kernel_rows(m: &Machine, rows: &mut Rows) {
    row(rows, "kernel", or_dash(&m.kernel));
    row(
        rows,
        "hypervisor",
        m.hypervisor
            .clone()
            .unwrap_or_else(|| "none (bare metal)".to_string()),
    );
    row(rows, "mitigations", m.mitigations.summary());
    if let Some(c) = &m.mitigations.cmdline {
        row(rows, "  mitigations=", c.clone());
    }
    row(rows, "io_uring", or_dash(&m.io_uring));
    row(
        rows,
        "perf_event_paranoid",
        match m.perf_event_paranoid {
            Some(p) => format!("{p}: {}", kernel::paranoid_meaning(p)),
            None => "—".to_string(),
        },
    );
    row(
        rows,
        "hardware counters",
        match (m.hw_counters_work, &m.hw_counters_reason) {
            (Some(true), _) => "work".to_string(),
            (Some(false), Some(why)) => format!("not supported: {why}"),
            _ => "not checked".to_string(),
        },
    );
    for iface in &m.net {
        row(
            rows,
            &format!("NIC {}", iface.name),
            describe_iface(m, iface),
        );
    }
}

/// The vulnerabilities the kernel reports as affecting this CPU, the rest counted in one
/// line; empty where the kernel reports none.
fn vulnerability_table(m: &Machine) -> String {
    let mut out = String::new();
    let (fine, notable): (Vec<_>, Vec<_>) = m
        .mitigations
        .entries
        .iter()
        .partition(|(_, v)| v.as_str() == "Not affected");
    let mut vulns: Vec<Vec<String>> = notable
        .iter()
        .map(|(k, v)| vec![k.to_string(), v.to_string()])
        .collect();
    if !fine.is_empty() {
        vulns.push(vec![
            format!("{} others", fine.len()),
            "Not affected".to_string(),
        ]);
    }
    if !m.mitigations.entries.is_empty() {
        out += &crate::report::table::render(&["vulnerability", "kernel status"], &vulns);
        out += "\n";
    }
    out
}

/// "node 1; 4 IRQs, on CPUs 2 (1200), 3 (800); 100% on node 1".
fn describe_iface(m: &Machine, iface: &costlab_core::machine::NetIface) -> String {
    let node = match iface.numa_node {
        Some(n) => format!("node {n}"),
        None => "node unknown".to_string(),
    };
    let cpus = iface.irq_cpus();
    if cpus.is_empty() {
        return format!("{node}; {} IRQ rows, none taken yet", iface.irqs.len());
    }
    let total: u64 = cpus.values().sum();
    let mut by_cpu: Vec<(usize, u64)> = cpus.into_iter().collect();
    by_cpu.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let shown: Vec<String> = by_cpu
        .iter()
        .take(6)
        .map(|(c, n)| format!("{c} ({n})"))
        .collect();
    let more = if by_cpu.len() > 6 { ", ..." } else { "" };
    let mut text = format!(
        "{node}; {} IRQ rows, on CPUs {}{more}",
        iface.irqs.len(),
        shown.join(", ")
    );
    if m.nodes.len() > 1 {
        let mut per_node: std::collections::BTreeMap<usize, u64> = Default::default();
        for (c, n) in &by_cpu {
            if let Some(nd) = m.node_of_cpu(*c) {
                *per_node.entry(nd).or_insert(0) += n;
            }
        }
        let share: Vec<String> = per_node
            .iter()
            .map(|(nd, n)| format!("{:.0}% on node {nd}", 100.0 * *n as f64 / total as f64))
            .collect();
        text += &format!("; {}", share.join(", "));
    }
    text
}
