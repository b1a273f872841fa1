#!/usr/bin/env bash
# Run the memory lab's headline figures twice and print each median beside its rerun and the
# difference (the lab's claim: within 5% on a quiet machine). About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jq >/dev/null 2>&1 || { apt-get update && apt-get install -y jq; }
cargo build --release -q
COSTLAB=target/release/costlab
run() {
    "$COSTLAB" mem latency --sizes 1G --pages 4k,thp --json - 2>/dev/null |
        jq -r '.results[] | select(.metric=="latency" and .case.level==null) | "latency chase \(.case.pages) 1G ns \(.summary.median)"'
    "$COSTLAB" mem bandwidth --case read,write --sizes 1G --pages 4k --json - 2>/dev/null |
        jq -r '.results[] | "seq \(.case.op) \(.case.pages) 1G GB/s \(.summary.median)"'
}
a=$(run)
b=$(run)
paste <(echo "$a") <(echo "$b" | awk '{print $NF}') |
    awk '{d = ($NF - $(NF-1)) / $(NF-1) * 100; printf "%-28s %10.2f %10.2f %+6.1f%%\n", $1" "$2" "$3" "$4" "$5, $(NF-1), $NF, d}'
