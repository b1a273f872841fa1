/* What a file fault costs as the file's pages lie and as warm as the CPU's caches hold them
 * (bench/file-faults.sh; the fault-file and fault-file-cold terms, docs/src/price.md).
 *   file-faults map FILE REPS SWEEP_MIB   map FILE REPS times in this process, read a byte a
 *                                         page each time; before each mapping after the first,
 *                                         write a byte a cache line of SWEEP_MIB MiB (0: none).
 *                                         Prints, per mapping, faults and CPU ns a fault.
 *   file-faults make FILE PAGES SCATTER   write FILE a page at a time in a scrambled order,
 *                                         touching SCATTER anonymous pages after each.
 *   file-faults read FILE SIZE            pread SIZE bytes at every 7th SIZE-aligned offset
 *                                         of FILE (at most 20000 calls), five passes: CPU ns
 *                                         a call each pass (a file larger than the CPU's
 *                                         caches reads from memory, as the file-read term).
 *   file-faults layout FILE               map FILE, read a byte a page, and say from
 *                                         /proc/self/pagemap (root) how its pages lie: the
 *                                         share next to the page before, the median gap. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long minflt(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static volatile char *map_all(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 4096) {
        fprintf(stderr, "file-faults: cannot map %s\n", path);
        exit(1);
    }
    *len = st.st_size & ~(size_t)4095;
    volatile char *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "map")) {
        int reps = atoi(argv[3]);
        size_t sweep = (size_t)atol(argv[4]) << 20;
        char *sw = sweep ? malloc(sweep) : NULL;
        for (int r = 0; r < reps; r++) {
            if (sw && r > 0)
                for (size_t i = 0; i < sweep; i += 64)
                    sw[i]++;
            size_t len;
            volatile char *p = map_all(argv[2], &len);
            long f0 = minflt();
            double t0 = cpu_ns();
            unsigned s = 0;
            for (size_t o = 0; o < len; o += 4096)
                s += p[o];
            double t = cpu_ns() - t0;
            long f = minflt() - f0;
            printf("mapping %d: %ld faults, %.0f ns a fault, %.1f pages a fault%s\n", r + 1, f,
                   f ? t / f : 0, f ? (double)len / 4096 / f : 0, s == 1 ? " " : "");
            munmap((void *)p, len);
        }
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "make")) {
        long n = atol(argv[3]), spread = atol(argv[4]);
        int fd = open(argv[2], O_CREAT | O_TRUNC | O_WRONLY, 0644);
        char page[4096];
        memset(page, 7, sizeof page);
        char *sp = spread ? mmap(NULL, n * spread * 4096, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                          : NULL;
        if (fd < 0 || sp == MAP_FAILED)
            return 1;
        for (long i = 0; i < n; i++) {
            long at = (i * 1021) % n; /* 1021 is prime: every page once where n is not a multiple */
            if (pwrite(fd, page, sizeof page, at * 4096) != (ssize_t)sizeof page)
                return 1;
            for (long k = 0; sp && k < spread; k++)
                sp[(i * spread + k) * 4096] = 1;
        }
        return close(fd) != 0;
    }
    if (argc == 4 && !strcmp(argv[1], "read")) {
        int fd = open(argv[2], O_RDONLY);
        long span = fd < 0 ? -1 : lseek(fd, 0, SEEK_END), size = atol(argv[3]);
        if (span <= 0 || size <= 0)
            return 1;
        long stride = (size + 4095) / 4096 * 4096;
        char *buf = malloc(size);
        for (int r = 0; r < 5; r++) {
            long n = 0;
            double t0 = cpu_ns();
            for (long at = 0; at + stride <= span && n < 20000; at += stride * 7, n++)
                if (pread(fd, buf, size, at) != size)
                    return 1;
            printf("%.0f%s", n ? (cpu_ns() - t0) / n : 0, r < 4 ? " " : " ns a call\n");
        }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "layout")) {
        size_t len;
        volatile char *p = map_all(argv[2], &len);
        size_t n = len / 4096, adjacent = 0, gaps = 0;
        uint64_t *pfn = calloc(n, 8), *gap = calloc(n, 8);
        unsigned s = 0;
        for (size_t i = 0; i < n; i++)
            s += p[i * 4096];
        int pm = open("/proc/self/pagemap", O_RDONLY);
        for (size_t i = 0; pm >= 0 && i < n; i++) {
            uint64_t e;
            if (pread(pm, &e, 8, ((uintptr_t)p / 4096 + i) * 8) == 8 && (e >> 63))
                pfn[i] = e & ((1ULL << 55) - 1);
        }
        for (size_t i = 1; i < n; i++) {
            if (!pfn[i] || !pfn[i - 1])
                continue;
            uint64_t d = pfn[i] > pfn[i - 1] ? pfn[i] - pfn[i - 1] : pfn[i - 1] - pfn[i];
            adjacent += d == 1;
            gap[gaps++] = d;
        }
        if (!gaps) {
            fprintf(stderr, "file-faults: no page frame numbers (run as root)\n");
            return 1;
        }
        qsort(gap, gaps, 8, cmp);
        printf("%zu pages: %.0f%% next to the page before, median gap %lu pages%s\n", n,
               100.0 * adjacent / gaps, (unsigned long)gap[gaps / 2], s == 1 ? " " : "");
        return 0;
    }
    fprintf(stderr, "usage: file-faults map FILE REPS SWEEP_MIB | make FILE PAGES SCATTER | read FILE SIZE | layout FILE\n");
    return 2;
}
