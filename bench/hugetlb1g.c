/* An LD_PRELOAD shim for bench/sysbench-grid.sh: sysbench's --memory-hugetlb asks shmget for
 * SHM_HUGETLB pages of the default huge page size (2 MiB unless the kernel booted with
 * default_hugepagesz=1G, as the hugepage study's machine did). With COSTLAB_SHM_HUGE_1G=1 this
 * adds the 1 GiB size to such a request and rounds its length up to whole 1 GiB pages, so the
 * same sysbench binary runs on 1 GiB pages without a reboot. Nothing else is touched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#ifndef SHM_HUGE_SHIFT
#define SHM_HUGE_SHIFT 26
#endif
#define ONE_GIB (1UL << 30)

int shmget(key_t key, size_t size, int flags)
{
    static int (*real)(key_t, size_t, int);
    if (!real)
        real = (int (*)(key_t, size_t, int))dlsym(RTLD_NEXT, "shmget");
    const char *on = getenv("COSTLAB_SHM_HUGE_1G");
    if (on && on[0] == '1' && (flags & SHM_HUGETLB)) {
        flags |= 30 << SHM_HUGE_SHIFT; /* log2(1 GiB) */
        size = (size + ONE_GIB - 1) & ~(ONE_GIB - 1);
    }
    return real(key, size, flags);
}
