//! What a create on ext4 without a journal pays per recently deleted inode it passes over, by
//! how many: for N in 0, 500, 1000, 2000, 4000 and 8000, a fresh directory at ROOT's top level
//! (ext4 puts it in a group of its own), N files made and deleted, a 1.1 s wait (an inode is
//! passed over from the second after its deletion), then 32 creates timed one by one (thread
//! CPU time); the median create and its excess over N=0's, per inode. A straight line says the
//! create-pass term (measured at 500 and 1000) holds at every count. Run as root on a quiet
//! machine: `cargo run --release -p costlab-price --example passcost [ROOT]` (default /).

use std::ffi::CString;

fn cpu_ns() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

fn create(p: &str) -> anyhow::Result<f64> {
    let c = CString::new(p)?;
    let t = cpu_ns();
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
    let d = cpu_ns() - t;
    anyhow::ensure!(fd >= 0, "create {p}: {}", std::io::Error::last_os_error());
    // SAFETY: fd was opened above.
    unsafe { libc::close(fd) };
    Ok(d)
}

fn main() -> anyhow::Result<()> {
    let root = std::env::args().nth(1).unwrap_or_else(|| "/".into());
    let mut clean = None;
    for n in [0usize, 500, 1000, 2000, 4000, 8000] {
        let dir = format!("{root}/.costlab-passcost-{n}-{}", std::process::id());
        std::fs::create_dir(&dir)?;
        for i in 0..n {
            std::fs::File::create(format!("{dir}/d{i}"))?;
        }
        for i in 0..n {
            std::fs::remove_file(format!("{dir}/d{i}"))?;
        }
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let mut ts = (0..32)
            .map(|i| create(&format!("{dir}/t{i}")))
            .collect::<anyhow::Result<Vec<f64>>>()?;
        ts.sort_by(f64::total_cmp);
        let m = ts[ts.len() / 2];
        let base = *clean.get_or_insert(m);
        if n == 0 {
            println!("{n:5} deleted: create {:8.1} us", m / 1e3);
        } else {
            println!(
                "{n:5} deleted: create {:8.1} us, {:6.1} ns an inode passed",
                m / 1e3,
                (m - base) / n as f64
            );
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
