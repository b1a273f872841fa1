/* An echo load generator that shares no code with costlab, for bench/echo-uring-sizes.sh: one
 * thread per connection, each a blocking ping-pong loop (write a message of SIZE bytes, read
 * SIZE bytes back, again), as the simplest client of a request/response server does.
 *
 *   pingpong HOST PORT CONNS SIZE WARMUP_S SECONDS [CPU]
 *
 * All connections are opened (TCP_NODELAY) before any thread sends. The threads run WARMUP_S
 * seconds, then the requests echoed over the next SECONDS are counted (a request counts when
 * its last byte is back) and the loop stops. Each echo is checked byte for byte against what
 * was sent (a pattern that changes per request), so a server that answers wrong fails here.
 * With CPU, every thread runs on that CPU. Prints one line:
 *   req_per_s=N conns=C size=B requests=R seconds=S errors=E sleeps=V cpu_s=T conn_min=A conn_max=Z
 * (V and T: the loader's voluntary context switches and CPU seconds, whole run; A and Z: the
 * fewest and most requests one connection had echoed in the counted window)
 * and exits 1 when any connection failed or echoed wrong bytes. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { WARMING, COUNTING, STOPPED };

static atomic_int phase = WARMING;
static atomic_int started;
static atomic_int go;
static size_t size;

struct conn {
    pthread_t th;
    int fd;
    uint64_t counted;
    int error;
};

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void *run(void *arg)
{
    struct conn *c = arg;
    unsigned char *out = malloc(size), *in = malloc(size);
    if (!out || !in) {
        c->error = 1;
        return NULL;
    }
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&go))
        sched_yield();
    for (uint64_t req = 0;; req++) {
        int ph = atomic_load_explicit(&phase, memory_order_relaxed);
        if (ph == STOPPED)
            break;
        /* The first and last bytes change with every request: a stale or shifted echo shows. */
        memset(out, (int)(req * 31 + (uintptr_t)c) & 0xff, size);
        out[0] = (unsigned char)req;
        out[size - 1] = (unsigned char)(req >> 8);
        if (write_all(c->fd, out, size) || read_all(c->fd, in, size)) {
            /* After the stop, main's shutdown ends a request half done: not an error. */
            if (atomic_load(&phase) != STOPPED)
                c->error = 1;
            break;
        }
        if (memcmp(out, in, size) != 0) {
            c->error = 2;
            break;
        }
        if (ph == COUNTING)
            c->counted++;
    }
    free(out);
    free(in);
    return NULL;
}

static double cpu_of(const struct rusage *r)
{
    return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec / 1e6 +
           (double)r->ru_stime.tv_sec + (double)r->ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: pingpong HOST PORT CONNS SIZE WARMUP_S SECONDS [CPU]\n");
        return 2;
    }
    int conns = atoi(argv[3]);
    size = (size_t)strtoul(argv[4], NULL, 10);
    double warm = atof(argv[5]), secs = atof(argv[6]);
    if (conns < 1 || size < 2 || warm < 0 || secs <= 0) {
        fprintf(stderr, "pingpong: CONNS >= 1, SIZE >= 2, WARMUP_S >= 0, SECONDS > 0\n");
        return 2;
    }
    if (argc == 8) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[7]), &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            perror("pingpong: sched_setaffinity");
            return 2;
        }
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "pingpong: HOST must be an IPv4 address, not '%s'\n", argv[1]);
        return 2;
    }
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    if (!cs)
        return 1;
    for (int i = 0; i < conns; i++) {
        cs[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(cs[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (cs[i].fd < 0 || connect(cs[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            perror("pingpong: connect");
            return 1;
        }
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < conns; i++) {
        if (pthread_create(&cs[i].th, &attr, run, &cs[i]) != 0) {
            fprintf(stderr, "pingpong: cannot start thread %d of %d\n", i + 1, conns);
            return 1;
        }
    }
    while (atomic_load(&started) < conns)
        sleep_s(0.001);
    atomic_store(&go, 1);
    sleep_s(warm);
    struct rusage ru0, ru;
    getrusage(RUSAGE_SELF, &ru0);
    atomic_store(&phase, COUNTING);
    double t0 = now_s();
    sleep_s(secs);
    atomic_store(&phase, STOPPED);
    double t = now_s() - t0;
    getrusage(RUSAGE_SELF, &ru);
    /* The loader's CPU inside the counted window, over the CPUs it may use: near 1, the
       loader and not the server sets the pace. */
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    double cpu = cpu_of(&ru) - cpu_of(&ru0);
    /* Unblock threads waiting in read: the server sees EOF, ends its echo, closes. */
    for (int i = 0; i < conns; i++)
        shutdown(cs[i].fd, SHUT_WR);
    uint64_t total = 0, least = UINT64_MAX, most = 0;
    int errors = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(cs[i].th, NULL);
        total += cs[i].counted;
        least = cs[i].counted < least ? cs[i].counted : least;
        most = cs[i].counted > most ? cs[i].counted : most;
        errors += cs[i].error != 0;
        close(cs[i].fd);
    }
    printf("req_per_s=%.0f conns=%d size=%zu requests=%llu seconds=%.3f errors=%d sleeps=%ld "
           "cpu_s=%.3f busy=%.3f conn_min=%llu conn_max=%llu\n",
           (double)total / t, conns, size, (unsigned long long)total, t, errors,
           ru.ru_nvcsw - ru0.ru_nvcsw, cpu, cpu / t / ncpu, (unsigned long long)least,
           (unsigned long long)most);
    return errors ? 1 : 0;
}
