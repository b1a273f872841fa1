# The first lines of every emulated guest's script (tests/it/common/vng.rs,
# bench/topology-must-show.sh): one task holds perf's software events for the whole boot, so
# costlab's opens and closes never flip the kernel's static keys (vng.rs says why that matters
# under TCG). Waits at most 60 s for the holder to start.
perf stat -e context-switches,cpu-migrations,page-faults -o /dev/null -- sleep 100000 &
n=0; until pgrep -f '^sleep 100000$' >/dev/null || [ $n -ge 300 ]; do sleep 0.2; n=$((n+1)); done
