#!/usr/bin/env bash
# What the check before the work costs on a big history (issue 44): a history of RUNS copies
# of the fixture run (2000 by default, about 100 MB), then `PRAGMA quick_check` (what costlab
# runs before measuring or importing) beside `PRAGMA integrity_check`, and `costlab import` of
# one more run (open, check, store) beside the same import into a small history, each ROUNDS
# times (5). Needs the sqlite3 command. Run on a quiet machine after `cargo build --release`.
#
#   bench/history-probe.sh
#   RUNS=5000 bench/history-probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/costlab}
RUNS=${RUNS:-2000}
ROUNDS=${ROUNDS:-5}
command -v sqlite3 >/dev/null || { echo "history-probe: needs sqlite3 (apt-get install sqlite3)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "history-probe: no $BIN: cargo build --release first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fixture=tests/fixtures/results-fixture-all-labs.json
"$BIN" --db "$dir/small.db" import "$fixture" >/dev/null
cp "$dir/small.db" "$dir/big.db"
sqlite3 "$dir/big.db" "
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $RUNS)
INSERT INTO runs SELECT id || '-' || i, started, costlab, command, machine, machine_summary,
    complete, machine_id FROM runs, n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $RUNS)
INSERT INTO results SELECT run_id || '-' || i, seq, lab, figure_id, case_json, metric, unit,
    summary, samples, counters, unsupported_counters, verdict FROM results, n;"
printf 'big history: %d runs, %d MB\n' "$((RUNS + 1))" "$(( $(stat -c %s "$dir/big.db") / 1000000 ))"
ms() { local s; s=$(date +%s%N); "$@" >/dev/null; echo $(( ($(date +%s%N) - s) / 1000000 )); }
for i in $(seq "$ROUNDS"); do
    q=$(ms sqlite3 "$dir/big.db" "PRAGMA quick_check(1)")
    g=$(ms sqlite3 "$dir/big.db" "PRAGMA integrity_check(1)")
    # A run id not yet present each round: the import stores, as a lab's run would.
    sed "s/20261122T100000Z-f1x7e0/20261122T100000Z-bench$i/" "$fixture" >"$dir/run.json"
    b=$(ms "$BIN" --db "$dir/big.db" import "$dir/run.json")
    s=$(ms "$BIN" --db "$dir/small.db" import "$dir/run.json")
    printf 'round %d: quick_check %d ms, integrity_check %d ms; import into the big history %d ms, into a small one %d ms\n' "$i" "$q" "$g" "$b" "$s"
done
