/* A malloc-heavy program for `costlab price --verify` (bench/price-verify-must-show.sh):
 * a live set of SLOTS blocks of 64 B to 8 KiB (about 256 MiB), each replaced ROUNDS times by
 * a fresh block that is written through, so glibc's malloc grows, reuses and trims its heap.
 * Prints its rate as "N allocs/s". Dynamically linked against glibc, so that
 * GLIBC_TUNABLES=glibc.malloc.hugetlb=1|2 reaches its allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS (64 * 1024)

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    static char *slot[SLOTS];
    unsigned long long x = 88172645463325252ULL, sum = 0, allocs = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < SLOTS; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t n = 64 + (x % 8128);
            free(slot[i]);
            slot[i] = malloc(n);
            memset(slot[i], (int)r, n);
            sum += (unsigned char)slot[i][n / 2];
            allocs++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.0f allocs/s (checksum %llu)\n", allocs / s, sum);
    return 0;
}
