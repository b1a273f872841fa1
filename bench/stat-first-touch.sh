#!/usr/bin/env bash
# How many of a program's stats by path are first touches of their inode, and how many are
# repeats (docs/src/price.md: why a walker's stats read low). bpftrace reads st_ino from each
# successful newfstatat's result buffer at its exit and keeps a set for the run; stats by fd
# (AT_EMPTY_PATH, glibc's fstat) are counted apart. The inode alone is the key: two file
# systems' equal inode numbers count once (a walk with -xdev stays on one).
#   bash bench/stat-first-touch.sh du -s /usr/lib
#   bash bench/stat-first-touch.sh find /usr -xdev -type f
# Needs root and bpftrace (0.17 or later). Prints: stats by path, by fd, first touches,
# repeats.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: stat-first-touch.sh COMMAND [ARGS]" >&2; exit 2; }
exe=$(command -v "$1") || { echo "stat-first-touch: no such command '$1'" >&2; exit 2; }
comm=$(basename "$exe" | cut -c1-15)
shift
# shellcheck disable=SC2016 # the $ are bpftrace's
prog='
tracepoint:syscalls:sys_enter_newfstatat /comm == str($1)/ {
    @buf[tid] = (uint64)args->statbuf; @flag[tid] = args->flag;
}
tracepoint:syscalls:sys_exit_newfstatat /@buf[tid]/ {
    if (args->ret == 0) {
        if (@flag[tid] & 0x1000) { @by_fd = count(); }
        else {
            @by_path = count();
            $ino = *(uint64 *)uptr(@buf[tid] + 8);
            if (@seen[$ino]) { @repeats = count(); } else { @first = count(); @seen[$ino] = 1; }
        }
    }
    delete(@buf[tid]); delete(@flag[tid]);
}
END { clear(@buf); clear(@flag); clear(@seen); }'
BPFTRACE_MAP_KEYS_MAX=${KEYS:-1000000} bpftrace -e "$prog" "$comm" -c "$exe $*" 2>/dev/null |
    awk '/^@(by_path|by_fd|first|repeats):/ { sub(":", "", $1); printf "%s %s  ", substr($1, 2), $2 } END { print "" }'
