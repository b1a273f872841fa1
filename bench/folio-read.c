/* What a cached read costs by the size of the page-cache folios that hold the file (issue 42:
 * the file-read term reads a file written 1 MiB a call, held in large folios; a program's small
 * files are held in small ones). For each write size, a 128 MiB file is written that many bytes
 * a call (a write's folio is as large as the write, up to the file system's largest), then read
 * in 64 KiB preads from start to end, three times; the best pass is printed, per call and per
 * 4 KiB page. The file is twice to four times a server CPU's last-level cache, so the data comes
 * from memory each pass. Run it quietly, as any user, in a directory on the file system to
 * measure (default the working directory):
 *   cc -O2 -o /tmp/folio-read bench/folio-read.c && /tmp/folio-read [DIR]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    const size_t span = 128u << 20, call = 65536;
    const size_t sizes[] = {4096, 8192, 16384, 65536, 1u << 20};
    char path[4096];
    snprintf(path, sizeof path, "%s/costlab-folio-read.%d", argc > 1 ? argv[1] : ".", (int)getpid());
    char *data = malloc(1u << 20), *buf = aligned_alloc(4096, call);
    if (!data || !buf) return 1;
    for (size_t i = 0; i < 1u << 20; i++) data[i] = (char)i;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) { perror(path); return 2; }
        unlink(path);
        for (size_t at = 0; at < span; at += sizes[k])
            if (write(fd, data, sizes[k]) != (ssize_t)sizes[k]) { perror("write"); return 1; }
        double best = 1e18;
        for (int pass = 0; pass < 3; pass++) {
            double t0 = now_ns();
            for (size_t at = 0; at < span; at += call)
                if (pread(fd, buf, call, at) != (ssize_t)call) { perror("pread"); return 1; }
            double per = (now_ns() - t0) / (span / call);
            if (per < best) best = per;
        }
        printf("written %7zu bytes a call: a 64 KiB read %6.0f ns, %4.0f ns a page\n", sizes[k], best, best / 16);
        close(fd);
    }
    return 0;
}
