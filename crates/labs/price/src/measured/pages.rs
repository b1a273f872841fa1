//! The page cache's counts as the split reads them: attaching `prog::pages`' three
//! tracepoints (their records' layout from tracefs), and putting each syscall's share of the
//! work onto its line.

use std::collections::BTreeMap;

use anyhow::Result;
use costlab_bpf::{Asm, Attached, Hook, Map};

use super::{prog, slot_name, summed, Line, Maps};

/// What `prog::pages` counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PageCounts {
    pub read: u64,
    pub write: u64,
    pub other: u64,
    pub dropped: u64,
    pub writeback_bytes: u64,
    /// Pages read from files of at most `smallfiles::SMALL_FILE` bytes.
    pub small: u64,
}

/// The page cache's work each syscall's slot did (`prog::pages`' work map), onto its line.
pub(super) fn add_work(
    work: &Map,
    lines: &mut [Line],
    syscalls: &BTreeMap<u32, String>,
    irqs: &BTreeMap<u32, String>,
) -> Result<()> {
    for s in 0..prog::SLOTS {
        let v: [u64; 11] = summed(work, s)?;
        if v == [0; 11] {
            continue;
        }
        let (class, event) = slot_name(s, syscalls, irqs);
        if let Some(l) = lines
            .iter_mut()
            .find(|l| l.class == class && l.event == event)
        {
            l.pages_in += v[0];
            l.folios_dropped += v[1];
            l.written_back += v[2];
            l.ipis_sent += v[3];
            l.halted_in += v[4];
            l.inode_touches += v[5];
            l.inode_windows += v[6];
            l.small_pages += v[7];
            l.lookups += v[8];
            l.path_components += v[9];
            l.kernel_faults += v[10];
        }
    }
    Ok(())
}

/// The page-cache counts' three tracepoints (`prog::pages`), their records' layout read
/// from tracefs. All three or none: true where they are attached; a note says why not.
pub(super) fn attach(
    m: &Maps,
    progs: &mut Vec<(String, Attached)>,
    notes: &mut Vec<String>,
) -> bool {
    use costlab_bpf::perf::tracepoint_field;
    let field = |cat: &str, tp: &str, f: &str| -> Result<i16> {
        Ok(tracepoint_field(cat, tp, f)?.0 as i16)
    };
    let built = || -> Result<Vec<(Asm, Hook)>> {
        let add = "mm_filemap_add_to_page_cache";
        let del = "mm_filemap_delete_from_page_cache";
        let bio = "block_bio_queue";
        Ok(vec![
            (
                prog::pages::added(
                    m,
                    prog::pages::Fields {
                        order: field("filemap", add, "order")?,
                    },
                ),
                Hook::tracepoint("filemap", add),
            ),
            (prog::pages::dropped(m), Hook::tracepoint("filemap", del)),
            (
                prog::pages::bio_queued(
                    m,
                    prog::pages::BioFields {
                        sectors: field("block", bio, "nr_sector")?,
                        rwbs: field("block", bio, "rwbs")?,
                    },
                ),
                Hook::tracepoint("block", bio),
            ),
        ])
    };
    let attached = built().and_then(|v| {
        v.into_iter()
            .map(|(a, hook)| Ok((hook.name(), costlab_bpf::attach(&a.finish()?, &hook)?)))
            .collect::<Result<Vec<_>>>()
    });
    match attached {
        Ok(v) => {
            progs.extend(v);
            true
        }
        Err(e) => {
            notes.push(format!(
                "the page cache's pages in and out and the writeback bytes not counted (cold reads, dropped pages and an fsync's bytes unpriced): {e}"
            ));
            false
        }
    }
}

/// The count of pages read from small files (`prog::pages::small_read` on the raw
/// mm_filemap_get_pages, its file's size read through the mapping's inode at BTF's
/// offsets), and of the page faults the kernel takes inside a call (`prog::pages::
/// kernel_fault` on the raw page_fault_kernel); a note says why not where either cannot be
/// attached.
pub(super) fn attach_small(
    m: &Maps,
    btf: &super::btf::Btf,
    progs: &mut Vec<(String, Attached)>,
    notes: &mut Vec<String>,
) {
    use costlab_core::measure::unitcost::smallfiles::SMALL_FILE;
    let fields = btf
        .member_offset("address_space", "host")
        .zip(btf.member_offset("inode", "i_size"));
    let attached = match fields {
        None => Err(anyhow::anyhow!(
            "this kernel's BTF has no address_space.host or inode.i_size"
        )),
        Some((host, i_size)) => {
            let f = prog::pages::SmallFields {
                host: host as i32,
                i_size: i_size as i32,
            };
            let hook = Hook::raw_tracepoint("mm_filemap_get_pages");
            prog::pages::small_read(m, f, SMALL_FILE)
                .finish()
                .and_then(|p| Ok((hook.name(), costlab_bpf::attach(&p, &hook)?)))
        }
    };
    match attached {
        Ok(p) => progs.push(p),
        Err(e) => notes.push(format!(
            "the pages read from small files not counted (their reads priced as a large file's): {e}"
        )),
    }
    let hook = Hook::raw_tracepoint("page_fault_kernel");
    match prog::pages::kernel_fault(m)
        .finish()
        .and_then(|p| Ok((hook.name(), costlab_bpf::attach(&p, &hook)?)))
    {
        Ok(p) => progs.push(p),
        Err(e) => notes.push(format!(
            "the page faults inside syscalls not counted (a read into a buffer not touched yet is priced as a read alone): {e}"
        )),
    }
}
