/* getppid in a loop for SECONDS (argv[1], 2 by default): prints the calls per second.
 * bench/price-others.sh runs it in a cgroup of its own, beside a price or not. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long calls = 0;
    double el = 0;
    do {
        for (int i = 0; i < 10000; i++)
            syscall(SYS_getppid);
        calls += 10000;
        clock_gettime(CLOCK_MONOTONIC, &t);
        el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
    } while (el < secs);
    printf("%.0f\n", calls / el);
    return 0;
}
