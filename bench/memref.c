// A plain C reference for costlab's bandwidth kernels: the same work, compiled by gcc, to put
// beside `costlab mem bandwidth` in one session (bench/mem-vs-c.sh builds and runs it).
//
//   memref OP BLOCK_MIB THREADS SECONDS SAMPLES
//   OP: read | write | copy (a C loop, regular stores) | memcpy | memset
//
// Each thread is pinned to CPU i, maps and first-touches its own BLOCK (copy and memcpy use
// its two halves), and repeats its op until a shared stop flag set SECONDS later, finishing
// the chunk (memcpy, memset: the whole pass) it is in; its GB/s is its bytes over its own time,
// summed over threads. Bytes are counted as moved (copy = read +
// write, as STREAM and costlab count). Prints one line per sample: GB/s (10^9 bytes/s).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static atomic_int stop;
static pthread_barrier_t start;
static const char *op;
static size_t block;

struct worker {
    int cpu;
    unsigned char *buf;
    double bytes, secs;
    uint64_t sink;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Chunks of 256 KiB, as costlab's kernels; the compiler must keep these loops as loops.
#define CHUNK (256u << 10)

__attribute__((optimize("no-tree-loop-distribute-patterns"))) static uint64_t
read_chunk(const uint64_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n; i += 4) {
        a ^= p[i];
        b ^= p[i + 1];
        c ^= p[i + 2];
        d ^= p[i + 3];
    }
    return a ^ b ^ c ^ d;
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
write_chunk(uint64_t *p, size_t n, uint64_t v) {
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
copy_chunk(uint64_t *restrict d, const uint64_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

static void *run(void *arg) {
    struct worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (!w->buf) {
        w->buf = mmap(NULL, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w->buf == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        madvise(w->buf, block, MADV_NOHUGEPAGE);
        memset(w->buf, 0x5a, block);
    }
    size_t half = block / 2;
    int is_copy = !strcmp(op, "copy") || !strcmp(op, "memcpy");
    size_t span = is_copy ? half : block;
    pthread_barrier_wait(&start);
    double t0 = now(), bytes = 0;
    size_t off = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (!strcmp(op, "memcpy")) {
            memcpy(w->buf + half, w->buf, half);
            bytes += 2.0 * half;
            continue;
        }
        if (!strcmp(op, "memset")) {
            memset(w->buf, 0x3c, block);
            bytes += block;
            continue;
        }
        size_t n = CHUNK < span ? CHUNK : span;
        if (!strcmp(op, "read"))
            w->sink ^= read_chunk((const uint64_t *)(w->buf + off), n / 8);
        else if (!strcmp(op, "write"))
            write_chunk((uint64_t *)(w->buf + off), n / 8, 0x3c3c3c3c3c3c3c3cull);
        else
            copy_chunk((uint64_t *)(w->buf + half + off), (const uint64_t *)(w->buf + off), n / 8);
        bytes += is_copy ? 2.0 * n : n;
        off += n;
        if (off >= span)
            off = 0;
    }
    w->secs = now() - t0;
    w->bytes = bytes;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: memref read|write|copy|memcpy|memset BLOCK_MIB THREADS SECONDS SAMPLES\n");
        return 2;
    }
    op = argv[1];
    if (strcmp(op, "read") && strcmp(op, "write") && strcmp(op, "copy") && strcmp(op, "memcpy") &&
        strcmp(op, "memset")) {
        fprintf(stderr, "memref: unknown op '%s': use read, write, copy, memcpy or memset\n", op);
        return 2;
    }
    block = (size_t)atol(argv[2]) << 20;
    int threads = atoi(argv[3]);
    double secs = atof(argv[4]);
    int samples = atoi(argv[5]);
    struct worker *w = calloc(threads, sizeof *w);
    for (int i = 0; i < threads; i++)
        w[i].cpu = i;
    for (int s = -1; s < samples; s++) { // sample -1 maps, touches and warms up
        pthread_t *t = calloc(threads, sizeof *t);
        pthread_barrier_init(&start, NULL, threads + 1);
        atomic_store(&stop, 0);
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, run, &w[i]);
        pthread_barrier_wait(&start);
        struct timespec d = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
        nanosleep(&d, NULL);
        atomic_store(&stop, 1);
        double gbs = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            gbs += w[i].bytes / w[i].secs / 1e9;
        }
        pthread_barrier_destroy(&start);
        free(t);
        if (s >= 0)
            printf("%.2f\n", gbs);
    }
    return 0;
}
