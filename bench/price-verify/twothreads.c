/* Two busy threads for `costlab price --verify`'s pinning trial
 * (bench/price-verify-must-show.sh): each runs ITERS rounds of a private xorshift over its own
 * 1 MiB array, so they share no line; pinned to one core's SMT siblings (or to one CPU) they
 * share that core, free they spread. Prints its rate as "N iters/s". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORDS (128 * 1024)

static long iters;

static void *work(void *arg) {
    unsigned long long *a = calloc(WORDS, sizeof *a), x = (unsigned long long)(size_t)arg | 1;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        a[x % WORDS] += x;
    }
    unsigned long long s = 0;
    for (int i = 0; i < WORDS; i++) s += a[i];
    free(a);
    return (void *)(size_t)s;
}

int main(int argc, char **argv) {
    iters = argc > 1 ? atol(argv[1]) : 300000000L;
    pthread_t t[2];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)(size_t)(i + 1));
    size_t sum = 0;
    for (int i = 0; i < 2; i++) { void *r; pthread_join(t[i], &r); sum += (size_t)r; }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.0f iters/s (checksum %zu)\n", 2.0 * iters / s, sum);
    return 0;
}
