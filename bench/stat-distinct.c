// Why a walker's stats read low in a price: a stat of the same file again and again (what the
// `stat` cost term times) against a stat of each of many files once a pass (what du, find and
// ls -lR make), on the same tree, in the same process. bench/stat-distinct.sh builds and runs it.
//
//   stat-distinct ROOT DIRS FILES make    creates ROOT/d0..d{DIRS-1}, FILES empty files each
//   stat-distinct ROOT DIRS FILES PASSES  then times PASSES passes over that tree
//
// A pass opens no file: for each directory (its fd opened once, before the passes) it reads
// the entries (getdents64, 32 KiB a call), then stats each listed name once by the
// directory's fd (fstatat with AT_SYMLINK_NOFOLLOW, as du does), then stats the first name
// as many times again (the same file, hot). Each batch is timed as a whole by
// CLOCK_MONOTONIC (the clock's own cost is one read a batch, not a read a call). One line a
// pass: ns a stat of distinct files, ns a stat of the same file, ns a getdents64 call and
// ns an entry it returned (the calls' time over the entries, . and .. among them).
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int make(const char *root, int dirs, int files) {
    char p[4096];
    if (mkdir(root, 0755) != 0) {
        perror(root);
        return 1;
    }
    for (int d = 0; d < dirs; d++) {
        snprintf(p, sizeof p, "%s/d%d", root, d);
        if (mkdir(p, 0755) != 0) {
            perror(p);
            return 1;
        }
        for (int f = 0; f < files; f++) {
            snprintf(p, sizeof p, "%s/d%d/file-%06d.txt", root, d, f);
            int fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0644);
            if (fd < 0) {
                perror(p);
                return 1;
            }
            close(fd);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: stat-distinct ROOT DIRS FILES make|PASSES\n");
        return 2;
    }
    const char *root = argv[1];
    int dirs = atoi(argv[2]), files = atoi(argv[3]);
    if (dirs < 1 || files < 1) {
        fprintf(stderr, "stat-distinct: DIRS and FILES must be whole numbers above zero\n");
        return 2;
    }
    if (strcmp(argv[4], "make") == 0)
        return make(root, dirs, files);
    int passes = atoi(argv[4]);
    int *dfd = malloc(sizeof(int) * dirs);
    char (*names)[64] = malloc(sizeof(*names) * (files + 2));
    char buf[32768], p[4096];
    for (int d = 0; d < dirs; d++) {
        snprintf(p, sizeof p, "%s/d%d", root, d);
        dfd[d] = open(p, O_RDONLY | O_DIRECTORY);
        if (dfd[d] < 0) {
            perror(p);
            return 1;
        }
    }
    struct stat st;
    for (int pass = 0; pass < passes; pass++) {
        double t_dents = 0, t_distinct = 0, t_same = 0;
        long calls = 0, entries = 0, stats = 0;
        for (int d = 0; d < dirs; d++) {
            int n = 0;
            lseek(dfd[d], 0, SEEK_SET);
            for (;;) {
                double a = now_ns();
                long got = syscall(SYS_getdents64, dfd[d], buf, sizeof buf);
                t_dents += now_ns() - a;
                calls++;
                if (got <= 0)
                    break;
                for (long o = 0; o < got;) {
                    struct dirent64 *e = (struct dirent64 *)(buf + o);
                    o += e->d_reclen;
                    entries++;
                    if (e->d_name[0] != '.' && n < files + 2)
                        snprintf(names[n++], 64, "%s", e->d_name);
                }
            }
            double a = now_ns();
            for (int i = 0; i < n; i++)
                fstatat(dfd[d], names[i], &st, AT_SYMLINK_NOFOLLOW);
            t_distinct += now_ns() - a;
            a = now_ns();
            for (int i = 0; i < n; i++)
                fstatat(dfd[d], names[0], &st, AT_SYMLINK_NOFOLLOW);
            t_same += now_ns() - a;
            stats += n;
        }
        printf("files %d distinct %.0f same %.0f getdents64_call %.0f entry %.1f\n",
               dirs * files, t_distinct / stats, t_same / stats, t_dents / calls,
               t_dents / entries);
    }
    return 0;
}
