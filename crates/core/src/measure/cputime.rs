//! CPU time as the kernel counts it, for the labs that judge a sample by how much of it a
//! thread spent on its CPU (share), charge a thread's CPU to a request (echo's loader) or a
//! transfer's CPU to its bytes (zerocopy).

/// CPU time of the calling thread so far, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time of the whole process so far, all threads, ns (CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Times the calling thread has slept so far: its voluntary context switches
/// (getrusage RUSAGE_THREAD, ru_nvcsw), each a block in the kernel that something had to wake.
pub fn thread_sleeps() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer we pass, which points to a zeroed
    // rusage of the right size that lives across the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: zero-initialised and, on success, filled by the kernel.
    let ru = unsafe { ru.assume_init() };
    ru.ru_nvcsw.max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_clock_moves_forward_while_working() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(thread_cpu_ns() >= t0);
    }

    #[test]
    fn a_thread_that_sleeps_counts_its_sleeps() {
        let n = std::thread::spawn(|| {
            let s0 = thread_sleeps();
            for _ in 0..3 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            thread_sleeps() - s0
        })
        .join()
        .unwrap();
        assert!(n >= 3, "{n} sleeps counted for 3 sleeps");
    }
}
